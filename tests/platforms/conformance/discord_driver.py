"""Discord's driver: the fake Discord (tests/fakes/discord_api.py), REST and gateway websocket, which discord.py
talks to for real.

A message is a MESSAGE_CREATE on the gateway (and a message in the channel's history); in a server channel or a
thread the user mentions the bot. Discord has no acknowledgement of a message and never sends one again: what
makes a message safe is the inbox row (and the channel's cursor moving past it), so a message's
acknowledgement is the moment its inbox row exists, and "delivering it again" is what a crash between the
inbox write and the cursor's save amounts to — the next daemon reads the message back from the channel's
history. A command is an application command and a press a button's INTERACTION_CREATE; each is acknowledged
by its interaction callback, which Discord wants within 3 seconds.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from sqlalchemy import select

from gateway.platforms.discord.outbound import MAX_CHARS
from gateway.storage.store import Store
from gateway.storage.tables import inbox
from tests.fakes.discord_api import CHANNEL, THREAD, FakeDiscord, Interaction, Sent, utf16_len
from tests.platforms.conformance.driver import Ack, BotMessage, Event, PlatformDriver, wait_until

ALICE, STRANGER = 111_000_000_000_000_001, 999_000_000_000_000_009
ALICE_DM, STRANGER_DM = 600_000_000_000_000_111, 600_000_000_000_000_999


class DiscordDriver(PlatformDriver):
    name = "discord"
    platform = "discord"
    threads = True
    limit = MAX_CHARS  # 2000 characters; the driver counts UTF-16 units, never fewer
    credential = True
    files = True
    user_edits = True
    user = str(ALICE)
    chat = str(ALICE_DM)

    fake: FakeDiscord

    async def open(self) -> None:
        self.fake = FakeDiscord()
        await self.fake.start()
        self.fake.dm(ALICE, ALICE_DM)
        self.fake.dm(STRANGER, STRANGER_DM)
        self.monkeypatch.setenv("DISCORD_BOT_TOKEN", self.fake.token)

    async def close(self) -> None:
        await super().close()
        await self.fake.stop()

    def platform_config(self, home: Path) -> dict[str, Any]:
        return {"platforms": {"discord": {"enabled": True, "api_base_url": self.fake.api_url,
                                          "gateway_url": self.fake.gateway_url}}}

    def thread_chat(self) -> tuple[str, str]:
        return str(CHANNEL), str(THREAD)

    # ---- what users do ---------------------------------------------------------------------------

    def _where(self, chat: str | None, thread: str | None) -> int:
        return int(thread or chat or self.chat)

    async def send(self, text: str, *, chat: str | None = None, thread: str | None = None) -> Event:
        at = time.monotonic()
        channel = self._where(chat, thread)
        in_server = "guild_id" in self.fake.channels[channel]
        msg = self.fake.user_message(channel, ALICE, text, mention=in_server)  # servers: "@Herald text"
        return Event("message", chat or self.chat, thread, text, at, msg)

    async def command(self, name: str, args: str = "", *, chat: str | None = None,
                      thread: str | None = None) -> Event:
        at = time.monotonic()
        record = self.fake.slash(self._where(chat, thread), ALICE, name, args)
        return Event("message", chat or self.chat, thread, f"/{name} {args}".strip(), at, record)

    async def send_file(self, text: str, name: str, content: bytes, *, delay: float = 0.0) -> Event:
        self.fake.file_delay = delay
        at = time.monotonic()
        msg = self.fake.user_message(ALICE_DM, ALICE, text, attachments=[self.fake.attachment(name, content)])
        return Event("message", self.chat, None, text, at, msg)

    async def edit(self, event: Event, text: str) -> Event:
        at = time.monotonic()
        update = self.fake.user_edit(event.raw, text)
        return Event("message", event.chat, event.thread, text, at, update)

    async def send_as_stranger(self, text: str) -> Event:
        at = time.monotonic()
        msg = self.fake.user_message(STRANGER_DM, STRANGER, text)
        return Event("message", str(STRANGER_DM), None, text, at, msg)

    async def press(self, message: BotMessage, button: str) -> Event:
        at = time.monotonic()
        record = self.fake.press(int(message.id), ALICE, button)
        return Event("press", message.chat, message.thread, button, at, record)

    async def redeliver(self, event: Event) -> None:
        """The daemon dies after the message was in the inbox but before its channel's cursor was saved: the
        next one reads it back from the channel's history."""
        msg = event.raw
        assert isinstance(msg, dict), "only messages are read back"
        runner = self.runner
        home, url = runner.paths.home, runner.store.url
        await self.stop(runner)
        store = Store(url)
        await store.init()
        try:
            await store.cursors.save("discord", {msg["channel_id"]: str(int(msg["id"]) - 1)})
        finally:
            await store.close()
        await self.start(home=home)

    # ---- what the platform saw -------------------------------------------------------------------

    async def ack(self, event: Event, timeout: float = 10.0) -> Ack:
        if isinstance(event.raw, Interaction):
            record = event.raw
            await wait_until(lambda: record.callback_at is not None, timeout, "the interaction's callback")
            assert record.callback_at is not None
            return Ack(record.callback_at - record.dispatched, record.callback_at)
        message_id = event.raw["id"]
        dispatched = self.fake.dispatched_at[int(message_id)]
        store = self.runner.store
        query = select(inbox.c.id).where(inbox.c.platform == "discord", inbox.c.platform_message_id == message_id)
        deadline = time.monotonic() + timeout
        while not await store.run_read(lambda c: c.execute(query).first()):
            assert time.monotonic() < deadline, f"message {message_id} never reached the inbox"
            await asyncio.sleep(0.005)
        now = time.monotonic()
        return Ack(now - dispatched, now)

    def _bot_message(self, sent: Sent) -> tuple[str, BotMessage]:
        channel = self.fake.channels[sent.channel_id]
        thread = str(sent.channel_id) if channel["type"] == 11 else None
        chat = channel["parent_id"] if thread else str(sent.channel_id)
        return chat, BotMessage(str(sent.id), chat, thread, sent.content, [b["custom_id"] for b in sent.buttons],
                                sent.monotonic, max(sent.edits, 0),
                                str(sent.reply_to) if sent.reply_to else None, sent)

    def messages(self, chat: str) -> list[BotMessage]:
        out = []
        for sent in self.fake.sent:
            where, message = self._bot_message(sent)
            if where == chat:
                out.append(message)
        return out

    def notices(self, press: Event) -> list[str]:
        record: Interaction = press.raw
        ephemeral = [f.content for f in record.followups]
        posted = [m.text for m in self.messages(press.chat)
                  if m.thread == press.thread and m.at > press.at and m.raw.interaction is None]
        return ephemeral + posted

    def length(self, message: BotMessage) -> int:
        return utf16_len(message.text)

    def code_blocks(self, message: BotMessage) -> list[tuple[str | None, list[str]]]:
        blocks: list[tuple[str | None, list[str]]] = []
        lines: list[str] | None = None
        language: str | None = None
        for line in message.text.split("\n"):
            stripped = line.strip()
            if stripped.startswith("```"):
                if lines is None:
                    lines, language = [], stripped[3:].strip() or None
                else:
                    blocks.append((language, lines))
                    lines = None
            elif lines is not None:
                lines.append(line)
        assert lines is None, f"a code fence left open in {message.text[-200:]!r}"
        return blocks
