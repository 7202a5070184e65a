"""Streaming in agent_core: the loop passes the model's text on as it arrives, a retry voids what came
before, and the result (what is stored and delivered) is the same as without streaming."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from agent_core.agent import Agent, TurnCallbacks
from agent_core.llm import Endpoint, LLMClient
from tests.fakes.llm import FakeLLM, Reply, ToolCall, ToolCalls
from tools.config import TerminalConfig, ToolsConfig
from tools.registry import ToolContext, ToolRegistry, tool

MSGS = [{"role": "user", "content": "hi"}]


def client(url: str, **kw) -> LLMClient:
    kw.setdefault("rng", lambda: 0.5)
    return LLMClient([Endpoint(url, "m", None)], **kw)


class Recorder:
    """What the callbacks saw, in order: ("text", piece), ("restart",), ("step", roles)."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def text(self, piece: str) -> None:
        self.events.append(("text", piece))

    def restart(self) -> None:
        self.events.append(("restart",))

    def step(self, msgs) -> None:
        self.events.append(("step", tuple(m["role"] for m in msgs)))

    def texts(self) -> str:
        return "".join(e[1] for e in self.events if e[0] == "text")


async def test_the_client_passes_each_piece_on_and_returns_the_same_message():
    async with FakeLLM() as fake:
        fake.script(Reply.streamed(["Hel", "lo, ", "world"], 0.0), Reply("Hello, world"))
        seen: list[str] = []
        llm = client(fake.base_url)
        streamed = await asyncio.to_thread(llm.complete, MSGS, None, None, on_text=seen.append)
        plain = await asyncio.to_thread(llm.complete, MSGS, None, None)
        assert seen == ["Hel", "lo, ", "world"]
        assert streamed == plain  # the same message, model and token usage
        assert (streamed["role"], streamed["content"], streamed["model"]) == ("assistant", "Hello, world", "m")
        assert fake.requests[0].get("stream") is True and not fake.requests[1].get("stream")


async def test_a_stream_cut_halfway_is_retried_and_what_came_before_is_void():
    async with FakeLLM() as fake:
        fake.script(Reply.streamed(["first ", "attempt ", "lost"], 0.0, cut_after=2),
                    Reply.streamed(["second ", "attempt"], 0.0))
        rec = Recorder()
        llm = client(fake.base_url, max_retries=2, sleep=lambda _d: None)
        msg = await asyncio.to_thread(llm.complete, MSGS, None, None, on_text=rec.text, on_restart=rec.restart)
        assert msg["content"] == "second attempt"
        assert rec.events == [("text", "first "), ("text", "attempt "), ("restart",), ("text", "second "),
                              ("text", "attempt")]


async def test_the_loop_streams_every_model_call_and_its_steps_end_each_calls_text(tmp_path):
    registry = ToolRegistry()

    @tool("add", "Add.", {"type": "object", "properties": {}}, target=registry)
    def add(args, ctx):
        return json.dumps({"sum": 3})

    async with FakeLLM() as fake:
        fake.script(ToolCalls([ToolCall("add", {"a": 1, "b": 2})], text="Let me add.", chunks=["Let ", "me add."]),
                    Reply.streamed(["It is ", "3."], 0.0))
        rec = Recorder()
        agent = Agent(client(fake.base_url), registry, ["add"])
        ctx = ToolContext("t", str(tmp_path), threading.Event(), ToolsConfig(terminal=TerminalConfig(enabled=False)))
        callbacks = TurnCallbacks(on_step=rec.step, on_text=rec.text, on_text_restart=rec.restart)
        result = await asyncio.to_thread(agent.run, "sys", [], "add 1 and 2", threading.Event(), callbacks, ctx)
        assert result.status == "ok" and result.text == "It is 3."
        assert rec.events == [("text", "Let "), ("text", "me add."), ("step", ("assistant",)), ("step", ("tool",)),
                              ("text", "It is "), ("text", "3.")]
        # Stored as without streaming: the intermediate text on its assistant message, the answer last.
        assert [m.get("content") for m in result.messages if m["role"] == "assistant"] == ["Let me add.", "It is 3."]


