"""Private by default: umask 077, an owner-only home, looser files from before tightened at start."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.config import resolve_paths
from gateway.kernel import logs
from gateway.ops.filemodes import secure_home


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture(autouse=True)
def restore_umask() -> Iterator[None]:
    # secure_home() sets the umask for the whole process: give the other tests in this worker theirs back.
    old = os.umask(0o022)
    os.umask(old)
    yield
    os.umask(old)


def loose_home(home: Path) -> dict[str, Path]:
    """A home as an older Herald left it: folders 0755, files 0644."""
    os.umask(0o022)
    (home / "logs").mkdir(parents=True)
    (home / "media" / "sub").mkdir(parents=True)
    (home / "workspace").mkdir()
    files = {name: home / name for name in ("state.db", "state.db-wal", "state.db-shm", "web_token", ".env",
                                            "config.yaml")}
    files |= {"log": home / "logs" / "herald.log", "old log": home / "logs" / "herald.log.1",
              "media": home / "media" / "tg-1-2-photo.jpg", "deep media": home / "media" / "sub" / "f.ogg",
              "agent file": home / "workspace" / "notes.txt", "stranger": home / "stdout.txt"}
    for path in files.values():
        path.write_text("x")
        os.chmod(path, 0o644)
    for directory in (home, home / "logs", home / "media", home / "media" / "sub", home / "workspace"):
        os.chmod(directory, 0o755)
    return files


def test_loose_files_are_tightened_and_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "herald"
    files = loose_home(home)
    monkeypatch.setenv("HERALD_HOME", str(home))
    monkeypatch.delenv("HERALD_PROFILE", raising=False)

    changed = secure_home(resolve_paths())

    for directory in (home, home / "logs", home / "media", home / "media" / "sub", home / "workspace"):
        assert mode(directory) == 0o700, directory
    for name, path in files.items():
        expected = 0o644 if name in ("agent file", "stranger") else 0o600  # not Herald's to change
        assert mode(path) == expected, name
    assert str(home / "state.db-wal") in changed and str(files["deep media"]) in changed
    assert str(files["agent file"]) not in changed
    # Nothing left to do the second time: no log line then.
    assert secure_home(resolve_paths()) == []


def test_new_files_and_folders_are_private_under_the_umask(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERALD_HOME", str(tmp_path / "base"))
    paths = resolve_paths("work")

    assert secure_home(paths) == []  # created, not tightened
    for directory in (tmp_path / "base", tmp_path / "base" / "profiles", paths.home):
        assert mode(directory) == 0o700, directory
    (paths.home / "media").mkdir()
    (paths.home / "media" / "voice.ogg").write_bytes(b"x")  # how an SDK writes a download: no mode given
    assert mode(paths.home / "media") == 0o700
    assert mode(paths.home / "media" / "voice.ogg") == 0o600


def test_profile_parents_are_tightened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = tmp_path / "base"
    (base / "profiles" / "work").mkdir(parents=True, mode=0o755)
    for directory in (base, base / "profiles", base / "profiles" / "work"):
        os.chmod(directory, 0o755)
    monkeypatch.setenv("HERALD_HOME", str(base))
    changed = secure_home(resolve_paths("work"))
    assert changed == [str(base), str(base / "profiles"), str(base / "profiles" / "work")]


def test_a_sqlite_database_kept_elsewhere_is_tightened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERALD_HOME", str(tmp_path / "home"))
    db = tmp_path / "elsewhere" / "herald.sqlite"
    db.parent.mkdir()
    for path in (db, db.with_name("herald.sqlite-wal")):
        path.write_text("x")
        os.chmod(path, 0o644)
    changed = secure_home(resolve_paths(), f"sqlite+aiosqlite:///{db}")
    assert mode(db) == 0o600 and mode(db.with_name("herald.sqlite-wal")) == 0o600
    assert str(db) in changed
    assert secure_home(resolve_paths(), "postgresql+asyncpg://u:pw@h/db") == []


def test_symlinks_are_not_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / "media").mkdir(parents=True)
    outside = tmp_path / "shared.txt"
    outside.write_text("x")
    os.chmod(outside, 0o644)
    (home / "media" / "link").symlink_to(outside)
    monkeypatch.setenv("HERALD_HOME", str(home))
    secure_home(resolve_paths())
    assert mode(outside) == 0o644


def test_log_files_are_created_private_at_start_and_rotation(tmp_path: Path) -> None:
    os.umask(0o022)  # even without the daemon's umask
    root = logging.getLogger()
    saved = root.level
    try:
        logs.configure_logging(tmp_path / "logs", "info", console=False, max_bytes=300)
        for i in range(20):
            logs.get_logger("herald.test").info("filler", n=i, pad="x" * 50)
    finally:
        logs.close_logging()
        root.setLevel(saved)
    files = sorted((tmp_path / "logs").iterdir())
    assert len(files) > 2, files  # rotated
    assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}
