"""The fake LLM server speaks the wire format the real openai SDK parses."""

from __future__ import annotations

import asyncio
import json

import openai
import pytest

from tests.fakes.llm import Drop, Error, FakeLLM, FakeLLMThread, Reply, ToolCall, ToolCalls

USER = [{"role": "user", "content": "hello"}]
TOOLS = [{"type": "function", "function": {"name": "terminal", "parameters": {"type": "object"}}}]


@pytest.fixture
async def fake():
    async with FakeLLM() as f:
        yield f


def client(base_url: str, **kw) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key=kw.pop("api_key", "k"), max_retries=0, timeout=5, **kw)


async def call(fake: FakeLLM, messages=USER, **kw):
    return await asyncio.to_thread(
        lambda: client(fake.base_url).chat.completions.create(model="m", messages=messages, **kw)
    )


async def test_default_echo_and_recording(fake):
    resp = await call(fake)
    assert resp.choices[0].message.content == "echo: hello"
    assert resp.choices[0].finish_reason == "stop"
    assert resp.usage.total_tokens > 0
    assert fake.requests[0]["messages"] == USER
    assert fake.auth_headers == ["Bearer k"]


async def test_scripted_steps_are_consumed_in_order(fake):
    fake.script(Reply("one"), ToolCall("terminal", {"command": "ls"}, id="call_x"))
    first, second, third = [await call(fake) for _ in range(3)]
    assert first.choices[0].message.content == "one"
    tc = second.choices[0].message.tool_calls[0]
    assert (tc.id, tc.function.name, json.loads(tc.function.arguments)) == ("call_x", "terminal", {"command": "ls"})
    assert second.choices[0].finish_reason == "tool_calls"
    assert third.choices[0].message.content == "echo: hello"


async def test_streaming_text_and_tool_call_deltas(fake):
    fake.script(Reply("streamed answer"), ToolCalls([ToolCall("a", {"x": 1}), ToolCall("b", '{"y": 2}')]))
    text_chunks = await asyncio.to_thread(
        lambda: list(client(fake.base_url).chat.completions.create(model="m", messages=USER, stream=True))
    )
    assert "".join(c.choices[0].delta.content or "" for c in text_chunks if c.choices) == "streamed answer"
    chunks = await asyncio.to_thread(
        lambda: list(
            client(fake.base_url).chat.completions.create(
                model="m", messages=USER, stream=True, stream_options={"include_usage": True}
            )
        )
    )
    calls: dict[int, dict] = {}
    for c in chunks:
        for d in (c.choices[0].delta.tool_calls or []) if c.choices else []:
            slot = calls.setdefault(d.index, {"name": "", "args": ""})
            slot["name"] += d.function.name or ""
            slot["args"] += d.function.arguments or ""
    assert calls == {0: {"name": "a", "args": '{"x": 1}'}, 1: {"name": "b", "args": '{"y": 2}'}}
    assert chunks[-1].usage is not None


async def test_errors_map_to_sdk_exceptions(fake):
    fake.script(Error(429, retry_after=2), Error.context_overflow(), Error(500), Drop())
    with pytest.raises(openai.RateLimitError) as rl:
        await call(fake)
    assert rl.value.response.headers["retry-after"] == "2"
    with pytest.raises(openai.BadRequestError) as br:
        await call(fake)
    assert br.value.code == "context_length_exceeded"
    with pytest.raises(openai.InternalServerError):
        await call(fake)
    with pytest.raises(openai.APIConnectionError):
        await call(fake)


async def test_api_key_enforced_and_models_listed():
    async with FakeLLM(api_key="right") as fake:
        with pytest.raises(openai.AuthenticationError):
            await call(fake)
        models = await asyncio.to_thread(lambda: client(fake.base_url, api_key="right").models.list())
        assert [m.id for m in models.data] == ["fake-model"]


async def test_directives_drive_behaviour_from_message_text(fake):
    msg = 'please [tool=terminal:{"command": "echo [hi]"}] [sleep=0.01]'
    resp = await call(fake, [{"role": "user", "content": msg}], tools=TOOLS)
    tc = resp.choices[0].message.tool_calls[0]
    assert tc.function.name == "terminal"
    assert json.loads(tc.function.arguments) == {"command": "echo [hi]"}
    follow_up = [
        {"role": "user", "content": msg},
        {"role": "assistant", "content": None, "tool_calls": [tc.model_dump(exclude_none=True)]},
        {"role": "tool", "tool_call_id": tc.id, "content": "hi"},
    ]
    resp = await call(fake, follow_up, tools=TOOLS)
    assert resp.choices[0].message.content == "tool said: hi"
    with pytest.raises(openai.InternalServerError):
        await call(fake, [{"role": "user", "content": "boom [error=503]"}])


async def test_custom_responder(fake):
    fake.responder = lambda req: Reply(f"{len(req['messages'])} messages")
    assert (await call(fake)).choices[0].message.content == "1 messages"


def test_thread_variant_scripts_from_main_thread():
    with FakeLLMThread() as fake:
        c = client(fake.base_url)
        fake.script(Reply("scripted"))
        texts = [c.chat.completions.create(model="m", messages=USER).choices[0].message.content for _ in range(2)]
        assert texts == ["scripted", "echo: hello"]
        assert len(fake.requests) == 2
