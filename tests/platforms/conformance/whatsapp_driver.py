"""WhatsApp's driver: the fake Cloud API (tests/fakes/whatsapp_api.py). Meta POSTs each event, signed with the
app secret, to ``/whatsapp/webhook`` of the daemon that serves it, and the 200 is the acknowledgement; a tap on a
reply button or a list row arrives the same way. WhatsApp has no threads, no edits and no messages only one
person sees: a press's notice is a message in the chat.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gateway.platforms.whatsapp.adapter import WEBHOOK_PATH
from gateway.platforms.whatsapp.outbound import MAX_TEXT
from gateway.runner import GatewayRunner
from tests.fakes.whatsapp_api import FakeWhatsApp, WaMessage, utf16_len
from tests.platforms.conformance.driver import Ack, BotMessage, Event, PlatformDriver
from tests.platforms.conformance.telegram_driver import free_port

ALICE, STRANGER = "+15551230001", "+15559990000"


class WhatsAppDriver(PlatformDriver):
    name = "whatsapp"
    platform = "whatsapp"
    threads = False
    edits = False
    limit = MAX_TEXT
    credential = True
    shows_code_language = False  # a monospace block has no language
    files = True
    user = ALICE
    chat = ALICE  # a conversation with a business number is one person's

    fake: FakeWhatsApp

    async def open(self) -> None:
        self.fake = FakeWhatsApp()
        self.fake.statuses = True
        await self.fake.start()
        for name, value in self.fake.env().items():
            self.monkeypatch.setenv(name, value)

    async def close(self) -> None:
        await super().close()
        await self.fake.stop()

    def platform_config(self, home: Path) -> dict[str, Any]:
        return {"http": {"port": free_port()},
                "platforms": {"whatsapp": {"enabled": True, "api_base_url": self.fake.api_url,
                                           "phone_number_id": self.fake.phone_number_id}}}

    async def start(self, overrides: dict[str, Any] | None = None, *, home: Path | None = None,
                    connect: bool = True) -> GatewayRunner:
        """The daemon, with the known user having written a moment ago: WhatsApp lets a business write first
        only with a template, and the suite's bot speaks first at times (a message with buttons)."""
        runner = await super().start(overrides, home=home, connect=connect)
        self.fake.last_inbound[self.user] = time.time()
        self.adapter(runner).window.seen(self.user)  # type: ignore[attr-defined]
        return runner

    def _url(self) -> str:
        serving = [r for r in self.runners if r.adapters["whatsapp"].state == "connected"] or self.runners
        url = f"http://127.0.0.1:{serving[-1].http_port}{WEBHOOK_PATH}"
        self.fake.webhook_url = url  # statuses go where Meta's callback URL points
        return url

    # ---- what users do ---------------------------------------------------------------------------

    async def send(self, text: str, *, chat: str | None = None, thread: str | None = None) -> Event:
        at = time.monotonic()
        body = self.fake.message(chat or self.chat, text)
        return await self._deliver(Event("message", chat or self.chat, None, text, at, body))

    async def command(self, name: str, args: str = "", *, chat: str | None = None,
                      thread: str | None = None) -> Event:
        return await self.send(f"/{name} {args}".strip(), chat=chat)

    async def send_file(self, text: str, name: str, content: bytes, *, delay: float = 0.0) -> Event:
        self.fake.file_delay = delay
        at = time.monotonic()
        body = self.fake.media_message(self.chat, "document", content, "text/plain", caption=text, filename=name)
        return await self._deliver(Event("message", self.chat, None, text, at, body))

    async def send_as_stranger(self, text: str) -> Event:
        at = time.monotonic()
        body = self.fake.message(STRANGER, text, name="Mallory")
        return await self._deliver(Event("message", STRANGER, None, text, at, body))

    async def press(self, message: BotMessage, button: str) -> Event:
        at = time.monotonic()
        body = self.fake.press(self.user, message.raw, button)
        return await self._deliver(Event("press", message.chat, None, button, at, body))

    async def _deliver(self, event: Event) -> Event:
        event.status, _body, seconds = await self.fake.post(event.raw, self._url())
        done = time.monotonic()
        event.ack = Ack(seconds, done)
        return event

    async def redeliver(self, event: Event) -> None:
        """Meta POSTs the same webhook again (it did not see the 200 in time)."""
        await self._deliver(event)

    # ---- what the platform saw -------------------------------------------------------------------

    async def ack(self, event: Event, timeout: float = 10.0) -> Ack:
        assert event.status == 200, f"{WEBHOOK_PATH} answered {event.status}"
        assert event.ack is not None
        return event.ack

    def messages(self, chat: str) -> list[BotMessage]:
        return [BotMessage(m.id, chat, None, m.text, list(m.buttons), m.monotonic, 0, m.reply_to, m)
                for m in self.fake.sent_to(chat)]

    def notices(self, press: Event) -> list[str]:
        return [m.text for m in self.messages(press.chat) if m.at > press.at]

    def length(self, message: BotMessage) -> int:
        return utf16_len(message.text)

    def code_blocks(self, message: BotMessage) -> list[tuple[str | None, list[str]]]:
        sent: WaMessage = message.raw
        parts = sent.text.split("```")
        assert len(parts) % 2 == 1, f"an unclosed monospace block in {sent.text[:200]!r}"
        return [(None, part.strip("\n").split("\n")) for part in parts[1::2]]
