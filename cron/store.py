"""Cron state in the gateway's database: job definitions, run history, home chats.

The tables are declared in gateway/storage/tables.py with the rest, so ``Store.init`` creates them on SQLite and
PostgreSQL alike. Every operation is a synchronous function of a ``Connection``; ``CronStore`` runs them
through the daemon's ``Store`` (off the loop) or, for the CLI, through an engine of its own.

Exactly once: a due run is claimed by a conditional UPDATE of the job's ``next_run_at`` (only the
instance whose UPDATE matched the due time it read wins) and the run row's UNIQUE(job_id, due_at), both
in the transaction that creates the run row, before anything runs.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    and_,
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection

from gateway.storage.tables import approvals, cron_home_chats, cron_jobs, cron_runs


def new_job_id() -> str:
    return secrets.token_hex(4)


@dataclass
class Claim:
    run_id: int
    job: dict[str, Any]
    due_at: float
    trigger: str


# ---- operations (sync functions of a Connection) -------------------------------------------------


def op_insert_job(row: dict[str, Any]) -> Callable[[Connection], dict[str, Any]]:
    def op(conn: Connection) -> dict[str, Any]:
        conn.execute(insert(cron_jobs).values(**row))
        return row

    return op


def op_get_job(job_id: str) -> Callable[[Connection], dict[str, Any] | None]:
    def op(conn: Connection) -> dict[str, Any] | None:
        row = conn.execute(select(cron_jobs).where(cron_jobs.c.id == job_id)).first()
        return dict(row._mapping) if row else None

    return op


def op_list_jobs(conn: Connection) -> list[dict[str, Any]]:
    return [dict(r._mapping) for r in conn.execute(select(cron_jobs).order_by(cron_jobs.c.created_at))]


def op_update_job(job_id: str, values: dict[str, Any]) -> Callable[[Connection], bool]:
    def op(conn: Connection) -> bool:
        res = conn.execute(update(cron_jobs).where(cron_jobs.c.id == job_id)
                           .values(**values, updated_at=time.time()))
        return res.rowcount > 0

    return op


def op_remove_job(job_id: str) -> Callable[[Connection], bool]:
    def op(conn: Connection) -> bool:
        return conn.execute(delete(cron_jobs).where(cron_jobs.c.id == job_id)).rowcount > 0

    return op


def op_claim(job_id: str, expected_next: float, due_at: float, new_next: float | None, trigger: str,
             status: str, now: float, count_run: bool) -> Callable[[Connection], int | None]:
    """Move the job on from ``expected_next`` and create its run row; ``None`` if someone else did."""

    def op(conn: Connection) -> int | None:
        values: dict[str, Any] = {"next_run_at": new_next, "updated_at": now}
        if count_run:
            values["runs_done"] = cron_jobs.c.runs_done + 1
            values["last_run_at"] = due_at
        if new_next is None:
            values["enabled"] = False
        res = conn.execute(update(cron_jobs).where(and_(
            cron_jobs.c.id == job_id, cron_jobs.c.next_run_at == expected_next, cron_jobs.c.enabled.is_(True),
        )).values(**values))
        if res.rowcount != 1:
            return None
        return _insert_run(conn, job_id, due_at, trigger, status, now)

    return op


def op_claim_request(job_id: str, requested_at: float, now: float) -> Callable[[Connection], int | None]:
    """Take a `run ID` request (the first instance to clear it wins)."""

    def op(conn: Connection) -> int | None:
        res = conn.execute(update(cron_jobs).where(and_(
            cron_jobs.c.id == job_id, cron_jobs.c.run_requested_at == requested_at,
        )).values(run_requested_at=None, last_run_at=now, updated_at=now))
        if res.rowcount != 1:
            return None
        return _insert_run(conn, job_id, requested_at, "manual", "running", now)

    return op


def _insert_run(conn: Connection, job_id: str, due_at: float, trigger: str, status: str, now: float) -> int:
    res = conn.execute(insert(cron_runs).values(
        job_id=job_id, due_at=due_at, trigger=trigger, status=status, delivery_status="pending",
        delivery_attempts=0, started_at=now if status == "running" else None,
        finished_at=None if status == "running" else now,
    ))
    return int(res.inserted_primary_key[0])


def op_update_run(run_id: int, values: dict[str, Any], job_id: str | None = None,
                  job_status: str | None = None) -> Callable[[Connection], None]:
    def op(conn: Connection) -> None:
        conn.execute(update(cron_runs).where(cron_runs.c.id == run_id).values(**values))
        if job_id is not None and job_status is not None:
            conn.execute(update(cron_jobs).where(cron_jobs.c.id == job_id).values(last_status=job_status))

    return op


def op_update_delivery(run_id: int, owner: str, values: dict[str, Any]) -> Callable[[Connection], bool]:
    """Change a run's delivery only while ``owner`` holds it (False: another instance took it over)."""

    def op(conn: Connection) -> bool:
        stmt = update(cron_runs).where(and_(cron_runs.c.id == run_id, cron_runs.c.delivery_owner == owner))
        return bool(conn.execute(stmt.values(**values)).rowcount)

    return op


