"""The agent loop, driven through the real openai SDK against the fake LLM server."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from agent_core.agent import EMPTY_REPLY, GRACE_NOTE, Agent, TurnCallbacks
from agent_core.llm import Endpoint, LLMClient
from tests.fakes.llm import Error, FakeLLM, Hang, Reply, ToolCall, ToolCalls
from tools.config import TerminalConfig, ToolsConfig
from tools.registry import ToolContext, ToolRegistry, tool

ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
}


@pytest.fixture
async def fake():
    async with FakeLLM() as f:
        yield f


@pytest.fixture
def registry():
    reg = ToolRegistry()

    @tool("add", "Add two numbers.", ADD_SCHEMA, target=reg)
    def add(args, ctx):
        return json.dumps({"sum": args["a"] + args["b"]})

    @tool("stop_me", "Simulates /stop arriving while a tool runs.", {"type": "object"}, target=reg)
    def stop_me(args, ctx):
        ctx.interrupt.set()
        return json.dumps({"ok": True})

    return reg


def make_ctx(tmp_path, interrupt=None, terminal=False):
    cfg = ToolsConfig(terminal=TerminalConfig(enabled=terminal, cwd=str(tmp_path)))
    return ToolContext("test:chat", str(tmp_path), interrupt or threading.Event(), cfg)


async def run_turn(
    fake,
    registry,
    tmp_path,
    text="hi",
    *,
    history=(),
    interrupt=None,
    tool_names=None,
    max_iterations=60,
    activity=None,
    **llm_kw,
):
    llm = LLMClient([Endpoint(fake.base_url, "test-model", None)], **llm_kw)
    agent = Agent(llm, registry, tool_names, max_iterations=max_iterations)
    interrupt = interrupt or threading.Event()
    callbacks = TurnCallbacks(on_activity=activity.append) if activity is not None else TurnCallbacks()
    ctx = make_ctx(tmp_path, interrupt)
    return await asyncio.to_thread(agent.run, "SYSTEM", list(history), text, interrupt, callbacks, ctx)


async def test_plain_reply(fake, registry, tmp_path):
    history = [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "ok"}]
    res = await run_turn(fake, registry, tmp_path, "hello", history=history)
    assert (res.status, res.text, res.iterations) == ("ok", "echo: hello", 1)
    assert res.messages == [{"role": "assistant", "content": "echo: hello"}]
    sent = fake.requests[0]
    assert sent["model"] == "test-model"
    assert sent["messages"] == [{"role": "system", "content": "SYSTEM"}, *history, {"role": "user", "content": "hello"}]
    assert [t["function"]["name"] for t in sent["tools"]] == ["add", "stop_me"]
    assert fake.auth_headers == ["Bearer not-needed"]


async def test_tool_call_then_answer_persists_messages_in_order(fake, registry, tmp_path):
    fake.script(ToolCall("add", {"a": 2, "b": 3}, id="call_1"), Reply("it is 5"))
    activity: list[str] = []
    res = await run_turn(fake, registry, tmp_path, activity=activity)
    assert (res.status, res.text, res.iterations) == ("ok", "it is 5", 2)
    assert [m["role"] for m in res.messages] == ["assistant", "tool", "assistant"]
    assert res.messages[0]["tool_calls"][0]["id"] == "call_1"
    assert res.messages[1] == {"role": "tool", "tool_call_id": "call_1", "content": '{"sum": 5}'}
    # The second request carries the tool round trip, exactly as persisted.
    assert fake.requests[1]["messages"][2:] == res.messages[:2]
    assert "tool add" in activity and "tool add done" in activity
    assert activity.index("tool add") < activity.index("tool add done")


async def test_two_tool_calls_in_one_response(fake, registry, tmp_path):
    fake.script(
        ToolCalls([ToolCall("add", {"a": 1, "b": 1}, id="c1"), ToolCall("add", {"a": 2, "b": 2}, id="c2")]),
        Reply("done"),
    )
    res = await run_turn(fake, registry, tmp_path)
    tools = [m for m in res.messages if m["role"] == "tool"]
    assert [(m["tool_call_id"], json.loads(m["content"])["sum"]) for m in tools] == [("c1", 2), ("c2", 4)]
    assert res.text == "done"


async def test_malformed_tool_arguments_are_repaired(fake, registry, tmp_path):
    fake.script(ToolCall("add", '```json\n{"a": 4, "b": 5,}\n```', id="c1"), Reply("nine"))
    res = await run_turn(fake, registry, tmp_path)
    assert json.loads(res.messages[1]["content"]) == {"sum": 9}
    # The repaired JSON is what gets persisted and sent back to the model.
    assert json.loads(res.messages[0]["tool_calls"][0]["function"]["arguments"]) == {"a": 4, "b": 5}
    assert fake.requests[1]["messages"][2]["tool_calls"][0]["function"]["arguments"] == '{"a": 4, "b": 5}'


async def test_a_call_cut_off_inside_a_value_is_not_run(fake, tmp_path):
    """Arguments that stop mid-string (a length limit, a dropped stream) are not completed and run: the
    command cut after ``/tmp/keep`` is not the one the model meant. The model is told; its other calls run."""
    reg = ToolRegistry()
    ran: list[str] = []

    @tool("shell", "Run a command.", {"type": "object", "properties": {"command": {"type": "string"}}}, target=reg)
    def shell(args, ctx):
        ran.append(args.get("command", ""))
        return json.dumps({"ran": args.get("command")})

    fake.script(ToolCalls([ToolCall("shell", '{"command": "echo whole"}', id="c1"),
                           ToolCall("shell", '{"command": "rm -rf /tmp/keep', id="c2"),
                           ToolCall("shell", '{"command": "echo braces missing"', id="c3")]),
                Reply("retrying"))
    res = await run_turn(fake, reg, tmp_path)
    assert ran == ["echo whole", "echo braces missing"]
    results = {m["tool_call_id"]: json.loads(m["content"]) for m in res.messages if m["role"] == "tool"}
    assert "cut off" in results["c2"]["error"] and "not run" in results["c2"]["error"]
    # What goes back to the model is valid JSON, never the cut text completed into a command.
    sent = fake.requests[1]["messages"][2]["tool_calls"]
    assert [json.loads(c["function"]["arguments"]) for c in sent] == [
        {"command": "echo whole"}, {}, {"command": "echo braces missing"}]


async def test_unknown_and_disallowed_tools_get_error_results(fake, registry, tmp_path):
    fake.script(
        ToolCalls([ToolCall("nope", {}, id="c1"), ToolCall("stop_me", {}, id="c2")]),
        Reply("sorry"),
    )
    interrupt = threading.Event()
    res = await run_turn(fake, registry, tmp_path, tool_names=["add"], interrupt=interrupt)
    assert res.status == "ok"
    errors = [json.loads(m["content"])["error"] for m in res.messages if m["role"] == "tool"]
    assert errors == ["unknown tool: nope", "unknown tool: stop_me"]
    assert not interrupt.is_set()
    assert [t["function"]["name"] for t in fake.requests[0]["tools"]] == ["add"]


async def test_empty_final_content_gets_placeholder(fake, registry, tmp_path):
    fake.script(Reply(""))
    res = await run_turn(fake, registry, tmp_path)
    assert res.text == EMPTY_REPLY
    assert res.messages == [{"role": "assistant", "content": EMPTY_REPLY}]


async def test_interrupt_before_first_call(fake, registry, tmp_path):
    interrupt = threading.Event()
    interrupt.set()
    res = await run_turn(fake, registry, tmp_path, interrupt=interrupt)
    assert (res.status, res.messages, res.error_kind) == ("interrupted", [], "interrupted")
    assert fake.requests == []


async def test_interrupt_between_tool_calls_keeps_history_valid(fake, registry, tmp_path):
    fake.script(ToolCalls([ToolCall("stop_me", {}, id="c1"), ToolCall("add", {"a": 1, "b": 2}, id="c2")]))
    res = await run_turn(fake, registry, tmp_path)
    assert res.status == "interrupted"
    assert len(fake.requests) == 1
    # Each tool_call_id still has a result, so the next turn's request is well-formed.
    assert [m.get("tool_call_id") for m in res.messages] == [None, "c1", "c2"]
    assert "interrupted" in json.loads(res.messages[2]["content"])["error"]


async def test_iteration_budget_exhausted_makes_one_grace_call_without_tools(fake, registry, tmp_path):
    fake.responder = lambda req: ToolCall("add", {"a": 1, "b": 1}) if req.get("tools") else Reply("final")
    res = await run_turn(fake, registry, tmp_path, max_iterations=2)
    assert (res.status, res.text, res.iterations) == ("ok", "final", 3)
    assert [bool(r.get("tools")) for r in fake.requests] == [True, True, False]
    assert fake.requests[-1]["messages"][-1] == {"role": "user", "content": GRACE_NOTE}
    assert all(m.get("content") != GRACE_NOTE for m in res.messages)
    assert [m["role"] for m in res.messages] == ["assistant", "tool", "assistant", "tool", "assistant"]


async def test_llm_error_becomes_error_result_with_user_message(fake, registry, tmp_path):
    fake.script(ToolCall("add", {"a": 1, "b": 1}, id="c1"), Error(400, message="bad tool schema"))
    res = await run_turn(fake, registry, tmp_path)
    assert (res.status, res.error_kind) == ("error", "bad_request")
    assert "400" in res.text and "bad tool schema" in res.text
    assert [m["role"] for m in res.messages] == ["assistant", "tool"]


async def test_timeout_is_reported(fake, registry, tmp_path):
    fake.script(Hang(5))
    res = await run_turn(fake, registry, tmp_path, timeout=0.2, max_retries=0)
    assert (res.status, res.error_kind) == ("error", "timeout")
    assert "timeout_seconds" in res.text


async def test_streaming_client_runs_tool_loop(fake, registry, tmp_path):
    fake.script(
        ToolCalls([ToolCall("add", {"a": 20, "b": 22}, id="c1")], text="let me add"),
        Reply("the answer is 42"),
    )
    res = await run_turn(fake, registry, tmp_path, stream=True)
    assert all(r["stream"] for r in fake.requests)
    assert res.messages[0]["content"] == "let me add"
    assert res.messages[0]["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 20, "b": 22}'}}
    ]
    assert json.loads(res.messages[1]["content"]) == {"sum": 42}
    assert res.text == "the answer is 42"


async def test_directive_responder_round_trip_with_real_terminal(fake, tmp_path):
    from tools.registry import load_builtin_tools

    reg = load_builtin_tools()
    llm = LLMClient([Endpoint(fake.base_url, "m", None)])
    agent = Agent(llm, reg, None)
    interrupt = threading.Event()
    ctx = make_ctx(tmp_path, interrupt, terminal=True)
    text = 'run it [tool=terminal:{"command": "echo from-bash"}]'
    res = await asyncio.to_thread(agent.run, "S", [], text, interrupt, TurnCallbacks(), ctx)
    assert res.status == "ok"
    assert res.text.startswith("tool said: ")
    assert json.loads(res.text.removeprefix("tool said: "))["output"] == "from-bash\n"
