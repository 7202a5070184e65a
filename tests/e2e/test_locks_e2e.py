"""Two real ``herald run`` processes and one bot token: the second is refused, names the holder, takes over.

The bot is the fake Bot API (tests/fakes/telegram_api.py) served from a thread; XDG_STATE_HOME points at a
tmp dir so the real lock folder is never touched.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PG_URL
from tests.e2e.conftest import Herald
from tests.fakes.telegram_api import FakeTelegramThread
from tests.support.polling import wait_until_sync

pytestmark = pytest.mark.e2e

ALICE = 111


@pytest.fixture
def bots() -> Iterator[Callable[[], FakeTelegramThread]]:
    made: list[FakeTelegramThread] = []

    def make() -> FakeTelegramThread:
        bot = FakeTelegramThread()
        bot.start()
        made.append(bot)
        return bot

    yield make
    for bot in made:
        bot.stop()


def telegram_config(bot: FakeTelegramThread, token_env: str = "TELEGRAM_BOT_TOKEN") -> dict[str, Any]:
    return {"platforms": {"telegram": {"enabled": True, "base_url": bot.base_url, "token_env": token_env,
                                       "allowed_users": [ALICE]}}}


def spawn_unready(herald: Herald) -> None:
    """Start a daemon that is expected not to become ready (its adapter is refused)."""
    herald.spawn()
    wait_until_sync(lambda: herald.proc.poll() is not None or herald.started(), timeout=20, what="its http server")
    assert herald.proc.poll() is None, herald.stderr()[-2000:]


def wait_readyz(herald: Herald, predicate: Callable[[Any], bool], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        assert herald.proc is not None and herald.proc.poll() is None, herald.stderr()[-2000:]
        try:
            last = herald.get("/readyz", auth=False)
            if predicate(last):
                return last
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"/readyz never matched; last: {last}\n{herald.stderr()[-2000:]}")


def refused(resp: Any) -> bool:
    # /readyz is unauthenticated: the error's class and a fixed hint, never its text.
    tg = (resp.body or {}).get("adapters", {}).get("telegram", {})
    return resp.status == 503 and tg.get("state") == "retrying" and tg.get("error") == "CredentialLocked"


def lock_error(herald: Herald) -> str:
    """Who holds the credential: the adapter's last_error, shown to bearer-token holders only."""
    resp = herald.get("/api/v1/status")
    assert resp.status == 200, resp
    error = resp.body["adapters"]["telegram"]["last_error"]
    assert error.startswith("CredentialLocked: ") and "in use by" in error
    return error


def answers(bot: FakeTelegramThread, text: str, timeout: float = 15.0) -> None:
    bot.call(lambda fake: fake.user_message(ALICE, text=text))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if f"echo: {text}" in bot.call(lambda fake: fake.texts(ALICE)):
            return
        time.sleep(0.05)
    raise AssertionError(f"no answer to {text!r}: {bot.call(lambda fake: fake.texts(ALICE))}")


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "killed"])
def test_a_second_daemon_with_the_same_token_is_refused_then_takes_over(make_herald, bots, tmp_path, monkeypatch,
                                                                        how):
    bot = bots()
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", bot.token)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    first = make_herald(telegram_config(bot))
    answers(bot, "to the first")
    second = make_herald(telegram_config(bot), start=False)
    spawn_unready(second)
    resp = wait_readyz(second, refused)
    assert bot.token not in str(resp.body) and "pid" not in str(resp.body)
    error = lock_error(second)
    assert first.proc is not None
    assert f"pid {first.proc.pid}, profile default, host {socket.gethostname()}" in error
    assert resp.body["adapters"]["web"]["state"] == "connected"  # only that adapter is refused
    assert bot.token not in error and bot.token not in second.stderr()

    code = first.stop(how)
    assert code == (0 if how == signal.SIGTERM else -signal.SIGKILL)
    wait_readyz(second, lambda r: r.status == 200)
    answers(bot, "to the second")


@pytest.mark.skipif(not PG_URL, reason="HERALD_TEST_DATABASE_URL is not set: PostgreSQL paths are not tested here")
def test_two_machines_sharing_postgresql_never_drive_the_same_bot(make_herald, bots, tmp_path, monkeypatch):
    bot = bots()
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", bot.token)

    import asyncpg

    assert PG_URL
    dsn = PG_URL.replace("postgresql+asyncpg://", "postgresql://")
    name = f"herald_t_{uuid.uuid4().hex[:12]}"

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    url = f"{PG_URL.rpartition('/')[0]}/{name}"
    config = {**telegram_config(bot), "database": {"url": url}}
    first = make_herald(config, start=False)
    second = make_herald(config, start=False)
    # Each "machine" has its own lock folder: only the database can keep them apart.
    first.env["XDG_STATE_HOME"] = str(tmp_path / "machine-a")
    second.env["XDG_STATE_HOME"] = str(tmp_path / "machine-b")
    try:
        first.start()
        spawn_unready(second)
        wait_readyz(second, refused)
        assert first.proc is not None
        error = lock_error(second)
        assert f"pid {first.proc.pid}" in error and "PostgreSQL advisory lock" in error
        killed_at = time.time()
        first.stop(signal.SIGKILL)  # the server drops a dead client's session and its lock
        wait_readyz(second, lambda r: r.status == 200)
        # Taken over within the lock's retry interval: at most the one retry already under way when the
        # holder died was refused (each refusal logs adapter_down with its retry_in, at most 3 s).
        refused_after = [e for e in second.log_events() if e.get("event") == "adapter_down"
                         and datetime.fromisoformat(e["timestamp"]).timestamp() > killed_at]
        assert len(refused_after) <= 1, refused_after
        assert all(e["retry_in"] <= 3.0 for e in refused_after)
        answers(bot, "to the second machine")
        assert second.stop() == 0
    finally:
        for herald in (first, second):
            if herald.proc is not None and herald.proc.poll() is None:
                herald.stop()
        asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def test_two_profiles_run_side_by_side_and_a_third_with_a_taken_token_is_refused(make_herald, bots, tmp_path,
                                                                                  monkeypatch):
    bot_a, bot_b = bots(), bots()
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("TOKEN_A", bot_a.token)
    monkeypatch.setenv("TOKEN_B", bot_b.token)
    base = tmp_path / "herald-home"

    def profile(name: str, bot: FakeTelegramThread, token_env: str) -> Herald:
        herald = make_herald(telegram_config(bot, token_env), start=False, home=base / "profiles" / name)
        herald.env.update(HERALD_HOME=str(base), HERALD_PROFILE=name)
        return herald

    a, b = profile("a", bot_a, "TOKEN_A"), profile("b", bot_b, "TOKEN_B")
    a.start()
    b.start()
    answers(bot_a, "to profile a")
    answers(bot_b, "to profile b")
    # Each profile keeps its own state under $HERALD_HOME/profiles/NAME.
    for name in ("a", "b"):
        home: Path = base / "profiles" / name
        assert (home / "state.db").exists() and (home / "web_token").exists() and (home / "logs").is_dir()
    assert a.token != b.token
    assert not (base / "state.db").exists()

    c = profile("c", bot_a, "TOKEN_A")
    spawn_unready(c)
    wait_readyz(c, refused)
    assert a.proc is not None
    assert f"pid {a.proc.pid}, profile a" in lock_error(c)
    assert os.environ.get("HERALD_PROFILE") is None
