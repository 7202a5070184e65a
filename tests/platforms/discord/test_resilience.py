"""Discord when things go wrong: the daemon was down, the gateway dropped, Discord said 429 / 403 / 404; and the
ways in that are not chat (files, cron deliveries). The real runner + discord.py against the fake Discord."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import aiohttp
import pytest

from cron.jobs import build_job, operator_script
from cron.scheduler import CronScheduler
from gateway.platforms.base import OutboundMessage
from gateway.storage.store import Store
from tests.fakes.discord_api import CHANNEL, THREAD
from tests.fakes.llm import last_user_message, message_text
from tests.platforms.discord.conftest import ALICE, BOB, STRANGER, adapter, answered, wait_until
from tools.registry import registry

# ---------------------------------------------------------------------------------------------- restarts


async def test_messages_posted_while_the_daemon_was_down_are_answered_once_after_it_starts(start_dc, fake_dc,
                                                                                          fake_llm):
    runner = await start_dc()
    dm = fake_dc.dm(ALICE)
    fake_dc.user_message(dm, ALICE, "before the stop")
    fake_dc.user_message(CHANNEL, BOB, "before the stop, in the channel", mention=True)
    await fake_dc.wait_sent(answered(fake_dc, "echo: before the stop"))
    await fake_dc.wait_sent(answered(fake_dc, "echo: before the stop, in the channel"))
    await runner.shutdown()
    assert fake_dc.connected() == 0

    fake_dc.user_message(dm, ALICE, "while down 1")
    fake_dc.user_message(CHANNEL, BOB, "while down 2", mention=True)
    fake_dc.user_message(CHANNEL, BOB, "chatter while down")  # read back, and left alone: not addressed
    fake_dc.user_message(dm, ALICE, "while down 3")
    second = await start_dc()
    await fake_dc.wait_sent(lambda s: sum(m.content.startswith("echo: while down") for m in s) == 3)
    fake_dc.user_message(dm, ALICE, "after the start")
    await fake_dc.wait_sent(answered(fake_dc, "echo: after the start"))
    await asyncio.sleep(0.3)
    asked = [message_text(last_user_message(r)) for r in fake_llm.requests]
    assert asked.count("before the stop") == 1 and "chatter while down" not in asked
    assert sorted(t for t in asked if t.startswith("while down")) == ["while down 1", "while down 2", "while down 3"]
    dm_answers = [m.content for m in fake_dc.sent_in(dm)]
    assert dm_answers.index("echo: while down 1") < dm_answers.index("echo: while down 3")  # in order
    assert adapter(second).channels.read_back == 3
    assert second.counters.messages_duplicate == 0  # the cursors were saved at stop: nothing read twice


async def test_read_back_goes_no_further_than_backfill_max_age_and_answers_nothing_twice(start_dc, fake_dc,
                                                                                        fake_llm):
    runner = await start_dc()
    dm = fake_dc.dm(ALICE)
    fake_dc.user_message(dm, ALICE, "answered before")
    await fake_dc.wait_sent(answered(fake_dc, "echo: answered before"))
    url = runner.store.url
    await runner.shutdown()
    # The daemon died long ago without saving its cursor: it is far behind.
    store = Store(url)
    await store.init()
    await store.cursors.save("discord", {str(dm): str(fake_dc.snowflake(time.time() - 3600))})
    await store.close()
    fake_dc.user_message(dm, ALICE, "two minutes ago", at=time.time() - 120)
    fake_dc.user_message(dm, ALICE, "just now")
    second = await start_dc(backfill_max_age="1m")
    await fake_dc.wait_sent(answered(fake_dc, "echo: just now"))
    await asyncio.sleep(0.3)
    asked = [message_text(last_user_message(r)) for r in fake_llm.requests]
    assert asked == ["answered before", "just now"]  # too old: left; read again: dropped by the inbox
    assert second.counters.messages_duplicate == 1


@pytest.mark.slow
async def test_the_gateway_drops_resumes_and_readyz_shows_it(start_dc, fake_dc):
    port = free_port()
    runner = await start_dc(http_port=port)
    dm = fake_dc.dm(ALICE)
    await fake_dc.drop_gateway(refuse_for=1.5)
    await wait_until(lambda: adapter(runner).state == "retrying")
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/readyz") as resp:
        body = await resp.json()
    assert resp.status == 503 and body["adapters"]["discord"]["state"] == "retrying"
    assert body["adapters"]["discord"]["error"] == "ConnectionError"
    fake_dc.user_message(dm, ALICE, "said during the outage")  # held in the session, replayed on RESUME
    await wait_until(lambda: adapter(runner).state == "connected", timeout=20)
    await fake_dc.wait_sent(answered(fake_dc, "echo: said during the outage"))
    assert len(fake_dc.identified) == 1 and len(fake_dc.resumes) >= 1  # resumed, not a new session
    assert fake_dc.heartbeats >= 1
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/readyz") as resp:
        assert resp.status == 200
    await asyncio.sleep(0.3)
    assert [m.content for m in fake_dc.sent_in(dm)].count("echo: said during the outage") == 1


async def test_a_refused_token_shows_in_readyz_with_its_hint(start_dc, fake_dc, monkeypatch):
    monkeypatch.setenv("DISCORD_BOT_TOKEN", "not.the.token")
    runner = await start_dc(connect=False)
    await wait_until(lambda: adapter(runner).state == "retrying")
    _ready, states = runner.readiness()
    assert states["discord"]["error"] == "InvalidToken" and "token" in states["discord"]["hint"]
    assert fake_dc.identified == []  # never got as far as the gateway


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------------------------------------- REST errors


async def test_a_429_is_waited_out_by_discord_py_and_permanent_errors_are_not_retried(start_dc, fake_dc):
    runner = await start_dc()
    dm = fake_dc.dm(ALICE)
    fake_dc.fail("POST", f"channels/{dm}/messages", 429, times=1, retry_after=0.4)
    started = time.monotonic()
    fake_dc.user_message(dm, ALICE, "slow down")
    await fake_dc.wait_sent(answered(fake_dc, "echo: slow down"))
    assert time.monotonic() - started >= 0.4
    assert fake_dc.requests.count(("POST", f"channels/{dm}/messages")) == 2  # the 429, then the message

    fake_dc.forbidden.add(THREAD)
    report = await runner.delivery.deliver(adapter(runner), str(CHANNEL), OutboundMessage("hi", thread_id=str(THREAD)))
    assert report.failed and "403" in (report.error or "") and "50013" in (report.error or "")
    assert fake_dc.requests.count(("POST", f"channels/{THREAD}/messages")) == 1
    report = await runner.delivery.deliver(adapter(runner), "123456789", OutboundMessage("hi"))
    assert report.failed and "404" in (report.error or "")
    assert fake_dc.requests.count(("POST", "channels/123456789/messages")) == 1


# ---------------------------------------------------------------------------------------------- files


async def test_files_are_downloaded_into_the_workspace_and_strangers_files_never_are(start_dc, fake_dc, fake_llm,
                                                                                     home):
    runner = await start_dc(max_media_mb=0.001)  # about 1 KB
    dm = fake_dc.dm(ALICE)
    small = fake_dc.attachment("notes.txt", b"small notes")
    fake_dc.user_message(dm, ALICE, "what is this", attachments=[small])
    await fake_dc.wait_sent(lambda s: len(s) == 1)
    content = fake_llm.requests[-1]["messages"][-1]["content"]
    assert content.startswith("what is this")
    paths = [line[2:] for line in content.splitlines() if line.startswith("- ")]
    assert len(paths) == 1 and Path(paths[0]).read_bytes() == b"small notes"  # noqa: ASYNC240
    assert Path(paths[0]).parent == home / "workspace" / "attachments"
    ctx = runner.agents.tool_context("k", threading.Event(), None)
    assert "small notes" in registry.dispatch("read_file", {"path": paths[0]}, ctx)
    big = fake_dc.attachment("big.bin", b"x" * 5000)
    fake_dc.user_message(dm, ALICE, "", attachments=[big])
    await fake_dc.wait_sent(lambda s: len(s) == 3)  # the user told what was not downloaded, then the answer
    assert "limit" in fake_llm.requests[-1]["messages"][-1]["content"]
    assert "could not download" in fake_dc.sent[1].content and "big.bin" in fake_dc.sent[1].content
    secret = fake_dc.attachment("secret.bin", b"a stranger's file")
    fake_dc.user_message(fake_dc.dm(STRANGER), STRANGER, "take this", attachments=[secret])
    await fake_dc.wait_sent(lambda s: any("pairing code" in m.content for m in s))
    assert sorted(p.name for p in (home / "workspace" / "attachments").iterdir()) == [Path(paths[0]).name]


# ---------------------------------------------------------------------------------------------- cron


async def test_cron_results_reach_a_channel_a_thread_and_the_home_chat(start_dc, fake_dc):
    runner = await start_dc(home_chat=str(CHANNEL), admins=[ALICE], extra={"cron": {"enabled": False}})
    sched = CronScheduler(runner.cron_host(), now=time.time)
    runner.cron = sched
    await sched.start(timer=False)
    row = operator_script(build_job({"schedule": "every 1h", "script": "echo from cron", "no_agent": True,
                                     "deliver": f"discord:{CHANNEL}, discord:{CHANNEL}:{THREAD}, discord"},
                                    default_tz=None, origin=None, known_platforms={"discord"}, created_by="cli",
                                    now=time.time()))
    await sched.store.add_job(row)

    async def run_once() -> None:
        assert await sched.request_run(row["id"])

    await run_once()
    await fake_dc.wait_sent(lambda s: sum("from cron" in m.content for m in s) == 3)
    assert sorted(m.channel_id for m in fake_dc.sent if "from cron" in m.content) == sorted([CHANNEL, CHANNEL,
                                                                                             THREAD])
    fake_dc.user_message(THREAD, ALICE, "/sethome")  # a known command: heard without a mention
    await fake_dc.wait_sent(lambda s: any(m.channel_id == THREAD and m.content.startswith("🏠") for m in s))
    await run_once()
    await fake_dc.wait_sent(lambda s: sum("from cron" in m.content for m in s) == 6)
    latest = [m.channel_id for m in fake_dc.sent if "from cron" in m.content][3:]
    assert sorted(latest) == sorted([CHANNEL, THREAD, THREAD])  # "discord" now means the thread
    await sched.stop()
