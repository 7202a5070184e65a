"""The daily commands: who a session belongs to, its title and settings (/model, /reasoning, /personality);
exchanges taken out by /undo and /retry; the full-text index /search reads (gateway/session/search.py: an
SQLite FTS5 table kept by triggers, or a PostgreSQL GIN expression index).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.engine import Connection

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


def create_search_index(conn: Connection) -> None:
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


revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for name, kind in (("user_id", sa.String(256)), ("title", sa.String(200)), ("model", sa.String(200)),
                       ("reasoning_effort", sa.String(16)), ("personality", sa.String(64))):
        op.add_column("sessions", sa.Column(name, kind, nullable=True))
    op.add_column("messages", sa.Column("hidden_at", sa.Float, nullable=True))
    op.add_column("messages", sa.Column("hidden_by", sa.String(16), nullable=True))
    # The index of sessions by owner, and the full-text index (filled from the messages already stored).
    create_search_index(op.get_bind())


def downgrade() -> None:
    raise NotImplementedError("Herald's schema is not downgraded: restore a backup instead")
