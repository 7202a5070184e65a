"""Durability of the turn machinery: work owned by another instance is left to it, work of a gone one is
taken over once, turns resume after their last stored step, and turns waiting for a person don't starve
the others."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from gateway.cluster.instance import process_gone, process_start
from gateway.platforms.base import InboundMessage, Source
from tests.approvals.test_approvals import ask, prompt_id, prompts, wait_prompts, wait_until
from tests.fakes.llm import Reply, ToolCall


def inbound(text: str, mid: str, chat: str = "c1") -> dict[str, Any]:
    return InboundMessage(Source("qa", chat, "u1"), text, mid, received_at=1.0).to_dict()


async def _status(runner: Any, row: int, status: str) -> bool:
    found = await runner.store.inbox.get(row)
    return found is not None and found["status"] == status


async def test_fifty_pending_approvals_do_not_hold_up_another_chat(make_runner, tmp_path: Path):
    """Turns waiting for a person give their compute slot back: with 4 slots and 50 turns waiting for
    approval, a 51st chat is still answered — while all 50 are still waiting."""
    runner, qa = await make_runner({"gateway": {"max_concurrent_turns": 4},
                                    "tools": {"terminal": {"cwd": str(tmp_path)}}})
    for i in range(50):
        await qa.say(ask(f"rm -rf {tmp_path}/victim-{i}"), chat_id=f"waiting-{i}")
    await wait_prompts(qa, 50, timeout=30)
    await qa.say("are you there?", chat_id="other")
    await qa.wait_for(lambda t: "echo: are you there?" in t, chat_id="other", timeout=10)
    assert len(runner.approvals.pending) == 50
    assert runner.lanes.running() == 50  # every one of them still inside its turn, waiting
    # And each of them still goes on once answered (its slot is given back).
    for sent in prompts(qa)[:3]:
        await qa.click(f"ap:{prompt_id(sent)}:d", chat_id=sent.chat_id)
    await wait_until(lambda: len(runner.approvals.pending) == 47)


async def test_rows_of_a_live_instance_are_left_to_it_and_a_gone_ones_are_taken_once(make_runner, tmp_path):
    db = f"sqlite+aiosqlite:///{tmp_path / 'r.db'}"
    runner, qa = await make_runner(db_url=db)
    host = socket.gethostname()
    alive = runner.instance.id  # another instance of this very process: alive, lease renewed
    gone = f"{host}:999999:1:dead"  # a process that no longer runs
    expired = "elsewhere:1:1:x"  # another machine, lease long over
    ids = {}
    for name, owner, lease in (("alive", alive, runner.instance.lease()), ("gone", gone, 10**10),
                               ("expired", expired, 1.0)):
        ids[name] = await runner.store.inbox.add("qa", name, "qa:dm:c1", inbound(f"from {name}", name),
                                                 owner=owner, lease_until=lease)
    other = await make_runner(db_url=db)
    await other[1].wait_for(lambda t: {"echo: from gone", "echo: from expired"} <= set(t))
    await asyncio.sleep(0.3)
    assert "echo: from alive" not in other[1].texts() and "echo: from alive" not in qa.texts()
    assert (await runner.store.inbox.get(ids["alive"]))["owner"] == alive
    # Recovery runs again (an adapter reconnecting, the periodic sweep): nothing is taken twice.
    assert await other[0].recovery.recover(other[1]) == 0
    assert other[1].texts().count("echo: from gone") == 1


def test_a_process_is_gone_when_its_pid_is_free_or_belongs_to_a_newer_process():
    import os

    host = socket.gethostname()
    me = f"{host}:{os.getpid()}:{process_start(os.getpid())}:n"
    assert not process_gone(me)
    assert process_gone(f"{host}:{os.getpid()}:1:n")  # same pid, started at another time: a restart
    assert process_gone(f"{host}:999999:1:n")
    assert not process_gone("another-host:1:1:n")  # can't be told from here: the lease decides


async def test_a_turn_resumes_after_its_last_stored_step(make_runner, fake_llm, tmp_path):
    """What a crash after a tool call leaves: the user message, the call and its result are stored, the
    inbox row is pending. After the restart the turn goes on from there: the tool is not run again."""
    db = f"sqlite+aiosqlite:///{tmp_path / 's.db'}"
    runner, _qa = await make_runner(db_url=db)
    session = await runner.sessions.get("qa:dm:c1", "qa")
    row = await runner.store.inbox.add("qa", "m1", "qa:dm:c1", inbound("count the files", "m1"),
                                       owner="gone-host:1:1:x", lease_until=1.0)
    call = {"id": "call_1", "type": "function", "function": {"name": "terminal", "arguments": '{"command": "ls"}'}}
    await runner.store.messages.append(session["id"], [
        {"role": "user", "content": "count the files"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"output": "a\nb\n", "exit_code": 0})},
    ], inbox_id=row)
    await runner.shutdown()
    fake_llm.script(Reply("there are 2 files"))
    runner2, qa2 = await make_runner(db_url=db)
    await qa2.wait_for(lambda t: "there are 2 files" in t)
    request = fake_llm.requests[-1]
    assert [m["role"] for m in request["messages"]][-3:] == ["user", "assistant", "tool"]
    assert sum(m["role"] == "user" for m in request["messages"]) == 1  # the question is not asked twice
    assert len(fake_llm.requests) == 1  # one model call: the turn went on, nothing ran before it
    history = await runner2.store.messages.history(session["id"])
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    await wait_until(lambda: _status(runner2, row, "done"))


async def test_a_resumed_turn_longer_than_the_history_limit_keeps_its_question_and_steps(make_runner, fake_llm,
                                                                                          tmp_path):
    """max_history_messages 4 and a turn that stored 7 messages before the crash: the resumed turn still
    sends the model its question and every step (the history's tail alone would start inside the turn),
    and before them at most 4 earlier messages, starting at a user message."""
    db = f"sqlite+aiosqlite:///{tmp_path / 'h.db'}"
    runner, _qa = await make_runner({"agent": {"max_history_messages": 4}}, db_url=db)
    session = await runner.sessions.get("qa:dm:c1", "qa")
    old_call = {"id": "call_old", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}
    earlier = [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"},
               {"role": "user", "content": "q2"}, {"role": "assistant", "content": None, "tool_calls": [old_call]},
               {"role": "tool", "tool_call_id": "call_old", "content": "{}"}, {"role": "assistant", "content": "a2"},
               {"role": "user", "content": "q3"}, {"role": "assistant", "content": "a3"}]
    await runner.store.messages.append(session["id"], earlier)
    row = await runner.store.inbox.add("qa", "m1", "qa:dm:c1", inbound("list three dirs", "m1"),
                                       owner="gone-host:1:1:x", lease_until=1.0)
    steps: list[dict[str, Any]] = [{"role": "user", "content": "list three dirs"}]
    for n in range(3):
        call = {"id": f"call_{n}", "type": "function",
                "function": {"name": "terminal", "arguments": json.dumps({"command": f"ls /d{n}"})}}
        steps += [{"role": "assistant", "content": None, "tool_calls": [call]},
                  {"role": "tool", "tool_call_id": f"call_{n}", "content": json.dumps({"output": f"f{n}"})}]
    assert len(steps) == 7
    await runner.store.messages.append(session["id"], steps, inbox_id=row)
    await runner.shutdown()
    fake_llm.script(Reply("three dirs listed"))
    runner2, qa2 = await make_runner({"agent": {"max_history_messages": 4}}, db_url=db)
    await qa2.wait_for(lambda t: "three dirs listed" in t)
    (request,) = fake_llm.requests
    sent = request["messages"]
    assert sent[0]["role"] == "system"
    assert sent[-7:] == [{k: v for k, v in m.items() if v is not None or k == "content"} for m in steps]
    # The newest 4 earlier ones (tool, a2, q3, a3), from their first user message: no result without its call.
    assert [m.get("content") for m in sent[1:-7]] == ["q3", "a3"]
    await wait_until(lambda: _status(runner2, row, "done"))


async def test_a_call_cut_off_mid_run_gets_a_result_saying_so_not_a_second_run(make_runner, fake_llm, tmp_path):
    db = f"sqlite+aiosqlite:///{tmp_path / 'c.db'}"
    runner, _qa = await make_runner(db_url=db)
    session = await runner.sessions.get("qa:dm:c1", "qa")
    row = await runner.store.inbox.add("qa", "m1", "qa:dm:c1", inbound("deploy", "m1"),
                                       owner="gone-host:1:1:x", lease_until=1.0)
    call = {"id": "call_9", "type": "function",
            "function": {"name": "terminal", "arguments": '{"command": "./deploy.sh"}'}}
    await runner.store.messages.append(session["id"], [{"role": "user", "content": "deploy"},
                                                       {"role": "assistant", "content": None, "tool_calls": [call]}],
                                       inbox_id=row)
    await runner.shutdown()
    fake_llm.script(Reply("I could not tell whether the deploy finished"))
    _runner2, qa2 = await make_runner(db_url=db)
    await qa2.wait_for(lambda t: any("could not tell" in x for x in t))
    (request,) = fake_llm.requests
    tool_msg = request["messages"][-1]
    assert tool_msg["role"] == "tool" and tool_msg["tool_call_id"] == "call_9"
    assert "not run again" in tool_msg["content"]


async def test_steps_are_stored_as_they_happen(make_runner, fake_llm, tmp_path):
    """By the time the model is asked again, the call and its result are already in the database."""
    import sqlite3

    runner, qa = await make_runner({"tools": {"terminal": {"cwd": str(tmp_path)}}})
    stored_when_asked: list[list[str]] = []

    def responder(request: dict[str, Any]) -> Any:
        if request["messages"][-1]["role"] == "tool":
            with sqlite3.connect(runner.paths.db_file) as db:
                stored_when_asked.append([r[0] for r in db.execute("SELECT role FROM messages ORDER BY id")])
            return Reply("done")
        return ToolCall("terminal", {"command": "echo hi"})

    fake_llm.responder = responder
    await qa.say("run it")
    await qa.wait_for(lambda t: "done" in t)
    assert stored_when_asked and stored_when_asked[0][-3:] == ["user", "assistant", "tool"]


async def _gone_row(db: str, text: str) -> int:
    """An unfinished row left by an instance that is gone (a process of this machine that no longer runs)."""
    from gateway.storage.store import Store

    store = Store(db)
    await store.init()
    try:
        row = await store.inbox.add("qa", "left", "qa:dm:c1", inbound(text, "left"),
                                    owner=f"{socket.gethostname()}:999999:1:dead", lease_until=10**10)
        assert row is not None
        return row
    finally:
        await store.close()


async def _untouched(runner: Any, row: int, qa: Any, fake_llm: Any) -> None:
    found = await runner.store.inbox.get(row)
    assert (found["status"], found["owner"]) == ("pending", f"{socket.gethostname()}:999999:1:dead")
    assert qa.texts() == [] and fake_llm.requests == []


@pytest.mark.slow
async def test_nothing_is_recovered_while_another_holder_has_the_adapters_credential(make_runner, fake_llm, tmp_path,
                                                                                    monkeypatch):
    """Recovery runs only after the adapter's credential lock is taken: while another process drives the bot,
    a gone instance's row is left alone (answering it here could not reach the platform, or would answer
    beside the other process); once the lock is free and the adapter connects, it is answered once."""
    from gateway.cluster.locks import CredentialLock
    from tests.support.qa_channel import QAAdapter

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    attempts: list[float] = []

    class LockedQA(QAAdapter):
        name = "qa"

        def credentials(self) -> list[tuple[str, str]]:
            attempts.append(1.0)  # read by the supervisor at each attempt, right before it takes the lock
            return [("qa", "qa-bot-token")]

    db = f"sqlite+aiosqlite:///{tmp_path / 'l.db'}"
    row = await _gone_row(db, "while locked")
    other = CredentialLock("qa", "qa-bot-token", holder={"pid": 1, "profile": "other", "host": "elsewhere"})
    other.acquire()
    try:
        runner, qa = await make_runner(db_url=db, adapters=[LockedQA])
        await wait_until(lambda: len(attempts) >= 2, what="two attempts at the lock")
        assert qa.state != "connected" and qa.start_calls == 0  # never past the lock
        await _untouched(runner, row, qa, fake_llm)
    finally:
        other.release()
    await qa.wait_for(lambda t: "echo: while locked" in t)
    await wait_until(lambda: _status(runner, row, "done"))
    assert (await runner.store.inbox.get(row))["owner"] == runner.instance.id
    assert qa.texts().count("echo: while locked") == 1


@pytest.mark.slow
async def test_nothing_is_recovered_before_the_adapter_has_connected(make_runner, fake_llm, tmp_path):
    """Recovery runs only after ``start()`` connected: a reply recovered before could not be sent and would
    burn its retries. While start() fails, a gone instance's row stays untouched."""
    from tests.support.qa_channel import QAAdapter

    gate = asyncio.Event()

    class Unreachable(QAAdapter):
        name = "qa"

        async def start(self) -> None:
            self.start_calls += 1
            if not gate.is_set():
                raise ConnectionError("qa platform unreachable")

    db = f"sqlite+aiosqlite:///{tmp_path / 'u.db'}"
    row = await _gone_row(db, "once connected")
    runner, qa = await make_runner(db_url=db, adapters=[Unreachable])
    await wait_until(lambda: qa.start_calls >= 2, what="two failed starts")
    assert qa.state != "connected"
    await _untouched(runner, row, qa, fake_llm)
    gate.set()
    await qa.wait_for(lambda t: "echo: once connected" in t)
    await wait_until(lambda: _status(runner, row, "done"))
    assert qa.texts().count("echo: once connected") == 1


