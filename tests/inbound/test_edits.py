"""Edited messages through the real runner: before the turn (the text replaced), during it (steered in as a
correction, once however often the edit is delivered), after it (``gateway.on_edit``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from gateway.platforms.base import InboundMessage, Source
from tests.fakes.llm import Hang, Reply, ToolCall
from tests.support.gate import Gate, blocking_tool
from tests.support.polling import wait_until


@pytest.fixture
def gate() -> Iterator[Gate]:
    with blocking_tool() as g:
        yield g


async def edit(qa: Any, message_id: str, text: str, stamp: int = 1, chat_id: str = "c1") -> bool:
    """The person edits their message ``message_id``, as a platform reports it (the edit's own id names it)."""
    msg = InboundMessage(Source(qa.name, chat_id, "u1"), text, f"{message_id}@{stamp}", edit_of=message_id)
    return await qa.accept(msg)


def user_texts(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


async def test_an_edit_before_the_turn_starts_changes_the_text_the_model_sees(make_runner, fake_llm):
    runner, qa = await make_runner()
    first = asyncio.Event()
    fake_llm.script(Hang(0, then=Reply("first answer"), until=first))
    await qa.say("first question", message_id="m1")
    await wait_until(lambda: len(fake_llm.requests) == 1, what="the first turn's model call")
    await qa.say("use SQLite", message_id="m2")  # queued behind the running turn
    assert await edit(qa, "m2", "use PostgreSQL")
    await wait_until(lambda: _edit_done(runner), what="the edit handled")
    first.set()
    await qa.wait_for(lambda t: "echo: use PostgreSQL" in t)
    assert len(fake_llm.requests) == 2
    assert user_texts(fake_llm.requests[1])[-1] == "use PostgreSQL"
    assert not any("SQLite" in str(r["messages"]) for r in fake_llm.requests)
    row = await runner.store.inbox.find(qa.name, "m2")
    assert row["payload"]["text"] == "use PostgreSQL"  # a restart before its turn would answer the new text


async def _edit_done(runner: Any) -> bool:
    row = await runner.store.inbox.find("qa", "m2@1")
    return row is not None and row["status"] == "done"


async def test_an_edit_delivered_twice_steers_once(make_runner, fake_llm, gate):
    runner, qa = await make_runner()
    fake_llm.script(ToolCall("wait_here", {}), Reply("done"))
    await qa.say("deploy to staging", message_id="m1")
    await wait_until(gate.entered.is_set, what="the tool to start")
    assert await edit(qa, "m1", "deploy to production")
    assert not await edit(qa, "m1", "deploy to production")  # the same edit event again: a duplicate
    lane = runner.lanes.lane("qa:dm:c1")
    await wait_until(lambda: len(lane.steered) == 1, what="the correction waiting for the turn")
    gate.open.set()
    await qa.wait_for(lambda t: "done" in t)
    corrections = [t for t in user_texts(fake_llm.requests[1]) if "edited" in t]
    assert corrections == ["[The person edited their earlier message to:]\ndeploy to production"]
    assert len(fake_llm.requests) == 2 and runner.counters.messages_duplicate == 1


async def test_an_edit_of_an_old_message_is_ignored_by_default(make_runner, fake_llm):
    runner, qa = await make_runner()
    await qa.say("hello", message_id="m1")
    await qa.wait_for(lambda t: "echo: hello" in t)
    assert await edit(qa, "m1", "hello there")
    await wait_until(lambda: _row_done(runner, "m1@1"), what="the edit handled")
    assert len(fake_llm.requests) == 1


async def test_with_on_edit_new_turn_an_edit_of_an_old_message_is_answered(make_runner, fake_llm):
    _runner, qa = await make_runner({"gateway": {"on_edit": "new_turn"}})
    await qa.say("hello", message_id="n1")
    await qa.wait_for(lambda t: "echo: hello" in t)
    assert await edit(qa, "n1", "hello there")
    await qa.wait_for(lambda t: any("edited their earlier message" in x and "hello there" in x for x in t))


async def _row_done(runner: Any, message_id: str) -> bool:
    row = await runner.store.inbox.find("qa", message_id)
    return row is not None and row["status"] == "done"
