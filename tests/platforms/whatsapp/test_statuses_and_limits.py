"""Statuses (sent, delivered, read, failed) recorded on the outbox rows of the messages they name; WhatsApp's rate
limits (131056 between the business and one person, 130429 throughput) slow only the chat that met them, at once
or reported later in a status."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select

from gateway.ops.dashboard.data import delivery_failures
from gateway.platforms.base import OutboundMessage
from gateway.platforms.whatsapp import outbound
from gateway.storage.tables import outbox
from tests.platforms.whatsapp.conftest import ALICE, BOB
from tests.support.polling import wait_until


async def _row_of(runner, message_id: str) -> dict | None:
    rows = await runner.store.run_read(lambda c: [dict(r._mapping) for r in c.execute(
        select(outbox).where(outbox.c.platform_message_id.contains(message_id)))])
    return rows[0] if rows else None


async def _receipt(runner, message_id: str, state: str) -> dict | None:
    row = await _row_of(runner, message_id)
    return row if row is not None and row["receipt"] == state else None


async def test_statuses_are_recorded_on_the_reply_s_row_furthest_first(start_whatsapp, fake_whatsapp):
    fake_whatsapp.statuses = True  # sent, then delivered, for everything the bot sends
    runner = await start_whatsapp()
    await fake_whatsapp.post(fake_whatsapp.message(ALICE, "hello"))
    [reply] = await fake_whatsapp.wait_sent(lambda sent: len(sent) == 1)
    await wait_until(lambda: _receipt(runner, reply.id, "delivered"), what="delivered on the row")
    for state in ("read", "delivered", "sent", "read"):  # late and repeated ones change nothing
        status, _, _ = await fake_whatsapp.post(fake_whatsapp.status(reply.id, state, ALICE))
        assert status == 200
    row = await _row_of(runner, reply.id)
    assert row is not None and (row["receipt"], row["status"], row["inbox_id"] is not None) == ("read", "sent", True)
    # A status for a message this daemon never sent (another app's, or long gone) is taken and passed over.
    status, _, _ = await fake_whatsapp.post(fake_whatsapp.status("wamid.elsewhere", "read", ALICE))
    assert status == 200


async def test_a_failed_status_fails_the_row_with_whatsapp_s_reason(start_whatsapp, fake_whatsapp):
    runner = await start_whatsapp()
    await fake_whatsapp.post(fake_whatsapp.message(ALICE, "hello"))
    [reply] = await fake_whatsapp.wait_sent(lambda sent: len(sent) == 1)
    status, _, _ = await fake_whatsapp.post(fake_whatsapp.status(reply.id, "failed", ALICE, code=131026))
    assert status == 200
    row = await _row_of(runner, reply.id)
    assert row is not None and (row["status"], row["receipt"]) == ("failed", "failed")
    assert row["error"] == "WhatsApp could not deliver it (131026): Message undeliverable"
    failures = await runner.store.run_read(delivery_failures)
    assert [(f["where"], f["error"]) for f in failures] == [(f"whatsapp:{ALICE}", row["error"])]


@pytest.fixture
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outbound, "PAIR_BACKOFF", (0.6, 1.2, 2.4))
    monkeypatch.setattr(outbound, "THROUGHPUT_BACKOFF", (0.3, 0.6))


async def test_the_pair_rate_limit_makes_only_that_chat_wait_longer_each_time(
        start_whatsapp, fake_whatsapp, quick_backoff):
    runner = await start_whatsapp()
    for user in (ALICE, BOB):
        await fake_whatsapp.post(fake_whatsapp.message(user, "hi"))
    await fake_whatsapp.wait_sent(lambda sent: len(sent) == 2)
    adapter = runner.adapters["whatsapp"]
    fake_whatsapp.fail("131056", to=ALICE, times=2)
    started = asyncio.get_running_loop().time()
    slow = asyncio.create_task(runner.delivery.deliver(adapter, ALICE, OutboundMessage("for alice")))
    await wait_until(lambda: len(fake_whatsapp.faults) and fake_whatsapp.faults[0].times == 1, what="first refusal")
    report = await runner.delivery.deliver(adapter, BOB, OutboundMessage("for bob"))
    assert not report.failed
    assert not (await slow).failed
    waited = asyncio.get_running_loop().time() - started
    assert waited >= 0.6 + 1.2  # 131056 twice: the second wait doubled
    texts = [m.text for m in fake_whatsapp.sent]
    # Bob's message went while Alice's waited out her limit, not after it.
    assert texts.index("for bob") < texts.index("for alice") and texts.count("for alice") == 1
    assert runner.faults.recent().get("platform_rate_limited", 0) >= 2


async def test_the_throughput_limit_is_waited_out(start_whatsapp, fake_whatsapp, quick_backoff):
    runner = await start_whatsapp()
    await fake_whatsapp.post(fake_whatsapp.message(ALICE, "hi"))
    await fake_whatsapp.wait_sent(lambda sent: len(sent) == 1)
    fake_whatsapp.fail("130429", times=1)
    report = await runner.delivery.deliver(runner.adapters["whatsapp"], ALICE, OutboundMessage("later"))
    assert not report.failed and [m.text for m in fake_whatsapp.sent][-1] == "later"


async def test_a_rate_limit_reported_later_in_a_status_sends_the_message_again_on_its_row(
        start_whatsapp, fake_whatsapp, quick_backoff):
    runner = await start_whatsapp()
    await fake_whatsapp.post(fake_whatsapp.message(ALICE, "hi"))
    await fake_whatsapp.wait_sent(lambda sent: len(sent) == 1)
    fake_whatsapp.fail("status:131056", to=ALICE)
    report = await runner.delivery.deliver(runner.adapters["whatsapp"], ALICE, OutboundMessage("once more"),
                                           ref="job:7")
    assert not report.failed
    [again] = [m for m in await fake_whatsapp.wait_sent(lambda sent: any(m.text == "once more" for m in sent))
               if m.text == "once more"]
    row = await wait_until(lambda: _row_of(runner, again.id), what="the row names the message sent again")
    assert (row["ref"], row["status"]) == ("job:7", "sent")
    assert report.message_ids != [again.id]  # the first id, refused, is no longer on the row
