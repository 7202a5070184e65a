"""Long conversations, memory and cost: the summary a compressed session's successor starts with; the
agent's per-user memory; token usage per turn and model (/usage, gateway.daily_token_budget).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("summary", sa.Text, nullable=True))
    op.create_table(
        "usage",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("session_id", sa.String(36), nullable=True),
        sa.Column("inbox_id", sa.Integer, nullable=True),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("user_id", sa.String(256), nullable=True),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("prompt_tokens", sa.Integer, nullable=False),
        sa.Column("completion_tokens", sa.Integer, nullable=False),
        sa.Column("cached_tokens", sa.Integer, nullable=False),
        sa.Column("calls", sa.Integer, nullable=False),
        sa.Column("estimated", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_usage_session_id", "usage", ["session_id"])
    op.create_index("ix_usage_user_day", "usage", ["platform", "user_id", "created_at"])
    op.create_table(
        "memories",
        sa.Column("platform", sa.String(32), primary_key=True),
        sa.Column("user_id", sa.String(256), primary_key=True),
        sa.Column("entries", sa.JSON, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    raise NotImplementedError("Herald's schema is not downgraded: restore a backup instead")
