"""The loop side of the agent's questions: the question is stored, shown in the chat the turn came from, and
the first valid answer settles it.

The prompt lists the choices — as buttons (``cq:<id>:<n>``) where the platform has them, numbered elsewhere —
and says a typed answer counts too. Who may answer is who may approve the turn's commands: the person who
asked the turn, ``approvals.approvers`` and admins, and only in that chat (and thread). A typed answer is
taken before the session's lane (``take``, called by the dispatch), so a session whose turn is busy waiting
still gets it, and "2" picks the second choice. Every settlement runs on the loop and the first one wins: a
press racing the timeout is decided by whichever reaches the loop first. The rows (``clarifications``) let a
starting daemon find the questions a gone instance left waiting: withdrawn, and the person told, never
silently lost.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import structlog
from sqlalchemy import insert, select, update

from gateway.cluster.instance import Instance
from gateway.config import Config
from gateway.inbound.access import AccessControl
from gateway.outbound.delivery import Delivery
from gateway.platforms.base import Accepted, Button, ButtonPress, OutboundMessage, PlatformAdapter, Source
from gateway.ports import Adapters, Lifecycle, Notifier
from gateway.storage.audit import AuditLog
from gateway.storage.store import Store
from gateway.storage.tables import clarifications
from gateway.talk.asking import Answer, ClarifyAsker, Question

log = structlog.get_logger("herald.clarify")

BUTTON_PREFIX = "cq"
LABEL_CHARS = 60  # a button's label; the whole choice is in the prompt's text


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} minutes" if seconds >= 60 else f"{seconds:g} seconds"


def _label(n: int, choice: str) -> str:
    text = f"{n}. {' '.join(choice.split())}"
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def _name(source: Source) -> str:
    return source.user_name or source.user_id


class ClarifyBroker:
    def __init__(self, cfg: Config, store: Store, delivery: Delivery, notifier: Notifier, adapters: Adapters,
                 access: AccessControl, life: Lifecycle, instance: Instance,
                 remote: Callable[[ClarifyBroker], Any] | None = None) -> None:
        """``remote``: with several instances on one database, makes what forwards a press on a question waiting
        in another instance to it (remote.py's ``RemoteClarify``)."""
        self.cfg = cfg
        self.store = store
        self.delivery = delivery
        self.notifier = notifier
        self.adapters = adapters
        self.access = access
        self.life = life
        self.instance = instance
        self.audit = AuditLog(store)
        self.pending: dict[str, Question] = {}  # insertion order = oldest first
        self.asker = ClarifyAsker(self)  # every turn's extras["clarify"]
        self.remote = remote(self) if remote is not None else None

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self.life.loop

    def timeout(self) -> float:
        return self.cfg.tools.clarify.timeout_seconds

    def asking(self, session_key: str) -> bool:
        """A question of this session's turn waits for its answer (a streamed reply shows nothing meanwhile)."""
        return any(q.session_key == session_key for q in self.pending.values())

    # ---- start: questions a gone instance left waiting -------------------------------------------------

    async def start(self) -> None:
        stmt = select(clarifications).where(clarifications.c.status == "pending").order_by(clarifications.c.created_at)
        rows = await self.store.run_read(lambda conn: [dict(r._mapping) for r in conn.execute(stmt)])
        await self.instance.refresh()  # after the rows: their owners' heartbeats are all in this read
        stale = [r for r in rows if self.instance.gone(r.get("owner"))]
        if not stale:
            return
        ids = [r["id"] for r in stale]
        done = (update(clarifications).where(clarifications.c.id.in_(ids), clarifications.c.status == "pending")
                .values(status="withdrawn", answered_via="restart", answered_at=time.time()))
        await self.store.run_write(lambda conn: conn.execute(done))
        for row in stale:
            log.info("clarify_withdrawn", question_id=row["id"], session_key=row["session_key"], via="restart")
        self.life.spawn(self._tell_restarted(stale), name="clarify:restarted")

    async def _tell_restarted(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            adapter = self.adapters.get(row["platform"])
            if adapter is None:
                continue
            for _ in range(600):  # this runs before the adapters connect: wait (a while) until this one can send
                if adapter.state == "connected" or self.life.stopping:
                    break
                await asyncio.sleep(0.1)
            if row["prompt_message_id"]:
                await self._edit(adapter, row["chat_id"], row["prompt_message_id"],
                                 f"❓ {row['question']}\n⚠️ Withdrawn: Herald restarted before anyone answered.",
                                 row["thread_id"])
            source = Source(row["platform"], row["chat_id"], row["requested_by"] or "", thread_id=row["thread_id"])
            await self.notifier.notify(source, "⚠️ Herald restarted while I was waiting for your answer, so this "
                                               f"question was withdrawn:\n> {row['question']}\nI'll ask again if I "
                                               "still need to know.")
            await self.audit.add("clarify", row["question"], "withdrawn", session_key=row["session_key"],
                                 platform=row["platform"], chat_id=row["chat_id"], user_id=row["requested_by"],
                                 detail="Herald restarted")

    # ---- asking ----------------------------------------------------------------------------------------

    async def begin(self, q: Question) -> None:
        """On the loop, from the thread: store the question, then show it."""
        self.pending[q.id] = q
        try:
            src = q.source
            await self.store.run_write(lambda conn: conn.execute(insert(clarifications).values(
                id=q.id, session_key=q.session_key, platform=src.platform, chat_id=src.chat_id,
                thread_id=src.thread_id, requested_by=src.user_id, question=q.question, choices=q.choices,
                status="pending", owner=self.instance.id, created_at=q.created_at)))
            q.stored = True
            log.info("clarify_asked", question_id=q.id, session_key=q.session_key, choices=len(q.choices))
            if q.future.done():
                return  # settled while the row was being written: whoever settled it records it
            adapter = self.adapters.get(src.platform)
            if adapter is None:
                self.finish(q, "no_answer", "error")
                return
            buttons = [Button(f"{BUTTON_PREFIX}:{q.id}:{n}", _label(n, c)) for n, c in enumerate(q.choices, 1)]
            out = OutboundMessage(self._prompt(q, adapter.capabilities.buttons),
                                  buttons=buttons if adapter.capabilities.buttons else [], thread_id=src.thread_id)
            report = await self.delivery.deliver(adapter, src.chat_id, out)
            if report.failed or not report.message_ids:
                log.warning("clarify_prompt_failed", question_id=q.id, error=report.error)
                self.finish(q, "no_answer", "error")
                return
            q.prompt_message_id = report.message_ids[-1]
            stmt = update(clarifications).where(clarifications.c.id == q.id).values(
                prompt_message_id=q.prompt_message_id)
            await self.store.run_write(lambda conn: conn.execute(stmt))
            if q.future.done():  # answered before the prompt had its id: nobody could edit it
                await self._edit(adapter, src.chat_id, q.prompt_message_id, self._closed_text(q, q.future.result()),
                                 src.thread_id)
        except Exception as exc:
            log.exception("clarify_failed", question_id=q.id)
            if not q.future.done():
                self._settle(q, Answer("no_answer", f"the question could not be asked ({type(exc).__name__})"))

    def _prompt(self, q: Question, buttons: bool) -> str:
        lines = [f"❓ {q.question}"]
        lines += [f"{n}. {choice}" for n, choice in enumerate(q.choices, 1)]
        if not q.choices:
            how = "Type your answer."
        elif buttons:
            how = "Tap a choice, or type another answer."
        else:
            how = "Answer with its number, or type another answer."
        lines.append(f"{how} (I'll wait {_minutes(self.timeout())}.)")
        return "\n".join(lines)

    @staticmethod
    def _closed_text(q: Question, answer: Answer) -> str:
        head = f"❓ {q.question}"
        if answer.status == "answered":
            return f"{head}\n✅ {answer.by}: {answer.text}"
        if answer.status == "no_answer":
            return f"{head}\n⌛ No answer in time: I went on without one."
        if answer.status == "stopped":
            return f"{head}\n⏹ Withdrawn: the turn was stopped."
        return f"{head}\n⚠️ Withdrawn: Herald restarted before anyone answered."

    # ---- settling ----------------------------------------------------------------------------------------

    def _settle(self, q: Question, answer: Answer) -> bool:
        """Synchronous, on the loop: the one place a question's outcome is fixed. False if already fixed."""
        if q.future.done():
            return False
        self.pending.pop(q.id, None)
        q.future.set_result(answer)
        return True

    def finish(self, q: Question, status: str, via: str) -> None:
        """From the thread (``call_soon_threadsafe``): the wait ended without an answer (timeout, stop)."""
        if self.life.stopping and status == "stopped":
            # Shutting down: the row stays pending; the next start withdraws it and tells the person.
            self._settle(q, Answer("withdrawn"))
            return
        if self._settle(q, Answer(status)):
            self.life.spawn(self._record(q, q.future.result(), via), name="clarify:settled")

    async def _record(self, q: Question, answer: Answer, via: str | None, by: Source | None = None) -> None:
        src = q.source
        log.info("clarify_settled", question_id=q.id, outcome=answer.status, via=via, session_key=q.session_key)
        try:
            for _ in range(100):  # the row is still being inserted (answered within milliseconds)
                if q.stored:
                    break
                await asyncio.sleep(0.01)
            stmt = update(clarifications).where(clarifications.c.id == q.id).values(
                status=answer.status, answer=answer.text, answered_by=by.user_id if by is not None else None,
                answered_via=via, answered_at=time.time())
            await self.store.run_write(lambda conn: conn.execute(stmt))
        except Exception:
            log.exception("clarify_store_failed", question_id=q.id)
        adapter = self.adapters.get(src.platform)
        if adapter is not None and q.prompt_message_id is not None:
            await self._edit(adapter, src.chat_id, q.prompt_message_id, self._closed_text(q, answer), src.thread_id)
        detail = f"{answer.by}: {answer.text}" if answer.status == "answered" else via
        await self.audit.add("clarify", q.question, answer.status, session_key=q.session_key, platform=src.platform,
                             chat_id=src.chat_id, user_id=src.user_id, detail=detail)

    async def _edit(self, adapter: PlatformAdapter, chat_id: str, message_id: str, text: str,
                    thread_id: str | None) -> None:
        if not adapter.capabilities.edits:
            return
        try:
            await adapter.edit(chat_id, message_id, adapter.render(text), buttons=[], thread_id=thread_id)
        except Exception as exc:
            log.warning("clarify_prompt_edit_failed", platform=adapter.name, chat_id=chat_id, error=str(exc))

    # ---- answers -------------------------------------------------------------------------------------

    def may_answer(self, q: Question, by: Source, trusted: bool = False) -> bool:
        """The person who asked the turn, approvers and admins — and only in the question's chat."""
        if by.platform != q.source.platform or by.chat_id != q.source.chat_id:
            return False
        if trusted or self.access.admin(by):
            return True
        if by.user_id in self.cfg.approvals.approvers.get(by.platform, []):
            return True
        return by.user_id == q.source.user_id

    def _answer(self, q: Question, text: str, choice: int | None, by: Source, via: str) -> bool:
        answer = Answer("answered", text, choice, _name(by))
        if not self._settle(q, answer):
            return False
        self.life.spawn(self._record(q, answer, via, by), name="clarify:answered")
        return True

    async def handle_button(self, adapter: PlatformAdapter, press: ButtonPress) -> str | None:
        parts = press.button_id.split(":")
        if len(parts) == 3 and parts[1] not in self.pending and self.remote is not None:
            notice = await self.remote.forward(press, adapter.trusted)  # it waits in another instance
            if notice is not None:
                return notice
        return await self.decide(press, adapter.trusted)

    async def decide(self, press: ButtonPress, trusted: bool) -> str:
        """A press on a question of this instance (here, or forwarded by another): the presser's notice."""
        parts = press.button_id.split(":")
        q = self.pending.get(parts[1]) if len(parts) == 3 else None
        if q is None:
            return "This question is no longer waiting for an answer."
        if not self.may_answer(q, press.source, trusted):
            log.info("clarify_refused", question_id=q.id, user_id=press.source.user_id)
            return ("You can't answer this question: only the person who asked me (or an approver) can, in the "
                    "chat where I asked. Nothing was changed.")
        try:
            n = int(parts[2])
            choice = q.choices[n - 1]
        except (ValueError, IndexError):
            return "This button is no longer active."
        if not self._answer(q, choice, n, press.source, "button"):
            return "This question was already answered."
        return f"Answered: {choice}"

    def take(self, adapter: PlatformAdapter, item: Accepted) -> bool:
        """The dispatch's first look at a message (synchronous, on the loop): an answer to a question waiting
        in its chat and thread, from someone who may answer, settles it (True) instead of joining the lane."""
        if not self.pending or item.command is not None:
            return False
        src = item.msg.source
        text = item.msg.text.strip()
        if not text:
            return False
        for q in list(self.pending.values()):
            if (q.source.platform, q.source.chat_id, q.source.thread_id) != (src.platform, src.chat_id, src.thread_id):
                continue
            if not self.may_answer(q, src, adapter.trusted):
                continue
            choice = int(text) if text.isdigit() and 1 <= int(text) <= len(q.choices) else None
            if self._answer(q, q.choices[choice - 1] if choice else text, choice, src, "text"):
                self.life.spawn(self.store.inbox.mark(item.inbox_id, "done", expected="pending"),
                                name="clarify:answer-row")
                return True
        return False
