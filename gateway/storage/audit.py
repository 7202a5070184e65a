"""The audit trail of the agent in the conversation: what it did beyond answering (asked a question, sent a
message to another chat, read a web page, searched) and what people did to a running turn (steered it,
edited a message). One row per event, for the dashboard's audit view; the state those features need to be
exactly-once lives in their own tables. Written after the fact and never in the way: a failed write is
logged, the action it records goes on.
"""

from __future__ import annotations

import time
from typing import Any

import structlog
from sqlalchemy import desc, insert, select

from gateway.storage.db import Database
from gateway.storage.tables import audit_events

log = structlog.get_logger("herald.audit")

SUBJECT_LIMIT = 4000  # characters of a subject kept (a message's text, a page's address): the view shows less
RECENT = 50


class AuditLog:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def add(self, kind: str, subject: str, outcome: str, *, session_key: str | None = None,
                  platform: str | None = None, chat_id: str | None = None, user_id: str | None = None,
                  detail: str | None = None) -> None:
        values: dict[str, Any] = dict(created_at=time.time(), kind=kind, session_key=session_key, platform=platform,
                                      chat_id=chat_id, user_id=user_id, subject=subject[:SUBJECT_LIMIT],
                                      outcome=outcome, detail=detail[:SUBJECT_LIMIT] if detail else None)
        try:
            await self.db.run_write(lambda conn: conn.execute(insert(audit_events).values(**values)))
        except Exception as exc:
            log.warning("audit_not_recorded", kind=kind, outcome=outcome, error=f"{type(exc).__name__}: {exc}")


def recent_events(conn: Any, limit: int = RECENT) -> list[dict[str, Any]]:
    """The newest events, newest first (a read op for ``Store.run_read``)."""
    stmt = select(audit_events).order_by(desc(audit_events.c.id)).limit(limit)
    return [dict(r._mapping) for r in conn.execute(stmt)]
