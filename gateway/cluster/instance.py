"""This daemon among others on the same database: its id, its heartbeat, its leases, and who is gone.

Several Herald processes may share one PostgreSQL database (or, briefly, one SQLite file across a
restart). Work that must be finished by someone — an inbox row, a pending approval — carries the id of
the instance doing it (``host:pid:process-start:nonce``). The instance renews a heartbeat row and the
leases of its rows every ``RENEW_SECONDS``; another instance takes such work over only when its owner is
gone: a process of this machine that no longer runs — or whose pid now belongs to another process (a
container restarted with the same pid), told apart by the process's start time — known at once, so a
restart resumes without waiting; or an owner whose heartbeat or lease is older than ``LEASE_SECONDS``
(another machine that died, or an instance that stopped inside a process that lives on).
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog
from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from gateway.storage.store import Store
from gateway.storage.tables import instances

log = structlog.get_logger("herald.instance")

LEASE_SECONDS = 30.0
RENEW_SECONDS = 10.0


def process_start(pid: int) -> str:
    """The process's start time (clock ticks since boot) from /proc; "" where that can't be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # The command name (field 2) may contain spaces and parentheses: count from the last ")".
    fields = stat[stat.rfind(")") + 2:].split()
    return fields[19] if len(fields) > 19 else ""


def process_gone(owner: str | None) -> bool:
    """True when ``owner`` names a process of this machine that no longer runs."""
    if not owner:
        return True
    host, pid, started, *_ = [*owner.split(":"), "", "", ""][:4]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return bool(started) and started != process_start(int(pid))


class Instance:
    def __init__(self, store: Store, profile: str, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self.started_at = clock()
        self.host = socket.gethostname()
        # Unique among instances in one process too (tests run several): the last part is random.
        self.id = f"{self.host}:{os.getpid()}:{process_start(os.getpid())}:{secrets.token_hex(4)}"
        self.profile = profile
        self._heartbeats: dict[str, float] = {}

    def lease(self) -> float:
        """The lease end for work taken now."""
        return self.clock() + LEASE_SECONDS

    async def register(self) -> None:
        now = self.clock()
        row = {"id": self.id, "host": self.host, "pid": os.getpid(), "profile": self.profile, "started_at": now,
               "heartbeat_at": now}
        stale = now - 24 * 3600

        def op(conn: Connection) -> None:
            conn.execute(delete(instances).where(instances.c.heartbeat_at < stale))
            conn.execute(insert(instances).values(**row))

        await self.store.run_write(op)

    async def renew(self) -> None:
        """Heartbeat and leases, in one go; then refresh what we know of the others."""
        now = self.clock()
        await self.store.run_write(lambda conn: conn.execute(
            update(instances).where(instances.c.id == self.id).values(heartbeat_at=now)))
        await self.store.inbox.renew(self.id, now + LEASE_SECONDS)
        await self.refresh()

    async def refresh(self) -> None:
        """Read the others' heartbeats. Call it after reading the rows whose owners ``gone`` will judge: an
        instance registers before it owns anything, so every owner of those rows is in this read."""
        rows = await self.store.run_read(
            lambda conn: [tuple(r) for r in conn.execute(select(instances.c.id, instances.c.heartbeat_at))])
        self._heartbeats = dict(rows)

    async def unregister(self) -> None:
        await self.store.run_write(lambda conn: conn.execute(delete(instances).where(instances.c.id == self.id)))

    def gone(self, owner: str | None, lease_until: float | None = None) -> bool:
        """May work owned by ``owner`` (leased until ``lease_until``) be taken over now?"""
        if owner == self.id:
            return False
        if owner is None or process_gone(owner):
            return True
        now = self.clock()
        if lease_until is not None and lease_until < now:
            return True
        beat = self._heartbeats.get(owner)
        # No heartbeat row: the instance stopped (it removes its row) or died long ago (rows are pruned).
        return beat is None or beat < now - LEASE_SECONDS

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "started_at": self.started_at}
