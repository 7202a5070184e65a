"""Telegram's drivers: the fake Bot API (tests/fakes/telegram_api.py), which python-telegram-bot talks to for
real, in long polling mode and in webhook mode.

Polling: an event is delivered when a ``getUpdates`` answer carries it and acknowledged when a later
``getUpdates`` asks for a higher offset. Webhook: the fake POSTs the update to the bot's webhook and the
200 is the acknowledgement. A button press is acknowledged by ``answerCallbackQuery`` in both modes: that
is what stops the spinner on the user's button.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

from gateway.platforms.telegram.outbound import MAX_UTF16
from tests.fakes.telegram_api import BOT_USERNAME, FakeTelegram, SentMessage, utf16_len
from tests.platforms.conformance.driver import Ack, BotMessage, Event, PlatformDriver, wait_until

ALICE, STRANGER = 111, 999
FORUM, TOPIC = -1002, 42


class TelegramDriver(PlatformDriver):
    name = "telegram"
    platform = "telegram"
    threads = True  # forum topics
    limit = MAX_UTF16  # 4096 UTF-16 code units of text, counted after the entities are taken out
    credential = True
    files = True
    user_edits = True
    user = str(ALICE)
    chat = str(ALICE)  # a private chat's id is the user's

    fake: FakeTelegram

    async def open(self) -> None:
        self.fake = FakeTelegram()
        await self.fake.start()
        self.monkeypatch.setenv("TELEGRAM_BOT_TOKEN", self.fake.token)

    async def close(self) -> None:
        await super().close()
        await self.fake.stop()

    def platform_config(self, home: Path) -> dict[str, Any]:
        return {"platforms": {"telegram": {"enabled": True, "base_url": self.fake.base_url}}}

    def thread_chat(self) -> tuple[str, str]:
        return str(FORUM), str(TOPIC)

    # ---- what users do ---------------------------------------------------------------------------

    def _push_message(self, text: str, chat: str | None, thread: str | None, user: int = ALICE) -> dict[str, Any]:
        chat_id = int(chat or self.chat)
        if chat_id < 0:  # a group: the bot hears what mentions it
            return self.fake.user_message(chat_id, user, f"@{BOT_USERNAME} {text}", chat_type="supergroup",
                                          thread_id=int(thread) if thread else None)
        return self.fake.user_message(chat_id, user, text)

    async def send(self, text: str, *, chat: str | None = None, thread: str | None = None) -> Event:
        at = time.monotonic()
        update = self._push_message(text, chat, thread)
        return await self._deliver(Event("message", chat or self.chat, thread, text, at, update))

    async def command(self, name: str, args: str = "", *, chat: str | None = None,
                      thread: str | None = None) -> Event:
        text = f"/{name} {args}".strip()
        at = time.monotonic()
        chat_id = int(chat or self.chat)
        # A typed command with its bot_command entity (the fake adds it); in groups no mention is needed.
        update = self.fake.user_message(chat_id, ALICE, text, chat_type="supergroup" if chat_id < 0 else "private",
                                        thread_id=int(thread) if thread else None)
        return await self._deliver(Event("message", chat or self.chat, thread, text, at, update))

    async def send_file(self, text: str, name: str, content: bytes, *, delay: float = 0.0) -> Event:
        self.fake.file_delay = delay
        file_id = self.fake.add_file(content, name)
        at = time.monotonic()
        update = self.fake.user_message(ALICE, text=None, caption=text, document={
            "file_id": file_id, "file_unique_id": file_id + "u", "file_name": name, "file_size": len(content)})
        return await self._deliver(Event("message", self.chat, None, text, at, update))

    async def edit(self, event: Event, text: str) -> Event:
        at = time.monotonic()
        words = f"@{BOT_USERNAME} {text}" if int(event.chat) < 0 else text  # a group: still addressed to the bot
        update = self.fake.user_edit(event.raw, words)
        return await self._deliver(Event("message", event.chat, event.thread, text, at, update))

    async def send_as_stranger(self, text: str) -> Event:
        at = time.monotonic()
        update = self.fake.user_message(STRANGER, STRANGER, text)
        return await self._deliver(Event("message", str(STRANGER), None, text, at, update))

    async def press(self, message: BotMessage, button: str) -> Event:
        sent: SentMessage = message.raw
        at = time.monotonic()
        update = self.fake.press(sent.chat_id, ALICE, sent.message_id, button,
                                 chat_type="supergroup" if sent.chat_id < 0 else "private")
        return await self._deliver(Event("press", message.chat, message.thread, button, at, update))

    async def _deliver(self, event: Event) -> Event:
        """Polling: the update waits in the fake's queue for the bot's next getUpdates."""
        return event

    async def redeliver(self, event: Event) -> None:
        """A crash after the update was stored but before its offset was confirmed: the daemon starts again
        and Telegram hands the update out again."""
        runner = self.runner
        home = runner.paths.home
        await self.stop(runner)
        self.fake.updates.insert(0, event.raw)
        await self.start(home=home)

    # ---- what the platform saw -------------------------------------------------------------------

    async def ack(self, event: Event, timeout: float = 10.0) -> Ack:
        update_id = event.raw["update_id"]
        if event.kind == "press":
            query = event.raw["callback_query"]["id"]
            await wait_until(lambda: query in self.fake.answered_at, timeout, "answerCallbackQuery")
            return Ack(self.fake.answered_at[query] - self.fake.handed_out[update_id], self.fake.answered_at[query])
        await wait_until(lambda: update_id in self.fake.confirmed_at, timeout, f"update {update_id} confirmed")
        confirmed = self.fake.confirmed_at[update_id]
        return Ack(confirmed - self.fake.handed_out[update_id], confirmed)

    def messages(self, chat: str) -> list[BotMessage]:
        return [BotMessage(str(m.message_id), chat, str(m.thread_id) if m.thread_id else None, m.text,
                           [b["callback_data"] for b in m.buttons if "callback_data" in b], m.monotonic, m.edits,
                           str(m.reply_to) if m.reply_to else None, m)
                for m in self.fake.sent_to(int(chat))]

    def notices(self, press: Event) -> list[str]:
        query = press.raw["callback_query"]["id"]
        toasts = [a.get("text") for a in self.fake.callback_answers if a.get("callback_query_id") == query]
        posted = [m.text for m in self.messages(press.chat) if m.thread == press.thread and m.at > press.at]
        return [t for t in toasts if t] + posted

    def length(self, message: BotMessage) -> int:
        return utf16_len(message.text)

    def code_blocks(self, message: BotMessage) -> list[tuple[str | None, list[str]]]:
        sent: SentMessage = message.raw
        units = sent.text.encode("utf-16-le")

        def covered(entity: dict[str, Any]) -> str:
            offset, length = entity["offset"], entity["length"]
            assert offset >= 0 and length > 0 and 2 * (offset + length) <= len(units), f"entity out of range: {entity}"
            # Strict decoding fails where an entity starts or ends inside a surrogate pair.
            return units[2 * offset: 2 * (offset + length)].decode("utf-16-le")

        assert "```" not in sent.text, f"a fence shown as text: the code block is broken in {sent.text[:200]!r}"
        blocks = []
        for entity in sorted(sent.entities, key=lambda e: e["offset"]):
            text = covered(entity)
            if entity["type"] == "pre":
                blocks.append((entity.get("language"), text.rstrip("\n").split("\n")))
        return blocks


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TelegramWebhookDriver(TelegramDriver):
    """The same bot in webhook mode: Telegram POSTs each update and redelivers it until it gets a 2xx."""

    name = "telegram-webhook"

    def platform_config(self, home: Path) -> dict[str, Any]:
        port = free_port()
        config = super().platform_config(home)
        config["http"] = {"port": port}
        config["platforms"]["telegram"].update(mode="webhook", public_url=f"http://127.0.0.1:{port}")
        return config

    async def _deliver(self, event: Event) -> Event:
        self.fake.updates.remove(event.raw)  # POSTed, not handed out by getUpdates
        await self._post(event)
        return event

    async def _post(self, event: Event) -> None:
        started = time.monotonic()
        event.status = await self.fake.deliver_webhook(event.raw)
        done = time.monotonic()
        event.ack = Ack(done - started, done)
        self.fake.handed_out.setdefault(event.raw["update_id"], started)

    async def redeliver(self, event: Event) -> None:
        """Telegram POSTs the update again (the first answer was lost or late)."""
        await self._post(event)

    async def ack(self, event: Event, timeout: float = 10.0) -> Ack:
        assert event.status == 200, f"the webhook answered {event.status}"
        if event.kind == "press":
            return await super().ack(event, timeout)
        assert event.ack is not None
        return event.ack
