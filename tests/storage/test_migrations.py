"""Schema migrations: a new database and one made by an older Herald (with data) reach the same schema —
the one gateway/storage/tables.py declares — and instances starting together upgrade once."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import MetaData, create_engine, inspect, text
from sqlalchemy.engine import Connection

from gateway.storage import migrations
from gateway.storage.db import make_engine
from gateway.storage.tables import metadata

BASELINE = Path(migrations.__file__).parent / "versions" / "0001_baseline.py"


def baseline_tables() -> MetaData:
    spec = importlib.util.spec_from_file_location("baseline_0001", BASELINE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.baseline(MetaData())


def schema_diff(conn: Connection) -> list[Any]:
    """What autogenerate would change to make the database match tables.py: nothing, when in step."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(conn, opts={"compare_type": False,
                                                     "include_object": migrations.include_object})
    return compare_metadata(context, metadata)


async def run(url: str, fn: Any) -> Any:
    engine = make_engine(url)
    try:
        async with engine.begin() as conn:
            return await conn.run_sync(fn)
    finally:
        await engine.dispose()


async def test_a_new_database_gets_exactly_the_declared_schema(db_url: str) -> None:
    before, after = await run(db_url, migrations.upgrade)
    assert (before, after) == (None, migrations.head())
    assert await run(db_url, schema_diff) == []
    assert await run(db_url, migrations.current) == migrations.head()
    # Running it again changes nothing.
    assert await run(db_url, migrations.upgrade) == (migrations.head(), migrations.head())


def _old_herald_database(conn: Connection) -> None:
    """A database as an older Herald left it: the baseline tables, some without columns added later, and data."""
    old = baseline_tables()
    for table, column in (("approvals", "owner"), ("messages", "inbox_id"), ("inbox", "lease_until"),
                          ("cron_jobs", "script_source")):
        old.tables[table]._columns.remove(old.tables[table].c[column])  # type: ignore[attr-defined]
    old.tables["messages"].indexes = {i for i in old.tables["messages"].indexes if "inbox_id" not in i.columns}
    old.create_all(conn)
    conn.execute(text("INSERT INTO sessions (id, key, platform, created_at, updated_at) "
                      "VALUES ('s1', 'web:dm:c1', 'web', 1, 2)"))
    conn.execute(text("INSERT INTO messages (session_id, role, content, created_at) VALUES ('s1', 'user', :c, 1)"),
                 {"c": json.dumps("hello from before")})
    conn.execute(text("INSERT INTO inbox (platform, platform_message_id, session_key, payload, status, created_at, "
                      "updated_at, owner) VALUES ('web', 'p1', 'web:dm:c1', :p, 'done', 1, 2, 'old')"),
                 {"p": json.dumps({"text": "hello from before"})})
    conn.execute(text("INSERT INTO cron_jobs (id, name, prompt, schedule, kind, deliver, enabled, runs_done, "
                      "no_agent, created_at, updated_at) VALUES ('j1', 'morning', 'p', '0 8 * * *', 'cron', 'local', "
                      ":t, 3, :f, 1, 1)"), {"t": True, "f": False})


def schema_of(conn: Connection) -> dict[str, Any]:
    """Every table's columns, keys and indexes (column order aside), and the objects raw DDL made."""
    insp = inspect(conn)
    tables = {}
    for name in insp.get_table_names():
        tables[name] = {
            "columns": sorted((c["name"], str(c["type"]), c["nullable"]) for c in insp.get_columns(name)),
            "pk": sorted(insp.get_pk_constraint(name)["constrained_columns"]),
            "fks": sorted((tuple(f["constrained_columns"]), f["referred_table"]) for f in insp.get_foreign_keys(name)),
            "indexes": sorted((i["name"], tuple(map(str, i["column_names"])), bool(i["unique"]))
                              for i in insp.get_indexes(name)),
            "uniques": sorted(tuple(u["column_names"]) for u in insp.get_unique_constraints(name)),
        }
    if conn.dialect.name == "sqlite":
        raw = conn.execute(text("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")).all()
    else:
        raw = conn.execute(text("SELECT 'index', indexname FROM pg_indexes WHERE schemaname = 'public'")).all()
    return {"tables": tables, "raw": sorted(map(tuple, raw))}