async def test_a_turn_for_a_platform_no_longer_enabled_fails_only_a_row_still_unfinished(make_runner):
    from gateway.platforms.base import Accepted
    from gateway.turns.lanes import Lane

    runner, _qa = await make_runner()
    msg = InboundMessage(Source("gone-platform", "c1", "u1"), "hi", "g1", received_at=1.0)
    unfinished = await runner.store.inbox.add("gone-platform", "g1", "k", msg.to_dict())
    moved_on = await runner.store.inbox.add("gone-platform", "g2", "k", msg.to_dict())
    await runner.store.inbox.mark(moved_on, "done")  # finished elsewhere meanwhile
    for row in (unfinished, moved_on):
        await runner.turns.run(Lane("k"), Accepted(row, msg, "k"))
    assert (await runner.store.inbox.get(unfinished))["status"] == "failed"
    found = await runner.store.inbox.get(moved_on)
    assert (found["status"], found["error"]) == ("done", None)


async def test_a_strangers_row_that_moved_on_is_not_marked_denied(make_runner):
    """``accept`` marks a stranger's row denied only while it is still pending."""
    from tests.support.qa_channel import UntrustedQAAdapter

    runner, qa = await make_runner(adapters=[UntrustedQAAdapter])
    rows: list[int] = []
    add = runner.store.inbox.add

    async def add_then_move_on(*args: Any, **kwargs: Any) -> int | None:
        row = await add(*args, **kwargs)
        if row is not None:  # another instance finishes it before the access check is written
            rows.append(row)
            await runner.store.inbox.mark(row, "cancelled", error="taken elsewhere")
        return row

    runner.store.inbox.add = add_then_move_on  # type: ignore[method-assign]
    assert not await qa.say("hello", user_id="stranger")
    found = await runner.store.inbox.get(rows[0])
    assert (found["status"], found["error"]) == ("cancelled", "taken elsewhere")
