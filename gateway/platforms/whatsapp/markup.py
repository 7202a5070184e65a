"""The agent's markdown in WhatsApp's formatting, on markdown-it-py's tokens.

WhatsApp shows ``*bold*``, ``_italic_``, ``~strike~``, ```` ```monospace``` ```` blocks, ```code``` spans, ``> quotes``
and ``- `` / ``1. `` lists; it has no headings (a bold line), no tables (a monospace block of aligned columns), no
link syntax (it makes a link of any address it sees: ``label (https://…)``), and no escapes.

Rendering happens in two steps. ``render`` writes everything but links, which stay ``[label](url)``: delivery's
chunking knows that form as one span and never ends a piece inside a link's label. ``finish`` writes the links
out just before a piece is sent; ``measure`` counts the finished text (UTF-16 units, as WhatsApp's clients
count). A converter failure never costs the user the answer: the markdown is sent as it is.
"""

from __future__ import annotations

import re
from typing import Any

import structlog

from gateway.kernel.chunking import Dialect, utf16_len

log = structlog.get_logger("herald.whatsapp")

# What delivery's chunking must not cut: the emphasis marks (``` blocks and `code` spans it knows already).
WHATSAPP = Dialect("whatsapp", ("*", "_", "~"))

_md: Any = None
_LINK = re.compile(r"\[([^\[\]\n]*)\]\(([^()\s]*)\)")
_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]+`", re.S)
_MARK = {"strong": "*", "em": "_", "s": "~"}


def _parser() -> Any:
    global _md
    if _md is None:
        from markdown_it import MarkdownIt

        _md = MarkdownIt("commonmark", {"html": False, "breaks": False}).enable(["table", "strikethrough"])
    return _md


def _close(tokens: list[Any], start: int) -> int:
    """The index of the token closing ``tokens[start]``."""
    depth = 0
    for index in range(start, len(tokens)):
        depth += tokens[index].nesting
        if depth == 0:
            return index
    return len(tokens) - 1


def _link(label: str, href: str) -> str:
    href = href.replace(" ", "%20").replace("(", "%28").replace(")", "%29")
    label = label.replace("[", "(").replace("]", ")").strip()
    if not href:
        return label
    if not label or label == href or label == href.split("://", 1)[-1]:
        return href
    return f"[{label}]({href})"


def _inline(token: Any, marks: bool = True) -> str:
    out: list[str] = []
    links: list[tuple[str, int]] = []  # open links: (href, where their label starts in out)
    for child in token.children or []:
        kind = child.type
        if kind == "text" or kind == "html_inline":
            out.append(child.content)
        elif kind in ("softbreak", "hardbreak"):
            out.append("\n")
        elif kind == "code_inline":
            out.append(f"`{child.content}`" if "`" not in child.content else child.content)
        elif kind.endswith(("_open", "_close")) and kind.rsplit("_", 1)[0] in _MARK:
            if marks:
                out.append(_MARK[kind.rsplit("_", 1)[0]])
        elif kind == "link_open":
            links.append((str(child.attrs.get("href") or ""), len(out)))
        elif kind == "link_close" and links:
            href, start = links.pop()
            label = "".join(out[start:])
            del out[start:]
            out.append(_link(label, href))
        elif kind == "image":
            out.append(_link(child.content or "image", str(child.attrs.get("src") or "")))
    return "".join(out).strip()


def _cell(token: Any) -> str:
    return re.sub(r"\[([^\[\]\n]*)\]\(([^()\s]*)\)", r"\1 (\2)", _inline(token, marks=False)).replace("`", "")


