"""Session lanes: each session key has a FIFO of accepted messages and at most one running turn.

A message for an idle session starts a turn at once; one for a busy session waits its turn (``busy_mode:
queue``, the sender is told), replaces the running turn (``interrupt``) or joins it (``steer``, and /steer
in any mode: the agent gets it as a user message at its next model call, after the tool under way; one the
turn ends without taking becomes the next turn, ahead of what came after it). The queue is bounded
(``gateway.max_queue``): past it the sender is told plainly and the message is marked rejected, never
silently dropped. Lanes disappear when they are empty and idle. One watchdog ends turns that make no
progress for ``gateway.turn_timeout_seconds``.

Before a message's turn its adapter does what it left for after the acknowledgement (``prepare``: the
files the message came with are downloaded). The lane waits meanwhile, not the platform's ack: the chat's
next message stays behind it.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from gateway.cluster.instance import Instance
from gateway.config import GatewayConfig
from gateway.kernel.metrics import Counters
from gateway.media.inbound import echo_line
from gateway.platforms.base import Accepted, InboundMessage, PlatformAdapter, Prepared
from gateway.ports import Lifecycle, Notifier
from gateway.storage.audit import AuditLog
from gateway.storage.store import Store
from gateway.turns import albums
from gateway.turns.journal import Steered

log = structlog.get_logger("herald.lanes")

# A turn's last step while a person is asked (an approval, the agent's question): cut at once on shutdown.
WAITING_FOR_A_PERSON = ("waiting for approval", "waiting for an answer")


@dataclass(eq=False)
class Turn:
    id: str
    key: str
    item: Accepted
    interrupt: Any  # threading.Event
    abandoned: asyncio.Future[str]
    started: float
    last_activity: float
    last_step: str = "starting"

    def abandon(self, reason: str) -> bool:
        self.interrupt.set()
        if self.abandoned.done():
            return False
        self.abandoned.set_result(reason)
        return True


@dataclass(eq=False)
class Lane:
    key: str
    queue: deque[Accepted] = field(default_factory=deque)
    turn: Turn | None = None
    task: asyncio.Task[None] | None = None
    adapter: PlatformAdapter | None = None  # a session key names one platform: the adapter of its messages
    # Sent for the running turn, not taken into it yet (the turn's journal takes them, on the loop).
    steered: list[Steered] = field(default_factory=list)
    # The message taken from the queue whose turn has not fixed what the agent reads yet (it is being prepared,
    # or the turn is loading the session): an edit of it still replaces its text.
    current: Accepted | None = None

    def take_steered(self) -> list[Steered]:
        """For the turn's journal (on the loop): everything waiting, in the order it came."""
        taken, self.steered = self.steered, []
        return taken

    def untaken(self, taken: list[Steered]) -> None:
        """The journal could not store ``taken``: back in front of what came since."""
        self.steered[:0] = [s for s in taken if not s.taken]


RunTurn = Callable[[Lane, Accepted], Awaitable[None]]


