"""Private by default: the daemon's umask, and owner-only modes on everything it keeps in its home.

A profile's home holds every conversation (state.db), the web chat's bearer token, the .env with the
bot tokens, downloaded media and logs full of chat text. None of it is meant for other local users.

``secure_home()`` runs once at the top of ``herald run``: it sets umask 077, creates the home 0700 and
takes group/other access away from what an older Herald (or a hand copy) left readable; the caller
logs what it changed as one ``file_modes_tightened`` line.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from gateway.config import Paths
from gateway.platforms import home_files

__all__ = ["PRIVATE_UMASK", "secure_home"]

# Process-wide on purpose. A daemon creates nothing meant for other users, and most of what it writes
# is created by code that never names a mode: SQLite's database and its -wal/-shm files, the log
# handler's files (new ones at every rotation), media the platform SDKs download, temp files. A umask
# covers all of them, including files added later by code that does not know this rule; per-call modes
# would each need remembering. Child processes (the agent's shell, cron scripts) inherit it too, so
# what they create is owner-only unless a command says otherwise (chmod), which is the safe default.
PRIVATE_UMASK = 0o077

# Files in the home that are Herald's own (state, secrets, config that may reveal ids); the platforms' own
# (tokens) come from their declarations.
_FILES = ("state.db", "state.db-wal", "state.db-shm", "state.db-journal", ".env", "config.yaml", "herald.pid")
# Folders whose whole content is Herald's: every folder 0700, every file 0600.
_TREES = ("logs", "media")
# Folders that are the agent's to fill: the folder itself is closed, what is in it is left alone.
_OWN_DIR_ONLY = ("workspace",)
_GROUP_OTHER = stat.S_IRWXG | stat.S_IRWXO


def secure_home(paths: Paths, database_url: str | None = None) -> list[str]:
    """Set umask 077; create the home 0700; tighten existing files and folders. Returns what changed.

    "Tighten" only takes away group and other bits (0644 -> 0600, 0755 -> 0700): it never adds a bit
    the owner did not have. A path that could not be changed (not ours) is listed with the reason.
    ``database_url``: a local SQLite database kept elsewhere is tightened too.
    """
    os.umask(PRIVATE_UMASK)
    changed: list[str] = []
    home = paths.home
    # HERALD_HOME itself and profiles/ when this is a named profile ($HERALD_HOME/profiles/NAME).
    owned_dirs = [home.parent.parent, home.parent] if paths.profile != "default" else []
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    for directory in [*owned_dirs, home]:
        _tighten(directory, changed)
    for name in (*_FILES, *(name for _, name in home_files())):
        _tighten(home / name, changed)
    for name in _TREES:
        for path in _walk(home / name):
            _tighten(path, changed)
    for name in _OWN_DIR_ONLY:
        _tighten(home / name, changed)
    db = _sqlite_file(database_url)
    if db is not None:
        for path in (db, *(db.with_name(db.name + suffix) for suffix in ("-wal", "-shm", "-journal"))):
            _tighten(path, changed)
    return changed


def _tighten(path: Path, changed: list[str]) -> None:
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    except OSError as exc:
        changed.append(f"{path} (not checked: {type(exc).__name__})")
        return
    # A symlink's target is not necessarily ours, and chmod would follow it.
    if stat.S_ISLNK(st.st_mode) or not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        return
    if not st.st_mode & _GROUP_OTHER:
        return
    if _is_users_home_or_root(path):
        return  # HERALD_HOME pointed at ~ or /: closing those is not this daemon's call
    try:
        os.chmod(path, stat.S_IMODE(st.st_mode) & ~_GROUP_OTHER)
    except OSError as exc:
        changed.append(f"{path} (not tightened: {type(exc).__name__})")
        return
    changed.append(str(path))


def _walk(root: Path) -> Iterator[Path]:
    """``root`` and everything under it, without following symlinks."""
    if not root.is_dir() or root.is_symlink():
        return
    yield root
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        for name in (*dirnames, *filenames):
            yield base / name


def _is_users_home_or_root(path: Path) -> bool:
    try:
        resolved = path.resolve()
        return resolved == Path(resolved.anchor) or resolved == Path.home().resolve()
    except (OSError, RuntimeError):
        return False


def _sqlite_file(url: str | None) -> Path | None:
    """The file of a ``sqlite+aiosqlite:///path`` URL (None for other databases and in-memory ones)."""
    if not url or not url.startswith("sqlite"):
        return None
    from sqlalchemy.engine import make_url

    database = make_url(url).database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database).expanduser().absolute()