def _table(tokens: list[Any], start: int, end: int) -> str:
    rows: list[list[str]] = []
    for token in tokens[start:end]:
        if token.type == "tr_open":
            rows.append([])
        elif token.type == "inline" and rows:
            rows[-1].append(_cell(token))
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    sizes = [max(len(r[i]) for r in rows) for i in range(width)]
    shown = ["  ".join(cell.ljust(sizes[i]) for i, cell in enumerate(r)).rstrip() for r in rows]
    if len(shown) > 1:
        shown.insert(1, "  ".join("-" * s for s in sizes))
    return "```\n" + "\n".join(shown) + "\n```"


def _list(tokens: list[Any], start: int, end: int) -> str:
    ordered = tokens[start].type == "ordered_list_open"
    number = int(tokens[start].attrGet("start") or 1) if ordered else 0
    items: list[str] = []
    index = start + 1
    tight = True
    while index < end:
        token = tokens[index]
        if token.type != "list_item_open":
            index += 1
            continue
        close = _close(tokens, index)
        hidden = all(t.hidden for t in tokens[index + 1:close] if t.type == "paragraph_open")
        tight = tight and hidden
        marker = f"{number}. " if ordered else "- "
        number += 1
        body = ("\n" if hidden else "\n\n").join(_blocks(tokens, index + 1, close))
        lines = body.split("\n")
        items.append("\n".join([marker + lines[0], *(" " * len(marker) + line if line else line
                                                      for line in lines[1:])]))
        index = close + 1
    return ("\n" if tight else "\n\n").join(items)


def _blocks(tokens: list[Any], start: int, end: int) -> list[str]:
    out: list[str] = []
    index = start
    while index < end:
        token = tokens[index]
        if token.nesting == 1:
            close = _close(tokens, index)
            kind = token.type
            if kind == "heading_open" and index + 1 < close:
                text = _inline(tokens[index + 1], marks=False)
                out.append(f"*{text}*" if text else "")
            elif kind == "blockquote_open":
                body = "\n\n".join(_blocks(tokens, index + 1, close))
                out.append("\n".join(f"> {line}" if line else ">" for line in body.split("\n")))
            elif kind in ("bullet_list_open", "ordered_list_open"):
                out.append(_list(tokens, index, close))
            elif kind == "table_open":
                out.append(_table(tokens, index, close))
            else:
                out.extend(_blocks(tokens, index + 1, close))
            index = close + 1
            continue
        if token.type in ("fence", "code_block"):
            out.append("```\n" + token.content.rstrip("\n") + "\n```")
        elif token.type == "hr":
            out.append("———")
        elif token.type == "inline":
            out.append(_inline(token))
        elif token.type == "html_block":
            out.append(token.content.rstrip("\n"))
        index += 1
    return [block for block in out if block]


def render(markdown: str) -> str:
    """Markdown -> WhatsApp's formatting, links still ``[label](url)`` (``finish`` writes them out)."""
    if not markdown.strip():
        return markdown
    try:
        tokens = _parser().parse(markdown)
        return "\n\n".join(_blocks(tokens, 0, len(tokens)))
    except Exception as exc:  # a converter bug must not cost the user the answer
        log.warning("whatsapp_format_failed", error=f"{type(exc).__name__}: {exc}")
        return markdown


def finish(text: str) -> str:
    """A rendered piece as WhatsApp gets it: each ``[label](url)`` outside code written ``label (url)``."""
    if "](" not in text:
        return text
    out: list[str] = []
    last = 0
    for code in _CODE.finditer(text):
        out.append(_LINK.sub(r"\1 (\2)", text[last:code.start()]))
        out.append(code.group())
        last = code.end()
    out.append(_LINK.sub(r"\1 (\2)", text[last:]))
    return "".join(out)


def measure(text: str) -> int:
    return utf16_len(finish(text))


def one_line(text: str) -> str:
    """A finished text as one template parameter: WhatsApp refuses a parameter holding a line break, a tab or
    more than four spaces in a row, so lines are joined with " · " and every run of spaces becomes one."""
    lines = [re.sub(r"\s+", " ", line).strip() for line in text.split("\n")]
    return " · ".join(line for line in lines if line)
