"""/stop while the clarify tool waits for an answer: the real runner, agent core and QA channel, the scripted
model. The wait is the turn's, so stopping the turn must end it (not leave a worker thread blocked on a
question nobody can answer any more)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from gateway.storage.tables import audit_events, clarifications
from tests.fakes.llm import ToolCall
from tests.support.polling import wait_until

QUESTION = {"question": "Which database?", "choices": ["SQLite", "PostgreSQL"]}


async def rows(runner: Any, table: Any = clarifications) -> list[dict[str, Any]]:
    return await runner.store.run_read(lambda c: [dict(r._mapping) for r in c.execute(select(table))])


def prompt_of(qa: Any) -> Any:
    return next((s for s in qa.sent if s.text.startswith("❓")), None)


async def _settled(runner: Any) -> dict[str, Any] | None:
    found = await rows(runner)
    return found[0] if found and found[0]["status"] != "pending" else None


async def _audited(runner: Any) -> bool:
    return any(r["kind"] == "clarify" and r["outcome"] == "stopped" for r in await rows(runner, audit_events))


async def test_stop_ends_the_wait_and_withdraws_the_question(make_runner, fake_llm):
    runner, qa = await make_runner()
    fake_llm.script(ToolCall("clarify", QUESTION))
    await qa.say("set up the app")
    await qa.wait_for(lambda _t: prompt_of(qa) is not None)
    prompt = prompt_of(qa)
    assert runner.clarify.pending

    await qa.say("/stop")  # a command, not an answer to the question
    await qa.wait_for(lambda t: any(x.startswith("⏹ Stopped") for x in t))
    row = await wait_until(lambda: _settled(runner), what="the question settled")
    assert (row["status"], row["answered_via"], row["answer"]) == ("stopped", "stop", None)
    assert not runner.clarify.pending
    await wait_until(lambda: any("Withdrawn: the turn was stopped" in (t or "")
                                 for _c, m, t in qa.edits if m == prompt.message_id),
                     what="the prompt marked withdrawn")
    await wait_until(lambda: _audited(runner), what="the audit row")
    # Its buttons answer nothing now, and the model was not asked again within the stopped turn.
    assert "no longer" in await qa.click(prompt.message.buttons[0].id)
    assert len(fake_llm.requests) == 1
    # The session is free: the next message is a turn of its own, not an answer to the withdrawn question.
    await qa.say("hello")
    await qa.wait_for(lambda t: "echo: hello" in t)
    assert (await rows(runner))[0]["status"] == "stopped"
    # The model learns at its next turn that the question went unanswered because the turn was stopped.
    told = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(told) == 1 and "stopped" in told[0]
