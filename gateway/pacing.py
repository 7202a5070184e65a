"""How soon a chat's messages may be edited again: one record per chat, shared by every streamed reply in it
and by delivery, so a rate limit met anywhere in a chat slows that chat only.

Spacing is measured from when an edit *finished* (its answer came back) to when the next one starts, so the
platform sees the edits at least ``interval`` apart whatever the network did to either request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

MAX_CHATS = 10_000


@dataclass(slots=True)
class _Pace:
    last: float = float("-inf")  # when the chat's latest edit (or stream message) finished
    not_before: float = float("-inf")  # a rate limit's end


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
        for key in [k for k, p in self._chats.items() if p.last < now - 60 and p.not_before < now]:
            del self._chats[key]

    def ready_at(self, platform: str, chat_id: str, interval: float) -> float:
        """The monotonic time from which the chat may be edited again."""
        pace = self._chats.get((platform, chat_id))
        if pace is None:
            return float("-inf")
        return max(pace.last + interval, pace.not_before)

    async def wait(self, platform: str, chat_id: str, interval: float) -> None:
        """Until the chat may be edited again (a rate limit met meanwhile makes it longer)."""
        for _ in range(100):  # a rate limit met meanwhile moves the slot: look again after each wait
            delay = self.ready_at(platform, chat_id, interval) - self.clock()
            if delay <= 0:
                return
            await asyncio.sleep(delay)

    def done(self, platform: str, chat_id: str) -> None:
        """An edit (or a stream's new message) of the chat just finished."""
        self._pace(platform, chat_id).last = self.clock()

    def backoff(self, platform: str, chat_id: str, retry_after: float) -> None:
        """The platform said to wait: nothing is edited in this chat before that."""
        pace = self._pace(platform, chat_id)
        pace.not_before = max(pace.not_before, self.clock() + max(retry_after, 0.0))
