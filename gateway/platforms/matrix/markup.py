"""The agent's markdown as a Matrix message: ``body`` is the markdown itself (what clients without HTML show, as
Element does for what a person types) and ``formatted_body`` its HTML (``org.matrix.custom.html``), made by
markdown-it-py with raw HTML escaped, never passed through: what the model writes is untrusted. Images are
not rendered (Matrix shows only mxc:// images, and a link is safer), strikethrough is ``<del>``, code blocks
keep their language as Element reads it (``<code class="language-python">``).

A message's size is what the homeserver counts against its 65,536-byte event limit: the JSON of its content.
``measure`` gives the bytes of ``{"body", "formatted_body"}``; ``MAX_CONTENT`` leaves room for the rest of an
event (relations, ids, signatures) and for encryption, which grows the content by a third.
"""

from __future__ import annotations

import html
import json
from collections import OrderedDict
from typing import Any

MAX_CONTENT = 32_000
FORMAT = "org.matrix.custom.html"
# Below this many UTF-8 bytes, body and HTML together cannot reach MAX_CONTENT: one byte of markdown becomes at
# most 14 of the pair (a control character is \u0001 in both; a '"' is \" and &quot;; a table's cells, tags).
_GROWTH = 14
_SURELY_FITS = (MAX_CONTENT - 256) // _GROWTH

_md: Any = None


def _renderer() -> Any:
    global _md
    if _md is None:
        from markdown_it import MarkdownIt

        md = MarkdownIt("commonmark", {"html": False, "breaks": True, "typographer": False})
        md.enable(["table", "strikethrough"]).disable("image")

        def strike(tag: str) -> Any:
            def rule(renderer: Any, tokens: list[Any], idx: int, options: Any, env: Any) -> str:
                return tag
            return rule

        md.add_render_rule("s_open", strike("<del>"))
        md.add_render_rule("s_close", strike("</del>"))
        _md = md
    return _md


def to_html(markdown: str) -> str:
    """Never raises: should the renderer fail, the text is shown escaped in a code block rather than lost."""
    try:
        return str(_renderer().render(markdown)).rstrip("\n")
    except Exception:
        return f"<pre><code>{html.escape(markdown)}</code></pre>"


class Markup:
    """``to_html`` remembered for the few texts just measured (delivery measures, then sends)."""

    def __init__(self) -> None:
        self._html: OrderedDict[str, str] = OrderedDict()

    def html(self, markdown: str) -> str:
        hit = self._html.get(markdown)
        if hit is None:
            hit = self._html[markdown] = to_html(markdown)
            while len(self._html) > 64:
                self._html.popitem(last=False)
        return hit

    def content(self, markdown: str, msgtype: str = "m.text") -> dict[str, Any]:
        return {"msgtype": msgtype, "body": markdown, "format": FORMAT, "formatted_body": self.html(markdown)}

    def measure(self, markdown: str) -> int:
        size = len(markdown.encode())
        if size <= _SURELY_FITS:
            return size * _GROWTH + 64
        return content_size({"body": markdown, "formatted_body": self.html(markdown)})


def content_size(content: dict[str, Any]) -> int:
    return len(json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode())
