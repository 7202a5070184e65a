"""The real ``herald run``: a private home, and a rejected bot token that never reaches /readyz or the log."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from gateway.kernel.logs import REDACTED
from tests.e2e.test_locks_e2e import bots, spawn_unready, telegram_config, wait_readyz  # noqa: F401 - bots: fixture

pytestmark = pytest.mark.e2e


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_herald_run_makes_its_home_private_and_says_so_once(make_herald, tmp_path):
    home = tmp_path / "loose-home"
    # As an older Herald left it: everything readable by every local user.
    old_umask = os.umask(0o022)
    try:
        (home / "logs").mkdir(parents=True)
        (home / "media").mkdir()
        (home / "logs" / "herald.log.1").write_text("{}\n")
        (home / "media" / "tg-1-2-photo.jpg").write_bytes(b"jpeg")
        (home / "web_token").write_text("a-web-token-left-from-before-0123456789\n")
        for path in (home, home / "logs", home / "media"):
            os.chmod(path, 0o755)
        for path in (home / "logs" / "herald.log.1", home / "media" / "tg-1-2-photo.jpg", home / "web_token"):
            os.chmod(path, 0o644)
    finally:
        os.umask(old_umask)

    herald = make_herald(home=home)
    herald.post("hello", chat_id="modes")
    herald.wait_for_replies("modes", 1)

    assert mode(home) == 0o700
    for name in ("state.db", "web_token", "config.yaml", "logs/herald.log", "logs/herald.log.1",
                 "media/tg-1-2-photo.jpg"):
        assert mode(home / name) == 0o600, name
    for name in ("state.db-wal", "state.db-shm"):  # WAL mode: present while the daemon runs
        if (home / name).exists():
            assert mode(home / name) == 0o600, name
    assert mode(home / "logs") == 0o700 and mode(home / "media") == 0o700

    [event] = [e for e in herald.log_events() if e.get("event") == "file_modes_tightened"]
    assert set(event["paths"]) >= {str(home), str(home / "web_token"), str(home / "logs" / "herald.log.1"),
                                   str(home / "media" / "tg-1-2-photo.jpg"), str(home / "config.yaml")}

    # A second start finds nothing to tighten and says nothing.
    assert herald.stop() == 0
    herald.start()
    assert len([e for e in herald.log_events() if e.get("event") == "file_modes_tightened"]) == 1


def test_a_rejected_bot_token_never_reaches_readyz_or_the_log(make_herald, bots, monkeypatch):  # noqa: F811
    bot = bots()
    # Short, like a test server's token: no built-in pattern knows it, only its registration as a
    # configured secret (telegram.token_env) masks it. python-telegram-bot's InvalidToken quotes it.
    wrong = "4242:not-the-token"
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", wrong)
    herald = make_herald(telegram_config(bot), start=False)
    spawn_unready(herald)

    def rejected(resp) -> bool:
        tg = (resp.body or {}).get("adapters", {}).get("telegram", {})
        return resp.status == 503 and tg.get("error") == "InvalidToken"

    resp = wait_readyz(herald, rejected)
    assert resp.body["adapters"]["telegram"] == {
        "state": "retrying", "error": "InvalidToken",
        "hint": "the platform rejected the bot token: check the variable its *_env key names",
    }
    assert wrong not in json.dumps(resp.body)

    status = herald.get("/api/v1/status")
    assert status.status == 200
    last_error = status.body["adapters"]["telegram"]["last_error"]
    assert last_error.startswith("InvalidToken: ") and REDACTED in last_error and wrong not in last_error
    assert herald.get("/api/v1/status", auth=False).status == 401

    assert herald.stop() == 0
    assert wrong not in herald.log_file.read_text()
    assert wrong not in herald.stderr() and wrong not in herald.stdout()
