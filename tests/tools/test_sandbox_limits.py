"""What one command may consume (tools/limits.py): memory, CPU time, file size, open files, the workspace.

Under real bubblewrap (and unsandboxed, where the same prelude sets them). Every limit binds the command
alone: the test process, which stands for the daemon, keeps its own limits and runs the next command.
"""

from __future__ import annotations

import json
import resource
import shutil
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tools import limits, sandbox
from tools.config import TerminalConfig, ToolsConfig
from tools.dangerous import Decision
from tools.limits import Limits
from tools.registry import ToolContext, load_builtin_tools
from tools.sandbox import resolve_mode

registry = load_builtin_tools()
_MODE, _PROBLEM = resolve_mode("bwrap")
needs_bwrap = pytest.mark.skipif(_MODE != "bwrap", reason=f"bubblewrap is unusable here: {_PROBLEM}")
BOTH = [pytest.param("bwrap", marks=needs_bwrap), "none"]
PYTHON = shutil.which("python3", path="/usr/bin:/bin")  # one the sandbox shows


def ctx_for(workspace: Path, mode: str, **terminal: Any) -> ToolContext:
    cfg = TerminalConfig(**{"sandbox": mode, "network": False, **terminal})
    policy = sandbox.make_policy(cfg, workspace=workspace, hidden=sandbox.default_hidden())
    approve = lambda command, verdict, ctx: Decision("approved", "approved by the test")  # noqa: E731
    return ToolContext("s", str(workspace), threading.Event(), ToolsConfig(terminal=cfg),
                       extras={"approve": approve}, sandbox=policy)


def term(ctx: ToolContext, command: str) -> dict[str, Any]:
    return json.loads(registry.dispatch("terminal", {"command": command}, ctx))


def test_defaults_are_on() -> None:
    t = TerminalConfig()
    assert (t.max_memory_mb, t.max_cpu_seconds, t.max_file_mb, t.max_open_files, t.max_workspace_mb) == \
        (2048, 300, 1024, 1024, 10240)
    policy = sandbox.make_policy(TerminalConfig(sandbox="none"), workspace="/")
    assert policy.limits.memory_mb == 2048 and policy.limits.cpu_seconds == 300


@pytest.mark.parametrize("mode", BOTH)
def test_the_limits_bind_the_command_and_never_the_daemon(tmp_path: Path, mode: str) -> None:
    before = {k: resource.getrlimit(k) for k in (resource.RLIMIT_AS, resource.RLIMIT_CPU, resource.RLIMIT_FSIZE,
                                                 resource.RLIMIT_NOFILE)}
    ctx = ctx_for(tmp_path, mode, max_memory_mb=300, max_cpu_seconds=77, max_file_mb=5, max_open_files=100)
    assert ctx.sandbox is not None
    out = term(ctx, "ulimit -v; ulimit -St; ulimit -Ht; ulimit -f; ulimit -n")["output"].split()
    memory = str(300 * 1024) if ctx.sandbox.limits.memory_scope is None else "unlimited"
    assert out == [memory, "77", "82", str(5 * 1024), "100"]
    assert {k: resource.getrlimit(k) for k in before} == before


@needs_bwrap
def test_a_command_allocating_past_the_memory_limit_ends_alone(tmp_path: Path) -> None:
    if PYTHON is None:
        pytest.skip("no /usr/bin/python3")
    ctx = ctx_for(tmp_path, "bwrap", max_memory_mb=200)
    assert ctx.sandbox is not None and ctx.sandbox.limits.memory_scope is None  # RLIMIT_AS here (no systemd)
    res = term(ctx, f"{PYTHON} -c 'b = bytearray(600 << 20); print(\"allocated\")'; echo after $?")
    assert "allocated" not in res["output"] and "MemoryError" in res["output"], res
    assert "after 1" in res["output"]  # the shell around it went on: only the allocation failed
    res = term(ctx, f"{PYTHON} -c 'bytearray(600 << 20)'")
    assert res["exit_code"] == 1 and "max_memory_mb" in res["limit"], res
    # The daemon (this process) and the next command are fine.
    assert bytearray(50 << 20)[-1] == 0
    assert term(ctx, "echo next")["output"] == "next\n"


