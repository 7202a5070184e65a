"""A scripted OpenAI-compatible chat-completions server for tests and benchmarks.

Behaviour comes from two places, in this order:

1. ``fake.script(step, ...)`` — a FIFO of steps, one consumed per chat-completion request;
2. ``fake.responder(request_json) -> step`` when the FIFO is empty. The default,
   :func:`directive_responder`, reads directives out of the last user message, so a test that talks
   to the daemon from another process can drive the model by message text alone:

   ``[sleep=0.5]``                         wait 0.5 s before answering
   ``[tool=terminal:{"command":"echo hi"}]`` answer with that tool call (when the last message is the
                                           user's); once the tool result comes back the reply is
                                           ``tool said: <tool content>``
   ``[error=500]``                         answer with that HTTP error status

   Without directives the reply is ``echo: <last user message>``.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.base import HttpFake
from tests.fakes.llm_audio import AudioEndpoints
from tests.fakes.loop_thread import ServedInThread

# ---------------------------------------------------------------------------------------------- steps


@dataclass
class Reply:
    text: str
    delay: float = 0.0
    finish_reason: str = "stop"
    # Streaming fixtures (only for requests with ``stream: true``): the text's pieces as sent (default: three),
    # ``chunk_delay`` seconds before each, and ``cut_after`` pieces after which the connection is dropped.
    chunks: list[str] | None = None
    chunk_delay: float = 0.0
    cut_after: int | None = None
    # With cut_after: end the body cleanly there (no finish_reason, no [DONE]), as a proxy closing between two
    # events would, instead of dropping the connection.
    cut_clean: bool = False
    # An asyncio.Event the stream waits for after its first piece: a test holds the rest back until it has seen
    # that piece arrive on its own (streaming shown without a guess at how fast anything is).
    gate: Any = None

    @classmethod
    def streamed(cls, chunks: list[str], chunk_delay: float, **kw: Any) -> Reply:
        return cls("".join(chunks), chunks=list(chunks), chunk_delay=chunk_delay, **kw)


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None
    delay: float = 0.0


@dataclass
class ToolCalls:
    calls: list[ToolCall]
    text: str | None = None
    delay: float = 0.0
    chunks: list[str] | None = None  # as for Reply: the text's pieces when streamed, and the wait before each
    chunk_delay: float = 0.0


@dataclass
class Error:
    status: int
    body: dict[str, Any] | str | None = None
    retry_after: float | str | None = None
    code: str | None = None
    delay: float = 0.0

    @classmethod
    def context_overflow(cls) -> Error:
        return cls(
            400,
            message="This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 9000 tokens. Please reduce the length of the messages.",
            code="context_length_exceeded",
        )

    def __init__(
        self,
        status: int,
        body: dict[str, Any] | str | None = None,
        retry_after: float | str | None = None,
        code: str | None = None,
        delay: float = 0.0,
        message: str | None = None,
    ) -> None:
        self.status = status
        self.retry_after = retry_after
        self.code = code
        self.delay = delay
        if body is None:
            body = {
                "error": {
                    "message": message or f"fake error {status}",
                    "type": "invalid_request_error" if status < 500 else "server_error",
                    "param": None,
                    "code": code,
                }
            }
        self.body = body


@dataclass
class Hang:
    """Sleep ``seconds`` before answering (a client with a shorter timeout sees a timeout); with ``until`` (an
    asyncio.Event of the server's loop), wait for it instead, so a test decides when the model answers."""

    seconds: float
    then: Any = None
    until: Any = None


@dataclass
class Drop:
    """Close the connection without sending a response."""


Step = Reply | ToolCall | ToolCalls | Error | Hang | Drop


@dataclass
class Outage:
    """A stretch of trouble: while it lasts, every request ``match`` accepts (all, without one) gets
    ``make(request)`` instead of its scripted or normal answer. ``served`` counts the faults it served."""

    make: Callable[[dict[str, Any]], Step]
    until: float
    match: Callable[[dict[str, Any]], bool] | None = None
    served: int = 0

    @property
    def active(self) -> bool:
        return time.monotonic() < self.until

    def end(self) -> None:
        self.until = 0.0

# ------------------------------------------------------------------------------------------ responders

_SLEEP_RE = re.compile(r"\[sleep=([0-9.]+)\]")
_ERROR_RE = re.compile(r"\[error=(\d{3})\]")
_TOOL_TAG = "[tool="
_decoder = json.JSONDecoder()


def message_text(message: dict[str, Any] | None) -> str:
    if not message:
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def last_user_message(request: dict[str, Any]) -> dict[str, Any] | None:
    for msg in reversed(request.get("messages") or []):
        if msg.get("role") == "user":
            return msg
    return None


def echo_responder(request: dict[str, Any]) -> Step:
    return Reply("echo: " + message_text(last_user_message(request)))


def _parse_tool_directive(text: str) -> ToolCall | None:
    start = text.find(_TOOL_TAG)
    if start < 0:
        return None
    colon = text.find(":", start)
    if colon < 0:
        return None
    name = text[start + len(_TOOL_TAG) : colon]
    try:
        args, _end = _decoder.raw_decode(text, colon + 1)
    except json.JSONDecodeError:
        return None
    return ToolCall(name, args)


def directive_responder(request: dict[str, Any]) -> Step:
    messages = request.get("messages") or []
    last = messages[-1] if messages else {}
    text = message_text(last_user_message(request))
    m = _SLEEP_RE.search(text)
    delay = float(m.group(1)) if m else 0.0
    m = _ERROR_RE.search(text)
    if m:
        return Error(int(m.group(1)), delay=delay)
    if last.get("role") == "tool":
        return Reply("tool said: " + message_text(last), delay=delay)
    if last.get("role") == "user" and request.get("tools"):
        call = _parse_tool_directive(text)
        if call is not None:
            call.delay = delay
            return call
    return Reply("echo: " + text, delay=delay)


# ---------------------------------------------------------------------------------------------- server


class FakeLLM(AudioEndpoints, HttpFake):
    client_max_size = 64 * 1024 * 1024
    # A client that gives up on a Hang must not keep a handler sleeping; stop() stays quick with hung requests.
    runner_options = {"handler_cancellation": True, "shutdown_timeout": 0.2}

    def __init__(self, model: str = "fake-model", api_key: str | None = None, host: str = "127.0.0.1",
                 public_models: bool = False):
        super().__init__(host)
        self.model = model
        # When set, requests without ``Authorization: Bearer <api_key>`` get a 401.
        self.api_key = api_key
        # GET /models answers anyone, key or not (OpenRouter's list is public); completions still need the key.
        self.public_models = public_models
        # When set, GET /models gives it as the model's ``context_length`` (as OpenRouter does).
        self.context_length: int | None = None
        self.responder: Callable[[dict[str, Any]], Step] = directive_responder
        self.requests: list[dict[str, Any]] = []
        self.auth_headers: list[str | None] = []
        self.peers: list[Any] = []  # each request's client address: one per connection the client opened
        # deque append/popleft are atomic, so FakeLLMThread can script from another thread.
        self._steps: collections.deque[Step] = collections.deque()
        self.outages: list[Outage] = []
        self._ids = itertools.count(1)
        self.base_url = ""
        self._audio_init()

    def script(self, *steps: Step) -> None:
        self._steps.extend(steps)

    @property
    def pending(self) -> int:
        return len(self._steps)

    def outage(self, make: Step | Callable[[dict[str, Any]], Step], seconds: float,
               match: Callable[[dict[str, Any]], bool] | None = None) -> Outage:
        """For ``seconds`` from now, requests (those ``match`` accepts) get ``make`` (a step, or a function of
        the request giving one) — a provider answering 429s or 500s for a minute, say. Safe from any thread."""
        fn = make if callable(make) else (lambda _body: make)  # a step is a dataclass instance, not callable
        outage = Outage(fn, time.monotonic() + seconds, match)
        self.outages.append(outage)
        return outage

    def reset(self) -> None:
        self._steps.clear()
        self.requests.clear()
        self.auth_headers.clear()
        self.responder = directive_responder

    def routes(self) -> list[web.AbstractRouteDef]:
        return [web.post("/v1/chat/completions", self._chat), web.get("/v1/models", self._models),
                *self.audio_routes()]

    async def start(self) -> str:
        self.port = 0  # a new port at each start
        await self.serve()
        self.base_url = f"{self.root}/v1"
        return self.base_url

    async def stop(self) -> None:
        await self.close()

    async def __aenter__(self) -> FakeLLM:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -------------------------------------------------------------------------------------- handlers

    async def _models(self, request: web.Request) -> web.Response:
        if (self.api_key is not None and not self.public_models
                and request.headers.get("Authorization") != f"Bearer {self.api_key}"):
            return web.json_response({"error": {"message": "Incorrect API key provided.", "code": "invalid_api_key"}},
                                     status=401)
        return web.json_response(
            {
                "object": "list",
                "data": [{"id": self.model, "object": "model", "created": 0, "owned_by": "fake",
                          **({"context_length": self.context_length} if self.context_length else {})}],
            }
        )

    def _next_step(self, body: dict[str, Any]) -> Step:
        for outage in self.outages:
            if outage.active and (outage.match is None or outage.match(body)):
                outage.served += 1
                return outage.make(body)
        try:
            return self._steps.popleft()
        except IndexError:
            return self.responder(body)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        auth = request.headers.get("Authorization")
        self.requests.append(body)
        self.auth_headers.append(auth)
        self.peers.append(request.transport.get_extra_info("peername") if request.transport else None)
        if self.api_key is not None and auth != f"Bearer {self.api_key}":
            step: Step = Error(401, message="Incorrect API key provided.", code="invalid_api_key")
        else:
            step = self._next_step(body)
        while isinstance(step, Hang):
            if step.until is not None:
                await step.until.wait()
            else:
                await asyncio.sleep(step.seconds)
            step = step.then if step.then is not None else self.responder(body)
        if isinstance(step, Drop):
            # Abort the transport so the client sees a disconnect, not an HTTP response.
            assert request.transport is not None
            request.transport.abort()
            raise asyncio.CancelledError
        delay = getattr(step, "delay", 0.0)
        if delay:
            await asyncio.sleep(delay)
        if isinstance(step, Error):
            return self._error(step)
        message, finish = self._message(step)
        model = body.get("model") or self.model
        cid = f"chatcmpl-fake{next(self._ids)}"
        if body.get("stream"):
            return await self._stream(request, body, cid, model, message, finish, step)
        return web.json_response(
            {
                "id": cid,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
                "usage": _usage(body, message),
                "system_fingerprint": None,
            }
        )

    def _error(self, step: Error) -> web.Response:
        headers = {}
        if step.retry_after is not None:
            headers["Retry-After"] = str(step.retry_after)
        if isinstance(step.body, str):
            return web.Response(status=step.status, text=step.body, headers=headers)
        return web.json_response(step.body, status=step.status, headers=headers)

    def _message(self, step: Step) -> tuple[dict[str, Any], str]:
        if isinstance(step, Reply):
            return {"role": "assistant", "content": step.text, "refusal": None}, step.finish_reason
        calls = [step] if isinstance(step, ToolCall) else step.calls
        text = step.text if isinstance(step, ToolCalls) else None
        tool_calls = []
        for call in calls:
            args = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
            tool_calls.append(
                {
                    "id": call.id or f"call_fake{next(self._ids)}",
                    "type": "function",
                    "function": {"name": call.name, "arguments": args},
                }
            )
        return {"role": "assistant", "content": text, "refusal": None, "tool_calls": tool_calls}, "tool_calls"

    async def _stream(
        self,
        request: web.Request,
        body: dict[str, Any],
        cid: str,
        model: str,
        message: dict[str, Any],
        finish: str,
        step: Step | None = None,
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish_reason: str | None = None, usage: Any = None) -> bytes:
            data: dict[str, Any] = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
            }
            if usage is not None:
                data["choices"] = []
                data["usage"] = usage
            return b"data: " + json.dumps(data).encode() + b"\n\n"

        head = [chunk({"role": "assistant", "content": ""})]
        content = message.get("content")
        pieces = (getattr(step, "chunks", None) or _pieces(content)) if content else []
        chunk_delay = getattr(step, "chunk_delay", 0.0)
        cut_after = getattr(step, "cut_after", None)
        if chunk_delay or cut_after is not None or getattr(step, "gate", None) is not None:
            # Piece by piece, as a model writes: one write each, with the wait before it.
            await resp.write(b"".join(head))
            for n, piece in enumerate(pieces):
                if cut_after is not None and n >= cut_after:
                    if getattr(step, "cut_clean", False):
                        await resp.write_eof()
                        return resp
                    assert request.transport is not None
                    request.transport.abort()
                    return resp
                await asyncio.sleep(chunk_delay)
                if n == 1 and getattr(step, "gate", None) is not None:
                    await step.gate.wait()  # type: ignore[union-attr]
                await resp.write(chunk({"content": piece}))
            head, pieces = [], []
        parts = head + [chunk({"content": piece}) for piece in pieces]
        for i, tc in enumerate(message.get("tool_calls") or []):
            head = {"index": i, "id": tc["id"], "type": "function"}
            parts.append(
                chunk({"tool_calls": [{**head, "function": {"name": tc["function"]["name"], "arguments": ""}}]})
            )
            for piece in _pieces(tc["function"]["arguments"]):
                parts.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
        parts.append(chunk({}, finish))
        if (body.get("stream_options") or {}).get("include_usage"):
            parts.append(chunk({}, usage=_usage(body, message)))
        parts.append(b"data: [DONE]\n\n")
        # One write: per-chunk writes would cost a syscall each, and tests only need the framing.
        await resp.write(b"".join(parts))
        await resp.write_eof()
        return resp


