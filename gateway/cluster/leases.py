"""Session leases: with several instances on one PostgreSQL database, each session has one owner at a time.

A row in ``session_leases`` names the instance that runs the session's turns and until when (it renews
while it lives). Every accepted message of the session is stored as that owner's (``inbox.owner``), in the
same transaction that reads the lease under a row lock, so ownership and arrival order are decided in one
place: the accepting instance takes a free or expired lease, or stores the message for the live owner and
wakes it (``pg_notify``, delivered on commit). Taking a lease whose owner let it expire (it died) adopts
that owner's unfinished rows of the session, so they are answered first, in order.

A lease is given up only under its row lock and only when its owner has no unfinished row of the session
(``release``), so a message stored for it a moment earlier is never orphaned. At shutdown an instance lets
its leases expire at once (the owner stays named, so whoever takes one adopts what was cut short).

These are synchronous operations on a SQLAlchemy ``Connection``, run through ``Store.run_write``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, exists, insert, select, text, update
from sqlalchemy.engine import Connection

from gateway.cluster.bus import channel_of, pack
from gateway.storage.tables import inbox, messages, session_leases

LEASE_SECONDS = 30.0
UNFINISHED = ("pending", "replied")
_NOTIFY = text("SELECT pg_notify(:c, :p)")


@dataclass
class Taken:
    """What one accept (or a takeover) decided: who owns the session now, and the rows this instance must
    dispatch for it (its unfinished rows of the session, oldest first), marking those it adopted."""

    owner: str | None
    inbox_id: int | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    adopted: set[int] = field(default_factory=set)
    taken_from: str | None = None  # the lease was another instance's (caches about the session are stale)


def _lock(conn: Connection, key: str) -> Any:
    return conn.execute(select(session_leases.c.owner, session_leases.c.lease_until)
                        .where(session_leases.c.key == key).with_for_update()).first()


def _lease(conn: Connection, key: str, me: str, now: float, may_take: Callable[[str | None, float], bool]) -> Taken:
    """Read the session's lease under a row lock and take it when ``may_take`` says so (free, expired, or
    held by a gone instance). The row lock serialises every accept of the session until commit."""
    # Here, not at the top: leases exist only on PostgreSQL, and its dialect is ~2 MB a SQLite daemon never needs.
    from sqlalchemy.dialects.postgresql import insert as pg_insert

    until = now + LEASE_SECONDS
    row = _lock(conn, key)
    if row is None:
        created = conn.execute(pg_insert(session_leases).values(key=key, owner=me, lease_until=until, updated_at=now)
                               .on_conflict_do_nothing(index_elements=["key"])).rowcount
        if created:
            return Taken(me)
        row = _lock(conn, key)  # inserted by a concurrent accept a moment ago: now wait for its commit
    owner, lease_until = row.owner, row.lease_until
    if owner == me:
        if lease_until < now + LEASE_SECONDS / 2:
            conn.execute(update(session_leases).where(session_leases.c.key == key)
                         .values(lease_until=until, updated_at=now))
        return Taken(me)
    if owner is None or lease_until < now or may_take(owner, lease_until):
        conn.execute(update(session_leases).where(session_leases.c.key == key)
                     .values(owner=me, lease_until=until, updated_at=now))
        return Taken(me, taken_from=owner)
    return Taken(owner)


def _owned_by(owner: str | None) -> Any:
    return inbox.c.owner.is_(None) if owner is None else inbox.c.owner == owner


def _adopt(conn: Connection, key: str, me: str, previous: str | None, now: float) -> set[int]:
    """The unfinished rows of the session that ``previous`` owned become ours."""
    stmt = (update(inbox).where(and_(inbox.c.session_key == key, _owned_by(previous), inbox.c.status.in_(UNFINISHED)))
            .values(owner=me, lease_until=now + LEASE_SECONDS, updated_at=now).returning(inbox.c.id))
    return {r.id for r in conn.execute(stmt)}


_STEPS = exists().where(messages.c.inbox_id == inbox.c.id)
_MINE = select(inbox.c.id, inbox.c.platform, inbox.c.session_key, inbox.c.payload, inbox.c.status, inbox.c.reply,
               inbox.c.attempts, _STEPS.label("has_steps"))


def _my_rows(conn: Connection, key: str, me: str) -> list[dict[str, Any]]:
    stmt = (_MINE.where(and_(inbox.c.session_key == key, inbox.c.owner == me, inbox.c.status.in_(UNFINISHED)))
            .order_by(inbox.c.id))
    return [dict(r._mapping) for r in conn.execute(stmt)]


def op_accept(key: str, row: dict[str, Any], me: str, may_take: Callable[[str | None, float], bool]
              ) -> Callable[[Connection], Taken]:
    """Store an accepted message of session ``key`` as its owner's, taking the lease when it is free."""

    def op(conn: Connection) -> Taken:
        now = time.time()
        taken = _lease(conn, key, me, now, may_take)
        values = {**row, "owner": taken.owner, "lease_until": now + LEASE_SECONDS}
        taken.inbox_id = int(conn.execute(insert(inbox).values(**values)).inserted_primary_key[0])
        if taken.taken_from is not None:
            taken.adopted = _adopt(conn, key, me, taken.taken_from, now)
        if taken.owner == me:
            taken.rows = _my_rows(conn, key, me)
        else:
            conn.execute(_NOTIFY, {"c": channel_of(taken.owner), "p": pack("inbox", key)})  # type: ignore[arg-type]
        return taken

    return op