@pytest.mark.parametrize("mode", BOTH)
def test_a_file_over_max_file_mb_stops(tmp_path: Path, mode: str) -> None:
    ctx = ctx_for(tmp_path, mode, max_file_mb=1)
    res = term(ctx, "head -c 3M /dev/zero > big.bin")
    assert res["exit_code"] == 153 and "max_file_mb: 1 MB" in res["limit"], res
    assert (tmp_path / "big.bin").stat().st_size == 1 << 20
    assert term(ctx, "head -c 100K /dev/zero > small.bin")["exit_code"] == 0


@needs_bwrap
def test_the_cpu_limit_ends_a_busy_loop(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path, "bwrap", max_cpu_seconds=1, timeout_seconds=120)  # wall clock: far away
    res = term(ctx, "while :; do :; done")
    assert res["exit_code"] == 152 and not res["timed_out"], res
    assert "max_cpu_seconds: 1 s" in res["limit"]


@needs_bwrap
def test_open_files_are_capped(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path, "bwrap", max_open_files=64)
    res = term(ctx, "for i in $(seq 100); do exec {fd}</dev/null || { echo stopped at $i; break; }; done")
    assert "stopped at" in res["output"] and "Too many open files" in res["output"], res


@pytest.mark.parametrize("mode", BOTH)
def test_the_workspace_cap_is_reported(tmp_path: Path, mode: str) -> None:
    ctx = ctx_for(tmp_path, mode, max_workspace_mb=1)
    assert "workspace" not in term(ctx, "head -c 100K /dev/urandom > a.bin")
    res = term(ctx, "head -c 2M /dev/urandom > b.bin")
    assert res["exit_code"] == 0 and "max_workspace_mb" in res["workspace"], res
    assert "workspace" not in term(ctx, "rm b.bin")
    # Hard links count once; symlinks are not followed out of the workspace.
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x").write_bytes(b"x" * 600_000)
    (tmp_path / "sub" / "y").hardlink_to(tmp_path / "sub" / "x")
    (tmp_path / "out").symlink_to("/usr")
    assert limits.workspace_usage(str(tmp_path)) < 1 << 20


def test_a_systemd_scope_holds_the_memory_when_there_is_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "systemd-run"
    record = tmp_path / "record"
    # Stands in for systemd-run --scope: records its arguments, then runs what follows "--".
    fake.write_text(f'#!/bin/bash\necho "$@" > {record}\nwhile [ "$1" != -- ]; do shift; done; shift; exec "$@"\n')
    fake.chmod(0o755)
    monkeypatch.setattr(limits, "_systemd_run", lambda: str(fake))
    ws = tmp_path / "ws"
    ws.mkdir()
    ctx = ctx_for(ws, "none", max_memory_mb=300)
    assert ctx.sandbox is not None
    ctx.sandbox = replace(ctx.sandbox, limits=replace(ctx.sandbox.limits, memory_scope="user"))
    line = sandbox.argv("echo hi", ctx.sandbox)
    assert line[: line.index("--") + 1] == [str(fake), "--user", "--scope", "--quiet", "--collect", "-p",
                                           "MemoryMax=300M", "-p", "MemorySwapMax=0", "--"]
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/4242")
    res = term(ctx, "ulimit -v; echo ${XDG_RUNTIME_DIR:-unset}")
    assert res["output"].split() == ["unlimited", "unset"]  # the cgroup holds it; systemd-run's variable dropped
    assert "MemoryMax=300M" in record.read_text()
    assert "SIGKILL" in (limits.exit_note(ctx.sandbox.limits, 137) or "")
    # Without systemd (this machine, most containers) the probe says so and RLIMIT_AS holds the memory.
    limits.reset()
    monkeypatch.setattr(limits.os.path, "isdir", lambda p: False)
    assert limits.memory_scope() is None
    limits.reset()


def test_limits_config_keys() -> None:
    from gateway.config import ConfigError, parse_config

    for bad in ({"max_memory_mb": -1}, {"max_open_files": 10}, {"max_cpu_seconds": "x"}, {"host_ports": [80]},
                {"allowed_domains": ["https://example.com"]}):
        with pytest.raises(ConfigError, match=r"tools\.terminal"):
            parse_config({"tools": {"terminal": bad}})
    assert Limits() == Limits(0, 0, 0, 0, 0, None)
