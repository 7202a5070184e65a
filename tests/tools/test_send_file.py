"""send_file: only files inside the workspace (resolved like read_file: symlinks and .. followed, the real
file must be in the workspace), capped by media.max_send_mb; the gateway copies the open file at once, so
what is sent is what was checked."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from gateway.media.outgoing import FilesOut, files_sent
from tests.support.media import image_bytes
from tools.config import TerminalConfig, ToolsConfig
from tools.registry import ToolContext, load_builtin_tools

registry = load_builtin_tools()
SESSION = "6f0c8c9e-1b7a-4c55-9d3b-0b0e6f9a1a11"


def setup(tmp_path: Path, max_bytes: int = 1024 * 1024) -> tuple[ToolContext, Path, Path]:
    ws, out = tmp_path / "workspace", tmp_path / "home" / "media" / "out"
    ws.mkdir()
    ctx = ToolContext("s", str(ws), threading.Event(), ToolsConfig(terminal=TerminalConfig()),
                      extras={"files_out": FilesOut(out, SESSION, max_bytes)})
    return ctx, ws, out


def call(ctx: ToolContext, **args: object) -> dict:
    return json.loads(registry.dispatch("send_file", dict(args), ctx))


def test_a_workspace_file_is_copied_and_described(tmp_path: Path) -> None:
    ctx, ws, out = setup(tmp_path)
    (ws / "charts").mkdir()
    (ws / "charts" / "plot.png").write_bytes(image_bytes())
    res = call(ctx, path="charts/plot.png", caption="the **plot**")
    assert res["sent"] is True and res["kind"] == "image" and res["mime"] == "image/png"
    assert res["path"] == str(ws / "charts" / "plot.png") and res["filename"] == "plot.png"
    copy = Path(res["copy"])
    assert copy.parent == out and copy.name.startswith(f"out-{SESSION}-") and copy.read_bytes() == image_bytes()
    (ws / "charts" / "plot.png").write_bytes(b"changed afterwards")
    assert copy.read_bytes() == image_bytes()  # what was checked is what goes out


def test_paths_outside_the_workspace_are_refused(tmp_path: Path) -> None:
    ctx, ws, out = setup(tmp_path)
    outside = tmp_path / "secret.txt"
    outside.write_text("not for the chat")
    # (Refused twice over here: outside the workspace, and in the host's /tmp that the sandbox hides.)
    os.symlink(outside, ws / "innocent.txt")  # a link in the workspace to a file outside it
    os.symlink(tmp_path, ws / "up")  # a folder link out of it
    for path in (str(outside), "../secret.txt", "innocent.txt", "up/secret.txt", "/etc/hostname"):
        res = call(ctx, path=path)
        assert "sent" not in res and "workspace" in res["error"], (path, res)
    assert "not found" in call(ctx, path="missing.csv")["error"]
    assert "directory" in call(ctx, path=".")["error"] or "workspace" in call(ctx, path=".")["error"]
    assert not out.exists() or not list(out.iterdir())


def test_a_link_inside_the_workspace_is_followed_to_its_file(tmp_path: Path) -> None:
    ctx, ws, _out = setup(tmp_path)
    (ws / "report.csv").write_text("a,b\n1,2\n")
    os.symlink(ws / "report.csv", ws / "latest.csv")
    res = call(ctx, path="latest.csv")
    assert res["sent"] is True and res["path"] == str(ws / "report.csv") and res["mime"] == "text/plain"


def test_size_cap_and_empty_files(tmp_path: Path) -> None:
    ctx, ws, _out = setup(tmp_path, max_bytes=1000)
    (ws / "big.bin").write_bytes(b"x" * 1001)
    assert "at most" in call(ctx, path="big.bin")["error"] and "media.max_send_mb" in call(ctx, path="big.bin")["error"]
    (ws / "empty.txt").write_bytes(b"")
    assert "empty" in call(ctx, path="empty.txt")["error"]


def test_without_a_chat_nothing_can_be_sent(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("x")
    ctx = ToolContext("s", str(ws), threading.Event(), ToolsConfig(terminal=TerminalConfig()))
    assert "cannot be sent" in call(ctx, path="a.txt")["error"]


def test_the_stored_steps_say_which_files_a_turn_sends(tmp_path: Path) -> None:
    ctx, ws, _out = setup(tmp_path)
    (ws / "a.csv").write_text("1,2\n")
    result = registry.dispatch("send_file", {"path": "a.csv", "caption": "numbers"}, ctx)
    refused = registry.dispatch("send_file", {"path": "/etc/passwd"}, ctx)
    messages = [
        {"role": "user", "content": "send it"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "send_file", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "send_file", "arguments": "{}"}},
            {"id": "c3", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": result},
        {"role": "tool", "tool_call_id": "c2", "content": refused},
        {"role": "tool", "tool_call_id": "c3", "content": json.dumps({"sent": True, "copy": "/etc/shadow"})},
    ]
    [att] = files_sent(messages)
    assert att.filename == "a.csv" and att.caption == "numbers" and att.kind == "document"
