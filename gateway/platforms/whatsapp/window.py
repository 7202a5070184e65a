"""Each person's 24-hour customer-service window: WhatsApp delivers a free-form message only within 24 hours of
the person's last message; after that only an approved template.

The time of each person's last message is kept in memory and in the platform cursors (``AdapterContext.cursors``:
chat -> the epoch second of their last message), written before the webhook that brought the message is
answered, so a restart (or another instance on the same database) knows the windows too. A position is written
again only once it is ``SAVE_EVERY`` behind the live one: after a restart a window may close up to that much
early (a template goes where a free-form message could have), never late (a message WhatsApp would refuse).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gateway.platforms.base import Cursors

WINDOW = 24 * 3600.0
# A message sent this close to the window's end may reach WhatsApp after it: it goes as a template.
MARGIN = 120.0
SAVE_EVERY = 300.0
PRUNE_OVER = 10_000  # people remembered before the long-closed windows are forgotten


class ServiceWindow:
    def __init__(self, platform: str, cursors: Cursors | None, clock: Callable[[], float] = time.time) -> None:
        self.platform = platform
        self.cursors = cursors
        self.clock = clock
        self.last: dict[str, float] = {}  # chat (E.164) -> when the person last wrote
        self._saved: dict[str, float] = {}  # ... as the cursors have it
        self._dirty: set[str] = set()

    async def load(self) -> None:
        if self.cursors is None:
            return
        now = self.clock()
        for chat, position in (await self.cursors.load(self.platform)).items():
            try:
                at = float(position)
            except ValueError:
                continue
            if at > now - WINDOW:  # only the open windows are worth remembering
                self._saved[chat] = at
                self.last[chat] = max(at, self.last.get(chat, 0.0))

    def seen(self, chat: str, at: float | None = None) -> None:
        """The person wrote at ``at`` (WhatsApp's timestamp; never later than now: a fast clock of theirs must not
        hold a window open past its end)."""
        now = self.clock()
        at = now if at is None else min(at, now)
        if at <= self.last.get(chat, 0.0):
            return
        self.last[chat] = at
        if at - self._saved.get(chat, 0.0) >= SAVE_EVERY:
            self._dirty.add(chat)
        if len(self.last) > PRUNE_OVER:
            self.prune()

    def is_open(self, chat: str) -> bool:
        return self.clock() < self.last.get(chat, float("-inf")) + WINDOW - MARGIN

    def since(self, chat: str) -> float | None:
        """Seconds since the person last wrote, if they ever did (as far as Herald knows)."""
        at = self.last.get(chat)
        return None if at is None else self.clock() - at

    def closed(self, chat: str) -> None:
        """WhatsApp said the window is closed (131047): believed over what was counted here."""
        at = self.clock() - WINDOW
        if self.last.get(chat, float("-inf")) > at:
            self.last[chat] = at
            self._dirty.add(chat)

    def prune(self) -> None:
        """Forget windows long closed (the cursors keep them)."""
        gone = self.clock() - WINDOW - SAVE_EVERY
        for chat in [c for c, at in self.last.items() if at < gone and c not in self._dirty]:
            del self.last[chat]
            self._saved.pop(chat, None)

    async def save(self) -> None:
        """Write the positions that moved far enough; raises when the store cannot take them (the caller does not
        acknowledge the webhook then, so WhatsApp sends it again and this is tried again)."""
        if not self._dirty or self.cursors is None:
            self._dirty.clear()
            return
        chats, self._dirty = self._dirty, set()
        batch = {chat: str(int(self.last.get(chat, 0.0))) for chat in chats}
        try:
            await self.cursors.save(self.platform, batch)
        except BaseException:
            self._dirty |= chats
            raise
        for chat, position in batch.items():
            self._saved[chat] = float(position)
