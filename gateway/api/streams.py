"""A streamed answer as OpenAI's server-sent events: chat completion chunks ending in ``[DONE]``, or the Responses
API's typed events (``response.created`` ... ``response.output_text.delta`` ... ``response.completed``).

A writer turns an exchange's events into bytes and knows nothing of the connection: the adapter writes them and
stops when the client is gone. What a client is shown is the ``Content`` of the events (exchange.py): the model's
words as they come, progress lines as paragraphs of their own, and at the end the answer's rest.
"""

from __future__ import annotations

import time
from typing import Any

from gateway.api import wire
from gateway.api.exchange import Content, Ending, Kind


def closing(ending: Ending) -> str:
    """What a turn that ended without an answer says (the chat's notes, else why in a sentence)."""
    if ending.notes:
        return "\n\n".join(ending.notes)
    return {
        "cancelled": "The turn was stopped before it answered.",
        "rejected": "Too many messages are waiting in this conversation: send this one again later.",
        "shutdown": "Herald is restarting, so this answer was cut short. Ask again in a moment.",
        "failed": "Something went wrong on Herald's side; the details are in its log.",
    }.get(ending.status, "The turn ended without an answer.")


class ChatWriter:
    def __init__(self, ident: str, model: str, include_usage: bool) -> None:
        self.ident, self.model, self.include_usage = ident, model, include_usage
        self.created = int(time.time())
        self.content = Content()

    def _chunk(self, delta: dict[str, Any] | None, finish: str | None = None,
               usage: dict[str, Any] | None = None) -> bytes:
        return wire.sse(wire.chunk(self.ident, self.model, self.created, delta, finish, usage, self.include_usage))

    def start(self) -> bytes:
        return self._chunk({"role": "assistant", "content": ""})

    def event(self, kind: Kind, body: str) -> bytes:
        piece = self.content.add(kind, body)
        return self._chunk({"content": piece}) if piece else b""

    def finish(self, ending: Ending, usage: dict[str, Any]) -> bytes:
        if ending.status == "failed":
            error = {"message": closing(ending), "type": "server_error", "param": None, "code": None}
            return wire.sse({"error": error}) + wire.sse("[DONE]")
        out = b"" if ending.answer is not None or ending.notes else self.event("line", closing(ending))
        out += self._chunk({}, "stop")
        if self.include_usage:
            out += self._chunk(None, usage=usage)
        return out + wire.sse("[DONE]")


class ResponsesWriter:
    def __init__(self, ident: str, item: str, model: str, previous: str | None) -> None:
        self.ident, self.item, self.model, self.previous = ident, item, model, previous
        self.created = int(time.time())
        self.content = Content()
        self._sequence = 0

    def _event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return wire.sse(data, kind)

    def _response(self, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None = None,
                  error: dict[str, Any] | None = None) -> dict[str, Any]:
        return wire.response(self.ident, self.model, self.created, status, output, self.previous, usage, error)

    def start(self) -> bytes:
        part = {"type": "output_text", "text": "", "annotations": []}
        return (self._event("response.created", response=self._response("in_progress", []))
                + self._event("response.in_progress", response=self._response("in_progress", []))
                + self._event("response.output_item.added", output_index=0,
                              item=wire.output_message(self.item, "", "in_progress"))
                + self._event("response.content_part.added", item_id=self.item, output_index=0, content_index=0,
                              part=part))

    def event(self, kind: Kind, body: str) -> bytes:
        piece = self.content.add(kind, body)
        if not piece:
            return b""
        return self._event("response.output_text.delta", item_id=self.item, output_index=0, content_index=0,
                           delta=piece, logprobs=[])

    def finish(self, ending: Ending, usage: dict[str, Any]) -> bytes:
        if ending.status == "failed":
            error = {"code": "server_error", "message": closing(ending)}
            return self._event("response.failed", response=self._response("failed", [], None, error))
        out = b"" if ending.answer is not None or ending.notes else self.event("line", closing(ending))
        text = self.content.text
        message = wire.output_message(self.item, text)
        return (out
                + self._event("response.output_text.done", item_id=self.item, output_index=0, content_index=0,
                              text=text, logprobs=[])
                + self._event("response.content_part.done", item_id=self.item, output_index=0, content_index=0,
                              part=message["content"][0])
                + self._event("response.output_item.done", output_index=0, item=message)
                + self._event("response.completed",
                              response=self._response("completed", [message], wire.response_usage(usage))))
