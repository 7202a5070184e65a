"""A button's id on its way to a platform and back, whatever room the platform gives it.

The core's button ids (``ap:<approval id>:o``, a cron job's) can be longer than a platform keeps with a
button: Telegram's callback data holds 64 bytes, a Discord custom_id 100 characters, a Slack value 2000. An id
that fits travels as it is, so a press still resolves after a restart; a longer one travels as a digest
remembered in memory, so a press finds the whole id while this process lives and none after it (the presser is
told the button is no longer active) — never a truncated id, which would reach another button's handler.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable

DIGEST_MARK = "~"  # no id the core makes starts with it, so an id that does is sent as a digest too


class ButtonIds:
    def __init__(self, limit: int, measure: Callable[[str], int] = len, keep: int = 10_000) -> None:
        """``limit``: the most the platform holds, as ``measure`` counts it (characters, or UTF-8 bytes);
        ``keep``: how many long ids are remembered (the oldest go first)."""
        self.limit = limit
        self.measure = measure
        self.keep = keep
        self.long: OrderedDict[str, str] = OrderedDict()  # digest -> the id it stands for

    def encode(self, button_id: str) -> str:
        """What the platform carries for ``button_id``."""
        if 0 < self.measure(button_id) <= self.limit and not button_id.startswith(DIGEST_MARK):
            return button_id
        digest = DIGEST_MARK + hashlib.sha256(button_id.encode()).hexdigest()[:40]
        self.long[digest] = button_id
        self.long.move_to_end(digest)
        while len(self.long) > self.keep:
            self.long.popitem(last=False)
        return digest

    def decode(self, value: str) -> str | None:
        """The id behind what a press carried; None for a digest this process does not know (any more)."""
        if value.startswith(DIGEST_MARK):
            return self.long.get(value)
        return value


def utf8_len(text: str) -> int:
    return len(text.encode())
