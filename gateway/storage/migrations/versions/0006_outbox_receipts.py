"""Receipts: what a platform said later of a message already sent (delivered, read, failed), on its outbox row,
found by the platform's message id.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("outbox", sa.Column("receipt", sa.String(16), nullable=True))
    op.create_index("ix_outbox_platform_message", "outbox", ["platform", "platform_message_id"])


def downgrade() -> None:
    raise NotImplementedError("Herald's schema is not downgraded: restore a backup instead")