def op_take_over(key: str, gone_owner: str | None, me: str, may_take: Callable[[str | None, float], bool]
                 ) -> Callable[[Connection], Taken]:
    """Recovery: the unfinished rows of session ``key`` that ``gone_owner`` left. When the lease is ours (or
    can be taken), we adopt them; when a live instance holds it, they become that instance's and it is woken."""

    def op(conn: Connection) -> Taken:
        now = time.time()
        taken = _lease(conn, key, me, now, may_take)
        if taken.owner == me:
            taken.adopted = _adopt(conn, key, me, gone_owner, now)
            if taken.taken_from not in (None, gone_owner):
                taken.adopted |= _adopt(conn, key, me, taken.taken_from, now)
            taken.rows = _my_rows(conn, key, me)
        else:
            assert taken.owner is not None
            conn.execute(update(inbox).where(and_(inbox.c.session_key == key, _owned_by(gone_owner),
                                                  inbox.c.status.in_(UNFINISHED)))
                         .values(owner=taken.owner, updated_at=now))
            conn.execute(_NOTIFY, {"c": channel_of(taken.owner), "p": pack("inbox", key)})
        return taken

    return op


def op_rows(me: str, key: str | None = None) -> Callable[[Connection], list[dict[str, Any]]]:
    """This instance's unfinished rows (of one session, or all), oldest first."""

    def op(conn: Connection) -> list[dict[str, Any]]:
        if key is not None:
            return _my_rows(conn, key, me)
        stmt = _MINE.where(and_(inbox.c.owner == me, inbox.c.status.in_(UNFINISHED))).order_by(inbox.c.id)
        return [dict(r._mapping) for r in conn.execute(stmt)]

    return op


def op_renew(me: str) -> Callable[[Connection], int]:
    def op(conn: Connection) -> int:
        now = time.time()
        return int(conn.execute(update(session_leases).where(session_leases.c.owner == me)
                                .values(lease_until=now + LEASE_SECONDS, updated_at=now)).rowcount or 0)

    return op


def op_release(key: str, me: str) -> Callable[[Connection], bool]:
    """Give the session up if we hold it and have nothing unfinished of it; True when it is not ours now."""

    def op(conn: Connection) -> bool:
        row = _lock(conn, key)
        if row is None or row.owner != me:
            return True
        # A statement of its own, after the lock: it sees a row that an accept holding the lock committed.
        busy = conn.execute(select(inbox.c.id).where(and_(inbox.c.session_key == key, inbox.c.owner == me,
                                                          inbox.c.status.in_(UNFINISHED))).limit(1)).first()
        if busy is not None:
            return False
        conn.execute(update(session_leases).where(session_leases.c.key == key)
                     .values(owner=None, lease_until=0.0, updated_at=time.time()))
        return True

    return op


def op_expire_all(me: str) -> Callable[[Connection], int]:
    """Shutdown: every lease we hold may be taken at once; we stay named, so the taker adopts our rows."""

    def op(conn: Connection) -> int:
        return int(conn.execute(update(session_leases).where(session_leases.c.owner == me)
                                .values(lease_until=0.0, updated_at=time.time())).rowcount or 0)

    return op


def op_owner(key: str) -> Callable[[Connection], tuple[str | None, float] | None]:
    def op(conn: Connection) -> tuple[str | None, float] | None:
        row = conn.execute(select(session_leases.c.owner, session_leases.c.lease_until)
                           .where(session_leases.c.key == key)).first()
        return (row.owner, row.lease_until) if row else None

    return op
