"""``herald db upgrade|current``: the database's schema revision (gateway/storage/migrations/)."""

from __future__ import annotations

import asyncio
from typing import Any

import typer

from gateway.cli.common import load

app = typer.Typer(no_args_is_help=True, help="The database's schema: its revision, and upgrading it.")


def _run(op: Any, create: bool = True) -> Any:
    """``op(connection)`` in one transaction on this profile's database; with ``create`` False, None when
    an SQLite file does not exist yet (reading a revision creates no database)."""
    import os

    from gateway.ops import preflight
    from gateway.storage.db import make_engine

    cfg, paths = load()
    url = preflight.database_url(cfg, paths)
    if url.startswith("sqlite"):
        path = preflight.sqlite_path(url)
        if not create and path is not None and not path.exists():
            return None
        os.umask(0o077)  # the database is private, like everything in the home
        paths.home.mkdir(parents=True, exist_ok=True, mode=0o700)

    async def main() -> Any:
        engine = make_engine(url)
        try:
            async with engine.begin() as conn:
                return await conn.run_sync(op)
        finally:
            await engine.dispose()

    return asyncio.run(main())


@app.command("upgrade")
def upgrade() -> None:
    """Bring the schema to the newest revision (the daemon also does this when it starts)."""
    from gateway.storage.migrations import upgrade as run_upgrade

    before, after = _run(run_upgrade)
    if before == after:
        typer.echo(f"the schema is current (revision {after})")
    else:
        typer.echo(f"upgraded the schema from revision {before or 'none'} to {after}")


@app.command("current")
def current() -> None:
    """The database's schema revision, and the newest this Herald knows."""
    from gateway.storage.migrations import current as read_current
    from gateway.storage.migrations import head

    revision = _run(read_current, create=False)
    newest = head()
    if revision == newest:
        typer.echo(f"{revision} (current)")
    else:
        typer.echo(f"{revision or 'none'} (this Herald upgrades it to {newest} when it starts, or: herald db upgrade)")
