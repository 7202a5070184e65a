"""Reactions standing in for what Matrix lacks: buttons, and a "working" indicator on the message being answered.

Buttons: each gets a key (an emoji). An approval's four are fixed (✅ once, 🔁 for the session, ♾️ always, ❌
deny), any other button is numbered (1️⃣ 2️⃣ …). The message names them in its last line and carries them in its
content (``org.herald.buttons``: key, button id, label), and the bot reacts with each key itself, so a person
taps one. A reaction by someone else on that message with one of its keys is a press of that button, checked
like any press (the approver rules are the gateway's). The keys are remembered per message while the process
lives; after a restart a reaction on an older message reads the buttons back from the message itself (only
from the bot's own). An edit that takes the buttons away takes the bot's reactions away too.

Working: while a turn runs, an ⏳ reaction sits on the message it answers (after ``WORKING_DELAY``, so a fast
answer costs nothing), and is redacted when the answer is sent or when the turn stops renewing it.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import OrderedDict
from typing import Any, Protocol

import structlog

from gateway.platforms.base import Button
from gateway.platforms.matrix.inbound import thread_of
from gateway.platforms.matrix.transport import call

log = structlog.get_logger("herald.matrix")

BUTTONS_KEY = "org.herald.buttons"
APPROVAL_KEYS = {"o": "✅", "s": "🔁", "a": "♾️", "d": "❌"}
_APPROVAL_ID = re.compile(r"ap:[^:]+:([osad])")
NUMBERED = ("1️⃣", "2️⃣", "3️⃣", "4️⃣", "5️⃣", "6️⃣", "7️⃣", "8️⃣", "9️⃣", "🔟",
            *(chr(0x1F1E6 + i) for i in range(26)))  # then regional indicators 🇦…🇿
WORKING = "⏳"
WORKING_DELAY = 0.5
WORKING_LEASE = 6.0  # the core renews "typing" every few seconds while a turn runs; unrenewed, it goes


def legend(keyed: list[tuple[str, Button]]) -> str:
    return "React with " + " · ".join(f"{key} {button.label}" for key, button in keyed)


def variants(key: str) -> set[str]:
    """A key as clients send it: with or without the emoji presentation selector (♾️ / ♾)."""
    bare = key.replace("\ufe0f", "")
    return {key, bare, bare + "\ufe0f"}


class Poster(Protocol):
    """What reactions need of the outbound part (outbound.py's ``MatrixOutbound``)."""

    inbound: Any

    def client(self) -> Any: ...

    async def react(self, room: str, event_id: str, key: str) -> str: ...

    async def redact(self, room: str, event_id: str) -> None: ...


class _Spawner:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()


class Keys(_Spawner):
    def __init__(self, outbound: Poster) -> None:
        super().__init__()
        self.outbound = outbound
        # event id -> (thread, {key: button id}); the newest 5000 prompts
        self.known: OrderedDict[str, tuple[str | None, dict[str, str]]] = OrderedDict()
        self._mine: dict[str, dict[str, str]] = {}  # event id -> {key: the bot's reaction event}

    @staticmethod
    def assign(buttons: list[Button]) -> list[tuple[str, Button]]:
        keyed: list[tuple[str, Button]] = []
        numbers = iter(NUMBERED)
        for button in buttons:
            match = _APPROVAL_ID.fullmatch(button.id)
            key = APPROVAL_KEYS[match.group(1)] if match else next(numbers, None)
            if key is not None:
                keyed.append((key, button))
        return keyed

    def _remember(self, event_id: str, thread: str | None, entries: list[dict[str, Any]]) -> dict[str, str]:
        keys = {str(e["key"]): str(e["id"]) for e in entries if isinstance(e, dict) and "key" in e and "id" in e}
        self.known[event_id] = (thread, keys)
        self.known.move_to_end(event_id)
        while len(self.known) > 5000:
            gone, _ = self.known.popitem(last=False)
            self._mine.pop(gone, None)
        return keys

    def posted(self, room: str, event_id: str, thread: str | None, entries: list[dict[str, Any]]) -> None:
        keys = self._remember(event_id, thread, entries)
        self.spawn(self._offer(room, event_id, list(keys)), name="matrix:keys")

    def replaced(self, room: str, event_id: str, thread: str | None, entries: list[dict[str, Any]]) -> None:
        before = set(self.known.get(event_id, (None, {}))[1])
        keys = self._remember(event_id, thread, entries)
        gone = [key for key in before if key not in keys]
        mine = self._mine.get(event_id, {})
        stale = [mine.pop(key) for key in gone if key in mine]
        if stale or set(keys) - before:
            self.spawn(self._withdraw(room, stale, event_id, [k for k in keys if k not in before]), name="matrix:keys")

    async def _offer(self, room: str, event_id: str, keys: list[str]) -> None:
        for key in keys:
            try:
                self._mine.setdefault(event_id, {})[key] = await self.outbound.react(room, event_id, key)
            except Exception as exc:
                log.info("matrix_reaction_failed", error=f"{type(exc).__name__}: {exc}")
                return

    async def _withdraw(self, room: str, reactions: list[str], event_id: str, new: list[str]) -> None:
        for reaction in reactions:
            try:
                await self.outbound.redact(room, reaction)
            except Exception as exc:
                log.info("matrix_redaction_failed", error=f"{type(exc).__name__}: {exc}")
        if new:
            await self._offer(room, event_id, new)

    def lookup(self, event_id: str, key: str) -> tuple[str | None, str | None] | None:
        """(thread, button id or None for a key that is no button) of a prompt known here; None if unknown."""
        found = self.known.get(event_id)
        if found is None:
            return None
        thread, keys = found
        return thread, next((keys[k] for k in variants(key) if k in keys), None)

    async def read_back(self, room: str, event_id: str, key: str) -> tuple[str | None, str | None]:
        """The buttons of a message the bot sent before this process started, read from the message itself."""
        client = self.outbound.client()
        event = (await call(client.room_get_event(room, event_id))).event
        if type(event).__name__ == "MegolmEvent" and client.olm is not None:
            event = client.decrypt_event(event)
        source = getattr(event, "source", {}) or {}
        content = source.get("content") if isinstance(source.get("content"), dict) else {}
        if source.get("sender") != self.outbound.inbound.user_id or not isinstance(content.get(BUTTONS_KEY), list):
            self._remember(event_id, None, [])
            return None, None
        self._remember(event_id, thread_of(content), content[BUTTONS_KEY])
        return self.lookup(event_id, key) or (None, None)


class _Entry:
    __slots__ = ("event_id", "reaction", "until")

    def __init__(self, event_id: str) -> None:
        self.event_id = event_id
        self.until = 0.0
        self.reaction: str | None = None


class Working(_Spawner):
    def __init__(self, outbound: Poster) -> None:
        super().__init__()
        self.outbound = outbound
        self.latest: OrderedDict[tuple[str, str | None], str] = OrderedDict()  # (room, thread) -> last message
        self._on: dict[tuple[str, str | None], _Entry] = {}

    def note(self, room: str, thread: str | None, event_id: str) -> None:
        """A message taken in (room, thread): the one a "working" reaction goes on."""
        key = (room, thread)
        self.latest[key] = event_id
        self.latest.move_to_end(key)
        while len(self.latest) > 5000:
            self.latest.popitem(last=False)

    def renew(self, room: str, thread: str | None) -> None:
        key = (room, thread)
        entry = self._on.get(key)
        if entry is None:
            event_id = self.latest.get(key)
            if event_id is None:
                return
            entry = self._on[key] = _Entry(event_id)
            self.spawn(self._show(key, entry), name="matrix:working")
        entry.until = time.monotonic() + WORKING_LEASE

    async def _show(self, key: tuple[str, str | None], entry: _Entry) -> None:
        await asyncio.sleep(WORKING_DELAY)
        if self._on.get(key) is not entry:
            return  # answered before it showed
        try:
            entry.reaction = await self.outbound.react(key[0], entry.event_id, WORKING)
        except Exception as exc:
            log.debug("matrix_reaction_failed", error=f"{type(exc).__name__}: {exc}")
        if entry.reaction is not None and self._on.get(key) is not entry:
            await self._take_back(key[0], entry.reaction)  # the answer came while the reaction was on its way
            return
        while self._on.get(key) is entry:
            left = entry.until - time.monotonic()
            if left <= 0:
                self.done(*key)
                return
            await asyncio.sleep(left)

    def done(self, room: str, thread: str | None) -> None:
        entry = self._on.pop((room, thread), None)
        if entry is not None and entry.reaction is not None:
            self.spawn(self._take_back(room, entry.reaction), name="matrix:working")

    async def _take_back(self, room: str, reaction: str) -> None:
        try:
            await self.outbound.redact(room, reaction)
        except Exception as exc:
            log.debug("matrix_redaction_failed", error=f"{type(exc).__name__}: {exc}")

    def stop(self) -> None:
        super().stop()
        self._on.clear()
