"""``herald backup PATH``: a consistent copy of this profile's SQLite database, also while the daemon runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gateway.cli.common import EXIT_FAILED, fail, load


def backup(
    path: Annotated[str, typer.Argument(help="the file to write, or a folder to put herald-<profile>-<time>.db in")],
    force: Annotated[bool, typer.Option("--force", help="replace PATH if it exists")] = False,
) -> None:
    """Copy the SQLite database consistently (SQLite's online backup API) while the daemon may be running;
    for PostgreSQL, says how to use pg_dump."""
    from gateway import preflight
    from gateway.backup import BackupError, backup_sqlite, destination, postgres_advice

    cfg, paths = load()
    url = preflight.database_url(cfg, paths)
    dest = destination(Path(path).expanduser(), paths.profile)
    if not url.startswith("sqlite"):
        fail(f"backup: {postgres_advice(preflight.masked(url), dest)}", EXIT_FAILED)
    source = preflight.sqlite_path(url)
    if source is None:
        fail("backup: an in-memory database has nothing to back up", EXIT_FAILED)
    try:
        result = backup_sqlite(source, dest, replace=force)
    except BackupError as exc:
        fail(f"backup: {exc}", EXIT_FAILED)
    counts = ", ".join(f"{n} {table}" for table, n in result.rows.items())
    typer.echo(f"backed up {source} to {result.path} ({result.bytes / 1e6:.1f} MB; {counts}) in "
               f"{result.seconds:.2f} s; integrity ok")
