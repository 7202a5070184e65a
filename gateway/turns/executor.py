"""Running one turn: the session and its history, the agent in a worker thread, its steps journaled, the
reply stored and delivered.

The loop never waits on a thread: the agent's future is awaited together with the turn's ``abandoned``
future; ``/stop``, ``busy_mode: interrupt``, the watchdog and shutdown resolve ``abandoned`` and set the
turn's interrupt flag. At most ``gateway.max_concurrent_turns`` turns compute at once (``TurnSlots``); a
turn waiting for a person (an approval) gives its slot back while it waits, so pending approvals never
starve other chats.
"""

from __future__ import annotations

import asyncio
import contextvars
import random
import threading
import time
import uuid
from typing import Any

import structlog

from agent_core.usage import UsageMeter
from gateway.config import Config
from gateway.kernel.attached import with_files
from gateway.kernel.metrics import NULL_METRICS, Counters, Metrics
from gateway.media.content import MAX_IMAGES
from gateway.media.outgoing import files_sent
from gateway.outbound.delivery import Delivery
from gateway.outbound.streaming import NO_LIVE
from gateway.platforms.base import Accepted, Attachment, InboundMessage, OutboundMessage, PlatformAdapter, Source
from gateway.ports import Adapters, Notifier
from gateway.session.history import History, title_untitled
from gateway.session.keys import session_owner
from gateway.session.manager import SessionManager
from gateway.storage.inbox import NotExpected
from gateway.storage.store import Store
from gateway.turns.agents import AgentFactory
from gateway.turns.attempts import Attempts
from gateway.turns.compression import Compressor
from gateway.turns.journal import Steered, TurnJournal
from gateway.turns.lanes import Lane, Turn
from gateway.turns.pool import TurnPool
from gateway.turns.usage import UsageLedger

TYPING_REFRESH = 4.0  # seconds between two typing requests of a turn (at most)
log = structlog.get_logger("herald.turns")

NO_MODEL_TEXT = (
    "No model is configured yet: set model.base_url, model.name and model.api_key_env in "
    "config.yaml (any OpenAI-compatible endpoint), then restart Herald."
)


class TurnSlots:
    """``max_concurrent_turns`` slots; a turn holds one while it computes."""

    def __init__(self, size: int) -> None:
        self._sem = asyncio.Semaphore(size)
        self.size = size

    def slot(self, loop: asyncio.AbstractEventLoop) -> TurnSlot:
        return TurnSlot(self._sem, loop)


class TurnSlot:
    """One turn's hold on a slot. Loop side: ``acquire``/``finish``; thread side: ``lend``/``take_back``."""

    def __init__(self, sem: asyncio.Semaphore, loop: asyncio.AbstractEventLoop) -> None:
        self._sem = sem
        self._loop = loop
        self._held = False
        self._finished = False

    async def acquire(self) -> None:
        await self._sem.acquire()
        if self._finished:  # the turn ended while this waited
            self._sem.release()
            return
        self._held = True

    def _release(self) -> None:
        if self._held:
            self._held = False
            self._sem.release()

    def finish(self) -> None:
        self._finished = True
        self._release()

    def lend(self) -> None:
        """In the worker thread, before waiting for a person: the slot is free for other turns meanwhile."""
        try:
            self._loop.call_soon_threadsafe(self._release)
        except RuntimeError:  # the loop is gone (shutdown): nothing left to share
            pass

    def take_back(self, interrupt: threading.Event | None = None) -> None:
        """In the worker thread, once the person answered: wait for a slot again (or for the interrupt)."""
        acquired = threading.Event()
        state: dict[str, Any] = {}

        def start() -> None:  # on the loop: the coroutine exists only once the loop runs it
            if state.get("abandoned"):
                return
            task = state["task"] = asyncio.ensure_future(self.acquire())
            task.add_done_callback(lambda _task: acquired.set())

        def abandon() -> None:
            state["abandoned"] = True
            task = state.get("task")
            if task is not None:
                task.cancel()

        try:
            self._loop.call_soon_threadsafe(start)
        except RuntimeError:  # the loop is gone (shutdown)
            return
        while not acquired.wait(0.1):
            if self._loop.is_closed():
                return
            if interrupt is not None and interrupt.is_set():
                try:
                    self._loop.call_soon_threadsafe(abandon)
                except RuntimeError:
                    pass
                return


