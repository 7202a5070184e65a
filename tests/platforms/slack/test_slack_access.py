"""Slack: who is heard where. ``allowed_channels`` end to end, a stranger's ``/herald`` answered privately, and
``/herald approve`` deciding a prompt the way its button would."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.fakes.slack_api import BOT_USER
from tests.platforms.slack.test_slack import ALICE, DM, STRANGER, model_calls, say, wait_until

pytest_plugins = ["tests.platforms.slack.test_slack"]

LISTED, UNLISTED = "C0LISTED", "C0UNLISTED"


async def test_allowed_channels_hears_only_the_listed_channel_and_its_threads_and_still_dms(
        start_slack, fake_slack, fake_llm):
    runner = await start_slack(allowed_channels=[LISTED])
    root = await say(fake_slack, UNLISTED, f"<@{BOT_USER}> in a channel not on the list")
    await say(fake_slack, UNLISTED, f"<@{BOT_USER}> and in its thread", thread_ts=root)
    await say(fake_slack, LISTED, f"<@{BOT_USER}> in the listed one")
    await say(fake_slack, DM, "in a DM")
    sent = await fake_slack.wait_sent(lambda sent: {"echo: in the listed one", "echo: in a DM"}
                                      <= {m.text for m in sent})
    await asyncio.sleep(0.3)  # events are taken in order: the unlisted ones were judged before these
    assert not [m for m in fake_slack.sent if m.channel == UNLISTED]
    assert model_calls(fake_llm, "in a channel not on the list") == 0
    assert model_calls(fake_llm, "and in its thread") == 0
    assert {m.channel for m in sent} == {LISTED, DM}
    assert runner.counters.messages_denied == 2


async def test_a_strangers_herald_command_is_told_privately_it_is_not_allowed(start_slack, fake_slack, fake_llm):
    await start_slack()
    await fake_slack.deliver_socket("slash_commands", fake_slack.slash_command("C0GENERAL", STRANGER, "status"))
    [told] = await fake_slack.wait_sent(lambda sent: len(sent) == 1)
    assert told.text == "You are not allowed to use this bot here."
    assert told.ephemeral_to == STRANGER and told.channel == "C0GENERAL"
    await asyncio.sleep(0.3)
    assert len(fake_slack.sent) == 1 and fake_llm.requests == []  # nothing else: no status, no model


async def test_herald_approve_runs_the_command_and_the_prompt_says_who(start_slack, fake_slack, tmp_path: Path):
    await start_slack({"tools": {"terminal": {"cwd": str(tmp_path)}}})
    victim = tmp_path / "victim"
    victim.mkdir()
    await say(fake_slack, DM, "[tool=terminal:{}]".format(json.dumps({"command": f"rm -rf {victim}"})))
    sent = await fake_slack.wait_sent(lambda sent: any(m.buttons for m in sent))
    prompt = next(m for m in sent if m.buttons)
    assert victim.exists()  # nothing ran before the answer
    await fake_slack.deliver_socket("slash_commands", fake_slack.slash_command(DM, ALICE, "approve"))
    await wait_until(lambda: prompt.edits >= 1)
    assert prompt.text.startswith("✅ Approved once by") and not prompt.buttons
    await fake_slack.wait_sent(lambda sent: any(m.text.startswith("tool said:") for m in sent))
    assert not victim.exists()  # the command ran
