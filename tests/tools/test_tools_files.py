from __future__ import annotations

import json
import os
import threading

import pytest

from tools.config import TerminalConfig, ToolsConfig
from tools.registry import ToolContext, load_builtin_tools

registry = load_builtin_tools()


def make_ctx(tmp_path) -> ToolContext:
    return ToolContext("s", str(tmp_path), threading.Event(), ToolsConfig(terminal=TerminalConfig()))


def call(ctx, name, **args) -> dict:
    return json.loads(registry.dispatch(name, args, ctx))


def test_write_then_read_relative_path_creates_parents(tmp_path):
    ctx = make_ctx(tmp_path)
    res = call(ctx, "write_file", path="a/b/notes.txt", content="héllo\nworld\n")
    assert res == {"path": str(tmp_path / "a/b/notes.txt"), "bytes_written": len("héllo\nworld\n".encode())}
    assert (tmp_path / "a/b/notes.txt").read_text() == "héllo\nworld\n"
    read = call(ctx, "read_file", path="a/b/notes.txt")
    assert read["content"] == "1\théllo\n2\tworld"
    assert read["total_lines"] == 2 and "next_offset" not in read


def test_read_offset_and_limit(tmp_path):
    (tmp_path / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 21)))
    res = call(make_ctx(tmp_path), "read_file", path=str(tmp_path / "n.txt"), offset=10, limit=3)
    assert res["content"].splitlines() == ["10\tline 10", "11\tline 11", "12\tline 12"]
    assert res["next_offset"] == 13 and res["total_lines"] == 20


def test_read_errors(tmp_path):
    ctx = make_ctx(tmp_path)
    assert "not found" in call(ctx, "read_file", path="missing.txt")["error"]
    (tmp_path / "bin").write_bytes(b"\x00\x01\x02")
    assert "binary" in call(ctx, "read_file", path="bin")["error"]
    assert "directory" in call(ctx, "read_file", path=".")["error"]
    (tmp_path / "t").write_text("x")
    assert "offset" in call(ctx, "read_file", path="t", offset=0)["error"]


def test_overwrite_keeps_mode(tmp_path):
    target = tmp_path / "run.sh"
    target.write_text("old")
    target.chmod(0o750)
    call(make_ctx(tmp_path), "write_file", path="run.sh", content="new")
    assert target.read_text() == "new" and (target.stat().st_mode & 0o777) == 0o750
    assert [p.name for p in tmp_path.iterdir()] == ["run.sh"]


# ---- without a gateway policy: the workspace is the context's cwd, Herald's home is hidden ---------------


@pytest.mark.parametrize("sandbox", ["auto", "none"])
def test_default_policy_hides_herald_home_proc_and_writes_outside(tmp_path, monkeypatch, sandbox):
    home = tmp_path / "herald-home"
    home.mkdir()
    (home / "state.db").write_text("secret rows")
    monkeypatch.setenv("HERALD_HOME", str(home))
    ws = tmp_path / "ws"
    ws.mkdir()
    ctx = ToolContext("s", str(ws), threading.Event(), ToolsConfig(terminal=TerminalConfig(sandbox=sandbox)))
    # (Under the host's /tmp, which the sandbox does not show either; test_sandbox.py has homes elsewhere.)
    assert "cannot read" in call(ctx, "read_file", path=str(home / "state.db"))["error"]
    assert "cannot read" in call(ctx, "read_file", path="../herald-home/state.db")["error"]
    assert "/proc" in call(ctx, "read_file", path="/proc/self/environ")["error"]
    assert "/proc" in call(ctx, "read_file", path=f"/proc/{os.getpid()}/environ")["error"]
    res = call(ctx, "write_file", path="../escape.txt", content="x")
    assert res["error"].startswith(f"write_file may only write inside the workspace {ws}; ../escape.txt resolves to")
    assert not (tmp_path / "escape.txt").exists()
    (ws / "link").symlink_to(home)
    assert "may only write inside the workspace" in call(ctx, "write_file", path="link/state.db", content="x")["error"]
    assert (home / "state.db").read_text() == "secret rows"
    assert call(ctx, "write_file", path="ok.txt", content="fine")["path"] == str(ws / "ok.txt")
