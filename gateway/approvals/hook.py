"""The thread side of an approval: the terminal tool, in a worker thread, asks and waits.

``TurnHook`` is a turn's ``ToolContext.extras["approve"]``: calling it opens a request and blocks until a
person answers, the wait times out (``approvals.timeout_seconds``) or the turn is stopped; ``open``/``wait``/
``cancel`` let the terminal tool put every prompt of a batch of tool calls up at once.

``scheduled=True`` (the ``cronjob`` tool, for a job's script) asks for a command that will run unattended,
again and again: a person is always asked (no session or Always grant, no ``approvals.allow``, not even
``approvals.mode: off`` skips it), the answer grants nothing beyond this one script, and nobody to ask (a
cron run) means denied. The Request then tells who approved it (``decided_by``) and its ``id``. The request is handed
to the loop with ``asyncio.run_coroutine_threadsafe``; the thread blocks on a ``concurrent.futures.Future``
that only the loop resolves. While it waits, the turn gives its compute slot back (``turn_slot``), so a
pile of pending approvals never holds up other chats, and it keeps the turn's watchdog quiet.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import secrets
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from gateway.approvals import reads
from gateway.approvals.text import expired_message
from gateway.kernel.shown import command_hash
from gateway.platforms.base import Source
from tools.dangerous import Decision, Verdict
from tools.sandbox import SandboxPolicy, context_policy, hidden_reason, layers

log = structlog.get_logger("herald.approvals")

POLL_SECONDS = 0.1


@dataclass(eq=False)
class Request:
    id: str
    command: str
    display: str
    reason: str
    level: str
    session_key: str
    source: Source  # where the turn came from: the prompt goes there
    turn_id: str | None
    cron: bool
    scheduled: bool = False  # a cron job's script: always asked, never granted beyond itself
    future: concurrent.futures.Future[Decision] = field(default_factory=concurrent.futures.Future)
    created_at: float = field(default_factory=time.time)
    prompt_message_id: str | None = None
    stored: bool = False
    final_text: str | None = None  # the prompt's edited text once decided
    deadline: float = 0.0  # time.monotonic() when silence becomes "expired"
    decided_by: str | None = None  # "platform:user_id" of the person who answered (set before the future)
    # The classifier's verdict, for approvals.allow (matched per simple command, in the workspace it ran in).
    verdict: Verdict | None = field(default=None, repr=False)
    deps: reads.Dependencies | None = None  # the files the command's meaning depends on (reads.py)
    # "mcp": a call of an MCP server's tool (``command`` is its text: server, tool, arguments), not a shell command.
    kind: str = "command"
    key: str | None = None  # the grant key when it is not the command's (an MCP call: server + tool + arguments)
    # Decided without asking anyone (an MCP call that needs no approval), still recorded: (status, scope, message).
    preset: tuple[str, str | None, str] | None = None
    # A message the agent wants to send to another chat (the send_message tool): where to, as people read it.
    # Asked like a scheduled script: always a person, Approve or Deny, granting nothing beyond itself.
    message_to: str | None = None
    # Asked somewhere else than the turn's chat, whose platform's clients cannot answer a prompt
    # (``PlatformAdapter.approvals_to``): the chat it is put in, or None on the dashboard alone; ``elsewhere`` says
    # where in words ("in Telegram"), for the notices the turn's own chat gets instead of the prompt.
    asked_in: Source | None = None
    elsewhere: str | None = None

    @property
    def chat(self) -> Source:
        """The chat the prompt is shown in, whose people may answer it."""
        return self.asked_in or self.source

    @property
    def hash(self) -> str:
        """The grant key: the command, and the digest of each file its meaning depends on."""
        if self.key is not None:
            return self.key
        digest = command_hash(self.command)
        return self.deps.key(digest) if self.deps is not None else digest


def new_id() -> str:
    """64 bits of randomness: an approval id can't be guessed from another chat."""
    return secrets.token_hex(8)


class LoopSide(Protocol):
    """What the thread side needs from the broker (which lives on the loop)."""

    timeout_seconds: float

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None: ...

    def display(self, command: str) -> str: ...

    def reason(self, reason: str) -> str: ...

    def begin(self, req: Request) -> Coroutine[Any, Any, None]: ...

    def interrupted(self, req: Request) -> Coroutine[Any, Any, None]: ...

    def expire(self, req: Request) -> Coroutine[Any, Any, None]: ...


