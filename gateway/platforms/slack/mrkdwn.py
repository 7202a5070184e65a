"""The agent's markdown in Slack's mrkdwn, through slackify-markdown (a markdown-it-py renderer).

What slackify-markdown does: **bold** -> *bold*, _italics_, ~~strike~~ -> ~strike~, [text](url) ->
<url|text>, headings as bold lines, lists with bullets, quotes, code spans and fences, &, < and > escaped.
Two things it leaves that matter here, done on the same parser's tokens rather than with patterns:

- Tables: slackify disables them (the pipes come out as prose). Slack has no tables, so a table becomes a
  code block of aligned columns, which reads as one; a link in a cell shows as ``text (url)``.
- Code: its code spans and blocks are passed through unescaped, but Slack parses ``<...>`` even inside
  code (``a<b`` could start a link), so &, < and > are escaped there too; the client shows them plainly.

Broadcast mentions (``<!channel>``, ``<!here>``, ``<!everyone>``) are not passed through: words from the
model (or from a web page it read) must never ping a whole channel. User mentions (``<@U123>``) are.
"""

from __future__ import annotations

from typing import Any

import structlog

from gateway.kernel.chunking import Dialect

log = structlog.get_logger("herald.slack")

# What delivery's chunking must not cut: mrkdwn's *bold*, _italic_ and ~strike~.
MRKDWN = Dialect("slack_mrkdwn", ("*", "_", "~"))

_ESCAPES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"))


def escape(text: str) -> str:
    for raw, entity in _ESCAPES:
        text = text.replace(raw, entity)
    return text


def unescape(text: str) -> str:
    for raw, entity in reversed(_ESCAPES):
        text = text.replace(entity, raw)
    return text


_renderer: Any = None


def _renderer_class() -> Any:
    global _renderer
    if _renderer is not None:
        return _renderer
    from slackify_markdown.slackify import SlackifyMarkdown

    class Renderer(SlackifyMarkdown):
        def text(self, tokens: Any, idx: int, options: Any, env: Any) -> str:
            # slackify keeps <!...> as a mention; a broadcast from the model's text is shown, not sent.
            return str(super().text(tokens, idx, options, env)).replace("<!", "&lt;!")

        def code_inline(self, tokens: Any, idx: int, options: Any, env: Any) -> str:
            return f"`{escape(tokens[idx].content)}`"

        def fence(self, tokens: Any, idx: int, options: Any, env: Any) -> str:
            return f"```\n{escape(tokens[idx].content)}```\n"

        code_block = fence

        def link_open(self, tokens: Any, idx: int, options: Any, env: Any) -> str:
            # A URL is escaped like any text; a "|" or ">" in it would end the link's parts early.
            href = escape(tokens[idx].attrs.get("href", "")).replace("|", "%7C")
            tokens[idx].attrs["href"] = href
            return str(super().link_open(tokens, idx, options, env))

    _renderer = Renderer
    return Renderer


def _cell_text(inline: Any) -> str:
    """A table cell's words without markup (it is shown as code, where markup would be literal); a link
    keeps its address as ``text (url)``, since code shows no links."""
    parts = []
    hrefs: list[tuple[str, int]] = []  # the open links: (href, where their text starts in parts)
    for child in inline.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.type == "link_open":
            hrefs.append((str(child.attrs.get("href") or ""), len(parts)))
        elif child.type == "link_close" and hrefs:
            href, start = hrefs.pop()
            if href and "".join(parts[start:]).strip() != href:  # an autolink shows its address already
                parts.append(f" ({href})")
        elif child.type == "image":
            src = str(child.attrs.get("src") or "")
            parts.append(f"{child.content or 'image'} ({src})" if src else child.content)
    return "".join(parts).strip()


def _tables_as_code(markdown: str) -> str:
    """Each top-level table, found by markdown-it's table rule, replaced by a fenced block of aligned columns."""
    if "|" not in markdown:
        return markdown
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("gfm-like", options_update={"html": False, "linkify": False}).parse(markdown)
    tables: list[tuple[int, int, list[list[str]]]] = []
    rows: list[list[str]] = []
    start = end = 0
    for token in tokens:
        if token.type == "table_open" and token.level == 0 and token.map:
            start, end = token.map
            rows = []
        elif token.type == "tr_open":
            rows.append([])
        elif token.type == "inline" and rows and token.level > 0:
            rows[-1].append(_cell_text(token))
        elif token.type == "table_close" and token.level == 0:
            tables.append((start, end, rows))
            rows = []
    if not tables:
        return markdown
    lines = markdown.split("\n")
    for start, end, table in reversed(tables):
        width = max(len(r) for r in table)
        table = [r + [""] * (width - len(r)) for r in table]
        sizes = [max(len(r[i]) for r in table) for i in range(width)]
        shown = ["  ".join(cell.ljust(sizes[i]) for i, cell in enumerate(r)).rstrip() for r in table]
        if len(shown) > 1:
            shown.insert(1, "  ".join("-" * s for s in sizes))
        lines[start:end] = ["```", *shown, "```"]
    return "\n".join(lines)


def to_mrkdwn(markdown: str) -> str:
    """Markdown -> mrkdwn. Never raises: a converter failure gives the escaped text, unformatted."""
    if not markdown.strip():
        return markdown
    try:
        return str(_renderer_class()(_tables_as_code(markdown)).slackify()).rstrip("\n")
    except Exception as exc:  # a converter bug must not cost the user the answer
        log.warning("slack_format_failed", error=f"{type(exc).__name__}: {exc}")
        return escape(markdown)
