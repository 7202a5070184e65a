"""A synthetic platform made for tests (errbot's TestBackend idea): drives the real runner end to end."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass

from gateway.platforms.base import (
    AdapterContext,
    Button,
    ButtonPress,
    Capabilities,
    ChatType,
    InboundMessage,
    OutboundMessage,
    PlatformAdapter,
    Source,
    parse_text_command,
)


@dataclass
class Sent:
    chat_id: str
    text: str
    message: OutboundMessage
    message_id: str


class QAAdapter(PlatformAdapter):
    name = "qa"
    capabilities = Capabilities(max_message_length=4000, buttons=True, edits=True, typing=True)
    trusted = True

    def __init__(self, ctx: AdapterContext) -> None:
        super().__init__(ctx)
        self.sent: list[Sent] = []
        self.notices: list[tuple[ButtonPress, str | None]] = []
        self.edits: list[tuple[str, str, str | None]] = []
        self.typing_calls = 0
        self.fail_starts = 0
        self.start_calls = 0
        # (chat_id, text) -> raise an exception instead of sending; return None to send normally
        self.send_hook: Callable[[str, str], Exception | None] | None = None
        self._ids = itertools.count(1)
        self._changed = asyncio.Event()

    async def start(self) -> None:
        self.start_calls += 1
        if self.fail_starts > 0:
            self.fail_starts -= 1
            raise ConnectionError("qa platform unreachable")

    async def stop(self) -> None:
        return None

    async def send(self, chat_id: str, text: str, message: OutboundMessage, *,
                   idempotency_key: str | None = None) -> list[str]:
        if self.send_hook is not None:
            exc = self.send_hook(chat_id, text)
            if exc is not None:
                raise exc
        mid = f"m{next(self._ids)}"
        self.sent.append(Sent(chat_id, text, message, mid))
        self._changed.set()
        return [mid]

    async def edit(self, chat_id: str, message_id: str, text: str | None, buttons: list[Button] | None = None,
                   *, thread_id: str | None = None) -> None:
        self.edits.append((chat_id, message_id, text))

    async def answer_press(self, press: ButtonPress, notice: str | None) -> bool:
        self.notices.append((press, notice))
        self._changed.set()
        return True

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        self.typing_calls += 1

    async def say(self, text: str, chat_id: str = "c1", user_id: str = "u1", message_id: str | None = None,
                  chat_type: ChatType = "dm", thread_id: str | None = None) -> bool:
        parsed = parse_text_command(text)
        msg = InboundMessage(
            source=Source(self.name, chat_id, user_id, chat_type=chat_type, thread_id=thread_id),
            text=text, platform_message_id=message_id or f"in{next(self._ids)}",
            command=parsed[0] if parsed else None,
        )
        return await self.accept(msg)

    async def click(self, button_id: str, chat_id: str = "c1", user_id: str = "u1", chat_type: ChatType = "dm",
                    timeout: float = 10.0) -> str | None:
        """Press a button the way a platform would, and wait for the notice the presser is shown."""
        press = ButtonPress(Source(self.name, chat_id, user_id, chat_type=chat_type), button_id)
        self.press(press)

        async def answered() -> str | None:
            while True:
                for pressed, notice in self.notices:
                    if pressed is press:
                        return notice
                self._changed.clear()
                await self._changed.wait()

        return await asyncio.wait_for(answered(), timeout)

    def texts(self, chat_id: str | None = None) -> list[str]:
        return [s.text for s in self.sent if chat_id is None or s.chat_id == chat_id]

    async def wait_for(self, predicate: Callable[[list[str]], bool], chat_id: str | None = None,
                       timeout: float = 10.0) -> list[str]:
        async def loop() -> list[str]:
            while not predicate(self.texts(chat_id)):
                self._changed.clear()
                await self._changed.wait()
            return self.texts(chat_id)

        try:
            return await asyncio.wait_for(loop(), timeout)
        except TimeoutError:
            raise AssertionError(f"timed out; sent so far: {self.texts(chat_id)!r}") from None


class UntrustedQAAdapter(QAAdapter):
    """Like QA, but its senders go through the access check (no allowlist configured: all denied)."""

    name = "qa2"
    trusted = False
