"""Slack's drivers: the fake Slack (tests/fakes/slack_api.py), which slack-bolt and slack_sdk talk to for real,
in Socket Mode and in HTTP mode (the Events API).

Socket Mode: an event is an envelope on the websocket, acknowledged by the bot's ``{"envelope_id"}`` reply.
HTTP mode: the fake POSTs the signed event to ``/slack/events`` and the 200 is the acknowledgement (sent to
the daemon whose adapter is connected, as Slack's request URL would reach whichever one serves it). Button
presses (block_actions) and ``/herald`` arrive the same way. Ephemeral answers (a slash command's response,
a press's notice) count as messages in the chat: the user sees them there.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gateway.platforms.slack.adapter import EVENTS_PATH
from gateway.platforms.slack.mrkdwn import unescape
from gateway.platforms.slack.outbound import MAX_TEXT
from tests.fakes.slack_api import BOT_USER, FakeSlack, SlackMessage, utf16_len
from tests.platforms.conformance.driver import Ack, BotMessage, Event, PlatformDriver, wait_until
from tests.platforms.conformance.telegram_driver import free_port

ALICE, STRANGER = "U0ALICE", "U0STRANGER"
DM, STRANGER_DM = "D0ALICE", "D0STRANGER"
CHANNEL = "C0GENERAL"


class SlackSocketDriver(PlatformDriver):
    name = "slack-socket"
    platform = "slack"
    threads = True
    limit = MAX_TEXT
    credential = True
    shows_code_language = False  # mrkdwn code blocks have no language
    files = True
    user_edits = True
    user = ALICE
    chat = DM

    fake: FakeSlack

    async def open(self) -> None:
        self.fake = FakeSlack()
        await self.fake.start()
        self.fake.add_channel(DM, "im")
        self.fake.add_channel(STRANGER_DM, "im")
        self._root: str | None = None
        self.monkeypatch.setenv("SLACK_BOT_TOKEN", self.fake.bot_token)
        self.monkeypatch.setenv("SLACK_APP_TOKEN", self.fake.app_token)
        self.monkeypatch.setenv("SLACK_SIGNING_SECRET", self.fake.signing_secret)

    async def close(self) -> None:
        await super().close()
        await self.fake.stop()

    def platform_config(self, home: Path) -> dict[str, Any]:
        return {"platforms": {"slack": {"enabled": True, "api_base_url": self.fake.api_url}}}

    def thread_chat(self) -> tuple[str, str]:
        if self._root is None:  # a thread under something the user said in the channel earlier
            self._root = self.fake.message(CHANNEL, ALICE, "a thread starts here")["event"]["ts"]
        return CHANNEL, self._root

    # ---- what users do ---------------------------------------------------------------------------

    async def send(self, text: str, *, chat: str | None = None, thread: str | None = None) -> Event:
        chat = chat or self.chat
        words = text if chat.startswith("D") else f"<@{BOT_USER}> {text}"  # a channel: mention the bot
        at = time.monotonic()
        body = self.fake.message(chat, ALICE, words, thread_ts=thread)
        return await self._deliver(Event("message", chat, thread, text, at, ("events_api", body)))

    async def command(self, name: str, args: str = "", *, chat: str | None = None,
                      thread: str | None = None) -> Event:
        chat = chat or self.chat
        at = time.monotonic()
        if thread is not None:
            # Slash commands don't say which thread they were typed in: there, the fallback is "!name".
            text = f"!{name} {args}".strip()
            body = self.fake.message(chat, ALICE, text, thread_ts=thread)
            return await self._deliver(Event("message", chat, thread, text, at, ("events_api", body)))
        payload = self.fake.slash_command(chat, ALICE, f"{name} {args}".strip())
        return await self._deliver(Event("message", chat, None, f"/herald {name}", at, ("slash_commands", payload)))

    async def send_file(self, text: str, name: str, content: bytes, *, delay: float = 0.0) -> Event:
        self.fake.file_delay = delay
        at = time.monotonic()
        body = self.fake.message(self.chat, ALICE, text, files=[self.fake.add_file(content, name)])
        return await self._deliver(Event("message", self.chat, None, text, at, ("events_api", body)))

    async def edit(self, event: Event, text: str) -> Event:
        words = text if event.chat.startswith("D") else f"<@{BOT_USER}> {text}"
        at = time.monotonic()
        body = self.fake.edit(event.raw[1], words)
        return await self._deliver(Event("message", event.chat, event.thread, text, at, ("events_api", body)))

    async def send_as_stranger(self, text: str) -> Event:
        at = time.monotonic()
        body = self.fake.message(STRANGER_DM, STRANGER, text)
        return await self._deliver(Event("message", STRANGER_DM, None, text, at, ("events_api", body)))

    async def press(self, message: BotMessage, button: str) -> Event:
        at = time.monotonic()
        payload = self.fake.block_actions(ALICE, message.raw, button)
        return await self._deliver(Event("press", message.chat, message.thread, button, at, ("interactive", payload)))

    async def _deliver(self, event: Event, retry: int = 0) -> Event:
        kind, payload = event.raw[:2]
        envelope = await self.fake.deliver_socket(kind, payload, retry_attempt=retry)
        event.raw = (kind, payload, envelope)
        return event

    async def redeliver(self, event: Event) -> None:
        """Slack sends the envelope again (it did not see the ack in time)."""
        await self._deliver(event, retry=1)

    # ---- what the platform saw -------------------------------------------------------------------

    async def ack(self, event: Event, timeout: float = 10.0) -> Ack:
        envelope = event.raw[2]
        await wait_until(lambda: envelope in self.fake.acked_at, timeout, f"envelope {envelope} acknowledged")
        acked = self.fake.acked_at[envelope]
        return Ack(acked - self.fake.handed_out[envelope], acked)

    def messages(self, chat: str) -> list[BotMessage]:
        return [BotMessage(m.ts, chat, m.thread_ts, unescape(m.text), [b["value"] for b in m.buttons], m.monotonic,
                           m.edits, None, m)
                for m in self.fake.sent_to(chat) if m.ephemeral_to in (None, ALICE)]

    def notices(self, press: Event) -> list[str]:
        return [m.text for m in self.messages(press.chat) if m.at > press.at]

    def length(self, message: BotMessage) -> int:
        sent: SlackMessage = message.raw
        return utf16_len(sent.text)

    def code_blocks(self, message: BotMessage) -> list[tuple[str | None, list[str]]]:
        sent: SlackMessage = message.raw
        parts = sent.text.split("```")
        assert len(parts) % 2 == 1, f"an unclosed code block in {sent.text[:200]!r}"
        return [(None, unescape(part.strip("\n")).split("\n")) for part in parts[1::2]]


class SlackHttpDriver(SlackSocketDriver):
    """The same app in HTTP mode: Slack POSTs each event, signed, and retries it until it gets a 2xx."""

    name = "slack-http"

    def platform_config(self, home: Path) -> dict[str, Any]:
        config = super().platform_config(home)
        config["http"] = {"port": free_port()}
        config["platforms"]["slack"]["mode"] = "http"
        return config

    def _url(self) -> str:
        serving = [r for r in self.runners if r.adapters["slack"].state == "connected"] or self.runners
        return f"http://127.0.0.1:{serving[-1].http_port}{EVENTS_PATH}"

    async def _deliver(self, event: Event, retry: int = 0) -> Event:
        kind, payload = event.raw[:2]
        event.status, _body, seconds = await self.fake.post(self._url(), kind, payload, retry_num=retry or None)
        done = time.monotonic()
        event.ack = Ack(seconds, done)
        return event

    async def ack(self, event: Event, timeout: float = 10.0) -> Ack:
        assert event.status == 200, f"/slack/events answered {event.status}"
        assert event.ack is not None
        return event.ack
