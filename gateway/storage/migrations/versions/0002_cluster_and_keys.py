"""Several instances on one database: session leases, and the inbox indexes the session router reads by;
the idempotency key a reply's chunk is sent with, drawn once and kept on its outbox row; outbox rows of
deliveries that answer no inbox row (a cron run's result, per target).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "session_leases",
        sa.Column("key", sa.String(512), primary_key=True),
        sa.Column("owner", sa.String(300), nullable=True),
        sa.Column("lease_until", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_index("ix_session_leases_owner", "session_leases", ["owner"])
    op.create_index("ix_inbox_session_owner", "inbox", ["session_key", "owner", "status"])
    op.create_index("ix_inbox_owner", "inbox", ["owner", "status"])
    op.add_column("outbox", sa.Column("idempotency_key", sa.String(64), nullable=True))
    op.add_column("outbox", sa.Column("ref", sa.String(300), nullable=True))
    op.create_index("ix_outbox_ref", "outbox", ["ref"])


def downgrade() -> None:
    raise NotImplementedError("Herald's schema is not downgraded: restore a backup instead")
