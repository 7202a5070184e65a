"""The chats' port: what a platform whose client shows a list of its chats (the web chat) asks of the gateway —
the list with titles and last activity, rename, delete, and /search over them. The runner provides it
(gateway/session/chats.py) through ``AdapterContext.chats``; imported through gateway/platforms/base.py, like the
rest of the contract."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class ChatInfo:
    """One chat of a platform whose client lists its chats (the web chat)."""

    chat_id: str
    title: str | None  # its conversation's /title, else the first words of its first message
    last_activity: float
    started_at: float


@dataclass(frozen=True, slots=True)
class ChatHit:
    """A message /search found, with the chat it is in."""

    chat_id: str
    title: str | None
    role: str
    snippet: str  # plain text around the words found, on one line
    at: float


class ChatBusy(Exception):
    """The chat cannot be deleted now: a turn runs in it (``str()`` says so, in the user's words)."""


class Chats(Protocol):
    """The conversations of a platform whose client shows a list of them (the web chat, whose token holder owns
    every chat of it), as the gateway keeps them: titles (/title, or the first message), last activity, the
    /search index, deletion. Chats are named by chat id; the gateway finds their sessions itself."""

    async def list(self, platform: str, limit: int = 200) -> list[ChatInfo]: ...

    async def rename(self, platform: str, chat_id: str, title: str) -> bool:
        """Set the chat's title; False when it has no conversation yet."""

    async def delete(self, platform: str, chat_id: str) -> list[str]:
        """Delete the chat: its log, its conversations' messages and titles. The ids of the files its log
        carried (for the adapter to remove); raises ``ChatBusy`` while a turn runs in it."""

    async def search(self, platform: str, query: str) -> list[ChatHit]: ...
