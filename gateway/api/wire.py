"""OpenAI's wire format, both ways: a request's body read into an ``Ask`` (what the turn needs of it), and the
answer written as a chat completion, its chunks, or a Responses object and its events.

Reading is lenient where OpenAI's own API is (unknown fields are ignored: clients send ``temperature``,
``tools`` or vendor extensions the agent has no use for) and strict where the request would otherwise mean
nothing (no ``messages``, a last message that is not the user's): those are ``ApiError``s in OpenAI's shape
(``{"error": {"message", "type", "param", "code"}}``). Text is taken, and the images of the last user message
(``Ask.images``, data: URLs read by gateway/api/files.py); an earlier message's images are the session's already
(a client resends the whole history), and any other file part is named in the text instead of dropped silently.
The client's system messages and tool definitions are not used: the agent has its own prompt and tools.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from gateway.kernel.untrusted import clean_text

ROLES = ("system", "developer", "user", "assistant", "tool", "function")


class ApiError(Exception):
    """An answer in OpenAI's error shape: ``status`` and the ``error`` object."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error", code: str | None = None,
                 param: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
        self.headers = headers or {}


@dataclass
class Ask:
    """What a request asks, as the turn needs it."""

    text: str  # the new message: the last user message, or the input
    model: str
    prior: list[tuple[str, str]] = field(default_factory=list)  # (user|assistant, text) before it, in order
    first: str = ""  # the conversation's first user message (its identity, with ``user``)
    stream: bool = False
    include_usage: bool = False
    user: str = ""
    previous_response_id: str | None = None
    images: list[tuple[str, str]] = field(default_factory=list)  # (url, param) of the new message's image parts


