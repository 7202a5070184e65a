"""Context compression end to end through the QA channel and the fake model: the history that crosses the
budget is summarised once and the turn goes on; a context-length error makes one compression and a retry;
/compress on demand; the full history stays in the store, the new session pointing at the old one."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agent_core.compress import SUMMARY_HEADER, SUMMARY_SYSTEM, context_window_from_error, split_history
from agent_core.errors import LLMError
from tests.fakes.llm import Error, Reply, ToolCall, directive_responder

SUMMARISER = SUMMARY_SYSTEM.split("{", 1)[0]
BIG = "x" * 3000  # about 750 tokens; the echo still fits one QA message


def is_summary_request(req: dict[str, Any]) -> bool:
    return str(req["messages"][0].get("content") or "").startswith(SUMMARISER)


def summarising(fake: Any) -> list[dict[str, Any]]:
    """Make the fake answer summary requests with SUMMARY-n (and everything else as usual)."""
    asked: list[dict[str, Any]] = []

    def responder(req: dict[str, Any]) -> Any:
        if is_summary_request(req):
            asked.append(req)
            return Reply(f"SUMMARY-{len(asked)}")
        return directive_responder(req)

    fake.responder = responder
    return asked


def turn_requests(fake: Any) -> list[dict[str, Any]]:
    return [r for r in fake.requests if not is_summary_request(r)]


async def say(qa: Any, text: str, n: int) -> None:
    await qa.say(text)
    await qa.wait_for(lambda t: sum(x.startswith(("echo:", "tool said:", "⚠", "This no longer fits")) for x in t) >= n,
                      timeout=20)


async def sessions_of(runner: Any, key: str) -> list[dict[str, Any]]:
    from sqlalchemy import select

    from gateway.storage.tables import sessions

    stmt = select(sessions).where(sessions.c.key == key).order_by(sessions.c.created_at)
    return await runner.store.run_read(lambda conn: [dict(r._mapping) for r in conn.execute(stmt)])


KEY = "qa:dm:c1"


async def until(condition: Any, timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never held")


async def test_a_history_over_the_budget_is_compressed_once_and_the_turn_goes_on(make_runner, fake_llm):
    runner, qa = await make_runner({"model": {"context_window": 8000}})
    asked = summarising(fake_llm)
    turns = 0
    while not asked and turns < 8:
        turns += 1
        await say(qa, f"turn {turns} {BIG}", turns)
    assert len(asked) == 1, "the budget was never crossed"
    # The turn that crossed it was answered, after the summary, from the summary and the recent messages.
    assert qa.texts()[-1] == f"echo: turn {turns} {BIG}"
    crossing = turn_requests(fake_llm)[-1]
    sent = crossing["messages"]
    assert sent[1]["role"] == "user" and sent[1]["content"] == f"{SUMMARY_HEADER}\n\nSUMMARY-1"
    assert sent[-1] == {"role": "user", "content": f"turn {turns} {BIG}"}
    assert all("turn 1 " not in str(m.get("content")) for m in sent)  # the oldest part only as the summary
    # The summariser saw the older part (and was told it is material, not instructions).
    assert "turn 1 " in asked[0]["messages"][-1]["content"]
    assert f"turn {turns} " not in asked[0]["messages"][-1]["content"]
    # The system prompt is the same bytes as before compression (prompt caching).
    assert sent[0] == turn_requests(fake_llm)[0]["messages"][0]

    old, new = await sessions_of(runner, KEY)
    assert (old["end_reason"], new["parent_id"], new["ended_at"]) == ("compressed", old["id"], None)
    assert new["summary"] == "SUMMARY-1" and new["system_prompt"] == old["system_prompt"]
    # Lineage: every original message is still in the old session; the new one has no duplicate of the turn.
    old_history = await runner.store.messages.history(old["id"])
    assert [m["content"] for m in old_history if m["role"] == "user"] == [f"turn {n} {BIG}" for n in range(1, turns)]
    new_history = await runner.store.messages.history(new["id"])
    assert [m["content"] for m in new_history].count(f"turn {turns} {BIG}") == 1
    assert new_history[-1]["content"] == f"echo: turn {turns} {BIG}"

    # The next turn goes on in the new session from the summary, without compressing again.
    await say(qa, "and now?", turns + 1)
    assert len(asked) == 1
    nxt = turn_requests(fake_llm)[-1]["messages"]
    assert nxt[1]["content"].endswith("SUMMARY-1") and nxt[-1]["content"] == "and now?"
    assert nxt[-3]["content"] == f"turn {turns} {BIG}"


async def test_a_context_length_error_compresses_once_and_retries_the_call(make_runner, fake_llm):
    runner, qa = await make_runner()
    asked = summarising(fake_llm)
    await say(qa, f"one {BIG}", 1)
    await say(qa, f"two {BIG}", 2)
    before = len(fake_llm.requests)
    fake_llm.script(Error.context_overflow())  # "maximum context length is 8192 tokens"
    await say(qa, "three", 3)
    assert qa.texts()[-1] == "echo: three"
    requests = fake_llm.requests[before:]
    assert len(requests) == 3 and is_summary_request(requests[1]) and len(asked) == 1
    retried = requests[2]["messages"]
    assert retried[1]["content"].endswith("SUMMARY-1") and retried[-1]["content"] == "three"
    assert len(retried) < len(requests[0]["messages"])
    old, new = await sessions_of(runner, KEY)
    assert old["end_reason"] == "compressed" and new["parent_id"] == old["id"]


async def test_a_second_context_length_error_is_reported_after_one_compression(make_runner, fake_llm):
    _runner, qa = await make_runner()
    asked = summarising(fake_llm)
    await say(qa, f"one {BIG}", 1)
    await say(qa, f"two {BIG}", 2)
    before = len(fake_llm.requests)
    fake_llm.script(Error.context_overflow(), Reply("SUMMARY-1"), Error.context_overflow())
    await say(qa, "three", 3)
    assert "context window" in qa.texts()[-1]
    assert len(fake_llm.requests) - before == 3  # the call, the summary, one retry: no loop
    assert len(asked) == 0  # the scripted summary answered; the responder was never needed


async def test_a_turn_compressed_between_tool_calls_goes_on_in_the_new_session(make_runner, fake_llm, db_url):
    runner, qa = await make_runner(db_url=db_url)
    summarising(fake_llm)
    await say(qa, f"one {BIG * 2}", 1)  # each turn more than the 30% of the window kept word for word
    await say(qa, f"two {BIG * 2}", 2)
    fake_llm.script(ToolCall("no_such_tool", {}, id="call_x"), Error.context_overflow())
    await say(qa, "three", 3)
    assert qa.texts()[-1].startswith("tool said: ")
    old, new = await sessions_of(runner, KEY)
    new_history = await runner.store.messages.history(new["id"])
    # The turn's stored steps were carried over and its answer stored after them, in the new session.
    assert [m["role"] for m in new_history] == ["user", "assistant", "tool", "assistant"]
    assert new_history[0]["content"] == "three" and new_history[1]["tool_calls"][0]["id"] == "call_x"
    steps = await runner.store.messages.turn_steps(await _inbox_of(runner, "three"))
    assert steps is not None and steps[0] == new["id"]
    # The old session still holds the steps it had when the turn left it.
    assert [m["role"] for m in (await runner.store.messages.history(old["id"]))[-3:]] == ["user", "assistant", "tool"]


async def _inbox_of(runner: Any, text: str) -> int:
    from sqlalchemy import select

    from gateway.storage.tables import inbox

    rows = await runner.store.run_read(lambda conn: conn.execute(select(inbox.c.id, inbox.c.payload)).all())
    return next(r.id for r in rows if (r.payload if isinstance(r.payload, dict) else json.loads(r.payload))["text"]
                == text)


async def test_compress_on_demand(make_runner, fake_llm, db_url):
    runner, qa = await make_runner(db_url=db_url)
    asked = summarising(fake_llm)
    for n in range(1, 5):
        await say(qa, f"message {n} {BIG}", n)
    await qa.say("/compress")
    texts = await qa.wait_for(lambda t: any("Compressed" in x for x in t))
    assert "full history stays stored" in texts[-1]
    assert len(asked) == 1
    old, new = await sessions_of(runner, KEY)
    assert old["end_reason"] == "compressed" and new["parent_id"] == old["id"] and new["summary"] == "SUMMARY-1"
    assert len(await runner.store.messages.history(old["id"])) == 8
    await say(qa, "after", 5)
    sent = turn_requests(fake_llm)[-1]["messages"]
    assert sent[1]["content"].endswith("SUMMARY-1") and sent[-1]["content"] == "after"
    assert all("message 1 " not in str(m.get("content")) for m in sent)

    # A second /compress summarises the earlier summary along with what came since.
    for n in range(6, 9):
        await say(qa, f"message {n} {BIG}", n)
    await qa.say("/compress")
    await qa.wait_for(lambda t: sum("Compressed" in x for x in t) == 2)
    assert "SUMMARY-1" in asked[1]["messages"][-1]["content"]
    chain = await sessions_of(runner, KEY)
    assert [s["end_reason"] for s in chain] == ["compressed", "compressed", None]
    assert chain[2]["parent_id"] == chain[1]["id"]


async def test_compress_sent_on_seeing_the_answer_waits_for_it_to_be_stored(make_runner, fake_llm):
    runner, qa = await make_runner()
    asked = summarising(fake_llm)
    for n in range(1, 4):
        await say(qa, f"message {n} {BIG}", n)
    finish = runner.store.outbox.finish

    async def slow_finish(*args: Any, **kwargs: Any) -> None:
        await asyncio.sleep(0.5)  # the answer is out; its turn still holds the session while this is stored
        await finish(*args, **kwargs)

    runner.store.outbox.finish = slow_finish
    await qa.say("message 4")
    await qa.wait_for(lambda t: "echo: message 4" in t)
    await qa.say("/compress")
    texts = await qa.wait_for(lambda t: len(t) == 5)
    assert "Compressed" in texts[-1] and len(asked) == 1
    # While a turn computes, /compress says so and changes nothing.
    runner.store.outbox.finish = finish
    await qa.say("slow [sleep=1]")
    await until(lambda: any(r["messages"][-1]["content"] == "slow [sleep=1]" for r in fake_llm.requests))
    await qa.say("/compress")
    texts = await qa.wait_for(lambda t: len(t) == 7)
    assert "A turn is running" in texts[5] and texts[6] == "echo: slow [sleep=1]" and len(asked) == 1


async def test_compress_with_nothing_older_changes_nothing(make_runner, fake_llm):
    runner, qa = await make_runner()
    await qa.say("/compress")
    await qa.wait_for(lambda t: any("no conversation" in x for x in t))
    await say(qa, "hello", 1)
    await qa.say("/compress")
    await qa.wait_for(lambda t: any("nothing to compress" in x for x in t))
    assert len(await sessions_of(runner, KEY)) == 1 and len(fake_llm.requests) == 1


async def test_a_message_sent_during_compress_waits_for_it(make_runner, fake_llm):
    runner, qa = await make_runner()
    for n in range(1, 4):
        await say(qa, f"message {n} {BIG}", n)

    def slow_summary(req: dict[str, Any]) -> Any:
        if is_summary_request(req):
            return Reply("SUMMARY-1", delay=0.5)
        return directive_responder(req)

    fake_llm.responder = slow_summary
    await qa.say("/compress")
    await until(lambda: any(is_summary_request(r) for r in fake_llm.requests))  # /compress holds the session
    await say(qa, "during", 4)
    _old, new = await sessions_of(runner, KEY)
    # The message's turn ran after the switch: in the new session, from the summary.
    assert [m["content"] for m in await runner.store.messages.history(new["id"])][-2:] == ["during", "echo: during"]
    assert turn_requests(fake_llm)[-1]["messages"][1]["content"].endswith("SUMMARY-1")


def test_split_keeps_whole_turns_and_the_turn_under_way() -> None:
    msgs = [
        {"role": "user", "content": "a" * 400},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "1", "function": {"name": "t", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "1", "content": "r" * 400},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "b" * 40},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "c" * 4000},
    ]
    older, recent = split_history(msgs, keep_tokens=50)
    assert older == msgs[:6] and recent == msgs[6:]  # the turn under way stays, however big
    older, recent = split_history(msgs, keep_tokens=2000)
    assert older == msgs[:4] and recent[0]["content"] == "b" * 40  # a cut only at a user message
    assert split_history(msgs[:4], keep_tokens=0) == ([], msgs[:4])  # one turn: nothing older


def test_the_window_an_endpoint_names_in_its_error() -> None:
    assert context_window_from_error(LLMError("context_overflow", "This model's maximum context length is 8192 "
                                                                  "tokens. However, ...")) == 8192
    assert context_window_from_error(LLMError("context_overflow", "prompt is too long: 210512 tokens > 200000 "
                                                                  "maximum")) == 200000
    assert context_window_from_error(LLMError("context_overflow", "too long")) is None


async def test_the_endpoints_window_is_used_when_none_is_configured(make_runner, fake_llm):
    fake_llm.context_length = 8000
    runner, qa = await make_runner()
    asked = summarising(fake_llm)
    turns = 0
    while not asked and turns < 8:
        turns += 1
        await say(qa, f"turn {turns} {BIG}", turns)
    assert len(asked) == 1 and qa.texts()[-1] == f"echo: turn {turns} {BIG}"
    assert runner.compression.window(None) == 8000

