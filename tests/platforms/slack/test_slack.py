"""Slack end to end: the real runner, slack-bolt and slack_sdk against the fake Slack (Socket Mode unless a test
says otherwise) and the fake model. HTTP mode's signatures are in test_slack_http.py, mrkdwn in
test_slack_mrkdwn.py, the conformance suite's Slack drivers in tests/platforms/conformance/slack_driver.py."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.config import parse_config, resolve_paths
from gateway.outbound.delivery import RESENDING
from gateway.platforms.base import Button, OutboundMessage
from gateway.runner import GatewayRunner
from tests.fakes.llm import FakeLLM, Reply, last_user_message, message_text
from tests.fakes.slack_api import BOT_USER, FakeSlack
from tests.platforms.conformance.telegram_driver import free_port
from tests.support.polling import wait_until

ALICE, BOB, STRANGER = "U0ALICE", "U0BOB", "U0STRANGER"
DM, BOB_DM, STRANGER_DM, CHANNEL = "D0ALICE", "D0BOB", "D0STRANGER", "C0GENERAL"

Factory = Callable[..., Awaitable[GatewayRunner]]


@pytest.fixture
async def start_slack(home: Path, tmp_path: Path, fake_llm: FakeLLM, fake_slack: FakeSlack,
                      monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Factory]:
    monkeypatch.setenv("SLACK_BOT_TOKEN", fake_slack.bot_token)
    monkeypatch.setenv("SLACK_APP_TOKEN", fake_slack.app_token)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", fake_slack.signing_secret)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    runners: list[GatewayRunner] = []

    async def factory(overrides: dict[str, Any] | None = None, **slack: Any) -> GatewayRunner:
        section = {"enabled": True, "api_base_url": fake_slack.api_url, "allowed_users": [ALICE, BOB]}
        section.update(slack)
        raw: dict[str, Any] = {
            "http": {"port": free_port() if slack.get("mode") == "http" else 0},
            "model": {"base_url": fake_llm.base_url, "name": "fake-model", "max_retries": 0},
            "platforms": {"web": {"enabled": False}, "slack": section},
        }
        for key, value in (overrides or {}).items():
            raw[key] = {**raw.get(key, {}), **value}
        runner = GatewayRunner(parse_config(raw), resolve_paths())
        await runner.start()
        runners.append(runner)
        await wait_until(lambda: runner.adapters["slack"].state == "connected")
        return runner

    yield factory
    for runner in runners:
        await runner.shutdown()


def model_calls(llm: FakeLLM, text: str) -> int:
    return sum(message_text(last_user_message(r)) == text for r in llm.requests)


async def say(fake: FakeSlack, channel: str, text: str, user: str = ALICE, **kw: Any) -> str:
    """A user's message over Socket Mode; returns its ts."""
    body = fake.message(channel, user, text, **kw)
    await fake.deliver_socket("events_api", body)
    return str(body["event"]["ts"])


# ---------------------------------------------------------------------------------------------- sessions


async def test_a_dm_is_answered_in_mrkdwn_at_the_top_level(start_slack, fake_slack, fake_llm):
    await start_slack()
    fake_llm.script(Reply("**Done**: see [the docs](https://example.com/a?b=1&c=2), `x<y` & ~~old~~"))
    await say(fake_slack, DM, "hello")
    [answer] = await fake_slack.wait_sent(lambda sent: len(sent) == 1)
    assert answer.text == "*Done*: see <https://example.com/a?b=1&amp;c=2|the docs>, `x&lt;y` &amp; ~old~"
    assert answer.channel == DM and answer.thread_ts is None and answer.blocks == []
    assert message_text(last_user_message(fake_llm.requests[0])) == "hello"


