"""What the daily commands do to a session's stored conversation: the last exchange (/undo, /retry), the
sessions of a key (/sessions, /resume), titles, and the search (/search).

An exchange is a user message and everything stored after it in the session (the turn's tool calls, their
results, the answer). /undo and /retry never delete it: its rows are marked hidden (``hidden_at``,
``hidden_by``), and histories and /search skip them, so the model never sees them again while the store
keeps what happened.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import structlog
from sqlalchemy import and_, func, insert, or_, select, update
from sqlalchemy.engine import Connection

from gateway.session import search as fts
from gateway.storage.db import is_unique_violation
from gateway.storage.store import Store
from gateway.storage.tables import inbox, messages, sessions

log = structlog.get_logger("herald.history")

TITLE_MAX = 60  # an automatic title; a /title may be longer (the column holds 200)


@dataclass
class Exchange:
    first_id: int  # the user message
    text: str
    rows: int  # messages from the user message on
    answer: str | None  # the last thing the assistant said in it


@dataclass
class SessionInfo:
    id: str
    title: str | None
    created_at: float
    updated_at: float
    messages: int


class History:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def last_exchange(self, session_id: str) -> Exchange | None:
        visible = and_(messages.c.session_id == session_id, messages.c.hidden_at.is_(None))

        def op(conn: Connection) -> Exchange | None:
            row = conn.execute(select(messages.c.id, messages.c.content)
                               .where(and_(visible, messages.c.role == "user"))
                               .order_by(messages.c.id.desc()).limit(1)).first()
            if row is None:
                return None
            rows = conn.execute(select(func.count()).select_from(messages)
                                .where(and_(visible, messages.c.id >= row.id))).scalar_one()
            said = [content_text(r.content) for r in conn.execute(
                select(messages.c.content).where(and_(visible, messages.c.id > row.id, messages.c.role == "assistant"))
                .order_by(messages.c.id.desc()).limit(5))]
            answer = next((text for text in said if text.strip()), None)
            return Exchange(row.id, content_text(row.content), int(rows), answer)

        return await self.store.run_read(op)

    async def undo(self, session_id: str, exchange: Exchange) -> int:
        """Hide ``exchange`` from the model; how many messages that took out."""
        hidden = await self.store.run_write(lambda conn: _hide(conn, session_id, exchange.first_id, "undo"))
        self.store.messages.changed(session_id)
        return int(hidden)

    async def retry(self, session_id: str, exchange: Exchange, row: dict[str, Any], command_message_id: str,
                    ) -> int | None:
        """Hide ``exchange`` and store ``row`` (an inbox row that asks it again) in one transaction: the
        retried message is durable exactly when the old answer is gone from the history. The /retry's own
        inbox row (``command_message_id``) is done in the same transaction: a restart right after must not
        find the command unfinished and tell its sender it was not run while the retry is answered. None
        when the row's platform message id was taken already (the same /retry twice): nothing changed."""
        command_row = and_(inbox.c.platform == row["platform"], inbox.c.platform_message_id == command_message_id,
                           inbox.c.status == "pending")

        def op(conn: Connection) -> int:
            inbox_id = int(conn.execute(insert(inbox).values(**row)).inserted_primary_key[0])
            _hide(conn, session_id, exchange.first_id, "retry")
            conn.execute(update(inbox).where(command_row).values(status="done", updated_at=row["created_at"]))
            return inbox_id

        try:
            inbox_id = await self.store.run_write(op)
        except Exception as exc:
            if is_unique_violation(exc):
                return None
            raise
        self.store.messages.changed(session_id)
        return int(inbox_id)

    async def sessions_of(self, key: str, current_id: str | None, limit: int = 10) -> list[SessionInfo]:
        """The sessions of ``key`` last active most recently that hold a message (and the current one, empty or
        not)."""
        count = (select(func.count()).select_from(messages)
                 .where(and_(messages.c.session_id == sessions.c.id, messages.c.hidden_at.is_(None)))
                 .scalar_subquery())
        has_any = select(messages.c.id).where(messages.c.session_id == sessions.c.id).exists()
        shown = has_any if current_id is None else or_(has_any, sessions.c.id == current_id)
        stmt = (select(sessions.c.id, sessions.c.title, sessions.c.created_at, sessions.c.updated_at,
                       count.label("n"))
                .where(and_(sessions.c.key == key, shown))
                .order_by(sessions.c.updated_at.desc(), sessions.c.created_at.desc()).limit(limit))
        rows = await self.store.run_read(lambda conn: conn.execute(stmt).all())
        return [SessionInfo(r.id, r.title, float(r.created_at), float(r.updated_at), int(r.n)) for r in rows]

    async def set_title(self, session_id: str, title: str, *, only_if_untitled: bool = False) -> bool:
        where = sessions.c.id == session_id
        if only_if_untitled:
            where = and_(where, sessions.c.title.is_(None))
        stmt = update(sessions).where(where).values(title=title)
        return bool(await self.store.run_write(lambda conn: conn.execute(stmt).rowcount))

    async def search(self, platform: str, user_id: str, words: list[str]) -> list[fts.Hit]:
        return await self.store.run_read(lambda conn: fts.search(conn, platform, user_id, words))


def _hide(conn: Connection, session_id: str, first_id: int, by: str) -> int:
    stmt = (update(messages)
            .where(and_(messages.c.session_id == session_id, messages.c.id >= first_id, messages.c.hidden_at.is_(None)))
            .values(hidden_at=time.time(), hidden_by=by))
    return int(conn.execute(stmt).rowcount)


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def auto_title(text: str) -> str | None:
    """A title made of the first words of a message, or None when it has none."""
    words = text.split()
    if not words:
        return None
    title = ""
    for word in words:
        if len(title) + len(word) + 1 > TITLE_MAX:
            break
        title = f"{title} {word}" if title else word
    if not title:  # one very long word
        title = words[0][:TITLE_MAX - 1]
    return title + ("…" if title != " ".join(words) else "")


async def title_untitled(history: History, session: dict[str, Any], text: str) -> None:
    """After an exchange, a session without a title gets the first words of ``text``. It runs after the
    reply went out and never raises: a title is not worth a turn."""
    if session.get("title"):
        return
    title = auto_title(text)
    if title is None:
        return
    try:
        await history.set_title(session["id"], title, only_if_untitled=True)
        session["title"] = title  # the cached row: the next turns skip all this
    except Exception as exc:
        log.warning("auto_title_failed", error=f"{type(exc).__name__}: {exc}")
