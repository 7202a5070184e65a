"""Approvals through the real `herald run` process: the web chat's buttons endpoint, the audit CLI beside it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import HERALD_BIN, REPO, Herald
from tests.support.polling import wait_until_sync

pytestmark = pytest.mark.e2e


def ask(command: str) -> str:
    return f"[tool=terminal:{json.dumps({'command': command})}]"


def prompt_of(msgs: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((m for m in msgs if m["role"] == "assistant" and m["buttons"]), None)


def tool_result(msgs: list[dict[str, Any]]) -> dict[str, Any] | None:
    for m in msgs:
        if m["role"] == "assistant" and m["text"].startswith("tool said: "):
            return json.loads(m["text"][len("tool said: "):])
    return None


def press(herald: Herald, chat: str, button_id: str, user_id: str) -> dict[str, Any]:
    """Press as the web page does: answered at once (202), the notice follows on the chat's event stream."""
    stream = herald.events(chat)
    try:
        resp = herald.request("POST", f"/api/v1/chats/{chat}/buttons/{button_id}", {"user_id": user_id})
        assert resp.status == 202, (resp.status, resp.body)
        wait_until_sync(lambda: any(e == "notice" for e, _ in stream.frames), what="the presser's notice")
        return {"notice": next(d["text"] for e, d in stream.frames if e == "notice")}
    finally:
        stream.close()


def victim(herald: Herald, name: str) -> Path:
    d = herald.home / "workspace" / name  # the only place the agent's commands may change
    d.mkdir()
    (d / "precious.txt").write_text("keep me")
    return d


def test_approve_once_through_the_web_buttons(herald: Herald) -> None:
    target = victim(herald, "victim")
    herald.post(ask(f"rm -rf {target}"), chat_id="ap")
    prompt = prompt_of(herald.wait_for("ap", prompt_of))
    assert [b["label"] for b in prompt["buttons"]] == [
        "Approve once", "Approve for this session", "Always approve", "Deny"]
    assert target.exists()
    once = next(b["id"] for b in prompt["buttons"] if b["label"] == "Approve once")

    # A press from another chat (whoever it claims to be): told so, nothing changes.
    refused = press(herald, "elsewhere", once, "tester")
    assert "can't" in refused["notice"]
    assert prompt_of(herald.messages("ap"))["buttons"] and target.exists()

    assert press(herald, "ap", once, "tester")["notice"] == "Approved once."
    result = tool_result(herald.wait_for("ap", tool_result))
    assert result["status"] == "ran" and result["exit_code"] == 0
    assert not target.exists()
    edited = next(m for m in herald.messages("ap") if m["id"] == prompt["id"])
    assert "Approved once by tester" in edited["text"] and edited["buttons"] == []

    # The audit trail, read by the CLI beside the running daemon, and in the structured log.
    out = subprocess.run([str(HERALD_BIN), "approvals", "list"], cwd=REPO, env=herald.env, capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    approval_id = once.split(":")[1]
    assert approval_id in out.stdout and "approved (once) by tester via button" in out.stdout
    events = [e for e in herald.log_events() if e.get("approval_id") == approval_id]
    assert {e["event"] for e in events} >= {"approval_requested", "approval_decided"}


def test_deny_and_timeout_do_not_run(make_herald: Callable[..., Herald]) -> None:
    herald = make_herald({"approvals": {"timeout_seconds": 1}})
    target = victim(herald, "victim")
    herald.post(ask(f"rm -rf {target}"), chat_id="deny")
    prompt = prompt_of(herald.wait_for("deny", prompt_of))
    deny = next(b["id"] for b in prompt["buttons"] if b["label"] == "Deny")
    assert press(herald, "deny", deny, "tester")["notice"] == "Denied."
    assert tool_result(herald.wait_for("deny", tool_result))["status"] == "denied"

    herald.post(ask(f"rm -rf {target}"), chat_id="slow")
    prompt = prompt_of(herald.wait_for("slow", prompt_of))
    assert tool_result(herald.wait_for("slow", tool_result))["status"] == "expired"
    edited = next(m for m in herald.wait_for("slow", lambda ms: all(not m["buttons"] for m in ms))
                  if m["id"] == prompt["id"])
    assert "expired — denied" in edited["text"].lower()
    assert target.exists() and (target / "precious.txt").read_text() == "keep me"
