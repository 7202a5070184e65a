"""`herald backup` while the daemon takes a stream of messages: the copy opens, passes its integrity check and
holds every message the daemon acknowledged (202) before the backup started."""

from __future__ import annotations

import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import HERALD_BIN, Herald

pytestmark = pytest.mark.e2e


def test_backup_during_a_load_of_writes(herald: Herald, tmp_path: Path) -> None:
    acked: list[tuple[float, str]] = []  # (when the 202 came back, platform message id)
    stop = threading.Event()

    def writer(worker: int) -> None:
        i = 0
        while not stop.is_set() and i < 2000:
            chat, mid = f"load{worker}-{i % 20}", f"w{worker}-{i}"
            herald.post(f"message {i}", chat_id=chat, message_id=mid)
            acked.append((time.monotonic(), f"{chat}/{mid}"))
            i += 1

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    try:
        # A backlog of committed rows and turns being answered (waited for by count, not time: a loaded
        # machine acknowledges more slowly).
        deadline = time.monotonic() + 60
        while len(acked) < 60 and time.monotonic() < deadline:
            time.sleep(0.05)
        started = time.monotonic()
        out = subprocess.run([str(HERALD_BIN), "backup", str(tmp_path / "copy.db")], env=herald.env,
                             capture_output=True, text=True, timeout=60)
        after = len(acked)
        while len(acked) < after + 5 and time.monotonic() < deadline:  # writes go on after it too
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert out.returncode == 0, out.stderr
    assert "integrity ok" in out.stdout
    before = {mid for at, mid in acked if at < started}
    assert len(before) > 50 and len(acked) > len(before)

    copy = tmp_path / "copy.db"
    assert copy.stat().st_mode & 0o777 == 0o600
    assert not list(tmp_path.glob("copy.db-wal"))  # one file, no journal beside it
    conn = sqlite3.connect(f"file:{copy}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = {r[0] for r in conn.execute("SELECT platform_message_id FROM inbox WHERE platform = 'web'")}
        assert before - stored == set()
        assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] > 0
    finally:
        conn.close()
    print(f"backup: {out.stdout.strip()} ({len(before)} acknowledged before it)")


def test_backup_refuses_to_overwrite_and_explains_postgres(herald: Herald, tmp_path: Path) -> None:
    target = tmp_path / "exists.db"
    target.write_text("precious")
    out = subprocess.run([str(HERALD_BIN), "backup", str(target)], env=herald.env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 1 and "--force" in out.stderr and target.read_text() == "precious"
    out = subprocess.run([str(HERALD_BIN), "backup", str(tmp_path)], env=herald.env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert len(list(tmp_path.glob("herald-default-*.db"))) == 1
    (herald.home / "pg.yaml").write_text("database:\n  url: postgresql+asyncpg://herald:secret@db.example/herald\n")
    out = subprocess.run([str(HERALD_BIN), "--config", str(herald.home / "pg.yaml"), "backup", str(tmp_path / "x")],
                         env=herald.env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "pg_dump" in out.stderr and "secret" not in out.stderr
