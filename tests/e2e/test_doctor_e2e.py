"""`herald doctor` against the fakes: every check passes; a wrong bot token fails with Telegram's words and
without the token; a model that is down or hangs fails within the time limit; a token another process holds is
named as locked."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import API_KEY, HERALD_BIN, Herald
from tests.fakes.llm import FakeLLMThread
from tests.fakes.telegram_api import FakeTelegramThread

pytestmark = pytest.mark.e2e


@pytest.fixture
def keyed_llm() -> Iterator[FakeLLMThread]:
    fake = FakeLLMThread(api_key=API_KEY)
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def telegram() -> Iterator[FakeTelegramThread]:
    fake = FakeTelegramThread()
    fake.start()
    yield fake
    fake.stop()


def setup(home: Path, llm_url: str, telegram: FakeTelegramThread | None, token: str | None = None,
          **extra: Any) -> dict[str, str]:
    config: dict[str, Any] = {"model": {"base_url": llm_url, "name": "fake-model", "api_key_env": "TEST_KEY"},
                              "http": {"port": 0}, **extra}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERALD_", "PYTEST_XDIST"))}
    env.update(HERALD_HOME=str(home), TEST_KEY=API_KEY)
    if telegram is not None:
        config["platforms"] = {"telegram": {"enabled": True, "base_url": telegram.base_url,
                                            "token_env": "TG_TOKEN"}}
        env["TG_TOKEN"] = token or telegram.token
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    (home / "config.yaml").chmod(0o600)
    return env


def doctor(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(HERALD_BIN), "doctor", *args], env=env, capture_output=True, text=True, timeout=60)


def lines(out: subprocess.CompletedProcess[str]) -> dict[str, str]:
    return {line.split(":")[0][2:]: line for line in out.stdout.splitlines() if ": " in line}


def test_all_checks_pass_against_the_fakes(tmp_path: Path, keyed_llm: FakeLLMThread,
                                           telegram: FakeTelegramThread) -> None:
    env = setup(tmp_path / "home", keyed_llm.base_url, telegram)
    out = doctor(env)
    assert out.returncode == 0, out.stdout + out.stderr
    found = lines(out)
    for name in ("config", "home", "disk", "database", "model", "platforms.telegram", "platforms.telegram.lock",
                 "sandbox", "clock"):
        assert found[name].startswith("✓"), found.get(name, out.stdout)
    assert "key accepted, fake-model offered" in found["model"]
    assert "bot @herald_test_bot" in found["platforms.telegram"]
    assert out.stdout.strip().endswith("all checks passed")
    report = json.loads(doctor(env, "--json").stdout)
    assert report["ok"] is True and {c["status"] for c in report["checks"]} == {"ok"}


def test_a_wrong_token_and_a_wrong_key_fail_without_being_printed(tmp_path: Path, keyed_llm: FakeLLMThread,
                                                                  telegram: FakeTelegramThread) -> None:
    wrong = "123456789:AAwrongwrongwrongwrongwrongwrong0000"
    env = setup(tmp_path / "home", keyed_llm.base_url, telegram, token=wrong)
    env["TEST_KEY"] = "sk-not-the-key-0000000000000000000000"
    out = doctor(env)
    assert out.returncode == 1
    found = lines(out)
    assert found["platforms.telegram"].startswith("✗") and "Unauthorized" in found["platforms.telegram"]
    assert found["model"].startswith("✗") and "refused the key in TEST_KEY (HTTP 401" in found["model"]
    assert "platforms.telegram.lock" not in found  # a refused token is not worth locking
    assert wrong not in out.stdout + out.stderr and "AAwrong" not in out.stdout
    assert env["TEST_KEY"] not in out.stdout + out.stderr


def test_a_model_that_is_down_or_hangs_fails_within_the_timeout(tmp_path: Path) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"
    env = setup(tmp_path / "down", down, None)
    out = doctor(env, "--timeout", "2")
    assert out.returncode == 1
    assert lines(out)["model"].startswith("✗ model: cannot reach")

    # A server that takes the connection and never answers.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        env = setup(tmp_path / "hang", f"http://127.0.0.1:{silent.getsockname()[1]}/v1", None)
        started = time.monotonic()
        out = doctor(env, "--timeout", "1")
        took = time.monotonic() - started
    assert out.returncode == 1
    assert lines(out)["model"].startswith("✗ model: no answer from") and "within 1 s" in out.stdout
    assert took < 8, took  # the process itself: interpreter start, the sandbox's `true`, and the 1 s limit


def test_a_token_held_by_another_herald_is_named(tmp_path: Path, make_herald: Callable[..., Herald],
                                                 keyed_llm: FakeLLMThread, telegram: FakeTelegramThread) -> None:
    running = make_herald({"platforms": {"telegram": {"enabled": True, "base_url": telegram.base_url,
                                                      "token_env": "TG_TOKEN"}}}, start=False)
    running.env["TG_TOKEN"] = telegram.token
    running.start()
    # The same profile's doctor: its own daemon holds the lock, which is as it should be.
    own = dict(running.env)
    out = doctor(own)
    assert "held by this profile's running daemon" in lines(out)["platforms.telegram.lock"], out.stdout
    # Another installation with the same token: locked by another process.
    env = setup(tmp_path / "other", keyed_llm.base_url, telegram)
    out = doctor(env)
    assert out.returncode == 1
    line = lines(out)["platforms.telegram.lock"]
    assert line.startswith("✗") and "locked by another process" in line and f"pid {running.proc.pid}" in line
