"""The outbox: every chunk we send, recorded before it goes out (``sending``, with its idempotency key) and
after (``sent`` with the platform's message ids, or failed), so a delivery resumed after a crash or a takeover
sends only what is missing. Where a platform reports later what became of a message (delivered, read, failed),
its receipt is recorded on the same row (the adapter sees this as ``gateway.platforms.base.Receipts``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import bindparam, func, insert, or_, select, update
from sqlalchemy.engine import Connection

from gateway.storage.db import Database, op_all, op_exec
from gateway.storage.inbox import inbox_update
from gateway.storage.tables import outbox


class OutboxStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def chunks(self, inbox_id: int | None = None, ref: str | None = None) -> dict[int, dict[str, Any]]:
        """The newest row of each chunk recorded for the answer to ``inbox_id`` (or the delivery ``ref``)."""
        where = outbox.c.inbox_id == inbox_id if ref is None else outbox.c.ref == ref
        rows = await self.db.run_read(op_all(
            select(outbox.c.id, outbox.c.chunk_index, outbox.c.status, outbox.c.idempotency_key,
                   outbox.c.platform_message_id)
            .where(where).order_by(outbox.c.id)
        ))
        return {r["chunk_index"]: r for r in rows}

    async def sent_chunks(self, inbox_id: int) -> set[int]:
        return {i for i, r in (await self.chunks(inbox_id)).items() if r["status"] == "sent"}

    async def begin(self, inbox_id: int | None, platform: str, chat_id: str, chunk_index: int, *, key: str,
                    row_id: int | None = None, ref: str | None = None,
                    guard: Callable[[Connection], bool] | None = None) -> int | None:
        """Mark a chunk ``sending`` before it goes out, with the idempotency ``key`` it is sent with (a new row,
        or the one an earlier attempt left).

        ``guard`` claims the chunk: it runs first in the same transaction (locking what it reads) and the
        chunk is begun only while it holds — this instance still owns the delivery. None when it does not:
        another instance took the delivery over, and sends this chunk itself."""
        now = time.time()
        # Prebuilt statements with parameters: building them here, once per chunk on the loop, cost more CPU
        # than executing them.
        if row_id is not None:
            stmt: Any = _OUTBOX_UPDATE
            params: dict[str, Any] = {"b_id": row_id, "status": "sending", "error": None, "updated_at": now,
                                      "idempotency_key": key}
        else:
            stmt = _OUTBOX_INSERT
            params = {"inbox_id": inbox_id, "platform": platform, "chat_id": chat_id, "chunk_index": chunk_index,
                      "platform_message_id": None, "status": "sending", "error": None, "created_at": now,
                      "updated_at": now, "idempotency_key": key, "ref": ref}

        def op(conn: Connection) -> int | None:
            if guard is not None and not guard(conn):
                return None
            result = conn.execute(stmt, params)
            return row_id if row_id is not None else int(result.inserted_primary_key[0])

        return await self.db.run_write(op)

    async def finish(self, row_id: int, status: str, ids: list[str], error: str | None,
                     inbox_id: int | None, finish_inbox: str | None) -> None:
        """A chunk went out (or failed for good); with ``finish_inbox`` its message's row is finished in the
        same commit."""
        now = time.time()
        stmts: list[Any] = [(_OUTBOX_UPDATE, {"b_id": row_id, "status": status, "error": error, "updated_at": now,
                                              "platform_message_id": " ".join(ids) or None})]
        if finish_inbox is not None and inbox_id is not None:
            values: dict[str, Any] = {"status": finish_inbox, "updated_at": now}
            if error is not None:
                values["error"] = error
            stmts.append((inbox_update("replied"), {"b_id": inbox_id, "b_expected": "replied", **values}))
        await self.db.run_write(op_exec(*stmts))

    async def record(self, inbox_id: int | None, platform: str, chat_id: str, chunk_index: int,
                     platform_message_id: str | None, status: str, error: str | None = None) -> None:
        """Record a chunk that needs no before-and-after (a notice, not the answer to a message)."""
        now = time.time()
        await self.db.run_write(op_exec((_OUTBOX_INSERT, {
            "inbox_id": inbox_id, "platform": platform, "chat_id": chat_id, "chunk_index": chunk_index,
            "platform_message_id": platform_message_id, "status": status, "error": error, "created_at": now,
            "updated_at": now, "idempotency_key": None, "ref": None,
        })))


    # ---- receipts --------------------------------------------------------------------------------

    async def receipt(self, platform: str, message_id: str, state: str, error: str | None = None) -> bool:
        """Record what ``platform`` said of its message ``message_id``: the furthest state wins (a late "delivered"
        after "read" changes nothing, a repeated one neither); "failed" also fails the row, with ``error``. False
        when no row holds that id (yet: the report can outrun the send's own record)."""
        rank = RECEIPT_RANK.get(state)
        if rank is None:
            raise ValueError(f"unknown receipt state {state!r}")
        values: dict[str, Any] = {"receipt": state, "updated_at": time.time()}
        if state == "failed":
            values.update(status="failed", error=error)

        def op(conn: Connection) -> bool:
            row_id = _row_of(conn, platform, message_id)
            if row_id is None:
                return False
            conn.execute(_RECEIPT[state], {"b_id": row_id, **values})
            return True

        return await self.db.run_write(op)

    async def replace(self, platform: str, message_id: str, new_ids: list[str]) -> bool:
        """The platform refused ``message_id`` after taking it, and the adapter sent its words again as
        ``new_ids`` (another form of the same message): the row now names those, sent, without a receipt yet."""
        def op(conn: Connection) -> bool:
            row_id = _row_of(conn, platform, message_id)
            if row_id is None:
                return False
            held = conn.execute(select(outbox.c.platform_message_id).where(outbox.c.id == row_id)).scalar() or ""
            ids = [i for part in held.split(" ") if part for i in (new_ids if part == message_id else [part])]
            conn.execute(update(outbox).where(outbox.c.id == row_id).values(
                platform_message_id=" ".join(ids) or None, status="sent", receipt=None, error=None,
                updated_at=time.time()))
            return True

        return await self.db.run_write(op)


# How far a sent message got, as platforms report it; a failure is final.
RECEIPT_RANK = {"sent": 1, "delivered": 2, "read": 3, "failed": 4}


def _like(value: str) -> str:
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _row_of(conn: Connection, platform: str, message_id: str) -> int | None:
    """The newest outbox row holding ``message_id``: by the whole column first (one id per chunk, the usual case,
    found through the index), then as one of a chunk's several ids among the newest ``SEVERAL_IDS_WITHIN`` rows."""
    found = conn.execute(_ROW_OF, {"b_platform": platform, "b_message_id": message_id}).scalar()
    if found is not None:
        return int(found)
    escaped = _like(message_id)
    found = conn.execute(_ROW_OF_SEVERAL, {
        "b_platform": platform, "b_window": SEVERAL_IDS_WITHIN,
        "b_first": f"{escaped} %", "b_last": f"% {escaped}", "b_inner": f"% {escaped} %",
    }).scalar()
    return int(found) if found is not None else None


# Built once (see gateway/storage/inbox.py).
_OUTBOX_INSERT = insert(outbox)
_OUTBOX_UPDATE = update(outbox).where(outbox.c.id == bindparam("b_id"))
# Receipts come two or three per message sent (WhatsApp's sent, delivered, read): built per call, these
# statements took as much of the database thread's CPU as the message's own writes.
_ROW_OF = (select(outbox.c.id).where(outbox.c.platform == bindparam("b_platform"),
                                     outbox.c.platform_message_id == bindparam("b_message_id"))
           .order_by(outbox.c.id.desc()).limit(1))
# A chunk sent as several messages is rare, and its ids can only be searched for with LIKE: without a bound, each
# receipt that outran its send's record (retried a few times) scanned the platform's whole outbox in the one
# writer thread, holding every other write. The window keeps that a range of the primary key; a receipt for
# such a chunk older than it is not recorded (logged as unmatched).
SEVERAL_IDS_WITHIN = 10_000
_ROW_OF_SEVERAL = (
    select(outbox.c.id)
    .where(outbox.c.platform == bindparam("b_platform"),
           outbox.c.id > select(func.max(outbox.c.id)).scalar_subquery() - bindparam("b_window"),
           or_(*(outbox.c.platform_message_id.like(bindparam(name), escape="\\")
                 for name in ("b_first", "b_last", "b_inner"))))
    .order_by(outbox.c.id.desc()).limit(1))
_RECEIPT = {  # a state moves the receipt on only from a lower one
    state: _OUTBOX_UPDATE.where(or_(outbox.c.receipt.is_(None),
                                    outbox.c.receipt.in_([name for name, r in RECEIPT_RANK.items() if r < rank])))
    for state, rank in RECEIPT_RANK.items()
}