async def test_a_channel_needs_a_mention_and_is_answered_in_the_thread_of_the_message(
        start_slack, fake_slack, fake_llm):
    await start_slack()
    await say(fake_slack, CHANNEL, "just chatting, not for the bot")
    ts = await say(fake_slack, CHANNEL, f"<@{BOT_USER}> what is up?")
    [answer] = await fake_slack.wait_sent(lambda sent: len(sent) == 1)
    assert answer.text == "echo: what is up?" and answer.thread_ts == ts
    await asyncio.sleep(0.2)
    assert model_calls(fake_llm, "just chatting, not for the bot") == 0
    assert len(fake_slack.sent) == 1


async def test_a_follow_up_in_a_thread_the_bot_is_in_needs_no_mention_even_after_a_restart(
        start_slack, fake_slack, fake_llm):
    runner = await start_slack()
    root = await say(fake_slack, CHANNEL, f"<@{BOT_USER}> first")
    await fake_slack.wait_sent(lambda sent: len(sent) == 1)
    await say(fake_slack, CHANNEL, "and a follow-up", thread_ts=root)
    other = await say(fake_slack, CHANNEL, "a thread without the bot")
    await say(fake_slack, CHANNEL, "chatter in it", thread_ts=other)
    sent = await fake_slack.wait_sent(lambda sent: any(m.text == "echo: and a follow-up" for m in sent))
    assert all(m.thread_ts == root for m in sent)
    # A new daemon does not remember the thread: it asks Slack whether the bot posted there.
    await runner.shutdown()
    await start_slack()
    await say(fake_slack, CHANNEL, "after the restart", thread_ts=root)
    await fake_slack.wait_sent(lambda sent: any(m.text == "echo: after the restart" for m in sent))
    assert "conversations.replies" in fake_slack.calls
    assert model_calls(fake_llm, "chatter in it") == 0
    # One thread, one session: the follow-up's history holds the first exchange.
    last = fake_llm.requests[-1]["messages"]
    assert any(message_text(m) == "echo: and a follow-up" for m in last)


async def test_reply_in_thread_off_answers_in_the_channel_and_require_mention_off_takes_all(
        start_slack, fake_slack):
    await start_slack(reply_in_thread=False, require_mention=False)
    await say(fake_slack, CHANNEL, "no mention needed")
    [answer] = await fake_slack.wait_sent(lambda sent: len(sent) == 1)
    assert answer.text == "echo: no mention needed" and answer.thread_ts is None


async def test_the_message_and_app_mention_events_of_one_mention_are_answered_once(
        start_slack, fake_slack, fake_llm):
    runner = await start_slack()
    body = fake_slack.message(CHANNEL, ALICE, f"<@{BOT_USER}> once please")
    mention = json.loads(json.dumps(body))
    mention["event"]["type"], mention["event_id"] = "app_mention", "EvOTHER"
    del mention["event"]["channel_type"]
    await fake_slack.deliver_socket("events_api", body)
    await fake_slack.deliver_socket("events_api", mention)
    await fake_slack.wait_sent(lambda sent: len(sent) == 1)
    await asyncio.sleep(0.3)
    assert len(fake_slack.sent) == 1 and model_calls(fake_llm, "once please") == 1
    assert runner.counters.messages_duplicate == 1


# ---------------------------------------------------------------------------------------------- sending


@pytest.mark.slow
async def test_a_429_makes_only_that_conversation_wait(start_slack, fake_slack):
    await start_slack()
    fake_slack.flood(DM, 2.0)
    started = time.monotonic()
    await say(fake_slack, DM, "slow lane")
    await say(fake_slack, BOB_DM, "fast lane", user=BOB)
    await fake_slack.wait_sent(lambda sent: any(m.text == "echo: fast lane" for m in sent))
    assert not any(m.text == "echo: slow lane" for m in fake_slack.sent)
    await fake_slack.wait_sent(lambda sent: any(m.text == "echo: slow lane" for m in sent), timeout=10)
    assert time.monotonic() - started >= 1.9  # it waited out Retry-After, then went


