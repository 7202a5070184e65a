"""The inbox: every platform message we accepted, de-duplicated by (platform, platform message id), with its
status (pending -> replied -> done, or failed, cancelled, rejected...) and the instance that owns it under a
lease. Also the statements other stores run on an inbox row inside their own transaction (an answer stored,
a chunk sent) and ``NotExpected``, what they raise when the row moved on meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import and_, bindparam, insert, select, update
from sqlalchemy.engine import Connection

from gateway.storage.db import Database, is_unique_violation, op_all, op_first
from gateway.storage.tables import inbox

# The inbox states of a message not yet finished: "replied" has its answer stored, delivery is left.
UNFINISHED = ("pending", "replied")


class NotExpected(Exception):
    """A conditional change found the row in another state (finished, or taken over by another instance)."""


class InboxStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(self, platform: str, platform_message_id: str, session_key: str, payload: dict[str, Any],
                  owner: str | None = None, lease_until: float | None = None,
                  status: str = "pending", wait: bool = True) -> int | None:
        """Store an accepted message; ``None`` when this platform message was already taken. With ``wait``
        False, ``Unavailable`` while the database is (the message is refused, not held: ``Database.run_write``)."""
        now = time.time()
        params = {
            "platform": platform, "platform_message_id": platform_message_id, "session_key": session_key,
            "payload": payload, "status": status, "created_at": now, "updated_at": now,
            "owner": owner, "lease_until": lease_until,
        }

        def op(conn: Connection) -> int:
            return int(conn.execute(_INBOX_INSERT, params).inserted_primary_key[0])

        try:
            return await self.db.run_write(op, wait=wait)
        except Exception as exc:
            if is_unique_violation(exc):
                return None
            raise

    async def mark(self, inbox_id: int, status: str, *, reply: str | None = None, error: str | None = None,
                   expected: str | tuple[str, ...] | None = None) -> bool:
        """Move a row to ``status``; with ``expected``, only from that status (False if it was elsewhere)."""
        values: dict[str, Any] = {"status": status, "updated_at": time.time()}
        if reply is not None:
            values["reply"] = reply
        if error is not None:
            values["error"] = error
        stmt = inbox_update(expected)
        params = {"b_id": inbox_id, **expected_params(expected), **values}
        return bool(await self.db.run_write(lambda conn: conn.execute(stmt, params).rowcount))

    async def merge(self, inbox_id: int, payload: dict[str, Any], merged: list[int]) -> None:
        """An album's messages become one: ``inbox_id`` carries them all (``payload``) and the others are done,
        in one transaction, so a restart finds either the parts or the whole, never both."""
        now = time.time()

        def op(conn: Connection) -> None:
            conn.execute(update(inbox).where(and_(inbox.c.id == inbox_id, inbox.c.status == "pending"))
                         .values(payload=payload, updated_at=now))
            if merged:
                conn.execute(update(inbox).where(and_(inbox.c.id.in_(merged), inbox.c.status == "pending"))
                             .values(status="done", error=f"answered with message {inbox_id} (one album)",
                                     updated_at=now))

        await self.db.run_write(op)

    async def attempt(self, inbox_id: int, limit: int) -> int | None:
        """Count a start of the row's turn, durably, before it computes (so a turn that takes the process down
        with it has counted): the attempts made so far, this one included; None, counting nothing, when ``limit``
        were made already. Raises ``NotExpected`` when the row is no longer pending (finished elsewhere)."""
        params = {"b_id": inbox_id, "b_limit": limit, "updated_at": time.time()}

        def op(conn: Connection) -> int | None:
            counted = conn.execute(_INBOX_ATTEMPT, params).rowcount
            row = conn.execute(_INBOX_ATTEMPTS, params).first()
            if row is None or row.status != "pending":
                raise NotExpected(f"inbox row {inbox_id} is no longer pending")
            return int(row.attempts) if counted else None

        return await self.db.run_write(op)

    async def give_back(self, inbox_id: int) -> None:
        """The turn counted by ``attempt`` ended without taking the process down (a clean shutdown cut it short):
        it does not count against the message."""
        stmt = (update(inbox).where(and_(inbox.c.id == inbox_id, inbox.c.attempts > 0, inbox.c.status.in_(UNFINISHED)))
                .values(attempts=inbox.c.attempts - 1))
        await self.db.run_write(lambda conn: conn.execute(stmt).rowcount)

    async def unfinished(self, platform: str | None = None) -> list[dict[str, Any]]:
        """Messages accepted and not finished, oldest first (all instances' rows)."""
        where = inbox.c.status.in_(UNFINISHED)
        if platform is not None:
            where = and_(where, inbox.c.platform == platform)
        return await self.db.run_read(op_all(select(inbox).where(where).order_by(inbox.c.id)))

    async def claim(self, row: dict[str, Any], owner: str, lease_until: float) -> bool:
        """Take an unfinished row over from its previous owner (as read in ``row``): only one instance wins."""
        where = and_(inbox.c.id == row["id"], inbox.c.status == row["status"],
                     inbox.c.owner.is_(None) if row["owner"] is None else inbox.c.owner == row["owner"])
        stmt = update(inbox).where(where).values(owner=owner, lease_until=lease_until, updated_at=time.time())
        return bool(await self.db.run_write(lambda conn: conn.execute(stmt).rowcount))

    async def renew(self, owner: str, lease_until: float) -> int:
        """Extend the lease of every unfinished row this instance owns."""
        stmt = (update(inbox).where(and_(inbox.c.owner == owner, inbox.c.status.in_(UNFINISHED)))
                .values(lease_until=lease_until))
        return int(await self.db.run_write(lambda conn: conn.execute(stmt).rowcount))

    async def find(self, platform: str, platform_message_id: str) -> dict[str, Any] | None:
        return await self.db.run_read(op_first(select(inbox).where(and_(
            inbox.c.platform == platform, inbox.c.platform_message_id == platform_message_id))))

    async def get(self, inbox_id: int) -> dict[str, Any] | None:
        return await self.db.run_read(op_first(select(inbox).where(inbox.c.id == inbox_id)))

    def owner_guard(self, inbox_id: int, owner: str) -> Callable[[Connection], bool]:
        """A guard for ``OutboxStore.begin`` and ``MessageStore.append``: the row is still ``owner``'s (locked
        until the transaction ends, so a takeover that commits meanwhile waits and then sees what it did)."""
        params = {"b_id": inbox_id, "b_owner": owner}
        return lambda conn: conn.execute(_INBOX_OWNED, params).first() is not None


def inbox_update(expected: str | tuple[str, ...] | None) -> Any:
    """The statement that moves row ``b_id`` on (from ``expected``; its parameters: ``expected_params``)."""
    if expected is None:
        return _INBOX_UPDATE
    if isinstance(expected, str):
        return _INBOX_UPDATE_FROM
    return _INBOX_UPDATE.where(inbox.c.status.in_(expected))


def expected_params(expected: str | tuple[str, ...] | None) -> dict[str, Any]:
    return {"b_expected": expected} if isinstance(expected, str) else {}


# Hot-path statements built once: parameters travel separately, so SQLAlchemy skips re-building (and
# re-coercing) a statement per message and hits its compiled cache directly.
_INBOX_INSERT = insert(inbox)
_INBOX_UPDATE = update(inbox).where(inbox.c.id == bindparam("b_id"))
_INBOX_UPDATE_FROM = _INBOX_UPDATE.where(inbox.c.status == bindparam("b_expected"))
_INBOX_ATTEMPT = (update(inbox).where(and_(inbox.c.id == bindparam("b_id"), inbox.c.status == "pending",
                                             inbox.c.attempts < bindparam("b_limit")))
                  .values(attempts=inbox.c.attempts + 1))
_INBOX_ATTEMPTS = select(inbox.c.status, inbox.c.attempts).where(inbox.c.id == bindparam("b_id"))
_INBOX_OWNED = (select(inbox.c.id).where(and_(inbox.c.id == bindparam("b_id"), inbox.c.owner == bindparam("b_owner")))
                .with_for_update())
