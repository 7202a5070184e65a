"""Platform cursors: per platform, a position per chat (the id of the last message taken there), for adapters
that read back what was posted while they were away (Discord's backfill). The adapter sees them as
``gateway.platforms.base.Cursors``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from sqlalchemy import and_, bindparam, insert, select, update
from sqlalchemy.engine import Connection

from gateway.storage.db import Database, op_all
from gateway.storage.tables import platform_cursors


class CursorStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def load(self, platform: str) -> dict[str, str]:
        rows = await self.db.run_read(op_all(
            select(platform_cursors.c.chat_id, platform_cursors.c.position)
            .where(platform_cursors.c.platform == platform)))
        return {r["chat_id"]: r["position"] for r in rows}

    async def save(self, platform: str, cursors: Mapping[str, str]) -> None:
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

        await self.db.run_write(op)


_CURSOR_UPDATE = update(platform_cursors).where(and_(platform_cursors.c.platform == bindparam("b_platform"),
                                                     platform_cursors.c.chat_id == bindparam("b_chat")))
