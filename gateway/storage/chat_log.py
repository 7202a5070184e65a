"""The chat log: what a platform without a history of its own (the web chat) serves back to its clients — each
message of a chat, the user's and ours, with its buttons, under the id the platform gave it. The adapter sees
it as ``gateway.platforms.base.ChatLog``.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import and_, insert, select, update
from sqlalchemy.engine import Connection

from gateway.storage.db import Database, is_unique_violation, op_all, op_exec, op_first
from gateway.storage.tables import chat_log

_CHAT_LOG_INSERT = insert(chat_log)  # built once: two rows per message of the web chat


class ChatLogStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(self, platform: str, chat_id: str, message_id: str, role: str, text: str,
                  buttons: list[dict[str, Any]] | None = None, user_id: str | None = None,
                  wait: bool = True, files: list[dict[str, Any]] | None = None) -> bool:
        """False when ``message_id`` is in the log already."""
        now = time.time()
        try:
            await self.db.run_write(op_exec((_CHAT_LOG_INSERT, {
                "platform": platform, "chat_id": chat_id, "message_id": message_id, "role": role, "user_id": user_id,
                "text": text, "buttons": buttons, "created_at": now, "updated_at": now, "files": files or None,
            })), wait=wait)
            return True
        except Exception as exc:
            if is_unique_violation(exc):
                return False
            raise

    async def edit(self, platform: str, message_id: str, text: str | None,
                   buttons: list[dict[str, Any]] | None) -> dict[str, Any] | None:
        values: dict[str, Any] = {"updated_at": time.time(), "buttons": buttons}
        if text is not None:
            values["text"] = text
        where = and_(chat_log.c.platform == platform, chat_log.c.message_id == message_id)

        def op(conn: Connection) -> dict[str, Any] | None:
            conn.execute(update(chat_log).where(where).values(**values))
            row = conn.execute(select(chat_log).where(where)).first()
            return dict(row._mapping) if row else None

        return await self.db.run_write(op)

    async def get(self, platform: str, message_id: str) -> dict[str, Any] | None:
        return await self.db.run_read(op_first(
            select(chat_log).where(and_(chat_log.c.platform == platform, chat_log.c.message_id == message_id))
        ))

    async def recent(self, platform: str, chat_id: str, limit: int = 500) -> list[dict[str, Any]]:
        """The newest ``limit`` messages of the chat, oldest first."""
        rows = await self.db.run_read(op_all(
            select(chat_log)
            .where(and_(chat_log.c.platform == platform, chat_log.c.chat_id == chat_id))
            .order_by(chat_log.c.id.desc())
            .limit(limit)
        ))
        rows.reverse()
        return rows
