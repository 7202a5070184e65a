"""``herald backup [PATH]``: a consistent copy of this profile's SQLite database, also while the daemon runs.

Without PATH the copy goes to ``<profile home>/backups``, which the agent's sandbox hides. A copy holds every
conversation, so one written where the sandbox shows it (the agent's commands run as this same user) is
named in a warning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gateway.cli.common import EXIT_FAILED, fail, load


def backup(
    path: Annotated[str | None, typer.Argument(
        help="the file to write, or a folder to put herald-<profile>-<time>.db in (default: the profile's "
             "backups folder, hidden from the agent)")] = None,
    force: Annotated[bool, typer.Option("--force", help="replace PATH if it exists")] = False,
) -> None:
    """Copy the SQLite database consistently (SQLite's online backup API) while the daemon may be running;
    for PostgreSQL, says how to use pg_dump."""
    from gateway.ops import preflight
    from gateway.storage.backup import BackupError, backup_sqlite, destination, postgres_advice
    from gateway.turns import sandboxing

    cfg, paths = load()
    url = preflight.database_url(cfg, paths)
    target = Path(path).expanduser() if path is not None else paths.backups_dir
    if path is None:
        target.mkdir(mode=0o700, parents=True, exist_ok=True)
    dest = destination(target, paths.profile)
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
    if sandboxing.visible_to_agent(cfg, paths, result.path):
        typer.echo(f"warning: the agent's commands can read {result.path} (they run as this user, and the sandbox "
                   f"shows that folder): keep backups in {paths.backups_dir} (the default) or a folder listed in "
                   "tools.terminal.hidden_paths", err=True)
