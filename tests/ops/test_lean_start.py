"""What a daemon loads is what its configuration uses: a real `herald run` with Telegram alone answers one
message, and then holds none of the SDKs and libraries of what it was not configured for (other platforms, MCP,
the API, media, web_fetch, Alembic, the shell classifier before any command). A guard on the lazy imports: each
one is a few MB resident and some tens of ms of start-up, and one stray top-level import brings it back.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import REPO, started_port
from tests.fakes.llm import FakeLLMThread, Reply
from tests.fakes.telegram_api import FakeTelegramThread
from tests.support.polling import wait_until_sync

USER = 4242

# Started as `herald run` is; SIGUSR1 writes the names of the modules loaded so far to $MODULES_FILE.
RUN = """
import json, os, signal, sys
def dump(*_):
    with open(os.environ["MODULES_FILE"] + ".tmp", "w") as f:
        json.dump(sorted(sys.modules.copy()), f)
    os.replace(os.environ["MODULES_FILE"] + ".tmp", os.environ["MODULES_FILE"])
signal.signal(signal.SIGUSR1, dump)
sys.argv = ["herald", "run"]
from gateway.cli import main
main()
"""

NOT_LOADED = [
    # the other platforms' SDKs and adapters
    "discord", "slack_bolt", "slack_sdk", "nio", "gateway.platforms.whatsapp.adapter",
    "gateway.platforms.web.adapter", "gateway.platforms.matrix.adapter",
    # MCP, the OpenAI-compatible API, media, web_fetch
    "mcp", "jsonschema", "gateway.api.adapter", "PIL", "trafilatura", "lxml",
    # storage: Alembic only for a real upgrade, SQLite without the async engine nor PostgreSQL's dialect
    "alembic", "mako", "sqlalchemy.ext.asyncio", "aiosqlite", "sqlalchemy.dialects.postgresql", "asyncpg",
    # extras libraries load because they are installed (gateway/kernel/imports.py, gateway/__init__.py)
    "rich", "pygments", "click", "cryptography",
    # the shell classifier and its parser: with the first command (tools/dangerous.py); APScheduler: with the
    # first cron job (cron/schedule.py)
    "tools.shell.check", "tree_sitter", "apscheduler",
    # the SDK's other APIs (agent_core/sdk.py): the Responses API's models, assistants, evals
    "openai.types.responses.response", "openai.types.beta", "openai.types.graders", "openai.types.eval_create_params",
]


class Daemon:
    """`herald run` (through RUN) on the fake model and ``platforms``; ``modules()`` asks it what it has loaded."""

    def __init__(self, tmp_path: Path, llm_url: str, platforms: dict[str, Any], env: dict[str, str]) -> None:
        home, self.tmp = tmp_path / "home", tmp_path
        home.mkdir()
        self.log_file = home / "logs" / "herald.log"
        (home / "config.yaml").write_text(yaml.safe_dump({
            "model": {"base_url": llm_url, "name": "fake-model", "max_retries": 0},
            "http": {"port": 0}, "platforms": platforms}))
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("HERALD_", "TELEGRAM_"))}
        environ.update(HERALD_HOME=str(home), XDG_STATE_HOME=str(tmp_path / "state"),
                       MODULES_FILE=str(tmp_path / "modules.json"), **env)
        self.stderr = tmp_path / "stderr.txt"
        with open(self.stderr, "wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-c", RUN], cwd=REPO, env=environ,
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)

    def alive(self) -> None:
        assert self.proc.poll() is None, self.stderr.read_text()

    def ready(self) -> bool:
        self.alive()
        port = started_port(self.log_file)  # its own, never a port another worker's daemon may have taken
        if port is None:
            return False
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
                return resp.status == 200
        except OSError:
            return False

    def modules(self) -> set[str]:
        out = self.tmp / "modules.json"
        self.proc.send_signal(signal.SIGUSR1)
        wait_until_sync(out.exists, timeout=10, what="the module list")
        return set(json.loads(out.read_text()))

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def test_a_telegram_only_daemon_loads_nothing_it_is_not_configured_for(tmp_path: Path) -> None:
    bot, llm = FakeTelegramThread(), FakeLLMThread()
    llm.fake.responder = lambda request: Reply("hello back")
    bot.start()
    llm.start()
    telegram = {"enabled": True, "base_url": bot.base_url, "allowed_users": [USER]}
    daemon = Daemon(tmp_path, llm.base_url, {"web": {"enabled": False}, "telegram": telegram},
                    {"TELEGRAM_BOT_TOKEN": bot.token})
    try:
        bot.call(lambda fake: fake.user_message(USER, USER, "hi"))
        wait_until_sync(lambda: daemon.alive() or bot.call(lambda fake: fake.texts(USER)), timeout=30,
                        what="the answer")
        assert bot.call(lambda fake: fake.texts(USER)) == ["hello back"]
        loaded = daemon.modules()
    finally:
        daemon.stop()
        bot.stop()
        llm.stop()
    assert "gateway.platforms.telegram.adapter" in loaded and "openai" in loaded  # it is the daemon that answered
    assert [name for name in NOT_LOADED if name in loaded] == []


def test_a_web_only_daemon_loads_no_chat_platform_sdk(tmp_path: Path) -> None:
    with FakeLLMThread() as llm:
        daemon = Daemon(tmp_path, llm.base_url, {"web": {"enabled": True}}, {})
        try:
            wait_until_sync(daemon.ready, timeout=30, what="/readyz")
            loaded = daemon.modules()
        finally:
            daemon.stop()
    assert "gateway.platforms.web.adapter" in loaded
    web_uses = {"gateway.platforms.web.adapter"}
    assert [name for name in [*NOT_LOADED, "telegram", "httpx"] if name in loaded and name not in web_uses] == []


@pytest.mark.parametrize("hidden", ["cryptography", "rich"])
def test_what_a_library_was_imported_without_stays_importable(hidden: str) -> None:
    code = (f"import sys; from gateway.kernel.imports import import_without; import_without('telegram', "
            f"({hidden!r},)); assert {hidden!r} not in sys.modules; import {hidden}; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr
