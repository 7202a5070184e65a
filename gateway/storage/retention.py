"""``sessions.retention_days``: the messages, inbox and outbox rows of sessions idle longer than that, the
web chat's log of chats idle that long, and token usage, the audit trail and finished questions and messages
to other chats older than that are deleted while the daemon runs — and the media of those sessions: the files
their user messages name (gateway/kernel/attached.py), and the copies of what the agent sent and the voice notes
made for them (named after the session). Only files inside the media folders are ever deleted.

Deletion goes in small batches (``Retention.prune_idle``: a few hundred rows per transaction, run off the loop
by the store's writer) with a pause between them, so a first pass over years of history never holds the writer
long and never blocks the event loop. A pass runs shortly after start and then every hour. Session rows
themselves stay (a key, timestamps, the system prompt), so lineage and "idle since" remain readable.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import structlog
from sqlalchemy import and_, select
from sqlalchemy.engine import Connection

from gateway.kernel.attached import split_files
from gateway.storage.store import Store
from gateway.storage.tables import (
    audit_events,
    chat_log,
    clarifications,
    inbox,
    messages,
    outbox,
    outgoing,
    sessions,
    usage,
)

log = structlog.get_logger("herald.retention")

DAY = 86_400.0


class Retention:
    def __init__(self, store: Store, days: float, *, batch: int = 500, pause: float = 0.05,
                 period: float = 3600.0, first_after: float = 30.0, clock: Callable[[], float] = time.time,
                 media: Iterable[Path] = ()) -> None:
        """``media``: the media folders (what people sent; the daemon's own, with ``out/``)."""
        self.media = [Path(os.path.realpath(m)) for m in media]
        self.store = store
        self.days = days
        self.batch = batch
        self.pause = pause  # between batches: other writes get the writer
        self.period = period
        self.first_after = first_after
        self.clock = clock

    async def prune(self) -> dict[str, int]:
        """One pass until nothing older is left; the totals deleted (and how many batches it took)."""
        cutoff = self.clock() - self.days * DAY
        total = {"messages": 0, "inbox": 0, "outbox": 0, "chat_log": 0, "usage": 0, "audit": 0, "media": 0,
                 "batches": 0}
        while True:
            counts = await self.prune_idle(cutoff)
            total["batches"] += 1
            for key, n in counts.items():
                total[key] += n
            if all(counts[key] < self.batch for key in ("messages", "inbox", "chat_log", "usage", "audit")):
                return total
            await asyncio.sleep(self.pause)

    async def prune_idle(self, cutoff: float) -> dict[str, int]:
        """One small transaction: delete up to ``batch`` messages of sessions idle since before ``cutoff``, up
        to ``batch`` finished inbox rows (with their outbox rows) of session keys with no session active since
        then, up to ``batch`` chat-log rows of chats idle since then and usage rows older than it. Returns what
        it deleted; zeros when there is nothing left."""
        batch = self.batch
        counts, pruned, files = await self.store.run_write(lambda conn: _delete_idle(conn, cutoff, batch))
        for session_id in pruned:  # the history cache must not serve what the database no longer has
            self.store.messages.forget_cached(session_id)
        counts["media"] = await asyncio.to_thread(_delete_media, self.media, files, pruned) if self.media else 0
        return counts

    async def run(self) -> None:
        await asyncio.sleep(self.first_after)  # let start-up's recovery and backlog go first
        while True:
            try:
                total = await self.prune()
                if any(n for key, n in total.items() if key != "batches"):
                    log.info("retention_pruned", days=self.days, **total)
            except Exception:
                log.exception("retention_failed")
            await asyncio.sleep(self.period)


_FINISHED = ("done", "failed", "cancelled", "rejected", "denied", "parked")


def _delete_idle(conn: Connection, cutoff: float, batch: int) -> tuple[dict[str, int], set[str], list[str]]:
    """``Retention.prune_idle``'s transaction: what it deleted, the sessions it deleted messages of, and the
    files their user messages named."""
    idle = select(sessions.c.id).where(sessions.c.updated_at < cutoff)
    rows = conn.execute(select(messages.c.id, messages.c.session_id, messages.c.role, messages.c.content)
                        .where(messages.c.session_id.in_(idle)).limit(batch)).all()
    files = [path for r in rows if r.role == "user" and isinstance(r.content, str)
             for path in split_files(r.content)[1]]
    if rows:
        conn.execute(messages.delete().where(messages.c.id.in_([r.id for r in rows])))
    active_keys = select(sessions.c.key).where(sessions.c.updated_at >= cutoff)
    inbox_ids = conn.execute(select(inbox.c.id).where(and_(
        inbox.c.updated_at < cutoff, inbox.c.status.in_(_FINISHED),
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
              "chat_log": len(log_ids), "usage": len(usage_ids), "audit": _delete_talk(conn, cutoff, batch)}
    return counts, {r.session_id for r in rows}, files


def _delete_talk(conn: Connection, cutoff: float, batch: int) -> int:
    """The audit trail, settled questions and finished messages to other chats (with their outbox rows) older
    than ``cutoff``: the most rows of any one of them deleted."""
    events = conn.execute(select(audit_events.c.id).where(audit_events.c.created_at < cutoff)
                          .limit(batch)).scalars().all()
    if events:
        conn.execute(audit_events.delete().where(audit_events.c.id.in_(events)))
    asked = conn.execute(select(clarifications.c.id).where(and_(
        clarifications.c.created_at < cutoff, clarifications.c.status != "pending")).limit(batch)).scalars().all()
    if asked:
        conn.execute(clarifications.delete().where(clarifications.c.id.in_(asked)))
    sent = conn.execute(select(outgoing.c.id).where(and_(
        outgoing.c.created_at < cutoff, outgoing.c.status.not_in(("queued", "sending")))).limit(batch)).scalars().all()
    if sent:
        conn.execute(outbox.delete().where(outbox.c.ref.in_([f"send:{n}" for n in sent])))
        conn.execute(outgoing.delete().where(outgoing.c.id.in_(sent)))
    return max(len(events), len(asked), len(sent))


def _inside(path: str, roots: list[Path]) -> bool:
    real = os.path.realpath(path)
    return any(real.startswith(str(root) + os.sep) for root in roots)


def _delete_media(roots: list[Path], files: list[str], sessions_pruned: set[str]) -> int:
    """The files a deleted session's messages named, and the daemon's files made for it: how many went."""
    gone = 0
    targets = [f for f in files if _inside(f, roots)]
    for root in roots:
        out = root / "out"
        if out.is_dir():
            targets += [str(p) for sid in sessions_pruned for pattern in (f"out-{sid}-*", f"voice-{sid}-*")
                        for p in out.glob(pattern)]
    for path in dict.fromkeys(targets):
        try:
            os.unlink(path)
            gone += 1
        except OSError:
            pass
    return gone


