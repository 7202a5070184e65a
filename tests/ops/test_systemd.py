"""systemd: the notify protocol (READY, STATUS, WATCHDOG from the loop, STOPPING) and the unit Herald installs."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gateway.ops.service import Unit
from gateway.ops.systemd import SystemdNotifier

REPO = Path(__file__).resolve().parents[2]
HERALD_BIN = Path(sys.executable).with_name("herald")


class NotifySocket:
    """What systemd listens on: a datagram socket; ``messages`` are (monotonic time, fields)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "notify.sock"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(self.path))
        self.sock.settimeout(0.05)
        self.messages: list[tuple[float, list[str]]] = []

    def read(self, seconds: float, done: threading.Event | None = None) -> None:
        """Collect messages for ``seconds``, or until ``done`` is set and nothing more is waiting."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                if done is not None and done.is_set():
                    return
                continue
            self.messages.append((time.monotonic(), data.decode().split("\n")))

    def close(self) -> None:
        self.sock.close()


def test_without_notify_socket_everything_is_a_no_op() -> None:
    notifier = SystemdNotifier(environ={})
    assert not notifier.enabled
    assert notifier.ready("x") is False and notifier.ping() is False and notifier.stopping() is False


def test_watchdog_seconds_only_for_this_process(tmp_path: Path) -> None:
    import os

    assert SystemdNotifier({"WATCHDOG_USEC": "3000000"}).watchdog_seconds == 3.0
    assert SystemdNotifier({"WATCHDOG_USEC": "3000000", "WATCHDOG_PID": str(os.getpid())}).watchdog_seconds == 3.0
    assert SystemdNotifier({"WATCHDOG_USEC": "3000000", "WATCHDOG_PID": "1"}).watchdog_seconds is None
    assert SystemdNotifier({"WATCHDOG_USEC": "0"}).watchdog_seconds is None


@pytest.mark.slow
def test_a_blocked_loop_stops_the_watchdog_pings(tmp_path: Path) -> None:
    receiver = NotifySocket(tmp_path)
    # WatchdogSec=0.3 s: pings every 0.1 s from the loop.
    notifier = SystemdNotifier({"NOTIFY_SOCKET": str(receiver.path), "WATCHDOG_USEC": "300000"})
    marks: dict[str, float] = {}

    async def main() -> None:
        task = asyncio.create_task(notifier.watchdog())
        await asyncio.sleep(0.6)
        marks["block"] = time.monotonic()
        time.sleep(1.2)  # noqa: ASYNC251 - on purpose: the loop is wedged by a blocking call on its thread
        marks["unblock"] = time.monotonic()
        await asyncio.sleep(0.6)
        task.cancel()

    import threading

    reader = threading.Thread(target=receiver.read, args=(3.0,))
    reader.start()
    asyncio.run(main())
    reader.join()
    receiver.close()
    pings = [at for at, fields in receiver.messages if fields == ["WATCHDOG=1"]]
    before = [t for t in pings if t < marks["block"]]
    during = [t for t in pings if marks["block"] + 0.05 < t < marks["unblock"]]
    after = [t for t in pings if t > marks["unblock"]]
    assert len(before) >= 4, pings  # ~every 0.1 s while the loop runs
    assert during == []  # nothing while it is blocked: systemd's WatchdogSec runs out
    assert len(after) >= 3  # and they resume when it is free again


def test_status_is_sent_when_it_changes(tmp_path: Path) -> None:
    receiver = NotifySocket(tmp_path)
    notifier = SystemdNotifier({"NOTIFY_SOCKET": str(receiver.path)})
    notifier.status("a")
    notifier.status("a")
    notifier.status("b")
    receiver.read(0.2)
    assert [f for _, f in receiver.messages] == [["STATUS=a"], ["STATUS=b"]]


def test_the_shipped_unit_is_what_service_install_writes() -> None:
    shipped = (REPO / "deploy" / "systemd" / "herald.service").read_text()
    assert shipped == Unit("system", "/opt/herald/bin/herald").render()
    for line in ("Type=notify", "NotifyAccess=main", "WatchdogSec=30", "RestrictNamespaces=user mnt pid ipc uts net",
                 "ProtectSystem=strict", "Restart=on-failure"):
        assert line in shipped.splitlines()
    # bubblewrap needs a fresh /proc in its PID namespace: these would make the kernel refuse it.
    assert "ProtectKernelTunables=yes" not in shipped and "ProtectKernelLogs=yes" not in shipped


def run_herald(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(HERALD_BIN), *args], env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    import os

    out = {k: v for k, v in os.environ.items() if not k.startswith("HERALD_")}
    out.update(HERALD_HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    return out


def test_service_install_writes_a_user_unit_and_status_reports_it(tmp_path: Path, env: dict[str, str]) -> None:
    out = run_herald("service", "status", "--user", env=env)
    assert out.returncode == 1 and "not installed" in out.stderr
    out = run_herald("service", "install", "--user", "--profile", "work", env=env)
    assert out.returncode == 2 and "no profile 'work'" in out.stderr  # a unit for a profile that isn't there
    assert run_herald("profile", "create", "work", env=env).returncode == 0
    out = run_herald("service", "install", "--user", "--profile", "work", env=env)
    assert out.returncode == 0, out.stderr
    unit = tmp_path / "config" / "systemd" / "user" / "herald-work.service"
    text = unit.read_text()
    assert f"ExecStart={HERALD_BIN} run" in text
    assert f"Environment=HERALD_HOME={tmp_path / 'home'}" in text and "Environment=HERALD_PROFILE=work" in text
    assert "Type=notify" in text and "WantedBy=default.target" in text and "User=" not in text
    assert "loginctl enable-linger" in out.stdout


def test_service_install_system_unit_into_a_folder(tmp_path: Path, env: dict[str, str]) -> None:
    out = run_herald("service", "install", "--dir", str(tmp_path / "units"), "--run-as", "bot", env=env)
    assert out.returncode == 0, out.stderr
    text = (tmp_path / "units" / "herald.service").read_text()
    assert "User=bot" in text and "Environment=HERALD_HOME=/var/lib/herald" in text


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
@pytest.mark.parametrize("kind", ["system", "user"])
def test_systemd_analyze_verify_accepts_the_units(tmp_path: Path, kind: str) -> None:
    import os

    unit = tmp_path / "herald.service"
    unit.write_text(Unit(kind, str(HERALD_BIN), home=str(tmp_path)).render())  # type: ignore[arg-type]
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    out = subprocess.run(["systemd-analyze", "verify", *(["--user"] if kind == "user" else []), str(unit)],
                         capture_output=True, text=True, timeout=60, env=env)
    if out.returncode != 0 and "Failed to initialize manager" in out.stderr:
        pytest.skip(f"systemd-analyze cannot run here: {out.stderr.strip()}")
    # verify exits 0 even for a line it ignored: every word it says is a problem.
    assert out.returncode == 0 and out.stderr.strip() == "" and out.stdout.strip() == "", out.stderr
