"""Schema migrations (Alembic): every database Herald opens is brought to the newest revision.

``upgrade`` runs at every start (``Database.init``) and from ``herald db upgrade``; on PostgreSQL it first
takes a transaction-scoped advisory lock, so instances starting together upgrade one after another (the
second finds nothing left to do). A database made before migrations existed (no ``alembic_version`` table)
starts at revision 0001, which creates what is missing and adds the columns an older Herald lacked.

To change the schema: edit gateway/storage/tables.py, then add a revision under versions/ (``alembic -c
gateway/storage/migrations/alembic.ini revision -m "..."``, or by hand); tests/storage/test_migrations.py
fails while the revisions and tables.py disagree.
"""

from __future__ import annotations

import logging
import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Column, MetaData, PrimaryKeyConstraint, String, Table, inspect, text
from sqlalchemy.engine import Connection

if TYPE_CHECKING:
    from alembic.config import Config

HERE = Path(__file__).resolve().parent
# Any constant: the key of the advisory lock that serialises upgrades on one PostgreSQL database.
UPGRADE_LOCK = 0x4845_5241_4C44_0001


# Made by raw DDL in a revision (gateway/storage/migrations/raw_ddl.py), not declared in tables.py: autogenerate must
# not take them for leftovers (SQLite's FTS5 table and its shadow tables, PostgreSQL's expression index).
RAW_DDL_OBJECTS = ("messages_fts", "ix_messages_fts")


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    return not (reflected and compare_to is None and name is not None and name.startswith(RAW_DDL_OBJECTS))


def _config(conn: Connection | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(HERE))
    cfg.attributes["connection"] = conn
    return cfg


def head() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None
    return head


def current(conn: Connection) -> str | None:
    """The database's revision; None for a database without one (empty, or made before migrations)."""
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(conn).get_current_revision()


_REVISION_LINE = re.compile(r'^(revision|down_revision)\s*(?::[^=]*)?=\s*(?:"([^"]*)"|None)\s*$', re.MULTILINE)


@cache
def quick_head() -> str | None:
    """The newest revision read from the files' ``revision`` / ``down_revision`` lines, without Alembic; None
    when that does not give exactly one head (Alembic then decides). tests/storage/test_migrations.py checks it names
    the same head as Alembic."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (HERE / "versions").glob("*.py"):
        fields = dict((m.group(1), m.group(2)) for m in _REVISION_LINE.finditer(path.read_text()))
        if not fields.get("revision"):
            return None
        revisions.add(fields["revision"])
        if fields.get("down_revision"):
            parents.add(fields["down_revision"])
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def _quick_current(conn: Connection) -> str | None:
    """The database's single revision read directly; None when there is no alembic_version table or not
    exactly one row in it (Alembic then decides)."""
    if not inspect(conn).has_table("alembic_version"):
        return None
    rows = conn.execute(text("SELECT version_num FROM alembic_version")).all()
    return rows[0][0] if len(rows) == 1 else None


def upgrade(conn: Connection) -> tuple[str | None, str]:
    """Bring the database to the newest revision, inside the caller's transaction: (from, to)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": UPGRADE_LOCK})
    # At every start but the first after an update the database is already at head: that is seen from the
    # version files and the alembic_version row alone, without importing Alembic (and Mako), which costs
    # ~10 MB of the daemon's resident memory for good and ~0.1 s of start-up.
    newest = quick_head()
    if newest is not None:
        if _quick_current(conn) == newest:
            return newest, newest
        if not inspect(conn).get_table_names():
            create_at_head(conn, newest)
            return None, newest
    return alembic_upgrade(conn)


def create_at_head(conn: Connection, newest: str) -> None:
    """An empty database gets the newest schema directly: the tables as gateway/storage/tables.py declares them, the
    objects revisions make by raw DDL, and the revision stamped (Alembic's own advice for a new database,
    "create_all, then stamp"). Running every revision would end in the same schema
    (tests/storage/test_migrations.py compares the two) but would load Alembic for it."""
    from gateway.storage.migrations.raw_ddl import CURRENT
    from gateway.storage.tables import metadata

    metadata.create_all(conn)
    for make in CURRENT:
        make(conn)
    version = Table("alembic_version", MetaData(), Column("version_num", String(32), nullable=False),
                    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"))
    version.create(conn)
    conn.execute(version.insert().values(version_num=newest))


def alembic_upgrade(conn: Connection) -> tuple[str | None, str]:
    """Every revision the database lacks, run by Alembic: (from, to)."""
    from alembic import command

    # Alembic says what it sets up and runs at INFO through stdlib logging; the caller logs the outcome.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    before = current(conn)
    if before != head():
        command.upgrade(_config(conn), "head")
    return before, head()
