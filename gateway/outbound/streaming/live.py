"""One turn's reply as it is written: the worker thread collects, the loop shows.

The agent's thread hands over text pieces and steps (``text``, ``restart``, ``step``) under a lock and wakes
the loop at most once per change it has not yet seen (``call_soon_threadsafe``). A task on the loop shows the
state in the chat: nothing in the first ``OPEN_AFTER`` seconds (a reply done by then arrives in one piece, as
without streaming: no extra request), then one message, opened through delivery's outbox and edited at most
once per interval (``display.stream_edit_interval``, never below the platform's ``min_edit_interval``; a rate
limit in the chat pushes the next edit back). Past the length limit the display continues in a further
message; when something else is posted in the chat meanwhile (an approval prompt, a notice) the messages so
far are sealed where they are and the display goes on below.

The final text is not decided here: ``close`` stops the task and delivery edits each streamed message into
the final reply's chunk of the same index (formatted, exactly once), sending the rest. A restart in between
leaves the messages ``streamed`` in the outbox; the recovered turn adopts them (``adopt``) and ends the same
way.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from gateway.kernel.chunking import chunk_text, to_plain
from gateway.outbound.delivery import Delivery
from gateway.outbound.streaming.progress import Line, ShowsTheTurn, compose, tool_line
from gateway.platforms.base import (
    Accepted,
    DeliveryError,
    FormattingError,
    OutboundMessage,
    PermanentError,
    PlatformAdapter,
    RateLimited,
)

log = structlog.get_logger("herald.streaming")

# Seconds after the first text or step before anything is shown: a reply done by then needs no edits. The
# same quiet follows a wait for a person (an approval prompt is all the chat needs meanwhile).
OPEN_AFTER = 1.0
WAITING_POLL = 0.25
# What a streamed message says when a turn ends without its answer (the reason's words follow).
CUT_NOTES = {"stopped": "⏹ _(stopped)_", "superseded": "⏹ _(interrupted by a newer message)_",
             "timeout": "⏱ _(stopped: no progress)_", "failed": "⚠️ _(failed)_"}
UNUSED_TEXT = "⋯"


@dataclass(slots=True)
class _Shown:
    row_id: int
    message_id: str
    text: str | None  # as last sent or edited (None: unknown, adopted after a restart)


class LiveReply(ShowsTheTurn):
    def __init__(self, adapter: PlatformAdapter, delivery: Delivery, item: Accepted, interval: float,
                 verbose: Callable[[], str], describe: Callable[[str], Any], secret_values: Callable[[], list[str]],
                 loop: asyncio.AbstractEventLoop, waiting: Callable[[], bool] = lambda: False) -> None:
        self.adapter = adapter
        self.delivery = delivery
        self.interval = interval
        self._verbose = verbose
        self._describe = describe  # tool name -> the tool (its ``progress``), or None
        self._waiting = waiting  # a person is being asked (an approval prompt is up)
        self._quiet_until = 0.0
        self._secret_values = secret_values  # read when a progress line is made (rarely), not per turn
        self._loop = loop
        source = item.msg.source
        self.chat_id = source.chat_id
        self.thread_id = source.thread_id
        self.reply_to = item.msg.platform_message_id
        self.inbox_id = item.inbox_id
        # Recovered after a restart: the messages a stream opened before are adopted before anything is shown.
        self._adopting = item.recovered
        # Thread side, under the lock.
        self._lock = threading.Lock()
        self._segment: list[str] = []  # the current model call's text
        self._lines: list[Line] = []
        self._waiting_calls: list[str] = []  # lines of the current batch's calls not yet started
        self._version = 0
        self._signalled = False
        self._first_at: float | None = None
        # Loop side.
        self._shown: list[_Shown] = []
        self._posted = 0  # the chat's post count when our newest message went out
        self._shown_version = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._closing = False
        self.disabled = False  # the platform refused: the final reply goes out as usual
        self.opened = False  # a message was (or had been, before a restart) opened for this reply

    # ---- thread side -------------------------------------------------------------------------------

    def text(self, piece: str) -> None:
        with self._lock:
            self._segment.append(piece)
            need = self._changed()
        if need:
            self._notify()

    def restart(self) -> None:
        with self._lock:
            self._segment.clear()
            need = self._changed()
        if need:
            self._notify()

    def step(self, messages: list[dict[str, Any]]) -> None:
        """A stored step of the turn: an assistant message with tool calls ends the call's text (it was
        written between tool calls, not the answer) and its first call starts; each result starts the next."""
        lines: list[str] = []
        for msg in messages:
            if msg.get("role") == "assistant" and msg.get("tool_calls"):
                lines = [self._line(call) for call in msg["tool_calls"]]
        with self._lock:
            for msg in messages:
                if msg.get("role") == "assistant" and msg.get("tool_calls"):
                    said = "".join(self._segment).strip() or (msg.get("content") or "").strip()
                    self._segment.clear()
                    if said:
                        self._lines.append(("text", said))
                    self._waiting_calls = lines
                    self._start_next_call()
                elif msg.get("role") == "tool":
                    self._start_next_call()
            need = self._changed()
        if need:
            self._notify()

    def _line(self, call: dict[str, Any]) -> str:
        fn = call.get("function") or {}
        name = str(fn.get("name") or "")
        tool = self._describe(name)
        return tool_line(name, fn.get("arguments"), getattr(tool, "progress", None), self._secret_values())

    def _start_next_call(self) -> None:
        if self._waiting_calls:
            self._lines.append(("tool", self._waiting_calls.pop(0)))

    def _changed(self) -> bool:
        """Under the lock: note a change; True when the loop must be woken for it."""
        self._version += 1
        if self._first_at is None:
            self._first_at = time.monotonic()
        need, self._signalled = not self._signalled, True
        return need

    def _notify(self) -> None:
        try:
            self._loop.call_soon_threadsafe(self._on_change)
        except RuntimeError:  # the loop is gone (shutdown)
            pass

    # ---- loop side ---------------------------------------------------------------------------------

    @property
    def visible(self) -> bool:
        """The chat shows part of the reply (typing indicators may stop)."""
        return bool(self._shown)

    def adopt(self, rows: dict[int, dict[str, Any]]) -> None:
        """A recovered turn: the messages a stream opened before the restart are this reply's again."""
        self._adopting = False
        self.opened = self.opened or any(r["status"] in ("streamed", "sending") for r in rows.values())
        for index in range(len(rows)):
            row = rows.get(index)
            if row is None or row["status"] != "streamed" or not row.get("platform_message_id"):
                break
            self._shown.append(_Shown(row["id"], str(row["platform_message_id"]).split(" ")[0], None))
        if any(r["status"] == "sending" for r in rows.values()):
            # A message that may or may not be out: the final delivery sorts it out; nothing more is opened.
            self.disabled = True
        self._posted = self.delivery.posted(self.adapter.name, self.chat_id)

    def _on_change(self) -> None:
        if self._closing or self.disabled:
            return
        if self._task is not None:
            self._wake.set()
        elif self._timer is None:
            # A timer, not a task, until there is something to show: a quick reply costs no more than this.
            first = self._first_at if self._first_at is not None else time.monotonic()
            self._timer = self._loop.call_later(max(0.0, first + OPEN_AFTER - time.monotonic()), self._start)

    def _start(self) -> None:
        self._timer = None
        if not (self._closing or self.disabled):
            self._task = self._loop.create_task(self._run(), name=f"stream:{self.inbox_id}")

    def _take(self) -> tuple[int, list[Line], str]:
        with self._lock:
            self._signalled = False
            self._wake.clear()
            return self._version, list(self._lines), "".join(self._segment)

    async def _run(self) -> None:
        try:
            if self._adopting:
                self.adopt(await self.delivery.store.outbox.chunks(self.inbox_id))
            while not self._closing and not self.disabled:
                if self._waiting():
                    self._quiet_until = time.monotonic() + OPEN_AFTER
                    await self._idle(WAITING_POLL)
                    continue
                if (quiet := self._quiet_until - time.monotonic()) > 0:
                    await self._idle(quiet)
                    continue
                with self._lock:
                    idle = self._version == self._shown_version
                    if idle:
                        self._wake.clear()
                        self._signalled = False
                if idle:
                    await self._wake.wait()
                    continue
                if not await self._pace():
                    return
                version, lines, text = self._take()
                if await self._show(lines, text):
                    self._shown_version = version
        except Exception:
            log.exception("stream_failed")
            self.disabled = True

    async def _idle(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless the reply closes first; True when it did."""
        if seconds > 0 and not self._closing:
            self._wake.clear()
            try:
                await asyncio.wait_for(self._until_closing(), seconds)
            except TimeoutError:
                pass
            finally:
                self._wake.set()  # whatever came meanwhile is looked at next
        return self._closing

    async def _until_closing(self) -> None:
        while not self._closing:
            await self._wake.wait()
            self._wake.clear()

    async def _pace(self) -> bool:
        """Wait for the chat's next edit slot; False when the reply closed meanwhile."""
        pacer = self.delivery.pacer
        while not self._closing:
            delay = pacer.ready_at(self.adapter.name, self.chat_id, self.interval) - time.monotonic()
            if delay <= 0:
                return True
            await self._idle(delay)
        return False

    def _display(self, lines: list[Line], text: str) -> list[str]:
        caps = self.adapter.capabilities
        markdown = compose(lines, text, self._verbose())
        if not markdown.strip():
            return []
        return chunk_text(self.adapter.render(markdown), caps.max_message_length, self.adapter.measure,
                          caps.dialect)

    async def _show(self, lines: list[Line], text: str) -> bool:
        """Bring the chat up to this state; False when an operation has to wait for a later try."""
        if self._shown and self.delivery.posted(self.adapter.name, self.chat_id) != self._posted:
            await self._seal()
            _version, lines, text = self._take()
        chunks = self._display(lines, text)
        for index, chunk in enumerate(chunks):
            if index < len(self._shown):
                if self._shown[index].text != chunk and not await self._edit(self._shown[index], chunk):
                    return False
            elif not await self._open(index, chunk):
                return False
        for extra in self._shown[len(chunks):]:
            unused = self.adapter.render(UNUSED_TEXT)
            if extra.text != unused and not await self._edit(extra, unused):
                return False
        return True

    async def _open(self, index: int, chunk: str) -> bool:
        if index and not await self._pace():
            return False
        piece = OutboundMessage(chunk, reply_to=self.reply_to if index == 0 else None, thread_id=self.thread_id)
        try:
            row_id, message_id, self._posted = await self.delivery.open_stream(
                self.adapter, self.chat_id, chunk, piece, self.inbox_id, index)
        except PermanentError as exc:
            log.info("stream_open_failed", error=str(exc))
            self.disabled = True
            return False
        except DeliveryError as exc:  # rate limited (the chat's pacing now waits) or transient: next time
            log.debug("stream_open_later", error=str(exc))
            return False
        self._shown.append(_Shown(row_id, message_id, chunk))
        self.opened = True
        return True

    async def _edit(self, shown: _Shown, chunk: str) -> bool:
        if self._closing:  # a last edit (sealing, a cut turn's note): paced, and not given up
            await self.delivery.pacer.wait(self.adapter.name, self.chat_id, self.interval)
        elif not await self._pace():  # the first operation of a show was paced already: no wait here
            return False
        try:
            await self._edit_now(shown.message_id, chunk)
        except PermanentError as exc:  # deleted, or no rights: the final delivery sends the reply anew
            log.info("stream_edit_failed", error=str(exc))
            self.disabled = True
            return False
        except DeliveryError as exc:
            log.debug("stream_edit_later", error=str(exc))
            return False
        finally:
            self.delivery.pacer.done(self.adapter.name, self.chat_id)
        shown.text = chunk
        return True

    async def _edit_now(self, message_id: str, chunk: str) -> None:
        try:
            await self.adapter.edit(self.chat_id, message_id, chunk, None, thread_id=self.thread_id)
        except FormattingError:
            await self.adapter.edit(self.chat_id, message_id, to_plain(chunk), None, thread_id=self.thread_id)
        except RateLimited as exc:
            self.delivery.pacer.backoff(self.adapter.name, self.chat_id, exc.retry_after)
            raise

    async def _seal(self) -> None:
        """Something was posted below the messages so far: they stay where they are as the record of the steps
        before it (brought up to date once, without the text being written, which goes on below), and are
        no longer the reply's."""
        with self._lock:
            lines = list(self._lines)
        chunks = self._display(lines, "") or [self.adapter.render(UNUSED_TEXT)]
        for index, shown in enumerate(self._shown):
            chunk = chunks[index] if index < len(chunks) else self.adapter.render(UNUSED_TEXT)
            if shown.text != chunk:
                await self._edit(shown, chunk)
            await self.delivery.seal_stream(shown.row_id, shown.message_id)
        self._shown = []
        with self._lock:
            del self._lines[:len(lines)]  # they are in the sealed message; newer ones go below

    async def close(self, seal: bool = True) -> None:
        """The turn is over: stop showing (an edit under way finishes first). The final delivery follows."""
        self._closing = True
        self._wake.set()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None:
            await asyncio.shield(self._task)
        if seal and self._shown and self.delivery.posted(self.adapter.name, self.chat_id) != self._posted:
            await self._seal()  # the reply goes below what was posted meanwhile

    async def abandon(self, reason: str) -> None:
        """The turn ended without an answer. On shutdown the messages stay as they are (the turn resumes
        after the restart and ends in them); otherwise the newest says the turn was cut, and all are sealed as
        they are (no answer will follow them)."""
        await self.close(seal=False)
        if reason == "shutdown" or not self._shown:
            return
        note = self.adapter.render(CUT_NOTES.get(reason, CUT_NOTES["stopped"]))
        newest = self._shown[-1]
        await self._edit(newest, f"{newest.text}\n\n{note}" if newest.text else note)
        for shown in self._shown:
            await self.delivery.seal_stream(shown.row_id, shown.message_id)
        self._shown = []
