"""The approval broker: a dangerous command waits in its worker thread until a person answers in the chat.

Thread side (``ApprovalBroker.request``, called by the terminal tool through ``ToolContext.extras["approve"]``):
it hands the request to the loop with ``asyncio.run_coroutine_threadsafe`` and blocks on a
``concurrent.futures.Future`` for at most ``approvals.timeout_seconds``, heartbeating the turn's watchdog
and watching the turn's interrupt flag while it waits.

Loop side: the request is stored (table ``approvals``), the prompt is sent through the session's adapter
with four buttons (ids ``ap:<id>:<o|s|a|d>``, short enough for Telegram's 64-byte callback data), and a
decision (button, ``/approve``, ``/deny``), the timeout, ``/stop``, ``/new`` or a restart resolves the
future. Every resolution runs on the loop, and the first one wins: a press racing the timeout is decided
by whichever reaches the loop first; the loser is told the prompt was already answered.

"Approve for this session" is kept per session key (memory + ``approval_session_grants``); "Always
approve" goes to ``approval_allowlist``, never to config.yaml. Every request and decision is a row in
``approvals`` and a structured log event; ``herald approvals list`` reads them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import os
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog
from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from gateway.commands import Command, CommandContext, CommandRegistry
from gateway.platforms.base import Button, ButtonPress, OutboundMessage, PlatformAdapter, Source
from gateway.tables import approval_allowlist, approval_session_grants, approvals
from tools.dangerous import Decision, Verdict, matches_allowlist, normalize

if TYPE_CHECKING:
    from gateway.config import ApprovalsConfig
    from gateway.runner import GatewayRunner

log = structlog.get_logger("herald.approvals")

BUTTON_PREFIX = "ap"
CHOICES = {"o": "once", "s": "session", "a": "always", "d": "deny"}
LABELS = {"o": "Approve once", "s": "Approve for this session", "a": "Always approve", "d": "Deny"}
POLL_SECONDS = 0.1
MAX_SHOWN = 600





def command_hash(command: str) -> str:
    return hashlib.sha256(normalize(command).encode()).hexdigest()


_SECRETISH = re.compile(
    r"(?i)(?P<k>(?:password|passwd|pwd|token|secret|api[_-]?key|access[_-]?key|auth)[\w-]*)(?P<sep>=|:\s*|\s+)"
    r"(?P<v>\"[^\"]*\"|'[^']*'|[^\s'\"]+)"
)
_URL_CREDENTIALS = re.compile(r"(?P<pre>://[^/\s:@]+:)[^/\s@]+@")
_AUTH_HEADER = re.compile(r"(?i)(authorization:\s*(?:bearer|basic|token)\s+)\S+")


def redact_command(command: str, secret_values: list[str] | None = None) -> str:
    """The command as people see it: secrets masked, very long commands shortened in the middle."""
    from gateway.logs import REDACTED, redact

    text = normalize(command)
    for value in secret_values or ():
        if value and len(value) >= 6:
            text = text.replace(value, REDACTED)
    text = _AUTH_HEADER.sub(lambda m: m.group(1) + REDACTED, text)
    text = _URL_CREDENTIALS.sub(lambda m: m.group("pre") + REDACTED + "@", text)
    text = _SECRETISH.sub(lambda m: m.group("k") + m.group("sep") + REDACTED, text)
    text = redact(text)
    if len(text) > MAX_SHOWN:
        head, tail = text[:400], text[-150:]
        text = f"{head} … [{len(text) - 550} characters not shown] … {tail}"
    return text


def _fenced(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def _who(source: Source | None) -> str:
    if source is None:
        return "nobody"
    return source.user_name or source.user_id


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
    future: concurrent.futures.Future[Decision] = field(default_factory=concurrent.futures.Future)
    created_at: float = field(default_factory=time.time)
    prompt_message_id: str | None = None
    stored: bool = False
    final_text: str | None = None  # the prompt's edited text once decided
    deadline: float = 0.0  # time.monotonic() when silence becomes "expired"

    @property
    def hash(self) -> str:
        return command_hash(self.command)


ApproveHook = Callable[[str, Verdict, Any], Decision]


class _TurnHook:
    """``extras["approve"]`` for one turn: call it to ask and wait; ``open``/``wait``/``cancel`` let the
    terminal tool show every prompt of a batch of tool calls at once."""

    def __init__(self, broker: ApprovalBroker, session_key: str, source: Source | None, turn_id: str | None) -> None:
        self.broker, self.session_key, self.source, self.turn_id = broker, session_key, source, turn_id

    def __call__(self, command: str, verdict: Verdict, ctx: Any) -> Decision:
        return self.broker.request(command, verdict, ctx, self.session_key, self.source, self.turn_id)

    def open(self, command: str, verdict: Verdict, ctx: Any) -> Request | Decision:
        return self.broker.open(command, verdict, ctx, self.session_key, self.source, self.turn_id)

    def wait(self, req: Request, ctx: Any) -> Decision:
        return self.broker.wait(req, ctx)

    def cancel(self, req: Request) -> None:
        self.broker.cancel(req)


class ApprovalBroker:
    def __init__(self, runner: GatewayRunner) -> None:
        self.runner = runner
        self.pending: dict[str, Request] = {}  # insertion order = oldest first
        self._grants: dict[str, set[str]] = {}  # session key -> command hashes approved for the session
        self._always: set[str] = set()
        # Recently settled requests, so a late press is answered at once (the row's update may still be queued).
        self._settled: OrderedDict[str, tuple[str, str | None]] = OrderedDict()
        self._tasks: set[asyncio.Task[Any]] = set()
        runner.button_handlers[BUTTON_PREFIX] = self.handle_button
        register_approval_commands(runner.commands)

    @property
    def cfg(self) -> ApprovalsConfig:
        return self.runner.cfg.approvals

    # ---- start: state from the database, stale prompts resolved ------------------------------------

    async def start(self) -> None:
        store = self.runner.store

        def load(conn: Connection) -> list[dict[str, Any]]:
            self._always = _always_hashes(conn)
            for row in conn.execute(select(approval_session_grants.c.session_key,
                                           approval_session_grants.c.command_hash)):
                self._grants.setdefault(row[0], set()).add(row[1])
            return [dict(r._mapping) for r in conn.execute(
                select(approvals).where(approvals.c.status == "pending").order_by(approvals.c.created_at))]

        stale = await store.run_read(load)
        if not stale:
            return
        now = time.time()
        ids = [r["id"] for r in stale]
        await store.run_write(_exec(
            update(approvals).where(approvals.c.id.in_(ids)).where(approvals.c.status == "pending")
            .values(status="denied", decided_via="restart", decided_at=now)
        ))
        for row in stale:
            log.info("approval_decided", approval_id=row["id"], outcome="denied", via="restart",
                     session_key=row["session_key"], command=row["command"])
        self._spawn(self._tell_restarted(stale))

    async def _tell_restarted(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            adapter = self.runner.adapters.get(row["platform"])
            if adapter is None:
                continue
            # start() runs before the adapters connect: wait (a while) until this one can send.
            for _ in range(600):
                if adapter.state == "connected" or self.runner.stopping:
                    break
                await asyncio.sleep(0.1)
            text = f"🚫 Denied — Herald restarted before anyone answered.\n{_fenced(row['command'])}"
            if row["prompt_message_id"]:
                await self._edit(adapter, row["chat_id"], row["prompt_message_id"], text)
            source = Source(row["platform"], row["chat_id"], row["requested_by"] or "", thread_id=row["thread_id"])
            await self.runner.notify(adapter, source,
                                     "⚠️ Herald restarted while this command was waiting for approval, so it was "
                                     f"not run (denied):\n{_fenced(row['command'])}")

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- thread side ------------------------------------------------------------------------------

    def hook_for(self, session_key: str, source: Source | None, turn_id: str | None = None) -> ApproveHook:
        """The ``extras["approve"]`` callable for one turn (cron turns also set ``extras["cron"] = True``).

        ``source`` is the chat the prompt goes to; a cron job without an origin chat may pass None (its
        dangerous commands then follow ``approvals.cron_mode``; there is nobody to show a prompt to).
        """

        return _TurnHook(self, session_key, source, turn_id)

    def request(self, command: str, verdict: Verdict, ctx: Any, session_key: str, source: Source | None,
                turn_id: str | None = None) -> Decision:
        """In the worker thread: ask, and block until answered, timed out or the turn is stopped."""
        opened = self.open(command, verdict, ctx, session_key, source, turn_id)
        return opened if isinstance(opened, Decision) else self.wait(opened, ctx)

    def open(self, command: str, verdict: Verdict, ctx: Any, session_key: str, source: Source | None,
             turn_id: str | None = None) -> Request | Decision:
        """In the worker thread: show the prompt without waiting for it (``wait`` does); a Decision when
        nobody can be asked at all."""
        loop = self.runner.loop
        extras = getattr(ctx, "extras", {}) or {}
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if on_loop:  # blocking here would freeze the loop that has to deliver the answer
            return Decision("denied", "Not run: approval was requested from the event loop, where nobody can wait.")
        if source is None:
            source = Source("cron", session_key, "", chat_type="channel")
            extras = {**extras, "cron": True}
        req = Request(
            id=secrets.token_hex(4), command=command, display=redact_command(command, self._secret_values()),
            reason=verdict.reason or "", level=verdict.level, session_key=session_key, source=source,
            turn_id=turn_id, cron=bool(extras.get("cron")), deadline=time.monotonic() + self.cfg.timeout_seconds,
        )
        if loop is None or loop.is_closed():
            return Decision("denied", "Not run: the gateway is shutting down, so nobody can approve it.")
        try:
            asyncio.run_coroutine_threadsafe(self._begin(req), loop)
        except RuntimeError:
            return Decision("denied", "Not run: the gateway is shutting down, so nobody can approve it.")
        return req

    def wait(self, req: Request, ctx: Any) -> Decision:
        """In the worker thread: block until ``req`` is answered, times out or the turn is stopped."""
        interrupt = getattr(ctx, "interrupt", None)
        deadline = req.deadline
        while True:
            # A person has up to timeout_seconds to answer: keep the turn's inactivity watchdog quiet.
            if hasattr(ctx, "heartbeat"):
                ctx.heartbeat("waiting for approval")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                return req.future.result(timeout=min(POLL_SECONDS, remaining))
            except TimeoutError:
                pass
            if interrupt is not None and interrupt.is_set():
                return self._finish_from_thread(req, self._interrupted(req), Decision(
                    "denied", "Not run: the turn was stopped before anyone approved it."))
        return self._finish_from_thread(req, self._expire(req), Decision(
            "expired", self._expired_message()))

    def cancel(self, req: Request) -> None:
        """In the worker thread: withdraw a prompt whose command will not run (its turn ended first)."""
        if not req.future.done():
            self._finish_from_thread(req, self._interrupted(req), Decision(
                "denied", "Not run: the turn was stopped before anyone approved it."))

    def _finish_from_thread(self, req: Request, coro: Any, fallback: Decision) -> Decision:
        """Have the loop settle ``req`` (unless a decision got there first) and return the outcome."""
        loop = self.runner.loop
        try:
            assert loop is not None
            asyncio.run_coroutine_threadsafe(coro, loop)
        except Exception:
            coro.close()
            return fallback
        try:
            return req.future.result(timeout=5)
        except Exception:
            return fallback

    def _secret_values(self) -> list[str]:
        names = getattr(self.runner, "_secret_env_names", None) or []
        return [v for v in (os.environ.get(n) for n in names) if v]

    def _expired_message(self) -> str:
        return (f"Not run: expired — nobody approved it within {_duration(self.cfg.timeout_seconds)}, so it was "
                "denied. Tell the user what you wanted to run and why.")

    # ---- loop side: opening a request -------------------------------------------------------------

    async def _begin(self, req: Request) -> None:
        try:
            if req.level != "hardline" and self.cfg.mode == "manual":
                # Re-read, so `herald approvals revoke` in another process takes effect at once (a dangerous
                # command is rare enough that one indexed read costs nothing).
                self._always = await self.runner.store.run_read(_always_hashes)
            auto = self._auto(req)
            if auto is not None:
                status, scope, message = auto
                self._settle(req, status, scope, None, "auto", message)
                await self._store_new(req, status, scope, "auto")
                log.info("approval_decided", approval_id=req.id, outcome=status, scope=scope, via="auto",
                         command=req.display, reason=req.reason, session_key=req.session_key)
                return
            self.pending[req.id] = req
            await self._store_new(req, "pending", None, None)
            log.info("approval_requested", approval_id=req.id, command=req.display, reason=req.reason,
                     session_key=req.session_key, requested_by=req.source.user_id)
            if req.future.done():
                return  # decided (or stopped) while the row was being written; nothing to show
            adapter = self.runner.adapters.get(req.source.platform)
            if adapter is None:
                await self._decide(req, "denied", None, None, "error",
                                   "Not run: the chat it came from is not connected, so nobody can approve it.")
                return
            buttons = [Button(f"{BUTTON_PREFIX}:{req.id}:{c}", LABELS[c]) for c in "osad"]
            out = OutboundMessage(self._prompt_text(req), buttons=buttons if adapter.capabilities.buttons else [],
                                  thread_id=req.source.thread_id)
            report = await self.runner.delivery.deliver(adapter, req.source.chat_id, out)
            if report.failed or not report.message_ids:
                await self._decide(req, "denied", None, None, "error",
                                   "Not run: the approval prompt could not be shown in the chat.")
                return
            req.prompt_message_id = report.message_ids[-1]
            await self.runner.store.run_write(_exec(
                update(approvals).where(approvals.c.id == req.id).values(prompt_message_id=req.prompt_message_id)
            ))
            if req.final_text is not None:  # answered before the prompt had its id: edit it now
                await self._edit(adapter, req.source.chat_id, req.prompt_message_id, req.final_text)
        except Exception as exc:
            log.exception("approval_failed", approval_id=req.id)
            if not req.future.done():
                await self._decide(req, "denied", None, None, "error",
                                   f"Not run: asking for approval failed ({type(exc).__name__}).")

    def _auto(self, req: Request) -> tuple[str, str | None, str] | None:
        """(status, scope, message) when nobody needs to be asked."""
        if req.level == "hardline":
            return "forbidden", None, Decision.forbidden(req.reason).message
        if self.cfg.mode == "off":
            return "approved", "off", "Ran without asking (approvals.mode is off)."
        if matches_allowlist(req.command, self.cfg.allow):
            return "approved", "allow", "Ran without asking (listed in approvals.allow)."
        if req.hash in self._always:
            return "approved", "always", "Ran without asking (always approved earlier)."
        if req.hash in self._grants.get(req.session_key, ()):
            return "approved", "session", "Ran without asking (approved for this session earlier)."
        if req.cron:
            if self.cfg.cron_mode == "allow":
                return "approved", "cron", "Ran without asking (approvals.cron_mode is allow)."
            return "denied", None, ("Not run: denied — cron jobs have nobody to ask and approvals.cron_mode is "
                                    "deny. Say in your answer that this step needs a person.")
        return None

    def _prompt_text(self, req: Request) -> str:
        waiting = [r for r in self.pending.values() if r.source.chat_id == req.source.chat_id
                   and r.source.platform == req.source.platform]
        hint = f"/approve {req.id}" if len(waiting) > 1 else "/approve"
        return (f"⚠️ Approval needed (id {req.id})\n"
                f"The agent wants to run:\n{_fenced(req.display)}\n"
                f"Why it asks: {req.reason}.\n"
                f"Answer with the buttons, or {hint} (add `session` or `always`), or /deny. "
                f"It is denied if nobody answers within {_duration(self.cfg.timeout_seconds)}.")

    async def _store_new(self, req: Request, status: str, scope: str | None, via: str | None) -> None:
        now = time.time()
        values = dict(
            id=req.id, session_key=req.session_key, platform=req.source.platform, chat_id=req.source.chat_id,
            thread_id=req.source.thread_id, requested_by=req.source.user_id, turn_id=req.turn_id,
            command=req.display, reason=req.reason, level=req.level, status=status, scope=scope,
            decided_via=via, created_at=req.created_at, decided_at=now if status != "pending" else None,
        )

        await self.runner.store.run_write(_exec(insert(approvals).values(**values)))
        req.stored = True

    # ---- loop side: deciding ------------------------------------------------------------------------

    def _settle(self, req: Request, status: str, scope: str | None, by: Source | None, via: str,
                message: str) -> bool:
        """Synchronous, on the loop: the one place a request's outcome is fixed. False if already fixed."""
        if req.future.done():
            return False
        self.pending.pop(req.id, None)
        if scope == "session" and via != "auto":
            self._grants.setdefault(req.session_key, set()).add(req.hash)
        if scope == "always" and via != "auto":
            self._always.add(req.hash)
        self._settled[req.id] = (status, by.user_id if by is not None else None)
        while len(self._settled) > 1000:
            self._settled.popitem(last=False)
        outcome = status if status in ("approved", "denied", "expired", "forbidden") else "denied"
        req.future.set_result(Decision(outcome, message))  # type: ignore[arg-type]
        return True

    async def _decide(self, req: Request, status: str, scope: str | None, by: Source | None, via: str,
                      message: str) -> bool:
        if not self._settle(req, status, scope, by, via, message):
            return False
        who = _who(by) if by is not None else None
        log.info("approval_decided", approval_id=req.id, outcome=status, scope=scope, via=via, decided_by=who,
                 command=req.display, session_key=req.session_key)
        store = self.runner.store
        now = time.time()
        values = dict(status=status, scope=scope, decided_by=by.user_id if by else None, decided_via=via,
                      decided_at=now)

        def op(conn: Connection) -> None:
            conn.execute(update(approvals).where(approvals.c.id == req.id).values(**values))
            if scope == "session":
                exists = conn.execute(select(approval_session_grants.c.id).where(
                    approval_session_grants.c.session_key == req.session_key,
                    approval_session_grants.c.command_hash == req.hash)).first()
                if exists is None:
                    conn.execute(insert(approval_session_grants).values(
                        session_key=req.session_key, command_hash=req.hash, granted_by=values["decided_by"],
                        created_at=now))
            if scope == "always":
                exists = conn.execute(select(approval_allowlist.c.id).where(
                    approval_allowlist.c.command_hash == req.hash)).first()
                if exists is None:
                    conn.execute(insert(approval_allowlist).values(
                        command_hash=req.hash, command=req.display, added_by=values["decided_by"],
                        approval_id=req.id, created_at=now))

        try:
            if not req.stored:
                # The row is still being inserted (decided within milliseconds): let that land first.
                for _ in range(100):
                    if req.stored:
                        break
                    await asyncio.sleep(0.01)
            await store.run_write(op)
        except Exception:
            log.exception("approval_store_failed", approval_id=req.id)
        req.final_text = self._decided_text(req, status, scope, who, via)
        adapter = self.runner.adapters.get(req.source.platform)
        if adapter is not None and req.prompt_message_id is not None:
            await self._edit(adapter, req.source.chat_id, req.prompt_message_id, req.final_text)
        if status == "approved" and scope in ("session", "always") and via != "auto":
            # The same command already waiting elsewhere (another call of the batch) is covered by this answer.
            for other in [r for r in self.pending.values() if r.hash == req.hash
                          and (scope == "always" or r.session_key == req.session_key)]:
                await self._decide(other, "approved", scope, by, via, message)
        return True

    def _decided_text(self, req: Request, status: str, scope: str | None, who: str | None, via: str) -> str:
        if status == "approved":
            what = {"once": "Approved once", "session": "Approved for this session",
                    "always": "Always approved"}.get(scope or "", "Approved")
            head = f"✅ {what} by {who}"
        elif status == "expired":
            head = f"⌛ Expired — denied (nobody answered within {_duration(self.cfg.timeout_seconds)})"
        elif via == "button" or via == "command":
            head = f"🚫 Denied by {who}"
        elif via == "stop":
            head = "🚫 Denied — the turn was stopped (/stop)"
        elif via == "new":
            head = "🚫 Denied — /new started a fresh conversation"
        elif via == "interrupted":
            head = "🚫 Denied — the turn ended before anyone answered"
        else:
            head = "🚫 Denied"
        return f"{head}\n{_fenced(req.display)}"

    async def _edit(self, adapter: PlatformAdapter, chat_id: str, message_id: str, text: str) -> None:
        from gateway.delivery import render

        if not adapter.capabilities.edits:
            return
        try:
            await adapter.edit(chat_id, message_id, render(text, adapter.capabilities), buttons=[])
        except Exception as exc:
            log.warning("approval_prompt_edit_failed", platform=adapter.name, chat_id=chat_id, error=str(exc))

    async def _expire(self, req: Request) -> None:
        await self._decide(req, "expired", None, None, "timeout", self._expired_message())

    async def _interrupted(self, req: Request) -> None:
        if self.runner.stopping:
            # Shutting down: the row stays pending and is resolved (and the user told) after the restart.
            self.pending.pop(req.id, None)
            if not req.future.done():
                req.future.set_result(Decision("denied", "Not run: Herald is restarting."))
            return
        await self._decide(req, "denied", None, None, "interrupted",
                           "Not run: the turn was stopped before anyone approved it.")

    def may_decide(self, req: Request, who: Source) -> bool:
        if who.platform != req.source.platform:
            return False
        if who.user_id == req.source.user_id:
            return True
        return who.user_id in self.cfg.approvers.get(who.platform, [])

    async def decide(self, approval_id: str, choice: str, who: Source, via: str) -> str:
        """A person's answer (button or command); returns the notice for them."""
        req = self.pending.get(approval_id)
        if req is None:
            return await self._gone(approval_id)
        if not self.may_decide(req, who):
            log.info("approval_refused", approval_id=approval_id, user_id=who.user_id, platform=who.platform,
                     choice=choice)
            return (f"You can't answer this approval: only {_who(req.source)} (who asked) or a configured "
                    "approver can. Nothing was changed.")
        scope = CHOICES[choice]
        if scope == "deny":
            message = (f"Not run: {_who(who)} denied this command. Do not run it another way; ask the user "
                       "what they want instead.")
            ok = await self._decide(req, "denied", None, who, via, message)
            done = "Denied."
        else:
            what = {"once": "once", "session": "for this session", "always": "always"}[scope]
            message = f"Approved {what} by {_who(who)}."
            ok = await self._decide(req, "approved", scope, who, via, message)
            done = f"Approved {what}."
        return done if ok else await self._gone(approval_id)

    async def _gone(self, approval_id: str) -> str:
        if approval_id in self._settled:
            status, by = self._settled[approval_id]
            return f"This approval was already answered: {status}{f' by {by}' if by else ''}."
        def get(conn: Connection) -> Any:
            return conn.execute(select(approvals.c.status, approvals.c.decided_by)
                                .where(approvals.c.id == approval_id)).first()

        row = await self.runner.store.run_read(get)
        if row is None or row.status == "pending":
            return "This approval is no longer active."
        by = f" by {row.decided_by}" if row.decided_by else ""
        return f"This approval was already answered: {row.status}{by}."

    async def handle_button(self, adapter: PlatformAdapter, press: ButtonPress) -> str | None:
        parts = press.button_id.split(":")
        if len(parts) != 3 or parts[2] not in CHOICES:
            return "This button is no longer active."
        return await self.decide(parts[1], parts[2], press.source, "button")

    async def deny_session(self, session_key: str, via: str) -> int:
        """/stop and /new: deny everything pending in this session."""
        reqs = [r for r in list(self.pending.values()) if r.session_key == session_key]
        why = "/stop" if via == "stop" else "/new"
        for req in reqs:
            await self._decide(req, "denied", None, None, via, f"Not run: denied — the user sent {why}.")
        if via == "new":
            self._grants.pop(session_key, None)
            await self.runner.store.run_write(_exec(
                approval_session_grants.delete().where(approval_session_grants.c.session_key == session_key)))
        return len(reqs)

    def pending_in_chat(self, platform: str, chat_id: str) -> list[Request]:
        return [r for r in self.pending.values() if r.source.platform == platform and r.source.chat_id == chat_id]