def parse_body(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except ValueError:
        raise ApiError(400, "We could not parse the JSON body of your request.") from None
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    return body


def text_of(content: Any, param: str) -> str:
    """A message's content as text: a string, or a list of parts whose text parts are joined."""
    return read_content(content, param)[0]


def read_content(content: Any, param: str) -> tuple[str, list[tuple[str, str]]]:
    """(the text, each image part's (url, param)) of a message's content. A message of images alone is said to be
    one in words, the same each time a client resends it: its stored text is what the history is matched by."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return clean_text(content), []
    if not isinstance(content, list):
        raise ApiError(400, f"{param} must be a string or a list of content parts.", param=param)
    parts: list[str] = []
    images: list[tuple[str, str]] = []
    for n, part in enumerate(content):
        if isinstance(part, str):
            parts.append(part)
            continue
        if not isinstance(part, dict):
            raise ApiError(400, f"{param} has a part that is not an object.", param=param)
        kind = str(part.get("type") or "text")
        if kind in ("text", "input_text", "output_text") and isinstance(part.get("text"), str):
            parts.append(part["text"])
        elif kind in ("image_url", "input_image", "image"):
            url = part.get("image_url")
            images.append((url.get("url") if isinstance(url, dict) else url, f"{param}[{n}].image_url"))
        elif kind in ("file", "input_file", "input_audio"):
            parts.append("[a file was attached, which Herald's API does not take]")
    text = clean_text("\n".join(parts))
    if images and not text.strip():
        text = "[The user sent an image.]" if len(images) == 1 else f"[The user sent {len(images)} images.]"
    return text, images


def _model(body: dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise ApiError(400, "you must provide a model parameter", param="model")
    return model.strip()


def _user(body: dict[str, Any]) -> str:
    """The client's end user (OpenAI's ``user``; some clients send an object with an ``id``), or ""."""
    user = body.get("user")
    if isinstance(user, dict):
        user = user.get("id")
    return clean_text(str(user))[:256] if isinstance(user, str | int) and not isinstance(user, bool) else ""


def _conversation(messages: list[tuple[str, str]], param: str) -> tuple[str, list[tuple[str, str]], str]:
    """(the new message, what came before it, the first user message) of a list of (role, text)."""
    said = [(role, text) for role, text in messages if role in ("user", "assistant")]
    if not said or said[-1][0] != "user":
        raise ApiError(400, f"{param}: the last message must be the user's (a question for the agent).", param=param)
    text = said[-1][1]
    if not text.strip():
        raise ApiError(400, f"{param}: the last user message has no text.", param=param)
    first = next(t for role, t in said if role == "user")
    return text, said[:-1], first


def chat_ask(body: dict[str, Any]) -> Ask:
    """A ``/v1/chat/completions`` request."""
    messages = body.get("messages")
    if messages is None:
        raise ApiError(400, "'messages' is a required property", param="messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "'messages' must be a non-empty list of messages.", param="messages")
    read: list[tuple[str, str]] = []
    images: list[tuple[str, str]] = []
    for n, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise ApiError(400, f"messages[{n}] must be an object with a role ({', '.join(ROLES)}).",
                           param=f"messages[{n}]")
        text, found = read_content(message.get("content"), f"messages[{n}].content")
        read.append((message["role"], text))
        if message["role"] == "user":
            images = found
    text, prior, first = _conversation(read, "messages")
    options = body.get("stream_options")
    include_usage = bool(options.get("include_usage")) if isinstance(options, dict) else False
    return Ask(text, _model(body), prior, first, stream=body.get("stream") is True, include_usage=include_usage,
               user=_user(body), images=images)


def responses_ask(body: dict[str, Any]) -> Ask:
    """A ``/v1/responses`` request: ``input`` as text or a list of messages, ``previous_response_id``."""
    given = body.get("input")
    images: list[tuple[str, str]] = []
    if isinstance(given, str):
        read = [("user", clean_text(given))]
    elif isinstance(given, list) and given:
        read = []
        for n, item in enumerate(given):
            if not isinstance(item, dict):
                raise ApiError(400, f"input[{n}] must be an object.", param=f"input[{n}]")
            if item.get("type", "message") == "message" and item.get("role") in ROLES:
                text, found = read_content(item.get("content"), f"input[{n}].content")
                read.append((item["role"], text))
                if item["role"] == "user":
                    images = found
    else:
        raise ApiError(400, "'input' is a required property: text, or a list of messages.", param="input")
    text, prior, first = _conversation(read, "input")
    previous = body.get("previous_response_id")
    if previous is not None and not isinstance(previous, str):
        raise ApiError(400, "previous_response_id must be a string.", param="previous_response_id")
    return Ask(text, _model(body), prior, first, stream=body.get("stream") is True, user=_user(body),
               previous_response_id=previous or None, images=images)


# ---- answers -------------------------------------------------------------------------------------------------


def usage_of(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached}}


def completion(ident: str, model: str, text: str, usage: dict[str, Any]) -> dict[str, Any]:
    return {"id": ident, "object": "chat.completion", "created": int(time.time()), "model": model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                         "logprobs": None, "finish_reason": "stop"}],
            "usage": usage}


def chunk(ident: str, model: str, created: int, delta: dict[str, Any] | None, finish: str | None = None,
          usage: dict[str, Any] | None = None, with_usage: bool = False) -> dict[str, Any]:
    """One ``chat.completion.chunk``; ``delta`` None is the usage chunk (no choices) that ends a stream whose
    client asked for ``stream_options.include_usage`` (then every chunk says ``usage``, null until that one)."""
    out: dict[str, Any] = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                           "system_fingerprint": None,
                           "choices": [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None,
                                                                 "finish_reason": finish}]}
    if with_usage:
        out["usage"] = usage
    return out


def response_usage(usage: dict[str, Any]) -> dict[str, Any]:
    return {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"],
            "total_tokens": usage["total_tokens"],
            "input_tokens_details": {"cached_tokens": usage["prompt_tokens_details"]["cached_tokens"]},
            "output_tokens_details": {"reasoning_tokens": 0}}


def output_message(ident: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {"type": "message", "id": ident, "status": status, "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []}


def response(ident: str, model: str, created: int, status: str, output: list[dict[str, Any]],
             previous: str | None, usage: dict[str, Any] | None, error: dict[str, Any] | None = None
             ) -> dict[str, Any]:
    return {"id": ident, "object": "response", "created_at": created, "status": status, "model": model,
            "output": output, "previous_response_id": previous, "usage": usage, "error": error,
            "incomplete_details": None, "instructions": None, "metadata": {}, "parallel_tool_calls": False,
            "temperature": None, "top_p": None, "tool_choice": "auto", "tools": [],
            "text": {"format": {"type": "text"}}, "store": True}


def sse(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    body = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return (f"event: {event}\n" if event else "").encode() + f"data: {body}\n\n".encode()
