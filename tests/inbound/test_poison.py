"""Poison messages (gateway/turns/attempts.py): every start of a turn is counted on its inbox row before the turn
computes; a message whose ``gateway.max_attempts`` turns began without one finishing is parked by whichever
instance finds it (recovery on SQLite, the session's lease on PostgreSQL), its chat told once, and the daemon
goes on. The real thing (a turn that kills ``herald run``, three restarts) is tests/e2e/test_poison_e2e.py."""

from __future__ import annotations

from typing import Any

from gateway.ops.dashboard import views
from gateway.ops.dashboard.data import Overview, parked_messages
from gateway.platforms.base import InboundMessage, Source
from gateway.turns.attempts import parked_notice
from tests.fakes.llm import Reply
from tests.support.polling import wait_until

GONE = {"owner": "gone-host:1:1:x", "lease_until": 1.0}  # an instance that died (its lease ran out long ago)
POISON = "the message that kills <b>the daemon</b>"


def inbound(text: str, mid: str) -> InboundMessage:
    return InboundMessage(Source("qa", "c1", "u1"), text, mid, received_at=1.0)


async def crashed(runner, mid: str, text: str, attempts: int) -> int:
    """A row as a daemon that died during its turn left it: pending, ``attempts`` turns begun, a step stored."""
    row = await runner.store.inbox.add("qa", mid, "qa:dm:c1", inbound(text, mid).to_dict(), **GONE)
    for _ in range(attempts):
        assert await runner.store.inbox.attempt(row, 1000) is not None
    session = await runner.sessions.get("qa:dm:c1", "qa")
    call = [{"id": f"k-{mid}", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}]
    await runner.store.messages.append(session["id"], [{"role": "user", "content": text},
                                                       {"role": "assistant", "content": None, "tool_calls": call}],
                                       row)
    return row


async def status(runner, row: int) -> str:
    return (await runner.store.inbox.get(row))["status"]


async def is_done(runner, row: int) -> bool:
    return await status(runner, row) == "done"


async def test_a_turn_has_counted_its_attempt_before_the_model_is_asked(make_runner, fake_llm, db_url) -> None:
    runner, qa = await make_runner(db_url=db_url)
    fake_llm.script(Reply("too late", delay=60))
    await qa.say("count me", message_id="m1")
    await wait_until(lambda: fake_llm.requests, what="the model asked")
    row = await runner.store.inbox.find("qa", "m1")
    assert row is not None and row["status"] == "pending" and row["attempts"] == 1
    assert runner.lanes.stop_turn("qa:dm:c1")
    # A second message: one attempt of its own, and one only.
    await qa.say("and me", message_id="m2")
    await qa.wait_for(lambda t: "echo: and me" in t)
    assert (await runner.store.inbox.find("qa", "m2"))["attempts"] == 1


async def test_a_clean_shutdown_gives_the_attempt_back(make_runner, fake_llm, db_url) -> None:
    runner, qa = await make_runner({"gateway": {"drain_seconds": 0}}, db_url=db_url)
    fake_llm.script(Reply("too late", delay=60))
    await qa.say("cut me short", message_id="m1")
    await wait_until(lambda: fake_llm.requests, what="the model asked")
    await runner.shutdown()
    runner2, qa2 = await make_runner(db_url=db_url)
    await qa2.wait_for(lambda t: "echo: cut me short" in t)
    row = await runner2.store.inbox.find("qa", "m1")
    await wait_until(lambda: is_done(runner2, row["id"]), what="the answer recorded")
    row = await runner2.store.inbox.find("qa", "m1")
    assert row["attempts"] == 1  # the cut turn did not count; the one that answered did


async def test_a_message_at_its_limit_is_parked_told_once_and_the_next_answered(make_runner, fake_llm,
                                                                               db_url) -> None:
    runner, _qa = await make_runner(db_url=db_url)
    poison = await crashed(runner, "p1", POISON, 3)
    unlucky = await crashed(runner, "p2", "a message that was only unlucky", 2)
    await runner.shutdown()

    runner2, qa2 = await make_runner(db_url=db_url)
    notice = parked_notice(inbound(POISON, "p1"), 3)
    await qa2.wait_for(lambda t: notice in t)
    await wait_until(lambda: is_done(runner2, unlucky), what="the unlucky message answered")
    await qa2.say("and this one?", message_id="n1")
    await qa2.wait_for(lambda t: "echo: and this one?" in t)
    assert qa2.texts().count(notice) == 1
    assert "Herald stopped unexpectedly 3 times" in notice and "send it again" in notice
    row = await runner2.store.inbox.get(poison)
    assert row["status"] == "parked" and row["attempts"] == 3
    assert await status(runner2, unlucky) == "done"
    # The model never saw the parked message again: neither its turn nor a later one.
    assert all(POISON not in str(request["messages"]) for request in fake_llm.requests)
    # The answer is out before its row is finished (the send, then the commit): wait for the commit.
    await wait_until(lambda: _none_unfinished(runner2), what="every message finished")
    assert runner2.counters.messages_parked == 1
    # The dashboard lists it, escaped.
    parked = await runner2.store.run_read(parked_messages)
    assert [(p["id"], p["text"], p["attempts"]) for p in parked] == [(poison, POISON, 3)]
    html = views.overview(Overview({}, [], [], [], parked=parked))
    assert 'id="parked"' in html and "&lt;b&gt;the daemon&lt;/b&gt;" in html and "<b>the daemon" not in html


async def _none_unfinished(runner: Any) -> bool:
    return await runner.store.inbox.unfinished() == []
