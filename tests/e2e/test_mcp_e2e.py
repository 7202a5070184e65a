"""MCP servers through the real ``herald run`` process, against real MCP servers on the same SDK
(tests/fakes/mcp_server.py): stdio in the sandbox, streamable HTTP under the address rules; the approval gate;
servers that crash, hang or die leaving the daemon answering; SIGKILL of the daemon leaving no server behind;
``/mcp reload`` beside a running turn."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import API_KEY, Herald, free_port
from tests.e2e.test_approvals_e2e import press, prompt_of
from tests.mcp.servers import SCRIPT, stdio_server
from tests.support.polling import wait_until_sync

pytestmark = pytest.mark.e2e


def call(tool: str, args: dict[str, Any]) -> str:
    return f"[tool={tool}:{json.dumps(args)}]"


def result(msgs: list[dict[str, Any]]) -> Any:
    for m in msgs:
        if m["role"] == "assistant" and m["text"].startswith("tool said: "):
            return json.loads(m["text"][len("tool said: "):])
    return None


def ask(herald: Herald, chat: str, tool: str, args: dict[str, Any], timeout: float = 20.0) -> dict[str, Any]:
    herald.post(call(tool, args), chat_id=chat)
    return result(herald.wait_for(chat, result, timeout))


def calls_log(herald: Herald) -> list[dict[str, Any]]:
    path = herald.home / "workspace" / "calls.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def readyz(herald: Herald) -> tuple[int, dict[str, Any]]:
    resp = herald.get("/readyz", auth=False)
    return resp.status, resp.body


def mcp_up(herald: Herald, name: str, timeout: float = 30.0) -> None:
    """Wait until /mcp says the server is up (its tools are then offered to new turns)."""
    chat = f"mcp-{name}-{os.urandom(3).hex()}"
    herald.post("/mcp", chat_id=chat)

    def up() -> bool:
        texts = [m["text"] for m in herald.messages(chat) if m["role"] == "assistant"]
        if any(f"• {name} " in t and ": up" in t.split(f"• {name} ", 1)[1].split("\n", 1)[0] for t in texts):
            return True
        if texts:  # asked too early: ask again
            herald.post("/mcp", chat_id=chat)
        return False

    wait_until_sync(up, timeout, what=f"MCP server {name} up", interval=0.3)


@pytest.fixture
def mcp_herald(make_herald: Callable[..., Herald]) -> Callable[..., Herald]:
    def make(servers: dict[str, Any], **more: Any) -> Herald:
        return make_herald({"mcp": {"servers": servers}, **more})

    return make


def test_read_only_runs_write_asks_and_bad_arguments_never_arrive(mcp_herald: Callable[..., Herald]) -> None:
    herald = mcp_herald({"fake": stdio_server()})
    mcp_up(herald, "fake")

    # Read-only (readOnlyHint): no prompt, it runs; the call is in the audit trail all the same.
    out = ask(herald, "ro", "mcp_fake_echo", {"text": "hello"})
    assert out["content"] == "echo: hello" and out["server"] == "fake"
    assert all(not m["buttons"] for m in herald.messages("ro"))

    # Arguments that do not match the schema: answered with the error, never sent, never asked about.
    out = ask(herald, "bad", "mcp_fake_write", {"name": 5})
    assert "do not match the tool's schema" in out["error"] and "name" in out["error"]
    assert all(not m["buttons"] for m in herald.messages("bad"))
    assert calls_log(herald) == []

    # A write: the same prompt as a dangerous command (server, tool, every argument); deny keeps it from running.
    herald.post(call("mcp_fake_write", {"name": "first", "count": 2}), chat_id="w")
    prompt = prompt_of(herald.wait_for("w", prompt_of))
    assert "server: fake" in prompt["text"] and "tool: write" in prompt["text"] and '"count": 2' in prompt["text"]
    deny = next(b["id"] for b in prompt["buttons"] if b["label"] == "Deny")
    assert press(herald, "w", deny, "tester")["notice"] == "Denied."
    assert result(herald.wait_for("w", result))["status"] == "denied"
    assert calls_log(herald) == []

    # Approve once: it runs, once; the same call asks again.
    herald.post(call("mcp_fake_write", {"name": "second"}), chat_id="w2")
    prompt = prompt_of(herald.wait_for("w2", prompt_of))
    once = next(b["id"] for b in prompt["buttons"] if b["label"] == "Approve once")
    assert press(herald, "w2", once, "tester")["notice"] == "Approved once."
    out = result(herald.wait_for("w2", result))
    assert out["content"] == "wrote second x1" and "Approved once" in out["approval"]
    assert calls_log(herald) == [{"tool": "write", "name": "second", "count": 1}]
    herald.post(call("mcp_fake_write", {"name": "second"}), chat_id="w3")
    prompt = prompt_of(herald.wait_for("w3", prompt_of))
    press(herald, "w3", next(b["id"] for b in prompt["buttons"] if b["label"] == "Deny"), "tester")
    herald.wait_for("w3", result)
    assert len(calls_log(herald)) == 1

    # The audit log: every call, asked or not.
    events = [e for e in herald.log_events() if e.get("event") == "mcp_call"]
    outcomes = [(e["tool"], e["outcome"]) for e in events]
    assert ("echo", "ok") in outcomes and ("write", "invalid") in outcomes and ("write", "denied") in outcomes
    assert ("write", "ok") in outcomes
    audit = subprocess.run([str(Path(sys.executable).with_name("herald")), "approvals", "list"], env=herald.env,
                           capture_output=True, text=True, timeout=30)
    assert audit.returncode == 0 and "tool: echo" in audit.stdout and "tool: write" in audit.stdout


def test_the_server_sees_the_sandbox_not_the_daemon(make_herald: Callable[..., Herald], tmp_path: Path) -> None:
    home = tmp_path / "snooped"
    hidden = [home / "web_token", home / "config.yaml", home / "state.db", Path.home() / ".bashrc"]
    args = [a for p in hidden for a in ("--snoop", str(p))]
    herald = make_herald({"mcp": {"servers": {"fake": stdio_server(*args, "--marker", API_KEY)}}}, home=home)
    mcp_up(herald, "fake")
    seen = json.loads(ask(herald, "snoop", "mcp_fake_snoop", {})["content"])
    # Only what its entry names (nothing here), PATH, locale and HOME = the workspace: not the daemon's environment.
    assert "TEST_KEY" not in seen["env"] and not any(k.startswith("HERALD") for k in seen["env"])
    assert seen["env"]["HOME"] == os.path.realpath(home / "workspace")
    assert seen["marked"] == []  # no process it can see has the daemon's environment (the model's key)
    for path in map(str, hidden):
        assert seen["read"][path].startswith("ERROR") or seen["read"][path] == "", (path, seen["read"][path])
    assert (home / "web_token").exists() and herald.token not in json.dumps(seen)


def faults_of(herald: Herald) -> int:
    return readyz(herald)[1].get("recent_faults", {}).get("mcp_server_down", 0)


def answers(herald: Herald, chat: str) -> None:
    herald.post(f"still there? {chat}", chat_id=chat)
    herald.wait_for_replies(chat, 1, match=lambda t: t == f"echo: still there? {chat}")


def test_servers_that_crash_hang_or_die_leave_the_daemon_answering(mcp_herald: Callable[..., Herald]) -> None:
    herald = mcp_herald({"fake": stdio_server(timeout_seconds=3), "broken": stdio_server("--crash-at-start")})
    mcp_up(herald, "fake")

    # Crashes at start: down in /readyz's conditions, marked degraded; the daemon stays ready and answers.
    status, body = wait_until_sync(lambda: (r := readyz(herald)) and "mcp:broken" in r[1]["conditions"] and r,
                                   20, what="mcp:broken in /readyz")
    assert status == 200 and body["ready"] is True
    assert body["conditions"]["mcp:broken"]["fault"] == "mcp_server_down"
    assert body["conditions"]["mcp:broken"]["degraded"] is True
    answers(herald, "after-crash")
    herald.post("/mcp", chat_id="list")
    listing = herald.wait_for_replies("list", 1)[0]
    assert "broken (stdio): down" in listing and "fake (stdio): up" in listing and "echo" in listing
    # Its stderr went to the log.
    assert any(e.get("event") == "mcp_stderr" and "crashing at start" in e.get("line", "")
               for e in herald.log_events())

    # Dies mid-call: the model is told, the server is marked down and comes back; the daemon answers.
    before = faults_of(herald)
    out = ask(herald, "die", "mcp_fake_die", {})
    assert "closed the connection" in out["error"]
    wait_until_sync(lambda: faults_of(herald) > before, 20, what="the dead server in /readyz's recent faults")
    answers(herald, "after-death")
    mcp_up(herald, "fake")

    # Hangs on a call (the whole process stopped): the call ends at timeout_seconds with a clear error, the probe
    # finds it hung, it is marked down and restarted.
    before = faults_of(herald)
    out = ask(herald, "hang", "mcp_fake_freeze", {}, timeout=40)
    assert "did not answer within 3 s" in out["error"]
    answers(herald, "after-hang")
    wait_until_sync(lambda: faults_of(herald) > before, 40, what="the hung server in /readyz's recent faults")
    mcp_up(herald, "fake", timeout=40)
    assert ask(herald, "back", "mcp_fake_echo", {"text": "back"})["content"] == "echo: back"


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def test_sigkill_of_the_daemon_leaves_no_server_process(mcp_herald: Callable[..., Herald]) -> None:
    marker = f"mcp-orphan-{os.urandom(4).hex()}"
    herald = mcp_herald({"boxed": stdio_server("--name", f"{marker}-boxed"),
                         "loose": stdio_server("--name", f"{marker}-loose", sandbox="none")})
    mcp_up(herald, "boxed")
    mcp_up(herald, "loose")
    assert len(_processes_with(marker)) >= 2
    assert herald.proc is not None
    herald.proc.send_signal(signal.SIGKILL)
    herald.proc.wait()
    wait_until_sync(lambda: not _processes_with(marker), 15,
                    what=lambda: f"no server process left (still: {_processes_with(marker)})")


def test_reload_adds_a_server_without_dropping_a_running_turn(mcp_herald: Callable[..., Herald]) -> None:
    herald = mcp_herald({"fake": stdio_server()})
    mcp_up(herald, "fake")
    herald.post(call("mcp_fake_slow", {"seconds": 4}), chat_id="long")
    wait_until_sync(lambda: any(c["tool"] == "slow" for c in calls_log(herald)), 20, what="the slow call running")

    herald.config["mcp"]["servers"]["second"] = stdio_server("--name", "second")
    herald.write_config()
    herald.post("/mcp reload", chat_id="admin")
    assert herald.wait_for_replies("admin", 1, timeout=20)[0] == "Reloaded mcp.servers: added second."
    assert result(herald.wait_for("long", result, timeout=30))["content"] == "slept"
    mcp_up(herald, "second")
    assert ask(herald, "s2", "mcp_second_echo", {"text": "new"})["content"] == "echo: new"
    assert ask(herald, "s1", "mcp_fake_echo", {"text": "old"})["content"] == "echo: old"


def test_http_server_under_the_address_rules(mcp_herald: Callable[..., Herald], tmp_path: Path) -> None:
    port = free_port()
    server = subprocess.Popen([sys.executable, str(SCRIPT), "--http", str(port), "--record", str(tmp_path / "h.log")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_sync(lambda: _listening(port), 20, what="the HTTP MCP server listening")
        url = f"http://127.0.0.1:{port}/mcp"
        herald = mcp_herald({"local": {"url": url, "allow_private": True, "headers_env": {"X-Test": "TEST_KEY"}},
                             "blocked": {"url": url}})
        mcp_up(herald, "local")
        assert ask(herald, "h", "mcp_local_echo", {"text": "over http"})["content"] == "echo: over http"
        # Without allow_private a loopback address is refused before any connection: down, and saying why.
        wait_until_sync(lambda: "mcp:blocked" in readyz(herald)[1]["conditions"], 20, what="mcp:blocked down")
        herald.post("/mcp", chat_id="list")
        listing = herald.wait_for_replies("list", 1)[0]
        assert "blocked (streamable http): down" in listing and "not reachable under the address rules" in listing
    finally:
        server.terminate()
        server.wait(10)


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
