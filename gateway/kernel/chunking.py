"""Text helpers shared by delivery and adapters: chunking rendered text to a platform's limit, plain text.

Chunking works on text already in the platform's dialect, measured the way the platform counts it
(``measure``: characters, UTF-16 units, the length after conversion to entities ...). A piece ends at a
paragraph, line or word boundary where it can; a code block cut in two is closed at the end of one piece
and reopened (same fence and language) at the start of the next, and a word boundary inside an inline
span is not used, so each piece renders on its own: code spans, links (``[label](url)``, ``<url|label>``,
``<url>``) and the dialect's emphasis (markdown's ``**bold**``/``_italic_``/``~~strike~~``; a platform's
``Dialect`` names its own marks). Only a span that does not fit in a piece by itself is split, plainly, at a
word inside it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

Measure = Callable[[str], int]

_FENCE = re.compile(r"^(\s*)(```|~~~)")
# Spans are looked for within this many characters of the window's end (past it, a span is split plainly
# anyway). No span pattern can run past the next occurrence of its own closing mark, so a line full of
# unmatched openers costs linear time, not quadratic.
_SPAN_MAX = 2048
_LOOK_PAST = 2 * _SPAN_MAX
_CODE_SPAN = re.compile(rf"`[^`\n]{{1,{_SPAN_MAX}}}`")
# Links whatever the dialect: markdown's [label](url) (and images), <url|label>, <url> and mentions such as
# <@U1>, <#2>, <:name:3>; a "<" before a space is a less-than sign.
_LINK = re.compile(rf"!?\[[^\[\]\n]{{0,{_SPAN_MAX}}}\]\([^()\s]{{0,{_SPAN_MAX}}}(?:\s[^()\n]{{0,{_SPAN_MAX}}})?\)"
                   rf"|<(?=[^\s<>])[^<>\n]{{0,{_SPAN_MAX}}}>")


def _emphasis(mark: str) -> str:
    """A span between two ``mark``s: opened before a non-space, closed after one, not inside a word."""
    m, edge = re.escape(mark), re.escape(mark[0])
    inside = f"[^{edge}\\n]" if len(mark) == 1 else f"(?:[^{edge}\\n]|{edge}(?!{edge}))"
    return (rf"(?<![\w{edge}]){m}(?=[^\s{edge}]){inside}{{0,{_SPAN_MAX}}}(?<=[^\s{edge}]){m}(?![\w{edge}])")


@dataclass(frozen=True)
class Dialect:
    """A markup as chunking sees it (``Capabilities.dialect``): the marks that open and close an emphasis span,
    a doubled mark before its single one (``**`` before ``*``). Each platform declares its own."""

    name: str
    emphasis: tuple[str, ...] = ()


MARKDOWN = Dialect("markdown", ("**", "__", "~~", "*", "_"))
PLAIN = Dialect("plain")


@functools.lru_cache(maxsize=32)
def _emphasis_pattern(marks: tuple[str, ...]) -> re.Pattern[str] | None:
    return re.compile("|".join(_emphasis(mark) for mark in marks)) if marks else None


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


def _spans(line: str, dialect: Dialect) -> list[tuple[int, int]]:
    """Where in ``line`` a piece must not end: code spans, links, the dialect's emphasis."""
    spans = [m.span() for m in _CODE_SPAN.finditer(line)]
    masked = line
    for start, end in spans:  # what is inside code is not markup
        masked = masked[:start] + "x" * (end - start) + masked[end:]
    spans += [m.span() for m in _LINK.finditer(masked)]
    emphasis = _emphasis_pattern(dialect.emphasis)
    if emphasis is not None:
        spans += [m.span() for m in emphasis.finditer(masked)]
    return spans


def _boundary(rest: str, hard: int, dialect: Dialect) -> int:
    """Where to end a piece of ``rest`` whose longest fitting body is ``rest[:hard]``."""
    window = rest[:hard]
    split = window.rfind("\n\n")
    if split >= hard // 2:
        return split
    newline = window.rfind("\n")
    if newline >= hard // 2:
        return newline
    # A word boundary in the window's last line, outside every span of the line (a span may go on past the
    # window); a very long line is looked at only near the window's end.
    line_start = max(newline + 1, hard - _LOOK_PAST)
    line_end = rest.find("\n", hard, hard + _LOOK_PAST)
    line = rest[line_start:line_end if line_end >= 0 else hard + _LOOK_PAST]
    spans = _spans(line, dialect)
    last_space = -1
    space = hard - line_start
    while True:
        space = line.rfind(" ", 0, space)
        if space <= 0:
            break
        last_space = max(last_space, space)
        if not any(start < space < end for start, end in spans):
            return line_start + space
    if newline > 0:  # no word boundary outside a span on this line: the line goes to the next piece
        return newline
    if last_space > 0:  # one span longer than a piece: split plainly, at a word inside it
        return line_start + last_space
    return hard


def chunk_text(text: str, limit: int, measure: Measure = len, dialect: Dialect = MARKDOWN) -> list[str]:
    """Split ``text`` (in ``dialect``, the adapter's ``Capabilities.dialect``) into pieces with
    ``measure(piece) <= limit`` each, losing nothing but the line breaks at a split."""
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
        cut = _boundary(rest, lo, dialect)
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
