"""``herald backup``: a consistent copy of the SQLite store while the daemon keeps writing.

SQLite's online backup API copies the database page by page through an ordinary read transaction. Done in
one step (``pages=-1``) that transaction is one snapshot: everything committed before it began is in the
copy, nothing half-written is, and in WAL mode the daemon's writer is never blocked meanwhile. The copy is
written beside its destination under a temporary name, switched to a single-file journal mode, checked
(``PRAGMA quick_check``) and only then renamed into place, 0600 like the original.

PostgreSQL has its own tools for this (pg_dump); the command says so rather than doing half a job.
"""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

COUNTED = ("sessions", "messages", "inbox", "cron_runs")


class BackupError(Exception):
    """The backup could not be made; ``str()`` is one line saying why and what to do."""


@dataclass(frozen=True)
class BackupResult:
    path: Path
    bytes: int
    seconds: float
    rows: dict[str, int]


def destination(target: Path, profile: str, now: float | None = None) -> Path:
    """``target`` itself, or inside it when it is a folder: herald-<profile>-<UTC time>.db."""
    if target.is_dir():
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
        return target / f"herald-{profile}-{stamp}.db"
    return target


def backup_sqlite(source: Path, dest: Path, *, replace: bool = False) -> BackupResult:
    if not source.exists():
        raise BackupError(f"there is no database at {source} yet (herald run creates it)")
    if dest.exists() and not replace:
        raise BackupError(f"{dest} exists already: give another name, or --force to replace it")
    if not dest.parent.is_dir():
        raise BackupError(f"{dest.parent} is not a folder")
    if dest.resolve() == source.resolve():
        raise BackupError("the backup cannot replace the database itself")
    started = time.monotonic()
    partial = dest.with_name(f".{dest.name}.partial-{os.getpid()}")
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True, timeout=30)
    try:
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # private before any page lands
        os.close(fd)
        dst = sqlite3.connect(partial)
        try:
            src.backup(dst, pages=-1)  # one step: one read transaction, one consistent snapshot
            dst.execute("PRAGMA journal_mode=DELETE")  # a single file, openable without its -wal
            check = dst.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise BackupError(f"the copy failed its integrity check ({check}); the database may be damaged: "
                                  "run herald doctor")
            rows = {}
            tables = {r[0] for r in dst.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            for table in COUNTED:
                if table in tables:
                    rows[table] = int(dst.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
        finally:
            dst.close()
        os.replace(partial, dest)
    except sqlite3.Error as exc:
        raise BackupError(f"SQLite could not copy {source}: {exc}") from exc
    except OSError as exc:
        raise BackupError(f"cannot write {dest}: {exc.strerror or exc}") from exc
    finally:
        src.close()
        if partial.exists():
            partial.unlink()
    return BackupResult(dest, dest.stat().st_size, time.monotonic() - started, rows)


def postgres_advice(masked_url: str, dest: Path) -> str:
    return (f"the database is PostgreSQL ({masked_url}): back it up with pg_dump, which copies a consistent "
            f"snapshot while Herald runs, e.g. pg_dump --format=custom --file={dest} "
            f"'{masked_url.replace('postgresql+asyncpg://', 'postgresql://')}' (restore with pg_restore)")