@pytest.mark.slow
async def test_the_working_reaction_shows_while_a_turn_runs_and_goes_when_it_ends(start_slack, fake_slack):
    await start_slack()
    ts = await say(fake_slack, DM, "think hard [sleep=1.5]")
    await wait_until(lambda: (DM, ts, "hourglass_flowing_sand") in fake_slack.reactions)
    await fake_slack.wait_sent(lambda sent: len(sent) == 1)
    await wait_until(lambda: not fake_slack.reactions)
    assert [entry[0] for entry in fake_slack.reaction_log] == ["add", "remove"]
    # A quick answer costs no reaction at all.
    await say(fake_slack, DM, "quick")
    await fake_slack.wait_sent(lambda sent: len(sent) == 2)
    await asyncio.sleep(0.7)
    assert len(fake_slack.reaction_log) == 2


async def test_a_shared_file_is_downloaded_with_the_bot_token_and_a_strangers_is_not(
        start_slack, fake_slack, fake_llm, home):
    runner = await start_slack(max_file_mb=0.001)
    small = fake_slack.add_file(b"hello file", "notes.txt")
    big = fake_slack.add_file(b"x" * 5000, "big.bin")
    await say(fake_slack, DM, "here you go", files=[small, big])
    sent = await fake_slack.wait_sent(lambda sent: any(m.text.startswith("echo: here you go") for m in sent))
    media = runner.adapters["slack"].ctx.media_dir
    assert media == runner.sandbox.workspace / "attachments"  # where the agent's tools can read it
    [saved] = list(media.iterdir())
    assert saved.read_bytes() == b"hello file" and saved.name.endswith("notes.txt")
    prompt = json.dumps(fake_llm.requests[0]["messages"])
    assert "notes.txt" in prompt and "bigger than the" in prompt
    # The user is told plainly, before the answer, what the agent will not have.
    [told] = [m for m in sent if "could not download" in m.text]
    assert "big.bin" in told.text and "limit" in told.text and sent.index(told) == 0
    stranger_file = fake_slack.add_file(b"secret", "theirs.txt")
    await say(fake_slack, STRANGER_DM, "take this", user=STRANGER, files=[stranger_file])
    await say(fake_slack, DM, "next")
    await fake_slack.wait_sent(lambda sent: any(m.text.startswith("echo: next") for m in sent))
    assert not [p for p in home.rglob("*theirs.txt*")]


async def test_a_message_sent_right_after_a_file_reaches_the_agent_after_it(start_slack, fake_slack, fake_llm):
    await start_slack()
    fake_slack.file_delay = 0.5
    await say(fake_slack, DM, "the report", files=[fake_slack.add_file(b"numbers", "report.csv")])
    await say(fake_slack, DM, "summarise it")
    await fake_slack.wait_sent(lambda sent: any(m.text == "echo: summarise it" for m in sent))
    asked = [message_text(last_user_message(r)) for r in fake_llm.requests]
    assert asked[0].startswith("the report") and asked[1] == "summarise it"


# ---------------------------------------------------------------------------------------------- commands, approvals


async def test_herald_slash_command_is_answered_privately_and_bang_commands_work_in_threads(
        start_slack, fake_slack, fake_llm):
    await start_slack()
    await fake_slack.deliver_socket("slash_commands", fake_slack.slash_command(CHANNEL, ALICE, "status"))
    [status] = await fake_slack.wait_sent(lambda sent: len(sent) == 1)
    assert "Model: fake-model." in status.text and status.ephemeral_to == ALICE
    await fake_slack.deliver_socket("slash_commands", fake_slack.slash_command(DM, ALICE, "nonsense"))
    await fake_slack.wait_sent(lambda sent: any("Unknown command" in m.text for m in sent))
    root = fake_slack.message(CHANNEL, ALICE, "a thread")["event"]["ts"]
    await say(fake_slack, CHANNEL, "!status", thread_ts=root)  # a known !command needs no mention
    found = await fake_slack.wait_sent(lambda sent: sum("Model: fake-model." in m.text for m in sent) == 2)
    typed = [m for m in found if "Model: fake-model." in m.text][-1]
    assert typed.thread_ts == root and typed.ephemeral_to is None
    assert fake_llm.requests == []


