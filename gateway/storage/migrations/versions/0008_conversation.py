"""The agent in the conversation: its questions (clarify), its messages to other chats (send_message,
`herald send`) and the audit trail of both, of the pages it read and of what people did to running turns.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "clarifications",
        sa.Column("id", sa.String(16), primary_key=True),
        sa.Column("session_key", sa.String(512), nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("chat_id", sa.String(256), nullable=False),
        sa.Column("thread_id", sa.String(256), nullable=True),
        sa.Column("requested_by", sa.String(256), nullable=True),
        sa.Column("question", sa.Text, nullable=False),
        sa.Column("choices", sa.JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("answer", sa.Text, nullable=True),
        sa.Column("answered_by", sa.String(256), nullable=True),
        sa.Column("answered_via", sa.String(16), nullable=True),
        sa.Column("prompt_message_id", sa.String(256), nullable=True),
        sa.Column("owner", sa.String(300), nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("answered_at", sa.Float, nullable=True),
    )
    op.create_index("ix_clarifications_status", "clarifications", ["status"])
    op.create_table(
        "outgoing",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("key", sa.String(200), nullable=True, unique=True),
        sa.Column("via", sa.String(16), nullable=False),
        sa.Column("session_key", sa.String(512), nullable=True),
        sa.Column("requested_by", sa.String(256), nullable=True),
        sa.Column("target", sa.String(1000), nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("chat_id", sa.String(256), nullable=False),
        sa.Column("thread_id", sa.String(256), nullable=True),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("attachment", sa.JSON, nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("approval_id", sa.String(16), nullable=True),
        sa.Column("owner", sa.String(300), nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("sent_at", sa.Float, nullable=True),
    )
    op.create_index("ix_outgoing_status", "outgoing", ["status"])
    op.create_table(
        "audit_events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("session_key", sa.String(512), nullable=True),
        sa.Column("platform", sa.String(32), nullable=True),
        sa.Column("chat_id", sa.String(256), nullable=True),
        sa.Column("user_id", sa.String(256), nullable=True),
        sa.Column("subject", sa.Text, nullable=False),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Column("detail", sa.Text, nullable=True),
    )
    op.create_index("ix_audit_events_created", "audit_events", ["created_at"])


def downgrade() -> None:
    raise NotImplementedError("Herald's schema is not downgraded: restore a backup instead")
