"""The runner end to end through the QA channel, the real agent core and the fake model server."""

from __future__ import annotations

import asyncio

from gateway.turns.executor import NO_MODEL_TEXT
from tests.support.qa_channel import UntrustedQAAdapter


def answers(texts: list[str]) -> list[str]:
    return [t for t in texts if t.startswith("echo:")]


async def test_plain_reply_is_persisted_and_recorded(make_runner, fake_llm):
    runner, qa = await make_runner()
    assert await qa.say("hello", message_id="m-1")
    await qa.wait_for(lambda t: "echo: hello" in t)
    for _ in range(100):  # the inbox row is finished in the same commit that records the sent chunk
        if not await runner.store.inbox.unfinished():
            break
        await asyncio.sleep(0.02)
    assert await runner.store.inbox.unfinished() == []
    session = await runner.store.sessions.active("qa:dm:c1")
    history = await runner.store.messages.history(session["id"])
    assert [m["role"] for m in history] == ["user", "assistant"]
    assert history[1]["content"] == "echo: hello"


async def test_duplicate_platform_message_is_answered_once(make_runner, fake_llm):
    _runner, qa = await make_runner()
    assert await qa.say("once", message_id="same")
    assert not await qa.say("once", message_id="same")
    await qa.wait_for(lambda t: "echo: once" in t)
    await asyncio.sleep(0.2)
    assert qa.texts().count("echo: once") == 1
    assert len(fake_llm.requests) == 1


async def test_history_is_loaded_each_turn(make_runner, fake_llm):
    _runner, qa = await make_runner()
    await qa.say("first")
    await qa.wait_for(lambda t: "echo: first" in t)
    await qa.say("second")
    await qa.wait_for(lambda t: "echo: second" in t)
    contents = [m.get("content") for m in fake_llm.requests[-1]["messages"]]
    assert contents[1:] == ["first", "echo: first", "second"]
    assert fake_llm.requests[-1]["messages"][0]["role"] == "system"
    # The system prompt is byte-stable across turns (prompt caching).
    assert fake_llm.requests[0]["messages"][0] == fake_llm.requests[1]["messages"][0]


async def test_only_the_newest_history_goes_to_the_model(make_runner, fake_llm):
    runner, qa = await make_runner({"agent": {"max_history_messages": 3}})
    for word in ("one", "two", "three"):
        await qa.say(word)
        await qa.wait_for(lambda t, w=word: f"echo: {w}" in t)
    contents = [m.get("content") for m in fake_llm.requests[-1]["messages"][1:]]
    assert contents == ["two", "echo: two", "three"]  # the 3 newest cut at a user message, then the new one
    from gateway.platforms.base import Source

    session = await runner.store.sessions.active(runner.key_for(Source(qa.name, "c1", "u1")))
    assert len(await runner.store.messages.history(session["id"])) == 6  # nothing is deleted


async def test_busy_session_queues_and_answers_in_order(make_runner, fake_llm):
    _runner, qa = await make_runner()
    await qa.say("one [sleep=0.5]")
    await asyncio.sleep(0.1)
    await qa.say("two")
    await qa.say("three")
    texts = await qa.wait_for(lambda t: len(answers(t)) == 3)
    assert answers(texts) == ["echo: one [sleep=0.5]", "echo: two", "echo: three"]
    assert any("Queued" in t for t in texts)


async def test_other_sessions_are_not_blocked_by_a_busy_one(make_runner, fake_llm):
    _runner, qa = await make_runner()
    await qa.say("slow [sleep=1.5]", chat_id="a")
    await asyncio.sleep(0.05)
    await qa.say("fast", chat_id="b")
    await qa.wait_for(lambda t: "echo: fast" in t, chat_id="b")
    assert "echo: slow [sleep=1.5]" not in qa.texts("a")


async def test_queue_overflow_tells_the_user_and_drops_nothing_silently(make_runner, fake_llm):
    runner, qa = await make_runner({"gateway": {"max_queue": 1}})
    await qa.say("one [sleep=0.5]")
    await asyncio.sleep(0.1)
    await qa.say("two")
    await qa.say("three", message_id="overflow")
    texts = await qa.wait_for(lambda t: len(answers(t)) == 2)
    assert answers(texts) == ["echo: one [sleep=0.5]", "echo: two"]
    assert any("did not take this one" in t for t in texts)
    assert runner.counters.queue_rejected == 1


async def test_stop_interrupts_and_the_abandoned_answer_never_arrives(make_runner, fake_llm):
    runner, qa = await make_runner()
    await qa.say("slow [sleep=1]")
    await asyncio.sleep(0.2)
    await qa.say("/stop")
    await qa.wait_for(lambda t: any(x.startswith("⏹ Stopped") for x in t))
    await qa.say("next")
    await qa.wait_for(lambda t: "echo: next" in t)
    await asyncio.sleep(1.2)
    assert "echo: slow [sleep=1]" not in qa.texts()
    session = await runner.store.sessions.active("qa:dm:c1")
    history = await runner.store.messages.history(session["id"])
    assert [m["content"] for m in history] == ["slow [sleep=1]", "next", "echo: next"]