async def test_a_broken_text_callback_does_not_fail_the_turn(tmp_path):
    def broken(_piece: str) -> None:
        raise RuntimeError("display gone")

    async with FakeLLM() as fake:
        fake.script(Reply.streamed(["still ", "answered"], 0.0))
        agent = Agent(client(fake.base_url), ToolRegistry(), [])
        ctx = ToolContext("t", str(tmp_path), threading.Event(), ToolsConfig(terminal=TerminalConfig(enabled=False)))
        result = await asyncio.to_thread(agent.run, "sys", [], "hi", threading.Event(), TurnCallbacks(on_text=broken),
                                         ctx)
        assert result.status == "ok" and result.text == "still answered"


def test_server_sent_events_are_read_to_the_end_as_json():
    from agent_core.llm import _DONE, _sse_json

    lines = [b": keep-alive", b"", b"event: message", b'data: {"a": 1}', b"", b'data: {"b":', b"data: 2}", b"",
             b"data: [DONE]", b"", b'data: {"late": true}']
    assert list(_sse_json(iter(lines))) == [{"a": 1}, {"b": 2}, _DONE, {"late": True}]


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"])
def test_a_body_splits_into_the_same_lines_wherever_its_chunks_are_cut(ending):
    """Server-sent events may end lines in LF, CRLF or CR; a line (or a CRLF) cut across two chunks is one."""
    from agent_core.llm import _lines

    lines = [b": keep-alive", b"", b'data: {"a": "\xc3\xa9"}', b"", b"data: [DONE]", b""]
    body = ending.join([*lines, b'data: {"last": 1}'])
    whole = list(_lines(iter([body])))
    assert whole == [*lines, b'data: {"last": 1}']
    for cut in range(1, len(body)):
        for second in range(cut, len(body)):
            pieces = [body[:cut], body[cut:second], body[second:]]
            assert list(_lines(iter(pieces))) == whole, (cut, second)


async def test_a_streamed_reply_reuses_the_connection():
    """Each streamed reply is read to its end, so the next request goes over the same connection."""
    async with FakeLLM() as fake:
        llm = client(fake.base_url)

        def three() -> None:  # in one thread: each worker thread keeps connections of its own
            for _ in range(3):
                llm.complete(MSGS, None, None, on_text=lambda _p: None)

        await asyncio.to_thread(three)
        assert len(fake.peers) == 3 and len(set(fake.peers)) == 1


async def test_a_stream_closed_cleanly_before_its_end_is_a_cut_answer_retried_not_the_whole_reply():
    """A body that ends between two events (a proxy closing it) without finish_reason or [DONE] is a fragment:
    it used to be taken as the whole answer (and stored). Now it is a cut stream, retried; without retries
    left it fails, reported as the fault it is."""
    from agent_core.errors import LLMError

    faults: list[str] = []
    async with FakeLLM() as fake:
        fake.script(Reply.streamed(["half ", "an ", "answer"], 0.0, cut_after=2, cut_clean=True),
                    Reply.streamed(["the ", "whole ", "answer"], 0.0))
        llm = client(fake.base_url, stream=True, max_retries=1, sleep=lambda _s: None, on_fault=faults.append)
        out = await asyncio.to_thread(llm.complete, MSGS)
        assert out["content"] == "the whole answer" and faults == ["stream_cut"]
        fake.script(Reply.streamed(["half ", "an ", "answer"], 0.0, cut_after=1, cut_clean=True))
        llm = client(fake.base_url, stream=True, max_retries=0, on_fault=faults.append)
        try:
            await asyncio.to_thread(llm.complete, MSGS)
        except LLMError as exc:
            assert exc.fault_kind == "stream_cut" and "cut off" in exc.user_message()
        else:
            raise AssertionError("a cut stream was taken as the answer")
