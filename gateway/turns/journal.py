"""A turn's steps, stored as they happen.

The agent loop runs in a worker thread and reports each final step (the assistant's tool calls before they
run, each tool result as it completes) through ``TurnJournal.step``; the journal stores it on the event
loop, tagged with the inbox row, and only then does the thread go on. A crash after a tool ran therefore
leaves its result in the database, and the recovered turn resumes after it instead of running it again.

Messages a person sends for the running turn (steered: ``busy_mode: steer``, /steer, an edit) are taken in before
a model call (``inject``), stored after the steps before them, their own inbox rows finished in that transaction.

A turn that is stopped, times out or is abandoned is ``close``d on the loop: later steps from its thread are
refused (the agent stops), and tool calls stored without a result get one saying what happened, so the
session's history stays valid for the model. The user's message is stored with the first step, or with
the answer when there were no steps: a plain question and answer still costs one write.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from sqlalchemy import Connection

from agent_core.agent import StepRefused, unanswered_calls
from gateway.storage.inbox import NotExpected
from gateway.storage.store import Store

STEP_TIMEOUT = 60.0


class Steered:
    """A message sent for a running turn (``busy_mode: steer``, /steer, an edit): its inbox row (None: it has
    none of its own), the Accepted it came as (a turn of its own if this one never takes it) and the user
    message the agent gets (None: made from the message when taken). ``taken`` once stored in the turn."""

    __slots__ = ("inbox_id", "item", "message", "taken")

    def __init__(self, inbox_id: int | None, item: Any, message: dict[str, Any] | None = None) -> None:
        self.inbox_id = inbox_id
        self.item = item
        self.message = message
        self.taken = False


class Waiting(Protocol):
    """Where a turn's steered messages wait (the session's lane)."""

    def take_steered(self) -> list[Steered]: ...

    def untaken(self, taken: list[Steered]) -> None: ...


_CUT_OFF_BY = {
    "stopped": "stopped by the user (/stop)",
    "superseded": "cut off by a newer message",
    "timeout": "cut off because the turn made no progress for too long",
    "shutdown": "cut off by a restart of Herald",
}


def closing_result(reason: str, last_step: str) -> str:
    why = _CUT_OFF_BY.get(reason, f"cut off ({reason})")
    if last_step.startswith("waiting for approval"):
        return f"not run: {why} while it waited for approval"
    if last_step.startswith("waiting for an answer"):
        return f"no answer: {why} while it waited for the person's answer"
    return f"{why} while it ran: it may have completed partly"


class TurnJournal:
    def __init__(self, store: Store, loop: asyncio.AbstractEventLoop, session_id: str, inbox_id: int | None,
                 user_msg: dict[str, Any] | None, guard: Callable[[Connection], bool] | None = None) -> None:
        self.store = store
        # Checked in each write's transaction (the inbox row is still this instance's): once another instance
        # took the message over (this one stalled past its lease), this turn stores nothing more and its next
        # tool does not run — the new owner runs the turn from what is stored.
        self.guard = guard
        self.loop = loop
        self.session_id = session_id
        self.inbox_id = inbox_id
        self._user = user_msg  # None once stored (or for a resumed turn, whose user message is stored)
        self._stored: list[dict[str, Any]] = []  # the agent's messages stored so far, in order
        self.closed: str | None = None
        self._lock = asyncio.Lock()

    # ---- thread side ------------------------------------------------------------------------------

    def step(self, messages: list[dict[str, Any]]) -> None:
        """In the worker thread: store ``messages`` and wait until they are durable."""
        if self.closed is not None:
            raise StepRefused(self.closed)
        future = asyncio.run_coroutine_threadsafe(self._record(messages), self.loop)
        try:
            future.result(timeout=STEP_TIMEOUT)
        except StepRefused:
            raise
        except Exception as exc:  # a step that can't be stored must not run its tools unrecorded
            raise StepRefused(f"{type(exc).__name__}: {exc}") from exc

    def inject(self, waiting: Waiting) -> list[dict[str, Any]]:
        """In the worker thread, before a model call: the messages sent for this turn meanwhile (``waiting``
        hands them over, on the loop), stored after the turn's steps in the order the agent sees them, their
        own inbox rows finished in the same transaction. Only what was stored is handed to the agent: what
        could not be goes back to ``waiting``, for a later call or the next turn."""
        if self.closed is not None:
            raise StepRefused(self.closed)
        future = asyncio.run_coroutine_threadsafe(self._inject(waiting), self.loop)
        try:
            return future.result(timeout=STEP_TIMEOUT)
        except StepRefused:
            raise
        except Exception as exc:
            raise StepRefused(f"{type(exc).__name__}: {exc}") from exc

    # ---- loop side --------------------------------------------------------------------------------

    async def _record(self, messages: list[dict[str, Any]]) -> None:
        async with self._lock:
            if self.closed is not None:
                raise StepRefused(self.closed)
            await self._append(messages)

    async def _inject(self, waiting: Waiting) -> list[dict[str, Any]]:
        async with self._lock:
            if self.closed is not None:
                raise StepRefused(self.closed)
            taken = waiting.take_steered()
            if not taken:
                return []
            added = [s.message for s in taken]
            try:
                await self._append(added, finished=[s.inbox_id for s in taken if s.inbox_id is not None])
            except BaseException:
                waiting.untaken(taken)
                raise
            for item in taken:
                item.taken = True
            return added

    async def _append(self, messages: list[dict[str, Any]], status: str | None = None, reply: str | None = None,
                      finished: list[int] | None = None) -> None:
        rows = ([self._user] if self._user is not None else []) + messages
        await self.store.messages.append(self.session_id, rows, self.inbox_id, status, reply, guard=self.guard,
                                         finished=finished)
        self._user = None
        self._stored.extend(messages)

    async def move_to(self, switch: Callable[[bool], Awaitable[str | None]]) -> bool:
        """Go on in another session (compression): ``switch(user message not stored yet)`` makes it and returns
        its id (None: it could not), while no step is being stored. Raises StepRefused once closed."""
        async with self._lock:
            if self.closed is not None:
                raise StepRefused(self.closed)
            new_id = await switch(self._user is not None)
            if new_id is None:
                return False
            self.session_id = new_id
            return True

    async def finish(self, messages: list[dict[str, Any]], status: str, reply: str | None) -> None:
        """The turn ended: store what ``messages`` (all the agent added) holds beyond the stored steps, and
        move the inbox row to ``status`` in the same transaction."""
        async with self._lock:
            self.closed = self.closed or "finished"
            await self._append(messages[len(self._stored):], status, reply)

    async def close(self, reason: str, status: str | None, last_step: str = "") -> None:
        """The turn was cut off (its thread may still run): refuse its later steps, answer its open calls."""
        async with self._lock:
            if self.closed is not None:
                return
            self.closed = reason
            what = closing_result(reason, last_step)
            closing = [{"role": "tool", "tool_call_id": call_id, "content": json.dumps({"error": what})}
                       for call_id in unanswered_calls(self._stored)]
            if closing or status is not None or self.inbox_id is None:
                try:
                    await self._append(closing, status)
                except NotExpected:
                    pass  # finished elsewhere meanwhile; nothing of ours belongs there now
