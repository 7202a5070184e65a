"""A reply its adapter streams to its client itself (an HTTP response) instead of a chat message edited in place.

Such an adapter hands the turn a ``TextSink`` (``PlatformAdapter.live_text``). Nothing there is rate limited or
edited, so nothing waits or is paced: each text piece the model writes and each progress line (per /verbose, as
``LiveReply`` shows them) goes to the sink on the loop as it comes, in order. The worker thread appends under a lock
and wakes the loop only for the first change the loop has not taken yet, so a fast model costs about one wake per
batch of pieces, not one per token.

What was sent cannot be taken back: the model's words before a tool call stay in the stream (a chat message would
replace them), and a model call that starts over (a retry, a fallback) continues in a new paragraph. The final
reply still goes out through delivery as everywhere, stored first; the adapter ends its stream with it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, Literal, Protocol

import structlog

from gateway.outbound.streaming.progress import ShowsTheTurn, tool_line

log = structlog.get_logger("herald.streaming")

Event = tuple[Literal["text", "restart", "line"], str]


class TextSink(Protocol):
    """The adapter's side of a directly streamed reply; called on the loop, in the order things happened.
    ``restart``: what was written so far does not begin the answer (the model call started over, or went on to
    call tools); ``progress``: a line of its own (a tool running, a notice)."""

    def text(self, piece: str) -> None: ...

    def restart(self) -> None: ...

    def progress(self, line: str) -> None: ...


class DirectReply(ShowsTheTurn):
    opened = False  # no message was opened: delivery sends the final reply as it would without streaming
    interval = 0.0

    def __init__(self, sink: TextSink, loop: asyncio.AbstractEventLoop, verbose: Callable[[], str],
                 describe: Callable[[str], Any], secret_values: Callable[[], list[str]]) -> None:
        self.sink = sink
        self._loop = loop
        self._verbose = verbose
        self._describe = describe  # tool name -> the tool (its ``progress``), or None
        self._secret_values = secret_values
        self._lock = threading.Lock()
        self._events: list[Event] = []
        self._waiting_calls: list[str] = []  # lines of the current batch's calls not yet started
        self._signalled = False
        self.visible = False

    # ---- thread side -------------------------------------------------------------------------------

    def text(self, piece: str) -> None:
        if piece:
            self._add(("text", piece))

    def restart(self) -> None:
        self._add(("restart", ""))

    def step(self, messages: list[dict[str, Any]]) -> None:
        """A stored step: a batch of tool calls starts its first call's line; each result starts the next. The
        words written before the calls were not the answer: with no line to show (/verbose off) the sink hears
        it as a start over, so the answer's own words begin anew."""
        shown = self._verbose() != "off"
        for msg in messages:
            if msg.get("role") == "assistant" and msg.get("tool_calls"):
                self._waiting_calls = [self._line(call) for call in msg["tool_calls"]] if shown else []
                if shown:
                    self._next_call()
                else:
                    self._add(("restart", ""))
            elif msg.get("role") == "tool":
                self._next_call()

    def _next_call(self) -> None:
        if self._waiting_calls:
            self._add(("line", self._waiting_calls.pop(0)))

    def _line(self, call: dict[str, Any]) -> str:
        fn = call.get("function") or {}
        name = str(fn.get("name") or "")
        tool = self._describe(name)
        return tool_line(name, fn.get("arguments"), getattr(tool, "progress", None), self._secret_values())

    def _add(self, event: Event) -> None:
        with self._lock:
            self._events.append(event)
            wake, self._signalled = not self._signalled, True
        if wake:
            try:
                self._loop.call_soon_threadsafe(self._flush)
            except RuntimeError:  # the loop is gone (shutdown)
                pass

    # ---- loop side ---------------------------------------------------------------------------------

    def _flush(self) -> None:
        with self._lock:
            events, self._events, self._signalled = self._events, [], False
        text: list[str] = []
        try:
            for kind, body in events:
                if kind == "text":
                    text.append(body)
                    continue
                if text:
                    self.sink.text("".join(text))
                    text = []
                if kind == "line":
                    self.sink.progress(body)
                else:
                    self.sink.restart()
            if text:
                self.sink.text("".join(text))
        except Exception:  # a client gone mid-stream is the adapter's business, never the turn's
            log.exception("stream_sink_failed")
        self.visible = self.visible or bool(events)

    async def close(self) -> None:
        """The turn is over (its thread has returned): whatever it wrote last reaches the sink before the reply."""
        self._flush()

    async def abandon(self, reason: str) -> None:
        self._flush()
