"""Token counts without a tokenizer: about four characters a token (English text and code with the
common BPE vocabularies), plus a few tokens of framing per message. Good enough to decide when a history
nears the model's context; what a call really cost comes from the API's usage fields."""

from __future__ import annotations

import json
from typing import Any

CHARS_PER_TOKEN = 4
PER_MESSAGE = 4  # role and separators


def estimate_text(text: str) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):  # multi-part content: text parts count, an image is a flat guess
        total = 0
        for part in content:
            if isinstance(part, dict):
                total += len(part.get("text") or "") if part.get("type", "text") == "text" else 3000
        return total
    return 0


def estimate_message(msg: dict[str, Any]) -> int:
    chars = _content_chars(msg.get("content"))
    for call in msg.get("tool_calls") or ():
        fn = call.get("function") or {}
        chars += len(fn.get("name") or "") + len(fn.get("arguments") or "") + 12
    return PER_MESSAGE + (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def estimate_messages(messages: list[dict[str, Any]]) -> int:
    return sum(estimate_message(m) for m in messages if m)


# The registry hands out one shared list per tool set (tools/registry.py): counting its JSON once per list,
# not once per model call, saves serialising every schema before each call.
_counted: tuple[list[dict[str, Any]], int] | None = None


def estimate_tools(tools: list[dict[str, Any]] | None) -> int:
    global _counted
    if not tools:
        return 0
    counted = _counted
    if counted is not None and counted[0] is tools:
        return counted[1]
    estimate = estimate_text(json.dumps(tools, ensure_ascii=False, separators=(",", ":")))
    _counted = (tools, estimate)
    return estimate


def estimate_request(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
    return estimate_messages(messages) + estimate_tools(tools)
