"""The agent's questions with several instances on one database: a press that reaches an instance where the
question is not waiting (a load balancer in front of the web API, a webhook served by every instance).

A question waits in the instance whose turn asked (its broker holds the thread's future). The instance the press
reached forwards it to the question's owner (``clarifications.owner``) over the bus and waits for the owner's
notice for the presser; the owner decides exactly as if the press had come to it, so who may answer is judged in
one place. A question whose owner is gone was withdrawn (or is, at the next start). A typed answer needs no
forwarding: it is a message of the session, and messages are dispatched by the session's owner.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import TYPE_CHECKING, Any

import structlog
from sqlalchemy import select

from gateway.cluster.instance import Instance
from gateway.platforms.base import ButtonPress, Source
from gateway.ports import Adapters, Lifecycle
from gateway.storage.tables import clarifications

if TYPE_CHECKING:
    from gateway.talk.clarify import ClarifyBroker

log = structlog.get_logger("herald.clarify")

ANSWER_WITHIN = 10.0  # seconds the answering instance waits for the owner's notice
UNREACHABLE = ("I could not reach the Herald instance where this question waits; nothing was changed. Try again in "
               "a moment.")


class RemoteClarify:
    def __init__(self, broker: ClarifyBroker, bus: Any, instance: Instance, life: Lifecycle,
                 adapters: Adapters) -> None:
        self.broker = broker
        self.bus = bus
        self.instance = instance
        self.life = life
        self.adapters = adapters
        self._asked: dict[str, asyncio.Future[str]] = {}
        bus.on("clarify-press", self._on_press)
        bus.on("clarify-answer", self._on_answer)

    async def forward(self, press: ButtonPress, trusted: bool) -> str | None:
        """The owner's notice for a press on a question waiting elsewhere; None when it waits nowhere else."""
        parts = press.button_id.split(":")
        if len(parts) != 3:
            return None
        stmt = select(clarifications.c.owner).where(clarifications.c.id == parts[1],
                                                     clarifications.c.status == "pending")
        owner = await self.broker.store.run_read(lambda conn: conn.execute(stmt).scalar())
        if owner in (None, self.instance.id):
            return None
        await self.instance.refresh()
        if self.instance.gone(owner):
            return None  # withdrawn when that instance's successor starts: "no longer waiting"
        corr = uuid.uuid4().hex
        answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._asked[corr] = answer
        ask = {"press": {"source": press.source.to_dict(), "button_id": press.button_id}, "trusted": trusted,
               "platform": press.source.platform, "reply_to": self.instance.id, "corr": corr}
        try:
            await self.bus.send(owner, "clarify-press", json.dumps(ask))
            return await asyncio.wait_for(answer, ANSWER_WITHIN)
        except TimeoutError:
            log.warning("clarify_forward_unanswered", question_id=parts[1], owner=owner)
            return UNREACHABLE
        finally:
            self._asked.pop(corr, None)

    def _on_press(self, data: str) -> None:
        self.life.spawn(self._answer(json.loads(data)), name="clarify:forwarded")

    async def _answer(self, ask: dict[str, Any]) -> None:
        press = ButtonPress(Source.from_dict(ask["press"]["source"]), ask["press"]["button_id"])
        adapter = self.adapters.get(ask["platform"])
        try:
            notice = (await self.broker.decide(press, ask["trusted"]) if adapter is not None
                      else "This question is no longer waiting for an answer.")
        except Exception as exc:
            log.exception("clarify_forwarded_failed", button_id=press.button_id)
            notice = f"That did not work ({type(exc).__name__})."
        await self.bus.send(ask["reply_to"], "clarify-answer", json.dumps({"corr": ask["corr"], "notice": notice}))

    def _on_answer(self, data: str) -> None:
        answer = json.loads(data)
        future = self._asked.get(answer["corr"])
        if future is not None and not future.done():
            future.set_result(answer["notice"])