_SETTLING: set[asyncio.Task[None]] = set()  # the loop holds tasks weakly: settling ones are kept here


def _shutting_down() -> Decision:
    return Decision("denied", "Not run: the gateway is shutting down, so nobody can approve it.")


def _policy(ctx: Any) -> SandboxPolicy | None:
    try:
        return context_policy(ctx)
    except AttributeError:  # a context without tools config (tests driving the hook by hand)
        return None


HIDDEN_READ = ("it runs a file the agent's sandbox does not show (the classifier's detail would quote it, so it is "
               "not shown)")


class TurnHook:
    def __init__(self, broker: LoopSide, session_key: str, source: Source | None, turn_id: str | None) -> None:
        self.broker, self.session_key, self.source, self.turn_id = broker, session_key, source, turn_id

    def __call__(self, command: str, verdict: Verdict, ctx: Any, *, scheduled: bool = False) -> Decision:
        """Ask, and block until answered, timed out or the turn is stopped."""
        opened = self.open(command, verdict, ctx, scheduled=scheduled)
        return opened if isinstance(opened, Decision) else self.wait(opened, ctx)

    def open(self, command: str, verdict: Verdict, ctx: Any, *, scheduled: bool = False) -> Request | Decision:
        """Show the prompt without waiting for it (``wait`` does); a Decision when nobody can be asked."""
        loop = self.broker.loop
        extras = getattr(ctx, "extras", {}) or {}
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if on_loop:  # blocking here would freeze the loop that has to deliver the answer
            return Decision("denied", "Not run: approval was requested from the event loop, where nobody can wait.")
        source = self.source
        cron = bool(extras.get("cron"))
        if source is None:
            source = Source("cron", self.session_key, "", chat_type="channel")
            cron = True
        policy = _policy(ctx)
        deps = reads.take(command, str(policy.workspace) if policy is not None else None)
        # The classifier's words may quote a file it read: masked before the prompt, the log or the audit row,
        # and withheld whole when it read a file the agent may not see (the classifier runs outside the sandbox).
        reason = self.broker.reason(verdict.reason or "")
        if policy is not None:
            view = layers(policy)
            if any(hidden_reason(path, view) is not None for path in deps.read):
                reason = HIDDEN_READ
        req = Request(
            id=new_id(), command=command, display=self.broker.display(command), reason=reason,
            level=verdict.level, session_key=self.session_key, source=source, turn_id=self.turn_id, cron=cron,
            scheduled=scheduled, deadline=time.monotonic() + self.broker.timeout_seconds, verdict=verdict,
            deps=deps,
        )
        return self._submit(req)

    def _submit(self, req: Request) -> Request | Decision:
        loop = self.broker.loop
        if loop is None or loop.is_closed():
            return _shutting_down()
        try:
            asyncio.run_coroutine_threadsafe(self.broker.begin(req), loop)
        except RuntimeError:
            return _shutting_down()
        return req

    def ask_tool(self, ask: Any, ctx: Any) -> Decision:
        """An MCP call (tools/mcp/tools.py ``Ask``): put to a person when ``ask.needs_approval`` (the same prompt as
        a dangerous command: server, tool and the whole arguments, secrets masked; grants keyed by server, tool
        and the arguments' hash), recorded either way. Blocks like ``__call__``."""
        try:
            on_loop = asyncio.get_running_loop() is self.broker.loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            return Decision("denied", "Not run: approval was requested from the event loop, where nobody can wait.")
        extras = getattr(ctx, "extras", {}) or {}
        source, cron = self.source, bool(extras.get("cron"))
        if source is None:
            source = Source("cron", self.session_key, "", chat_type="channel")
            cron = True
        text = ask.text()
        preset = None if ask.needs_approval else ("approved", "mcp", f"Ran without asking ({ask.reason}).")
        req = Request(
            id=new_id(), command=text, display=self.broker.reason(text), reason=self.broker.reason(ask.reason),
            level="dangerous" if ask.needs_approval else "safe", session_key=self.session_key, source=source,
            turn_id=self.turn_id, cron=cron, deadline=time.monotonic() + self.broker.timeout_seconds, kind="mcp",
            key=ask.key, preset=preset,
        )
        opened = self._submit(req)
        return opened if isinstance(opened, Decision) else self.wait(opened, ctx)

    def open_message(self, where: str, text: str, ctx: Any) -> Request | Decision:
        """Ask to send ``text`` to ``where`` (another chat): the prompt shows both, whole; ``wait`` waits."""
        loop = self.broker.loop
        extras = getattr(ctx, "extras", {}) or {}
        if self.source is None or extras.get("cron"):
            return Decision("denied", "Not sent: sending to another chat needs a person's approval and nobody can "
                                      "be asked here.")
        req = Request(
            id=new_id(), command=text, display=self.broker.display(text), reason=f"a message to {where}",
            level="message", session_key=self.session_key, source=self.source, turn_id=self.turn_id, cron=False,
            deadline=time.monotonic() + self.broker.timeout_seconds, message_to=where,
        )
        if loop is None or loop.is_closed():
            return _shutting_down()
        try:
            asyncio.run_coroutine_threadsafe(self.broker.begin(req), loop)
        except RuntimeError:
            return _shutting_down()
        return req

    def wait(self, req: Request, ctx: Any) -> Decision:
        """Block until ``req`` is answered, times out or the turn is stopped."""
        interrupt = getattr(ctx, "interrupt", None)
        slot = (getattr(ctx, "extras", None) or {}).get("turn_slot")
        if req.future.done():
            return self._still_same(req, req.future.result())
        if slot is not None:
            slot.lend()
        try:
            decision = self._wait(req, ctx, interrupt)
        finally:
            if slot is not None:
                slot.take_back(interrupt)
        return self._still_same(req, decision)

    @staticmethod
    def _still_same(req: Request, decision: Decision) -> Decision:
        """An approval covers the files as they were when it was asked: one changed since (another call of the
        batch wrote it) voids it, so what runs is what was approved."""
        if not decision.approved or req.deps is None or not req.deps.files or req.scheduled:
            return decision
        now = reads.take(req.command, req.deps.workspace)
        if now.files == req.deps.files:
            return decision
        log.warning("approval_voided", approval_id=req.id, session_key=req.session_key,
                    reason="files changed since it was asked")
        return Decision("denied", f"Not run: {req.deps.changed(now)} changed after approval was asked, so the "
                                  "approval does not cover what would run now. Run the command again to ask anew.")

    def _wait(self, req: Request, ctx: Any, interrupt: Any) -> Decision:
        while True:
            # A person has up to timeout_seconds to answer: keep the turn's inactivity watchdog quiet.
            if hasattr(ctx, "heartbeat"):
                ctx.heartbeat("waiting for approval")
            remaining = req.deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                return req.future.result(timeout=min(POLL_SECONDS, remaining))
            except TimeoutError:
                pass
            if interrupt is not None and interrupt.is_set():
                return self._finish(req, self.broker.interrupted, Decision(
                    "denied", "Not run: the turn was stopped before anyone approved it."))
        return self._finish(req, self.broker.expire,
                            Decision("expired", expired_message(self.broker.timeout_seconds)))

    def cancel(self, req: Request) -> None:
        """Withdraw a prompt whose command will not run (its turn ended first)."""
        if not req.future.done():
            self._finish(req, self.broker.interrupted, Decision(
                "denied", "Not run: the turn was stopped before anyone approved it."))

    def _finish(self, req: Request, settle: Callable[[Request], Coroutine[Any, Any, None]],
                fallback: Decision) -> Decision:
        """Have the loop settle ``req`` (unless a decision got there first) and return the outcome."""
        loop = self.broker.loop
        if loop is None:
            return fallback

        def start() -> None:
            # The coroutine is made on the loop, where it runs: a loop that stops before this callback (the daemon
            # shutting down) leaves no coroutine behind that nobody awaits.
            task = loop.create_task(settle(req))
            _SETTLING.add(task)
            task.add_done_callback(_SETTLING.discard)

        try:
            loop.call_soon_threadsafe(start)
        except RuntimeError:  # closed
            return fallback
        try:
            return req.future.result(timeout=5)
        except Exception:
            return fallback
