"""Matrix's driver: the fake homeserver (tests/fakes/matrix_api.py), which matrix-nio talks to for real.

A message is an event in a room; the bot hears it when a /sync answer carries it, and acknowledges it by asking
for the next /sync from a position past it (that position is what it saves). "Delivering it again" is what a
crash between the inbox write and the save of the position amounts to: the next daemon syncs from the position
before the event and gets it again. Matrix has no buttons: a press is the user's reaction, on the bot's message,
with the key its buttons were given; it is acknowledged like a message. In a room (three members or more) the
user mentions the bot with a pill, as Element makes one; a thread is an ``m.thread`` under a root message.
"""

from __future__ import annotations

import html
import re
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from gateway.platforms.matrix.markup import MAX_CONTENT, content_size
from gateway.storage.store import Store
from tests.fakes.matrix_api import BOT, FakeMatrix, Sent
from tests.platforms.conformance.driver import Ack, BotMessage, Event, PlatformDriver, wait_until

ALICE, BOB, STRANGER = "@alice:fake.test", "@bob:fake.test", "@stranger:fake.test"
_CODE = re.compile(r'<pre><code(?: class="language-([^"]+)")?>(.*?)</code></pre>', re.S)
_VOID = frozenset({"br", "hr", "img"})


class MatrixDriver(PlatformDriver):
    name = "matrix"
    platform = "matrix"
    threads = True
    limit = MAX_CONTENT  # bytes of the content's body and formatted_body, as JSON
    credential = True
    files = True
    user_edits = True
    user = ALICE

    fake: FakeMatrix

    async def open(self) -> None:
        self.fake = FakeMatrix()
        await self.fake.start()
        self.fake.user(ALICE, "Alice")
        self.chat = self.fake.dm(ALICE)
        self.group = self.fake.room([ALICE, BOB, BOT], name="general")
        self.stranger_dm = self.fake.dm(STRANGER)
        self._root: str | None = None
        self.monkeypatch.setenv("MATRIX_ACCESS_TOKEN", self.fake.bot_token)

    async def close(self) -> None:
        await super().close()
        await self.fake.stop()

    def platform_config(self, home: Path) -> dict[str, Any]:
        return {"platforms": {"matrix": {"enabled": True, "homeserver": self.fake.url, "user_id": BOT}}}

    def thread_chat(self) -> tuple[str, str]:
        if self._root is None:  # a thread under something Alice said in the room earlier
            self._root = self.fake.user_message(self.group, ALICE, "a thread starts here")["event_id"]
        return self.group, self._root

    # ---- what users do ---------------------------------------------------------------------------

    async def send(self, text: str, *, chat: str | None = None, thread: str | None = None) -> Event:
        chat = chat or self.chat
        at = time.monotonic()
        event = self.fake.user_message(chat, ALICE, text, thread=thread, mention=chat == self.group)
        return Event("message", chat, thread, text, at, event)

    async def command(self, name: str, args: str = "", *, chat: str | None = None,
                      thread: str | None = None) -> Event:
        chat = chat or self.chat
        text = f"!{name} {args}".strip()
        at = time.monotonic()
        event = self.fake.user_message(chat, ALICE, text, thread=thread)
        return Event("message", chat, thread, text, at, event)

    async def send_file(self, text: str, name: str, content: bytes, *, delay: float = 0.0) -> Event:
        self.fake.file_delay = delay
        at = time.monotonic()
        event = self.fake.file_message(self.chat, ALICE, name, content, caption=text)
        return Event("message", self.chat, None, text, at, event)

    async def edit(self, event: Event, text: str) -> Event:
        at = time.monotonic()
        edited = self.fake.user_edit(event.chat, ALICE, event.raw["event_id"], text)
        return Event("message", event.chat, event.thread, text, at, edited)

    async def send_as_stranger(self, text: str) -> Event:
        at = time.monotonic()
        event = self.fake.user_message(self.stranger_dm, STRANGER, text)
        return Event("message", self.stranger_dm, None, text, at, event)

    async def press(self, message: BotMessage, button: str) -> Event:
        sent: Sent = message.raw
        key = next(b["key"] for b in sent.buttons if b["id"] == button)
        at = time.monotonic()
        event = self.fake.react(sent.room_id, ALICE, sent.event_id, key)
        return Event("press", message.chat, message.thread, button, at, event)

    async def redeliver(self, event: Event) -> None:
        """The daemon dies after the event was in the inbox but before the position past it was saved: the next
        one syncs from the position before it."""
        runner = self.runner
        home, url = runner.paths.home, runner.store.url
        await self.stop(runner)
        position = self.fake.events[event.raw["event_id"]][1]
        store = Store(url)
        await store.init()
        try:
            await store.cursors.save("matrix", {BOT: f"s{position - 1}"})
        finally:
            await store.close()
        await self.start(home=home)

    # ---- what the platform saw -------------------------------------------------------------------

    async def ack(self, event: Event, timeout: float = 10.0) -> Ack:
        event_id = event.raw["event_id"]
        await wait_until(lambda: event_id in self.fake.confirmed_at, timeout, f"event {event_id} confirmed")
        confirmed = self.fake.confirmed_at[event_id]
        return Ack(confirmed - self.fake.handed_out[event_id], confirmed)

    def messages(self, chat: str) -> list[BotMessage]:
        return [BotMessage(m.event_id, chat, m.thread, shown(m), [b["id"] for b in m.buttons], m.monotonic,
                           m.edits, m.reply_to, m)
                for m in self.fake.sent_to(chat)]

    def notices(self, press: Event) -> list[str]:
        return [m.text for m in self.messages(press.chat) if m.thread == press.thread and m.at > press.at]

    def length(self, message: BotMessage) -> int:
        sent: Sent = message.raw
        return content_size({"body": sent.content.get("body"), "formatted_body": sent.content.get("formatted_body")})

    def code_blocks(self, message: BotMessage) -> list[tuple[str | None, list[str]]]:
        sent: Sent = message.raw
        assert sent.content.get("format") == "org.matrix.custom.html" and sent.html, "no HTML in the message"
        balanced(sent.html)
        return [(language or None, html.unescape(code).rstrip("\n").split("\n"))
                for language, code in _CODE.findall(sent.html)]


def shown(message: Sent) -> str:
    """The text a person reads, without the line naming the reactions that stand for buttons (the buttons)."""
    text = message.text
    if message.buttons:
        text = text.rpartition("\n\nReact with ")[0] or text
    return text


def balanced(fragment: str) -> None:
    """AssertionError unless every tag the HTML opens it closes, in order."""
    open_tags: list[str] = []

    class Check(HTMLParser):
        def handle_starttag(self, tag: str, attrs: Any) -> None:
            if tag not in _VOID:
                open_tags.append(tag)

        def handle_endtag(self, tag: str) -> None:
            assert open_tags and open_tags[-1] == tag, f"</{tag}> closes {open_tags[-1:]} in {fragment[:200]!r}"
            open_tags.pop()

    Check().feed(fragment)
    assert not open_tags, f"left open: {open_tags} in {fragment[-200:]!r}"