async def test_an_empty_database_created_at_head_equals_one_taken_through_every_revision(
        db_url: str, tmp_path: Path) -> None:
    # upgrade() creates an empty database from tables.py and stamps it, without Alembic; Alembic running
    # every revision must end in the same schema, so the shortcut can never differ from the migrations.
    assert await run(db_url, migrations.upgrade) == (None, migrations.head())
    assert migrations.quick_head() == migrations.head()
    shortcut = await run(db_url, schema_of)
    if db_url.startswith("sqlite"):
        other = f"sqlite+aiosqlite:///{tmp_path / 'through-revisions.db'}"
        assert await run(other, migrations.alembic_upgrade) == (None, migrations.head())
        revisions = await run(other, schema_of)
    else:
        from tests.conftest import fresh_pg_database

        async with fresh_pg_database() as other:
            assert await run(other, migrations.alembic_upgrade) == (None, migrations.head())
            revisions = await run(other, schema_of)
    assert shortcut == revisions
    assert "messages_fts" in str(shortcut["raw"]) and "alembic_version" in shortcut["tables"]
    assert await run(db_url, migrations.current) == migrations.head()


async def test_a_database_of_an_older_herald_keeps_its_data_and_reaches_the_declared_schema(db_url: str) -> None:
    await run(db_url, _old_herald_database)
    assert await run(db_url, migrations.current) is None
    assert await run(db_url, migrations.upgrade) == (None, migrations.head())
    assert await run(db_url, schema_diff) == []

    def read(conn: Connection) -> dict[str, Any]:
        return {
            "message": conn.execute(text("SELECT content, inbox_id FROM messages")).one(),
            "inbox": conn.execute(text("SELECT platform_message_id, status, lease_until FROM inbox")).one(),
            "job": conn.execute(text("SELECT name, runs_done, script_source FROM cron_jobs")).one(),
            "tables": set(inspect(conn).get_table_names()),
        }

    found = await run(db_url, read)
    content = found["message"][0]
    assert content in ("hello from before", json.dumps("hello from before"))  # decoded by the driver, or not
    assert found["message"][1] is None
    assert tuple(found["inbox"]) == ("p1", "done", None)
    assert tuple(found["job"]) == ("morning", 3, None)
    assert "session_leases" in found["tables"] and "alembic_version" in found["tables"]


async def test_instances_starting_together_upgrade_once(pg_url: str) -> None:
    results = await asyncio.gather(*(run(pg_url, migrations.upgrade) for _ in range(4)))
    head = migrations.head()
    # One upgraded; the others waited for its lock and found nothing left to do.
    assert sorted(results, key=str) == [(head, head)] * 3 + [(None, head)]
    assert await run(pg_url, schema_diff) == []


@pytest.mark.slow
def test_herald_db_current_and_upgrade(tmp_path: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("HERALD_")}, "HERALD_HOME": str(tmp_path)}
    herald = [str(Path(sys.executable).with_name("herald"))]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*herald, "db", *args], env=env, capture_output=True, text=True, timeout=60)

    first = cli("current")
    assert first.returncode == 0 and first.stdout.startswith("none")
    assert not (tmp_path / "state.db").exists()  # reading the revision creates no database
    up = cli("upgrade")
    assert up.returncode == 0 and f"to {migrations.head()}" in up.stdout
    assert oct((tmp_path / "state.db").stat().st_mode & 0o777) == "0o600"
    now = cli("current")
    assert now.returncode == 0 and now.stdout.strip() == f"{migrations.head()} (current)"
    again = cli("upgrade")
    assert again.returncode == 0 and "current" in again.stdout
    engine = create_engine(f"sqlite:///{tmp_path / 'state.db'}")
    with engine.connect() as conn:
        assert schema_diff(conn) == []
    engine.dispose()
