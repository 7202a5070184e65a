"""Poison messages: a message whose turn takes the daemon down with it (killed for its memory, a native crash)
would be taken up again after every restart, for ever, and take the daemon down each time.

Each start of a message's turn is counted on its inbox row before the turn computes, in a write that is durable
when ``begin`` returns (``InboxStore.attempt``), so a turn that dies with its process has counted; a turn cut
short by a clean shutdown gives its attempt back. A message whose ``gateway.max_attempts`` turns all began and
none finished is parked instead of run again: its row leaves the unfinished states (no instance takes it up
again, whichever one finds it), what its turns stored is hidden from the model (the next message does not walk
into it), and its chat is told once what happened and how to send it again. Recovery and routing park such a
row before they dispatch it, so a restarted daemon comes up clean; the dashboard lists parked messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog

from gateway.kernel.metrics import Counters
from gateway.platforms.base import Accepted, InboundMessage
from gateway.ports import Notifier
from gateway.storage.store import Store

log = structlog.get_logger("herald.turns")

QUOTED = 60  # characters of the message quoted in the notice, so the person knows which one it was


def parked_notice(msg: InboundMessage, attempts: int) -> str:
    words = " ".join(msg.text.split())
    which = "your message" if not words else (
        f"your message “{words if len(words) <= QUOTED else words[:QUOTED - 1] + '…'}”")
    return (f"⚠️ Herald stopped unexpectedly {attempts} times while working on {which} (it crashed or ran out of "
            "memory), so I have set it aside and will not try it again. If you still need an answer, send it "
            "again, perhaps reworded or in smaller parts.")


class Attempts:
    def __init__(self, store: Store, notifier: Notifier, limit: int, counters: Counters | None = None) -> None:
        self.store = store
        self.notifier = notifier
        self.limit = limit
        self.counters = counters if counters is not None else Counters()

    def exhausted(self, row: Mapping[str, Any]) -> bool:
        """A stored row (recovery, routing) whose turn may not start again: park it rather than dispatch it."""
        return row.get("status") == "pending" and int(row.get("attempts") or 0) >= self.limit

    async def begin(self, item: Accepted) -> bool:
        """Count this start of ``item``'s turn (durably, before it computes); False when it may not start: the
        message was parked instead and its chat told. Raises ``NotExpected`` when the row moved on meanwhile."""
        if await self.store.inbox.attempt(item.inbox_id, self.limit) is not None:
            return True
        await self.park(item.inbox_id, item.msg)
        return False

    async def give_back(self, inbox_id: int) -> None:
        """The turn ended without taking the process down (a clean shutdown cut it short)."""
        try:
            await self.store.inbox.give_back(inbox_id)
        except Exception as exc:  # at worst the message counts one attempt too many
            log.warning("attempt_not_given_back", inbox_id=inbox_id, error=f"{type(exc).__name__}: {exc}")

    async def park(self, inbox_id: int, msg: InboundMessage) -> bool:
        """Set the message aside and tell its chat, once: only the instance whose change took tells."""
        error = f"its turn began {self.limit} times and the daemon stopped each time; not tried again"
        if not await self.store.messages.park(inbox_id, error):
            return False
        self.counters.messages_parked += 1
        log.warning("message_parked", inbox_id=inbox_id, platform=msg.source.platform, attempts=self.limit)
        await self.notifier.notify(msg.source, parked_notice(msg, self.limit))
        return True