async def test_stop_when_idle_says_so(make_runner):
    _runner, qa = await make_runner()
    await qa.say("/stop")
    await qa.wait_for(lambda t: "Nothing is running." in t)


async def test_interrupt_mode_replaces_the_running_turn(make_runner, fake_llm):
    _runner, qa = await make_runner({"gateway": {"busy_mode": "interrupt"}})
    await qa.say("slow [sleep=1]")
    await asyncio.sleep(0.2)
    await qa.say("instead")
    await qa.wait_for(lambda t: "echo: instead" in t)
    await asyncio.sleep(1.0)
    texts = qa.texts()
    assert "echo: slow [sleep=1]" not in texts
    assert any("Stopped the previous turn" in t for t in texts)


async def test_watchdog_ends_a_stuck_turn_and_frees_the_session(make_runner, fake_llm):
    runner, qa = await make_runner({"gateway": {"turn_timeout_seconds": 0.3}, "model": {"timeout_seconds": 5}})
    await qa.say("stuck [sleep=3]")  # the hang is this message's own, whenever its turn gets to the model
    await qa.wait_for(lambda t: any("I stopped this turn" in x for x in t))
    await qa.say("again")
    await qa.wait_for(lambda t: "echo: again" in t)
    assert not any("stuck" in x for x in qa.texts())
    assert runner.counters.turns_timed_out == 1


async def test_typing_indicator_while_a_turn_runs(make_runner, fake_llm):
    _runner, qa = await make_runner()
    await qa.say("x [sleep=0.3]")
    await qa.wait_for(lambda t: "echo: x [sleep=0.3]" in t)
    assert qa.typing_calls >= 1


async def test_new_starts_a_fresh_session_with_lineage(make_runner, fake_llm):
    runner, qa = await make_runner()
    await qa.say("remember me")
    await qa.wait_for(lambda t: "echo: remember me" in t)
    old = await runner.store.sessions.active("qa:dm:c1")
    await qa.say("/new")
    await qa.wait_for(lambda t: any("fresh conversation" in x for x in t))
    await qa.say("who?")
    await qa.wait_for(lambda t: "echo: who?" in t)
    new = await runner.store.sessions.active("qa:dm:c1")
    assert new["id"] != old["id"] and new["parent_id"] == old["id"]
    assert [m["content"] for m in fake_llm.requests[-1]["messages"][1:]] == ["who?"]


async def test_a_message_sent_right_after_a_command_is_answered_in_what_the_command_left(make_runner, fake_llm):
    """/new and the next message sent at once (one Telegram batch, a quick typist): the message is answered in
    the fresh conversation, never in the old one the command was still ending."""
    runner, qa = await make_runner()
    await qa.say("remember me")
    await qa.wait_for(lambda t: "echo: remember me" in t)
    old = await runner.store.sessions.active("qa:dm:c1")
    for n in range(5):
        assert await qa.say("/new")
        assert await qa.say(f"who {n}?")
        await qa.wait_for(lambda t, n=n: f"echo: who {n}?" in t)
        assert [m["content"] for m in fake_llm.requests[-1]["messages"][1:]] == [f"who {n}?"]
    new = await runner.store.sessions.active("qa:dm:c1")
    assert new["id"] != old["id"]
    history = await runner.store.messages.history(new["id"])
    assert [m["content"] for m in history] == ["who 4?", "echo: who 4?"]


async def test_commands_never_reach_the_model(make_runner, fake_llm):
    _runner, qa = await make_runner()
    for cmd in ("/help", "/status", "/queue"):
        await qa.say(cmd)
    texts = await qa.wait_for(lambda t: len(t) == 3)
    assert fake_llm.requests == []
    assert "/new" in texts[0] and "/stop" in texts[0]
    assert "Idle" in texts[1]
    assert "empty" in texts[2]


async def test_prose_that_starts_with_a_slash_reaches_the_model(make_runner, fake_llm):
    """An unknown /word typed in a message is prose, not a command the user got wrong."""
    _runner, qa = await make_runner()
    for text in ("/var/log is full, why?", "/etc is full", "/nosuchcommand please"):
        await qa.say(text)
        await qa.wait_for(lambda t, text=text: f"echo: {text}" in t)
    assert [r["messages"][-1]["content"] for r in fake_llm.requests] == [
        "/var/log is full, why?", "/etc is full", "/nosuchcommand please"]
    assert not any("Unknown command" in t for t in qa.texts())


async def test_an_unknown_native_command_is_answered_not_sent_to_the_model(make_runner, fake_llm):
    """A command sent through the platform's own mechanism (a slash-command interaction) is a command."""
    from gateway.platforms.base import CommandCall, InboundMessage, Source

    _runner, qa = await make_runner()
    msg = InboundMessage(Source(qa.name, "c1", "u1"), "/nosuch", "n1", command=CommandCall("nosuch", "", native=True))
    assert await qa.accept(msg)
    texts = await qa.wait_for(lambda t: len(t) == 1)
    assert "Unknown command /nosuch" in texts[0] and fake_llm.requests == []