def owns_delivery(run_id: int, owner: str) -> Callable[[Connection], bool]:
    """A guard for a chunk of a run's result (gateway Delivery): ``owner`` still holds the run's delivery,
    locked until the chunk is begun so a takeover committing meanwhile sees it begun."""
    stmt = (select(cron_runs.c.id).where(and_(cron_runs.c.id == run_id, cron_runs.c.delivery_owner == owner))
            .with_for_update())
    return lambda conn: conn.execute(stmt).first() is not None


def op_runs(job_id: str, limit: int = 20) -> Callable[[Connection], list[dict[str, Any]]]:
    def op(conn: Connection) -> list[dict[str, Any]]:
        rows = conn.execute(select(cron_runs).where(cron_runs.c.job_id == job_id)
                            .order_by(cron_runs.c.id.desc()).limit(limit))
        return [dict(r._mapping) for r in rows]

    return op


def op_fail_stale_runs(older_than: float) -> Callable[[Connection], int]:
    """Runs still 'running' past any possible time limit belong to a process that died. Those with a delivery
    claim are left to ``resume_deliveries``, which fails them and tells their chat; these died before the claim."""

    def op(conn: Connection) -> int:
        return conn.execute(update(cron_runs).where(and_(
            cron_runs.c.status == "running", cron_runs.c.started_at < older_than,
            cron_runs.c.delivery_lease_until.is_(None),
        )).values(status="failed", error="interrupted: Herald stopped during the run", finished_at=time.time(),
                  delivery_status="none")).rowcount

    return op


def op_unfinished_deliveries(conn: Connection) -> list[dict[str, Any]]:
    """Runs whose delivery someone started and nobody finished (lease still set)."""
    rows = conn.execute(select(cron_runs.c.id, cron_runs.c.job_id, cron_runs.c.delivery_owner,
                               cron_runs.c.delivery_lease_until, cron_runs.c.delivery_attempts,
                               cron_runs.c.delivery_targets)
                        .where(cron_runs.c.delivery_lease_until.is_not(None)))
    return [dict(r._mapping) for r in rows]


def op_take_delivery(run_id: int, seen_lease: float, owner: str,
                     lease_until: float) -> Callable[[Connection], dict[str, Any] | None]:
    """Take over an abandoned delivery; the run row if this instance won it (the lease it saw was unchanged)."""

    def op(conn: Connection) -> dict[str, Any] | None:
        res = conn.execute(update(cron_runs).where(and_(
            cron_runs.c.id == run_id, cron_runs.c.delivery_lease_until == seen_lease,
        )).values(delivery_owner=owner, delivery_lease_until=lease_until))
        if res.rowcount != 1:
            return None
        row = conn.execute(select(cron_runs).where(cron_runs.c.id == run_id)).first()
        return dict(row._mapping) if row else None

    return op