class Lanes:
    def __init__(self, cfg: GatewayConfig, store: Store, notifier: Notifier, life: Lifecycle, instance: Instance,
                 counters: Counters, run_turn: RunTurn, *, routed: bool = False, media: Any = None,
                 echo: bool = False) -> None:
        """``run_turn``: the turn executor's ``run``; ``routed``: several instances share the database;
        ``media``: gateway.media.inbound.MediaInbound, which checks (and transcribes) a message's files before its
        turn; ``echo``: a transcript is shown back in the chat."""
        self.cfg = cfg
        self.media = media
        self.echo = echo
        self.store = store
        self.notifier = notifier
        self.life = life
        self.instance = instance
        self.counters = counters
        self.run_turn = run_turn
        self.audit = AuditLog(store)  # messages steered into running turns
        self.lanes: dict[str, Lane] = {}
        # Inbox ids dispatched in this process (lanes and commands), while several instances share the
        # database (gateway/inbound/routing.py): a row found again by a poll is not dispatched twice.
        self.dispatched: set[int] | None = set() if routed else None
        # Adapters whose first recovery after (re)connecting is still running: their new messages queue but wait,
        # so a message accepted before a restart is answered before one the same chat sent after it.
        self._held: set[str] = set()

    def lane(self, key: str) -> Lane | None:
        return self.lanes.get(key)

    # ---- in --------------------------------------------------------------------------------------

    def submit(self, adapter: PlatformAdapter, item: Accepted, notify: bool = True) -> None:
        """Queue a persisted message (synchronously, so messages keep their order); notices go out after."""
        if self.dispatched is not None:
            self.dispatched.add(item.inbox_id)
        lane = self.lanes.get(item.key)
        if lane is None:
            lane = self.lanes[item.key] = Lane(item.key)
        lane.adapter = adapter
        busy = lane.turn is not None or bool(lane.queue) or lane.task is not None
        source = item.msg.source
        # The bound is on taking new messages in; a recovered one was taken in (and acknowledged) already.
        if busy and not item.recovered and len(lane.queue) >= self.cfg.max_queue:
            self.counters.queue_rejected += 1
            waiting = len(lane.queue)
            self.life.spawn(self._reject(item, waiting, adapter.capabilities.command("queue")), name="lane:reject")
            return
        if (busy and notify and self.cfg.busy_mode == "steer" and lane.turn is not None and not lane.queue
                and not item.recovered and item.resume_reply is None and not item.resume_turn):
            self.steer_into(lane, item)
            self._tell(source, "↪ Added to what I'm working on: I'll read it before my next step.")
            return
        if item.recovered and item.inbox_id is not None:
            # Behind what its chat sent before it, ahead of what came after (accepted before recovery ran).
            at = next((n for n, q in enumerate(lane.queue) if q.inbox_id is not None and q.inbox_id > item.inbox_id),
                      len(lane.queue))
            lane.queue.insert(at, item)
        else:
            lane.queue.append(item)
        if busy and notify:
            if self.cfg.busy_mode == "interrupt" and lane.turn is not None:
                if lane.turn.abandon("superseded"):
                    self._tell(source, "⏹ Stopped the previous turn to answer your new message.")
            elif lane.turn is not None:
                self._tell(source, f"⏳ Queued ({len(lane.queue)} waiting) — I'll answer after the current reply.")
        if lane.task is None and adapter.name not in self._held:
            lane.task = asyncio.create_task(self._drain(lane), name=f"lane:{lane.key}")

    def steer_into(self, lane: Lane, item: Accepted, text: str | None = None) -> None:
        """``item`` joins the running turn of ``lane`` (``text``: what the agent reads, default the message)."""
        message = {"role": "user", "content": text} if text is not None else None
        lane.steered.append(Steered(item.inbox_id, item, message))
        log.info("message_steered", session_key=lane.key, inbox_id=item.inbox_id)
        if text is None:  # an edit steered in is audited as the edit it is
            src = item.msg.source
            self.life.spawn(self.audit.add("steer", item.msg.text, "steered", session_key=lane.key,
                                           platform=src.platform, chat_id=src.chat_id, user_id=src.user_id),
                            name="lane:audit")

    def steer(self, adapter: PlatformAdapter, item: Accepted, text: str | None = None) -> bool:
        """/steer (any busy_mode) and an edit while its turn runs: into the running turn (True), or, with
        none running, queued as a message of its own (False)."""
        lane = self.lanes.get(item.key)
        if lane is not None and lane.turn is not None:
            if self.dispatched is not None:
                self.dispatched.add(item.inbox_id)
            self.steer_into(lane, item, text)
            return True
        if text is not None:
            item.msg.text = text
        self.submit(adapter, item, notify=False)
        return False

    def hold(self, platform: str) -> None:
        """Until ``release``: ``platform``'s messages queue in their lanes, no turn starts (its recovery runs)."""
        self._held.add(platform)

    def release(self, platform: str) -> None:
        self._held.discard(platform)
        for lane in self.lanes.values():
            if lane.task is None and lane.queue and lane.adapter is not None and lane.adapter.name == platform:
                lane.task = asyncio.create_task(self._drain(lane), name=f"lane:{lane.key}")

    def _tell(self, source: Any, text: str) -> None:
        self.life.spawn(self.notifier.notify(source, text), name="lane:notice")

    async def _reject(self, item: Accepted, waiting: int, queue_command: str) -> None:
        await self.store.inbox.mark(item.inbox_id, "rejected", error="queue full", expected="pending")
        await self.notifier.notify(item.msg.source,
                                   f"⚠️ {waiting} messages are already waiting, so I did not take this one. "
                                   f"Send it again once I have caught up ({queue_command} shows the waiting ones).")

    async def _drain(self, lane: Lane) -> None:
        try:
            while lane.queue and not self.life.stopping:
                item = lane.current = lane.queue.popleft()
                try:
                    if (item.msg.pending or {}).get("album") and item.resume_reply is None and not item.resume_turn:
                        await albums.gather(lane.queue, item, self.store, lambda: self.life.stopping)
                    if not await self._prepare(lane, item):
                        continue
                    if self.life.stopping:
                        break  # its row stays pending: the next process answers it (and fetches again)
                    await self.run_turn(lane, item)
                except Exception:
                    log.exception("turn_crashed", session_key=lane.key)
                    await self.store.inbox.mark(item.inbox_id, "failed", error="internal error",
                                                expected=("pending", "replied"))
                finally:
                    lane.current = None
                    self._next_turns(lane)
        finally:
            lane.task = None
            if not lane.queue and lane.turn is None and self.lanes.get(lane.key) is lane:
                del self.lanes[lane.key]

    @staticmethod
    def _next_turns(lane: Lane) -> None:
        """What was sent for the turn that just ended and never reached it: the next turns, in the order sent,
        ahead of anything queued since (it came before that). Never dropped."""
        left = [s.item for s in lane.take_steered() if not s.taken and s.item is not None]
        if left:
            lane.queue.extendleft(reversed(left))
            log.info("steered_became_turns", session_key=lane.key, messages=len(left))

    async def _prepare(self, lane: Lane, item: Accepted) -> bool:
        """The adapter's work left for after the ack (``PlatformAdapter.prepare``); False: no turn for it."""
        msg = item.msg
        if item.resume_reply is not None or item.resume_turn:
            return True  # a resumed turn has its user message (and its files' paths) stored already
        if msg.pending and lane.adapter is not None:
            try:
                prepared = await lane.adapter.prepare(msg)
            except Exception:
                log.exception("prepare_failed", session_key=lane.key)  # the turn runs with what there is
                prepared = Prepared()
            if prepared.drop:
                log.info("message_not_for_the_agent", session_key=lane.key, reason=prepared.drop)
                await self.store.inbox.mark(item.inbox_id, "cancelled", error=prepared.drop, expected="pending")
                return False
            if prepared.problems:
                missed = "; ".join(prepared.problems)
                await self.notifier.notify(msg.source, f"⚠️ I could not download what you sent ({missed}). "
                                                       "I'll answer with what I have.")
        if self.media is not None and msg.attachments:
            await self._check_media(lane, item)
        return True

    async def _check_media(self, lane: Lane, item: Accepted) -> None:
        """The files are what they claim (else refused, in one line); voice notes transcribed, failures told."""
        msg = item.msg
        try:
            checked = await self.media.check(msg)
        except Exception:
            log.exception("media_check_failed", session_key=lane.key)
            return
        if checked.problems:
            refused = "; ".join(checked.problems)
            await self.notifier.notify(msg.source, f"⚠️ I did not take what you sent ({refused}).")
        if checked.failed_transcriptions:
            failed = "; ".join(checked.failed_transcriptions)
            await self.notifier.notify(msg.source, f"🎤 I could not transcribe {failed}; I'll answer with the "
                                                   "audio file as it is.")
        if checked.transcripts and self.echo:
            await self.notifier.notify(msg.source, echo_line(checked.transcripts))

    # ---- what commands see (gateway.ports.TurnControl) -----------------------------------------------

    def stop_turn(self, key: str) -> bool:
        lane = self.lanes.get(key)
        return bool(lane and lane.turn and lane.turn.abandon("stopped"))

    def busy(self, key: str) -> tuple[float, str] | None:
        lane = self.lanes.get(key)
        if lane is None or lane.turn is None:
            return None
        return time.monotonic() - lane.turn.started, lane.turn.last_step

    def queued(self, key: str) -> list[str]:
        lane = self.lanes.get(key)
        return [item.msg.text for item in lane.queue] if lane else []

    async def clear_queue(self, key: str) -> int:
        lane = self.lanes.get(key)
        if not lane:
            return 0
        dropped = list(lane.queue)
        lane.queue.clear()
        for item in dropped:
            await self.store.inbox.mark(item.inbox_id, "cancelled", error="cleared by /queue clear", expected="pending")
        return len(dropped)

    async def enqueue(self, adapter: PlatformAdapter, msg: InboundMessage, key: str) -> int | None:
        """``/queue <text>``: a follow-up of its own (its own inbox row), queued whatever busy_mode says."""
        row = await self.store.inbox.add(adapter.name, msg.platform_message_id + ":queued", key, msg.to_dict(),
                                         owner=self.instance.id, lease_until=self.instance.lease())
        if row is None:
            return None
        self.submit(adapter, Accepted(row, msg, key), notify=False)
        lane = self.lanes.get(key)
        return len(lane.queue) if lane else 0

    async def steer_text(self, adapter: PlatformAdapter, msg: InboundMessage, key: str) -> bool | None:
        """``/steer <text>``: the text as a message of its own (its own inbox row), into the running turn
        whatever busy_mode says (True), or its own turn when none runs (False); None: stored already."""
        row = await self.store.inbox.add(adapter.name, msg.platform_message_id + ":steer", key, msg.to_dict(),
                                         owner=self.instance.id, lease_until=self.instance.lease())
        if row is None:
            return None
        return self.steer(adapter, Accepted(row, msg, key))

    # ---- upkeep ----------------------------------------------------------------------------------

    def running(self) -> int:
        return sum(1 for lane in self.lanes.values() if lane.turn is not None)

    def waiting(self) -> int:
        return sum(len(lane.queue) for lane in self.lanes.values())

    async def watchdog(self) -> None:
        """One timer for all turns: end any turn with no progress for turn_timeout_seconds."""
        limit = self.cfg.turn_timeout_seconds
        period = max(0.05, min(5.0, limit / 4))
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for lane in list(self.lanes.values()):
                turn = lane.turn
                if turn is not None and now - turn.last_activity > limit:
                    log.warning("turn_stuck", session_key=lane.key, last_step=turn.last_step)
                    turn.abandon("timeout")

    async def drain(self, timeout: float) -> None:
        """Shutdown: let running turns finish for up to ``timeout``, then cut the rest.

        A turn waiting for a person is cut at once: nobody answers within a drain, and its request is
        denied (and its user told) when Herald is back.
        """
        drains = {lane.task for lane in self.lanes.values() if lane.task}
        if not drains:
            return
        deadline = asyncio.get_running_loop().time() + timeout
        pending = drains
        while pending:
            for lane in self.lanes.values():
                if lane.turn is not None and lane.turn.last_step.startswith(WAITING_FOR_A_PERSON):
                    lane.turn.abandon("shutdown")
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            _, pending = await asyncio.wait(pending, timeout=min(0.2, left))
        for lane in self.lanes.values():
            if lane.turn is not None:
                lane.turn.abandon("shutdown")
        if pending:
            await asyncio.wait(pending, timeout=10)
