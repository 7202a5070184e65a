"""End-to-end fixtures: the real ``herald run`` process, a fake LLM, and a small web API client.

Every daemon gets its own HERALD_HOME (a pytest tmp dir) and listens on a port the kernel gives it (http.port 0),
read back from its own log, so tests are independent and safe under xdist: a port picked free beforehand can be
taken by another worker's daemon in the meantime, whose answers then look like this one's.
The client is plain urllib: each call is one blocking HTTP request from the test.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml

from tests.fakes.llm import FakeLLMThread
from tests.support.polling import wait_until_sync

REPO = Path(__file__).resolve().parents[2]
HERALD_BIN = Path(sys.executable).with_name("herald")
START_TIMEOUT = 15.0
STOP_TIMEOUT = 20.0
API_KEY = "sk-test-0f3b9c2e7d41a8e5b6c9d0f1a2b3c4d5"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything here is ``e2e`` (the hook sees the whole session's items: only this folder's are marked)."""
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here + os.sep):
            item.add_marker(pytest.mark.e2e)


def free_port() -> int:
    """A port free now, for a fake or a config that must name one before anything listens (another worker may
    take it meanwhile: a daemon under test listens on port 0 instead, see ``started_port``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def started_port(log_file: Path, offset: int = 0) -> int | None:
    """The port a daemon listens on, from the ``gateway_started`` line its log file gained past ``offset`` (its
    size when the process was spawned); None until it is there."""
    try:
        with open(log_file, "rb") as f:
            f.seek(offset)
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    for line in lines:
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if isinstance(event, dict) and event.get("event") == "gateway_started":
                return int(str(event["http"]).rsplit(":", 1)[1])
    return None


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


@dataclass
class Response:
    status: int
    body: Any
    headers: dict[str, str]


@dataclass
class Herald:
    """One ``herald run`` process and a client for its web API."""

    home: Path
    config: dict[str, Any]
    env: dict[str, str]
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    runs: int = 0
    _files: list[Any] = field(default_factory=list)
    _log_offset: int = 0

    # ---- process -------------------------------------------------------------------------------

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.home / "logs" / "herald.log"

    @property
    def token(self) -> str:
        return (self.home / "web_token").read_text().strip()

    def stdout(self) -> str:
        return "".join(p.read_text() for p in sorted(self.home.glob("stdout.*.txt")))

    def stderr(self) -> str:
        return "".join(p.read_text() for p in sorted(self.home.glob("stderr.*.txt")))

    def write_config(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "config.yaml").write_text(yaml.safe_dump(self.config, sort_keys=False))

    def spawn(self) -> subprocess.Popen[bytes]:
        """Start the process without waiting for it (for tests that expect it to fail), on a port the kernel
        gives it: ``started()`` reads it back."""
        self.config = deep_merge(self.config, {"http": {"port": 0}})
        self.write_config()
        self.runs += 1
        out = open(self.home / f"stdout.{self.runs}.txt", "wb")  # noqa: SIM115 - closed in close_files()
        err = open(self.home / f"stderr.{self.runs}.txt", "wb")  # noqa: SIM115
        self._files += [out, err]
        self._log_offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        self.proc = subprocess.Popen(
            [str(HERALD_BIN), "run"], cwd=REPO, env=self.env, stdout=out, stderr=err, stdin=subprocess.DEVNULL
        )
        return self.proc

    def start(self) -> None:
        """Start on a port of the kernel's choosing and wait until /readyz answers."""
        proc = self.spawn()
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and proc.poll() is None:
            if self.started():
                with contextlib.suppress(OSError):
                    if self.get("/readyz", auth=False).status == 200:
                        # as if it had been configured: the CLI (`herald web-url`, ...) reads the port there
                        self.config = deep_merge(self.config, {"http": {"port": self.port}})
                        self.write_config()
                        return
            time.sleep(0.05)
        if proc.poll() is not None:
            raise AssertionError(f"herald exited with {proc.returncode} at start:\n{self.stderr()[-3000:]}")
        proc.kill()
        proc.wait()
        # Start-up's stderr lines are held back until it is up: the log file says how far it got.
        log = self.log_file.read_text()[-3000:] if self.log_file.exists() else "(no log file)"
        raise AssertionError(f"herald did not become ready in {START_TIMEOUT}s:\n{self.stderr()[-3000:]}\n"
                             f"log file:\n{log}")

    def started(self) -> bool:
        """Whether the process spawned last has its http server up; ``port`` is then its port."""
        port = started_port(self.log_file, self._log_offset)
        if port is not None:
            self.port = port
        return port is not None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT) -> int:
        """Signal the process and return its exit code (killed, and the test failed, if it hangs)."""
        proc = self.proc
        assert proc is not None
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise AssertionError(f"herald did not exit within {timeout}s of signal {sig}") from None
        self.close_files()
        return proc.returncode

    def close_files(self) -> None:
        for f in self._files:
            f.close()
        self._files.clear()

    # ---- http ------------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None, *, auth: bool | str = True,
                raw: bytes | None = None, timeout: float = 10.0) -> Response:
        headers = {}
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
        if data is not None:
            headers["Content-Type"] = "application/json"
        if auth is True:
            headers["Authorization"] = f"Bearer {self.token}"
        elif isinstance(auth, str):
            headers["Authorization"] = auth
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, payload, hdrs = resp.status, resp.read(), dict(resp.headers)
        except urllib.error.HTTPError as exc:
            status, payload, hdrs = exc.code, exc.read(), dict(exc.headers)
        try:
            parsed: Any = json.loads(payload) if payload else None
        except ValueError:
            parsed = payload.decode(errors="replace")
        return Response(status, parsed, hdrs)

    def get(self, path: str, **kw: Any) -> Response:
        return self.request("GET", path, **kw)

    def post(self, text: str, chat_id: str = "chat", message_id: str | None = None,
             user_id: str = "tester") -> dict[str, Any]:
        body: dict[str, Any] = {"chat_id": chat_id, "user_id": user_id, "text": text}
        if message_id is not None:
            body["message_id"] = message_id
        resp = self.request("POST", "/api/v1/messages", body)
        assert resp.status == 202, (resp.status, resp.body)
        return resp.body

    def messages(self, chat_id: str = "chat") -> list[dict[str, Any]]:
        resp = self.get(f"/api/v1/chats/{quote(chat_id, safe='')}/messages")
        assert resp.status == 200, (resp.status, resp.body)
        return resp.body["messages"]

    def replies(self, chat_id: str = "chat") -> list[str]:
        return [m["text"] for m in self.messages(chat_id) if m["role"] == "assistant"]

    def wait_for(self, chat_id: str, predicate: Callable[[list[dict[str, Any]]], Any],
                 timeout: float = 10.0) -> list[dict[str, Any]]:
        """Poll the chat until ``predicate(messages)`` is truthy; fail with the last messages if it never is."""
        seen: list[dict[str, Any]] = []

        def met() -> Any:
            seen[:] = self.messages(chat_id)
            return predicate(seen)

        wait_until_sync(met, timeout, what=lambda: f"a condition on chat {chat_id!r} (it has: {seen})", interval=0.05)
        return seen

    def wait_for_replies(self, chat_id: str, n: int, timeout: float = 10.0,
                         match: Callable[[str], bool] | None = None) -> list[str]:
        """Wait until at least ``n`` assistant messages (optionally only those ``match`` accepts) arrived."""

        def texts(msgs: list[dict[str, Any]]) -> list[str]:
            out = [m["text"] for m in msgs if m["role"] == "assistant"]
            return [t for t in out if match(t)] if match else out

        return texts(self.wait_for(chat_id, lambda msgs: len(texts(msgs)) >= n, timeout))

    def events(self, chat_id: str = "chat") -> EventStream:
        """Open the chat's SSE stream (returns once connected); close it with ``.close()``."""
        return EventStream(self, chat_id)

    def log_events(self) -> list[dict[str, Any]]:
        events = []
        if self.log_file.exists():
            for line in self.log_file.read_text().splitlines():
                with contextlib.suppress(ValueError):
                    events.append(json.loads(line))
        return events


