"""Replies shown as they are written, and progress lines while tools run.

``Streams.start`` gives each chat turn a ``LiveReply`` (live.py) on platforms that can edit messages, or
``NO_LIVE`` (the final reply only); an adapter that streams to its client itself gets a ``DirectReply``
(direct.py). The turn executor hands the agent ``live.callbacks(...)``, awaits
``live.close()`` before the final delivery (which edits the streamed messages into the reply's chunks) and
``live.abandon(reason)`` when the turn ends without an answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from gateway.config import DisplayConfig
from gateway.outbound.delivery import Delivery
from gateway.outbound.streaming.direct import DirectReply
from gateway.outbound.streaming.live import LiveReply
from gateway.platforms.base import Accepted, PlatformAdapter


class NoLive:
    """A turn whose reply is not streamed: nothing to show, nothing to close."""

    opened = False
    visible = False
    interval = 0.0

    def callbacks(self, callbacks: Any) -> Any:
        return callbacks

    async def close(self) -> None:
        return None

    async def abandon(self, reason: str) -> None:
        return None


NO_LIVE = NoLive()


class Streams:
    def __init__(self, cfg: DisplayConfig, delivery: Delivery, session_row: Callable[[str], dict[str, Any] | None],
                 secret_values: Callable[[], list[str]], describe: Callable[[str], Any],
                 waiting: Callable[[str], bool] = lambda _key: False) -> None:
        self.cfg = cfg
        self.delivery = delivery
        self._session_row = session_row  # session key -> the active session's cached row (its ``verbose``)
        self._secret_values = secret_values
        self._describe = describe  # tool name -> the tool (its ``progress``), or None
        self._waiting = waiting  # session key -> a person is being asked for its turn (an approval prompt)

    def interval(self, adapter: PlatformAdapter) -> float:
        return max(self.cfg.stream_edit_interval, adapter.capabilities.min_edit_interval)

    def verbose(self, key: str) -> str:
        row = self._session_row(key) or {}
        return row.get("verbose") or self.cfg.verbose

    def start(self, adapter: PlatformAdapter, item: Accepted, key: str) -> LiveReply | DirectReply | NoLive:
        """The turn's live reply (no await: the turn must exist for /stop before anything yields)."""
        # An adapter that streams to its client itself (an HTTP response) gets the pieces as they come.
        sink = adapter.live_text(item.msg) if self.cfg.streaming else None
        if sink is not None:
            return DirectReply(sink, asyncio.get_running_loop(), lambda: self.verbose(key), self._describe,
                               self._secret_values)
        # A message answered through the platform's own mechanism (an interaction) is not followed by edits.
        if not (self.cfg.streaming and adapter.capabilities.edits) or item.msg.reply_handle:
            return NO_LIVE
        return LiveReply(adapter, self.delivery, item, self.interval(adapter), lambda: self.verbose(key),
                         self._describe, self._secret_values, asyncio.get_running_loop(),
                         lambda: self._waiting(key))
