"""The daily commands: who a session belongs to, its title and settings (/model, /reasoning, /personality);
exchanges taken out by /undo and /retry; the full-text index /search reads (gateway/session/search.py: an
SQLite FTS5 table kept by triggers, or a PostgreSQL GIN expression index).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from gateway.storage.migrations.raw_ddl import search_index_v1

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
    search_index_v1(op.get_bind())


def downgrade() -> None:
    raise NotImplementedError("Herald's schema is not downgraded: restore a backup instead")
