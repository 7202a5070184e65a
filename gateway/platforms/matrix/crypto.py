"""Encrypted messages whose keys have not come yet.

A sender's client shares a room's key with the bot's device by a to-device message, which can arrive a sync
or two after the message it opens, or not at all (the bot's device was unknown to the sender). Such a message
waits here: after each sync nio is asked again to decrypt it (its keys may have come meanwhile, or from a key
request sent to the sender's devices), and once it can, it is taken like any message. Meanwhile the saved sync
position stays before it (``SyncLoop.hold``): a restart syncs from there, gets it again, and nio, whose key
store now holds whatever arrived, decrypts it then — nothing is lost for a missing key. A message still
unreadable after ``KEY_WAIT`` is given up on: the room is told once, and the position moves on.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog

log = structlog.get_logger("herald.matrix")

KEY_WAIT = 60.0  # seconds an encrypted message waits for its key
MAX_WAITING = 500  # past this many, the oldest are given up on at once


@dataclass
class _Waiting:
    room_id: str
    event: Any  # nio's MegolmEvent
    since: float
    asked: bool = False  # its key was requested from the sender's devices


class KeyWait:
    def __init__(self, client: Callable[[], Any], take: Callable[[str, Any], Awaitable[str]],
                 give_up: Callable[[str, dict[str, Any]], None], release: Callable[[], None]) -> None:
        self._client = client
        self._take = take  # the adapter's: what a decrypted event becomes ("failed": the inbox could not take it)
        self._give_up = give_up  # the room told it cannot be read
        self._release = release  # nothing waits any more: the sync position may be saved past it all
        self.waiting: list[_Waiting] = []

    def hold(self, room_id: str, event: Any) -> None:
        if any(w.event.event_id == event.event_id for w in self.waiting):
            return
        self.waiting.append(_Waiting(room_id, event, time.monotonic()))
        log.info("matrix_waiting_for_key", room_id=room_id, event_id=event.event_id)

    async def retry(self) -> None:
        """After a sync: decrypt what now can be, ask for the keys of what cannot, give up on what waited too
        long. The position is released once nothing waits."""
        client = self._client()
        if not self.waiting or client is None or client.olm is None:
            return
        now = time.monotonic()
        still: list[_Waiting] = []
        for index, entry in enumerate(self.waiting):
            try:
                decrypted = client.decrypt_event(entry.event)
            except Exception:
                decrypted = None
            if decrypted is not None and type(decrypted).__name__ != "MegolmEvent":
                if await self._take(entry.room_id, decrypted) == "failed":
                    still.append(entry)  # the inbox could not take it: again after the next sync
                continue
            if now - entry.since > KEY_WAIT or len(self.waiting) - index > MAX_WAITING:
                log.warning("matrix_undecryptable", room_id=entry.room_id, event_id=entry.event.event_id)
                self._give_up(entry.room_id, entry.event.source)
                continue
            if not entry.asked:
                entry.asked = True
                await self._ask(client, entry)
            still.append(entry)
        self.waiting = still
        if not still:
            self._release()

    @staticmethod
    async def _ask(client: Any, entry: _Waiting) -> None:
        try:
            await client.request_room_key(entry.event)
        except Exception as exc:  # already asked for this session, or the request could not be sent
            log.debug("matrix_key_request_failed", error=f"{type(exc).__name__}: {exc}")
