"""While the store cannot take messages (its database out of reach), every platform refuses a new message the
same way (gateway/platforms/base.py ``tell_unavailable``): the person is told once per chat and outage what
really happens to it there — Telegram hands the update out again and it is answered; Slack sends an event
again for a few minutes; a slash command is refused for good — and nothing waits in silence. The web chat's
POST is answered 503 with the reason. Discord's side is in tests/platforms/discord/test_outage.py."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from gateway.platforms.slack.adapter import EVENTS_PATH
from tests.fakes.telegram_api import FakeTelegram
from tests.faults.outages import database_down
from tests.faults.storage import ALICE_TG, start  # noqa: F401 - fixtures
from tests.support.polling import wait_until

KEPT = "Your message is kept and will be answered once this is fixed."
SLACK_AGAIN = "Slack will hand me your message again over the next few minutes"
NOT_RUN = "it was not run. Please send it again"
ALICE_SLACK = "U0ALICE1"  # allowed by the fixture's config
STRANGER_TG = 999


def told(texts: list[str], words: str) -> int:
    return sum(words in t for t in texts)


async def polls_after(fake: FakeTelegram, rounds: int) -> None:
    """Until the poller has asked for updates ``rounds`` more times (each time refusing what it was handed)."""
    start_calls = fake.get_updates_calls
    await wait_until(lambda: fake.get_updates_calls >= start_calls + rounds, what="the poller went round")


@pytest.mark.timeout(120)
async def test_telegram_tells_each_chat_once_per_outage_and_answers_afterwards(start, fake_tg) -> None:  # noqa: F811
    runner = await start("polling", slack=False)
    with database_down(runner.store):
        fake_tg.user_message(ALICE_TG, text="during one")
        await fake_tg.wait_sent(lambda sent: told([m.text for m in sent], KEPT) >= 1)
        fake_tg.user_message(ALICE_TG, text="during two")
        fake_tg.user_message(STRANGER_TG, text="a stranger meanwhile")
        await polls_after(fake_tg, 3)  # both refused again and again
    await fake_tg.wait_sent(lambda sent: any(m.text == "echo: during two" for m in sent), timeout=20)
    texts = fake_tg.texts(ALICE_TG)
    assert KEPT in texts[0] and told(texts, KEPT) == 1, texts
    assert [t for t in texts if t.startswith("echo: ")] == ["echo: during one", "echo: during two"]
    assert not any(KEPT in t for t in fake_tg.texts(STRANGER_TG))  # strangers hear nothing of the daemon's state
    # A later outage is a new one: told again.
    with database_down(runner.store):
        fake_tg.user_message(ALICE_TG, text="the next outage")
        await fake_tg.wait_sent(lambda sent: told([m.text for m in sent if m.chat_id == ALICE_TG], KEPT) == 2)
    await fake_tg.wait_sent(lambda sent: any(m.text == "echo: the next outage" for m in sent), timeout=20)


@pytest.mark.timeout(120)
async def test_slack_says_what_slack_does_with_an_event_and_a_refused_command(start, fake_slack) -> None:  # noqa: F811
    runner = await start("polling", slack=True)
    url = f"http://127.0.0.1:{runner.http_port}{EVENTS_PATH}"
    dm = "D0ALICE1"
    body = fake_slack.message(dm, ALICE_SLACK, "during the outage")
    with database_down(runner.store):
        status, _, _ = await fake_slack.post(url, "events_api", body)
        assert status >= 500  # not acknowledged: Slack sends it again
        status, _, _ = await fake_slack.post(url, "events_api", body, retry_num=1)
        assert status >= 500
        await fake_slack.wait_sent(lambda sent: told([m.text for m in sent], SLACK_AGAIN) >= 1)
        status, _, _ = await fake_slack.post(url, "slash_commands", fake_slack.slash_command(dm, ALICE_SLACK, "status"))
        assert status == 200  # acknowledged: Slack never sends a slash command again, so it is refused
        await fake_slack.wait_sent(lambda sent: any(m.ephemeral_to == ALICE_SLACK and NOT_RUN in m.text
                                                    for m in sent))
    status, _, _ = await fake_slack.post(url, "events_api", body, retry_num=2)  # Slack's next try finds it back
    assert status == 200
    await fake_slack.wait_sent(lambda sent: any(m.text == "echo: during the outage" for m in sent))
    assert told(fake_slack.texts(dm), SLACK_AGAIN) == 1


async def test_the_web_chat_is_answered_503_with_the_reason_and_nothing_is_posted(start, fake_tg) -> None:  # noqa: F811
    runner = await start("polling", slack=False)
    base = f"http://127.0.0.1:{runner.http_port}"
    auth = {"Authorization": f"Bearer {runner.adapters['web'].token}"}  # type: ignore[attr-defined]
    sent = []
    web = runner.adapters["web"]
    real_send = web.send

    async def recording(*args, **kwargs):
        sent.append(args)
        return await real_send(*args, **kwargs)

    web.send = recording  # type: ignore[method-assign]
    with database_down(runner.store):
        async with aiohttp.ClientSession() as http, \
                http.post(f"{base}/api/v1/messages", json={"chat_id": "c", "user_id": "u", "text": "hi"},
                          headers=auth) as resp:
            assert resp.status == 503 and "database unavailable" in (await resp.json())["error"]
        await asyncio.sleep(0)
    assert sent == []
