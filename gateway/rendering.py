"""Text helpers shared by delivery and adapters: chunking rendered text to a platform's limit, plain text.

Chunking works on text already in the platform's dialect, measured the way the platform counts it
(``measure``: characters, UTF-16 units, the length after conversion to entities ...). A piece ends at a
paragraph, line or word boundary where it can; a code block cut in two is closed at the end of one piece
and reopened (same fence and language) at the start of the next, and a word boundary inside an inline
span (``code``, **bold**) is not used, so each piece renders on its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable

Measure = Callable[[str], int]

_FENCE = re.compile(r"^(\s*)(```|~~~)")
_INLINE_MARKS = ("`", "**", "__", "~~")


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _fence_after(body: str, open_fence: str | None) -> str | None:
    """The fence line still open at the end of ``body`` (given the one open at its start), or None."""
    fence = open_fence
    for line in body.split("\n"):
        if _FENCE.match(line):
            fence = None if fence else line.strip()
    return fence


def _piece(prefix: str, body: str, open_fence: str | None) -> tuple[str, str | None]:
    fence = _fence_after(body, open_fence)
    piece = prefix + body
    if fence:
        piece = piece.rstrip("\n") + "\n" + fence[:3]
    return piece, fence


def _inside_span(line_prefix: str) -> bool:
    return any(line_prefix.count(mark) % 2 for mark in _INLINE_MARKS)


def _boundary(window: str, hard: int) -> int:
    """Where to end a piece whose longest fitting body is ``window`` (``hard`` characters long)."""
    split = window.rfind("\n\n")
    if split >= hard // 2:
        return split
    split = window.rfind("\n")
    if split >= hard // 2:
        return split
    line_start = window.rfind("\n") + 1
    space = len(window)
    for _ in range(64):
        space = window.rfind(" ", line_start, space)
        if space <= line_start:
            break
        if not _inside_span(window[line_start:space]):
            return space
    return hard


def chunk_text(text: str, limit: int, measure: Measure = len) -> list[str]:
    """Split ``text`` into pieces with ``measure(piece) <= limit`` each, losing nothing but the line breaks
    at a split."""
    if measure(text) <= limit:
        return [text]
    pieces: list[str] = []
    open_fence: str | None = None
    rest = text
    while rest:
        prefix = (open_fence + "\n") if open_fence else ""
        whole, fence = _piece(prefix, rest, open_fence)
        if measure(whole) <= limit:
            pieces.append(whole)
            break
        # The longest body that fits, found by bisection: ``measure`` may be costly and is only monotone
        # in practice, so the boundary is re-checked below.
        lo, hi = 1, len(rest)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if measure(_piece(prefix, rest[:mid], open_fence)[0]) <= limit:
                lo = mid
            else:
                hi = mid - 1
        cut = _boundary(rest[:lo], lo)
        while cut > 1 and measure(_piece(prefix, rest[:cut], open_fence)[0]) > limit:
            cut -= 1
        body, rest = rest[:cut], rest[cut:]
        if rest.startswith("\n"):
            rest = rest.lstrip("\n")
        piece, fence = _piece(prefix, body, open_fence)
        if piece.strip():
            pieces.append(piece)
        open_fence = fence
    return [p for p in pieces if p.strip()]


_MD_STRIP = [
    (re.compile(r"```[^\n]*\n"), ""),
    (re.compile(r"```"), ""),
    (re.compile(r"\*\*(.+?)\*\*", re.S), r"\1"),
    (re.compile(r"__(.+?)__", re.S), r"\1"),
    (re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])"), r"\1"),
    (re.compile(r"`([^`\n]+)`"), r"\1"),
    (re.compile(r"^#{1,6}\s+", re.M), ""),
    (re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)"), r"\1 (\2)"),
]


def to_plain(text: str) -> str:
    """Markdown without its markup: the same words, for platforms (or retries) without formatting."""
    for pattern, repl in _MD_STRIP:
        text = pattern.sub(repl, text)
    return text