# ---- text fallback: /approve [session|always] [id], /deny [id] --------------------------------------


async def _answer_from_chat(ctx: CommandContext, deny: bool) -> str:
    broker: ApprovalBroker = ctx.runner.approvals  # type: ignore[attr-defined]
    source = ctx.message.source
    scope, ident = "once", None
    for part in ctx.args.split():
        if not deny and part.lower() in ("once", "session", "always"):
            scope = part.lower()
        else:
            ident = part.strip("`")
    waiting = broker.pending_in_chat(ctx.adapter.name, source.chat_id)
    if ident is None:
        if not waiting:
            return "Nothing is waiting for approval here."
        ident = waiting[0].id
    choice = "d" if deny else {"once": "o", "session": "s", "always": "a"}[scope]
    notice = await broker.decide(ident, choice, source, "command")
    left = [r.id for r in broker.pending_in_chat(ctx.adapter.name, source.chat_id)]
    if left:
        notice += f" Still waiting: {', '.join(left)} (/approve ID or /deny ID)."
    return notice


def register_approval_commands(registry: CommandRegistry) -> None:
    if registry.lookup("approve") is not None:
        return

    async def approve(ctx: CommandContext) -> str:
        return await _answer_from_chat(ctx, deny=False)

    async def deny(ctx: CommandContext) -> str:
        return await _answer_from_chat(ctx, deny=True)

    registry.add(Command("approve", "approve the waiting command (once, or for the session, or always)", approve,
                         args_hint="[session | always] [id]"))
    registry.add(Command("deny", "refuse the waiting command", deny, args_hint="[id]"))


def _always_hashes(conn: Connection) -> set[str]:
    return {row[0] for row in conn.execute(select(approval_allowlist.c.command_hash))}


def _exec(*stmts: Any) -> Callable[[Connection], None]:
    def op(conn: Connection) -> None:
        for stmt in stmts:
            conn.execute(stmt)

    return op


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:g} seconds"
    minutes = seconds / 60
    return f"{minutes:g} minute{'s' if minutes != 1 else ''}"
