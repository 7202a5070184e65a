"""Session rows behind session keys, with reset policies (idle, daily, none) and lineage.

A session that follows another (a reset, /new) points at it (``parent_id``) and starts with its settings
(gateway/session/settings.py); /resume makes an ended session of the same key the active one again. A new
session's prompt may carry what its sender's memory holds (``prompt_addendum``), taken when it begins.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.config import SessionsConfig
from gateway.platforms.base import Source
from gateway.storage.store import Store


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


Carry = Callable[[dict[str, Any] | None], dict[str, Any]]


class SessionManager:
    """Maps keys to the active session row; rows are cached so a turn costs no extra lookup."""

    def __init__(self, store: Store, cfg: SessionsConfig, system_prompt: Callable[..., str],
                 clock: Callable[[], float] = time.time, carry: Carry | None = None,
                 prompt_addendum: Callable[[Source | None], Awaitable[str | None]] | None = None) -> None:
        self.store = store
        self.cfg = cfg
        # (platform[, personality]) -> the byte-stable prompt for a new session
        self.system_prompt = system_prompt
        self.clock = clock
        self.carry: Carry = carry or (lambda _parent: {})  # the settings a following session starts with
        # The sender of the message that starts a session -> what its prompt adds (their memory, taken now).
        self.prompt_addendum = prompt_addendum
        self._cache: dict[str, dict[str, Any]] = {}

    async def get(self, key: str, platform: str, owner: str | None = None,
                  source: Source | None = None) -> dict[str, Any]:
        """The active session of ``key`` (a new one when there is none or its reset is due). ``owner``: the
        person whose conversation the key is (None for a session people share); ``source``: the message
        that starts it, whose sender's memory a new session's prompt carries."""
        row = self._cache.get(key)
        if row is None:
            row = await self.store.sessions.active(key)
        if row is not None:
            reason = reset_due(self.cfg, row["updated_at"], self.clock())
            if reason is None:
                if owner and not row.get("user_id"):  # begun by /new, or before sessions had owners
                    await self.store.sessions.update(row["id"], user_id=owner)
                    row["user_id"] = owner
                self._cache[key] = row
                return row
            await self.store.sessions.end(row["id"], reason)
            return await self._create(key, platform, parent=row, owner=owner, source=source)
        return await self._create(key, platform, owner=owner, source=source)

    async def reset(self, key: str, platform: str, reason: str = "new", source: Source | None = None,
                    **settings: Any) -> dict[str, Any]:
        """End the active session and begin the next; ``settings`` override what it inherits."""
        row = self._cache.pop(key, None) or await self.store.sessions.active(key)
        if row is not None:
            await self.store.sessions.end(row["id"], reason)
        return await self._create(key, platform, parent=row, owner=row.get("user_id") if row else None,
                                  source=source, **settings)

    async def fork(self, key: str, platform: str, parent: dict[str, Any] | None, reason: str = "forked",
                   source: Source | None = None) -> dict[str, Any]:
        """End the active session of ``key`` and begin one that follows ``parent`` — any session of the key, not
        only the active one: a conversation that branches off an earlier point (a client that edited an earlier
        message) keeps its lineage. The new session starts empty; the caller gives it the history it keeps."""
        current = self._cache.pop(key, None) or await self.store.sessions.active(key)
        if current is not None:
            await self.store.sessions.end(current["id"], reason)
        owner = (parent or current or {}).get("user_id")
        return await self._create(key, platform, parent=parent, owner=owner, source=source)

    def activate(self, key: str, row: dict[str, Any]) -> None:
        """``row`` is the key's active session now (a compressed session's successor)."""
        self._cache[key] = row

    async def resume(self, key: str, session_id: str) -> dict[str, Any] | None:
        """Make the ended session ``session_id`` of ``key`` the active one again; the active one ends."""
        current = self._cache.pop(key, None) or await self.store.sessions.active(key)
        row = await self.store.sessions.reopen(key, session_id, current["id"] if current else None)
        if row is not None:
            self._cache[key] = row
        return row

    def touch(self, key: str) -> None:
        row = self._cache.get(key)
        if row is not None:
            row["updated_at"] = self.clock()

    def forget(self, key: str) -> None:
        """Drop what is cached about ``key``'s session: another instance may have changed it meanwhile."""
        row = self._cache.pop(key, None)
        if row is not None:
            self.store.messages.forget_cached(row["id"])

    def peek(self, key: str) -> dict[str, Any] | None:
        return self._cache.get(key)

    async def _create(self, key: str, platform: str, parent: dict[str, Any] | None = None, owner: str | None = None,
                      source: Source | None = None, **settings: Any) -> dict[str, Any]:
        settings = {**self.carry(parent), **settings}
        personality = settings.get("personality")
        prompt = self.system_prompt(platform, personality) if personality else self.system_prompt(platform)
        if self.prompt_addendum is not None:
            extra = await self.prompt_addendum(source)
            if extra:
                prompt = f"{prompt}\n\n{extra}"
        row = await self.store.sessions.create(str(uuid.uuid4()), key, platform, prompt,
                                               parent_id=parent["id"] if parent else None, user_id=owner, **settings)
        self._cache[key] = row
        return row
