"""The gateway's data, over ``gateway.storage.db.Database``: sessions and their messages, the inbox (every platform
message we accepted, de-duplicated by platform id, with the instance that owns it), the outbox (every chunk
we send, before and after), and the chat log that the web chat serves.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sqlalchemy import and_, bindparam, func, insert, select, update
from sqlalchemy.engine import Connection

from gateway.kernel.faults import Faults
from gateway.storage.db import Database, is_unique_violation, op_all, op_exec, op_first
from gateway.storage.tables import chat_log, inbox, messages, outbox, platform_cursors, sessions, usage

HISTORY_CACHE_SESSIONS = 256
# The inbox states of a message not yet finished: "replied" has its answer stored, delivery is left.
UNFINISHED = ("pending", "replied")


class NotExpected(Exception):
    """A conditional change found the row in another state (finished, or taken over by another instance)."""


class Store(Database):
    def __init__(self, url: str, faults: Faults | None = None) -> None:
        super().__init__(url, faults)
        # The newest messages of recently active sessions, as each turn sends them to the model: loading
        # and decoding them from the database every turn was a fifth of the per-message CPU. Appends go
        # through ``append_messages`` (the only writer of ``messages``), which keeps these in step; /undo and
        # /retry mark rows hidden and drop the session's entry (``history_changed``).
        self._history: OrderedDict[str, tuple[int, list[dict[str, Any]]]] = OrderedDict()
        self._history_loading: dict[str, bool] = {}  # session id -> an append raced its read

    # ---- inbox -------------------------------------------------------------------------------

    async def inbox_add(self, platform: str, platform_message_id: str, session_key: str, payload: dict[str, Any],
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
            return await self.run_write(op, wait=wait)
        except Exception as exc:
            if is_unique_violation(exc):
                return None
            raise

    async def inbox_set(self, inbox_id: int, status: str, *, reply: str | None = None, error: str | None = None,
                        expected: str | tuple[str, ...] | None = None) -> bool:
        """Move a row to ``status``; with ``expected``, only from that status (False if it was elsewhere)."""
        values: dict[str, Any] = {"status": status, "updated_at": time.time()}
        if reply is not None:
            values["reply"] = reply
        if error is not None:
            values["error"] = error
        stmt = _inbox_update(expected)
        params = {"b_id": inbox_id, **_expected_params(expected), **values}
        return bool(await self.run_write(lambda conn: conn.execute(stmt, params).rowcount))

    async def inbox_unfinished(self, platform: str | None = None) -> list[dict[str, Any]]:
        """Messages accepted and not finished, oldest first (all instances' rows)."""
        where = inbox.c.status.in_(UNFINISHED)
        if platform is not None:
            where = and_(where, inbox.c.platform == platform)
        return await self.run_read(op_all(select(inbox).where(where).order_by(inbox.c.id)))

    async def inbox_claim(self, row: dict[str, Any], owner: str, lease_until: float) -> bool:
        """Take an unfinished row over from its previous owner (as read in ``row``): only one instance wins."""
        where = and_(inbox.c.id == row["id"], inbox.c.status == row["status"],
                     inbox.c.owner.is_(None) if row["owner"] is None else inbox.c.owner == row["owner"])
        stmt = update(inbox).where(where).values(owner=owner, lease_until=lease_until, updated_at=time.time())
        return bool(await self.run_write(lambda conn: conn.execute(stmt).rowcount))

    async def inbox_renew(self, owner: str, lease_until: float) -> int:
        """Extend the lease of every unfinished row this instance owns."""
        stmt = (update(inbox).where(and_(inbox.c.owner == owner, inbox.c.status.in_(UNFINISHED)))
                .values(lease_until=lease_until))
        return int(await self.run_write(lambda conn: conn.execute(stmt).rowcount))

    async def inbox_find(self, platform: str, platform_message_id: str) -> dict[str, Any] | None:
        return await self.run_read(op_first(select(inbox).where(and_(
            inbox.c.platform == platform, inbox.c.platform_message_id == platform_message_id))))

    async def inbox_get(self, inbox_id: int) -> dict[str, Any] | None:
        return await self.run_read(op_first(select(inbox).where(inbox.c.id == inbox_id)))

    async def turn_steps(self, inbox_id: int) -> tuple[str, int] | None:
        """(session id, messages stored) of the turn answering ``inbox_id``, if it stored any."""
        # A turn compressed while it ran has rows in the session it left too: the newest session is its own.
        stmt = (select(messages.c.session_id, func.count()).where(messages.c.inbox_id == inbox_id)
                .group_by(messages.c.session_id).order_by(func.max(messages.c.id).desc()))
        row = await self.run_read(lambda conn: conn.execute(stmt).first())
        return (row[0], int(row[1])) if row else None

    # ---- outbox ------------------------------------------------------------------------------

    async def outbox_chunks(self, inbox_id: int | None = None, ref: str | None = None) -> dict[int, dict[str, Any]]:
        """The newest row of each chunk recorded for the answer to ``inbox_id`` (or the delivery ``ref``)."""
        where = outbox.c.inbox_id == inbox_id if ref is None else outbox.c.ref == ref
        rows = await self.run_read(op_all(
            select(outbox.c.id, outbox.c.chunk_index, outbox.c.status, outbox.c.idempotency_key,
                   outbox.c.platform_message_id)
            .where(where).order_by(outbox.c.id)
        ))
        return {r["chunk_index"]: r for r in rows}

    async def outbox_sent_chunks(self, inbox_id: int) -> set[int]:
        return {i for i, r in (await self.outbox_chunks(inbox_id)).items() if r["status"] == "sent"}

    async def outbox_begin(self, inbox_id: int | None, platform: str, chat_id: str, chunk_index: int, *, key: str,
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

        return await self.run_write(op)

    async def outbox_finish(self, row_id: int, status: str, ids: list[str], error: str | None,
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
            stmts.append((_inbox_update("replied"), {"b_id": inbox_id, "b_expected": "replied", **values}))
        await self.run_write(op_exec(*stmts))

    async def outbox_record(self, inbox_id: int | None, platform: str, chat_id: str, chunk_index: int,
                            platform_message_id: str | None, status: str, error: str | None = None) -> None:
        """Record a chunk that needs no before-and-after (a notice, not the answer to a message)."""
        now = time.time()
        await self.run_write(op_exec((_OUTBOX_INSERT, {
            "inbox_id": inbox_id, "platform": platform, "chat_id": chat_id, "chunk_index": chunk_index,
            "platform_message_id": platform_message_id, "status": status, "error": error, "created_at": now,
            "updated_at": now, "idempotency_key": None, "ref": None,
        })))

    # ---- sessions and messages ---------------------------------------------------------------

    async def session_active(self, key: str) -> dict[str, Any] | None:
        return await self.run_read(op_first(
            select(sessions)
            .where(and_(sessions.c.key == key, sessions.c.ended_at.is_(None)))
            .order_by(sessions.c.created_at.desc())
            .limit(1)
        ))

    async def session_get(self, session_id: str) -> dict[str, Any] | None:
        return await self.run_read(op_first(select(sessions).where(sessions.c.id == session_id)))

    async def session_create(self, session_id: str, key: str, platform: str, system_prompt: str | None,
                             parent_id: str | None = None, **columns: Any) -> dict[str, Any]:
        """``columns``: the optional ones (user_id, title, model, reasoning_effort, personality)."""
        now = time.time()
        row = {
            "id": session_id, "key": key, "parent_id": parent_id, "platform": platform,
            "system_prompt": system_prompt, "created_at": now, "updated_at": now,
            "ended_at": None, "end_reason": None,
            **{name: columns.get(name) for name in _SESSION_OPTIONAL},
        }
        await self.run_write(op_exec(insert(sessions).values(**row)))
        return row

    async def session_update(self, session_id: str, **columns: Any) -> None:
        """Set optional columns of a session (its owner, title, settings)."""
        unknown = set(columns) - set(_SESSION_OPTIONAL)
        if unknown:
            raise ValueError(f"not a session setting: {sorted(unknown)}")
        await self.run_write(op_exec(update(sessions).where(sessions.c.id == session_id).values(**columns)))

    async def session_reopen(self, key: str, session_id: str, current_id: str | None) -> dict[str, Any] | None:
        """/resume: in one transaction end ``current_id`` (reason "resumed") and make the ended session
        ``session_id`` of ``key`` active again. None (and nothing changed) when there is no such session."""
        now = time.time()
        target = and_(sessions.c.id == session_id, sessions.c.key == key, sessions.c.ended_at.is_not(None))

        def op(conn: Connection) -> dict[str, Any] | None:
            if conn.execute(update(sessions).where(target)
                            .values(ended_at=None, end_reason=None, updated_at=now)).rowcount != 1:
                return None
            if current_id is not None:
                conn.execute(update(sessions).where(and_(sessions.c.id == current_id, sessions.c.ended_at.is_(None)))
                             .values(ended_at=now, end_reason="resumed"))
            row = conn.execute(select(sessions).where(sessions.c.id == session_id)).first()
            return dict(row._mapping) if row else None

        return await self.run_write(op)

    async def session_end(self, session_id: str, reason: str) -> None:
        await self.run_write(op_exec(
            update(sessions)
            .where(and_(sessions.c.id == session_id, sessions.c.ended_at.is_(None)))
            .values(ended_at=time.time(), end_reason=reason)
        ))

    async def session_history(self, session_id: str, limit: int = 0) -> list[dict[str, Any]]:
        """The session's messages in order; with ``limit``, the newest ``limit`` of them, starting at a user
        message (a tool result without its call, or a call without its result, is invalid for the model)."""
        if not limit:
            params: dict[str, Any] = {"b_session": session_id}
            return await self.run_read(lambda conn: [_to_openai(r) for r in conn.execute(_HISTORY, params)])
        cached = self._history.get(session_id)
        if cached is not None and cached[0] == limit:
            self._history.move_to_end(session_id)
            tail = cached[1]
            return _from_user_message(tail[-limit:]) if len(tail) > limit else list(tail)
        params = {"b_session": session_id, "b_limit": limit}
        self._history_loading[session_id] = False
        try:
            newest = await self.run_read(
                lambda conn: [_to_openai(r) for r in conn.execute(_HISTORY_TAIL, params)])
        finally:
            raced = self._history_loading.pop(session_id, True)
        newest.reverse()
        tail = _from_user_message(newest)
        if not raced:  # an append during the read may or may not be in it: then don't keep it
            self._history[session_id] = (limit, tail)
            while len(self._history) > HISTORY_CACHE_SESSIONS:
                self._history.popitem(last=False)
        return list(tail)

    def owns_inbox_row(self, inbox_id: int, owner: str) -> Callable[[Connection], bool]:
        """A guard for ``outbox_begin``: the row is still ``owner``'s (locked until the chunk is begun, so a
        takeover that commits meanwhile waits and then sees the chunk as begun)."""
        params = {"b_id": inbox_id, "b_owner": owner}
        return lambda conn: conn.execute(_INBOX_OWNED, params).first() is not None

    def forget_history(self, session_id: str) -> None:
        self._history.pop(session_id, None)

    async def resume_history(self, session_id: str, inbox_id: int, limit: int = 0) -> list[dict[str, Any]]:
        """What a turn resumed after a crash sends the model: the history before the turn (with ``limit``, its
        newest ``limit`` messages, starting at a user message) and the turn's own stored messages in full,
        its user message first. ``session_history``'s tail could cut into the turn itself, or hold none
        of it once the turn has stored more than ``limit`` steps."""
        own = and_(messages.c.session_id == session_id, messages.c.inbox_id == inbox_id)
        columns = (messages.c.role, messages.c.content, messages.c.tool_calls, messages.c.tool_call_id)

        def op(conn: Connection) -> list[dict[str, Any]]:
            turn = [_to_openai(r) for r in conn.execute(select(*columns).where(own).order_by(messages.c.id))]
            first = conn.execute(select(func.min(messages.c.id)).where(own)).scalar()
            if first is None:
                return []
            before = (select(*columns).where(and_(messages.c.session_id == session_id, messages.c.id < first,
                                                  _VISIBLE))
                      .order_by(messages.c.id.desc()))
            if limit:
                before = before.limit(limit)
            earlier = [_to_openai(r) for r in conn.execute(before)]
            earlier.reverse()
            return _from_user_message(earlier) + turn

        return await self.run_read(op)

    async def session_count_messages(self, session_id: str) -> int:
        stmt = select(func.count()).select_from(messages).where(messages.c.session_id == session_id)
        return int(await self.run_read(lambda conn: conn.execute(stmt).scalar_one()))

    async def append_messages(self, session_id: str, msgs: Iterable[dict[str, Any]],
                              inbox_id: int | None = None, inbox_status: str | None = None,
                              reply: str | None = None, expected: str | tuple[str, ...] = "pending",
                              guard: Callable[[Connection], bool] | None = None) -> None:
        """Persist messages of a turn (tagged with the inbox row they answer) and, with ``inbox_status``, move
        that row on from ``expected``, in one transaction. Raises ``NotExpected`` (and stores nothing) when
        the row is no longer in ``expected``, or ``guard`` says no: the message was finished or taken over
        elsewhere."""
        now = time.time()
        msgs = list(msgs)
        rows = [
            {
                "session_id": session_id, "role": m["role"], "content": m.get("content"),
                "tool_calls": m.get("tool_calls"), "tool_call_id": m.get("tool_call_id"), "created_at": now,
                "inbox_id": inbox_id,
            }
            for m in msgs
        ]
        inbox_stmt: tuple[Any, dict[str, Any]] | None = None
        if inbox_id is not None and inbox_status is not None:
            values: dict[str, Any] = {"status": inbox_status, "updated_at": now}
            if reply is not None:
                values["reply"] = reply
            inbox_stmt = (_inbox_update(expected), {"b_id": inbox_id, **_expected_params(expected), **values})
        touch = {"b_id": session_id, "updated_at": now}

        def op(conn: Connection) -> None:
            if guard is not None and not guard(conn):
                raise NotExpected(f"inbox row {inbox_id} was taken over by another instance")
            if inbox_stmt is not None and not conn.execute(*inbox_stmt).rowcount:
                raise NotExpected(f"inbox row {inbox_id} is no longer {expected}")
            if rows:
                conn.execute(_MESSAGES_INSERT, rows)
            conn.execute(_SESSION_TOUCH, touch)

        await self.run_write(op)
        if session_id in self._history_loading:
            self._history_loading[session_id] = True
        cached = self._history.get(session_id)
        if cached is not None:
            limit, tail = cached
            tail.extend(_openai_message(m) for m in msgs)
            if len(tail) > 2 * limit:  # trimmed now and then, not on every append
                tail[:] = _from_user_message(tail[-limit:])

    def history_changed(self, session_id: str) -> None:
        """Messages of the session changed other than by ``append_messages`` (hidden by /undo, /retry): the
        cached history goes, and a read under way is not kept."""
        self._history.pop(session_id, None)
        if session_id in self._history_loading:
            self._history_loading[session_id] = True

    # ---- retention (gateway/storage/retention.py) ----------------------------------------------------------

    async def prune_idle(self, cutoff: float, batch: int) -> dict[str, int]:
        """One small transaction: delete up to ``batch`` messages of sessions idle since before ``cutoff``, up
        to ``batch`` finished inbox rows (with their outbox rows) of session keys with no session active since
        then, up to ``batch`` chat-log rows of chats idle since then and usage rows older than it. Returns what
        it deleted; zeros when there is nothing left."""
        finished = ("done", "failed", "cancelled", "rejected", "denied")

        def op(conn: Connection) -> tuple[dict[str, int], set[str]]:
            idle = select(sessions.c.id).where(sessions.c.updated_at < cutoff)
            rows = conn.execute(select(messages.c.id, messages.c.session_id)
                                .where(messages.c.session_id.in_(idle)).limit(batch)).all()
            if rows:
                conn.execute(messages.delete().where(messages.c.id.in_([r.id for r in rows])))
            active_keys = select(sessions.c.key).where(sessions.c.updated_at >= cutoff)
            inbox_ids = conn.execute(select(inbox.c.id).where(and_(
                inbox.c.updated_at < cutoff, inbox.c.status.in_(finished),
                inbox.c.session_key.not_in(active_keys))).limit(batch)).scalars().all()
            sent = 0
            if inbox_ids:
                sent = conn.execute(outbox.delete().where(outbox.c.inbox_id.in_(inbox_ids))).rowcount
                conn.execute(inbox.delete().where(inbox.c.id.in_(inbox_ids)))
            # The web chat's log of a chat nobody wrote in since the cutoff, and token usage older than it
            # (it names users and sessions too); memories stay: each user keeps or forgets them (/forget).
            newer = chat_log.alias("newer")
            stale_chat = ~select(newer.c.id).where(and_(
                newer.c.platform == chat_log.c.platform, newer.c.chat_id == chat_log.c.chat_id,
                newer.c.updated_at >= cutoff)).exists()
            log_ids = conn.execute(select(chat_log.c.id).where(and_(chat_log.c.updated_at < cutoff, stale_chat))
                                   .limit(batch)).scalars().all()
            if log_ids:
                conn.execute(chat_log.delete().where(chat_log.c.id.in_(log_ids)))
            # gateway.daily_token_budget counts today's usage, whatever retention says.
            usage_cutoff = min(cutoff, time.time() - 86_400)
            usage_ids = conn.execute(select(usage.c.id).where(usage.c.created_at < usage_cutoff)
                                     .limit(batch)).scalars().all()
            if usage_ids:
                conn.execute(usage.delete().where(usage.c.id.in_(usage_ids)))
            counts = {"messages": len(rows), "inbox": len(inbox_ids), "outbox": int(sent or 0),
                      "chat_log": len(log_ids), "usage": len(usage_ids)}
            return counts, {r.session_id for r in rows}

        counts, pruned = await self.run_write(op)
        for session_id in pruned:  # the history cache must not serve what the database no longer has
            self._history.pop(session_id, None)
        return counts

    # ---- chat log (web chat history) ---------------------------------------------------------

    async def chat_log_add(self, platform: str, chat_id: str, message_id: str, role: str, text: str,
                           buttons: list[dict[str, Any]] | None = None, user_id: str | None = None,
                           wait: bool = True) -> bool:
        now = time.time()
        try:
            await self.run_write(op_exec(insert(chat_log).values(
                platform=platform, chat_id=chat_id, message_id=message_id, role=role, user_id=user_id,
                text=text, buttons=buttons, created_at=now, updated_at=now,
            )), wait=wait)
            return True
        except Exception as exc:
            if is_unique_violation(exc):
                return False
            raise

    async def chat_log_edit(self, platform: str, message_id: str, text: str | None,
                            buttons: list[dict[str, Any]] | None) -> dict[str, Any] | None:
        values: dict[str, Any] = {"updated_at": time.time(), "buttons": buttons}
        if text is not None:
            values["text"] = text
        where = and_(chat_log.c.platform == platform, chat_log.c.message_id == message_id)

        def op(conn: Connection) -> dict[str, Any] | None:
            conn.execute(update(chat_log).where(where).values(**values))
            row = conn.execute(select(chat_log).where(where)).first()
            return dict(row._mapping) if row else None

        return await self.run_write(op)

    async def chat_log_get(self, platform: str, message_id: str) -> dict[str, Any] | None:
        return await self.run_read(op_first(
            select(chat_log).where(and_(chat_log.c.platform == platform, chat_log.c.message_id == message_id))
        ))

    async def chat_log_list(self, platform: str, chat_id: str, limit: int = 500) -> list[dict[str, Any]]:
        rows = await self.run_read(op_all(
            select(chat_log)
            .where(and_(chat_log.c.platform == platform, chat_log.c.chat_id == chat_id))
            .order_by(chat_log.c.id.desc())
            .limit(limit)
        ))
        rows.reverse()
        return rows

    # ---- platform cursors (adapters that read back what was posted while they were away) ----------

    async def cursors_load(self, platform: str) -> dict[str, str]:
        rows = await self.run_read(op_all(
            select(platform_cursors.c.chat_id, platform_cursors.c.position)
            .where(platform_cursors.c.platform == platform)))
        return {r["chat_id"]: r["position"] for r in rows}

    async def cursors_save(self, platform: str, cursors: Mapping[str, str]) -> None:
        """Set each chat's position (one transaction for the lot: an adapter saves what moved since last time)."""
        now = time.time()
        values = [{"b_platform": platform, "b_chat": chat, "position": pos, "updated_at": now}
                  for chat, pos in cursors.items()]
        if not values:
            return

        def op(conn: Connection) -> None:
            for row in values:
                if conn.execute(_CURSOR_UPDATE, row).rowcount == 0:
                    conn.execute(insert(platform_cursors).values(
                        platform=row["b_platform"], chat_id=row["b_chat"], position=row["position"],
                        updated_at=row["updated_at"]))

        await self.run_write(op)


# Hot-path statements built once: parameters travel separately, so SQLAlchemy skips re-building (and
# re-coercing) a statement per message and hits its compiled cache directly.
_INBOX_INSERT = insert(inbox)
_INBOX_UPDATE = update(inbox).where(inbox.c.id == bindparam("b_id"))
_INBOX_UPDATE_FROM = _INBOX_UPDATE.where(inbox.c.status == bindparam("b_expected"))
_OUTBOX_UPDATE = update(outbox).where(outbox.c.id == bindparam("b_id"))
_INBOX_OWNED = (select(inbox.c.id).where(and_(inbox.c.id == bindparam("b_id"), inbox.c.owner == bindparam("b_owner")))
                .with_for_update())
_CURSOR_UPDATE = update(platform_cursors).where(and_(platform_cursors.c.platform == bindparam("b_platform"),
                                                     platform_cursors.c.chat_id == bindparam("b_chat")))


def _inbox_update(expected: str | tuple[str, ...] | None) -> Any:
    if expected is None:
        return _INBOX_UPDATE
    if isinstance(expected, str):
        return _INBOX_UPDATE_FROM
    return _INBOX_UPDATE.where(inbox.c.status.in_(expected))


def _expected_params(expected: str | tuple[str, ...] | None) -> dict[str, Any]:
    return {"b_expected": expected} if isinstance(expected, str) else {}
_OUTBOX_INSERT = insert(outbox)
_MESSAGES_INSERT = insert(messages)
_SESSION_TOUCH = update(sessions).where(sessions.c.id == bindparam("b_id"))
_SESSION_OPTIONAL = ("user_id", "title", "model", "reasoning_effort", "personality")
# What the model sees of a session: its messages, less those /undo and /retry took out.
_VISIBLE = messages.c.hidden_at.is_(None)
_HISTORY = (
    select(messages.c.role, messages.c.content, messages.c.tool_calls, messages.c.tool_call_id)
    .where(and_(messages.c.session_id == bindparam("b_session"), _VISIBLE))
    .order_by(messages.c.id)
)
_HISTORY_TAIL = (
    select(messages.c.role, messages.c.content, messages.c.tool_calls, messages.c.tool_call_id)
    .where(and_(messages.c.session_id == bindparam("b_session"), _VISIBLE))
    .order_by(messages.c.id.desc())
    .limit(bindparam("b_limit"))
)


def _from_user_message(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    start = next((n for n, m in enumerate(msgs) if m["role"] == "user"), len(msgs))
    return msgs[start:]


def _openai_message(m: dict[str, Any]) -> dict[str, Any]:
    """What ``_to_openai`` makes of the row ``append_messages`` writes for ``m``."""
    msg: dict[str, Any] = {"role": m["role"], "content": m.get("content")}
    if m.get("tool_calls"):
        msg["tool_calls"] = m["tool_calls"]
    if m.get("tool_call_id"):
        msg["tool_call_id"] = m["tool_call_id"]
    return msg


def _to_openai(row: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": row.role, "content": row.content}
    if row.tool_calls:
        msg["tool_calls"] = row.tool_calls if not isinstance(row.tool_calls, str) else json.loads(row.tool_calls)
    if row.tool_call_id:
        msg["tool_call_id"] = row.tool_call_id
    return msg
