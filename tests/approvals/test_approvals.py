"""Approvals end to end in-process: the real runner, agent core and terminal tool, the QA channel, the fake model."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from gateway.platforms.base import Source
from gateway.storage.tables import approval_allowlist, approvals
from tests.fakes.llm import Reply, ToolCall, ToolCalls
from tests.support.polling import wait_until
from tests.support.qa_channel import UntrustedQAAdapter
from tools.dangerous import classify

LABELS = ["Approve once", "Approve for this session", "Always approve", "Deny"]


def ask(command: str) -> str:
    """A user message that makes the fake model call the terminal tool with ``command``."""
    return f"[tool=terminal:{json.dumps({'command': command})}]"


def prompts(qa: Any, chat_id: str | None = None) -> list[Any]:
    return [s for s in qa.sent if s.message.buttons and (chat_id is None or s.chat_id == chat_id)]


def prompt_id(sent: Any) -> str:
    return sent.message.buttons[0].id.split(":")[1]


async def wait_prompts(qa: Any, n: int, chat_id: str | None = None, timeout: float = 10.0) -> list[Any]:
    await qa.wait_for(lambda _t: len(prompts(qa, chat_id)) >= n, timeout=timeout)
    return prompts(qa, chat_id)


def tool_results(texts: list[str]) -> list[dict[str, Any]]:
    return [json.loads(t[len("tool said: "):]) for t in texts if t.startswith("tool said: ")]


async def wait_tool_result(qa: Any, n: int = 1, chat_id: str | None = None, timeout: float = 10.0) -> dict[str, Any]:
    texts = await qa.wait_for(lambda t: len(tool_results(t)) >= n, chat_id=chat_id, timeout=timeout)
    return tool_results(texts)[n - 1]


async def rows(runner: Any, table: Any = approvals) -> list[dict[str, Any]]:
    return await runner.store.run_read(lambda c: [dict(r._mapping) for r in c.execute(select(table))])


async def row(runner: Any, approval_id: str) -> dict[str, Any]:
    return next(r for r in await rows(runner) if r["id"] == approval_id)


def edits_for(qa: Any, message_id: str) -> list[str]:
    return [text or "" for _chat, mid, text in qa.edits if mid == message_id]


def victim_dir(tmp_path: Path, name: str = "victim") -> Path:
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    (d / "precious.txt").write_text("keep me")
    return d


def base(tmp_path: Path, **approvals_cfg: Any) -> dict[str, Any]:
    return {"tools": {"terminal": {"cwd": str(tmp_path)}}, "approvals": approvals_cfg,
            "gateway": {"drain_seconds": 0.2}}


# ---- the prompt and the four answers ----------------------------------------------------------------


async def test_approve_once_runs_the_command_and_says_who(make_runner, tmp_path):
    runner, qa = await make_runner(base(tmp_path))
    victim = victim_dir(tmp_path)
    await qa.say(ask(f"rm -rf {victim}"))
    (prompt,) = await wait_prompts(qa, 1)
    assert [b.label for b in prompt.message.buttons] == LABELS
    assert all(len(b.id.encode()) <= 64 for b in prompt.message.buttons)  # Telegram callback_data limit
    assert f"rm -rf {victim}" in prompt.text and "rm -r/-f" in prompt.text
    await asyncio.sleep(0.2)
    assert victim.exists(), "ran before anyone approved"
    aid = prompt_id(prompt)
    assert (await row(runner, aid))["status"] == "pending"

    assert await qa.click(f"ap:{aid}:o") == "Approved once."
    result = await wait_tool_result(qa)
    assert result["status"] == "ran" and result["exit_code"] == 0
    assert "Approved once by u1" in result["approval"]
    assert not victim.exists()
    assert any("Approved once by u1" in t for t in edits_for(qa, prompt.message_id))
    r = await row(runner, aid)
    assert (r["status"], r["scope"], r["decided_by"], r["decided_via"]) == ("approved", "once", "u1", "button")
    # A second press on the answered prompt changes nothing.
    assert "already answered" in await qa.click(f"ap:{aid}:d")


async def test_deny_does_not_run_and_the_model_is_told(make_runner, tmp_path):
    runner, qa = await make_runner(base(tmp_path))
    victim = victim_dir(tmp_path)
    await qa.say(ask(f"rm -rf {victim}"))
    (prompt,) = await wait_prompts(qa, 1)
    assert await qa.click(f"ap:{prompt_id(prompt)}:d") == "Denied."
    result = await wait_tool_result(qa)
    assert result["status"] == "denied" and "denied" in result["error"] and "Not run" in result["error"]
    assert victim.exists()
    assert any("Denied by u1" in t for t in edits_for(qa, prompt.message_id))
    assert (await row(runner, prompt_id(prompt)))["status"] == "denied"


async def test_timeout_denies_and_edits_the_prompt(make_runner, tmp_path):
    runner, qa = await make_runner(base(tmp_path, timeout_seconds=0.5))
    victim = victim_dir(tmp_path)
    await qa.say(ask(f"rm -rf {victim}"))
    (prompt,) = await wait_prompts(qa, 1)
    result = await wait_tool_result(qa)
    assert result["status"] == "expired" and "expired" in result["error"]
    assert victim.exists()
    await wait_until(lambda: any("expired — denied" in t.lower() for t in edits_for(qa, prompt.message_id)))
    r = await row(runner, prompt_id(prompt))
    assert (r["status"], r["decided_via"]) == ("expired", "timeout")
    assert "already answered: expired" in await qa.click(f"ap:{prompt_id(prompt)}:o")
    assert victim.exists()


async def test_waiting_for_approval_keeps_the_watchdog_from_killing_the_turn(make_runner, tmp_path):
    runner, qa = await make_runner({**base(tmp_path), "gateway": {"turn_timeout_seconds": 0.3, "drain_seconds": 0.2}})
    victim = victim_dir(tmp_path)
    await qa.say(ask(f"rm -rf {victim}"))
    (prompt,) = await wait_prompts(qa, 1)
    await asyncio.sleep(1.2)  # four watchdog limits: a human takes their time
    await qa.click(f"ap:{prompt_id(prompt)}:o")
    assert (await wait_tool_result(qa))["status"] == "ran"
    assert runner.counters.turns_timed_out == 0
    assert not any("I stopped this turn" in t for t in qa.texts())


async def test_non_approver_press_changes_nothing_but_a_configured_approver_may(make_runner, tmp_path):
    cfg = base(tmp_path, approvers={"qa2": ["boss"], "web": ["u1"]})
    cfg["access"] = {"allowed_users": ["qa2:u1", "qa2:mallory", "qa2:boss"]}
    runner, qa = await make_runner(cfg, adapters=[UntrustedQAAdapter])
    victim = victim_dir(tmp_path)
    await qa.say(ask(f"rm -rf {victim}"))
    (prompt,) = await wait_prompts(qa, 1)
    aid = prompt_id(prompt)
    for choice in "osad":
        notice = await qa.click(f"ap:{aid}:{choice}", user_id="mallory")
        assert "can't" in notice and "Nothing was changed" in notice
    await qa.say("/approve", user_id="mallory", chat_id="c1")
    await asyncio.sleep(0.2)
    assert (await row(runner, aid))["status"] == "pending"
    assert victim.exists() and qa.edits == [] and await rows(runner, approval_allowlist) == []
    assert aid in runner.approvals.pending

    assert await qa.click(f"ap:{aid}:d", user_id="boss") == "Denied."
    assert (await wait_tool_result(qa))["status"] == "denied"
    r = await row(runner, aid)
    assert (r["status"], r["decided_by"]) == ("denied", "boss")


async def test_a_decision_counts_only_from_the_chat_the_prompt_went_to(make_runner, tmp_path):
    cfg = base(tmp_path, approvers={"qa2": ["boss"]})
    cfg["access"] = {"allowed_users": ["qa2:u1", "qa2:boss"], "admins": ["qa2:root"]}
    runner, qa = await make_runner(cfg, adapters=[UntrustedQAAdapter])
    victim = victim_dir(tmp_path)
    await qa.say(ask(f"rm -rf {victim}"))
    (prompt,) = await wait_prompts(qa, 1)
    aid = prompt_id(prompt)
    assert len(aid) >= 16 and int(aid, 16) >= 0  # 64 bits of randomness: not guessable from another chat
    for user in ("u1", "boss", "root"):  # the requester, an approver, an admin: all in another chat
        notice = await qa.click(f"ap:{aid}:o", user_id=user, chat_id="elsewhere")
        assert "can't" in notice
    await qa.say(f"/approve {aid}", user_id="boss", chat_id="elsewhere")
    await asyncio.sleep(0.2)
    assert (await row(runner, aid))["status"] == "pending" and victim.exists()
    assert await qa.click(f"ap:{aid}:o", user_id="root") == "Approved once."  # an admin, in the prompt's chat
    assert (await wait_tool_result(qa))["status"] == "ran"


async def test_in_an_open_group_an_unlisted_requester_cannot_approve_their_own_command(make_runner, tmp_path):
    cfg = base(tmp_path)
    cfg["access"] = {"group_policy": "open", "allowed_users": ["qa2:alice"]}
    runner, qa = await make_runner(cfg, adapters=[UntrustedQAAdapter])
    victim = victim_dir(tmp_path)
    await qa.say(ask(f"rm -rf {victim}"), user_id="stranger", chat_id="g", chat_type="group")
    (prompt,) = await wait_prompts(qa, 1, chat_id="g")
    aid = prompt_id(prompt)
    assert "can't" in await qa.click(f"ap:{aid}:o", user_id="stranger", chat_id="g", chat_type="group")
    assert (await row(runner, aid))["status"] == "pending" and victim.exists()
    # Someone on the allowlist who asks in the same open group may answer their own request.
    await qa.say(ask(f"rm -rf {victim}"), user_id="alice", chat_id="g", chat_type="group")
    prompts = await wait_prompts(qa, 2, chat_id="g")
    assert await qa.click(f"ap:{prompt_id(prompts[-1])}:o", user_id="alice", chat_id="g",
                          chat_type="group") == "Approved once."


async def test_approve_for_this_session_skips_the_next_prompt_only_in_that_session(make_runner, tmp_path):
    _runner, qa = await make_runner(base(tmp_path))
    victim = victim_dir(tmp_path)
    command = f"rm -rf {victim}"
    await qa.say(ask(command), chat_id="c1")
    (prompt,) = await wait_prompts(qa, 1, "c1")
    assert await qa.click(f"ap:{prompt_id(prompt)}:s", chat_id="c1") == "Approved for this session."
    assert (await wait_tool_result(qa, 1, "c1"))["status"] == "ran"
    assert not victim.exists()

    victim_dir(tmp_path)
    await qa.say(ask(command), chat_id="c1")
    second = await wait_tool_result(qa, 2, "c1")
    assert second["status"] == "ran" and "approved for this session" in second["approval"]
    assert not victim.exists() and len(prompts(qa, "c1")) == 1

    # Another session is asked again, and a different command in the first session is too.
    victim_dir(tmp_path)
    await qa.say(ask(command), chat_id="c2")
    (other,) = await wait_prompts(qa, 1, "c2")
    await qa.click(f"ap:{prompt_id(other)}:d", chat_id="c2")
    assert (await wait_tool_result(qa, 1, "c2"))["status"] == "denied"
    assert victim.exists()
    await qa.say(ask(f"rm -rf {victim}/precious.txt"), chat_id="c1")
    await wait_prompts(qa, 2, "c1")
    await qa.say("/deny", chat_id="c1")
    await wait_tool_result(qa, 3, "c1")

    # /new starts a fresh conversation: the grant does not carry over.
    await qa.say("/new", chat_id="c1")
    await qa.wait_for(lambda t: any("fresh conversation" in x for x in t), chat_id="c1")
    await qa.say(ask(command), chat_id="c1")
    await wait_prompts(qa, 3, "c1")


async def test_always_approve_goes_to_the_database_allowlist(make_runner, tmp_path):
    runner, qa = await make_runner(base(tmp_path))
    victim = victim_dir(tmp_path)
    command = f"rm -rf {victim}"
    config_before = runner.paths.config_file.read_text() if runner.paths.config_file.exists() else None
    await qa.say(ask(command), chat_id="c1")
    (prompt,) = await wait_prompts(qa, 1, "c1")
    assert await qa.click(f"ap:{prompt_id(prompt)}:a", chat_id="c1") == "Approved always."
    assert (await wait_tool_result(qa, 1, "c1"))["status"] == "ran"
    allow = await rows(runner, approval_allowlist)
    assert len(allow) == 1 and allow[0]["command"] == command and allow[0]["added_by"] == "u1"
    # Any session now runs it without asking; config.yaml is untouched.
    victim_dir(tmp_path)
    await qa.say(ask(command), chat_id="c9")
    assert (await wait_tool_result(qa, 1, "c9"))["status"] == "ran"
    assert not victim.exists() and prompts(qa, "c9") == []
    after = runner.paths.config_file.read_text() if runner.paths.config_file.exists() else None
    assert after == config_before


async def test_config_allow_covers_only_the_simple_commands_it_matches(make_runner, tmp_path):
    _runner, qa = await make_runner(base(tmp_path, allow=["rm -rf */allowed"]))
    allowed = victim_dir(tmp_path, "allowed")
    await qa.say(ask(f"nohup rm -rf {allowed}"))  # the wrapper is peeled: this is the allowed rm
    assert (await wait_tool_result(qa))["status"] == "ran"
    assert not allowed.exists() and prompts(qa) == []
    # Every command that asks must be covered: a second one that the glob does not match still asks.
    allowed, other = victim_dir(tmp_path, "allowed"), victim_dir(tmp_path, "other")
    await qa.say(ask(f"rm -rf {allowed}; rm -rf {other}"))
    await wait_prompts(qa, 1)
    await qa.say("/deny")
    assert (await wait_tool_result(qa, 2))["status"] == "denied"
    assert allowed.exists() and other.exists()


async def test_config_allow_is_judged_in_the_workspace_the_command_runs_in(make_runner, tmp_path):
    # An unknown program asks; the glob covers it, and the redirect into the workspace never asked at all.
    _runner, qa = await make_runner(base(tmp_path, allow=["frobnicate *"]))
    await qa.say(ask("frobnicate --all > out.txt"))
    assert (await wait_tool_result(qa))["status"] == "ran"
    assert prompts(qa) == [] and (tmp_path / "out.txt").exists()


async def test_mode_off_runs_without_asking_but_never_the_hardline(make_runner, tmp_path):
    runner2, qa2 = await make_runner(base(tmp_path, mode="off"))
    victim = victim_dir(tmp_path)
    await qa2.say(ask(f"rm -rf {victim}"))
    assert (await wait_tool_result(qa2))["status"] == "ran"
    assert not victim.exists() and prompts(qa2) == []
    marker = tmp_path / "hardline-ran"
    await qa2.say(ask(f"mkfs.ext4 -n /dev/sdz; touch {marker}"))
    result = await wait_tool_result(qa2, 2)
    assert result["status"] == "forbidden" and "formats a disk" in result["error"]
    assert not marker.exists()
    audit = await wait_until(lambda: _audit(runner2, 2))
    assert {("approved", "off"), ("forbidden", None)} == audit


# ---- several approvals, races, /stop, restart ----------------------------------------------------------


async def test_two_approvals_in_one_turn_are_asked_at_once_and_answered_in_any_order(make_runner, fake_llm,
                                                                                      tmp_path):
    _runner, qa = await make_runner(base(tmp_path))
    a, b = victim_dir(tmp_path, "a"), victim_dir(tmp_path, "b")
    fake_llm.script(ToolCalls([ToolCall("terminal", {"command": f"rm -rf {a}"}),
                               ToolCall("terminal", {"command": f"rm -rf {b}"})]), Reply("done"))
    await qa.say("clean up")
    shown = await wait_prompts(qa, 2)  # both prompts are up before anyone answered
    first, second = (next(p for p in shown if str(d) in p.text) for d in (a, b))
    assert prompt_id(first) != prompt_id(second)
    assert f"/approve {prompt_id(second)}" in second.text  # with two waiting, the hint names the id
    await qa.click(f"ap:{prompt_id(second)}:o")  # the later one first
    await qa.click(f"ap:{prompt_id(first)}:d")
    await qa.wait_for(lambda t: "done" in t)
    assert a.exists() and not b.exists()
    tool_msgs = [m for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert [json.loads(m["content"])["status"] for m in tool_msgs] == ["denied", "ran"]


async def test_approve_for_this_session_covers_the_same_command_waiting_in_the_batch(make_runner, fake_llm,
                                                                                     tmp_path):
    runner, qa = await make_runner(base(tmp_path))
    a = victim_dir(tmp_path, "a")
    command = f"rm -rf {a}"
    fake_llm.script(ToolCalls([ToolCall("terminal", {"command": command}),
                               ToolCall("terminal", {"command": command})]), Reply("done"))
    await qa.say("clean up twice")
    shown = await wait_prompts(qa, 2)
    await qa.click(f"ap:{prompt_id(shown[1])}:s")
    await qa.wait_for(lambda t: "done" in t)
    tool_msgs = [m for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert [json.loads(m["content"])["status"] for m in tool_msgs] == ["ran", "ran"]
    assert not a.exists() and not runner.approvals.pending
    decided = {r["id"]: r for r in await rows(runner)}
    assert {(r["status"], r["scope"]) for r in decided.values()} == {("approved", "session")}
    assert any("Approved for this session" in t for t in edits_for(qa, shown[0].message_id))


async def test_prompts_of_a_batch_the_turn_never_reached_are_withdrawn(make_runner, fake_llm, tmp_path):
    """An interrupted turn leaves no prompt waiting to expire, for the call it was on or those after it."""
    runner, qa = await make_runner({**base(tmp_path), "gateway": {"busy_mode": "interrupt", "drain_seconds": 0.2}})
    a, b = victim_dir(tmp_path, "a"), victim_dir(tmp_path, "b")
    fake_llm.script(ToolCalls([ToolCall("terminal", {"command": f"rm -rf {a}"}),
                               ToolCall("terminal", {"command": f"rm -rf {b}"})]), Reply("fresh"))
    await qa.say("clean up")
    shown = await wait_prompts(qa, 2)
    await qa.say("never mind")  # busy_mode interrupt: abandons the waiting turn
    await qa.wait_for(lambda t: "fresh" in t)
    for prompt in shown:
        r = await wait_until(lambda p=prompt: _decided(runner, prompt_id(p)))
        assert (r["status"], r["decided_via"]) == ("denied", "interrupted")
        # The prompt is edited after the decision is stored: under load the edit can come a moment later.
        await wait_until(lambda p=prompt: any("turn ended" in t for t in edits_for(qa, p.message_id)),
                         what="the prompt edited")
    assert a.exists() and b.exists() and not runner.approvals.pending


def _ctx(interrupt: threading.Event | None = None, **extras: Any) -> Any:
    beats: list[str] = []
    return SimpleNamespace(extras=extras, interrupt=interrupt or threading.Event(), heartbeat=beats.append,
                           beats=beats)


async def test_concurrent_approvals_answered_out_of_order(make_runner, tmp_path):
    """Two requests waiting at once (parallel tool calls of one turn) are answered in reverse order,
    one by button, one by the /approve and /deny text fallback."""
    runner, qa = await make_runner(base(tmp_path))
    broker = runner.approvals
    source = Source("qa", "c1", "u1")
    loop = asyncio.get_running_loop()
    cmd_a, cmd_b, cmd_c = "rm -rf /tmp/herald-a", "git reset --hard", "sed -i s/x/y/ f"
    hook = broker.hook_for("qa:dm:c1", source, "t1")
    futs = [loop.run_in_executor(None, hook, c, classify(c), _ctx()) for c in (cmd_a, cmd_b, cmd_c)]
    shown = await wait_prompts(qa, 3)
    ids = {next(c for c in (cmd_a, cmd_b, cmd_c) if c in p.text): prompt_id(p) for p in shown}
    assert len(set(ids.values())) == 3
    assert any(f"/approve {ids[cmd_c]}" in p.text for p in shown)  # with several waiting, the hint names the id

    await qa.click(f"ap:{ids[cmd_c]}:o")
    await qa.say(f"/deny {ids[cmd_b]}")
    await qa.wait_for(lambda t: any(x.startswith("Denied.") for x in t))
    await qa.say("/approve session")  # the oldest left: cmd_a
    await qa.wait_for(lambda t: any(x.startswith("Approved for this session.") for x in t))
    d_a, d_b, d_c = await asyncio.gather(*futs)
    assert (d_a.outcome, d_b.outcome, d_c.outcome) == ("approved", "denied", "approved")
    assert "for this session" in d_a.message
    by_id = {r["id"]: r for r in await rows(runner)}
    assert by_id[ids[cmd_a]]["decided_via"] == "command" and by_id[ids[cmd_c]]["decided_via"] == "button"
    await qa.say("/approve")
    await qa.wait_for(lambda t: "Nothing is waiting for approval here." in t)


@pytest.mark.slow
async def test_a_decision_racing_the_timeout_has_exactly_one_outcome(make_runner, tmp_path):
    timeout = 0.3
    runner, qa = await make_runner(base(tmp_path, timeout_seconds=timeout))
    broker = runner.approvals
    source = Source("qa", "c1", "u1")
    loop = asyncio.get_running_loop()
    outcomes = set()
    for i, offset in enumerate((-0.1, -0.03, -0.01, 0.0, 0.01, 0.02, 0.03, 0.05, 0.1)):
        command = f"rm -rf /tmp/herald-race-{i}"
        start = time.monotonic()
        fut = loop.run_in_executor(None, broker.hook_for("qa:dm:c1", source), command, classify(command), _ctx())
        # The timeout counts from the request: on a busy machine it can pass while the prompt is still being
        # stored and sent, and then no prompt is shown at all (nothing to race: the outcome is "expired").
        await wait_until(lambda c=command, f=fut: f.done() or any(c in p.text for p in prompts(qa)),
                         what=f"the prompt for {command!r}, or its outcome")
        shown = [p for p in prompts(qa) if command in p.text]
        if not shown:
            assert (await fut).outcome == "expired"
            outcomes.add("expired")
            continue
        (prompt,) = shown
        await asyncio.sleep(max(0.0, timeout + offset - (time.monotonic() - start)))
        notice = await qa.click(f"ap:{prompt_id(prompt)}:o")
        decision = await fut
        r = await wait_until(lambda pid=prompt_id(prompt): _decided(runner, pid))
        assert r["status"] == decision.outcome, (offset, notice, decision, r)
        if decision.outcome == "approved":
            assert notice == "Approved once." and r["decided_by"] == "u1"
        else:
            assert decision.outcome == "expired" and "already answered: expired" in notice
            assert r["decided_by"] is None
        outcomes.add(decision.outcome)
    assert not broker.pending
    assert outcomes  # both branches are valid; which one each offset hits depends on timing


async def _decided(runner: Any, approval_id: str) -> dict[str, Any] | None:
    r = await row(runner, approval_id)
    return r if r["status"] != "pending" else None


async def test_stop_while_waiting_denies_and_frees_the_session(make_runner, tmp_path):
    runner, qa = await make_runner(base(tmp_path))
    victim = victim_dir(tmp_path)
    await qa.say(ask(f"rm -rf {victim}"))
    (prompt,) = await wait_prompts(qa, 1)
    await qa.say("/stop")
    await qa.wait_for(lambda t: any(x.startswith("⏹ Stopped") for x in t))
    r = await wait_until(lambda: _decided(runner, prompt_id(prompt)))
    assert (r["status"], r["decided_via"]) == ("denied", "stop")
    assert any("/stop" in t for t in edits_for(qa, prompt.message_id))
    assert "already answered: denied" in await qa.click(f"ap:{prompt_id(prompt)}:o")
    await qa.say("hello")
    await qa.wait_for(lambda t: "echo: hello" in t)
    await asyncio.sleep(0.2)
    assert victim.exists() and not runner.approvals.pending


async def test_restart_while_waiting_denies_and_tells_the_user(make_runner, tmp_path):
    runner, qa = await make_runner(base(tmp_path))
    victim = victim_dir(tmp_path)
    await qa.say(ask(f"rm -rf {victim}"))
    (prompt,) = await wait_prompts(qa, 1)
    aid = prompt_id(prompt)
    await runner.shutdown()
    assert victim.exists()

    runner2, qa2 = await make_runner(base(tmp_path))
    await qa2.wait_for(lambda t: any("Herald restarted while this command was waiting for approval" in x
                                     for x in t))
    r = await row(runner2, aid)
    assert (r["status"], r["decided_via"]) == ("denied", "restart")
    assert any("restarted" in t for t in edits_for(qa2, prompt.message_id))
    assert "already answered: denied" in await qa2.click(f"ap:{aid}:o")
    # The interrupted turn resumes after its last stored step: the model learns the command did not run
    # (and may ask again); nothing ran meanwhile, and the old prompt is not shown again.
    result = await wait_tool_result(qa2)
    assert "not run" in result["error"] and "restart" in result["error"]
    assert victim.exists() and prompts(qa2) == []


async def test_cron_turns_follow_cron_mode(make_runner, tmp_path):
    runner, _qa = await make_runner(base(tmp_path))
    source = Source("qa", "cron", "cron")
    command = "rm -rf /tmp/herald-cron"
    deny = await asyncio.to_thread(runner.approvals.hook_for("cron:job1", source), command, classify(command),
                                   _ctx(cron=True))
    assert deny.outcome == "denied" and "cron" in deny.message
    runner.cfg.approvals.cron_mode = "allow"
    allow = await asyncio.to_thread(runner.approvals.hook_for("cron:job1", source), command, classify(command),
                                    _ctx(cron=True))
    assert allow.approved
    assert await wait_until(lambda: _audit(runner, 2)) == {("denied", None), ("approved", "cron")}


async def _audit(runner: Any, n: int) -> set[tuple[str, str | None]] | None:
    found = await rows(runner)
    return {(r["status"], r["scope"]) for r in found} if len(found) >= n else None


async def test_herald_approvals_list_shows_the_audit_beside_a_running_daemon(make_runner, tmp_path, home):
    from gateway.cli import app

    _runner, qa = await make_runner(base(tmp_path))
    victim = victim_dir(tmp_path)
    await qa.say(ask(f"rm -rf {victim}"))
    (prompt,) = await wait_prompts(qa, 1)
    await qa.click(f"ap:{prompt_id(prompt)}:a")
    await wait_tool_result(qa)
    out = await asyncio.to_thread(CliRunner().invoke, app, ["approvals", "list"])
    assert out.exit_code == 0, out.output
    assert prompt_id(prompt) in out.output and "approved (always) by u1 via button" in out.output
    assert "rm -rf /" in out.output and "why: rm -r/-f" in out.output
    out = await asyncio.to_thread(CliRunner().invoke, app, ["approvals", "list", "--json"])
    listed = json.loads(out.output.splitlines()[0])
    assert (listed["status"], listed["command"]) == ("approved", f"rm -rf {victim}")
    out = await asyncio.to_thread(CliRunner().invoke, app, ["approvals", "allowlist"])
    assert f"rm -rf {victim}" in out.output
    entry = out.output.split()[0]
    # Revoked beside the running daemon: the same command asks again.
    out = await asyncio.to_thread(CliRunner().invoke, app, ["approvals", "revoke", "#999"])
    assert out.exit_code == 1
    out = await asyncio.to_thread(CliRunner().invoke, app, ["approvals", "revoke", entry])
    assert out.exit_code == 0 and "Revoked 1" in out.output, out.output
    victim = victim_dir(tmp_path)
    await qa.say(ask(f"rm -rf {victim}"), chat_id="c2")
    await wait_prompts(qa, 1, "c2")
    assert victim.exists()
    out = await asyncio.to_thread(CliRunner().invoke, app, ["approvals", "allowlist"])
    assert "No commands are always approved." in out.output
