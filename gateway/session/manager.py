"""Session rows behind session keys, with reset policies (idle, daily, none) and lineage."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.config import SessionsConfig
from gateway.platforms.base import Source
from gateway.store import Store


def reset_due(cfg: SessionsConfig, last_active: float, now: float, tz: dt.tzinfo | None = None) -> str | None:
    """The reason a session last active at ``last_active`` must end by ``now``, or None."""
    policy = cfg.reset
    if policy.mode == "idle":
        return "idle" if now - last_active > policy.idle_minutes * 60 else None
    if policy.mode == "daily":
        local_now = dt.datetime.fromtimestamp(now, tz)
        boundary = local_now.replace(hour=policy.daily_hour, minute=0, second=0, microsecond=0)
        if boundary > local_now:
            boundary -= dt.timedelta(days=1)
        return "daily" if last_active < boundary.timestamp() else None
    return None


class SessionManager:
    """Maps keys to the active session row; rows are cached so a turn costs no extra lookup."""

    def __init__(self, store: Store, cfg: SessionsConfig,
                 system_prompt: Callable[[str], str], clock: Callable[[], float] = time.time,
                 prompt_addendum: Callable[[Source | None], Awaitable[str | None]] | None = None) -> None:
        self.store = store
        self.cfg = cfg
        self.system_prompt = system_prompt  # platform name -> the byte-stable prompt for a new session
        self.clock = clock
        # The sender of the message that starts a session -> what its prompt adds (their memory, taken now).
        self.prompt_addendum = prompt_addendum
        self._cache: dict[str, dict[str, Any]] = {}

    async def get(self, key: str, platform: str, source: Source | None = None) -> dict[str, Any]:
        row = self._cache.get(key)
        if row is None:
            row = await self.store.session_active(key)
        if row is not None:
            reason = reset_due(self.cfg, row["updated_at"], self.clock())
            if reason is None:
                self._cache[key] = row
                return row
            await self.store.session_end(row["id"], reason)
            return await self._create(key, platform, parent_id=row["id"], source=source)
        return await self._create(key, platform, source=source)

    async def reset(self, key: str, platform: str, reason: str = "new", source: Source | None = None
                    ) -> dict[str, Any]:
        row = self._cache.pop(key, None) or await self.store.session_active(key)
        parent = None
        if row is not None:
            await self.store.session_end(row["id"], reason)
            parent = row["id"]
        return await self._create(key, platform, parent_id=parent, source=source)

    def activate(self, key: str, row: dict[str, Any]) -> None:
        """``row`` is the key's active session now (a compressed session's successor)."""
        self._cache[key] = row

    def touch(self, key: str) -> None:
        row = self._cache.get(key)
        if row is not None:
            row["updated_at"] = self.clock()

    def peek(self, key: str) -> dict[str, Any] | None:
        return self._cache.get(key)

    async def _create(self, key: str, platform: str, parent_id: str | None = None,
                      source: Source | None = None) -> dict[str, Any]:
        prompt = self.system_prompt(platform)
        if self.prompt_addendum is not None:
            extra = await self.prompt_addendum(source)
            if extra:
                prompt = f"{prompt}\n\n{extra}"
        row = await self.store.session_create(str(uuid.uuid4()), key, platform, prompt, parent_id=parent_id)
        self._cache[key] = row
        return row
