"""The OpenAI-compatible API: its keys (only their hashes), one row per key ever made.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(16), primary_key=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=True),
        sa.Column("revoked_at", sa.Float, nullable=True),
        sa.Column("last_used_at", sa.Float, nullable=True),
    )
    op.create_index("ix_api_keys_name", "api_keys", ["name"])


def downgrade() -> None:
    raise NotImplementedError("Herald's schema is not downgraded: restore a backup instead")
