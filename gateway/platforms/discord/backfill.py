"""Nothing lost across a restart: Discord's gateway never delivers again what was posted while the bot was away
(a RESUME replays a cut connection's events, but a new session starts from now). So the adapter keeps, per
channel the bot talks in, a cursor — the id of the newest message below which every message there was taken
(accepted into the inbox, or looked at and left) — and on every new gateway session reads each such channel's
history after its cursor, no further back than ``backfill_max_age``, through the inbox like live messages: the
inbox's UNIQUE(platform, message id) drops what was answered already, so nothing is answered twice.

Messages of one channel are taken one after another (a chain of tasks per channel), live and read back alike,
so a cursor only ever moves past messages that are in the inbox. A channel joins when the bot accepts a message
there or posts there itself. Cursors are saved (``AdapterContext.cursors``, the ``platform_cursors`` table)
every ``FLUSH_EVERY`` seconds and at stop: a crash loses at most that much progress, which only means reading
a few messages again. A message the inbox could not take stops its channel's cursor and is read back again
shortly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from typing import Any, Literal

import discord
import structlog

from gateway.platforms.base import Cursors

log = structlog.get_logger("herald.discord")

# taken: accepted into the inbox; own: the bot's own message; left: not for the agent, a duplicate, refused;
# failed: the inbox could not take it (read back later).
Outcome = Literal["taken", "own", "left", "failed"]
Process = Callable[[discord.Message], Awaitable[Outcome]]

FLUSH_EVERY = 0.5
RETRY_AFTER = 2.0
PARALLEL = 4  # channels read back at once (each is a few REST requests, which discord.py rate-limits)
READY_WAIT = 10.0


class ChannelLog:
    def __init__(self, platform: str, store: Cursors | None, max_age: float, process: Process,
                 client: Callable[[], discord.Client | None]) -> None:
        self.platform = platform
        self.store = store
        self.max_age = max_age
        self.process = process
        self._client = client
        self.cursors: dict[int, int] = {}  # channel id -> message id
        self._dirty: set[int] = set()
        self._stuck: set[int] = set()  # a message there failed: the cursor waits for the read-back
        self._retrying: dict[int, asyncio.TimerHandle] = {}
        self._chains: dict[int, asyncio.Task[None]] = {}
        self._flusher: asyncio.Task[None] | None = None
        self._gate = asyncio.Semaphore(PARALLEL)
        self.read_back = 0  # messages taken from history (not from the gateway), for tests and logs

    async def start(self) -> None:
        if self.store is not None:
            saved = await self.store.load(self.platform)
            self.cursors = {int(c): int(p) for c, p in saved.items() if c.isdigit() and p.isdigit()}
        self._flusher = asyncio.create_task(self._flush_loop(), name="discord:cursors")

    async def stop(self) -> None:
        for timer in self._retrying.values():
            timer.cancel()
        self._retrying.clear()
        chains = list(self._chains.values())
        if chains:
            # A moment to finish what is under way (the inbox refuses new work while the daemon drains).
            await asyncio.wait(chains, timeout=2.0)
            for task in chains:
                task.cancel()
            await asyncio.gather(*chains, return_exceptions=True)
        if self._flusher is not None:
            self._flusher.cancel()
            await asyncio.gather(self._flusher, return_exceptions=True)
            self._flusher = None
        await self.flush()

    # ---- the chains ----------------------------------------------------------------------------------

    def _link(self, channel: int, work: Coroutine[Any, Any, None]) -> None:
        before = self._chains.get(channel)
        task = asyncio.create_task(self._after(before, work), name=f"discord:channel:{channel}")
        self._chains[channel] = task
        task.add_done_callback(lambda done: self._chains.pop(channel, None)
                               if self._chains.get(channel) is done else None)

    @staticmethod
    async def _after(before: asyncio.Task[None] | None, work: Coroutine[Any, Any, None]) -> None:
        if before is not None:
            await asyncio.wait({before})
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("discord_channel_work_failed")

    def live(self, message: discord.Message) -> None:
        """A message from the gateway: taken after everything before it in its channel (call synchronously)."""
        self._link(message.channel.id, self._take(message.channel.id, message))

    def after(self, channel: int, work: Coroutine[Any, Any, None]) -> None:
        """Other work of a channel (an edit) in its order: after what came before it there (synchronously)."""
        self._link(channel, work)

    def read_back_all(self) -> None:
        """A new gateway session: read every tracked channel back from its cursor (call synchronously, before the
        session's first messages are linked, so those come after what is read back)."""
        for channel in list(self.cursors):
            self._link(channel, self._read_back(channel))

    async def _take(self, channel: int, message: discord.Message, from_history: bool = False) -> bool:
        cursor = self.cursors.get(channel)
        if cursor is not None and message.id <= cursor:
            return True  # read back from history already
        outcome = await self.process(message)
        if outcome == "failed":
            if cursor is None:
                # A channel not tracked yet is read back from a cursor too: without one, a first message the
                # inbox could not take there (the store down) would never be read again.
                self.cursors[channel] = message.id - 1
                self._dirty.add(channel)
            self._stuck.add(channel)
            self._retry(channel)
            return False
        if from_history:
            self.read_back += outcome == "taken"
        if cursor is None and outcome not in ("taken", "own"):
            return True  # a channel the bot does not talk in: nothing to keep
        if channel not in self._stuck:
            self.cursors[channel] = max(message.id, cursor or 0)
            self._dirty.add(channel)
        return True

    async def _read_back(self, channel: int) -> None:
        self._stuck.discard(channel)
        client = self._client()
        cursor = self.cursors.get(channel)
        if client is None or cursor is None or self.max_age <= 0:
            return
        floor = discord.utils.time_snowflake(discord.utils.utcnow() - timedelta(seconds=self.max_age))
        after = max(cursor, floor)
        async with self._gate:
            try:
                await asyncio.wait_for(client.wait_until_ready(), READY_WAIT)  # channels cached by then
            except TimeoutError:
                pass
            try:
                place = client.get_channel(channel) or await client.fetch_channel(channel)
                history = [m async for m in place.history(limit=None, after=discord.Object(after),  # type: ignore[union-attr]
                                                              oldest_first=True)]
            except (discord.NotFound, discord.Forbidden) as exc:
                log.info("discord_read_back_impossible", channel_id=channel, error=str(exc))
                return
            except Exception as exc:
                log.warning("discord_read_back_failed", channel_id=channel, error=f"{type(exc).__name__}: {exc}")
                self._stuck.add(channel)
                self._retry(channel)
                return
        if history:
            log.info("discord_read_back", channel_id=channel, messages=len(history))
        for message in history:
            if not await self._take(channel, message, from_history=True):
                return

    def _retry(self, channel: int) -> None:
        if channel in self._retrying:
            return

        def again() -> None:
            self._retrying.pop(channel, None)
            if self._client() is not None:
                self._link(channel, self._read_back(channel))

        self._retrying[channel] = asyncio.get_running_loop().call_later(RETRY_AFTER, again)

    # ---- saving ----------------------------------------------------------------------------------------

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_EVERY)
            await self.flush()

    async def flush(self) -> None:
        if not self._dirty or self.store is None:
            return
        batch = {str(c): str(self.cursors[c]) for c in self._dirty if c in self.cursors}
        self._dirty.clear()
        started = time.monotonic()
        try:
            await self.store.save(self.platform, batch)
        except Exception as exc:
            log.warning("discord_cursors_not_saved", error=f"{type(exc).__name__}: {exc}")
            self._dirty.update(int(c) for c in batch)
            return
        log.debug("discord_cursors_saved", channels=len(batch), ms=round((time.monotonic() - started) * 1000, 1))
