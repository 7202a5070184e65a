"""Voice replies: each session's /voice setting ("on" = answers also come as a voice note; null = off).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("voice", sa.String(4), nullable=True))


def downgrade() -> None:
    raise NotImplementedError("Herald's schema is not downgraded: restore a backup instead")