class EventStream:
    """GET /api/v1/chats/{chat_id}/events, read in a background thread into ``frames`` (event, data)."""

    def __init__(self, herald: Herald, chat_id: str) -> None:
        req = urllib.request.Request(f"{herald.base}/api/v1/chats/{chat_id}/events",
                                     headers={"Authorization": f"Bearer {herald.token}"})
        self._resp = urllib.request.urlopen(req, timeout=60)
        self.frames: list[tuple[str, Any]] = []
        self.closed = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        event, data = "message", []
        try:
            for raw in self._resp:
                line = raw.decode().rstrip("\r\n")
                if not line:
                    if data:
                        self.frames.append((event, json.loads("\n".join(data))))
                    event, data = "message", []
                elif line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].strip())
        except (OSError, ValueError, AttributeError):  # AttributeError: closed by close() mid-read
            pass
        finally:
            self.closed.set()

    def messages(self, role: str | None = None) -> list[dict[str, Any]]:
        return [d for e, d in list(self.frames) if e == "message" and (role is None or d.get("role") == role)]

    def close(self) -> None:
        # Shut the socket down first: closing the response alone waits for the reader's blocking read to end
        # (the next keep-alive, up to 15 s later).
        with contextlib.suppress(Exception):
            self._resp.fp.raw._sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(Exception):
            self._resp.close()


def base_config(fake: FakeLLMThread | None) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "gateway": {"drain_seconds": 5},
        "tools": {"terminal": {"enabled": True}},
        # Replies are not streamed unless a test says so (test_stream_e2e.py): on a loaded machine a turn
        # that takes over a second would show up first as a half-written message.
        "display": {"streaming": False},
    }
    if fake is not None:
        cfg["model"] = {"base_url": fake.base_url, "name": "fake-model", "api_key_env": "TEST_KEY",
                        "max_retries": 0, "timeout_seconds": 30}
    return cfg


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMThread]:
    fake = FakeLLMThread()
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def make_herald(tmp_path: Path, fake_llm: FakeLLMThread) -> Iterator[Callable[..., Herald]]:
    """``make_herald(config_overrides=None, start=True, model=True)``: a daemon in its own home.

    At teardown every daemon still running is sent SIGTERM and must exit 0.
    """
    made: list[Herald] = []

    def make(overrides: dict[str, Any] | None = None, *, start: bool = True, model: bool = True,
             home: Path | None = None) -> Herald:
        cfg = deep_merge(base_config(fake_llm if model else None), overrides or {})
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HERALD_", "PYTEST_XDIST"))}
        env.update(HERALD_HOME=str(home or tmp_path / f"home{len(made)}"), TEST_KEY=API_KEY, PYTHONUNBUFFERED="1")
        herald = Herald(home=Path(env["HERALD_HOME"]), config=cfg, env=env)
        made.append(herald)
        if start:
            herald.start()
        return herald

    yield make
    failures = []
    for herald in made:
        if herald.proc is not None and herald.proc.poll() is None:
            code = herald.stop()
            if code != 0:
                failures.append(f"{herald.home}: exit {code}\n{herald.stderr()[-2000:]}")
        herald.close_files()
    assert not failures, "herald did not exit 0 on SIGTERM:\n" + "\n".join(failures)


@pytest.fixture
def herald(make_herald: Callable[..., Herald]) -> Herald:
    return make_herald()
