"""The tools' way into the audit trail (gateway/storage/audit.py): every turn's ``ToolContext.extras["audit"]``.

A tool in a worker thread records what it did (the page it read, the search it made) with the session and
chat of its turn; the row is written on the loop, after the fact, and never holds the tool up.
"""

from __future__ import annotations

from typing import Any

from gateway.platforms.base import Source
from gateway.ports import Lifecycle
from gateway.storage.audit import AuditLog
from gateway.storage.store import Store


class ToolAudit:
    def __init__(self, store: Store, life: Lifecycle) -> None:
        self.log = AuditLog(store)
        self.life = life

    def __call__(self, kind: str, subject: str, outcome: str, detail: str | None, ctx: Any) -> None:
        loop = self.life.loop
        if loop is None or loop.is_closed():
            return
        source: Source | None = (getattr(ctx, "extras", None) or {}).get("source")
        fields = dict(session_key=getattr(ctx, "session_key", None), detail=detail,
                      platform=source.platform if source else None, chat_id=source.chat_id if source else None,
                      user_id=source.user_id if source else None)

        def start() -> None:  # the coroutine is made on the loop, where it runs
            self.life.spawn(self.log.add(kind, subject, outcome, **fields), name="audit")

        try:
            loop.call_soon_threadsafe(start)
        except RuntimeError:  # the loop closed meanwhile (shutdown)
            pass
