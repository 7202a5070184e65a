"""The clarify tool end to end in-process: the real runner and agent core, the QA channel, the scripted model."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select

from gateway.storage.tables import audit_events, clarifications, inbox
from tests.fakes.llm import ToolCall
from tests.support.polling import wait_until
from tests.support.qa_channel import UntrustedQAAdapter

QUESTION = {"question": "Which database?", "choices": ["SQLite", "PostgreSQL"]}


def prompts(qa: Any) -> list[Any]:
    return [s for s in qa.sent if s.text.startswith("❓")]


async def the_prompt(qa: Any) -> Any:
    await qa.wait_for(lambda _t: bool(prompts(qa)))
    return prompts(qa)[0]


def tool_results(texts: list[str]) -> list[dict[str, Any]]:
    return [json.loads(t[len("tool said: "):]) for t in texts if t.startswith("tool said: ")]


async def the_result(qa: Any, chat_id: str | None = None) -> dict[str, Any]:
    texts = await qa.wait_for(lambda t: bool(tool_results(t)), chat_id=chat_id)
    return tool_results(texts)[0]


async def rows(runner: Any, table: Any = clarifications) -> list[dict[str, Any]]:
    return await runner.store.run_read(lambda c: [dict(r._mapping) for r in c.execute(select(table))])


async def test_answered_by_a_button(make_runner, fake_llm):
    runner, qa = await make_runner()
    fake_llm.script(ToolCall("clarify", QUESTION))
    await qa.say("set up the app")
    prompt = await the_prompt(qa)
    assert "1. SQLite" in prompt.text and "2. PostgreSQL" in prompt.text and "type another answer" in prompt.text
    assert [b.label for b in prompt.message.buttons] == ["1. SQLite", "2. PostgreSQL"]
    assert all(len(b.id.encode()) <= 64 for b in prompt.message.buttons)

    assert await qa.click(prompt.message.buttons[1].id) == "Answered: PostgreSQL"
    result = await the_result(qa)
    assert (result["answer"], result["choice"]) == ("PostgreSQL", 2)
    assert len(fake_llm.requests) == 2
    await wait_until(lambda: any("✅" in (t or "") and "PostgreSQL" in (t or "") for _c, _m, t in qa.edits),
                     what="the prompt edited with the answer")
    (row,) = await rows(runner)
    assert (row["status"], row["answer"], row["answered_by"], row["answered_via"]) == (
        "answered", "PostgreSQL", "u1", "button")
    assert "no longer waiting" in await qa.click(prompt.message.buttons[0].id)
    await wait_until(lambda: _audited(runner, "answered"), what="the audit row")


async def _audited(runner: Any, outcome: str) -> bool:
    return any(r["kind"] == "clarify" and r["outcome"] == outcome for r in await rows(runner, audit_events))


async def test_answered_by_typed_text_even_while_the_session_is_busy(make_runner, fake_llm):
    runner, qa = await make_runner()
    fake_llm.script(ToolCall("clarify", QUESTION))
    await qa.say("set up the app")
    await the_prompt(qa)
    await qa.say("MariaDB, version 11")
    result = await the_result(qa)
    assert result["answer"] == "MariaDB, version 11" and "choice" not in result
    # The answer joined no lane: the model was asked twice (the question, then the turn's answer), not three times.
    await wait_until(lambda: _inbox_done(runner), what="every inbox row finished")
    assert len(fake_llm.requests) == 2
    (row,) = await rows(runner)
    assert (row["status"], row["answered_via"]) == ("answered", "text")


async def _inbox_done(runner: Any) -> bool:
    return all(r["status"] == "done" for r in await rows(runner, inbox))


async def test_a_typed_number_picks_that_choice(make_runner, fake_llm):
    _runner, qa = await make_runner()
    fake_llm.script(ToolCall("clarify", QUESTION))
    await qa.say("set up the app")
    await the_prompt(qa)
    await qa.say("1")
    result = await the_result(qa)
    assert (result["answer"], result["choice"]) == ("SQLite", 1)


async def test_someone_else_cannot_answer(make_runner, fake_llm):
    cfg = {"access": {"allowed_users": ["qa2:u1", "qa2:mallory"]}}
    runner, qa = await make_runner(cfg, adapters=[UntrustedQAAdapter])
    fake_llm.script(ToolCall("clarify", QUESTION))
    await qa.say("set up the app", chat_id="g", chat_type="group")
    prompt = await the_prompt(qa)
    notice = await qa.click(prompt.message.buttons[0].id, user_id="mallory", chat_id="g", chat_type="group")
    assert "can't answer" in notice and "Nothing was changed" in notice
    # Her typed message in the group is hers (her own session's turn), not an answer to u1's question.
    await qa.say("SQLite!", user_id="mallory", chat_id="g", chat_type="group")
    await qa.wait_for(lambda t: "echo: SQLite!" in t)
    assert runner.clarify.pending and (await rows(runner))[0]["status"] == "pending"
    assert await qa.click(prompt.message.buttons[0].id, user_id="u1", chat_id="g", chat_type="group") == (
        "Answered: SQLite")
    assert (await the_result(qa))["answer"] == "SQLite"


async def test_nobody_answers_in_time(make_runner, fake_llm):
    runner, qa = await make_runner({"tools": {"clarify": {"timeout_seconds": 0.3}}})
    fake_llm.script(ToolCall("clarify", QUESTION))
    await qa.say("set up the app")
    prompt = await the_prompt(qa)
    result = await the_result(qa)
    assert result["answer"] is None and "no answer" in result["note"]
    await wait_until(lambda: any("No answer in time" in (t or "") for _c, m, t in qa.edits
                                 if m == prompt.message_id), what="the prompt edited")
    assert (await rows(runner))[0]["status"] == "no_answer"
    assert "no longer" in await qa.click(prompt.message.buttons[0].id)


async def test_a_restart_withdraws_the_question_and_tells_the_person(make_runner, fake_llm):
    runner, qa = await make_runner({"gateway": {"drain_seconds": 0.2}})
    fake_llm.script(ToolCall("clarify", QUESTION))
    await qa.say("set up the app")
    prompt = await the_prompt(qa)
    await runner.shutdown()

    runner2, qa2 = await make_runner({"gateway": {"drain_seconds": 0.2}})
    texts = await qa2.wait_for(lambda t: any("Herald restarted while I was waiting for your answer" in x
                                             for x in t))
    assert any("Which database?" in t for t in texts)
    (row,) = await rows(runner2)
    assert (row["status"], row["answered_via"]) == ("withdrawn", "restart")
    await wait_until(lambda: any("Withdrawn" in (t or "") for _c, m, t in qa2.edits if m == prompt.message_id),
                     what="the old prompt edited")
    # The turn resumes after its last stored step: the model learns the question went unanswered.
    result = await the_result(qa2)
    assert "restart" in result["error"]
    assert "no longer" in await qa2.click(prompt.message.buttons[0].id)


async def test_a_press_reaching_another_instance_answers_the_question_where_it_waits(pg_url, make_runner, fake_llm):
    (a, qa_a), (b, qa_b) = [await make_runner(db_url=pg_url) for _ in range(2)]
    fake_llm.script(ToolCall("clarify", QUESTION))
    await qa_a.say("set up the app")
    prompt = await the_prompt(qa_a)
    assert len(a.clarify.pending) == 1 and b.clarify.pending == {}  # it waits in a, the instance whose turn asked
    assert await qa_b.click(prompt.message.buttons[1].id) == "Answered: PostgreSQL"
    assert (await the_result(qa_a))["answer"] == "PostgreSQL"
