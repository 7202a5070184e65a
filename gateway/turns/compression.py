"""Context compression, the gateway's side: when a history nears the model's context window (or the
endpoint refuses it for length), its older part is summarised by the model and the conversation goes on in
a new session that starts with the summary; ``/compress`` does it on demand.

Lineage keeps everything: the old session ends with ``end_reason = "compressed"`` and keeps every message;
the new one points at it (``parent_id``), carries the summary (``sessions.summary``, sent ahead of its
messages) and a copy of the recent messages it goes on from, inbox ids and all, so a turn cut by a crash
resumes there. Its system prompt is the parent's, byte for byte: the prompt cache keeps hitting.

In a turn the agent loop asks before each model call (``TurnCompaction``, in the worker thread): over
``agent.compression_threshold`` of the window it compresses, once per turn; a context-length error makes
it compress once more and retry the call. The switch to the new session happens on the loop under the
turn journal's lock, so no step is stored in between. Turns and ``/compress`` hold a per-session lock:
a message that arrives while ``/compress`` works waits for it, and ``/compress`` never runs under a turn.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import structlog
from sqlalchemy import and_, insert, select, update

from agent_core.agent import StepRefused
from agent_core.compress import (
    SUMMARY_HEADER,
    context_window_from_error,
    is_summary_message,
    provider_context_window,
    split_history,
    summarise,
    summary_message,
)
from agent_core.errors import LLMError
from agent_core.tokens import estimate_request
from agent_core.usage import UsageMeter
from gateway.commands.registry import CommandContext, CommandSet
from gateway.config import Config
from gateway.session.manager import SessionManager
from gateway.storage.store import Store
from gateway.storage.tables import messages, sessions
from gateway.turns.journal import TurnJournal
from gateway.turns.usage import UsageLedger

log = structlog.get_logger("herald.compression")

# The recent part kept word for word: at most this share of the window (the rest becomes the summary).
KEEP_SHARE = 0.3
# Below this estimate a request is not worth checking (and the endpoint is not asked for its window).
SMALL_REQUEST = 2000
COMMIT_TIMEOUT = 60.0
# /compress waits this long for a turn that has finished computing to store and deliver its answer.
SETTLE_WAIT = 30.0
BUSY = "A turn is running; send the command again once it has answered."


class SessionBusy(Exception):
    """The session's lock was not free in time."""


