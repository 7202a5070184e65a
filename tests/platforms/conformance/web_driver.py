"""The web chat's driver: the daemon's own HTTP API and SSE stream, as the browser page uses them.

A message or a press is a POST behind the bearer token, acknowledged by its 202; what the bot does in a chat
arrives on the chat's event stream (``message``, ``edit``, ``notice``), which the driver reads from before
the first request into that chat. Whoever holds the token is the owner, so a stranger is a request without
it; there are no threads and no credential to lock.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp

from gateway.platforms.web.adapter import WebAdapter
from gateway.runner import GatewayRunner
from tests.platforms.conformance.driver import Ack, BotMessage, Event, PlatformDriver


class WebDriver(PlatformDriver):
    name = "web"
    platform = "web"
    threads = False
    limit = WebAdapter.capabilities.max_message_length  # the web chat's limit is its own
    credential = False
    files = True
    user = "owner"
    chat = "c1"

    async def open(self) -> None:
        self.http = aiohttp.ClientSession()
        self._streams: dict[str, asyncio.Task[None]] = {}
        self._frames: dict[str, list[tuple[float, str, dict[str, Any]]]] = {}

    async def close(self) -> None:
        for task in self._streams.values():
            task.cancel()
        await asyncio.gather(*self._streams.values(), return_exceptions=True)
        await super().close()
        await self.http.close()

    def platform_config(self, home: Path) -> dict[str, Any]:
        return {"platforms": {"web": {"enabled": True}}}

    async def start(self, overrides: dict[str, Any] | None = None, *, home: Path | None = None,
                    connect: bool = True) -> GatewayRunner:
        runner = await super().start(overrides, home=home, connect=connect)
        await self._watch(self.chat)  # the page is open before the bot writes there on its own
        return runner

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.runner.http_port}"

    def _auth(self, token: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.adapter().token}"}  # type: ignore[attr-defined]

    # ---- the event stream ------------------------------------------------------------------------

    async def _watch(self, chat: str) -> None:
        if chat in self._streams:
            return
        connected = asyncio.get_running_loop().create_future()
        self._frames.setdefault(chat, [])
        self._streams[chat] = asyncio.create_task(self._read(chat, connected))
        await asyncio.wait_for(connected, 10)

    async def _read(self, chat: str, connected: asyncio.Future[None]) -> None:
        url = f"{self.base}/api/v1/chats/{quote(chat, safe='')}/events"
        event, data = "message", []
        async with self.http.get(url, headers=self._auth(), timeout=aiohttp.ClientTimeout(total=None)) as resp:
            if resp.status != 200:
                connected.set_exception(AssertionError(f"the event stream answered {resp.status}"))
                return
            async for raw in resp.content:
                line = raw.decode().rstrip("\r\n")
                if line == ": connected" and not connected.done():
                    connected.set_result(None)
                elif not line:
                    if data:
                        self._frames[chat].append((time.monotonic(), event, json.loads("\n".join(data))))
                    event, data = "message", []
                elif line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].strip())

    # ---- what users do ---------------------------------------------------------------------------

    async def _post(self, event: Event, path: str, body: dict[str, Any], token: str | None = None) -> Event:
        started = time.monotonic()
        async with self.http.post(self.base + path, json=body, headers=self._auth(token)) as resp:
            event.status = resp.status
            await resp.read()
        done = time.monotonic()
        event.ack = Ack(done - started, done)
        return event

    async def send(self, text: str, *, chat: str | None = None, thread: str | None = None) -> Event:
        assert thread is None, "the web chat has no threads"
        chat = chat or self.chat
        await self._watch(chat)
        body = {"chat_id": chat, "user_id": self.user, "text": text, "message_id": uuid.uuid4().hex}
        return await self._post(Event("message", chat, None, text, time.monotonic(), body), "/api/v1/messages", body)

    async def send_file(self, text: str, name: str, content: bytes, *, delay: float = 0.0) -> Event:
        """The page uploads the file with the message (multipart/form-data): the file is in before the 202, and
        ``delay`` (a platform's slow download after the acknowledgement) has nothing to slow here."""
        chat = self.chat
        await self._watch(chat)
        form = aiohttp.FormData()
        for field, value in (("user_id", self.user), ("text", text), ("message_id", uuid.uuid4().hex)):
            form.add_field(field, value)
        form.add_field("file", content, filename=name, content_type="text/plain")
        event = Event("message", chat, None, text, time.monotonic())
        started = time.monotonic()
        async with self.http.post(f"{self.base}/api/v1/chats/{quote(chat, safe='')}/messages", data=form,
                                  headers=self._auth()) as resp:
            event.status = resp.status
            await resp.read()
        done = time.monotonic()
        event.ack = Ack(done - started, done)
        return event

    async def command(self, name: str, args: str = "", *, chat: str | None = None,
                      thread: str | None = None) -> Event:
        return await self.send(f"/{name} {args}".strip(), chat=chat, thread=thread)  # the page sends it typed

    async def send_as_stranger(self, text: str) -> Event:
        chat = "stranger"
        await self._watch(chat)
        body = {"chat_id": chat, "user_id": "stranger", "text": text}
        return await self._post(Event("message", chat, None, text, time.monotonic(), body), "/api/v1/messages",
                                body, token="not-the-token")

    async def redeliver(self, event: Event) -> None:
        """The page posts the same message again (a retry after a lost answer): same ``message_id``."""
        await self._post(event, "/api/v1/messages", event.raw)

    async def press(self, message: BotMessage, button: str) -> Event:
        path = f"/api/v1/chats/{quote(message.chat, safe='')}/buttons/{quote(button, safe='')}"
        event = Event("press", message.chat, None, button, time.monotonic())
        return await self._post(event, path, {"user_id": self.user})

    # ---- what the platform saw -------------------------------------------------------------------

    async def ack(self, event: Event, timeout: float = 10.0) -> Ack:
        assert event.status == 202, f"the web API answered {event.status}"
        assert event.ack is not None
        return event.ack

    def messages(self, chat: str) -> list[BotMessage]:
        out: dict[str, BotMessage] = {}
        for at, kind, data in self._frames.get(chat, []):
            buttons = [b["id"] for b in data.get("buttons") or []]
            if kind == "message" and data.get("role") == "assistant":
                out[data["id"]] = BotMessage(data["id"], chat, None, data["text"], buttons, at, raw=data)
            elif kind == "edit" and data["id"] in out:
                msg = out[data["id"]]
                msg.text, msg.buttons, msg.edits = data["text"], buttons, msg.edits + 1
        return list(out.values())

    def notices(self, press: Event) -> list[str]:
        return [data["text"] for at, kind, data in self._frames.get(press.chat, [])
                if kind == "notice" and at > press.at]

    def length(self, message: BotMessage) -> int:
        return len(message.text)

    def code_blocks(self, message: BotMessage) -> list[tuple[str | None, list[str]]]:
        blocks: list[tuple[str | None, list[str]]] = []
        lines: list[str] | None = None
        language: str | None = None
        for line in message.text.split("\n"):
            stripped = line.strip()
            if stripped.startswith(("```", "~~~")):
                if lines is None:
                    lines, language = [], stripped[3:].strip() or None
                else:
                    blocks.append((language, lines))
                    lines = None
            elif lines is not None:
                lines.append(line)
        assert lines is None, f"a code fence left open in {message.text[-200:]!r}"
        return blocks