def _pieces(text: str, n: int = 3) -> list[str]:
    size = max(1, -(-len(text) // n))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _usage(body: dict[str, Any], message: dict[str, Any]) -> dict[str, int]:
    # A rough character count stands in for tokens; callers only need plausible numbers.
    prompt = sum(len(message_text(m)) for m in body.get("messages") or []) // 4 + 1
    completion = len(message.get("content") or "") // 4 + 1
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


# ------------------------------------------------------------------------------------------- threaded


class FakeLLMThread(ServedInThread):
    """A FakeLLM served from a background thread with its own event loop.

    For tests that run the daemon as a subprocess, or benchmarks. ``script``, ``requests`` and
    ``responder`` are safe to use from the main thread.
    """

    thread_name = "fake-llm"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(FakeLLM(**kwargs))
        self.base_url = ""

    def start(self) -> str:
        self.base_url = super().start()
        return self.base_url

    def __enter__(self) -> FakeLLMThread:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def script(self, *steps: Step) -> None:
        self.fake.script(*steps)

    def outage(self, make: Step | Callable[[dict[str, Any]], Step], seconds: float,
               match: Callable[[dict[str, Any]], bool] | None = None) -> Outage:
        return self.fake.outage(make, seconds, match)

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.fake.requests

    @property
    def auth_headers(self) -> list[str | None]:
        return self.fake.auth_headers

    @property
    def responder(self) -> Callable[[dict[str, Any]], Step]:
        return self.fake.responder

    @responder.setter
    def responder(self, fn: Callable[[dict[str, Any]], Step]) -> None:
        self.fake.responder = fn