def op_set_home(platform: str, chat_id: str, thread_id: str | None, who: str | None) -> Callable[[Connection], None]:
    def op(conn: Connection) -> None:
        conn.execute(delete(cron_home_chats).where(cron_home_chats.c.platform == platform))
        conn.execute(insert(cron_home_chats).values(platform=platform, chat_id=chat_id, thread_id=thread_id,
                                                    set_by=who, set_at=time.time()))

    return op


def op_get_home(platform: str) -> Callable[[Connection], dict[str, Any] | None]:
    def op(conn: Connection) -> dict[str, Any] | None:
        row = conn.execute(select(cron_home_chats).where(cron_home_chats.c.platform == platform)).first()
        return dict(row._mapping) if row else None

    return op


def op_get_approval(approval_id: str) -> Callable[[Connection], dict[str, Any] | None]:
    """The approvals row a job's script was approved by (the scheduler checks it before each run)."""

    def op(conn: Connection) -> dict[str, Any] | None:
        row = conn.execute(select(approvals).where(approvals.c.id == approval_id)).first()
        return dict(row._mapping) if row else None

    return op


# ---- async facade ---------------------------------------------------------------------------------

Runner = Callable[[Callable[[Connection], Any]], Awaitable[Any]]


class CronStore:
    """The cron operations over any (read, write) pair of op runners."""

    def __init__(self, read: Runner, write: Runner) -> None:
        self.read = read
        self.write = write

    @classmethod
    def for_store(cls, store: Any) -> CronStore:
        return cls(store.run_read, store.run_write)

    async def add_job(self, row: dict[str, Any]) -> dict[str, Any]:
        return await self.write(op_insert_job(row))

    async def job(self, job_id: str) -> dict[str, Any] | None:
        return await self.read(op_get_job(job_id))

    async def jobs(self) -> list[dict[str, Any]]:
        return await self.read(op_list_jobs)

    async def update_job(self, job_id: str, **values: Any) -> bool:
        return await self.write(op_update_job(job_id, values))

    async def remove_job(self, job_id: str) -> bool:
        return await self.write(op_remove_job(job_id))

    async def runs(self, job_id: str, limit: int = 20) -> list[dict[str, Any]]:
        return await self.read(op_runs(job_id, limit))

    async def update_run(self, run_id: int, job_id: str | None = None, job_status: str | None = None,
                         **values: Any) -> None:
        await self.write(op_update_run(run_id, values, job_id, job_status))

    async def update_delivery(self, run_id: int, owner: str, **values: Any) -> bool:
        return await self.write(op_update_delivery(run_id, owner, values))

    async def unfinished_deliveries(self) -> list[dict[str, Any]]:
        return await self.read(op_unfinished_deliveries)

    async def take_delivery(self, run_id: int, seen_lease: float, owner: str,
                            lease_until: float) -> dict[str, Any] | None:
        return await self.write(op_take_delivery(run_id, seen_lease, owner, lease_until))

    async def set_home(self, platform: str, chat_id: str, thread_id: str | None, who: str | None) -> None:
        await self.write(op_set_home(platform, chat_id, thread_id, who))

    async def home(self, platform: str) -> dict[str, Any] | None:
        return await self.read(op_get_home(platform))

    async def approval(self, approval_id: str) -> dict[str, Any] | None:
        return await self.read(op_get_approval(approval_id))


def engine_store(url: str) -> tuple[CronStore, Any]:
    """A CronStore on an engine of its own (the CLI, beside a running daemon); returns (store, engine)."""
    from gateway.storage.db import make_engine

    engine = make_engine(url)

    async def read(op: Callable[[Connection], Any]) -> Any:
        async with engine.connect() as conn:
            return await conn.run_sync(op)

    async def write(op: Callable[[Connection], Any]) -> Any:
        async with engine.begin() as conn:
            return await conn.run_sync(op)

    return CronStore(read, write), engine