class Compressor:
    def __init__(self, cfg: Config, store: Store, sessions: SessionManager, agent: Callable[[], Any],
                 ledger: UsageLedger, computing: Callable[[str], bool]) -> None:
        self.cfg = cfg
        self.store = store
        self.sessions = sessions
        self._agent = agent  # the primary agent (its LLM client summarises), or None without a model
        self.ledger = ledger
        self._computing = computing  # session key -> a turn of it is running (not just storing its answer)
        self._locks: dict[str, asyncio.Lock] = {}
        self._holders: dict[str, int] = {}
        self._learned: int | None = None  # a window an endpoint named in a context-length error
        self._probed = False
        self._provider: int | None = None

    # ---- the per-session lock --------------------------------------------------------------------

    @asynccontextmanager
    async def hold(self, key: str, timeout: float | None = None) -> AsyncIterator[None]:
        """The session's lock, for a whole turn or a compression; SessionBusy when not free in ``timeout``."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._holders[key] = self._holders.get(key, 0) + 1
        try:
            try:
                await asyncio.wait_for(lock.acquire(), timeout)
            except TimeoutError:
                raise SessionBusy(key) from None
            try:
                yield
            finally:
                lock.release()
        finally:
            self._holders[key] -= 1
            if not self._holders[key]:
                del self._holders[key]
                self._locks.pop(key, None)

    # ---- what a turn sends ------------------------------------------------------------------------

    @staticmethod
    def with_summary(session: dict[str, Any], history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        summary = session.get("summary")
        return [summary_message(summary), *history] if summary else history

    def window(self, llm: Any) -> int | None:
        """The context window in tokens: configured, named by the endpoint in an error, or from its /models
        (asked once). Thread side: it may make a request."""
        if self.cfg.model.context_window:
            return self.cfg.model.context_window
        if self._learned:
            return self._learned
        if not self._probed:
            self._probed = True
            self._provider = provider_context_window(llm, self.cfg.model.name or "")
            if self._provider:
                log.info("context_window_from_endpoint", tokens=self._provider)
        return self._provider

    def for_turn(self, key: str, session: dict[str, Any], journal: TurnJournal, loop: asyncio.AbstractEventLoop,
                 interrupt: threading.Event, meter: UsageMeter, activity: Callable[[str], None]) -> TurnCompaction:
        return TurnCompaction(self, key, session, journal, loop, interrupt, meter, activity)

    # ---- the switch to a new session (loop side) --------------------------------------------------

    async def commit(self, key: str, old: dict[str, Any], summary: str, recent: list[dict[str, Any]],
                     stored: int, inbox_id: int | None) -> dict[str, Any] | None:
        """End ``old`` as compressed and start its successor with ``summary`` and a copy of ``old``'s newest
        ``stored`` messages (``recent`` minus what is not stored yet), in one transaction. None when
        ``old`` had ended meanwhile (/new)."""
        now = time.time()
        row = {"id": str(uuid.uuid4()), "key": key, "parent_id": old["id"], "platform": old["platform"],
               "system_prompt": old.get("system_prompt"), "created_at": now, "updated_at": now, "ended_at": None,
               "end_reason": None, "summary": summary,
               # The same conversation goes on: whose it is, its title and settings (/model, /personality...).
               **{c: old.get(c) for c in ("user_id", "title", "model", "reasoning_effort", "personality",
                                             "voice")}}
        columns = (messages.c.role, messages.c.content, messages.c.tool_calls, messages.c.tool_call_id,
                   messages.c.inbox_id)
        turn_start = max((n for n, m in enumerate(recent) if m.get("role") == "user"), default=0)

        def op(conn: Any) -> bool:
            ended = conn.execute(update(sessions).where(and_(sessions.c.id == old["id"], sessions.c.ended_at.is_(None)))
                                 .values(ended_at=now, end_reason="compressed")).rowcount
            if not ended:
                return False
            conn.execute(insert(sessions).values(**row))
            copied = []
            if stored:
                copied = [dict(r._mapping) for r in conn.execute(
                    select(*columns).where(and_(messages.c.session_id == old["id"], messages.c.hidden_at.is_(None)))
                    .order_by(messages.c.id.desc()).limit(stored))]
                copied.reverse()
            if [m["role"] for m in copied] != [m.get("role") for m in recent[:stored]]:
                # Not what the model was sent (should not happen): copy what it was sent; the turn's own
                # messages keep its inbox row, so a crash still resumes it.
                copied = [{"role": m["role"], "content": m.get("content"), "tool_calls": m.get("tool_calls"),
                           "tool_call_id": m.get("tool_call_id"), "inbox_id": inbox_id if n >= turn_start else None}
                          for n, m in enumerate(recent[:stored])]
            if copied:
                conn.execute(insert(messages), [{**m, "session_id": row["id"], "created_at": now} for m in copied])
            return True

        if not await self.store.run_write(op):
            return None
        self.sessions.activate(key, row)
        log.info("session_compressed", parent=old["id"], session=row["id"], kept=len(recent))
        return row

    # ---- /compress ----------------------------------------------------------------------------------

    async def compress_now(self, key: str, source: Any) -> str:
        agent = self._agent()
        if agent is None:
            return "No model is configured, so there is nothing to summarise with."
        notice = await self.ledger.budget_notice(source)
        if notice:
            return notice
        if self._computing(key):
            return BUSY
        try:
            # A turn that has computed its answer holds the session until the answer is stored and sent:
            # someone who sends /compress on seeing it waits that moment out, not a whole turn.
            async with self.hold(key, SETTLE_WAIT):
                return await self._compress_held(key, source, agent)
        except SessionBusy:
            return BUSY

    async def _compress_held(self, key: str, source: Any, agent: Any) -> str:
        session = self.sessions.peek(key) or await self.store.sessions.active(key)
        if session is None:
            return "There is no conversation to compress yet."
        history = self.with_summary(session, await self.store.messages.history(
            session["id"], self.cfg.agent.max_history_messages))
        previous, body = _split_summary(history)
        before = estimate_request(history)
        window = self.cfg.model.context_window or self._learned or self._provider
        keep = before // 4 if window is None else min(before // 4, int(window * KEEP_SHARE))
        older, recent = split_history(body, keep)
        if not older:
            return "There is nothing to compress yet: the conversation is only its latest exchange."
        meter = UsageMeter()
        try:
            summary = await asyncio.to_thread(summarise, agent.llm, older, previous=previous, window=window,
                                              interrupt=threading.Event(), usage=meter)
        except LLMError as exc:
            log.warning("compression_failed", kind=exc.kind, error=str(exc))
            return f"I could not compress the conversation: {exc.user_message()}"
        finally:
            await self.ledger.record(meter, session_id=session["id"], inbox_id=None, platform=source.platform,
                                     user_id=source.user_id)
        row = await self.commit(key, session, summary, recent, len(recent), None)
        if row is None:
            return "The conversation ended meanwhile; nothing was compressed."
        after = estimate_request([summary_message(summary), *recent])
        return (f"🗜 Compressed this conversation: {len(older)} earlier message(s) are now a summary "
                f"(about {before:,} → {after:,} tokens). The full history stays stored.")


def _split_summary(history: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    if history and is_summary_message(history[0]):
        return str(history[0]["content"]).removeprefix(SUMMARY_HEADER).strip(), history[1:]
    return None, history


class TurnCompaction:
    """The agent loop's ``compact`` callback for one turn (agent_core/agent.py); runs in the worker thread."""

    def __init__(self, owner: Compressor, key: str, session: dict[str, Any], journal: TurnJournal,
                 loop: asyncio.AbstractEventLoop, interrupt: threading.Event, meter: UsageMeter,
                 activity: Callable[[str], None]) -> None:
        self.owner = owner
        self.key = key
        self.session = session
        self.journal = journal
        self.loop = loop
        self.interrupt = interrupt
        self.meter = meter
        self.activity = activity
        self.early_done = False
        self.compressions = 0

    def __call__(self, msgs: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 overflow: LLMError | None) -> list[dict[str, Any]] | None:
        agent = self.owner._agent()
        if agent is None or (overflow is None and self.early_done):
            return None
        estimate = estimate_request(msgs, tools)
        if overflow is None:
            if estimate < SMALL_REQUEST and not self.owner.cfg.model.context_window:
                return None  # a short history is not worth asking the endpoint for its window
            window = self.owner.window(agent.llm)
            if window is None or estimate < self.owner.cfg.agent.compression_threshold * window:
                return None
            self.early_done = True
        else:
            named = context_window_from_error(overflow)
            if named and not self.owner.cfg.model.context_window:
                self.owner._learned = named
            window = named or self.owner.window(agent.llm)
        previous, body = _split_summary(msgs[1:])
        keep = estimate // 4 if window is None else int(window * KEEP_SHARE)
        older, recent = split_history(body, keep)
        if not older:
            log.info("compression_nothing_older", estimate=estimate, window=window)
            return None
        self.activity("compressing the conversation")
        try:
            summary = summarise(agent.llm, older, previous=previous, window=window, interrupt=self.interrupt,
                                usage=self.meter)
        except LLMError as exc:
            if exc.kind == "interrupted":
                raise StepRefused("interrupted") from exc
            log.warning("compression_failed", kind=exc.kind, error=str(exc))
            return None
        except Exception:  # a failed compression leaves the turn as it was, never breaks it
            log.exception("compression_failed")
            return None
        self.activity("compressed the conversation")

        async def switch(pending_user: bool) -> str | None:
            stored = len(recent) - (1 if pending_user else 0)
            row = await self.owner.commit(self.key, self.session, summary, recent, stored, self.journal.inbox_id)
            if row is None:
                return None
            self.session = row
            return str(row["id"])

        try:
            moved = asyncio.run_coroutine_threadsafe(self.journal.move_to(switch), self.loop).result(COMMIT_TIMEOUT)
        except StepRefused:
            raise
        except Exception as exc:  # whether it switched is unknown: the turn must not store steps anywhere now
            log.exception("compression_not_committed")
            raise StepRefused(f"compression failed: {type(exc).__name__}") from exc
        if not moved:
            return None
        self.compressions += 1
        log.info("turn_compressed", reason="overflow" if overflow else "threshold", estimate=estimate, window=window,
                 summarised=len(older), kept=len(recent))
        return [msgs[0], summary_message(summary), *recent]


COMPRESS_COMMANDS: CommandSet[Compressor] = CommandSet()


@COMPRESS_COMMANDS.command("compress", "summarise the older part of this conversation to free the model's context")
async def compress(compressor: Compressor, ctx: CommandContext) -> str:
    return await compressor.compress_now(ctx.session_key, ctx.message.source)
