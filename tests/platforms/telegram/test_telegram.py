"""Telegram end to end: the real runner + python-telegram-bot against the fake Bot API and the fake model."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import select

from gateway.config import parse_config, resolve_paths
from gateway.outbound.delivery import RESENDING
from gateway.platforms.base import Button, ButtonPress, OutboundMessage
from gateway.platforms.telegram.adapter import TelegramAdapter
from gateway.runner import GatewayRunner
from gateway.storage.tables import inbox
from tests.fakes.llm import FakeLLM, Reply
from tests.fakes.telegram_api import BOT_USERNAME, FakeTelegram
from tests.support.media import image_bytes
from tests.support.polling import wait_until
from tools.registry import registry

ALICE, BOB, CAROL, STRANGER = 111, 222, 333, 999
GROUP, FORUM = -1001, -1002

Factory = Callable[..., Awaitable[GatewayRunner]]


@pytest.fixture
async def start_tg(home: Path, tmp_path: Path, fake_llm: FakeLLM, fake_tg: FakeTelegram,
                   monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Factory]:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", fake_tg.token)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    runners: list[GatewayRunner] = []

    async def factory(connect: bool = True, http_port: int = 0, **telegram: Any) -> GatewayRunner:
        tg = {"enabled": True, "base_url": fake_tg.base_url, "allowed_users": [ALICE, str(BOB), CAROL]}
        tg.update(telegram)
        cfg = parse_config({
            "http": {"port": http_port},
            "model": {"base_url": fake_llm.base_url, "name": "fake-model", "max_retries": 0},
            "platforms": {"web": {"enabled": False}, "telegram": tg},
        })
        runner = GatewayRunner(cfg, resolve_paths())
        await runner.start()
        runners.append(runner)
        if connect:
            await wait_until(lambda: runner.adapters["telegram"].state == "connected")
        return runner

    yield factory
    for runner in runners:
        await runner.shutdown()


def adapter(runner: GatewayRunner) -> TelegramAdapter:
    a = runner.adapters["telegram"]
    assert isinstance(a, TelegramAdapter)
    return a


# ---------------------------------------------------------------------------------------------- DMs


async def test_dm_is_answered_as_a_reply_with_the_command_menu_set(start_tg, fake_tg, fake_llm):
    await start_tg()
    assert fake_tg.commands and {"help", "new", "stop"} <= {c["command"] for c in fake_tg.commands}
    update = fake_tg.user_message(ALICE, text="hello there [sleep=0.8]")
    sent = await fake_tg.wait_sent(lambda s: any(m.text == "echo: hello there [sleep=0.8]" for m in s))
    reply = sent[-1]
    assert reply.chat_id == ALICE and reply.reply_to == update["message"]["message_id"]
    assert (ALICE, "typing", None) in fake_tg.chat_actions
    assert fake_llm.requests[0]["messages"][-1]["content"] == "hello there [sleep=0.8]"
    # A fast answer shows no "typing…" at all: one request fewer per message.
    actions = len(fake_tg.chat_actions)
    fake_tg.user_message(ALICE, text="quick")
    await fake_tg.wait_sent(lambda s: any(m.text == "echo: quick" for m in s))
    await asyncio.sleep(0.7)
    assert len(fake_tg.chat_actions) == actions


async def test_allowed_users_may_be_numbers_or_strings(start_tg, fake_tg):
    await start_tg()
    fake_tg.user_message(ALICE, text="from alice")  # configured as the number 111
    fake_tg.user_message(BOB, text="from bob")  # configured as the string "222"
    await fake_tg.wait_sent(lambda s: {"echo: from alice", "echo: from bob"} <= {m.text for m in s})


async def test_markdown_becomes_entities_and_a_refused_entity_is_resent_plain(start_tg, fake_tg, fake_llm):
    await start_tg()
    fake_llm.script(Reply("Some **bold** and `code`"), Reply("again **bold**"))
    fake_tg.user_message(ALICE, text="format please")
    sent = await fake_tg.wait_sent(lambda s: len(s) == 1)
    assert sent[0].text == "Some bold and code"
    assert {e["type"] for e in sent[0].entities} == {"bold", "code"}
    fake_tg.fail("sendMessage", "parse", chat_id=ALICE)
    fake_tg.user_message(ALICE, text="again")
    sent = await fake_tg.wait_sent(lambda s: len(s) == 2)
    assert sent[1].text == "again bold" and sent[1].entities == []


# ---------------------------------------------------------------------------------------------- groups


async def test_group_needs_a_mention_a_reply_or_a_command(start_tg, fake_tg, fake_llm):
    await start_tg()
    fake_tg.user_message(GROUP, ALICE, "just chatting", chat_type="supergroup")
    fake_tg.user_message(GROUP, ALICE, "/help@other_bot", chat_type="supergroup")
    fake_tg.user_message(GROUP, ALICE, f"@{BOT_USERNAME} what is up", chat_type="supergroup")
    await fake_tg.wait_sent(lambda s: any(m.text == "echo: what is up" for m in s))
    first = fake_tg.sent_to(GROUP)[0]
    fake_tg.reply_to_bot(first, BOB, "and a follow-up")
    await fake_tg.wait_sent(lambda s: any(m.text == "echo: and a follow-up" for m in s))
    fake_tg.user_message(GROUP, BOB, f"/help@{BOT_USERNAME}", chat_type="supergroup")
    await fake_tg.wait_sent(lambda s: any(m.text.startswith("Commands:") for m in s))
    await asyncio.sleep(0.2)
    texts = fake_tg.texts(GROUP)
    assert "echo: just chatting" not in texts
    assert sum(t.startswith("Commands:") for t in texts) == 1  # /help@other_bot was not ours
    assert all("just chatting" not in str(r["messages"]) for r in fake_llm.requests)


async def test_group_without_require_mention_takes_everything(start_tg, fake_tg):
    await start_tg(require_mention=False)
    fake_tg.user_message(GROUP, ALICE, "just chatting", chat_type="group")
    await fake_tg.wait_sent(lambda s: any(m.text == "echo: just chatting" for m in s))


async def test_forum_topic_is_its_own_session_and_replies_go_into_it(start_tg, fake_tg, fake_llm):
    runner = await start_tg()
    fake_tg.user_message(FORUM, ALICE, f"@{BOT_USERNAME} in topic [sleep=0.8]", chat_type="supergroup",
                         thread_id=42)
    await fake_tg.wait_sent(lambda s: any(m.text.startswith("echo: in topic") for m in s))
    reply = fake_tg.sent_to(FORUM)[0]
    assert reply.thread_id == 42
    assert (FORUM, "typing", 42) in fake_tg.chat_actions
    fake_tg.user_message(FORUM, ALICE, f"@{BOT_USERNAME} other topic", chat_type="supergroup", thread_id=7)
    await fake_tg.wait_sent(lambda s: any(m.text == "echo: other topic" for m in s))
    assert fake_tg.sent_to(FORUM)[-1].thread_id == 7
    assert await runner.store.sessions.active(f"telegram:group:{FORUM}:t42:u{ALICE}") is not None
    assert await runner.store.sessions.active(f"telegram:group:{FORUM}:t7:u{ALICE}") is not None
    # The second topic's request carried nothing of the first.
    assert "in topic" not in str(fake_llm.requests[-1]["messages"])


# ---------------------------------------------------------------------------------------------- errors


@pytest.mark.slow
async def test_a_429_on_one_chat_does_not_hold_up_another(start_tg, fake_tg):
    await start_tg()
    fake_tg.flood(ALICE, 2.0)
    fake_tg.user_message(ALICE, text="flooded")
    await asyncio.sleep(0.3)  # Alice's reply has hit the 429 and waits
    fake_tg.user_message(BOB, text="flowing")
    await fake_tg.wait_sent(lambda s: any(m.text == "echo: flowing" for m in s))
    assert fake_tg.texts(ALICE) == []  # Bob's answer went while Alice's still waited out her 429
    await fake_tg.wait_sent(lambda s: any(m.text == "echo: flooded" for m in s), timeout=10)
    assert fake_tg.texts(ALICE) == ["echo: flooded"]


async def test_blocked_by_the_user_is_recorded_not_retried_forever(start_tg, fake_tg):
    runner = await start_tg()
    fake_tg.blocked.add(ALICE)
    fake_tg.user_message(ALICE, text="then blocked")

    async def failed() -> bool:
        async with runner.store.engine.connect() as conn:
            from sqlalchemy import text

            rows = (await conn.execute(text("select status, error from inbox"))).all()
        return bool(rows) and rows[0][0] == "failed" and "blocked" in (rows[0][1] or "")

    deadline = time.monotonic() + 10
    while not await failed():
        assert time.monotonic() < deadline, "the inbox row never became failed"
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    assert fake_tg.calls.count("sendMessage") == 1


async def test_a_dropped_connection_while_sending_is_retried_and_the_resend_announced(start_tg, fake_tg):
    """A connection closed without an answer may have carried the message (Telegram has no idempotency key, and
    which it was cannot be seen from here): the resend is announced, and the answer shows once."""
    await start_tg()
    fake_tg.fail("sendMessage", "drop", chat_id=ALICE)
    fake_tg.user_message(ALICE, text="despite the drop")
    await fake_tg.wait_sent(lambda s: any(m.text == "echo: despite the drop" for m in s), timeout=10)
    assert fake_tg.texts(ALICE) == [RESENDING, "echo: despite the drop"]


async def test_a_message_telegram_took_before_the_connection_was_reset_shows_twice_only_announced(start_tg, fake_tg):
    await start_tg()
    fake_tg.fail("sendMessage", "taken-reset", chat_id=ALICE)
    fake_tg.user_message(ALICE, text="hello")
    await fake_tg.wait_sent(lambda s: sum(m.text == "echo: hello" for m in s) >= 2, timeout=10)
    assert fake_tg.texts(ALICE) == ["echo: hello", RESENDING, "echo: hello"]


async def test_polling_resumes_after_a_network_loss_and_readyz_shows_it(start_tg, fake_tg):
    runner = await start_tg()
    url = f"http://127.0.0.1:{runner.http_port}/readyz"
    await fake_tg.go_down()
    await wait_until(lambda: adapter(runner).state == "retrying")
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        body = await resp.json()
        assert resp.status == 503 and body["adapters"]["telegram"]["state"] == "retrying"
    fake_tg.come_back()
    fake_tg.user_message(ALICE, text="back again")
    # Polling backs off up to 30 s while the API is away; on a loaded machine the next attempt can be late.
    await fake_tg.wait_sent(lambda s: any(m.text == "echo: back again" for m in s), timeout=45)
    assert adapter(runner).state == "connected"
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        assert resp.status == 200


# ---------------------------------------------------------------------------------------------- buttons


async def test_button_press_reaches_the_handler_and_is_answered(start_tg, fake_tg):
    runner = await start_tg()
    pressed: list[ButtonPress] = []

    async def handler(_adapter: Any, press: ButtonPress) -> str:
        pressed.append(press)
        return "Noted."

    runner.inbound.buttons["pick"] = handler
    long_id = "pick:" + "x" * 100
    tg = adapter(runner)
    await runner.delivery.deliver(tg, str(ALICE), OutboundMessage("Choose:", buttons=[
        Button("pick:yes", "Yes"), Button(long_id, "Long one")]))
    sent = fake_tg.sent_to(ALICE)[-1]
    datas = [b["callback_data"] for b in sent.buttons]
    assert datas[0] == "pick:yes" and all(len(d.encode()) <= 64 for d in datas)
    fake_tg.press(ALICE, ALICE, sent.message_id, datas[1])
    await fake_tg.wait_until(lambda: len(fake_tg.callback_answers) == 1)
    assert pressed[0].button_id == long_id and pressed[0].message_id == str(sent.message_id)
    assert fake_tg.callback_answers[0]["text"] == "Noted."
    fake_tg.press(ALICE, STRANGER, sent.message_id, datas[0])
    await fake_tg.wait_until(lambda: len(fake_tg.callback_answers) == 2)
    assert len(pressed) == 1 and "not allowed" in fake_tg.callback_answers[1]["text"]
    await tg.edit(str(ALICE), str(sent.message_id), None, [])
    assert fake_tg.sent_to(ALICE)[-1].buttons == []


async def test_a_notice_too_long_for_a_toast_stops_the_spinner_and_goes_to_the_chat_whole(start_tg, fake_tg):
    runner = await start_tg()
    notice = " ".join(["This answer is longer than the 200 characters a toast can hold."] * 5)

    async def wordy(_adapter: Any, _press: ButtonPress) -> str:
        return notice

    runner.inbound.buttons["wordy"] = wordy
    await runner.delivery.deliver(adapter(runner), str(ALICE), OutboundMessage("Ask:", buttons=[
        Button("wordy:1", "Tell me")]))
    sent = fake_tg.sent_to(ALICE)[-1]
    fake_tg.press(ALICE, ALICE, sent.message_id, "wordy:1")
    await fake_tg.wait_sent(lambda s: any(m.text == notice for m in s))
    await fake_tg.wait_until(lambda: bool(fake_tg.callback_answers))
    assert [a.get("text") for a in fake_tg.callback_answers] == [None]  # answered once, without a cut notice


# ---------------------------------------------------------------------------------------------- restart


async def test_updates_that_arrive_while_the_daemon_is_down_are_all_answered_after_it_starts(start_tg, fake_tg):
    runner = await start_tg()
    fake_tg.user_message(ALICE, text="before the stop")
    await fake_tg.wait_sent(lambda s: any(m.text == "echo: before the stop" for m in s))
    await runner.shutdown()
    for i in range(3):
        fake_tg.user_message(ALICE if i % 2 == 0 else BOB, text=f"while down {i}")
    await start_tg()
    await fake_tg.wait_sent(lambda s: sum(m.text.startswith("echo: while down") for m in s) == 3)
    await asyncio.sleep(0.5)
    texts = fake_tg.texts()
    assert texts.count("echo: before the stop") == 1
    assert sorted(t for t in texts if "while down" in t) == [f"echo: while down {i}" for i in range(3)]


async def test_updates_are_confirmed_only_after_they_are_in_the_inbox(start_tg, fake_tg):
    runner = await start_tg()
    ingested: list[str] = []
    real_ingest = runner.accept

    async def slow_ingest(adapter_: Any, msg: Any) -> Any:
        await asyncio.sleep(0.3)
        result = await real_ingest(adapter_, msg)
        ingested.append(msg.platform_message_id)
        return result

    runner.accept = slow_ingest  # type: ignore[method-assign]
    update = fake_tg.user_message(ALICE, text="careful")
    await asyncio.sleep(0.15)
    assert fake_tg.confirmed_offset <= update["update_id"]  # still being persisted: not confirmed
    await fake_tg.wait_sent(lambda s: any(m.text == "echo: careful" for m in s))
    await fake_tg.wait_until(lambda: fake_tg.confirmed_offset > update["update_id"])
    assert ingested == [f"{ALICE}/{update['message']['message_id']}"]


@pytest.mark.slow
async def test_a_files_update_is_confirmed_once_its_row_is_durable_and_the_file_comes_after(start_tg, fake_tg,
                                                                                          fake_llm):
    runner = await start_tg()
    fake_tg.file_delay = 2.0
    file_id = fake_tg.add_file(b"slow bytes", "slow.txt")
    update = fake_tg.user_message(ALICE, text=None, caption="a slow one", document={
        "file_id": file_id, "file_unique_id": "u9", "file_name": "slow.txt", "file_size": 10})
    message_id = f"{ALICE}/{update['message']['message_id']}"
    await fake_tg.wait_until(lambda: fake_tg.confirmed_offset > update["update_id"])
    # Confirmed while the file is still on its way, but never before the inbox has the message, and with it
    # what is left to fetch (a restart fetches it again).
    rows = await runner.store.run_read(lambda c: [dict(r._mapping) for r in c.execute(
        select(inbox).where(inbox.c.platform == "telegram", inbox.c.platform_message_id == message_id))])
    assert [r["payload"]["pending"]["files"][0]["name"] for r in rows] == ["slow.txt"]
    assert fake_llm.requests == []
    await fake_tg.wait_sent(lambda s: any(m.text.startswith("echo: a slow one") for m in s))
    content = fake_llm.requests[-1]["messages"][-1]["content"]
    paths = [line[2:] for line in content.splitlines() if line.startswith("- ")]
    assert len(paths) == 1 and Path(paths[0]).read_bytes() == b"slow bytes"  # noqa: ASYNC240


async def test_an_update_the_inbox_could_not_take_is_taken_on_the_next_poll(start_tg, fake_tg):
    runner = await start_tg()
    real_accept = runner.accept
    refused: list[str] = []

    async def flaky_accept(adapter_: Any, msg: Any) -> Any:
        if not refused:
            refused.append(msg.platform_message_id)
            raise ConnectionError("the database is away for a moment")
        return await real_accept(adapter_, msg)

    runner.accept = flaky_accept  # type: ignore[method-assign]
    update = fake_tg.user_message(ALICE, text="despite the hiccup")
    await fake_tg.wait_sent(lambda s: any(m.text == "echo: despite the hiccup" for m in s))
    assert refused == [f"{ALICE}/{update['message']['message_id']}"]
    assert adapter(runner).state == "connected"


# ---------------------------------------------------------------------------------------------- media


async def test_photo_and_document_are_downloaded_and_stickers_become_a_note(start_tg, fake_tg, fake_llm, home):
    runner = await start_tg(max_media_mb=0.001)  # about 1 KB
    picture = image_bytes(4, 4)  # a real image: one whose bytes are none would be refused (gateway/media/)
    small = fake_tg.add_file(picture, "pic.png")
    big = fake_tg.add_file(b"x" * 5000, "big.bin")
    fake_tg.user_message(ALICE, text=None, caption="what is this",
                         photo=[{"file_id": small, "file_unique_id": "u1", "width": 9, "height": 9, "file_size": 10}])
    await fake_tg.wait_sent(lambda s: len(s) == 1)
    content = fake_llm.requests[-1]["messages"][-1]["content"]
    assert content.startswith("what is this")
    paths = [line[2:] for line in content.splitlines() if line.startswith("- ")]
    assert len(paths) == 1 and Path(paths[0]).read_bytes() == picture  # noqa: ASYNC240
    # Where the agent's tools can read it: the sandbox hides the profile's home (and its media folder).
    assert Path(paths[0]).parent == home / "workspace" / "attachments"
    ctx = runner.agents.tool_context("k", threading.Event(), None)
    read = json.loads(registry.dispatch("read_file", {"path": paths[0]}, ctx))
    assert "binary" in read.get("error", ""), read  # the agent's file tool opens it: not hidden from it
    fake_tg.user_message(ALICE, text=None, document={"file_id": big, "file_unique_id": "u2", "file_name": "big.bin",
                                                     "file_size": 5000})
    await fake_tg.wait_sent(lambda s: len(s) == 3)  # the user told what was not downloaded, then the answer
    assert "limit" in fake_llm.requests[-1]["messages"][-1]["content"]
    assert "could not download" in fake_tg.sent[1].text and "big.bin" in fake_tg.sent[1].text
    fake_tg.user_message(ALICE, text=None, sticker={"file_id": "s", "file_unique_id": "s", "type": "regular",
                                                    "width": 1, "height": 1, "is_animated": False,
                                                    "is_video": False, "emoji": "👍"})
    await fake_tg.wait_sent(lambda s: len(s) == 4)
    assert "sticker 👍" in fake_llm.requests[-1]["messages"][-1]["content"]


# ---------------------------------------------------------------------------------------------- webhook


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_webhook_verifies_the_secret(start_tg, fake_tg):
    port = free_port()
    await start_tg(http_port=port, mode="webhook", public_url=f"http://127.0.0.1:{port}")
    assert fake_tg.webhook and fake_tg.webhook["url"] == f"http://127.0.0.1:{port}/telegram/webhook"
    assert fake_tg.webhook["secret_token"]
    update = fake_tg.user_message(ALICE, text="via webhook")
    assert await fake_tg.deliver_webhook(update, secret_token="wrong") == 401
    async with aiohttp.ClientSession() as http, http.post(fake_tg.webhook["url"], json=update) as resp:
        assert resp.status == 401  # no header at all
    assert await fake_tg.deliver_webhook(update) == 200
    await fake_tg.wait_sent(lambda s: any(m.text == "echo: via webhook" for m in s))


async def test_the_daily_commands_are_in_the_telegram_menu(start_tg, fake_tg):
    await start_tg()
    names = {c["command"] for c in fake_tg.commands}
    assert {"retry", "undo", "title", "sessions", "resume", "search", "model", "personality", "reasoning"} <= names
