"""Edited messages (``InboundMessage.edit_of``): what a person's edit does to the conversation.

An edit is accepted like a message — stored in the inbox under its own id (the message's and the edit's
time), so an edit event delivered twice is one row and acts once — and reaches the dispatch in the session's
owner, which hands it here instead of to the lane:

- the edited message has not started its turn (it waits in the lane, or is being prepared): its text is
  replaced, in memory and in its inbox row, and the model only ever sees the new text;
- its turn runs: the edit is steered into it as a correction ("the person edited their message to: …"),
  read before the agent's next step;
- its turn is over (or the message was never taken): ``gateway.on_edit`` — ``ignore`` (the default), ``steer``
  (into the session's running turn, or a turn of its own when none runs) or ``new_turn``.
"""

from __future__ import annotations

import structlog
from sqlalchemy import update

from gateway.config import GatewayConfig
from gateway.platforms.base import Accepted, InboundMessage, PlatformAdapter
from gateway.ports import Lifecycle
from gateway.storage.audit import AuditLog
from gateway.storage.store import Store
from gateway.storage.tables import inbox
from gateway.turns.lanes import Lane, Lanes

log = structlog.get_logger("herald.edits")


def correction(text: str) -> str:
    return f"[The person edited their earlier message to:]\n{text}"


def _waiting(lane: Lane, message_id: str) -> InboundMessage | None:
    """The edited message, still before its turn: queued, being prepared, or waiting to be steered in."""
    candidates = list(lane.queue)
    if lane.current is not None:
        candidates.append(lane.current)
    candidates += [s.item for s in lane.steered if s.item is not None and s.message is None]
    for item in candidates:
        if item.msg.platform_message_id == message_id and item.msg.edit_of is None:
            return item.msg
    return None


class Edits:
    def __init__(self, cfg: GatewayConfig, store: Store, lanes: Lanes, life: Lifecycle) -> None:
        self.cfg = cfg
        self.store = store
        self.lanes = lanes
        self.life = life
        self.audit = AuditLog(store)

    def take(self, adapter: PlatformAdapter, item: Accepted) -> None:
        """From the dispatch, synchronously (on the loop): decided now, against the lane as it is."""
        msg = item.msg
        assert msg.edit_of is not None
        if self.lanes.dispatched is not None:
            self.lanes.dispatched.add(item.inbox_id)
        lane = self.lanes.lane(item.key)
        original = _waiting(lane, msg.edit_of) if lane is not None else None
        if original is not None:
            original.text = msg.text
            self.life.spawn(self._replaced(item, original), name="edit:replace")
            return
        running = lane is not None and lane.turn is not None and lane.turn.item.msg.platform_message_id == msg.edit_of
        outcome = "steered" if running else self.cfg.on_edit
        if outcome == "ignore":
            self.life.spawn(self._done(item, "ignored"), name="edit:ignored")
        elif outcome == "new_turn":
            msg.text = correction(msg.text)
            self.lanes.submit(adapter, item, notify=False)
            self._audit(item, "new_turn")
        else:
            self.lanes.steer(adapter, item, correction(msg.text))
            self._audit(item, "steered")
        log.info("message_edited", session_key=item.key, edit_of=msg.edit_of, outcome=outcome)

    async def _replaced(self, item: Accepted, original: InboundMessage) -> None:
        """The queued message's row carries the new text too: a restart before its turn answers that."""
        stmt = (update(inbox).where(inbox.c.platform == original.source.platform,
                                    inbox.c.platform_message_id == original.platform_message_id,
                                    inbox.c.status == "pending")
                .values(payload=original.to_dict()))
        await self.store.run_write(lambda conn: conn.execute(stmt))
        log.info("message_edited", session_key=item.key, edit_of=item.msg.edit_of, outcome="replaced")
        await self._done(item, "replaced")

    async def _done(self, item: Accepted, outcome: str) -> None:
        await self.store.inbox.mark(item.inbox_id, "done", expected="pending")
        self._audit(item, outcome)

    def _audit(self, item: Accepted, outcome: str) -> None:
        src = item.msg.source
        self.life.spawn(self.audit.add("edit", item.msg.text, outcome, session_key=item.key, platform=src.platform,
                                       chat_id=src.chat_id, user_id=src.user_id, detail=item.msg.edit_of),
                        name="edit:audit")
