"""Token usage per turn from the API's usage fields, /usage end to end on the web chat with a price, and
gateway.daily_token_budget: over it the user is told, and the model gets no request."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import aiohttp

from agent_core.llm import Endpoint, LLMClient
from agent_core.usage import UsageMeter
from gateway.config import ModelPrice
from gateway.turns.usage import Totals, cost_of
from tests.fakes.llm import FakeLLM, _usage

PRICES = {"fake-model": {"input_per_million": 1000, "output_per_million": 4000}}


async def _post(http: aiohttp.ClientSession, base: str, text: str, user: str = "owner", chat: str = "c") -> None:
    async with http.post(f"{base}/api/v1/messages", json={"chat_id": chat, "user_id": user, "text": text}) as r:
        assert r.status == 202, await r.text()


async def _answers(http: aiohttp.ClientSession, base: str, n: int, chat: str = "c") -> list[str]:
    for _ in range(200):
        async with http.get(f"{base}/api/v1/chats/{chat}/messages") as r:
            texts = [m["text"] for m in (await r.json())["messages"] if m["role"] == "assistant"]
        if len(texts) >= n:
            return texts
        await asyncio.sleep(0.05)
    raise AssertionError(texts)


def expected(fake: FakeLLM) -> tuple[int, int]:
    """What the fake reported for its requests (its echo replies)."""
    prompt = completion = 0
    for req in fake.requests:
        last = next(m for m in reversed(req["messages"]) if m["role"] == "user")
        figures = _usage(req, {"content": "echo: " + last["content"]})
        prompt += figures["prompt_tokens"]
        completion += figures["completion_tokens"]
    return prompt, completion


async def test_usage_on_the_web_chat(make_runner: Any, fake_llm: FakeLLM) -> None:
    runner, _qa = await make_runner({"platforms": {"web": {"enabled": True}}, "model": {"prices": PRICES}})
    web = runner.adapters["web"]
    base = f"http://127.0.0.1:{runner.http_port}"
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {web.token}"}) as http:
        await _post(http, base, "/usage")
        assert "no model calls yet" in (await _answers(http, base, 1))[-1]
        await _post(http, base, "hello there")
        await _answers(http, base, 2)
        await _post(http, base, "and again")
        await _answers(http, base, 3)
        prompt, completion = expected(fake_llm)
        await _post(http, base, "/usage")
        shown = (await _answers(http, base, 4))[-1]
    cost = prompt * 1000 / 1e6 + completion * 4000 / 1e6
    assert f"This conversation: {prompt:,} tokens in, {completion:,} out (2 model calls), about ${cost:.4f}" in shown
    assert f"You today: {prompt:,} tokens in, {completion:,} out (2 model calls), about ${cost:.4f}" in shown
    assert "Daily budget" not in shown  # off by default


async def test_usage_is_stored_per_turn_and_model(make_runner: Any, fake_llm: FakeLLM, db_url: str) -> None:
    from sqlalchemy import select

    from gateway.storage.tables import usage

    runner, qa = await make_runner(db_url=db_url)
    await qa.say("one")
    await qa.wait_for(lambda t: "echo: one" in t)
    await qa.say('two [tool=no_such_tool:{}]')
    await qa.wait_for(lambda t: any(x.startswith("tool said") for x in t))
    for _ in range(100):
        rows = await runner.store.run_read(lambda conn: [dict(r._mapping) for r in conn.execute(
            select(usage).order_by(usage.c.id))])
        if len(rows) == 2:
            break
        await asyncio.sleep(0.02)
    prompt, _completion = expected(fake_llm)  # the replies are not all echoes here: prompts only
    assert [(r["platform"], r["user_id"], r["model"], r["calls"], r["estimated"]) for r in rows] == [
        ("qa", "u1", "fake-model", 1, False), ("qa", "u1", "fake-model", 2, False)]
    assert rows[0]["inbox_id"] != rows[1]["inbox_id"] and rows[0]["session_id"] == rows[1]["session_id"]
    assert sum(r["prompt_tokens"] for r in rows) == prompt


async def test_a_user_over_the_daily_budget_is_told_and_the_model_gets_no_request(
        make_runner: Any, fake_llm: FakeLLM, db_url: str) -> None:
    _runner, qa = await make_runner({"gateway": {"daily_token_budget": 20}}, db_url=db_url)
    await qa.say("hello")
    await qa.wait_for(lambda t: "echo: hello" in t)
    assert len(fake_llm.requests) == 1
    await qa.say("are you there?")
    texts = await qa.wait_for(lambda t: len(t) == 2)
    assert "today's token budget" in texts[-1] and "resets at midnight" in texts[-1] and "in " in texts[-1]
    await qa.say("/compress")
    await qa.wait_for(lambda t: len(t) == 3)
    assert "today's token budget" in qa.texts()[-1]
    await qa.say("/usage")
    await qa.wait_for(lambda t: len(t) == 4)
    assert "Daily budget: " in qa.texts()[-1] and "of 20 tokens used" in qa.texts()[-1]
    assert len(fake_llm.requests) == 1  # nothing more reached the model
    # Another user has a budget of their own.
    await qa.say("hi", chat_id="c2", user_id="u2")
    await qa.wait_for(lambda t: "echo: hi" in t)
    assert len(fake_llm.requests) == 2


async def test_cron_runs_are_nobodys_budget(make_runner: Any, fake_llm: FakeLLM) -> None:
    runner, qa = await make_runner({"gateway": {"daily_token_budget": 1000}})
    meter = UsageMeter()
    meter.add("fake-model", {"prompt_tokens": 50_000, "completion_tokens": 10})
    await runner.usage.record(meter, session_id=None, inbox_id=None, platform="cron", user_id=None)
    await runner.turns.run_detached_turn("cron:job1", "a scheduled prompt", 10)
    assert await runner.usage.spent_today("qa", "u1") == 0
    await qa.say("hello")
    await qa.wait_for(lambda t: "echo: hello" in t)


async def test_streamed_calls_report_usage_too(fake_llm: FakeLLM) -> None:
    llm = LLMClient([Endpoint(fake_llm.base_url, "m", None)], stream=True)
    reply = await asyncio.to_thread(llm.complete, [{"role": "user", "content": "hello"}], None, threading.Event())
    assert fake_llm.requests[0]["stream_options"] == {"include_usage": True}
    assert reply["model"] == "m" and reply["usage"]["prompt_tokens"] == _usage(fake_llm.requests[0], reply)[
        "prompt_tokens"]


def test_a_call_without_usage_is_estimated_and_marked() -> None:
    meter = UsageMeter()
    meter.add("m", None, [{"role": "user", "content": "x" * 400}], {"role": "assistant", "content": "y" * 40})
    meter.add("m", {"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 8}})
    got = meter.snapshot()["m"]
    assert (got.calls, got.estimated, got.cached_tokens) == (2, True, 8)
    assert got.prompt_tokens == 10 + 104 and got.completion_tokens == 5 + 14


def test_cost_uses_the_cached_price_and_names_unpriced_models() -> None:
    prices = {"a": ModelPrice(input_per_million=2, output_per_million=8, cached_input_per_million=0.5)}
    cost, unpriced = cost_of({"a": Totals(1_000_000, 500_000, 400_000, 3), "b": Totals(10, 10, 0, 1)}, prices)
    assert abs(cost - (600_000 * 2 + 400_000 * 0.5 + 500_000 * 8) / 1e6) < 1e-9
    assert unpriced == ["b"]