async def _prompt(fake_slack: FakeSlack, tmp_path: Path) -> tuple[Path, Any]:
    victim = tmp_path / "victim"
    victim.mkdir()
    command = json.dumps({"command": f"rm -rf {victim}"})
    await say(fake_slack, DM, f"[tool=terminal:{command}]")
    sent = await fake_slack.wait_sent(lambda sent: any(m.buttons for m in sent))
    return victim, next(m for m in sent if m.buttons)


async def test_an_approval_prompt_has_buttons_a_strangers_press_changes_nothing_the_requesters_deny_edits_it(
        start_slack, fake_slack, tmp_path):
    await start_slack({"tools": {"terminal": {"cwd": str(tmp_path)}}})
    victim, prompt = await _prompt(fake_slack, tmp_path)
    styles = {b["value"].rsplit(":", 1)[1]: b.get("style") for b in prompt.buttons}
    assert styles["d"] == "danger" and styles["o"] == "primary"
    deny = next(b["value"] for b in prompt.buttons if b["value"].endswith(":d"))
    # Bob may talk to the bot but did not ask, and is no approver: told privately, nothing changes.
    await fake_slack.deliver_socket("interactive", fake_slack.block_actions(BOB, prompt, deny))
    sent = await fake_slack.wait_sent(lambda sent: any(m.ephemeral_to == BOB for m in sent))
    [told] = [m for m in sent if m.ephemeral_to == BOB]
    assert told.text.startswith("You can't answer this approval") and told.channel == DM
    assert prompt.edits == 0 and prompt.buttons
    await fake_slack.deliver_socket("interactive", fake_slack.block_actions(ALICE, prompt, deny))
    await wait_until(lambda: prompt.edits >= 1)
    assert prompt.text.startswith("🚫 Denied by alice") and prompt.blocks == []
    await fake_slack.wait_sent(lambda sent: any(m.text.startswith("tool said:") for m in sent))
    assert victim.exists()


async def test_herald_deny_as_a_slash_command_decides_the_prompt(start_slack, fake_slack, tmp_path):
    await start_slack({"tools": {"terminal": {"cwd": str(tmp_path)}}})
    victim, prompt = await _prompt(fake_slack, tmp_path)
    await fake_slack.deliver_socket("slash_commands", fake_slack.slash_command(DM, ALICE, "deny"))
    await wait_until(lambda: prompt.edits >= 1)
    assert prompt.text.startswith("🚫 Denied by") and not prompt.buttons
    assert victim.exists()


async def test_a_button_id_too_long_for_slack_reaches_its_handler_whole_and_is_inactive_after_a_restart(
        start_slack, fake_slack):
    runner = await start_slack()
    pressed: list[str] = []

    async def handler(_adapter: Any, press: Any) -> str:
        pressed.append(press.button_id)
        return "Got it."

    long_id = "long:" + "x" * 2500
    runner.inbound.buttons["long"] = handler
    await runner.delivery.deliver(runner.adapters["slack"], DM, OutboundMessage("Press:", buttons=[
        Button(long_id, "Go")]))
    [message] = await fake_slack.wait_sent(lambda sent: len(sent) == 1)
    [value] = [b["value"] for b in message.buttons]
    assert len(value) <= 2000
    await fake_slack.deliver_socket("interactive", fake_slack.block_actions(ALICE, message, value))
    await fake_slack.wait_sent(lambda sent: any(m.text == "Got it." for m in sent))
    assert pressed == [long_id]
    await runner.shutdown()
    runner = await start_slack()  # the digest was this process's own: the next one does not know it
    runner.inbound.buttons["long"] = handler
    await fake_slack.deliver_socket("interactive", fake_slack.block_actions(ALICE, message, value))
    await fake_slack.wait_sent(lambda sent: any(m.text == "This button is no longer active." and m.ephemeral_to
                                                == ALICE for m in sent))
    assert pressed == [long_id]


# ---------------------------------------------------------------------------------------------- the connection


