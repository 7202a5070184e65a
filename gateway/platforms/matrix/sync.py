"""The /sync loop and the rule of its token: nothing lost, nothing answered twice, no history answered.

A sync answer carries the events after the position it was asked from and a ``next_batch`` token, the position
after them. Its events are taken in order (each message ``accept``ed: durable in the inbox when that returns)
and only then does ``next_batch`` become the position: the next sync asks from it, and it is saved
(``AdapterContext.cursors``, under the bot's user id) within ``FLUSH_EVERY`` and at stop. A message the inbox
could not take (the daemon draining, its database down) leaves the position where it was: the same events come
again from the homeserver, and the inbox drops the ones it has (platform message id ``<room>/<event>``). A crash
before the save means the same: a restart syncs from the saved position, and what the inbox holds is dropped.

The first start (no position saved) answers nothing from before it: it takes the current position from an
initial sync whose timeline it does not read (invites it answers). A later start asks with ``full_state`` once,
so the rooms' state (who is in them, which are encrypted) is known again, and answers what came meanwhile. A
room whose timeline came ``limited`` (more events than the filter's limit since the last sync) is read back
page by page from the gap's end to the previous position, so nothing in the gap is skipped.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import structlog

from gateway.platforms.base import Cursors, DeliveryError, PermanentError, RateLimited
from gateway.platforms.matrix.transport import call

log = structlog.get_logger("herald.matrix")

# taken: in the inbox; own: the bot's own event; left: not for the agent, a duplicate, refused; failed: the inbox
# could not take it (the position stays, and the homeserver hands it out again); held: encrypted, its key not
# here yet (the position moves on, but is saved no further than before it until it is released: crypto.py).
Outcome = Literal["taken", "own", "left", "failed", "held"]

POLL_MS = 30_000
TIMELINE_LIMIT = 50
GAP_PAGE = 100
GAP_PAGES = 20  # a gap longer than this many pages is read back only this far (newest first), and logged
FLUSH_EVERY = 0.5


def sync_filter(user_id: str, limit: int = TIMELINE_LIMIT) -> dict[str, Any]:
    """Presence, typing and receipts, and the bot's own events (every answer it sends would come back), wake a
    long poll for nothing the bot reads: filtered out."""
    return {"presence": {"not_types": ["*"]},
            "room": {"timeline": {"limit": limit, "not_senders": [user_id]}, "ephemeral": {"not_types": ["*"]}}}

TOKEN_REFUSED = ("M_UNKNOWN_TOKEN", "M_MISSING_TOKEN")


class TokenRefused(Exception):
    """The homeserver no longer takes the access token (logged out, deactivated): the adapter restarts."""


class SyncLoop:
    def __init__(self, platform: str, user_id: str, client: Callable[[], Any], cursors: Cursors | None,
                 take: Callable[[str, Any], Awaitable[Outcome]], invited: Callable[[str, list[dict[str, Any]]], None],
                 after: Callable[[], Awaitable[None]], states: Callable[[str, str | None], None],
                 stopping: Callable[[], bool]) -> None:
        self.platform = platform
        self.user_id = user_id
        self._client = client
        self.cursors = cursors
        self._take = take
        self._invited = invited
        self._after = after  # what follows every sync (the end-to-end keys' upkeep)
        self._state = states
        self._stopping = stopping
        self.position: str | None = None  # every event before it is in the inbox (or held)
        self.hold: str | None = None  # a position before an event still held: saved instead of ``position``
        self.filter = sync_filter(user_id)
        self._saved: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._flusher: asyncio.Task[None] | None = None
        self.closed: asyncio.Future[None] | None = None

    # ---- start and stop ---------------------------------------------------------------------------

    async def start(self, saved: dict[str, str]) -> None:
        """Find the position (``saved``'s, the platform's cursors; a first start's: now) and take what came
        since; then sync on in a task."""
        self.position = self._saved = saved.get(self.user_id)
        first = self.position is None
        if not first:
            try:
                await self.once(0, full_state=True)
            except PermanentError as exc:
                # A position the homeserver does not know (another server's, a database restored elsewhere):
                # started over from now rather than never again.
                log.warning("matrix_position_refused", error=str(exc))
                first = True
        if first:
            response = await self._sync(0, sync_filter(self.user_id, 1), since=None, full_state=False)
            self._invites(response)
            self.position = response.next_batch
            await self.flush()
            log.info("matrix_first_start", note="messages from before this start are not answered")
        await self._after()  # the end-to-end keys of the rooms' members known before the first message comes
        self.closed = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._loop(), name="matrix:sync")
        self._flusher = asyncio.create_task(self._flush_loop(), name="matrix:position")

    async def stop(self) -> None:
        for task in (self._task, self._flusher):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._task = self._flusher = None
        await self.flush()
        if self.closed is not None and not self.closed.done():
            self.closed.cancel()

    # ---- syncing --------------------------------------------------------------------------------

    async def _sync(self, timeout_ms: int, sync_filter: dict[str, Any], since: str | None, full_state: bool) -> Any:
        client = self._client()
        # nio skips (decrypts nothing in) an answer whose token it saw last: asked again from an older position
        # (the inbox refused an event), the same answer must be handled again.
        client.next_batch = since
        try:
            return await call(client.sync(timeout=timeout_ms, sync_filter=sync_filter, since=since,
                                          full_state=full_state or None))
        except PermanentError as exc:
            if any(code in str(exc) for code in TOKEN_REFUSED):
                raise TokenRefused(str(exc)) from exc
            raise

    async def once(self, timeout_ms: int, full_state: bool = False) -> bool:
        """One sync from the position, its events taken; whether the position moved past them all."""
        since = self.position
        response = await self._sync(timeout_ms, self.filter, since, full_state)
        self._invites(response)
        # Rooms side by side, each room's events in order: their inbox rows share the store's group commits. A
        # room that fails leaves the position where it was; what the others took comes again as duplicates.
        taken = await asyncio.gather(*(self._room_events(room_id, info, since)
                                       for room_id, info in response.rooms.join.items()))
        if not all(taken):
            return False
        self.position = response.next_batch
        return True

    async def _room_events(self, room_id: str, info: Any, since: str | None) -> bool:
        events = list(info.timeline.events)
        if info.timeline.limited and info.timeline.prev_batch and since:
            events = await self._gap(room_id, info.timeline.prev_batch, since) + events
        for event in events:
            outcome = await self._take(room_id, event)
            if outcome == "failed":
                return False
            if outcome == "held" and self.hold is None:
                self.hold = since
        return True

    def _invites(self, response: Any) -> None:
        for room_id, info in response.rooms.invite.items():
            self._invited(room_id, [stripped(e) for e in info.invite_state])

    async def _gap(self, room_id: str, start: str, since: str) -> list[Any]:
        """The events between the position and a limited timeline's start, oldest first."""
        from nio import MessageDirection

        found: list[Any] = []
        for _ in range(GAP_PAGES):
            page = await call(self._client().room_messages(room_id, start=start, end=since,
                                                           direction=MessageDirection.back, limit=GAP_PAGE))
            found += page.chunk
            if not page.chunk or not page.end or page.end == start:
                break
            start = page.end
        else:
            log.warning("matrix_gap_cut", room_id=room_id, read_back=len(found))
        log.info("matrix_gap_read_back", room_id=room_id, events=len(found))
        return found[::-1]

    async def _loop(self) -> None:
        delay = 1.0
        try:
            while True:
                try:
                    moved = await self.once(POLL_MS if delay == 1.0 else 0)
                except asyncio.CancelledError:
                    raise
                except TokenRefused:
                    raise
                except (DeliveryError, ConnectionError, TimeoutError) as exc:
                    wait = exc.retry_after if isinstance(exc, RateLimited) else delay
                    self._state("retrying", f"{type(exc).__name__}: {exc}")
                    log.warning("matrix_sync_failed", error=str(exc), retry_in=round(wait, 1))
                    await asyncio.sleep(wait * (0.8 + random.random() * 0.4))
                    delay = min(delay * 2, 30.0)
                    continue
                if delay != 1.0:
                    self._state("connected", None)
                    log.info("matrix_sync_resumed")
                delay = 1.0
                await self._after()
                if not moved:
                    if self._stopping():
                        return
                    await asyncio.sleep(1.0)  # the inbox could not take one: the same events again shortly
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            if self.closed is not None and not self.closed.done():
                self.closed.set_exception(exc)
            raise

    # ---- the position -----------------------------------------------------------------------------

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_EVERY)
            await self.flush()

    def release(self) -> None:
        """Nothing is held any more: the position may be saved past where it was held."""
        self.hold = None

    async def flush(self) -> None:
        position = self.hold or self.position
        if position is None or position == self._saved or self.cursors is None:
            return
        try:
            await self.cursors.save(self.platform, {self.user_id: position})
        except Exception as exc:
            log.warning("matrix_position_not_saved", error=f"{type(exc).__name__}: {exc}")
            return
        self._saved = position


def stripped(event: Any) -> dict[str, Any]:
    """An invite's stripped state event as the homeserver sent it (nio keeps its content apart from its source)."""
    source = dict(getattr(event, "source", None) or {})
    content = getattr(event, "content", None)
    if isinstance(content, dict) and "content" not in source:
        source["content"] = content
    return source
