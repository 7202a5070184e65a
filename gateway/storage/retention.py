"""``sessions.retention_days``: the messages, inbox and outbox rows of sessions idle longer than that, the
web chat's log of chats idle that long, and token usage older than that are deleted while the daemon runs.

Deletion goes in small batches (``Store.prune_idle``: a few hundred rows per transaction, run off the loop by
the store's writer) with a pause between them, so a first pass over years of history never holds the writer
long and never blocks the event loop. A pass runs shortly after start and then every hour. Session rows
themselves stay (a key, timestamps, the system prompt), so lineage and "idle since" remain readable.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

from gateway.storage.store import Store

log = structlog.get_logger("herald.retention")

DAY = 86_400.0


class Retention:
    def __init__(self, store: Store, days: float, *, batch: int = 500, pause: float = 0.05,
                 period: float = 3600.0, first_after: float = 30.0, clock: Callable[[], float] = time.time) -> None:
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
        total = {"messages": 0, "inbox": 0, "outbox": 0, "chat_log": 0, "usage": 0, "batches": 0}
        while True:
            counts = await self.store.prune_idle(cutoff, self.batch)
            total["batches"] += 1
            for key, n in counts.items():
                total[key] += n
            if all(counts[key] < self.batch for key in ("messages", "inbox", "chat_log", "usage")):
                return total
            await asyncio.sleep(self.pause)

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
