"""Which session an API request talks in.

A conversation is a chat of the key's holder: pinned by name (``X-Herald-Session``), by the response it follows
(``previous_response_id``: the chat of that response's request), or, for clients that resend the whole history
each time (Open WebUI), named by the client's ``user`` and a hash of the conversation's first user message — so
the next message is answered in the same session instead of from scratch.

Whether that session holds what the client holds is settled in the session's lane, just before the turn (the
adapter's ``prepare``), when the turns before it have stored their messages:

- history a client resends: its user messages are compared with the session's (visible ones, in order; a
  compressed session's with the end of the client's). Equal: the turn continues it. Else another recent session of
  the key that matches is resumed (a client switching between branches of an edited conversation); else the
  conversation forks: a new session (``parent_id``: the one it shares the most with, lineage kept) gets the
  messages both agree on — tool calls included — and then the client's own messages after the edit.
- ``previous_response_id``: the session goes on when that response is its newest turn; an older one forks the
  session at that response.
- a message pinned by name with nothing before it is appended: the session is the one its name has.

The client's answers are taken as the client has them only where the session has none of its own (a history it
never saw, or past an edit); the assistant messages a client resends are never compared (it may show them
otherwise: progress lines, a cut stream). A continued session is kept from its idle reset: the client sees the
conversation going on. The request's ``model`` sets the session's model (``herald/<name>``; the agent's own id
goes back to the default).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

import structlog
from sqlalchemy import and_, func, select

from gateway.kernel.attached import split_files
from gateway.kernel.untrusted import clean_text
from gateway.platforms.base import Source
from gateway.session.keys import session_owner
from gateway.session.manager import SessionManager
from gateway.session.settings import SessionSettings
from gateway.storage.db import op_all, op_first
from gateway.storage.store import Store
from gateway.storage.tables import inbox, messages, sessions, usage

log = structlog.get_logger("herald.api")

PLATFORM = "api"
# How many other sessions of a conversation are looked at for one the client's history matches.
BRANCHES = 8
_VISIBLE = messages.c.hidden_at.is_(None)
_FINAL = ("done", "failed", "cancelled", "rejected", "denied")


def digest(text: str) -> str:
    return hashlib.sha256(clean_text(text).strip().encode()).hexdigest()[:32]


def chat_for(holder: str, *, pinned: str | None = None, user: str = "", first: str = "") -> str:
    """The chat id of a conversation: the holder's, by name, or by the client's user and first message."""
    if pinned is not None:
        return f"{holder}:s:{pinned}"
    named = hashlib.sha256("\0".join((user, first.strip())).encode()).hexdigest()[:24]
    return f"{holder}:c:{named}"


def _text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content)


def _prefix(stored: list[str], users: list[str]) -> int:
    n = 0
    while n < len(stored) and n < len(users) and stored[n] == users[n]:
        n += 1
    return n


def _continues(row: dict[str, Any], stored: list[str], users: list[str]) -> bool:
    """The client's user messages are the session's (a compressed session holds only the newest of them)."""
    if row.get("summary"):
        return len(users) >= len(stored) and users[len(users) - len(stored):] == stored
    return users == stored


class Conversations:
    def __init__(self, store: Store, sessions: SessionManager, settings: SessionSettings,
                 key_for: Callable[[Source], str], model_name: str) -> None:
        self.store = store
        self.sessions = sessions
        self.settings = settings
        self.key_for = key_for
        self.model_name = model_name

    # ---- models ------------------------------------------------------------------------------------------

    def models(self) -> list[str]:
        """The agent, then each model it may use as ``<agent>/<name>``."""
        return [self.model_name] + [f"{self.model_name}/{name}" for name in self.settings.model_choices()]

    def model_setting(self, asked: str) -> str | None:
        """The session's ``model`` for a request's ``model`` (None: the default); KeyError for an unknown one."""
        if asked == self.model_name:
            return None
        prefix = f"{self.model_name}/"
        name = asked[len(prefix):] if asked.startswith(prefix) else None
        if name is None or name not in self.settings.model_choices():
            raise KeyError(asked)
        return None if name == self.settings.default_model else name

    # ---- at request time -----------------------------------------------------------------------------------

    async def plan(self, source: Source, prior: list[tuple[str, str]]) -> dict[str, Any]:
        """What ``settle`` needs of a resent history: every user message's digest, and the texts past what the
        session holds now (the turn may find it holding more by then, never less but by a fork)."""
        users = [digest(text) for role, text in prior if role == "user"]
        key = self.key_for(source)
        active = self.sessions.peek(key) or await self.store.sessions.active(key)
        known = 0
        if active is not None and not active.get("summary"):
            known = _prefix(await self._users_of(active["id"]), users)
        return {"mode": "history", "users": users, "from": known, "tail": _from_user(prior, known)}

    async def request(self, request_id: str) -> dict[str, Any] | None:
        """The inbox row of a request (its status, reply, chat and holder), or None."""
        row = await self.store.run_read(op_first(
            select(inbox.c.id, inbox.c.status, inbox.c.reply, inbox.c.payload)
            .where(and_(inbox.c.platform == PLATFORM, inbox.c.platform_message_id == request_id))), wait=False)
        if row is None:
            return None
        payload = row["payload"] if isinstance(row["payload"], dict) else json.loads(row["payload"])
        source = payload.get("source") or {}
        return {"inbox_id": row["id"], "status": row["status"], "reply": row["reply"],
                "chat_id": source.get("chat_id"), "holder": source.get("user_id")}

    async def outcome(self, request_id: str) -> tuple[str, str | None] | None:
        """(status, stored reply) once the request's row is finished; None while it is not."""
        row = await self.request(request_id)
        if row is None or row["status"] not in _FINAL:
            return None
        return row["status"], row["reply"]

    async def usage(self, request_id: str) -> tuple[int, int, int]:
        """(prompt, completion, cached) tokens the request's turn spent."""
        own = select(inbox.c.id).where(and_(inbox.c.platform == PLATFORM, inbox.c.platform_message_id == request_id))
        row = await self.store.run_read(op_first(
            select(func.coalesce(func.sum(usage.c.prompt_tokens), 0).label("p"),
                   func.coalesce(func.sum(usage.c.completion_tokens), 0).label("c"),
                   func.coalesce(func.sum(usage.c.cached_tokens), 0).label("k"))
            .where(usage.c.inbox_id == own.scalar_subquery())), wait=False)
        return (int(row["p"]), int(row["c"]), int(row["k"])) if row else (0, 0, 0)

    # ---- in the lane, before the turn ------------------------------------------------------------------------

    async def settle(self, source: Source, pending: dict[str, Any]) -> None:
        plan = pending.get("conversation") or {}
        key = self.key_for(source)
        if plan.get("mode") == "history":
            await self._history(key, source, plan)
        elif plan.get("mode") == "after":
            await self._after(key, source, int(plan["inbox"]))
        await self._model(key, source, pending.get("model"))

    async def _history(self, key: str, source: Source, plan: dict[str, Any]) -> None:
        users: list[str] = list(plan.get("users") or [])
        active = self.sessions.peek(key) or await self.store.sessions.active(key)
        if active is None and not users:
            return  # a new conversation: its turn begins the session
        best, best_at = active, 0
        for row in [r for r in [active] if r is not None] + await self._others(key, active):
            stored = await self._users_of(row["id"])
            if _continues(row, stored, users):
                if row is active:
                    self._keep(key, row)
                else:
                    await self.sessions.resume(key, row["id"])
                return
            shared = 0 if row.get("summary") else _prefix(stored, users)
            if shared > best_at:
                best, best_at = row, shared
        kept = await self._before_user(best["id"], best_at) if best is not None and best_at else []
        seed = [{"role": role, "content": text}
                for role, text in _from_user([tuple(m) for m in plan.get("tail") or []],  # type: ignore[misc]
                                             max(0, best_at - int(plan.get("from") or 0)))]
        await self._fork(key, source, best, kept + seed, f"history differs from user message {best_at + 1}")

    async def _after(self, key: str, source: Source, inbox_id: int) -> None:
        active = self.sessions.peek(key) or await self.store.sessions.active(key)
        if active is not None and await self._newest_turn(active["id"]) == inbox_id:
            self._keep(key, active)
            return
        holder = await self._holding(key, inbox_id)
        if holder is None:
            return  # its messages are gone (retention): the conversation goes on where it is
        rows = await self.store.run_read(op_all(self._rows(holder["id"]).where(messages.c.id <= (
            select(func.max(messages.c.id)).where(and_(messages.c.session_id == holder["id"],
                                                       messages.c.inbox_id == inbox_id)).scalar_subquery()))))
        await self._fork(key, source, holder, [_message(r) for r in rows], "continues an earlier response")

    async def _fork(self, key: str, source: Source, parent: dict[str, Any] | None, history: list[dict[str, Any]],
                    why: str) -> None:
        row = await self.sessions.fork(key, source.platform, parent, source=source)
        if history:
            await self.store.messages.append(row["id"], history)
        log.info("api_conversation_forked", session_key=key, parent=parent["id"] if parent else None,
                 session_id=row["id"], messages=len(history), why=why)

    async def _model(self, key: str, source: Source, wanted: str | None) -> None:
        row = await self.sessions.get(key, source.platform, owner=session_owner(source), source=source)
        if row.get("model") != wanted:
            await self.store.sessions.update(row["id"], model=wanted)
            row["model"] = wanted

    def _keep(self, key: str, row: dict[str, Any]) -> None:
        """The client goes on with this conversation: it is not ended as idle under it. The turn's first write
        touches the row in the database; until then the cached row says so."""
        row["updated_at"] = time.time()
        self.sessions.activate(key, row)

    # ---- reads ---------------------------------------------------------------------------------------------

    @staticmethod
    def _rows(session_id: str) -> Any:
        return (select(messages.c.id, messages.c.role, messages.c.content, messages.c.tool_calls,
                       messages.c.tool_call_id)
                .where(and_(messages.c.session_id == session_id, _VISIBLE)).order_by(messages.c.id))

    async def _users_of(self, session_id: str) -> list[str]:
        stmt = (select(messages.c.content).where(and_(messages.c.session_id == session_id, messages.c.role == "user",
                                                      _VISIBLE)).order_by(messages.c.id))
        rows = await self.store.run_read(op_all(stmt))
        # A message stored with its images names their paths after its text; the client resends the text and the
        # images themselves, so the text alone is compared.
        return [digest(split_files(_text(r["content"]))[0]) for r in rows]

    async def _others(self, key: str, active: dict[str, Any] | None) -> list[dict[str, Any]]:
        """The key's other recent sessions (a compressed one lives on in its successor: not among them)."""
        stmt = (select(sessions).where(and_(sessions.c.key == key, sessions.c.ended_at.is_not(None),
                                            sessions.c.end_reason.is_distinct_from("compressed")))
                .order_by(sessions.c.updated_at.desc()).limit(BRANCHES))
        rows = await self.store.run_read(op_all(stmt))
        return [r for r in rows if active is None or r["id"] != active["id"]]

    async def _before_user(self, session_id: str, index: int) -> list[dict[str, Any]]:
        """The session's messages before its user message number ``index`` (0-based), or all of them."""
        out: list[dict[str, Any]] = []
        seen = 0
        for row in await self.store.run_read(op_all(self._rows(session_id))):
            if row["role"] == "user":
                if seen == index:
                    break
                seen += 1
            out.append(_message(row))
        return out

    async def _newest_turn(self, session_id: str) -> int | None:
        row = await self.store.run_read(op_first(
            select(messages.c.inbox_id).where(and_(messages.c.session_id == session_id,
                                                   messages.c.inbox_id.is_not(None), _VISIBLE))
            .order_by(messages.c.id.desc()).limit(1)))
        return row["inbox_id"] if row else None

    async def _holding(self, key: str, inbox_id: int) -> dict[str, Any] | None:
        """The session of ``key`` where the turn of ``inbox_id`` stored its messages (the newest, if several)."""
        stmt = (select(sessions).join(messages, messages.c.session_id == sessions.c.id)
                .where(and_(sessions.c.key == key, messages.c.inbox_id == inbox_id))
                .order_by(messages.c.id.desc()).limit(1))
        return await self.store.run_read(op_first(stmt))


def _from_user(prior: list[tuple[str, str]], index: int) -> list[tuple[str, str]]:
    """``prior`` from its user message number ``index`` (0-based) on; nothing when it has no such message."""
    seen = 0
    for at, (role, _text) in enumerate(prior):
        if role == "user":
            if seen == index:
                return [tuple(m) for m in prior[at:]]  # type: ignore[misc]
            seen += 1
    return []


def _message(row: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"role": row["role"], "content": row["content"]}
    calls = row["tool_calls"]
    if calls:
        out["tool_calls"] = json.loads(calls) if isinstance(calls, str) else calls
    if row["tool_call_id"]:
        out["tool_call_id"] = row["tool_call_id"]
    return out
