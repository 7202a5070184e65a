"""/search: full-text search over one person's own conversations.

The index follows ``messages`` by itself, whoever writes them:

- SQLite: an FTS5 table ``messages_fts`` (rowid = messages.id, the message's text as plain text) kept by
  triggers on ``messages`` — an insert of a user or assistant message whose content is a JSON string adds
  its text, a delete (retention) removes it. The text is copied because ``messages.content`` holds JSON
  (``"caf\\u00e9"``), which FTS5 would index escaped.
- PostgreSQL: no copy. A partial GIN expression index on ``to_tsvector('simple', content #>> '{}')`` for
  user and assistant messages; the query repeats that expression, so the planner can use the index.

Both tokenise without stemming ('simple' / unicode61), so a word finds the same messages on either. What
is searched: user and assistant messages (not tool results) of the sessions whose ``user_id`` is the
sender's on that platform, skipping those /undo or /retry took out. Shared group sessions belong to nobody
and are never searched.

The index itself is DDL SQLAlchemy's table declarations cannot express: migration 0003 creates it (frozen
there, like every migration, so that a later change here cannot change what an old revision did).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

MAX_RESULTS = 10
_WORD = re.compile(r"\w+")

# The PostgreSQL expression, written identically in the query and in the index (migration 0003), or the
# index is not used.
_PG_DOC = "to_tsvector('simple', m.content #>> '{}')"

def query_words(query: str) -> list[str]:
    """The words of what the person typed; every one must occur (no operators: nothing to get wrong)."""
    return _WORD.findall(query)[:16]


@dataclass
class Hit:
    role: str
    text: str
    created_at: float
    session_id: str
    session_title: str | None
    session_created_at: float


def search(conn: Connection, platform: str, user_id: str | None, words: list[str],
           limit: int = MAX_RESULTS) -> list[Hit]:
    """The newest messages of ``user_id``'s own sessions on ``platform`` that contain every word (``user_id``
    None: of every person's own sessions there, for a platform with one owner: the web chat's token holder)."""
    if not words:
        return []
    params: dict[str, Any] = {"platform": platform, "user": user_id, "limit": limit}
    columns = ("m.role, m.content, m.created_at, s.id AS session_id, s.title, "
               "s.created_at AS session_created_at")
    person = "s.user_id = :user" if user_id is not None else "s.user_id IS NOT NULL"
    mine = f"s.platform = :platform AND {person} AND m.hidden_at IS NULL"
    if conn.dialect.name == "sqlite":
        # Each word a quoted FTS5 string: whatever it holds, it is a term, never query syntax.
        params["q"] = " ".join('"' + w.replace('"', '""') + '"' for w in words)
        sql = (f"SELECT {columns} FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid "
               f"JOIN sessions s ON s.id = m.session_id WHERE messages_fts MATCH :q AND {mine} "
               "ORDER BY m.id DESC LIMIT :limit")
    else:
        params["q"] = " ".join(words)
        sql = (f"SELECT {columns} FROM messages m JOIN sessions s ON s.id = m.session_id "
               f"WHERE m.role IN ('user', 'assistant') AND {_PG_DOC} @@ plainto_tsquery('simple', :q) "
               f"AND {mine} ORDER BY m.id DESC LIMIT :limit")
    rows = conn.execute(text(sql), params).mappings().all()
    return [Hit(r["role"], _as_text(r["content"]), float(r["created_at"]), r["session_id"], r["title"],
                float(r["session_created_at"])) for r in rows]


def _as_text(content: Any) -> str:
    if isinstance(content, str):
        try:  # raw SQL hands back the stored JSON text, not the decoded value
            value = json.loads(content)
        except ValueError:
            return content
        return value if isinstance(value, str) else content
    return str(content or "")


_MARKDOWN = re.compile(r"([\\`*_\[\]<>~|#])")


def snippet(text_: str, words: list[str], width: int = 110, markdown: bool = True) -> str:
    """A short piece of ``text_`` around the first word found, on one line, markdown neutralised (unless
    ``markdown`` is False: for a client that shows it as plain text)."""
    flat = " ".join(text_.split())
    lowered = flat.lower()
    at = min((i for i in (lowered.find(w.lower()) for w in words) if i >= 0), default=0)
    start = max(0, at - width // 3)
    if start:
        space = flat.find(" ", start)
        start = space + 1 if 0 <= space < at else start
    piece = flat[start:start + width]
    if start + width < len(flat):
        cut = piece.rfind(" ")
        piece = (piece[:cut] if cut > width // 2 else piece) + "…"
    if start:
        piece = "…" + piece
    return _MARKDOWN.sub(r"\\\1", piece) if markdown else piece
