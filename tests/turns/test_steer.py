"""Steering a running turn: ``gateway.busy_mode: steer`` and /steer, through the real runner, agent core and the
scripted model. A tool that waits for the test stands in for a slow command, so nothing depends on timing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select

from gateway.storage.tables import inbox
from tests.fakes.llm import Hang, Reply, ToolCall
from tests.support.gate import Gate, blocking_tool
from tests.support.polling import wait_until


@pytest.fixture
def gate() -> Iterator[Gate]:
    with blocking_tool() as g:
        yield g


def steered_lane(runner: Any, n: int = 1) -> Any:
    lane = runner.lanes.lane("qa:dm:c1")
    return lane is not None and len(lane.steered) >= n


async def inbox_rows(runner: Any) -> list[dict[str, Any]]:
    return await runner.store.run_read(lambda c: [dict(r._mapping) for r in c.execute(select(inbox))])


async def test_a_message_sent_while_a_tool_runs_reaches_the_next_model_call_in_order(make_runner, fake_llm, gate):
    runner, qa = await make_runner({"gateway": {"busy_mode": "steer"}})
    fake_llm.script(ToolCall("wait_here", {}), Reply("done, with Postgres"))
    await qa.say("set up the database")
    await wait_until(gate.entered.is_set, what="the tool to start")
    await qa.say("oh, and use Postgres")
    await qa.say("version 16 please")
    await wait_until(lambda: steered_lane(runner, 2), what="both messages to wait for the turn")
    gate.open.set()
    await qa.wait_for(lambda t: "done, with Postgres" in t)

    assert len(fake_llm.requests) == 2
    second = [(m["role"], m.get("content")) for m in fake_llm.requests[1]["messages"][1:]]
    assert second[0] == ("user", "set up the database")
    assert second[1][0] == "assistant" and second[2] == ("tool", "tool finished")
    assert second[3:] == [("user", "oh, and use Postgres"), ("user", "version 16 please")]
    assert not any("oh, and use Postgres" in str(m.get("content")) for m in fake_llm.requests[0]["messages"])
    assert any(t.startswith("↪") for t in qa.texts())

    # History in the order the agent saw it; the steered messages' rows are done, no turn of their own.
    session = await runner.store.sessions.active("qa:dm:c1")
    history = [(m["role"], m.get("content")) for m in await runner.store.messages.history(session["id"])]
    assert history == [*second, ("assistant", "done, with Postgres")]
    await wait_until(lambda: _all_done(runner), what="every inbox row finished")
    assert len(fake_llm.requests) == 2


async def _all_done(runner: Any) -> bool:
    return all(r["status"] == "done" for r in await inbox_rows(runner))


async def test_a_steered_message_the_turn_ends_without_becomes_the_next_turn(make_runner, fake_llm):
    runner, qa = await make_runner()  # busy_mode queue: /steer works in any mode
    answer = asyncio.Event()
    fake_llm.script(Hang(0, then=Reply("first answer"), until=answer))
    await qa.say("question")
    await wait_until(lambda: len(fake_llm.requests) == 1, what="the turn's model call")
    await qa.say("/steer also mention the weather")
    await wait_until(lambda: steered_lane(runner), what="the steered message to wait for the turn")
    answer.set()  # the model answers: the turn ends with no further call that could take it
    texts = await qa.wait_for(lambda t: "echo: also mention the weather" in t)
    assert texts.index("first answer") < texts.index("echo: also mention the weather")
    assert any("Added to what I'm working on" in t for t in texts)
    assert len(fake_llm.requests) == 2
    assert fake_llm.requests[1]["messages"][-1] == {"role": "user", "content": "also mention the weather"}
    await wait_until(lambda: _all_done(runner), what="every inbox row finished")


async def test_steer_with_nothing_running_is_a_message_of_its_own(make_runner, fake_llm):
    _runner, qa = await make_runner()
    await qa.say("/steer hello there")
    texts = await qa.wait_for(lambda t: "echo: hello there" in t)
    assert any("Nothing was running" in t for t in texts)
