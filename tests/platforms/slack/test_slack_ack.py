"""Slack: what may run before an event's acknowledgement and what waits until after it. Lookups share one
deadline before the ack; a thread follow-up Slack would not say anything about in time is kept and checked
after the ack; files are fetched after the ack, and a file that could not be had is named to the user."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import select

from gateway.platforms.slack.inbound import LOOKUP_BUDGET
from gateway.storage.tables import inbox
from tests.fakes.llm import last_user_message, message_text
from tests.fakes.slack_api import BOT_USER, FakeSlack
from tests.platforms.slack.test_slack import ALICE, CHANNEL, DM, model_calls, say, wait_until

pytest_plugins = ["tests.platforms.slack.test_slack"]

SLACK_ACK_LIMIT = 3.0  # Slack's own: an event not acknowledged by then is sent again


async def _acked(fake: FakeSlack, envelope: str) -> float:
    await wait_until(lambda: envelope in fake.acked_at, timeout=15)
    return fake.acked_at[envelope] - fake.handed_out[envelope]


async def _rows(runner: Any) -> list[dict[str, Any]]:
    return await runner.store.run_read(lambda c: [dict(r._mapping) for r in c.execute(
        select(inbox).where(inbox.c.platform == "slack"))])


@pytest.mark.slow
async def test_slow_lookups_share_one_deadline_before_the_ack(start_slack, fake_slack, fake_llm):
    await start_slack()
    # An app_mention carries neither the channel's type nor the sender's profile: both are looked up, and
    # Slack takes 10 s to answer each. Together they get LOOKUP_BUDGET, not 10 s each.
    fake_slack.delays.update({"conversations.info": 10.0, "users.info": 10.0})
    body = fake_slack.message("C0UNKNOWN", ALICE, f"<@{BOT_USER}> are you there?", kind="app_mention")
    body["event"].pop("user_profile")
    seconds = await _acked(fake_slack, await fake_slack.deliver_socket("events_api", body))
    assert LOOKUP_BUDGET <= seconds < SLACK_ACK_LIMIT
    await fake_slack.wait_sent(lambda sent: any(m.text == "echo: are you there?" for m in sent))


async def test_a_thread_follow_up_slack_would_not_say_about_in_time_is_kept_and_checked_after_the_ack(
        start_slack, fake_slack, fake_llm):
    runner = await start_slack()
    root = await say(fake_slack, CHANNEL, f"<@{BOT_USER}> first")
    await fake_slack.wait_sent(lambda sent: len(sent) == 1)
    other = await say(fake_slack, CHANNEL, "a thread among people")
    await runner.shutdown()
    runner = await start_slack()  # remembers no thread: asks conversations.replies
    # Rate limited twice (Retry-After: 1 s): the follow-up is acknowledged at once and answered after.
    fake_slack.fail("conversations.replies", "429", channel=CHANNEL, times=2, retry_after=1)
    body = fake_slack.message(CHANNEL, ALICE, "a follow-up after the restart", thread_ts=root)
    assert await _acked(fake_slack, await fake_slack.deliver_socket("events_api", body)) < SLACK_ACK_LIMIT
    sent = await fake_slack.wait_sent(lambda sent: any(m.text == "echo: a follow-up after the restart"
                                                       for m in sent), timeout=15)
    assert sent[-1].thread_ts == root
    assert fake_slack.calls.count("conversations.replies") >= 3
    # The same in a thread the bot is not in: kept while Slack is silent, then dropped without a word.
    fake_slack.fail("conversations.replies", "429", channel=CHANNEL, times=1, retry_after=1)
    chatter = await say(fake_slack, CHANNEL, "chatter, not for the bot", thread_ts=other)
    await wait_until_row(runner, f"{CHANNEL}/{chatter}", "cancelled")
    assert model_calls(fake_llm, "chatter, not for the bot") == 0
    assert not any(m.thread_ts == other for m in fake_slack.sent)


async def wait_until_row(runner: Any, message_id: str, status: str, timeout: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        rows = [r for r in await _rows(runner) if r["platform_message_id"] == message_id]
        if rows and rows[0]["status"] == status:
            return
        assert asyncio.get_running_loop().time() < deadline, f"{message_id}: {rows}"
        await asyncio.sleep(0.05)


async def test_a_file_that_could_not_be_downloaded_is_named_and_the_turn_has_the_rest(
        start_slack, fake_slack, fake_llm):
    runner = await start_slack()
    good = fake_slack.add_file(b"good bytes", "good.txt")
    gone = fake_slack.add_file(b"never served", "gone.txt")
    del fake_slack.files[gone["id"]]  # Slack answers 404 for it
    await say(fake_slack, DM, "two files", files=[good, gone])
    sent = await fake_slack.wait_sent(lambda sent: any(m.text.startswith("echo: two files") for m in sent))
    [told] = [m for m in sent if "could not download" in m.text]
    assert "gone.txt" in told.text and "404" in told.text and sent.index(told) == 0
    content = message_text(last_user_message(fake_llm.requests[0]))
    paths = [line[2:] for line in content.splitlines() if line.startswith("- ")]
    assert len(paths) == 1 and paths[0].endswith("good.txt")
    assert "gone.txt, which could not be downloaded" in content  # the agent knows too
    media = runner.adapters["slack"].ctx.media_dir
    assert sorted(p.name.rsplit("-", 1)[-1] for p in media.iterdir()) == ["good.txt"]
