"""Slack in HTTP mode (Events API at POST /slack/events): signatures, stale timestamps, url_verification,
Slack's retries; and cron deliveries into Slack channels and threads (home chat, /sethome in a thread)."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp

from cron.scheduler import CronScheduler
from gateway.platforms.slack.adapter import EVENTS_PATH
from tests.cron.test_cron import Clock, create, runs, settle
from tests.fakes.slack_api import BOT_USER
from tests.platforms.conformance.driver import PLATFORM_ACK_LIMIT
from tests.platforms.slack.test_slack import ALICE, CHANNEL, DM, model_calls, say, wait_until

pytest_plugins = ["tests.platforms.slack.test_slack"]


def url(runner) -> str:
    return f"http://127.0.0.1:{runner.http_port}{EVENTS_PATH}"


async def test_a_retried_event_is_acknowledged_and_answered_once(start_slack, fake_slack, fake_llm):
    runner = await start_slack(mode="http")
    body = fake_slack.message(DM, ALICE, "only once")
    status, _, seconds = await fake_slack.post(url(runner), "events_api", body)
    assert status == 200 and seconds < PLATFORM_ACK_LIMIT
    # Slack did not see that answer in time and sends the same event again, marked as a retry.
    for retry in (1, 2):
        status, _, _ = await fake_slack.post(url(runner), "events_api", body, retry_num=retry)
        assert status == 200
    await fake_slack.wait_sent(lambda sent: len(sent) == 1)
    await asyncio.sleep(0.3)
    assert fake_slack.texts() == ["echo: only once"] and model_calls(fake_llm, "only once") == 1
    assert runner.counters.messages_duplicate == 2


async def test_a_bad_signature_and_a_stale_timestamp_get_401_and_reach_nobody(start_slack, fake_slack, fake_llm):
    runner = await start_slack(mode="http")
    forged = fake_slack.message(DM, ALICE, "forged")
    status, _, _ = await fake_slack.post(url(runner), "events_api", forged, secret="not-the-secret")
    assert status == 401
    stale = fake_slack.message(DM, ALICE, "replayed")
    status, _, _ = await fake_slack.post(url(runner), "events_api", stale, timestamp=int(time.time()) - 301)
    assert status == 401
    async with aiohttp.ClientSession() as http, http.post(url(runner), data=b"{}",
                                                          headers={"Content-Type": "application/json"}) as resp:
        assert resp.status == 401  # no signature at all
    # A press and a slash command are signed the same way.
    command = fake_slack.slash_command(DM, ALICE, "status")
    status, _, _ = await fake_slack.post(url(runner), "slash_commands", command, secret="nope")
    assert status == 401
    await asyncio.sleep(0.3)
    assert fake_slack.sent == [] and fake_llm.requests == []
    assert runner.counters.messages_accepted == 0


async def test_url_verification_is_answered_with_the_challenge(start_slack, fake_slack):
    runner = await start_slack(mode="http")
    status, body, _ = await fake_slack.post(url(runner), "events_api",
                                            {"type": "url_verification", "token": "t", "challenge": "abc123"})
    assert status == 200 and json.loads(body) == {"challenge": "abc123"}


async def test_events_are_not_behind_the_api_bearer_token_and_the_web_api_still_is(start_slack, fake_slack):
    runner = await start_slack({"platforms": {"web": {"enabled": True}}}, mode="http")
    status, _, _ = await fake_slack.post(url(runner), "events_api", fake_slack.message(DM, ALICE, "signed only"))
    assert status == 200
    await fake_slack.wait_sent(lambda sent: len(sent) == 1)
    async with aiohttp.ClientSession() as http, \
            http.get(f"http://127.0.0.1:{runner.http_port}/api/v1/status") as resp:
        assert resp.status == 401


async def test_a_press_and_a_slash_command_over_http(start_slack, fake_slack, tmp_path):
    runner = await start_slack({"tools": {"terminal": {"cwd": str(tmp_path)}}}, mode="http")
    victim = tmp_path / "victim"
    victim.mkdir()
    command = json.dumps({"command": f"rm -rf {victim}"})
    await fake_slack.post(url(runner), "events_api", fake_slack.message(DM, ALICE, f"[tool=terminal:{command}]"))
    sent = await fake_slack.wait_sent(lambda sent: any(m.buttons for m in sent))
    prompt = next(m for m in sent if m.buttons)
    deny = next(b["value"] for b in prompt.buttons if b["value"].endswith(":d"))
    press = fake_slack.block_actions(ALICE, prompt, deny)
    status, _, seconds = await fake_slack.post(url(runner), "interactive", press)
    assert status == 200 and seconds < PLATFORM_ACK_LIMIT
    await wait_until(lambda: prompt.edits >= 1)
    assert prompt.text.startswith("🚫 Denied by") and victim.exists()
    status, _, _ = await fake_slack.post(url(runner), "slash_commands", fake_slack.slash_command(DM, ALICE, "status"))
    assert status == 200
    await fake_slack.wait_sent(lambda sent: any("Model: fake-model." in m.text and m.ephemeral_to == ALICE
                                                for m in sent))


# ---------------------------------------------------------------------------------------------- cron


async def test_cron_delivers_to_a_channel_a_thread_the_home_chat_and_a_sethome_thread(start_slack, fake_slack):
    runner = await start_slack({"cron": {"enabled": False, "delivery_retry_seconds": 0.01}},
                               home_chat="C0HOME", admins=[ALICE])
    clock = Clock()
    sched = CronScheduler(runner.cron_host(), now=clock)
    runner.cron = sched
    await sched.start(timer=False)
    thread = "1700000000.000042"  # a '.' in a thread id, and a ':' inside an id, percent-encoded
    job = await create(sched, schedule="every 1h", script="echo news", no_agent=True,
                       deliver=f"slack:{CHANNEL}, slack:{CHANNEL}:{thread}, slack:C0ODD%3AID, slack")
    clock.t += 3600
    await sched.tick()
    await settle(sched)
    where = {(m.channel, m.thread_ts) for m in fake_slack.sent if "news" in m.text}
    assert where == {(CHANNEL, None), (CHANNEL, thread), ("C0ODD:ID", None), ("C0HOME", None)}
    assert (await runs(sched, job["id"]))[-1]["delivery_status"] == "delivered"
    # !sethome typed in a thread makes that thread the home chat.
    root = await say(fake_slack, CHANNEL, f"<@{BOT_USER}> home is here")
    await fake_slack.wait_sent(lambda sent: any(m.text == "echo: home is here" for m in sent))
    await say(fake_slack, CHANNEL, "!sethome", thread_ts=root)
    await fake_slack.wait_sent(lambda sent: len([m for m in sent if m.thread_ts == root]) >= 2)
    fake_slack.sent.clear()
    clock.t += 3600
    await sched.tick()
    await settle(sched)
    homes = [m for m in fake_slack.sent if "news" in m.text and m.channel == CHANNEL and m.thread_ts == root]
    assert len(homes) == 1
    assert not any(m.channel == "C0HOME" for m in fake_slack.sent)
