"""Streamed replies and progress lines, end to end: the real runner + python-telegram-bot against the fake
Bot API, and the fake model streaming its answers piece by piece.

Time in these tests is the fake model's pacing (pieces a few tenths of a second apart) and the rate bound the
gateway promises (edits of a chat at least ``display.stream_edit_interval`` apart, measured where the fake Bot
API receives them): behaviour bounds, not assertions on how fast Herald is.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.config import parse_config, resolve_paths
from gateway.outbound.streaming import live as live_module
from gateway.platforms.base import Capabilities, InboundMessage, Source
from gateway.runner import GatewayRunner
from gateway.storage.tables import outbox
from tests.fakes.llm import FakeLLM, Reply, ToolCall, ToolCalls
from tests.fakes.telegram_api import FakeTelegram
from tests.support.qa_channel import QAAdapter

ALICE, BOB = 111, 222
INTERVAL = 1.2  # display.stream_edit_interval's default (Telegram's own minimum is 1 s)
STREAMING = {"display": {"streaming": True}}  # tests/conftest.py's runners do not stream unless told

Factory = Callable[..., Awaitable[GatewayRunner]]


@pytest.fixture
async def start_tg(home: Path, tmp_path: Path, fake_llm: FakeLLM, fake_tg: FakeTelegram,
                   monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Factory]:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", fake_tg.token)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    runners: list[GatewayRunner] = []

    async def factory(**overrides: Any) -> GatewayRunner:
        data: dict[str, Any] = {
            "http": {"port": 0},
            "model": {"base_url": fake_llm.base_url, "name": "fake-model", "max_retries": 0},
            "platforms": {"web": {"enabled": False},
                          "telegram": {"enabled": True, "base_url": fake_tg.base_url, "allowed_users": [ALICE, BOB]}},
            "tools": {"terminal": {"cwd": str(tmp_path / "work")}},
        }
        for section, values in overrides.items():
            data.setdefault(section, {}).update(values)
        runner = GatewayRunner(parse_config(data), resolve_paths())
        await runner.start()
        runners.append(runner)
        await until(lambda: runner.adapters["telegram"].state == "connected")
        return runner

    yield factory
    for runner in runners:
        await runner.shutdown()


async def until(predicate: Callable[[], Any], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.02)


def pieces(text: str, n: int) -> list[str]:
    size = -(-len(text) // n)
    return [text[i:i + size] for i in range(0, len(text), size)]


def spacing(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(times)]


async def inbox_status(runner: GatewayRunner) -> list[str]:
    rows = await runner.store.run_read(lambda conn: conn.exec_driver_sql("select status from inbox").all())
    return [r[0] for r in rows]


async def until_inbox(runner: GatewayRunner, statuses: list[str], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while (found := await inbox_status(runner)) != statuses:
        assert time.monotonic() < deadline, found
        await asyncio.sleep(0.05)


ANSWER = ("Here is the **plan**, written as it comes: first we look at `the logs`, then we decide what to change, "
          "and at the end we write it all down so nobody has to ask again.")


@pytest.mark.slow
async def test_a_streamed_reply_is_one_message_edited_at_a_bounded_rate_ending_with_the_exact_formatted_text(
        start_tg, fake_tg, fake_llm):
    runner = await start_tg()
    fake_llm.script(Reply.streamed(pieces(ANSWER, 16), 0.3))  # ~4.8 s of writing
    update = fake_tg.user_message(ALICE, text="make a plan")
    plain = ANSWER.replace("**", "").replace("`", "")
    await until(lambda: fake_tg.sent_to(ALICE) and fake_tg.sent_to(ALICE)[0].text == plain, timeout=20)
    await asyncio.sleep(0.5)  # room for a wrong second message
    sent = fake_tg.sent_to(ALICE)
    assert len(sent) == 1, [m.text for m in sent]  # one message, edited as the answer was written
    reply = sent[0]
    assert reply.reply_to == update["message"]["message_id"]
    # It ends with the exact final text, formatted (entities, no markdown left).
    assert reply.text == plain
    assert {e["type"] for e in reply.entities} == {"bold", "code"}
    # Edited several times, never more often than the interval (from the message's creation on).
    times = [reply.monotonic] + [at for at, _text, _ents in reply.edit_log]
    assert len(reply.edit_log) >= 2
    assert min(spacing(times)) >= INTERVAL, spacing(times)
    # What it showed grew as the answer was written.
    lengths = [len(text) for text in reply.texts]
    assert lengths == sorted(lengths) and lengths[0] < len(reply.text)
    # What was stored is the model's answer, untouched by streaming.
    history = await runner.store.messages.history((await runner.store.sessions.active(f"telegram:dm:{ALICE}"))["id"])
    assert history[-1] == {"role": "assistant", "content": ANSWER}
    assert fake_llm.requests[0].get("stream") is True
    assert await inbox_status(runner) == ["done"]


async def test_a_quick_answer_arrives_in_one_piece_without_edits(start_tg, fake_tg, fake_llm):
    await start_tg()
    fake_tg.user_message(ALICE, text="quick")
    await fake_tg.wait_sent(lambda s: any(m.text == "echo: quick" for m in s))
    await asyncio.sleep(live_module.OPEN_AFTER + 0.3)
    assert [m.edits for m in fake_tg.sent_to(ALICE)] == [0]
    assert fake_tg.calls.count("editMessageText") == 0


@pytest.mark.slow
async def test_a_reply_longer_than_the_limit_continues_in_a_second_message(start_tg, fake_tg, fake_llm):
    await start_tg()
    paragraph = "word " * 199 + "end.\n\n"  # 1000 characters a paragraph
    long_answer = paragraph * 6  # past Telegram's 4096
    fake_llm.script(Reply.streamed(pieces(long_answer, 12), 0.3))
    fake_tg.user_message(ALICE, text="write a lot")
    await until(lambda: len(fake_tg.sent_to(ALICE)) == 2
                and "".join(m.text for m in fake_tg.sent_to(ALICE)).count("end.") == 6, timeout=25)
    await asyncio.sleep(0.5)
    first, second = fake_tg.sent_to(ALICE)
    assert first.edits >= 1  # the first message was the stream's, edited as the answer grew
    assert "".join(m.text for m in (first, second)).replace("\n", "") == long_answer.replace("\n", "").strip()
    assert len(fake_tg.sent_to(ALICE)) == 2


@pytest.mark.slow
async def test_a_tools_progress_line_appears_and_verbose_off_removes_it(start_tg, fake_tg, fake_llm, tmp_path):
    (tmp_path / "work").mkdir()
    runner = await start_tg()
    # The tool runs at once; the model then takes its time, so the turn is still working when the line shows.
    fake_llm.script(ToolCall("terminal", {"command": "echo hi"}), Reply("it said hi", delay=2.5))
    fake_tg.user_message(ALICE, text="say hi")
    await until(lambda: any(m.text == "it said hi" for m in fake_tg.sent_to(ALICE)), timeout=20)
    reply = fake_tg.sent_to(ALICE)[0]
    assert len(fake_tg.sent_to(ALICE)) == 1
    assert any("running echo hi…" in t for t in reply.texts), reply.texts
    assert reply.text == "it said hi"  # the line was progress, not part of the answer

    fake_tg.user_message(ALICE, text="/verbose off")
    await until(lambda: any(m.text.startswith("Progress: off") for m in fake_tg.sent_to(ALICE)))
    key = f"telegram:dm:{ALICE}"
    assert (await runner.store.sessions.active(key))["verbose"] == "off"
    fake_llm.script(ToolCall("terminal", {"command": "echo again"}), Reply("it said again", delay=2.5))
    fake_tg.user_message(ALICE, text="say again")
    await until(lambda: any(m.text == "it said again" for m in fake_tg.sent_to(ALICE)), timeout=20)
    after = fake_tg.sent_to(ALICE)[2:]
    assert [m.text for m in after] == ["it said again"]
    assert not any("running" in t for m in after for t in m.texts)

    # The setting survives a restart.
    await runner.shutdown()
    await start_tg()
    fake_tg.user_message(ALICE, text="/verbose")
    await until(lambda: sum(m.text.startswith("Progress: off") for m in fake_tg.sent_to(ALICE)) == 2)


@pytest.mark.slow
async def test_a_429_on_an_edit_slows_only_that_chat(start_tg, fake_tg, fake_llm):
    await start_tg()
    answers = {ALICE: "Alice gets " + "a fairly long answer " * 8, BOB: "Bob gets " + "another long answer " * 8}

    def responder(request: dict[str, Any]) -> Reply:
        who = ALICE if "alice" in str(request["messages"][-1]["content"]) else BOB
        return Reply.streamed(pieces(answers[who], 18), 0.35)  # ~6.3 s each

    fake_llm.responder = responder
    fake_tg.fail("editMessageText", "429", chat_id=ALICE, retry_after=3)
    fake_tg.user_message(ALICE, text="for alice")
    fake_tg.user_message(BOB, text="for bob")
    await until(lambda: all(fake_tg.sent_to(c) and fake_tg.sent_to(c)[0].text == answers[c].strip()
                            for c in (ALICE, BOB)), timeout=30)
    assert len(fake_tg.faulted) == 1
    hit = fake_tg.faulted[0][0]
    alice, bob = fake_tg.sent_to(ALICE)[0], fake_tg.sent_to(BOB)[0]
    # Alice's chat waits out the 429 (nothing edited there for 3 s), then goes on at half the pace ...
    assert not [at for at, _t, _e in alice.edit_log if hit < at < hit + 3]
    assert alice.edit_log and alice.edit_log[0][0] >= hit + 3
    assert len(alice.edit_log) >= 2 and min(spacing([at for at, _t, _e in alice.edit_log])) >= 2 * INTERVAL
    # ... while Bob's stream goes on at its pace meanwhile.
    assert len([at for at, _t, _e in bob.edit_log if hit < at < hit + 3]) >= 2
    assert min(spacing([bob.monotonic] + [at for at, _t, _e in bob.edit_log])) >= INTERVAL


class PlainQA(QAAdapter):
    """A platform that cannot edit messages."""

    name = "plainqa"
    capabilities = Capabilities(max_message_length=4000, edits=False, typing=True)


async def test_a_platform_without_edits_gets_the_final_reply_only(make_runner, fake_llm):
    _runner, qa = await make_runner(adapters=[PlainQA])
    fake_llm.script(Reply.streamed(pieces(ANSWER, 10), 0.3))
    await qa.say("make a plan")
    await qa.wait_for(lambda t: ANSWER in t, timeout=20)
    await asyncio.sleep(0.3)
    assert qa.texts() == [ANSWER] and qa.edits == []
    assert not fake_llm.requests[-1].get("stream")  # nobody to show pieces to: the model is not asked to stream


@pytest.mark.slow
async def test_a_restart_mid_stream_ends_with_the_reply_shown_exactly_once(start_tg, fake_tg, fake_llm):
    runner = await start_tg(gateway={"drain_seconds": 0})
    first_try = "I was saying something long when " + "the daemon went away " * 10
    final = "After the restart: " + "the whole answer, once. " * 6
    fake_llm.script(Reply.streamed(pieces(first_try, 30), 0.3), Reply.streamed(pieces(final, 8), 0.3))
    update = fake_tg.user_message(ALICE, text="tell me")
    await until(lambda: fake_tg.sent_to(ALICE) and fake_tg.sent_to(ALICE)[0].edits >= 1, timeout=20)
    streamed = fake_tg.sent_to(ALICE)[0]
    await runner.shutdown()  # mid-stream: the turn is cut, its row stays pending, the message half-written
    assert final.strip() not in streamed.text
    runner2 = await start_tg()
    await until(lambda: streamed.text == final.strip(), timeout=25)
    await asyncio.sleep(0.5)
    replies = [m for m in fake_tg.sent_to(ALICE) if "restart" not in m.text.lower() or m is streamed]
    assert replies == [streamed]  # no second copy: the half-written message became the answer
    assert streamed.reply_to == update["message"]["message_id"]
    rows = await runner2.store.run_read(lambda conn: conn.execute(
        outbox.select().where(outbox.c.chat_id == str(ALICE))).mappings().all())
    answer_rows = [r for r in rows if r["inbox_id"] is not None and r["status"] == "sent"]
    assert [r["platform_message_id"] for r in answer_rows] == [str(streamed.message_id)]
    assert await inbox_status(runner2) == ["done"]


def shown(qa: QAAdapter) -> dict[str, str]:
    """Each message the QA channel holds, by id, with its text after every edit."""
    current = {s.message_id: s.text for s in qa.sent}
    for _chat, message_id, text in qa.edits:
        if text is not None:
            current[message_id] = text
    return current


@pytest.mark.slow
async def test_what_is_posted_mid_stream_seals_the_message_and_the_answer_comes_below_it(make_runner, fake_llm,
                                                                                       tmp_path):
    """An approval prompt posted while the reply streams: the message so far stays where it is (above the
    prompt), and the answer is written below the prompt — never edited into a message above it."""
    victim = tmp_path / "build"
    victim.mkdir()
    runner, qa = await make_runner({"tools": {"terminal": {"cwd": str(tmp_path)}}, **STREAMING})
    fake_llm.script(
        ToolCalls([ToolCall("terminal", {"command": f"rm -rf {victim}"})], text="Let me clean up first.",
                  chunks=["Let ", "me ", "clean ", "up ", "first."], chunk_delay=0.4),
        Reply("Cleaned up, all done.", delay=2.0),
    )
    await qa.say("clean up")
    await qa.wait_for(lambda _t: any(s.message.buttons for s in qa.sent), timeout=20)
    streamed, prompt = qa.sent[0], next(s for s in qa.sent if s.message.buttons)
    assert "Let me clean" in shown(qa)[streamed.message_id] and streamed.message_id != prompt.message_id
    await qa.click(f"ap:{prompt.message.buttons[0].id.split(':')[1]}:o")
    await until(lambda: "Cleaned up, all done." in shown(qa).values(), timeout=20)
    await until_inbox(runner, ["done"])  # the final edit may wait its turn after a streamed one
    order = [s.message_id for s in qa.sent]
    answer = next(mid for mid, text in shown(qa).items() if text == "Cleaned up, all done.")
    assert order.index(answer) > order.index(prompt.message_id)  # below the prompt
    # The message above the prompt stays as the record of the step that led to it.
    assert shown(qa)[streamed.message_id].startswith("- running `rm -rf ")
    assert not victim.exists()
    rows = await runner.store.run_read(lambda conn: conn.execute(outbox.select()).mappings().all())
    assert sorted(r["status"] for r in rows if r["inbox_id"] is not None) == ["sealed", "sent"]


async def test_a_stream_message_whose_send_was_not_recorded_is_made_the_answer_where_the_platform_dedups(
        make_runner):
    """The crash fell between a stream's send and its record: the outbox says ``sending``, the web chat already
    shows the message half-written. Recovery sends the chunk again under the same key (the web chat hands the
    same message back) and edits it to the answer: one message, the whole answer."""
    runner, _qa = await make_runner({"platforms": {"web": {"enabled": True}}, **STREAMING})
    web = runner.adapters["web"]
    msg = InboundMessage(Source("web", "c9", "owner"), "tell me", "c9/q1", received_at=1.0)
    row = await runner.store.inbox.add("web", "c9/q1", "web:dm:c9", msg.to_dict(), owner="gone-host:1:1:x",
                                       lease_until=1.0)
    await runner.store.inbox.mark(row, "replied", reply="The **whole** answer.")
    key = "herald-0123456789abcdef0123456789abcdef"
    await runner.store.outbox.begin(row, "web", "c9", 0, key=key)  # the stream's message, never recorded as out
    await runner.store.chat_log.add("web", "c9", f"a-{key}", "assistant", "The who", None)
    assert await runner.recovery.recover(web) == 1
    deadline = time.monotonic() + 10
    while (await runner.store.inbox.get(row))["status"] != "done":
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    log = [r for r in await runner.store.chat_log.recent("web", "c9") if r["role"] == "assistant"]
    assert [(r["message_id"], r["text"]) for r in log] == [(f"a-{key}", "The **whole** answer.")]


def test_progress_lines_follow_the_verbose_setting_and_mask_secrets():
    from gateway.outbound.streaming.progress import MAX_LINES, compose, tool_line
    from tools.registry import load_builtin_tools, registry

    load_builtin_tools()
    terminal = registry.get("terminal")
    secret = "s3cr3t-v4lue-123"
    line = tool_line("terminal", json.dumps({"command": f"curl -H 'X-Key: {secret}' https://x"}), terminal.progress,
                     [secret])
    assert line.startswith("running `curl") and secret not in line and "[REDACTED]" in line
    assert tool_line("read_file", {"path": "README.md"}, registry.get("read_file").progress, []) == \
        "reading `README.md`"
    assert tool_line("memory", "{not json", None, []) == "using `memory`"
    lines = [("text", "Let me **look**."), ("tool", "running `ls`…"), ("tool", "reading `a.txt`")]
    assert compose(lines, "The answer", "off") == "The answer"
    assert compose(lines, "The answer", "tools") == "- running `ls`…\n- reading `a.txt`\n\nThe answer"
    assert compose(lines, "", "all") == "- 💬 Let me look.\n- running `ls`…\n- reading `a.txt`"
    many = [("tool", f"step {i}") for i in range(MAX_LINES + 3)]
    shown = compose(many, "", "tools").splitlines()
    assert shown[0] == "- … 3 earlier step(s)" and shown[-1] == f"- step {MAX_LINES + 2}"
    assert len(shown) == MAX_LINES + 1


@pytest.mark.slow
async def test_stop_mid_stream_says_so_on_the_message_and_sends_no_answer(make_runner, fake_llm):
    runner, qa = await make_runner(STREAMING)
    fake_llm.script(Reply.streamed(pieces("A long answer that will be cut off before its end. " * 4, 20), 0.3))
    await qa.say("go on")
    await until(lambda: qa.sent and qa.edits, timeout=20)
    await qa.say("/stop")
    await until(lambda: any("(stopped)" in (text or "") for _c, _m, text in qa.edits), timeout=10)
    await until_inbox(runner, ["cancelled", "done"])
    streamed = qa.sent[0]
    assert shown(qa)[streamed.message_id].endswith("⏹ _(stopped)_")
    assert [s.text for s in qa.sent[1:]] == ["⏹ Stopped."]  # no answer sent after it


@pytest.mark.slow
async def test_a_reply_whose_message_was_taken_over_opens_no_stream_and_sends_nothing(make_runner, fake_llm):
    """Another instance took the message over while this one's model was still writing (this one stalled past
    its lease): no stream message is opened here, and neither the answer nor the row's status is this one's."""
    from gateway.storage.tables import inbox

    runner, qa = await make_runner(STREAMING)
    fake_llm.script(Reply.streamed(pieces(ANSWER, 8), 0.4))  # ~3.2 s of writing
    assert await qa.say("make a plan")
    await runner.store.run_write(lambda c: c.execute(inbox.update().values(owner="elsewhere:1:1:x")))
    await asyncio.sleep(live_module.OPEN_AFTER + 3.5)  # past the point a stream would open, and the answer's end
    assert qa.sent == []
    rows = await runner.store.run_read(lambda conn: conn.execute(outbox.select()).mappings().all())
    assert rows == []
    assert await inbox_status(runner) == ["pending"]
