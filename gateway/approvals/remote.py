"""Approvals with several instances on one database: an answer given where the request is not waiting.

A request waits in the instance whose turn asked (its broker holds the thread's future). A press, a typed
``/approve`` or the dashboard may reach another instance (a load balancer in front of the web API, an
approver whose own session lives elsewhere). That instance forwards the answer to the request's owner
(``approvals.owner``) over the bus and waits for the owner's notice for the presser: the owner decides exactly
as if the answer had come to it (who may decide, scheduled scripts, grants, the prompt's edit), so there is
one place where a request's outcome is fixed. A request whose owner is gone is denied, as at a restart.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog
from sqlalchemy import and_, select

from gateway.cluster.instance import Instance
from gateway.platforms.base import Source
from gateway.ports import Lifecycle
from gateway.storage.tables import approvals

if TYPE_CHECKING:
    from gateway.approvals.broker import ApprovalBroker

log = structlog.get_logger("herald.approvals")

ANSWER_WITHIN = 10.0  # seconds the answering instance waits for the owner's notice
UNREACHABLE = ("I could not reach the Herald instance where this command waits; nothing was changed. "
               "Try again in a moment.")
OWNER_GONE = ("This approval is no longer active: the Herald instance that asked for it stopped, so the command "
              "was not run.")


@dataclass(frozen=True)
class Waiting:
    """A request waiting in another instance, as the chat's commands see it (``may_decide`` reads ``source``)."""

    id: str
    source: Source
    owner: str
    asked_in = None  # the row names the chat the prompt is in: ``source`` is that chat

    @property
    def chat(self) -> Source:
        return self.source


class RemoteApprovals:
    def __init__(self, broker: ApprovalBroker, bus: Any, instance: Instance, life: Lifecycle) -> None:
        self.broker = broker
        self.bus = bus
        self.instance = instance
        self.life = life
        self._asked: dict[str, asyncio.Future[str]] = {}
        bus.on("approval-decide", self._on_decide)
        bus.on("approval-answer", self._on_answer)

    async def _rows(self, where: Any) -> list[dict[str, Any]]:
        stmt = select(approvals).where(and_(approvals.c.status == "pending", where)).order_by(approvals.c.created_at)
        return await self.broker.store.store.run_read(lambda conn: [dict(r._mapping) for r in conn.execute(stmt)])

    async def waiting_in_chat(self, platform: str, chat_id: str) -> list[Waiting]:
        rows = await self._rows(and_(approvals.c.platform == platform, approvals.c.chat_id == chat_id,
                                     approvals.c.owner != self.instance.id))
        return [Waiting(r["id"], _source(r), r["owner"]) for r in rows]

    async def forward(self, approval_id: str, choice: str, by: Source | None, via: str,
                      trusted: bool) -> str | None:
        """The owner's notice for an answer to a request waiting elsewhere; None when it waits nowhere else.
        ``by`` None: the operator (the dashboard), named by the owner from its own copy of the request."""
        rows = await self._rows(approvals.c.id == approval_id)
        if not rows or rows[0]["owner"] in (None, self.instance.id):
            return None
        row = rows[0]
        await self.instance.refresh()
        if self.instance.gone(row["owner"]):
            await self.broker.store.deny_stale([approval_id])
            self.life.spawn(self.broker.tell_restarted([row]), name="approvals:owner-gone")
            log.info("approval_decided", approval_id=approval_id, outcome="denied", via="owner-gone",
                     session_key=row["session_key"])
            return OWNER_GONE
        corr = uuid.uuid4().hex
        answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._asked[corr] = answer
        ask = {"id": approval_id, "choice": choice, "by": by.to_dict() if by is not None else None, "via": via,
               "trusted": trusted, "reply_to": self.instance.id, "corr": corr}
        try:
            await self.bus.send(row["owner"], "approval-decide", json.dumps(ask))
            return await asyncio.wait_for(answer, ANSWER_WITHIN)
        except TimeoutError:
            log.warning("approval_forward_unanswered", approval_id=approval_id, owner=row["owner"])
            return UNREACHABLE
        finally:
            self._asked.pop(corr, None)

    def _on_decide(self, data: str) -> None:
        self.life.spawn(self._decide(json.loads(data)), name="approvals:forwarded")

    async def _decide(self, ask: dict[str, Any]) -> None:
        try:
            if ask["by"] is None:
                notice = await self.broker.decide_as_operator(ask["id"], ask["choice"], forward=False)
            else:
                notice = await self.broker.decide(ask["id"], ask["choice"], Source.from_dict(ask["by"]), ask["via"],
                                                  ask["trusted"], forward=False)
        except Exception as exc:
            log.exception("approval_forwarded_failed", approval_id=ask["id"])
            notice = f"That did not work ({type(exc).__name__})."
        await self.bus.send(ask["reply_to"], "approval-answer", json.dumps({"corr": ask["corr"], "notice": notice}))

    def _on_answer(self, data: str) -> None:
        answer = json.loads(data)
        future = self._asked.get(answer["corr"])
        if future is not None and not future.done():
            future.set_result(answer["notice"])


def _source(row: dict[str, Any]) -> Source:
    return Source(row["platform"], row["chat_id"], row["requested_by"] or "", thread_id=row["thread_id"])
