"""Keeping adapters up: each one is started under its credential locks, restarted with backoff when its
connection dies or it fails to connect, while the others keep running. Once connected, what the adapter's
platform left unfinished is recovered (gateway/inbound/recovery.py), then again every few seconds in case another
instance dies."""

from __future__ import annotations

import asyncio
import random

import structlog

from gateway.cluster.instance import RENEW_SECONDS, Instance
from gateway.cluster.locks import CredentialLocked, CredentialLocks, LockDatabaseDown
from gateway.inbound.recovery import Recovery
from gateway.platforms.base import PlatformAdapter
from gateway.ports import Adapters, Lifecycle

log = structlog.get_logger("herald.supervisor")


class Supervisor:
    lock_retry_seconds = 3.0  # most time between retries while another process holds a credential
    db_retry_seconds = 4.0  # ... while the database holding the credential locks is unavailable

    def __init__(self, adapters: Adapters, locks: CredentialLocks, recovery: Recovery, instance: Instance,
                 life: Lifecycle) -> None:
        self.adapters = adapters
        self.locks = locks
        self.recovery = recovery
        self.instance = instance
        self.life = life
        # Set once each adapter's first connection attempt has ended, either way (systemd's READY waits for it).
        self._attempted: dict[str, asyncio.Event] = {}

    def start(self) -> None:
        for adapter in self.adapters.values():
            self._attempted.setdefault(adapter.name, asyncio.Event())
            self.life.spawn(self.supervise(adapter), name=f"adapter:{adapter.name}")
        self.life.spawn(self._upkeep(), name="instance:upkeep")

    async def supervise(self, adapter: PlatformAdapter) -> None:
        delay = 1.0
        while not self.life.stopping:
            adapter.state = "starting"
            try:
                # Its credentials' locks first: a second process driving the same bot would steal its updates.
                await self.locks.acquire(adapter.name, adapter.credentials(), adapter.exclusive_credentials())
                self.recovery.hold(adapter)
                await adapter.start()
                self._attempted_once(adapter)
                adapter.state, adapter.last_error, delay = "connected", None, 1.0
                log.info("adapter_connected", platform=adapter.name)
                self.life.spawn(self._recover(adapter), name=f"recover:{adapter.name}")
                await self.locks.watch(adapter.name, adapter.wait_closed())
                raise ConnectionError("connection closed")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._attempted_once(adapter)
                self.recovery.release(adapter)  # no recovery follows now: what it accepted runs
                if self.life.stopping:
                    return
                locked = isinstance(exc, CredentialLocked)
                adapter.state = "retrying"
                adapter.last_error = exc  # stored redacted, as "Kind: message" (PlatformAdapter.last_error)
                if locked:
                    # Retry soon: the holder may stop any moment, and this adapter should take over then.
                    delay = min(delay, self.lock_retry_seconds)
                log.warning("adapter_down", platform=adapter.name, error=adapter.last_error, retry_in=round(delay, 1))
                try:
                    await asyncio.wait_for(adapter.stop(), timeout=10)
                except Exception:
                    pass
                await self.locks.release(adapter.name)
                await asyncio.sleep(delay * (0.8 + random.random() * 0.4))
                # The lock's database down: back within seconds of it, not after a backoff grown through the
                # outage (deliveries to this platform give up meanwhile).
                cap = self.lock_retry_seconds if locked else self.db_retry_seconds if isinstance(
                    exc, LockDatabaseDown) else 300.0
                delay = min(delay * 2, cap)

    def _attempted_once(self, adapter: PlatformAdapter) -> None:
        self._attempted.setdefault(adapter.name, asyncio.Event()).set()

    async def first_attempts(self, timeout: float) -> list[str]:
        """Wait (at most ``timeout``) until every adapter has tried to connect once; the names still trying."""
        events = {name: self._attempted.setdefault(name, asyncio.Event()) for name in self.adapters}
        waits = [asyncio.ensure_future(e.wait()) for e in events.values() if not e.is_set()]
        if waits:
            _, pending = await asyncio.wait(waits, timeout=timeout)
            for w in pending:
                w.cancel()
        return [name for name, e in events.items() if not e.is_set()]

    async def _recover(self, adapter: PlatformAdapter) -> None:
        try:
            await self.recovery.first_recovery(adapter)
        except Exception:
            log.exception("recovery_failed", platform=adapter.name)

    async def _upkeep(self) -> None:
        """Renew this instance's heartbeat and leases; take over what gone instances left."""
        while True:
            await asyncio.sleep(RENEW_SECONDS)
            try:
                await self.instance.renew()
                for adapter in self.adapters.values():
                    if adapter.state == "connected":
                        await self.recovery.recover(adapter)
            except Exception:
                log.exception("instance_upkeep_failed")

    async def stop(self) -> None:
        for adapter in self.adapters.values():
            try:
                await asyncio.wait_for(adapter.stop(), timeout=10)
            except Exception as exc:
                log.warning("adapter_stop_failed", platform=adapter.name, error=str(exc))
            await self.locks.release(adapter.name)