async def test_status_while_busy_bypasses_the_queue(make_runner, fake_llm):
    _runner, qa = await make_runner()
    await qa.say("slow [sleep=0.6]")
    await asyncio.sleep(0.2)
    await qa.say("/status")
    texts = await qa.wait_for(lambda t: any(x.startswith("Busy") for x in t))
    assert "echo: slow [sleep=0.6]" not in texts  # the answer to /status came first
    await qa.wait_for(lambda t: "echo: slow [sleep=0.6]" in t)


async def test_no_model_configured_answers_how_to_configure(make_runner, fake_llm):
    _runner, qa = await make_runner(model=False)
    await qa.say("hello")
    await qa.wait_for(lambda t: NO_MODEL_TEXT in t)
    assert fake_llm.requests == []


async def test_unknown_sender_gets_nothing_from_the_model(make_runner, fake_llm):
    runner, qa = await make_runner(adapters=[UntrustedQAAdapter])
    assert not await qa.say("let me in")
    await qa.wait_for(lambda t: len(t) == 1)
    await asyncio.sleep(0.2)
    assert fake_llm.requests == [] and "pairing code" in qa.texts()[0] and len(qa.texts()) == 1
    assert runner.counters.messages_denied == 1


async def test_group_chats_have_a_session_per_user(make_runner, fake_llm):
    _runner, qa = await make_runner()
    await qa.say("from alice", chat_id="g", user_id="alice", chat_type="group")
    await qa.wait_for(lambda t: "echo: from alice" in t)
    await qa.say("from bob", chat_id="g", user_id="bob", chat_type="group")
    await qa.wait_for(lambda t: "echo: from bob" in t)
    bob_request = fake_llm.requests[-1]["messages"]
    assert all("alice" not in (m.get("content") or "") for m in bob_request)


async def test_adapter_that_fails_to_start_is_retried(make_runner, fake_llm, monkeypatch):
    monkeypatch.setattr("gateway.inbound.supervisor.random.random", lambda: 0.0)

    class Flaky(UntrustedQAAdapter):
        name = "flaky"

        def __init__(self, runner):
            super().__init__(runner)
            self.fail_starts = 1

    runner, flaky = await make_runner(adapters=[Flaky])
    for _ in range(100):
        if flaky.state == "retrying":
            break
        await asyncio.sleep(0.01)
    ready, states = runner.readiness()
    assert not ready and states["flaky"]["state"] == "retrying"
    assert states["flaky"]["error"] == "ConnectionError"  # the class only: /readyz is unauthenticated
    assert "unreachable" in runner.readiness(detail=True)[1]["flaky"]["last_error"]
    for _ in range(100):
        if runner.readiness()[0]:
            break
        await asyncio.sleep(0.05)
    assert runner.readiness()[0] and flaky.start_calls == 2


async def test_the_agents_shell_cannot_read_the_daemons_secrets(make_runner, fake_llm, monkeypatch):
    monkeypatch.setenv("SOME_BOT_TOKEN", "tok-very-secret-value")
    monkeypatch.setenv("HERALD_TEST_MODEL_KEY", "sk-test-not-for-the-shell")
    _runner, qa = await make_runner({"tools": {"terminal": {"enabled": True}},
                                    "model": {"api_key_env": "HERALD_TEST_MODEL_KEY"}})
    await qa.say('[tool=terminal:{"command":"env; echo marker-$((40+2))"}]')
    texts = await qa.wait_for(lambda t: any("tool said" in x for x in t))
    out = next(x for x in texts if "tool said" in x)
    assert "marker-42" in out
    assert "tok-very-secret-value" not in out and "sk-test-not-for-the-shell" not in out


async def test_messages_name_commands_the_way_this_platform_types_them(make_runner, fake_llm, tmp_path):
    """Where "/" belongs to the platform (Slack), the gateway writes "!stop", "!approve ID", ... everywhere."""
    from dataclasses import replace

    from tests.support.qa_channel import QAAdapter

    class Bang(QAAdapter):
        name = "bang"
        capabilities = replace(QAAdapter.capabilities, command_prefix="!")

    _runner, qa = await make_runner({"tools": {"terminal": {"cwd": str(tmp_path)}}}, adapters=[Bang])
    await qa.say("/help")
    (help_text,) = await qa.wait_for(lambda t: len(t) == 1)
    assert "!new" in help_text and "!stop" in help_text and "/new" not in help_text
    await qa.say('[tool=terminal:{"command": "rm -rf ' + str(tmp_path / "x") + '"}]')
    prompt = (await qa.wait_for(lambda t: any("Approval needed" in x for x in t)))[-1]
    assert "!approve" in prompt and "!deny" in prompt and "/approve" not in prompt
