"""Which instance runs a session's turns, when several share one PostgreSQL database.

``accept`` stores a message as the session's owner's (gateway/cluster/leases.py decides, under the lease's row
lock); when that is this instance, it dispatches every unfinished row of the session it has not dispatched
yet, oldest first — a message another instance stored for us a moment earlier included, so arrival order
holds across instances. When another instance owns the session, that one was woken by ``pg_notify`` on
commit; here nothing more happens (its commands, ``/stop`` and ``/new`` included, run there too).

A woken owner reads its rows of the session (``pull``); a poll every few seconds finds rows whose wake-up
was lost. A row is dispatched once per process (``Lanes.dispatched``, pruned once the row is finished).
Leases are renewed every ``RENEW_SECONDS`` and given up when a session has been idle ``LINGER_SECONDS``
(until then its next message stays here, where its caches are warm).

With SQLite there is one instance: ``enabled`` is False and nothing here runs.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import structlog

from gateway.cluster.bus import LocalBus
from gateway.cluster.instance import Instance, process_gone
from gateway.cluster.leases import Taken, op_accept, op_expire_all, op_release, op_renew, op_rows, op_take_over
from gateway.commands.registry import CommandRegistry
from gateway.inbound.dispatch import Dispatch
from gateway.inbound.recovery import command_of, drop_command
from gateway.kernel.metrics import Counters
from gateway.platforms.base import Accepted, InboundMessage, PlatformAdapter
from gateway.ports import Adapters, Lifecycle, Notifier
from gateway.storage.store import Store
from gateway.turns.attempts import Attempts
from gateway.turns.lanes import Lanes

log = structlog.get_logger("herald.routing")

RENEW_SECONDS = 10.0
LINGER_SECONDS = 60.0
POLL_SECONDS = 2.0
POLL_SECONDS_UNHEARD = 0.5  # while the bus is down, wake-ups are not heard: poll more often


class SessionRouter:
    def __init__(self, store: Store, instance: Instance, bus: LocalBus, lanes: Lanes, dispatch: Dispatch,
                 adapters: Adapters, commands: CommandRegistry, notifier: Notifier, life: Lifecycle,
                 forget: Callable[[str], None], counters: Counters | None = None, *,
                 attempts: Attempts | None = None) -> None:
        """``dispatch``: how a row of ours reaches its session (dispatch.py); ``lanes`` were built ``routed``
        when ``bus`` is enabled, so they keep the rows dispatched here (``Lanes.dispatched``)."""
        self.store = store
        self.instance = instance
        self.bus = bus
        self.lanes = lanes
        self.dispatch = dispatch
        self.adapters = adapters
        self.commands = commands
        self.notifier = notifier
        self.life = life
        self.forget = forget  # a session's caches, when its lease comes back to us from another instance
        self.enabled = bus.enabled
        self.counters = counters if counters is not None else Counters()
        # A row whose turns kept taking an instance down is parked, not dispatched (gateway/turns/attempts.py).
        self.attempts = attempts
        self.held: dict[str, float] = {}  # session keys whose lease we hold -> last activity
        self._busy_keys: set[str] = set()  # sessions with unfinished rows of ours, as of the last poll
        if self.enabled:
            bus.on("inbox", self._woken)
            bus.on_reconnect(lambda: self.life.spawn(self.poll(), name="routing:resync"))

    # ---- accept ------------------------------------------------------------------------------------

    async def accept(self, adapter: PlatformAdapter, msg: InboundMessage, key: str,
                     row: dict[str, Any]) -> Accepted | None:
        """Store ``msg`` (None for a duplicate) as its session owner's; dispatch here when that is us."""
        from gateway.storage.db import is_unique_violation

        try:
            # Only a lease that ran out, or whose owner is a process of this machine that no longer runs: the
            # heartbeats known here may be older than an instance that started a moment ago.
            taken: Taken = await self.store.run_write(op_accept(key, row, self.instance.id,
                                                                lambda owner, _until: process_gone(owner)),
                                                        wait=False)
        except Exception as exc:
            if is_unique_violation(exc):
                return None
            raise
        assert taken.inbox_id is not None
        item = Accepted(taken.inbox_id, msg, key, self.commands.resolve(msg.command))
        if taken.owner == self.instance.id:
            self._take(key, taken, fresh=item)
        else:
            self.counters.messages_routed += 1
            log.debug("routed", session_key=key, owner=taken.owner, inbox_id=taken.inbox_id)
        return item

    def _may_take(self, owner: str | None, lease_until: float) -> bool:
        """After ``Instance.refresh`` (recovery reads the heartbeats right before): any gone owner."""
        return self.instance.gone(owner, lease_until)

    # ---- dispatching what we own ---------------------------------------------------------------------

    def _take(self, key: str, taken: Taken, fresh: Accepted | None = None) -> None:
        """Dispatch the session's rows not dispatched yet, oldest first (synchronous: no row twice)."""
        assert self.lanes.dispatched is not None
        if key not in self.held or taken.taken_from not in (None, self.instance.id):
            self.forget(key)  # another instance may have run the session meanwhile
        self.held[key] = time.monotonic()
        for n, row in enumerate(taken.rows):
            if row["id"] in self.lanes.dispatched:
                continue
            adapter = self.adapters.get(row["platform"])
            if adapter is None:
                log.warning("routed_platform_missing", platform=row["platform"], inbox_id=row["id"])
                continue
            if self.attempts is not None and self.attempts.exhausted(row):
                # The session's later rows wait for the park: parking hides what the message's turns stored,
                # and a later turn that read the history first would hand the model the message again.
                later = [r for r in taken.rows[n + 1:] if r["id"] not in self.lanes.dispatched]
                self.lanes.dispatched.update([row["id"], *(r["id"] for r in later)])
                self.life.spawn(self._park_then(key, row, Taken(taken.owner, taken.inbox_id, later, taken.adopted,
                                                                 taken.taken_from), fresh), name="routing:park")
                return
            row["adopted"] = row["id"] in taken.adopted
            item = fresh if fresh is not None and fresh.inbox_id == row["id"] else self._item(row)
            if item is None:
                self.lanes.dispatched.add(row["id"])
                self.life.spawn(self._cut(row), name="routing:cut")
                continue
            if row["adopted"]:
                # Taken over from an instance that is gone: no "queued" notices, as on recovery.
                if item.command is None:
                    self.lanes.submit(adapter, item, notify=False)
                else:
                    self.dispatch(adapter, item)
            else:
                self.dispatch(adapter, item)

    async def _park_then(self, key: str, row: dict[str, Any], later: Taken, fresh: Accepted | None) -> None:
        assert self.attempts is not None and self.lanes.dispatched is not None
        try:
            await self.attempts.park(row["id"], InboundMessage.from_dict(row["payload"]))
        finally:
            self.lanes.dispatched.difference_update(r["id"] for r in later.rows)
            self._take(key, later, fresh)

    def _item(self, row: dict[str, Any]) -> Accepted | None:
        """The row as an Accepted; None for a command that a gone instance left unfinished (it was about the
        moment it was sent: it is not replayed)."""
        msg = InboundMessage.from_dict(row["payload"])
        if row["status"] == "replied" and row["reply"] is not None:
            return Accepted(row["id"], msg, row["session_key"], resume_reply=row["reply"])
        command = command_of(msg, False, self.commands)
        if command is not None:
            return None if row.get("adopted") else Accepted(row["id"], msg, row["session_key"], command)
        return Accepted(row["id"], msg, row["session_key"], resume_turn=bool(row.get("has_steps")))

    async def _cut(self, row: dict[str, Any]) -> None:
        msg = InboundMessage.from_dict(row["payload"])
        adapter = self.adapters.get(row["platform"])
        command = command_of(msg, False, self.commands)
        if adapter is not None and command is not None:
            await drop_command(self.store, self.notifier, adapter, row["id"], msg, command)

    def _woken(self, key: str) -> None:
        self.life.spawn(self.pull(key), name="routing:pull")

    async def pull(self, key: str) -> None:
        rows = await self.store.run_read(op_rows(self.instance.id, key))
        if rows:
            self._take(key, Taken(self.instance.id, rows=rows))

    async def poll(self) -> None:
        """Every unfinished row of ours: dispatch what was not (a lost wake-up), forget what is finished."""
        dispatched = self.lanes.dispatched
        assert dispatched is not None
        before = set(dispatched)
        rows = await self.store.run_read(op_rows(self.instance.id))
        unfinished = {r["id"] for r in rows}
        dispatched.difference_update(before - unfinished)
        by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            if row["id"] not in dispatched:
                by_key[row["session_key"]].append(row)
        for key, key_rows in by_key.items():
            log.info("routed_rows_found", session_key=key, rows=len(key_rows))
            self._take(key, Taken(self.instance.id, rows=key_rows))
        self._busy_keys = {r["session_key"] for r in rows}

    # ---- recovery: rows of an instance that is gone ----------------------------------------------------

    async def take_over(self, key: str, gone_owner: str | None) -> int:
        """The unfinished rows of session ``key`` left by ``gone_owner``: ours to dispatch (adopted), or
        handed to the session's live owner. Returns how many were dispatched here."""
        taken: Taken = await self.store.run_write(op_take_over(key, gone_owner, self.instance.id, self._may_take))
        if taken.owner != self.instance.id:
            log.info("recovered_rows_handed_over", session_key=key, owner=taken.owner)
            return 0
        before = len(self.lanes.dispatched or ())
        self._take(key, taken)
        return len(self.lanes.dispatched or ()) - before

    # ---- upkeep ---------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Poll for rows whose wake-up was lost; renew our leases; give up those of idle sessions."""
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(POLL_SECONDS if self.bus.connected else POLL_SECONDS_UNHEARD)
            try:
                await self.poll()
                if time.monotonic() - renewed >= RENEW_SECONDS:
                    renewed = time.monotonic()
                    await self.store.run_write(op_renew(self.instance.id))
                    await self._release_idle()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("routing_upkeep_failed", error=f"{type(exc).__name__}: {exc}")

    async def _release_idle(self) -> None:
        now = time.monotonic()
        for key, last in list(self.held.items()):
            if now - last < LINGER_SECONDS or key in self._busy_keys or self.lanes.lane(key) is not None:
                continue
            if await self.store.run_write(op_release(key, self.instance.id)):
                self.held.pop(key, None)

    async def stop(self) -> None:
        """Shutdown: our leases may be taken at once (whoever takes one adopts what we leave unfinished)."""
        if self.enabled:
            await self.store.run_write(op_expire_all(self.instance.id))
            self.held.clear()
