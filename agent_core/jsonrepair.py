"""Best-effort repair of the tool-call argument JSON that models emit.

Models (especially small local ones) wrap arguments in code fences, leave trailing commas, use Python
quoting or stop before the closing braces. Rejecting the call would waste a round trip, so we try a
short ladder of cheap, conservative repairs and fall back to ``{}``. A value cut off inside a string is not
completed: what the model meant is unknown (``cut_off`` tells the agent, which runs nothing for that call).
"""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE_RE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)
_TRAILING_COMMA_RE = re.compile(r",(\s*[}\]])")
_ORPHAN_KEY_RE = re.compile(r',?\s*"(?:[^"\\]|\\.)*"\s*:$')
_PY_LITERAL_RE = re.compile(r"\b(True|False|None)\b")
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}


def _loads(text: str) -> Any:
    return json.loads(text)


def _strip_fences(text: str) -> str:
    m = _FENCE_RE.match(text)
    return m.group(1) if m else text


def _outside_strings(text: str, fn: Any) -> str:
    """Apply ``fn`` to the parts of ``text`` that are not inside double-quoted strings."""
    out: list[str] = []
    buf: list[str] = []
    in_str = False
    escaped = False
    for ch in text:
        if in_str:
            out.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            out.append(fn("".join(buf)))
            buf = []
            out.append(ch)
            in_str = True
        else:
            buf.append(ch)
    out.append(fn("".join(buf)))
    return "".join(out)


def _remove_trailing_commas(text: str) -> str:
    return _outside_strings(text, lambda s: _TRAILING_COMMA_RE.sub(r"\1", s))


def _single_to_double_quotes(text: str) -> str:
    """Convert Python-style quoting to JSON.

    Only when the first quote is a single quote: with JSON-style strings first, an apostrophe is far
    more likely to be text ("it's") than a delimiter.
    """
    first_single, first_double = text.find("'"), text.find('"')
    if first_single < 0 or (0 <= first_double < first_single):
        return text
    out: list[str] = []
    in_str = False
    escaped = False
    for ch in text:
        if in_str:
            if escaped:
                # \' is not a JSON escape; keep other escapes as they are.
                out.append("'" if ch == "'" else "\\" + ch)
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == "'":
                out.append('"')
                in_str = False
            elif ch == '"':
                out.append('\\"')
            else:
                out.append(ch)
        elif ch == "'":
            out.append('"')
            in_str = True
        else:
            out.append(ch)
    result = "".join(out)
    return _outside_strings(result, lambda s: _PY_LITERAL_RE.sub(lambda m: _PY_LITERALS[m[1]], s))


def _scan(text: str) -> tuple[list[str], bool]:
    """The closers of the brackets left open at the end of ``text``, and whether it ends inside a string."""
    stack: list[str] = []
    in_str = False
    escaped = False
    for ch in text:
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
    return stack, in_str


def cut_off(text: str | None) -> bool:
    """Whether tool arguments stop inside a string: the model's output was cut (a length limit, a dropped
    stream). Such a value is never completed: ``rm -rf /home/me/old-build`` cut after ``/home/me`` must not run."""
    if not text or not text.strip():
        return False
    try:
        json.loads(text)
        return False
    except (ValueError, RecursionError):
        return _scan(_strip_fences(text).strip())[1]


def _close_truncated(text: str) -> str:
    """Close the brackets a cut-off text left open, in the right order; a cut string stays unparseable."""
    stack, in_str = _scan(text)
    if in_str:
        return text
    tail = text.rstrip()
    # A dangling separator ("a": 1,  or  "a":) cannot be completed meaningfully; drop it.
    while tail.endswith((",", ":")):
        # For "key": drop the orphaned key too; anything else just loses the separator.
        shorter = _ORPHAN_KEY_RE.sub("", tail) if tail.endswith(":") else tail
        tail = (shorter if shorter != tail else tail[:-1]).rstrip()
    return tail + "".join(reversed(stack))


def repair_json(text: str | None) -> tuple[dict[str, Any], bool]:
    """Parse tool arguments. Returns ``(arguments, repaired)``; unrecoverable input gives ``({}, True)``."""
    if text is None or not text.strip():
        # No-parameter tools legitimately get empty arguments from many servers.
        return {}, False
    try:
        value = _loads(text)
        if isinstance(value, dict):
            return value, False
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, str):
        # Double-encoded: the arguments are a JSON string containing the object.
        inner, _ = repair_json(value)
        return inner, True
    candidate = _strip_fences(text).strip()
    steps = (_remove_trailing_commas, _single_to_double_quotes, _close_truncated, _remove_trailing_commas)
    for step in steps:
        candidate = step(candidate)
        try:
            value = _loads(candidate)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            return value, True
    return {}, True
