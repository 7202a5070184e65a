"""Narrow ports between the gateway's parts: features (commands, approvals, pairing, cron) depend on these
Protocols and get the objects that implement them through their constructors — never on the runner.

Adapters have their own port in the contract (``gateway.platforms.base.Gateway``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Protocol

from gateway.platforms.base import Accepted, InboundMessage, PlatformAdapter, Source

Adapters = Mapping[str, PlatformAdapter]


class Lifecycle(Protocol):
    """The daemon's state that everyone may read, and where background tasks are started."""

    @property
    def stopping(self) -> bool: ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None: ...

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]: ...


class Notifier(Protocol):
    async def notify(self, source: Source, text: str) -> None:
        """A short gateway notice into the chat of ``source`` (not a model reply); never raises."""


class TurnControl(Protocol):
    """The session lanes, as chat commands see them."""

    def stop_turn(self, key: str) -> bool: ...

    def busy(self, key: str) -> tuple[float, str] | None:
        """(seconds running, last step) of the session's running turn, or None when idle."""

    def queued(self, key: str) -> list[str]:
        """The texts waiting in the session's queue, oldest first."""

    async def clear_queue(self, key: str) -> int: ...

    async def enqueue(self, adapter: PlatformAdapter, msg: InboundMessage, key: str) -> int | None:
        """Store ``msg`` as a follow-up and queue it even when busy_mode is interrupt; the queue's length."""

    async def steer_text(self, adapter: PlatformAdapter, msg: InboundMessage, key: str) -> bool | None:
        """Store ``msg`` and hand it to the running turn (True), or queue it when none runs (False)."""


class Resubmit(Protocol):
    """The session lanes, for a command that stores a message of its own (/retry)."""

    def submit(self, adapter: PlatformAdapter, item: Accepted, notify: bool = True) -> None:
        """Queue a message already in the inbox: its turn runs like any other message's."""


class DetachedTurns(Protocol):
    async def run_detached_turn(self, key: str, content: str, timeout: float, *, model: str | None = None,
                                extras: dict[str, Any] | None = None) -> Any:
        """One agent turn in a fresh session of its own (a cron run), under a hard wall-clock limit."""


class SessionDenials(Protocol):
    async def deny_session(self, session_key: str, via: str) -> int:
        """/stop and /new: deny every approval waiting in the session."""


ButtonHandler = Callable[[PlatformAdapter, Any], Coroutine[Any, Any, str | None]]
