"""Wake-ups between Herald instances that share one PostgreSQL database: LISTEN/NOTIFY.

Each instance listens on a channel of its own (work routed to it: a message for a session it owns, an
approval decided on another instance) and on one channel every instance hears (events all may want: a web
chat message for the event streams their clients hold open). A notification is only a wake-up: what it
names is in the database, so one that is lost (the listening connection dropped) costs latency, never a
message — the session router also polls. On SQLite there is one instance and ``LocalBus`` delivers
nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
from collections.abc import Callable
from typing import Any

import structlog

log = structlog.get_logger("herald.bus")

BROADCAST = "herald_all"
SEP = "\x1f"  # kind SEP data: never in a kind, and payloads are ids and JSON
Handler = Callable[[str], None]
MAX_PAYLOAD = 7900  # PostgreSQL refuses notifications of 8000 bytes and more


def channel_of(instance_id: str) -> str:
    """The channel an instance listens on (an identifier of at most 63 characters)."""
    return "herald_" + hashlib.sha256(instance_id.encode()).hexdigest()[:24]


def pack(kind: str, data: str) -> str:
    return f"{kind}{SEP}{data}"


class LocalBus:
    """One instance: nothing to wake. ``publish`` runs the local handlers of a broadcast, so code that
    broadcasts needs no second path for a single daemon."""

    enabled = False

    def __init__(self) -> None:
        self._handlers: dict[str, list[Handler]] = {}
        self.connected = True

    def on(self, kind: str, handler: Handler) -> None:
        self._handlers.setdefault(kind, []).append(handler)

    def on_reconnect(self, handler: Callable[[], None]) -> None:
        return None

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def send(self, instance_id: str, kind: str, data: str) -> None:
        return None

    async def broadcast(self, kind: str, data: str) -> None:
        """Every instance's handlers for ``kind``, this one's included."""
        self._dispatch(pack(kind, data))

    def _dispatch(self, payload: str) -> None:
        kind, _, data = payload.partition(SEP)
        for handler in self._handlers.get(kind, ()):
            try:
                handler(data)
            except Exception:
                log.exception("bus_handler_failed", kind=kind)


class PgBus(LocalBus):
    """LISTEN on a dedicated asyncpg connection, reconnected with backoff; NOTIFY through it as well."""

    enabled = True

    def __init__(self, url: str, instance_id: str) -> None:
        super().__init__()
        self.dsn = asyncpg_dsn(url)
        self.channel = channel_of(instance_id)
        self.connected = False
        self._conn: Any = None
        self._task: asyncio.Task[None] | None = None
        self._reconnected: list[Callable[[], None]] = []
        self._send_lock = asyncio.Lock()

    def on_reconnect(self, handler: Callable[[], None]) -> None:
        """Called after every (re)connection: what was published meanwhile was missed, so look again."""
        self._reconnected.append(handler)

    async def start(self) -> None:
        ready = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._listen(ready), name="bus:listen")
        # The first connection within a few seconds, or go on without: the router polls meanwhile.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(ready), 5.0)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        await self._close()

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        self.connected = False
        if conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), 5)

    async def _listen(self, ready: asyncio.Future[None]) -> None:
        import asyncpg

        delay = 0.5
        while True:
            lost = asyncio.Event()
            try:
                conn = await asyncpg.connect(self.dsn, timeout=10)
                conn.add_termination_listener(lambda _conn, lost=lost: lost.set())
                for channel in (self.channel, BROADCAST):
                    await conn.add_listener(channel, self._on_notification)
                self._conn, self.connected, delay = conn, True, 0.5
                log.info("bus_listening", channel=self.channel)
                if not ready.done():
                    ready.set_result(None)
                for handler in self._reconnected:
                    handler()
                while not lost.is_set():
                    # A connection cut without a FIN is noticed by this ping, not by the listener.
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(lost.wait(), 15)
                    if not lost.is_set():
                        await asyncio.wait_for(conn.fetchval("SELECT 1"), 10)
                raise ConnectionError("the listening connection closed")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not ready.done():
                    ready.set_result(None)
                log.warning("bus_disconnected", error=f"{type(exc).__name__}: {exc}", retry_in=round(delay, 1))
                await self._close()
                await asyncio.sleep(delay * (0.8 + random.random() * 0.4))
                delay = min(delay * 2, 10.0)

    def _on_notification(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self._dispatch(payload)

    async def send(self, instance_id: str, kind: str, data: str) -> None:
        await self._notify(channel_of(instance_id), pack(kind, data))

    async def broadcast(self, kind: str, data: str) -> None:
        await self._notify(BROADCAST, pack(kind, data))

    async def _notify(self, channel: str, payload: str) -> None:
        if len(payload.encode()) > MAX_PAYLOAD:
            raise ValueError("bus payload too large: send a reference to a row instead")
        conn = self._conn
        if conn is None:
            log.info("bus_notify_skipped", channel=channel, reason="not connected")
            return
        try:
            async with self._send_lock:  # one connection: asyncpg runs one query at a time on it
                await asyncio.wait_for(conn.execute("SELECT pg_notify($1, $2)", channel, payload), 5)
        except Exception as exc:
            log.info("bus_notify_failed", channel=channel, error=f"{type(exc).__name__}: {exc}")


def asyncpg_dsn(url: str) -> str:
    """A SQLAlchemy URL (postgresql+asyncpg://…) as the DSN asyncpg itself takes."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def make_bus(url: str, instance_id: str) -> LocalBus:
    return PgBus(url, instance_id) if url.startswith("postgresql") else LocalBus()
