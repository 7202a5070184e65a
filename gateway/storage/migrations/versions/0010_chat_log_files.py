"""The web chat's files: the files a message of its log carries (what the user uploaded with it, what the agent
sent), as a list of ``{id, name, mime, kind, size}`` kept beside the text.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("chat_log", sa.Column("files", sa.JSON, nullable=True))


def downgrade() -> None:
    raise NotImplementedError("Herald's schema is not downgraded: restore a backup instead")
