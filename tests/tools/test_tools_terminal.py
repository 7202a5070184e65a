from __future__ import annotations

import asyncio
import json
import os
import threading
import time

from tools.config import TerminalConfig, ToolsConfig
from tools.registry import ToolContext, load_builtin_tools

registry = load_builtin_tools()


def make_ctx(tmp_path, interrupt=None, **terminal) -> ToolContext:
    terminal.setdefault("enabled", True)
    terminal.setdefault("cwd", str(tmp_path))
    cfg = ToolsConfig(terminal=TerminalConfig(**terminal))
    return ToolContext("s", str(tmp_path), interrupt or threading.Event(), cfg)


def run(ctx, command, **args) -> dict:
    return json.loads(registry.dispatch("terminal", {"command": command, **args}, ctx))


def running_with(token: str) -> bool:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if token.encode() in f.read():
                        return True
            except OSError:
                pass
    return False


def wait_gone(token: str, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not running_with(token):
            return True
        time.sleep(0.02)
    return False


def test_output_exit_code_and_cwd(tmp_path):
    res = run(make_ctx(tmp_path), "echo out; echo err >&2; pwd; exit 3")
    assert res == {"exit_code": 3, "output": f"out\nerr\n{tmp_path}\n", "timed_out": False}


def test_stdin_is_closed(tmp_path):
    assert run(make_ctx(tmp_path), "cat; echo done")["output"] == "done\n"


def test_cwd_falls_back_to_context_cwd(tmp_path):
    ctx = make_ctx(tmp_path, cwd=None)
    assert run(ctx, "pwd")["output"] == f"{tmp_path}\n"


def test_timeout_kills_the_whole_process_group(tmp_path):
    # Inside the sandbox $! is a PID of its own namespace: find the child by a unique argument instead.
    token = f"{100 + time.monotonic_ns() % 1000}.{os.getpid()}"
    res = run(make_ctx(tmp_path), f"sleep {token} & sleep {token}; wait", timeout=0.3)
    assert res["timed_out"] is True and res["exit_code"] is None
    assert wait_gone(token), "background child survived the timeout"


def test_config_timeout_caps_the_argument(tmp_path):
    res = run(make_ctx(tmp_path, timeout_seconds=0.2), "sleep 100", timeout=1000)
    assert res["timed_out"] is True


def test_output_is_capped_keeping_head_and_tail(tmp_path):
    res = run(make_ctx(tmp_path, max_output_chars=200), "echo START; seq 1 20000; echo END")
    out = res["output"]
    assert out.startswith("START\n") and out.rstrip().endswith("END")
    assert "bytes of output omitted" in out
    assert len(out) < 400
    assert res["exit_code"] == 0


async def test_interrupt_kills_running_command(tmp_path):
    interrupt = threading.Event()
    ctx = make_ctx(tmp_path, interrupt)
    task = asyncio.create_task(asyncio.to_thread(run, ctx, "echo started; sleep 100 & sleep 100; wait"))
    await asyncio.sleep(0.2)
    interrupt.set()
    res = await asyncio.wait_for(task, 10)
    assert res["interrupted"] is True and res["exit_code"] is None and res["timed_out"] is False
    assert res["output"].startswith("started")


def test_only_allowlisted_and_passed_through_variables_reach_commands(tmp_path, monkeypatch):
    monkeypatch.setenv("HERALD_TEST_SECRET", "s3cret")
    monkeypatch.setenv("HERALD_TEST_PLAIN", "visible")
    out = run(make_ctx(tmp_path), 'echo "[$HERALD_TEST_SECRET][$HERALD_TEST_PLAIN][$HOME]"')["output"]
    assert out == f"[][][{tmp_path}]\n"
    ctx = make_ctx(tmp_path, env_passthrough=["HERALD_TEST_PLAIN"])
    assert run(ctx, 'echo "[$HERALD_TEST_SECRET][$HERALD_TEST_PLAIN]"')["output"] == "[][visible]\n"


def test_bad_arguments(tmp_path):
    ctx = make_ctx(tmp_path)
    assert "error" in run(ctx, "")
    assert "error" in run(ctx, "true", timeout="soon")
    assert "does not exist" in run(make_ctx(tmp_path, cwd=str(tmp_path / "missing")), "true")["error"]


