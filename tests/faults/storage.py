"""Storage the fault tests can break on purpose: a throwaway PostgreSQL cluster of the test's own (stopped
and started while a daemon uses it), and a small tmpfs that can be filled to the last byte.

Both need what a developer machine or CI container may lack (PostgreSQL's server binaries, root for
``mount``): each helper says why it cannot run, and the tests skip with that reason.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gateway.config import parse_config, resolve_paths
from gateway.runner import GatewayRunner
from tests.fakes.llm import FakeLLM
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram_api import FakeTelegram
from tests.support.polling import wait_until

PG_USER = "postgres"


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pg_unavailable_reason() -> str | None:
    """Why a throwaway cluster cannot be made here (None: it can)."""
    if _pg_bin() is None:
        return "PostgreSQL server binaries (/usr/lib/postgresql/*/bin/pg_ctl) are not installed"
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            return "running as root without runuser: cannot start PostgreSQL as an unprivileged user"
        try:
            import pwd

            pwd.getpwnam(PG_USER)
        except KeyError:
            return f"running as root and there is no {PG_USER!r} user to run PostgreSQL as"
    return None


class PgCluster:
    """``initdb`` in a temp dir, served on a free port with trust auth; ``stop``/``start`` at will."""

    def __init__(self) -> None:
        bindir = _pg_bin()
        assert bindir is not None
        self.bin = bindir
        self.dir = Path(tempfile.mkdtemp(prefix="herald-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self.log = self.dir / "server.log"
        if os.geteuid() == 0:
            import pwd

            pw = pwd.getpwnam(PG_USER)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bin / tool), *args]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", PG_USER, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=60, cwd=self.dir)

    def start(self) -> None:
        opts = (f"-p {self.port} -h 127.0.0.1 -k {self.dir} -c fsync=off -c full_page_writes=off "
                "-c max_connections=60")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", opts, "-w", "-t", "30", "start")

    def stop(self, mode: str = "fast") -> None:
        """``fast``: clients are disconnected at once (what a restart of the server does to them)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "30", "stop", check=False)

    def running(self) -> bool:
        return self._run("pg_ctl", "-D", str(self.data), "status", check=False).returncode == 0

    def destroy(self) -> None:
        with contextlib.suppress(Exception):
            if self.running():
                self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def pg_cluster() -> Iterator[PgCluster]:
    cluster = PgCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()


# ---- a small filesystem ------------------------------------------------------------------------------


def tmpfs_unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "mounting a size-limited tmpfs needs root"
    probe = Path(tempfile.mkdtemp(prefix="herald-tmpfs-probe-"))
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)],
                              capture_output=True, text=True, timeout=10)
        if done.returncode != 0:
            return f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}"
        subprocess.run(["umount", str(probe)], capture_output=True, timeout=10)
        return None
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str = "8m") -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)], check=True,
                   capture_output=True, timeout=10)
    try:
        yield path
    finally:
        for _ in range(50):  # a process that still has a file open keeps it busy a moment
            if subprocess.run(["umount", str(path)], capture_output=True, timeout=10).returncode == 0:
                break
            time.sleep(0.1)
        else:
            subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=10)


def fill(path: Path, name: str = "ballast") -> Path:
    """Write zeros into ``path/name`` until the filesystem has no byte left; returns the file."""
    ballast = path / name
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (1 << 20, 65536, 4096, 512, 1):
            block = b"\0" * size
            with contextlib.suppress(OSError):
                while os.write(fd, block):
                    pass
    finally:
        os.close(fd)
    return ballast


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


# ---- load and its ledger -----------------------------------------------------------------------------


@dataclass
class Ledger:
    """What the test, playing the platforms, handed the daemon: each message's token, and how the daemon took
    it (web: the HTTP statuses of its attempts; Telegram: acknowledged by the polling offset or not)."""

    web: dict[str, list[int]] = field(default_factory=dict)  # token -> statuses of its POSTs, in order
    telegram: list[str] = field(default_factory=list)  # tokens sent through the Bot API fake
    refusals: list[Any] = field(default_factory=list)  # bodies of the 503s
    errors: list[str] = field(default_factory=list)  # anything else (a 500, a timeout): the test fails on it

    def web_refused(self) -> list[str]:
        return [tok for tok, statuses in self.web.items() if statuses[-1] != 202]


