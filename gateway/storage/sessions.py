"""Session rows: one conversation of a session key (its system prompt, owner, title and settings), the active
one being the key's newest not ended; a /new ends it, a /resume brings an ended one back. Their messages are
gateway/storage/messages.py's.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import and_, insert, select, update
from sqlalchemy.engine import Connection

from gateway.storage.db import Database, op_exec, op_first
from gateway.storage.tables import sessions


class SessionStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def active(self, key: str) -> dict[str, Any] | None:
        return await self.db.run_read(op_first(
            select(sessions)
            .where(and_(sessions.c.key == key, sessions.c.ended_at.is_(None)))
            .order_by(sessions.c.created_at.desc())
            .limit(1)
        ))

    async def get(self, session_id: str) -> dict[str, Any] | None:
        return await self.db.run_read(op_first(select(sessions).where(sessions.c.id == session_id)))

    async def create(self, session_id: str, key: str, platform: str, system_prompt: str | None,
                     parent_id: str | None = None, **columns: Any) -> dict[str, Any]:
        """``columns``: the optional ones (user_id, title, model, reasoning_effort, personality)."""
        now = time.time()
        row = {
            "id": session_id, "key": key, "parent_id": parent_id, "platform": platform,
            "system_prompt": system_prompt, "created_at": now, "updated_at": now,
            "ended_at": None, "end_reason": None,
            **{name: columns.get(name) for name in _SESSION_OPTIONAL},
        }
        await self.db.run_write(op_exec(insert(sessions).values(**row)))
        return row

    async def update(self, session_id: str, **columns: Any) -> None:
        """Set optional columns of a session (its owner, title, settings)."""
        unknown = set(columns) - set(_SESSION_OPTIONAL)
        if unknown:
            raise ValueError(f"not a session setting: {sorted(unknown)}")
        await self.db.run_write(op_exec(update(sessions).where(sessions.c.id == session_id).values(**columns)))

    async def reopen(self, key: str, session_id: str, current_id: str | None) -> dict[str, Any] | None:
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

        return await self.db.run_write(op)

    async def end(self, session_id: str, reason: str) -> None:
        await self.db.run_write(op_exec(
            update(sessions)
            .where(and_(sessions.c.id == session_id, sessions.c.ended_at.is_(None)))
            .values(ended_at=time.time(), end_reason=reason)
        ))


_SESSION_OPTIONAL = ("user_id", "title", "model", "reasoning_effort", "personality", "voice")
