"""The gateway's side of the sandbox (gateway/turns/sandboxing.py) in a running daemon: the egress proxy
starts with the policy and stops with the daemon, and a command that eats memory ends alone while the
daemon answers the next message."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tools.sandbox import resolve_mode

_MODE, _PROBLEM = resolve_mode("bwrap")
pytestmark = pytest.mark.skipif(_MODE != "bwrap", reason=f"bubblewrap is unusable here: {_PROBLEM}")
PYTHON = shutil.which("python3", path="/usr/bin:/bin")  # one the sandbox shows


def tool(command: str) -> str:
    return f"[tool=terminal:{json.dumps({'command': command})}]"


async def test_the_proxy_runs_with_the_daemon_and_stops_with_it(make_runner: Any) -> None:
    runner, qa = await make_runner({"tools": {"terminal": {"enabled": True}}})
    assert runner.egress is not None and runner.sandbox.bridged
    folder = Path(runner.egress.point.folder)
    assert (folder / "proxy.sock").exists()
    await qa.say(tool("echo $HTTPS_PROXY; ls /run/herald-egress"))
    texts = await qa.wait_for(lambda t: any("tool said" in x for x in t))
    out = next(x for x in texts if "tool said" in x)
    assert f"http://127.0.0.1:{runner.egress.point.proxy_port}" in out and "proxy.sock" in out
    await runner.shutdown()
    assert runner.egress.point is None and not folder.exists()  # noqa: ASYNC240


async def test_network_false_starts_no_proxy(make_runner: Any) -> None:
    runner, _ = await make_runner({"tools": {"terminal": {"enabled": True, "network": False}}})
    assert runner.egress is None and not runner.sandbox.bridged


@pytest.mark.skipif(PYTHON is None, reason="no /usr/bin/python3")
async def test_a_command_past_the_memory_limit_ends_alone_and_the_daemon_answers_the_next(make_runner: Any) -> None:
    runner, qa = await make_runner({"tools": {"terminal": {"enabled": True, "max_memory_mb": 256}}})
    await qa.say(tool(f"{PYTHON} -c 'b = bytearray(2048 << 20); print(len(b))'; echo exit=$?"))
    texts = await qa.wait_for(lambda t: any("tool said" in x for x in t))
    out = next(x for x in texts if "tool said" in x)
    assert "MemoryError" in out and "exit=1" in out and str(2048 << 20) not in out
    await qa.say(tool("echo still-here-$((6*7))"))
    texts = await qa.wait_for(lambda t: any("still-here-42" in x for x in t))
    assert runner.readiness()[1]  # the daemon is up and its adapters report