class TurnExecutor:
    def __init__(self, cfg: Config, store: Store, sessions: SessionManager, delivery: Delivery, notifier: Notifier,
                 agents: AgentFactory, approvals: Any, adapters: Adapters, counters: Counters, *,
                 metrics: Metrics | None = None, compression: Compressor | None = None,
                 usage: UsageLedger | None = None, streams: Any = None, attempts: Attempts | None = None,
                 media: Any = None) -> None:
        self.cfg = cfg
        self.media = media  # gateway.media.hub.Media: images for the model, files out, voice notes
        # Each turn's start counted on its inbox row before it computes; a poison message parked instead
        # (gateway/turns/attempts.py).
        self.attempts = attempts or Attempts(store, notifier, cfg.gateway.max_attempts, counters)
        self.streams = streams  # gateway.outbound.streaming.Streams: replies shown as they are written
        self.metrics = metrics or NULL_METRICS
        self.store = store
        self.sessions = sessions
        self.delivery = delivery
        self.notifier = notifier
        self.agents = agents
        self.approvals = approvals  # .hook_for(key, source, turn_id)
        self.adapters = adapters
        self.counters = counters
        self.compression = compression  # gateway/turns/compression.py: the history summarised when it nears the window
        self.usage = usage  # gateway/turns/usage.py: token usage per turn, the daily budget
        self.slots = TurnSlots(cfg.gateway.max_concurrent_turns)
        self.history = History(store)
        self.pool = TurnPool(cfg.gateway.max_concurrent_turns)

    # ---- a chat turn -------------------------------------------------------------------------------

    async def run(self, lane: Lane, item: Accepted) -> None:
        source = item.msg.source
        adapter = self.adapters.get(source.platform)
        if adapter is None:
            await self.store.inbox.mark(item.inbox_id, "failed", error=f"platform {source.platform} is not enabled",
                                        expected=("pending", "replied"))
            return
        turn_id = uuid.uuid4().hex[:12]
        structlog.contextvars.bind_contextvars(session_key=lane.key, platform=source.platform, turn_id=turn_id)
        try:
            if item.resume_reply is not None:
                await self.deliver_reply(adapter, item, item.resume_reply)
                return
            refusal = NO_MODEL_TEXT if self.agents.agent is None else None
            if refusal is None and self.usage is not None and not item.resume_turn:
                refusal = await self.usage.budget_notice(source)  # over budget: no model call at all
            if refusal is not None:
                if await self.store.inbox.mark(item.inbox_id, "replied", reply=refusal, expected="pending"):
                    await self.deliver_reply(adapter, item, refusal)
                return
            if self.compression is None:
                await self._run_agent(lane, item, adapter, turn_id)
                return
            async with self.compression.hold(lane.key):  # /compress never runs under a turn
                await self._run_agent(lane, item, adapter, turn_id)
        except NotExpected as exc:
            log.info("turn_taken_elsewhere", error=str(exc))
        finally:
            structlog.contextvars.unbind_contextvars("session_key", "platform", "turn_id")

    async def _run_agent(self, lane: Lane, item: Accepted, adapter: PlatformAdapter, turn_id: str) -> None:
        source = item.msg.source
        loop = asyncio.get_running_loop()
        # The turn exists (and /stop can reach it) before the first await.
        now = time.monotonic()
        turn = Turn(turn_id, lane.key, item, threading.Event(), loop.create_future(), now, now)
        lane.turn = turn
        live = self.streams.start(adapter, item, lane.key) if self.streams is not None else NO_LIVE
        slot = self.slots.slot(loop)
        try:
            session = await self._session(item, source)
            limit = self.cfg.agent.max_history_messages
            history: list[dict[str, Any]] = []
            if item.resume_turn:  # the turn's own steps in full, however many: they end the history
                history = await self.store.messages.resume_history(session["id"], item.inbox_id, limit)
                item.resume_turn = bool(history)
            if not item.resume_turn:
                history = await self.store.messages.history(session["id"], limit)
            if self.compression is not None:
                history = self.compression.with_summary(session, history)
            user_msg = None if item.resume_turn else {"role": "user", "content": user_content(item.msg)}
            lane.current = None  # what the agent reads is fixed: an edit from now on is a correction
            guard = (self.store.inbox.owner_guard(item.inbox_id, self.delivery.owner)
                     if item.inbox_id is not None and self.delivery.owner else None)
            journal = TurnJournal(self.store, loop, session["id"], item.inbox_id, user_msg, guard)
            acquiring = asyncio.ensure_future(slot.acquire())
            await asyncio.wait({acquiring, turn.abandoned}, return_when=asyncio.FIRST_COMPLETED)
            if not acquiring.done():
                acquiring.cancel()
        except BaseException:
            lane.turn = None
            slot.finish()
            raise
        if turn.abandoned.done():
            lane.turn = None
            slot.finish()
            await self._abandoned(adapter, item, journal, turn.abandoned.result(), turn.last_step)
            return
        try:
            # Durable before the thread starts: a turn that takes the process down with it has counted.
            may_run = await self.attempts.begin(item)
        except BaseException:
            lane.turn = None
            slot.finish()
            raise
        if not may_run:  # parked: its turns kept taking the daemon down
            lane.turn = None
            slot.finish()
            return
        self.counters.turns_started += 1
        item.queued_ms = round((time.time() - item.msg.received_at) * 1000, 2)
        log.debug("turn_started", queued_ms=item.queued_ms, resumed=item.resume_turn)
        typing = (asyncio.create_task(self._keep_typing(adapter, source, turn, live)) if adapter.capabilities.typing
                  else None)
        ctx = contextvars.copy_context()
        content = None if item.resume_turn else user_msg["content"]  # type: ignore[index]
        meter = UsageMeter()
        future = loop.run_in_executor(self.pool, ctx.run, self._call_agent, session, history, content, turn,
                                      journal, slot, meter, live, _SteeredFor(lane, turn))
        try:
            await asyncio.wait({future, turn.abandoned}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            await self._record_usage(meter, journal.session_id, item.inbox_id, source.platform, source.user_id)
            raise
        finally:
            if typing:
                typing.cancel()
            lane.turn = None
            slot.finish()
        # Queued, not awaited here: the turn's next write joins it in one commit (the store's group commit).
        recorded = asyncio.ensure_future(self._record_usage(meter, journal.session_id, item.inbox_id,
                                                            source.platform, source.user_id))
        try:
            await self._after_agent(adapter, item, journal, turn, future, live, session)
        finally:
            await recorded

    async def _after_agent(self, adapter: PlatformAdapter, item: Accepted, journal: TurnJournal, turn: Turn,
                           future: asyncio.Future[Any], live: Any, session: dict[str, Any]) -> None:
        source = item.msg.source
        if turn.abandoned.done() and not future.done():
            future.add_done_callback(_swallow)
            await self._abandoned(adapter, item, journal, turn.abandoned.result(), turn.last_step, live, counted=True)
            return
        turn.abandon("finished")
        try:
            result = future.result()
        except Exception as exc:
            log.exception("agent_crashed")
            self.counters.turns_failed += 1
            await journal.close("crashed", "failed")
            await live.abandon("failed")
            await self.notifier.notify(source, f"⚠️ Something went wrong on my side ({type(exc).__name__}). "
                                               "Details are in the log; please try again.")
            return
        await self._finish(adapter, item, journal, result, live)
        await title_untitled(self.history, session, item.msg.text)

    async def _record_usage(self, meter: UsageMeter, session_id: str, inbox_id: int | None, platform: str,
                            user_id: str | None) -> None:
        """What the turn's model calls cost, however it ended (a failure here never fails the turn)."""
        if self.usage is None:
            return
        try:
            await self.usage.record(meter, session_id=session_id, inbox_id=inbox_id, platform=platform,
                                    user_id=user_id)
        except Exception as exc:
            log.warning("usage_not_recorded", error=str(exc))

    async def _session(self, item: Accepted, source: Source) -> dict[str, Any]:
        if item.resume_turn:
            steps = await self.store.messages.turn_steps(item.inbox_id)
            row = await self.store.sessions.get(steps[0]) if steps else None
            if row is not None:
                return row
            item.resume_turn = False
        return await self.sessions.get(item.key, source.platform,
                                       owner=session_owner(source, self.cfg.sessions.per_user_in_groups),
                                       source=source)

    def _call_agent(self, session: dict[str, Any], history: list[dict[str, Any]], content: Any, turn: Turn,
                    journal: TurnJournal, slot: TurnSlot, meter: UsageMeter, live: Any = NO_LIVE,
                    steered: _SteeredFor | None = None) -> Any:
        """Runs in a worker thread: the synchronous agent loop, told to stop through ``turn.interrupt``;
        ``steered``: where messages sent for the turn meanwhile wait (its lane)."""
        from agent_core.agent import TurnCallbacks

        def on_activity(step: str) -> None:
            turn.last_activity = time.monotonic()
            turn.last_step = step

        source = turn.item.msg.source
        extras: dict[str, Any] = {}
        if self.media is not None:
            extras["files_out"] = self.media.files_out(session["id"])
            # The files the history names are read again here, off the loop: as images for a model that sees.
            vision, budget = self.agents.sees_images(session), [MAX_IMAGES]
            if content is not None:
                content = self.media.content.for_model(content, vision, budget)
            history = self.media.content.history_for_model(history, vision, budget)
        ctx = self.agents.tool_context(turn.key, turn.interrupt, self.approvals.hook_for(turn.key, source, turn.id),
                                       source=source, turn_slot=slot, **extras)
        compact = None
        if self.compression is not None:
            compact = self.compression.for_turn(turn.key, session, journal, journal.loop, turn.interrupt, meter,
                                                on_activity)
        inject = None
        if steered is not None:
            def inject() -> list[dict[str, Any]]:
                # A look from the thread first: most model calls have nothing waiting, and cost no hop then.
                return journal.inject(steered) if steered.lane.steered else []
        callbacks = live.callbacks(TurnCallbacks(on_activity=on_activity, on_step=journal.step, usage=meter,
                                                 compact=compact, inject=inject))
        agent = self.agents.for_session(session)  # the session's model and reasoning effort
        return agent.run(session["system_prompt"] or "", history, content, turn.interrupt, callbacks, ctx)

    async def _finish(self, adapter: PlatformAdapter, item: Accepted, journal: TurnJournal, result: Any,
                      live: Any = NO_LIVE) -> None:
        await live.close()  # nothing more is shown; the final delivery edits what was
        status = getattr(result, "status", "ok")
        if status == "ok":
            self.counters.turns_ok += 1
        else:
            if status == "error":
                self.counters.turns_failed += 1
            else:
                self.counters.turns_interrupted += 1
            log.warning("turn_not_ok", status=status, error_kind=getattr(result, "error_kind", None))
        text = result.text or "(no answer)"
        await journal.finish(result.messages, "replied", text)
        self.sessions.touch(item.key)
        # A resumed turn's earlier files are among its stored steps, not in this run's messages.
        files = None if item.resume_turn else files_sent(result.messages)
        await self.deliver_reply(adapter, item, text, live, files=files)

    async def _stored_files(self, item: Accepted) -> list[Attachment]:
        """The files a turn's ``send_file`` calls queued, from its stored steps (a reply recovered or resumed)."""
        if item.inbox_id is None:
            return []
        return files_sent(await self.store.messages.turn_messages(item.inbox_id))

    async def deliver_reply(self, adapter: PlatformAdapter, item: Accepted, text: str, live: Any = NO_LIVE,
                            files: list[Attachment] | None = None) -> None:
        msg = item.msg
        if files is None:
            files = await self._stored_files(item)
        out = OutboundMessage(text=text, reply_to=msg.platform_message_id, thread_id=msg.source.thread_id,
                              reply_handle=msg.reply_handle, attachments=files)
        # A streamed (or recovered) reply's outbox rows say which messages are out already: each is edited into
        # its chunk, the rest sent.
        resume = item.resume_reply is not None or item.recovered or live.opened
        report = await self.delivery.deliver(adapter, msg.source.chat_id, out, item.inbox_id, resume=resume,
                                             finish_inbox=True, edit_interval=live.interval)
        total = time.time() - msg.received_at
        self.metrics.turn_done(total, item.queued_ms / 1000 if item.queued_ms is not None else None)
        # One per message: debug, not the default level's business (/metrics has the figures).
        log.debug("turn_delivered", chunks=len(report.message_ids), failed=report.failed, queued_ms=item.queued_ms,
                  total_ms=round(total * 1000, 2))
        if self.media is not None and not report.failed:
            await self._speak(adapter, item, text)

    async def _speak(self, adapter: PlatformAdapter, item: Accepted, text: str) -> None:
        """/voice on: the answer also as a voice note, after the text (its own outbox row: sent once)."""
        session = self.sessions.peek(item.key)
        if session is None or session.get("voice") != "on":
            return
        note = await self.media.voice_note(text, session["id"], item.inbox_id)
        if note is None:
            await self.notifier.notify(item.msg.source, "🔇 I could not make a voice note of this answer "
                                                        "(the text above has it all).")
            return
        out = OutboundMessage(text="", thread_id=item.msg.source.thread_id, attachments=[note])
        ref = f"voice:{item.inbox_id}" if item.inbox_id is not None else None
        try:
            await self.delivery.deliver(adapter, item.msg.source.chat_id, out, resume=True, ref=ref)
        except Exception as exc:
            log.warning("voice_note_not_delivered", error=f"{type(exc).__name__}: {exc}")

    async def _abandoned(self, adapter: PlatformAdapter, item: Accepted, journal: TurnJournal, reason: str,
                         last_step: str, live: Any = NO_LIVE, counted: bool = False) -> None:
        """``counted``: the turn had begun computing (``Attempts.begin`` counted it)."""
        source = item.msg.source
        log.info("turn_abandoned", reason=reason)
        if reason == "shutdown":
            # The inbox row stays unfinished: the message is answered after the restart, not lost. A clean
            # shutdown is no crash of the turn's making: its attempt does not count.
            if counted:
                await self.attempts.give_back(item.inbox_id)
            await journal.close(reason, None, last_step)
            await live.abandon(reason)
            await self.notifier.notify(source, "⚠️ Herald is restarting and had to cut this turn short; "
                                               "I'll answer your message when I'm back.")
            return
        await journal.close(reason, "cancelled", last_step)
        await live.abandon(reason)
        self.sessions.touch(item.key)
        if reason == "timeout":
            self.counters.turns_timed_out += 1
            await self.notifier.notify(source, f"⏱ I stopped this turn: nothing happened for "
                                               f"{duration(self.cfg.gateway.turn_timeout_seconds)}. Please try again.")
        else:
            self.counters.turns_interrupted += 1

    async def _keep_typing(self, adapter: PlatformAdapter, source: Source, turn: Turn, live: Any = NO_LIVE) -> None:
        while not turn.abandoned.done() and not live.visible:  # the reply showing is sign of life enough
            try:
                await adapter.typing(source.chat_id, source.thread_id)
            except Exception as exc:
                log.debug("typing_failed", error=str(exc))
            # Under the 5 s a typing status lasts; jittered so that turns started together (a burst of messages,
            # a restart's recovered turns) do not refresh together: 64 requests in one loop pass held every other
            # callback ~15 ms.
            await asyncio.sleep(random.uniform(TYPING_REFRESH * 0.85, TYPING_REFRESH))

    # ---- a detached turn (cron) ----------------------------------------------------------------------

    async def run_detached_turn(self, key: str, content: str, timeout: float, *, model: str | None = None,
                                extras: dict[str, Any] | None = None) -> Any:
        """One agent turn in a fresh session of its own (cron), under a hard wall-clock limit.

        Dangerous commands follow ``approvals.cron_mode`` (nobody is asked). Raises ``TimeoutError`` when
        the limit passes: the thread is told to stop and its late result is dropped.
        """
        from agent_core.agent import TurnCallbacks

        agent = self.agents.for_model(model)
        if agent is None:
            raise RuntimeError("no model is configured (model.base_url and model.name in config.yaml)")
        loop = asyncio.get_running_loop()
        session = await self.store.sessions.create(str(uuid.uuid4()), key, "cron", self.agents.system_prompt("cron"))
        journal = TurnJournal(self.store, loop, session["id"], None, {"role": "user", "content": content})
        interrupt = threading.Event()
        slot = self.slots.slot(loop)
        if self.media is not None:  # a job's answer can carry files (cron delivers them after its text)
            extras = {**(extras or {}), "files_out": self.media.files_out(session["id"])}
        ctx = self.agents.tool_context(key, interrupt, self.approvals.hook_for(key, None),
                                       **{**(extras or {}), "cron": True, "turn_slot": slot})
        deadline = loop.time() + timeout
        future: Any = None
        meter = UsageMeter()
        try:
            await asyncio.wait_for(slot.acquire(), timeout)
            future = loop.run_in_executor(self.pool, contextvars.copy_context().run, agent.run,
                                          session["system_prompt"] or "", [], content, interrupt,
                                          TurnCallbacks(on_step=journal.step, usage=meter), ctx)
            done, _ = await asyncio.wait({future}, timeout=max(0.0, deadline - loop.time()))
        except BaseException:  # the caller's own limit, or shutdown: the thread must stop too
            interrupt.set()
            slot.finish()
            if future is not None:
                future.add_done_callback(_swallow)
            await asyncio.shield(journal.close("timeout", None))
            raise
        slot.finish()
        await self._record_usage(meter, session["id"], None, "cron", None)  # nobody's: no user's budget pays
        if not done:
            interrupt.set()
            future.add_done_callback(_swallow)
            await journal.close("timeout", None)
            raise TimeoutError(f"no answer within {duration(timeout)}")
        result = future.result()
        await journal.finish(result.messages if getattr(result, "status", "ok") == "ok" else [], "replied", None)
        return result


class _SteeredFor:
    """A lane's steered messages as the turn's journal takes them (journal.Waiting), made into user messages
    as the agent would have got them as turns of their own."""

    def __init__(self, lane: Lane, turn: Turn) -> None:
        self.lane = lane
        self.turn = turn

    def take_steered(self) -> list[Steered]:
        if self.turn.abandoned.done():  # cut short: what waits becomes the next turn, not part of this one
            return []
        taken = self.lane.take_steered()
        for item in taken:
            if item.message is None:
                item.message = {"role": "user", "content": user_content(item.item.msg)}
        return taken

    def untaken(self, taken: list[Steered]) -> None:
        self.lane.untaken(taken)


def user_content(msg: InboundMessage) -> str:
    """What the history stores of the user's message: its text and the paths of its files, never their bytes."""
    return with_files(msg.text, list(msg.attachments))


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:g} seconds"
    return f"{seconds / 60:g} minutes"


def _swallow(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
