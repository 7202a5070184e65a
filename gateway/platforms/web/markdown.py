"""The web chat's replies as HTML: markdown-it-py (CommonMark plus tables and strikethrough), made safe.

What the model writes is untrusted text. Raw HTML in it is escaped, never passed through (``html: False``);
link targets go through markdown-it's own check (no ``javascript:``, ``vbscript:``, ``file:`` or ``data:``);
links open in a new tab with ``rel="noopener noreferrer"``, so the page they lead to cannot reach this one or
learn its address (the token lives in its fragment only until the page reads it, but still). An image is shown
only when it is one of this chat's own files (``/chat/files/…``, gateway/platforms/web/files.py); any other
``![alt](address)`` becomes a link named by its alt text: an ``<img>`` would make the browser fetch whatever
address the model chose (the page's policy would refuse it anyway).
"""

from __future__ import annotations

import html
import re
from functools import lru_cache
from typing import Any

_OWN_FILE = re.compile(r"^/chat/files/[0-9a-f]{32}/[^?#\s]*\?sig=[0-9a-f]{32}$")

_md: Any = None


def _renderer() -> Any:
    global _md
    if _md is None:
        # Imported on first use: a daemon without the web chat (or one that never answers in it) pays nothing.
        from markdown_it import MarkdownIt

        md = MarkdownIt("commonmark", {"html": False, "breaks": True, "typographer": False})
        md.enable(["table", "strikethrough"])

        def link_open(renderer: Any, tokens: list[Any], idx: int, options: Any, env: Any) -> str:
            tokens[idx].attrSet("target", "_blank")
            tokens[idx].attrSet("rel", "noopener noreferrer")
            return renderer.renderToken(tokens, idx, options, env)

        def image(renderer: Any, tokens: list[Any], idx: int, options: Any, env: Any) -> str:
            token = tokens[idx]
            src = str(token.attrGet("src") or "")
            alt = html.escape(renderer.renderInlineAsText(token.children or [], options, env))
            if _OWN_FILE.match(src):
                return f'<img src="{html.escape(src)}" alt="{alt}" loading="lazy">'
            if not src.lower().startswith(("https://", "http://")):  # a data: image, say: its alt text alone
                return alt
            return (f'<a href="{html.escape(src)}" target="_blank" rel="noopener noreferrer">'
                    f'{alt or html.escape(src)}</a>')

        md.add_render_rule("link_open", link_open)
        md.add_render_rule("image", image)
        _md = md
    return _md


def warm() -> None:
    """Import and build the renderer now (at start-up), not on the first reply: the import takes tens of
    milliseconds, which on the event loop would show as lag."""
    _renderer()


@lru_cache(maxsize=1024)
def to_html(text: str) -> str:
    """``text`` (markdown) as an HTML fragment safe to put in the page. Cached: a chat's history is served
    again on every reload. Should the renderer ever fail, the text is shown escaped rather than lost."""
    try:
        return _renderer().render(text)
    except Exception:
        return f"<pre>{html.escape(text)}</pre>"