class Load:
    """A steady trickle of messages through the web API (``web_chats`` chats) and the Telegram fake (one chat
    per id in ``tg_users``), from a thread, until ``stop``. A web message refused with 503 is sent again with
    the same message id (as a client does) on the next round; a Telegram update the daemon does not confirm
    stays with the fake, which hands it out again."""

    def __init__(self, herald: Any, bot: Any = None, *, web_chats: int = 3, tg_users: tuple[int, ...] = (),
                 period: float = 0.05) -> None:
        self.herald, self.bot = herald, bot
        self.web_chats, self.tg_users, self.period = web_chats, tg_users, period
        self.ledger = Ledger()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fault-load", daemon=True)
        self._n = 0

    def start(self) -> Load:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.tick()
            self._stop.wait(self.period)

    def tick(self) -> None:
        for token in self.ledger.web_refused()[:3]:  # a client tries again now and then, not all at once
            self.post_web(token)
        self._n += 1
        if self.web_chats:
            self.post_web(f"w{self._n % self.web_chats}-{self._n}")
        if self.bot is not None and self.tg_users:
            user = self.tg_users[self._n % len(self.tg_users)]
            token = f"t{user}-{self._n}"
            self.bot.call(lambda fake: fake.user_message(user, text=token))
            self.ledger.telegram.append(token)

    def post_web(self, token: str) -> None:
        chat = token.split("-")[0]
        body = {"chat_id": chat, "user_id": "tester", "text": token, "message_id": token}
        try:
            resp = self.herald.request("POST", "/api/v1/messages", body, timeout=15)
        except OSError as exc:
            self.ledger.errors.append(f"{token}: {type(exc).__name__}")
            self.ledger.web.setdefault(token, []).append(0)
            return
        self.ledger.web.setdefault(token, []).append(resp.status)
        if resp.status == 503:
            self.ledger.refusals.append(resp.body)
        elif resp.status != 202:
            self.ledger.errors.append(f"{token}: {resp.status} {resp.body}")

    def resend_refused(self, timeout: float) -> None:
        """After the fault: every web message refused is sent again until taken."""
        deadline = time.monotonic() + timeout
        while self.ledger.web_refused():
            assert time.monotonic() < deadline, f"still refused: {self.ledger.web_refused()[:5]}"
            for token in self.ledger.web_refused():
                self.post_web(token)
            time.sleep(0.2)

    # ---- the answers -------------------------------------------------------------------------------

    def answers(self) -> Counter[str]:
        """How often each token was answered ("echo: <token>"), at the platforms."""
        seen: Counter[str] = Counter()
        for c in range(self.web_chats):
            for text in self.herald.replies(f"w{c}"):
                if text.startswith("echo: "):
                    seen[text[6:]] += 1
        if self.bot is not None:
            for user in self.tg_users:
                for text in self.bot.call(lambda fake, u=user: fake.texts(u)):
                    if text.startswith("echo: "):
                        seen[text[6:]] += 1
        return seen

    def expected(self) -> list[str]:
        return [tok for tok, statuses in self.ledger.web.items() if 202 in statuses] + self.ledger.telegram

    def settle(self, timeout: float) -> tuple[list[str], list[str]]:
        """Wait until every message taken is answered; returns (lost, doubled) tokens."""
        deadline = time.monotonic() + timeout
        while True:
            seen = self.answers()
            lost = [tok for tok in self.expected() if seen[tok] == 0]
            doubled = [tok for tok, n in seen.items() if n > 1]
            if not lost or time.monotonic() > deadline:
                return lost, doubled
            time.sleep(0.2)


def metric(herald: Any, name: str, **labels: str) -> float:
    """One sample of the daemon's /metrics (0 when absent)."""
    text = herald.get("/metrics", auth=False).body
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in str(text).splitlines():
        head, _, value = line.rpartition(" ")
        if head == (f"{name}{{{want}}}" if want else name):
            return float(value)
    return 0.0


# ---- a daemon in the test's own process, with the platforms' fakes ------------------------------------

ALICE_TG = 4242


Start = Callable[..., Awaitable[GatewayRunner]]


@pytest.fixture
async def start(home: Any, tmp_path: Any, fake_llm: FakeLLM, fake_tg: FakeTelegram, fake_slack: FakeSlack,
                monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Start]:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", fake_tg.token)
    monkeypatch.setenv("SLACK_BOT_TOKEN", fake_slack.bot_token)
    monkeypatch.setenv("SLACK_APP_TOKEN", fake_slack.app_token)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", fake_slack.signing_secret)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    runners: list[GatewayRunner] = []

    async def factory(telegram_mode: str, slack: bool) -> GatewayRunner:
        platforms: dict[str, Any] = {
            "web": {"enabled": True},
            "telegram": {"enabled": True, "base_url": fake_tg.base_url, "allowed_users": [ALICE_TG],
                         "mode": telegram_mode, "public_url": "https://herald.example"},
        }
        if slack:
            platforms["slack"] = {"enabled": True, "api_base_url": fake_slack.api_url, "mode": "http",
                                  "allowed_users": ["U0ALICE1"]}
        cfg = parse_config({"http": {"port": 0}, "display": {"streaming": False},
                            "model": {"base_url": fake_llm.base_url, "name": "fake-model", "max_retries": 0},
                            "platforms": platforms})
        runner = GatewayRunner(cfg, resolve_paths())
        await runner.start()
        runners.append(runner)
        await wait_until(lambda: all(a.state == "connected" for a in runner.adapters.values()), 15.0)
        return runner

    yield factory
    for runner in runners:
        await runner.shutdown()
