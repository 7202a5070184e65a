"""A session's messages, as the model sees them (OpenAI chat messages: role, content, tool calls and results),
each tagged with the inbox row whose turn stored it: a turn's steps are appended as they complete, and the
history a turn sends the model is read back here, through a cache of the newest messages of recently active
sessions. /undo and /retry hide rows (gateway/session/history.py); retention deletes them.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import and_, bindparam, func, insert, select, update
from sqlalchemy.engine import Connection

from gateway.storage.db import Database
from gateway.storage.inbox import NotExpected, expected_params, inbox_update
from gateway.storage.tables import inbox, messages, sessions

HISTORY_CACHE_SESSIONS = 256


class MessageStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        # The newest messages of recently active sessions, as each turn sends them to the model: loading
        # and decoding them from the database every turn was a fifth of the per-message CPU. Appends go
        # through ``append`` (the only writer of ``messages``), which keeps these in step; /undo and /retry
        # mark rows hidden and drop the session's entry (``changed``).
        self._history: OrderedDict[str, tuple[int, list[dict[str, Any]]]] = OrderedDict()
        self._history_loading: dict[str, bool] = {}  # session id -> an append raced its read

    async def history(self, session_id: str, limit: int = 0) -> list[dict[str, Any]]:
        """The session's messages in order; with ``limit``, the newest ``limit`` of them, starting at a user
        message (a tool result without its call, or a call without its result, is invalid for the model)."""
        if not limit:
            params: dict[str, Any] = {"b_session": session_id}
            return await self.db.run_read(lambda conn: [_to_openai(r) for r in conn.execute(_HISTORY, params)])
        cached = self._history.get(session_id)
        if cached is not None and cached[0] == limit:
            self._history.move_to_end(session_id)
            tail = cached[1]
            return _from_user_message(tail[-limit:]) if len(tail) > limit else list(tail)
        params = {"b_session": session_id, "b_limit": limit}
        self._history_loading[session_id] = False
        try:
            newest = await self.db.run_read(
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

    async def resume_history(self, session_id: str, inbox_id: int, limit: int = 0) -> list[dict[str, Any]]:
        """What a turn resumed after a crash sends the model: the history before the turn (with ``limit``, its
        newest ``limit`` messages, starting at a user message) and the turn's own stored messages in full,
        its user message first. ``history``'s tail could cut into the turn itself, or hold none of it once
        the turn has stored more than ``limit`` steps."""
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

        return await self.db.run_read(op)

    async def turn_messages(self, inbox_id: int) -> list[dict[str, Any]]:
        """Every message a turn stored for ``inbox_id``, in order (hidden ones too: they were sent)."""
        stmt = (select(messages.c.role, messages.c.content, messages.c.tool_calls, messages.c.tool_call_id)
                .where(messages.c.inbox_id == inbox_id).order_by(messages.c.id))
        return await self.db.run_read(lambda conn: [_to_openai(r) for r in conn.execute(stmt)])

    async def turn_steps(self, inbox_id: int) -> tuple[str, int] | None:
        """(session id, messages stored) of the turn answering ``inbox_id``, if it stored any."""
        # A turn compressed while it ran has rows in the session it left too: the newest session is its own.
        stmt = (select(messages.c.session_id, func.count()).where(messages.c.inbox_id == inbox_id)
                .group_by(messages.c.session_id).order_by(func.max(messages.c.id).desc()))
        row = await self.db.run_read(lambda conn: conn.execute(stmt).first())
        return (row[0], int(row[1])) if row else None

    async def count(self, session_id: str) -> int:
        stmt = select(func.count()).select_from(messages).where(messages.c.session_id == session_id)
        return int(await self.db.run_read(lambda conn: conn.execute(stmt).scalar_one()))

    async def append(self, session_id: str, msgs: Iterable[dict[str, Any]],
                     inbox_id: int | None = None, inbox_status: str | None = None,
                     reply: str | None = None, expected: str | tuple[str, ...] = "pending",
                     guard: Callable[[Connection], bool] | None = None,
                     finished: Iterable[int] | None = None) -> None:
        """Persist messages of a turn (tagged with the inbox row they answer) and, with ``inbox_status``, move
        that row on from ``expected``, in one transaction. Raises ``NotExpected`` (and stores nothing) when
        the row is no longer in ``expected``, or ``guard`` says no: the message was finished or taken over
        elsewhere. ``finished``: other pending inbox rows whose messages these are (sent while the turn ran
        and taken into it), done in the same transaction."""
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
            inbox_stmt = (inbox_update(expected), {"b_id": inbox_id, **expected_params(expected), **values})
        touch = {"b_id": session_id, "updated_at": now}
        taken = [{"b_id": n, "b_expected": "pending", "status": "done", "updated_at": now} for n in finished or ()]

        def op(conn: Connection) -> None:
            if guard is not None and not guard(conn):
                raise NotExpected(f"inbox row {inbox_id} was taken over by another instance")
            if inbox_stmt is not None and not conn.execute(*inbox_stmt).rowcount:
                raise NotExpected(f"inbox row {inbox_id} is no longer {expected}")
            for params in taken:
                if not conn.execute(inbox_update("pending"), params).rowcount:
                    raise NotExpected(f"inbox row {params['b_id']} is no longer pending")
            if rows:
                conn.execute(_MESSAGES_INSERT, rows)
            conn.execute(_SESSION_TOUCH, touch)

        await self.db.run_write(op)
        if session_id in self._history_loading:
            self._history_loading[session_id] = True
        cached = self._history.get(session_id)
        if cached is not None:
            limit, tail = cached
            tail.extend(_openai_message(m) for m in msgs)
            if len(tail) > 2 * limit:  # trimmed now and then, not on every append
                tail[:] = _from_user_message(tail[-limit:])

    async def park(self, inbox_id: int, error: str) -> bool:
        """Set a pending message aside for good (gateway/turns/attempts.py): its row ``parked`` and what its turns
        stored hidden from the model (``hidden_by`` "parked"), in one transaction. False when the row was not
        pending (finished, or parked, elsewhere)."""
        now = time.time()
        moved = (update(inbox).where(and_(inbox.c.id == inbox_id, inbox.c.status == "pending"))
                 .values(status="parked", error=error, updated_at=now))
        own = and_(messages.c.inbox_id == inbox_id, _VISIBLE)
        hide = update(messages).where(own).values(hidden_at=now, hidden_by="parked")

        def op(conn: Connection) -> set[str] | None:
            if not conn.execute(moved).rowcount:
                return None
            touched = set(conn.execute(select(messages.c.session_id).where(own).distinct()).scalars())
            conn.execute(hide)
            return touched

        sessions_changed = await self.db.run_write(op)
        if sessions_changed is None:
            return False
        for session_id in sessions_changed:
            self.changed(session_id)
        return True

    def changed(self, session_id: str) -> None:
        """Messages of the session changed other than by ``append`` (hidden by /undo, /retry): the cached
        history goes, and a read under way is not kept."""
        self._history.pop(session_id, None)
        if session_id in self._history_loading:
            self._history_loading[session_id] = True

    def forget_cached(self, session_id: str) -> None:
        """Drop the session's cached history (it was resumed, or retention deleted its messages)."""
        self._history.pop(session_id, None)


# Built once (see gateway/storage/inbox.py).
_MESSAGES_INSERT = insert(messages)
_SESSION_TOUCH = update(sessions).where(sessions.c.id == bindparam("b_id"))
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
    """What ``_to_openai`` makes of the row ``append`` writes for ``m``."""
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
