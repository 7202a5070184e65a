"""What revisions make by raw DDL (what table declarations in gateway/storage/tables.py cannot express), one frozen
function per version: a revision calls the version it introduced, and ``CURRENT`` is what a database created
directly at head gets (gateway/storage/migrations/__init__.py ``create_at_head``). A change makes a new version and
a new revision; an old version is never edited, so an old revision keeps doing what it did.
tests/storage/test_migrations.py checks that a database made at head equals one taken through every revision.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.engine import Connection

# The full-text index /search reads (gateway/session/search.py), introduced by revision 0003.
_SQLITE_DDL = [
    "CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(body)",
    # CASE, not AND: SQLite does not promise to stop at json_valid, and json_type of bad JSON is an error
    # that would fail the message's insert.
    """CREATE TRIGGER IF NOT EXISTS messages_fts_insert AFTER INSERT ON messages
       WHEN new.role IN ('user', 'assistant')
            AND CASE WHEN json_valid(new.content) THEN json_type(new.content) = 'text' ELSE 0 END
       BEGIN INSERT INTO messages_fts(rowid, body) VALUES (new.id, json_extract(new.content, '$')); END""",
    """CREATE TRIGGER IF NOT EXISTS messages_fts_delete AFTER DELETE ON messages
       BEGIN DELETE FROM messages_fts WHERE rowid = old.id; END""",
]
_SQLITE_BACKFILL = """INSERT INTO messages_fts(rowid, body)
    SELECT id, json_extract(content, '$') FROM messages
    WHERE role IN ('user', 'assistant')
      AND CASE WHEN json_valid(content) THEN json_type(content) = 'text' ELSE 0 END"""

_PG_DDL = [
    "CREATE INDEX IF NOT EXISTS ix_messages_fts ON messages USING GIN "
    "((to_tsvector('simple', content #>> '{}'))) WHERE role IN ('user', 'assistant')",
]

# Declared in tables.py too; created here because the column came in the same revision.
_COMMON_DDL = ["CREATE INDEX IF NOT EXISTS ix_sessions_user ON sessions (platform, user_id)"]


def search_index_v1(conn: Connection) -> None:
    """Create the full-text index of ``messages`` if it is missing (filled from the messages already there)."""
    if conn.dialect.name == "sqlite":
        fresh = conn.exec_driver_sql(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'messages_fts'").first() is None
        for ddl in _SQLITE_DDL:
            conn.exec_driver_sql(ddl)
        if fresh:
            conn.exec_driver_sql(_SQLITE_BACKFILL)
    elif conn.dialect.name == "postgresql":
        for ddl in _PG_DDL:
            conn.exec_driver_sql(ddl)
    for ddl in _COMMON_DDL:
        conn.exec_driver_sql(ddl)


# Every raw-DDL object of the newest schema, in order.
CURRENT: list[Callable[[Connection], None]] = [search_index_v1]
