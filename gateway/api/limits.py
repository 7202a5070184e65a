"""Each key's requests per minute (``api.requests_per_minute``): a sliding window of the last minute's requests, in
this process's memory (a limit that protects this daemon; several instances each count their own)."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

WINDOW = 60.0


class RateLimiter:
    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self.clock = clock
        self._seen: dict[str, deque[float]] = {}

    def take(self, who: str) -> float | None:
        """Count one request of ``who``; None when it may go on, else the seconds until it may (Retry-After)."""
        now = self.clock()
        seen = self._seen.get(who)
        if seen is None:
            if len(self._seen) > 10_000:  # holders who stopped asking: their windows are long empty
                self._seen = {k: v for k, v in self._seen.items() if v and now - v[-1] < WINDOW}
            seen = self._seen[who] = deque()
        while seen and now - seen[0] >= WINDOW:
            seen.popleft()
        if len(seen) >= self.per_minute:
            return max(1.0, math.ceil(seen[0] + WINDOW - now))
        seen.append(now)
        return None
