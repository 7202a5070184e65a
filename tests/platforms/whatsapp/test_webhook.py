"""The webhook at /whatsapp/webhook: Meta's verification handshake, the signature on every POST, bodies that are
not Meta's, other numbers' changes, redeliveries, and answering only once what came is stored."""

from __future__ import annotations

import asyncio
import json

import aiohttp
from sqlalchemy import select

from gateway.storage.tables import inbox
from tests.fakes.llm import last_user_message, message_text
from tests.platforms.conformance.driver import PLATFORM_ACK_LIMIT
from tests.platforms.whatsapp.conftest import ALICE, BOB, STRANGER, url


async def _get(runner, **query: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(url(runner), params=query) as resp:
        return resp.status, await resp.text()


async def test_the_verification_handshake_echoes_the_challenge_only_for_the_verify_token(
        start_whatsapp, fake_whatsapp):
    runner = await start_whatsapp()
    status, text = await _get(runner, **{"hub.mode": "subscribe", "hub.verify_token": fake_whatsapp.verify_token,
                                         "hub.challenge": "1158201444"})
    assert (status, text) == (200, "1158201444")
    status, text = await _get(runner, **{"hub.mode": "subscribe", "hub.verify_token": "guess",
                                         "hub.challenge": "1158201444"})
    assert status == 403 and "1158201444" not in text
    status, _ = await _get(runner, **{"hub.mode": "unsubscribe", "hub.verify_token": fake_whatsapp.verify_token,
                                      "hub.challenge": "1"})
    assert status == 403
    status, text = await _get(runner)
    assert status == 400 and "hub.verify_token" in json.loads(text)["error"]


async def test_a_post_without_the_right_signature_gets_401_and_reaches_nobody(start_whatsapp, fake_whatsapp, fake_llm):
    runner = await start_whatsapp()
    for kwargs in ({"signature": ""}, {"secret": "not-the-app-secret"}, {"signature": "sha256=00ff"},
                   {"signature": "sha1=" + "0" * 40}):
        status, _, _ = await fake_whatsapp.post(fake_whatsapp.message(ALICE, f"forged {kwargs}"), **kwargs)
        assert status == 401, kwargs
    # Signed over other bytes than those sent (a body changed on the way).
    body = fake_whatsapp.message(ALICE, "changed on the way")
    raw = json.dumps(body).encode()
    status, _, _ = await fake_whatsapp.post(raw.replace(b"changed", b"CHANGED"), signature=fake_whatsapp.sign(raw))
    assert status == 401
    await asyncio.sleep(0.3)
    assert fake_whatsapp.sent == [] and fake_llm.requests == []
    assert runner.counters.messages_accepted == 0 and runner.counters.messages_denied == 0


async def test_bodies_that_are_not_meta_s_get_a_4xx_and_never_a_stack_trace(start_whatsapp, fake_whatsapp):
    runner = await start_whatsapp()
    entry = fake_whatsapp.message(ALICE, "x")["entry"][0]
    value = entry["changes"][0]["value"]
    bad: list[bytes | dict] = [
        b"not json", b"[1, 2]", b'{"object": "lone \\ud800 surrogate"}', b"{" * 100_000,
        {"object": "whatsapp_business_account", "entry": {"not": "a list"}},
        {"object": "whatsapp_business_account", "entry": [{"changes": "nope"}]},
        {"object": "whatsapp_business_account", "entry": [{"changes": [{"field": "messages", "value": []}]}]},
        {"object": "whatsapp_business_account", "entry": [{"changes": [{"field": "messages", "value": {
            **value, "messages": [{"id": "wamid.x", "type": "text", "text": {"body": "no sender"}}]}}]}]},
        {"object": "whatsapp_business_account", "entry": [{"changes": [{"field": "messages", "value": {
            **value, "messages": "many"}}]}]},
    ]
    for body in bad:
        status, text, _ = await fake_whatsapp.post(body)
        assert status == 400, (body if isinstance(body, dict) else body[:40], status, text)
        assert "Traceback" not in text and "error" in json.loads(text)
    # Well-formed but not for us (another number of the same app, another product): taken and passed over.
    other = fake_whatsapp.message(ALICE, "for the other number")
    other["entry"][0]["changes"][0]["value"]["metadata"]["phone_number_id"] = "555"
    for body in (other, {"object": "page", "entry": []}):
        status, _, _ = await fake_whatsapp.post(body)
        assert status == 200
    await asyncio.sleep(0.2)
    assert runner.counters.messages_accepted == 0 and fake_whatsapp.sent == []


async def test_a_redelivered_webhook_is_one_message_and_each_person_is_one_user_with_or_without_the_plus(
        start_whatsapp, fake_whatsapp, fake_llm):
    # Bob is allowed as "15551230002" in the config; Meta writes his number without the "+" too.
    runner = await start_whatsapp()
    body = fake_whatsapp.message(BOB, "only once")
    for _ in range(3):
        status, _, seconds = await fake_whatsapp.post(body)
        assert status == 200 and seconds < PLATFORM_ACK_LIMIT
    [answer] = await fake_whatsapp.wait_sent(lambda sent: len(sent) == 1)
    assert (answer.to, answer.text, answer.reply_to) == (BOB, "echo: only once",
                                                         body["entry"][0]["changes"][0]["value"]["messages"][0]["id"])
    await asyncio.sleep(0.3)
    assert len(fake_whatsapp.sent) == 1 and runner.counters.messages_duplicate == 2
    rows = await runner.store.run_read(lambda c: [dict(r._mapping) for r in c.execute(select(inbox))])
    assert [(r["platform"], r["payload"]["source"]["user_id"]) for r in rows] == [("whatsapp", BOB)]
    assert message_text(last_user_message(fake_llm.requests[0])) == "only once"


async def test_a_stranger_is_not_answered_by_the_model(start_whatsapp, fake_whatsapp, fake_llm):
    runner = await start_whatsapp()
    status, _, _ = await fake_whatsapp.post(fake_whatsapp.message(STRANGER, "let me in"))
    assert status == 200
    await fake_whatsapp.post(fake_whatsapp.message(ALICE, "and me"))
    await fake_whatsapp.wait_sent(lambda sent: any(m.text == "echo: and me" for m in sent))
    assert all("let me in" not in json.dumps(r["messages"]) for r in fake_llm.requests)
    assert runner.counters.messages_denied == 1
    assert all("let me in" not in m.text for m in fake_whatsapp.sent_to(STRANGER))  # at most a pairing code


async def test_a_webhook_while_the_daemon_drains_is_refused_and_taken_when_meta_sends_it_again(
        start_whatsapp, fake_whatsapp, fake_llm):
    runner = await start_whatsapp()
    body = fake_whatsapp.message(ALICE, "during the drain")
    runner._stopping = True  # what shutdown() sets first: new messages are refused, nothing is stored
    try:
        status, _, _ = await fake_whatsapp.post(body)
    finally:
        runner._stopping = False
    assert status == 503
    assert runner.counters.messages_accepted == 0
    status, _, _ = await fake_whatsapp.post(body)  # Meta retries
    assert status == 200
    await fake_whatsapp.wait_sent(lambda sent: any(m.text == "echo: during the drain" for m in sent))
