"""Synchronous OpenAI-compatible chat client: retries with backoff, error classification, fallbacks.

Runs in worker threads; one ``openai.OpenAI`` per endpoint is created up front and shared (the SDK's
client is thread-safe), so a call costs one HTTP request and no set-up.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from agent_core.errors import (
    RETRYABLE_KINDS,
    TRANSPORT_ERRORS,
    ErrorKind,
    LLMError,
    classify,
    parse_retry_after,
)
from agent_core.http import model_http_client
from agent_core.sdk import ChatCompletion, openai

__all__ = [
    "RETRYABLE_KINDS",
    "Endpoint",
    "ErrorKind",
    "LLMClient",
    "LLMError",
    "classify",
    "endpoints_from_config",
    "parse_retry_after",
]

log = logging.getLogger(__name__)

# Errors that are the request's own fault: another endpoint would refuse the same request.
_REQUEST_FAULT = frozenset({"bad_request", "context_overflow"})


@dataclass
class Endpoint:
    base_url: str
    model: str
    api_key: str | None = None
    # Request fields for this endpoint only (``reasoning_effort`` where its model takes one).
    extra: dict[str, Any] | None = None
    # False: the model takes no images; image parts are sent to it as a line of text instead (a fallback
    # without vision behind a primary with it). True: messages go as they are.
    vision: bool = True


def endpoints_from_config(model_cfg: Any, environ: dict[str, str] | None = None) -> list[Endpoint]:
    """Primary + fallbacks from a ``gateway.config.ModelConfig`` (duck-typed: agent_core stays standalone)."""
    import os

    env = os.environ if environ is None else environ

    def key(name: str | None) -> str | None:
        return (env.get(name) or None) if name else None

    eps = [Endpoint(model_cfg.base_url, model_cfg.name, key(model_cfg.api_key_env))]
    eps += [Endpoint(f.base_url, f.name, key(f.api_key_env)) for f in model_cfg.fallbacks]
    return eps


class LLMClient:
    def __init__(
        self,
        endpoints: list[Endpoint],
        timeout: float = 120,
        max_retries: int = 3,
        temperature: float | None = None,
        max_tokens: int | None = None,
        sleep: Callable[[float], None] | None = None,
        rng: Callable[[], float] = random.random,
        *,
        stream: bool = False,
        backoff_base: float = 1.0,
        backoff_cap: float = 30.0,
        max_retry_after: float = 60.0,
        observe: Callable[[float, str | None], None] | None = None,
        on_fault: Callable[[str], None] | None = None,
    ) -> None:
        if not endpoints:
            raise ValueError("LLMClient needs at least one endpoint")
        self.endpoints = list(endpoints)
        self.timeout = timeout
        self.max_retries = max_retries
        self.stream = stream
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        # A Retry-After longer than this means "not soon": better to try the fallback than stall the chat.
        self.max_retry_after = max_retry_after
        self._sleep = sleep
        self._rng = rng
        # Told each request's duration and its error kind (None when it succeeded): the daemon's metrics.
        self._observe = observe
        # Told each fault the endpoint served, by kind (an ``ErrorKind``, or "stream_cut" / "bad_output"),
        # handled or not: the daemon counts them (gateway/kernel/faults.py). Called from the worker thread.
        self._on_fault = on_fault
        # The SDK's own retries are off: retry and fallback policy live here, with an interruptible wait.
        self._clients = [
            openai.OpenAI(
                base_url=ep.base_url,
                api_key=ep.api_key or "not-needed",
                timeout=timeout,
                max_retries=0,
                http_client=model_http_client(timeout),
            )
            for ep in self.endpoints
        ]
        self._extra: dict[str, Any] = {}
        if temperature is not None:
            self._extra["temperature"] = temperature
        if max_tokens is not None:
            self._extra["max_tokens"] = max_tokens

    @classmethod
    def from_config(cls, model_cfg: Any, **kwargs: Any) -> LLMClient:
        return cls(
            endpoints_from_config(model_cfg),
            timeout=model_cfg.timeout_seconds,
            max_retries=model_cfg.max_retries,
            temperature=model_cfg.temperature,
            max_tokens=model_cfg.max_tokens,
            **kwargs,
        )

    def close(self) -> None:
        for client in self._clients:
            client.close()

    # ------------------------------------------------------------------------------------------ public

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        interrupt: threading.Event | None = None,
        on_text: Callable[[str], None] | None = None,
        on_restart: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        """One assistant message (OpenAI format) for ``messages``, or an ``LLMError``.

        With ``on_text`` the answer is streamed and each piece of its text is passed on as it arrives;
        ``on_restart`` is called before a retry or a fallback starts over after pieces were passed on (what
        came before is void). The returned message is the same either way.
        """
        last: LLMError | None = None
        emitted = False

        def emit(delta: str) -> None:
            nonlocal emitted
            emitted = True
            on_text(delta)  # type: ignore[misc]

        sink = emit if on_text is not None else None
        for ep, client in zip(self.endpoints, self._clients, strict=True):
            attempt = 0
            while True:
                if interrupt is not None and interrupt.is_set():
                    raise LLMError("interrupted", "interrupted before the model call")
                if emitted:
                    emitted = False
                    if on_restart is not None:
                        on_restart()
                started = time.perf_counter()
                try:
                    result = self._call(client, ep, messages, tools, interrupt, sink)
                    if self._observe is not None:
                        self._observe(time.perf_counter() - started, None)
                    if _malformed_calls(result):
                        # Not retried: the agent repairs the arguments (agent_core/jsonrepair.py), or the tool
                        # gets none and says so to the model. Counted, so an operator sees a model misbehave.
                        self._fault("bad_output")
                    return result
                except LLMError as exc:
                    err = exc
                except (openai.OpenAIError, *TRANSPORT_ERRORS) as exc:
                    err = classify(exc)
                if self._observe is not None:
                    self._observe(time.perf_counter() - started, err.kind)
                err.endpoint = ep.base_url
                if err.kind == "interrupted" or err.kind in _REQUEST_FAULT:
                    raise err
                self._fault(err.fault_kind)
                last = err
                if not err.retryable or attempt >= self.max_retries:
                    break
                delay = self._delay(attempt, err.retry_after)
                if delay is None:
                    break
                attempt += 1
                log.warning(
                    "llm call failed; retrying",
                    extra={
                        "endpoint": ep.base_url,
                        "kind": err.kind,
                        "status": err.status,
                        "attempt": attempt,
                        "delay": round(delay, 3),
                    },
                )
                self._wait(delay, interrupt)
            log.warning(
                "llm endpoint gave up",
                extra={"endpoint": ep.base_url, "kind": last.kind, "status": last.status},
            )
        assert last is not None
        raise last

    def list_models(self, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The primary endpoint's /models entries as plain dicts, fields beyond the standard ones kept (some
        servers put the context size there)."""
        page = self._clients[0].with_options(timeout=timeout).models.list()
        return [m.model_dump() for m in page.data]

    # ---------------------------------------------------------------------------------------- internals

    def _fault(self, kind: str) -> None:
        if self._on_fault is not None:
            try:
                self._on_fault(kind)
            except Exception:  # counting a fault must never fail the call
                log.exception("on_fault callback failed")

    def _delay(self, attempt: int, retry_after: float | None) -> float | None:
        if retry_after is not None:
            return None if retry_after > self.max_retry_after else retry_after
        # "Equal jitter": at least half the exponential step, so retries never bunch up at zero.
        step = min(self.backoff_cap, self.backoff_base * (2**attempt))
        return step / 2 + self._rng() * step / 2

    def _wait(self, delay: float, interrupt: threading.Event | None) -> None:
        if self._sleep is not None:
            self._sleep(delay)
            interrupted = interrupt is not None and interrupt.is_set()
        elif interrupt is not None:
            interrupted = interrupt.wait(delay)
        else:
            time.sleep(delay)
            interrupted = False
        if interrupted:
            raise LLMError("interrupted", "interrupted while waiting to retry")

    def _call(
        self,
        client: openai.OpenAI,
        ep: Endpoint,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        interrupt: threading.Event | None,
        on_text: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        if not ep.vision:
            messages = without_images(messages)
        kwargs: dict[str, Any] = {"model": ep.model, "messages": messages, **self._extra, **(ep.extra or {})}
        if tools:
            kwargs["tools"] = tools
        if self.stream or on_text is not None:
            return {**self._call_streaming(client, kwargs, interrupt, on_text), "model": ep.model}
        # client.post skips the SDK's recursive TypedDict transform of the request, which costs ~3 ms of CPU
        # per call on a 20-message history (measured); our messages are already plain JSON-ready dicts.
        resp = client.post("/chat/completions", content=_json_body(kwargs), cast_to=ChatCompletion)
        if not resp.choices:
            raise LLMError("server", "the response had no choices", fault="bad_output")
        msg = resp.choices[0].message
        out: dict[str, Any] = {"role": "assistant", "content": msg.content}
        # The model asked for (its price is configured under that name) and what the call cost, if told.
        out["model"] = ep.model
        out["usage"] = resp.usage.model_dump(exclude_none=True) if resp.usage is not None else None
        if msg.tool_calls:
            out["tool_calls"] = [
                {
                    "id": tc.id,
                    "type": "function",
                    "function": {"name": tc.function.name, "arguments": tc.function.arguments or ""},
                }
                for tc in msg.tool_calls
                if getattr(tc, "function", None) is not None
            ]
        return out

    def _call_streaming(
        self, client: openai.OpenAI, kwargs: dict[str, Any], interrupt: threading.Event | None,
        on_text: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        # Streaming lets /stop take effect mid-generation: the interrupt is checked between chunks.
        parts: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        saw_choice = False
        finished = False  # a finish_reason or [DONE] came: the answer is whole
        usage: dict[str, Any] | None = None
        # The server-sent events are read here, as plain dicts, to the end of the body: the SDK's iterator
        # builds a pydantic model per chunk and stops reading at [DONE], which closes the connection instead of
        # reusing it (measured: 2-3 ms of CPU and a new TCP connection per reply). include_usage: the last
        # chunk carries the call's token usage (/usage, the daily budget).
        body = {**kwargs, "stream": True, "stream_options": {"include_usage": True}}
        with client.post("/chat/completions", content=_json_body(body), cast_to=ChatCompletion,
                         stream=True, stream_cls=openai.Stream[object]) as stream:
            for chunk in _cut_is_fault(_sse_json(_lines(stream.response.iter_bytes()))):
                if chunk is _DONE:
                    finished = True
                    continue
                if interrupt is not None and interrupt.is_set():
                    raise LLMError("interrupted", "interrupted during generation")
                if not isinstance(chunk, dict):
                    continue
                if chunk.get("error"):
                    error = chunk["error"]
                    message = error.get("message") if isinstance(error, dict) else str(error)
                    raise LLMError("server", f"the stream reported an error: {message}")
                if isinstance(chunk.get("usage"), dict):  # the last chunk, when the server honours include_usage
                    usage = chunk["usage"]
                choices = chunk.get("choices")
                if not choices or not isinstance(choices[0], dict):
                    continue
                saw_choice = True
                if choices[0].get("finish_reason"):
                    finished = True
                delta = choices[0].get("delta") or {}
                content = delta.get("content")
                if content and isinstance(content, str):
                    parts.append(content)
                    if on_text is not None:
                        on_text(content)
                for tc in delta.get("tool_calls") or ():
                    if not isinstance(tc, dict):
                        continue
                    slot = calls.setdefault(
                        tc.get("index", 0), {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
                    )
                    if tc.get("id"):
                        slot["id"] = tc["id"]
                    fn = tc.get("function")
                    if isinstance(fn, dict):
                        # Servers differ: some send the name once, some repeat it in every delta.
                        name, arguments = fn.get("name"), fn.get("arguments")
                        if name and name != slot["function"]["name"]:
                            slot["function"]["name"] += name
                        if arguments:
                            slot["function"]["arguments"] += arguments
        if not saw_choice:
            raise LLMError("server", "the stream ended without a choice", fault="bad_output")
        if not finished:
            # The body ended cleanly but the answer did not (a proxy closed it between two events): what came
            # is a fragment, and taking it as the answer would store it as if the model had said just that.
            raise LLMError("connection", "the stream ended before the answer did", fault="stream_cut")
        out: dict[str, Any] = {"role": "assistant", "content": "".join(parts) or None, "usage": usage}
        if calls:
            out["tool_calls"] = [calls[i] for i in sorted(calls)]
            for n, call in enumerate(out["tool_calls"]):
                call["id"] = call["id"] or f"call_{n}"
        return out


_DONE = object()  # what _sse_json yields for ``data: [DONE]``
NO_VISION_NOTE = "[An image was attached here; this model cannot see images.]"


def without_images(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with every image part replaced by a line saying one was there (copies where changed)."""
    out = messages
    for n, msg in enumerate(messages):
        content = msg.get("content")
        if not isinstance(content, list) or not any(isinstance(p, dict) and p.get("type") == "image_url"
                                                    for p in content):
            continue
        if out is messages:
            out = list(messages)
        texts = [p.get("text", "") if p.get("type") == "text" else NO_VISION_NOTE
                 for p in content if isinstance(p, dict)]
        out[n] = {**msg, "content": "\n".join(t for t in texts if t)}
    return out


def _malformed_calls(message: dict[str, Any]) -> bool:
    """Whether any tool call's arguments are not a JSON object (empty arguments are fine: no parameters)."""
    for call in message.get("tool_calls") or ():
        raw = (call.get("function") or {}).get("arguments")
        if not raw or not isinstance(raw, str) or not raw.strip():
            continue
        try:
            if not isinstance(json.loads(raw), dict):
                return True
        except (ValueError, RecursionError):
            return True
    return False


def _cut_is_fault(events: Iterator[Any]) -> Iterator[Any]:
    """``events``, with the connection dropping after the answer began reported as a cut stream (retried like
    a connection error; counted as its own fault). A read timeout stays a timeout."""
    try:
        yield from events
    except TRANSPORT_ERRORS as exc:
        err = classify(exc)
        if err.kind == "timeout":
            raise err from exc
        raise LLMError("connection", f"the stream was cut: {type(exc).__name__}", fault="stream_cut") from exc


def _sse_json(lines: Iterator[bytes]) -> Iterator[Any]:
    """The JSON payload of each server-sent event (``data:`` lines; comments skipped; ``[DONE]`` as
    ``_DONE``), reading every line to the end of the body."""
    data: list[bytes] = []
    for line in lines:
        if line.startswith(b"data:"):
            data.append(line[6:] if line.startswith(b"data: ") else line[5:])
            continue
        if line or not data:
            continue  # another field (event:, id:, a comment), or a blank line with nothing pending
        payload, data = b"\n".join(data), []
        yield _DONE if payload.startswith(b"[DONE]") else _json_or_error(payload)
    if data:
        yield _DONE if data[0].startswith(b"[DONE]") else _json_or_error(b"\n".join(data))


def _lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The lines of a body as it arrives, as bytes: the events' JSON goes to orjson undecoded (httpx's text
    and line decoders cost more than the parse). Lines end in LF, CRLF or a lone CR, as server-sent events may."""
    tail = b""
    for chunk in chunks:
        buf = tail + chunk if tail else chunk
        lines = buf.splitlines()
        if buf.endswith(b"\n"):
            tail = b""
        elif buf.endswith(b"\r"):  # its LF may start the next chunk: hold the line back with its CR
            tail = lines.pop() + b"\r"
        else:
            tail = lines.pop() if lines else b""
        yield from lines
    if tail:
        yield from tail.splitlines()


def _json_body(body: dict[str, Any]) -> bytes:
    """The request's JSON, made by orjson: the SDK's own encoder took ~0.2 ms of the loop's GIL per call for a
    history and the tool schemas (measured); what orjson refuses (an integer beyond 64 bits) goes the slow way."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def _json_or_error(payload: bytes) -> Any:
    try:
        return orjson.loads(payload)
    except ValueError:
        raise LLMError("server", "the stream sent a chunk that is not JSON", fault="bad_output") from None
