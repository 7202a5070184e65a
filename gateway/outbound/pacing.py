"""How soon a chat's messages may be edited again: one record per chat, shared by every streamed reply in it
and by delivery, so a rate limit met anywhere in a chat slows that chat only.

Spacing is measured from when an edit *finished* (its answer came back) to when the next one starts, so the
platform sees the edits at least ``interval`` apart whatever the network did to either request. A rate limit
also doubles the chat's spacing (up to ``MAX_SLOWDOWN`` times), until a minute passes without another: a
Telegram group allows 20 messages a minute, which no fixed interval short enough for a private chat keeps.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

MAX_CHATS = 10_000
MAX_SLOWDOWN = 8.0
SLOWDOWN_FOR = 60.0  # seconds without a rate limit before a chat's spacing is back to normal


@dataclass(slots=True)
class _Pace:
    last: float = float("-inf")  # when the chat's latest edit (or stream message) finished
    not_before: float = float("-inf")  # a rate limit's end
    slowdown: float = 1.0  # the interval is multiplied by this after rate limits
    limited_at: float = float("-inf")  # the latest rate limit


class ChatPacer:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._chats: dict[tuple[str, str], _Pace] = {}

    def _pace(self, platform: str, chat_id: str) -> _Pace:
        key = (platform, chat_id)
        pace = self._chats.get(key)
        if pace is None:
            if len(self._chats) >= MAX_CHATS:
                self._forget_idle()
            pace = self._chats[key] = _Pace()
        return pace

    def _forget_idle(self) -> None:
        # A chat not edited for a minute and not rate limited has nothing worth remembering.
        now = self.clock()
        for key in [k for k, p in self._chats.items()
                    if p.last < now - 60 and p.not_before < now and p.limited_at < now - SLOWDOWN_FOR]:
            del self._chats[key]

    def ready_at(self, platform: str, chat_id: str, interval: float) -> float:
        """The monotonic time from which the chat may be edited again."""
        pace = self._chats.get((platform, chat_id))
        if pace is None:
            return float("-inf")
        return max(pace.last + interval * pace.slowdown, pace.not_before)

    async def wait(self, platform: str, chat_id: str, interval: float) -> None:
        """Until the chat may be edited again (a rate limit met meanwhile makes it longer)."""
        for _ in range(100):  # a rate limit met meanwhile moves the slot: look again after each wait
            delay = self.ready_at(platform, chat_id, interval) - self.clock()
            if delay <= 0:
                return
            await asyncio.sleep(delay)

    def done(self, platform: str, chat_id: str) -> None:
        """An edit (or a stream's new message) of the chat just finished."""
        pace = self._pace(platform, chat_id)
        pace.last = self.clock()
        if pace.slowdown > 1 and pace.last - pace.limited_at > SLOWDOWN_FOR:
            pace.slowdown = 1.0

    def backoff(self, platform: str, chat_id: str, retry_after: float) -> None:
        """The platform said to wait: nothing is edited in this chat before that."""
        pace = self._pace(platform, chat_id)
        now = self.clock()
        pace.not_before = max(pace.not_before, now + max(retry_after, 0.0))
        if now - pace.limited_at > 0.5:  # one rate limit, not each request that met the same one
            pace.slowdown = min(pace.slowdown * 2, MAX_SLOWDOWN)
        pace.limited_at = now