async def test_socket_mode_reconnects_after_slacks_disconnect_and_after_a_drop(
        start_slack, fake_slack, monkeypatch):
    monkeypatch.setattr("gateway.platforms.slack.adapter.PING_INTERVAL", 0.2)
    await start_slack()
    assert fake_slack.connections_opened == 1
    await fake_slack.disconnect()
    await wait_until(lambda: fake_slack.connections_opened == 2 and fake_slack.hello_sent == 2)
    await say(fake_slack, DM, "after the refresh")
    await fake_slack.wait_sent(lambda sent: any(m.text == "echo: after the refresh" for m in sent))
    await fake_slack.drop()
    await wait_until(lambda: fake_slack.hello_sent == 3)
    await say(fake_slack, DM, "after the drop")
    await fake_slack.wait_sent(lambda sent: any(m.text == "echo: after the drop" for m in sent))


@pytest.mark.slow
async def test_every_event_is_acknowledged_at_once_while_slow_turns_run(start_slack, fake_slack):
    await start_slack()
    envelopes = []
    for i in range(12):
        body = fake_slack.message(f"D0USER{i}", ALICE, f"slow {i} [sleep=2]")
        envelopes.append(await fake_slack.deliver_socket("events_api", body))
    await wait_until(lambda: all(e in fake_slack.acked_at for e in envelopes))
    waits = [fake_slack.acked_at[e] - fake_slack.handed_out[e] for e in envelopes]
    assert max(waits) < 1.0, waits  # Slack allows 3 s
    assert not fake_slack.sent  # acknowledged long before any answer
    await fake_slack.wait_sent(lambda sent: len(sent) == 12, timeout=20)


async def test_herald_help_lists_the_daily_commands_and_herald_retry_answers_in_the_chat(
        start_slack, fake_slack, fake_llm):
    await start_slack()
    await fake_slack.deliver_socket("slash_commands", fake_slack.slash_command(DM, ALICE, ""))
    [help_] = await fake_slack.wait_sent(lambda sent: len(sent) == 1)
    assert help_.ephemeral_to == ALICE
    for name in ("retry", "undo", "title", "sessions", "resume N", "search TEXT", "model", "personality",
                 "reasoning"):
        assert f"!{name}" in help_.text, name
    fake_llm.script(Reply("first take"))
    await say(fake_slack, DM, "a question")
    await fake_slack.wait_sent(lambda sent: any(m.text == "first take" for m in sent))
    fake_llm.script(Reply("second take"))
    await fake_slack.deliver_socket("slash_commands", fake_slack.slash_command(DM, ALICE, "retry"))
    sent = await fake_slack.wait_sent(lambda sent: any(m.text == "second take" for m in sent))
    (answer,) = [m for m in sent if m.text == "second take"]
    assert answer.ephemeral_to is None and answer.channel == DM
    assert [m.text for m in sent if m.text.startswith("🔁")] and all(
        m.ephemeral_to == ALICE for m in sent if m.text.startswith("🔁"))
    assert [message_text(m) for m in fake_llm.requests[-1]["messages"][1:]] == ["a question"]


async def test_a_post_slack_took_before_its_connection_was_reset_is_announced_and_resent_once(
        start_slack, fake_slack, fake_llm):
    """slack_sdk's default retry handler sent such a post again by itself: two copies, not a word said. Delivery
    owns the retry now: one message, the announcement, the resend; never an unannounced double."""
    runner = await start_slack()
    fake_slack.fail("chat.postMessage", "reset", channel=DM)
    await say(fake_slack, DM, "hello")
    await fake_slack.wait_sent(lambda sent: sum(m.text == "echo: hello" for m in sent) >= 2)
    await say(fake_slack, DM, "and again")
    await fake_slack.wait_sent(lambda sent: any(m.text == "echo: and again" for m in sent))
    notice = runner.adapters["slack"].render(RESENDING)
    assert [m.text for m in fake_slack.sent_to(DM)] == ["echo: hello", notice, "echo: hello", "echo: and again"]
    assert fake_slack.calls.count("chat.postMessage") == 4
