"""The thread side of the agent's questions (the ``clarify`` tool, in a worker thread): ask, and wait.

``ClarifyAsker`` is every turn's ``ToolContext.extras["clarify"]``; what it needs of the turn comes from the
context (the session key, the chat's ``Source``, the interrupt, the compute slot). ``ask`` hands the question
to the loop (``run_coroutine_threadsafe``) and blocks on a ``concurrent.futures.Future`` that only the loop
resolves: an answer, nobody within ``tools.clarify.timeout_seconds``, or the turn stopped. While it waits the
turn lends its compute slot back (a person may take minutes) and keeps the watchdog quiet, as an approval
does (gateway/approvals/hook.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import secrets
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.platforms.base import Source

POLL_SECONDS = 0.1
WAITING = "waiting for an answer"  # the turn's last step meanwhile (the shutdown drain cuts such turns at once)


@dataclass(frozen=True)
class Answer:
    status: str  # answered | no_answer | stopped | withdrawn
    text: str | None = None
    choice: int | None = None  # 1-based, when a choice was picked (a button, or its number typed)
    by: str | None = None  # who answered, as the chat names them

    def for_model(self, timeout: float) -> dict[str, Any]:
        if self.status == "answered":
            out: dict[str, Any] = {"answer": self.text, "answered_by": self.by}
            if self.choice is not None:
                out["choice"] = self.choice
            return out
        if self.status == "no_answer":
            minutes = f"{timeout / 60:g} minutes" if timeout >= 60 else f"{timeout:g} seconds"
            return {"answer": None, "note": f"no answer: nobody answered within {minutes}. Go on with your best "
                                            "judgement and say what you assumed (or ask again later)."}
        if self.status == "stopped":
            return {"answer": None, "note": "the question was withdrawn: the turn was stopped"}
        return {"answer": None, "note": "the question was withdrawn: Herald is restarting"}


@dataclass(eq=False)
class Question:
    id: str
    question: str
    choices: list[str]
    session_key: str
    source: Source  # the chat the turn came from: the question goes there, its sender is the requester
    deadline: float  # time.monotonic() when silence becomes "no answer"
    future: concurrent.futures.Future[Answer] = field(default_factory=concurrent.futures.Future)
    created_at: float = field(default_factory=time.time)
    prompt_message_id: str | None = None
    stored: bool = False


def new_id() -> str:
    """64 bits of randomness, as an approval's: a question's id can't be guessed from another chat."""
    return secrets.token_hex(8)


class LoopSide(Protocol):
    """What the thread side needs of the broker (clarify.py), which lives on the loop."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None: ...

    def timeout(self) -> float: ...

    def begin(self, q: Question) -> Coroutine[Any, Any, None]: ...

    def finish(self, q: Question, status: str, via: str) -> None: ...


class ClarifyAsker:
    def __init__(self, broker: LoopSide) -> None:
        self.broker = broker

    def ask(self, question: str, choices: list[str], ctx: Any) -> dict[str, Any]:
        """In the worker thread: show the question, block until answered, timed out or stopped."""
        extras = getattr(ctx, "extras", {}) or {}
        source: Source | None = extras.get("source")
        loop = self.broker.loop
        if source is None:
            return {"error": "nobody can be asked here (no chat to ask in)"}
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if loop is None or loop.is_closed() or on_loop:
            return {"error": "the question could not be asked (Herald is shutting down)"}
        timeout = self.broker.timeout()
        q = Question(new_id(), question, choices, ctx.session_key, source, time.monotonic() + timeout)
        try:
            asyncio.run_coroutine_threadsafe(self.broker.begin(q), loop)
        except RuntimeError:
            return {"error": "the question could not be asked (Herald is shutting down)"}
        slot = extras.get("turn_slot")
        interrupt = getattr(ctx, "interrupt", None)
        if slot is not None:
            slot.lend()
        try:
            answer = self._wait(q, ctx, interrupt)
        finally:
            if slot is not None:
                slot.take_back(interrupt)
        return answer.for_model(timeout)

    def _wait(self, q: Question, ctx: Any, interrupt: Any) -> Answer:
        while True:
            if hasattr(ctx, "heartbeat"):
                ctx.heartbeat(WAITING)
            remaining = q.deadline - time.monotonic()
            if remaining <= 0:
                return self._end(q, "no_answer", "timeout")
            try:
                return q.future.result(timeout=min(POLL_SECONDS, remaining))
            except TimeoutError:
                pass
            if interrupt is not None and interrupt.is_set():
                return self._end(q, "stopped", "stop")

    def _end(self, q: Question, status: str, via: str) -> Answer:
        """Have the loop settle ``q`` (unless an answer got there first) and return the outcome."""
        loop = self.broker.loop
        fallback = Answer(status)
        if loop is None:
            return fallback
        try:
            loop.call_soon_threadsafe(self.broker.finish, q, status, via)
        except RuntimeError:  # closed
            return fallback
        try:
            return q.future.result(timeout=5)
        except Exception:
            return fallback
