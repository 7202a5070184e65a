"""One request in flight: what its HTTP handler waits for, and what the turn hands it on the loop, in order.

The turn talks to it in three ways. A streamed request is the turn's ``TextSink`` (text pieces, progress lines,
a model call starting over: gateway/outbound/streaming/direct.py). Delivery's ``send`` of the answer (``reply_to``
is the request's id) ends it with the answer; the stream ends with exactly that text, whatever part of it went out
as pieces. Anything else said in the chat while it waits (an approval waiting elsewhere, a notice that the turn
failed) is a note: a progress line on a stream, and the answer's words when the turn ends without one. A turn that
ends without ever sending (stopped, cut short, answered by another instance) is found by the handler's poll of the
inbox row (``Ending`` from its status).

``Content`` turns those events into the text a client is shown: progress lines as paragraphs of their own
between the model's words.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["text", "line", "break", "end"]


@dataclass
class Ending:
    """How the request ended: ``answer`` (the stored reply) or an inbox status with the notes the chat got."""

    status: str  # "answered", or the inbox row's final status (failed, cancelled, rejected, done)
    answer: str | None = None
    notes: list[str] = field(default_factory=list)


class Exchange:
    def __init__(self, request_id: str, chat_id: str, stream: bool, holder: str = "", origin: str = "") -> None:
        self.id = request_id
        self.chat_id = chat_id
        self.stream = stream
        self.holder = holder  # the key's holder: the only one its files' links open for
        self.origin = origin  # scheme://host of the request, for the absolute links of the files it is sent
        self.events: asyncio.Queue[tuple[Kind, str]] = asyncio.Queue()
        self.ending: asyncio.Future[Ending] = asyncio.get_running_loop().create_future()
        self.notes: list[str] = []
        self._segment: list[str] = []  # what was streamed since the last line: the start of the answer

    @property
    def done(self) -> bool:
        return self.ending.done()

    # ---- the turn's side (TextSink) ------------------------------------------------------------------

    def text(self, piece: str) -> None:
        if not self.done:
            self._segment.append(piece)
            self.events.put_nowait(("text", piece))

    def restart(self) -> None:
        if not self.done:
            self._segment.clear()
            self.events.put_nowait(("break", ""))

    def progress(self, line: str) -> None:
        if not self.done:
            self._segment.clear()
            self.events.put_nowait(("line", line))

    # ---- what delivery and the poll say --------------------------------------------------------------

    def note(self, text: str) -> None:
        """Something said in the chat while this waits (not the answer)."""
        if not self.done:
            self.notes.append(text)
            self.progress(text)

    def answer(self, text: str) -> None:
        """The answer, as stored: the stream gets what of it was not streamed yet."""
        if self.done:
            return
        streamed = "".join(self._segment)
        if streamed and text.startswith(streamed):
            rest = text[len(streamed):]
        else:
            if streamed:
                self.events.put_nowait(("break", ""))
            rest = text
        if rest:
            self.events.put_nowait(("text", rest))
        self.ending.set_result(Ending("answered", text, list(self.notes)))
        self.events.put_nowait(("end", ""))

    def end(self, status: str, answer: str | None = None) -> None:
        """The turn ended without sending an answer here (found by the poll), or the daemon is stopping."""
        if self.done:
            return
        if answer is not None:
            self.answer(answer)
            return
        self.ending.set_result(Ending(status, None, list(self.notes)))
        self.events.put_nowait(("end", ""))


class Content:
    """The text a client is shown of a stream's events: progress lines are paragraphs of their own."""

    def __init__(self) -> None:
        self.shown: list[str] = []
        self._tail = ""

    def add(self, kind: Kind, body: str) -> str:
        if kind == "end":
            return ""
        if kind == "text":
            piece = body
        elif kind == "line":
            piece = self._paragraph() + body.strip() + "\n\n"
        else:
            piece = self._paragraph()
        if piece:
            self.shown.append(piece)
            self._tail = (self._tail + piece)[-2:]
        return piece

    def _paragraph(self) -> str:
        if not self._tail or self._tail == "\n\n":
            return ""
        return "\n" if self._tail.endswith("\n") else "\n\n"

    @property
    def text(self) -> str:
        return "".join(self.shown)
