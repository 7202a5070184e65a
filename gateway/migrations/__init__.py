"""Schema migrations (Alembic): every database Herald opens is brought to the newest revision.

``upgrade`` runs at every start (``Database.init``) and from ``herald db upgrade``; on PostgreSQL it first
takes a transaction-scoped advisory lock, so instances starting together upgrade one after another (the
second finds nothing left to do). A database made before migrations existed (no ``alembic_version`` table)
starts at revision 0001, which creates what is missing and adds the columns an older Herald lacked.

To change the schema: edit gateway/tables.py, then add a revision under versions/ (``alembic -c
gateway/migrations/alembic.ini revision -m "..."``, or by hand); tests/test_migrations.py fails while the
revisions and tables.py disagree.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection

HERE = Path(__file__).resolve().parent
# Any constant: the key of the advisory lock that serialises upgrades on one PostgreSQL database.
UPGRADE_LOCK = 0x4845_5241_4C44_0001


# Made by raw DDL in a revision (gateway/session/search.py), not declared in tables.py: autogenerate must
# not take them for leftovers (SQLite's FTS5 table and its shadow tables, PostgreSQL's expression index).
RAW_DDL_OBJECTS = ("messages_fts", "ix_messages_fts")


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    return not (reflected and compare_to is None and name is not None and name.startswith(RAW_DDL_OBJECTS))


def _config(conn: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(HERE))
    cfg.attributes["connection"] = conn
    return cfg


def head() -> str:
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None
    return head


def current(conn: Connection) -> str | None:
    """The database's revision; None for a database without one (empty, or made before migrations)."""
    return MigrationContext.configure(conn).get_current_revision()


def upgrade(conn: Connection) -> tuple[str | None, str]:
    """Bring the database to the newest revision, inside the caller's transaction: (from, to)."""
    # Alembic says what it sets up and runs at INFO through stdlib logging; the caller logs the outcome.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": UPGRADE_LOCK})
    before = current(conn)
    if before != head():
        command.upgrade(_config(conn), "head")
    return before, head()
