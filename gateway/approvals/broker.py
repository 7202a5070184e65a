"""The loop side of approvals: a request is stored, its prompt sent with four buttons into the chat the turn
came from, and the first valid answer settles it.

Every resolution runs on the loop and the first one wins: a press racing the timeout is decided by whichever
reaches the loop first; the loser is told the prompt was already answered. Only the requester (when they
may talk to the agent on that platform), ``approvals.approvers`` and admins may decide, and only from the
chat the prompt was sent to. "Approve for this session" is kept per session key (memory +
``approval_session_grants``); "Always approve" goes to ``approval_allowlist``, never to config.yaml. Every
request and decision is a row in ``approvals`` and a structured log event.

A scheduled request (a cron job's script, ``Request.scheduled``) is always put to a person: it will run
unattended, again and again, so no earlier grant, ``approvals.allow`` or ``approvals.mode: off`` answers
it, its prompt has only Approve and Deny, and an answer to it grants nothing else (nor is it granted by
another request's "session"/"always"). Hardline commands are still refused without a prompt.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import unquote

import structlog

from gateway.approvals.hook import Request, TurnHook
from gateway.approvals.store import ApprovalStore
from gateway.approvals.text import decided_head, duration, expired_message, fenced, outcome_elsewhere, who
from gateway.cluster.instance import Instance
from gateway.config import ApprovalsConfig
from gateway.inbound.access import AccessControl
from gateway.kernel.chunking import chunk_text
from gateway.kernel.metrics import NULL_METRICS, Metrics
from gateway.kernel.shown import exact_hash, shown_command, shown_reason
from gateway.outbound.delivery import Delivery
from gateway.platforms import PLATFORMS
from gateway.platforms.base import Button, ButtonPress, Capabilities, OutboundMessage, PlatformAdapter, Source
from gateway.ports import Adapters, Lifecycle, Notifier
from tools.dangerous import Decision, matches_allowlist

log = structlog.get_logger("herald.approvals")

BUTTON_PREFIX = "ap"
CHOICES = {"o": "once", "s": "session", "a": "always", "d": "deny"}
LABELS = {"o": "Approve once", "s": "Approve for this session", "a": "Always approve", "d": "Deny"}
STYLES = {"o": "primary", "s": "default", "a": "default", "d": "danger"}
SCHEDULED_LABELS = {"o": "Approve this script", "d": "Deny"}
MESSAGE_LABELS = {"o": "Send it", "d": "Don't send"}
OPERATOR = "operator"  # decided_by of an answer given on the dashboard (the web token's holder)
# A prompt is never cut: one longer than a message is sent in several (the buttons on the last). Past this many
# messages nobody reads it through, so the command is refused instead of shown.
MAX_PROMPT_MESSAGES = 5


class Elsewhere(Protocol):
    """The other instances of the database, as the broker reaches them (remote.py)."""

    async def forward(self, approval_id: str, choice: str, by: Source | None, via: str,
                      trusted: bool) -> str | None: ...

    async def waiting_in_chat(self, platform: str, chat_id: str) -> list[Any]: ...


class ApprovalBroker:
    def __init__(self, cfg: ApprovalsConfig, store: ApprovalStore, delivery: Delivery, notifier: Notifier,
                 adapters: Adapters, access: AccessControl, life: Lifecycle, instance: Instance,
                 secret_values: Callable[[], list[str]], *, metrics: Metrics | None = None,
                 remote: Callable[[ApprovalBroker], Elsewhere] | None = None) -> None:
        """``remote``: with several instances on one database, makes what answers requests waiting in the
        others (remote.py's ``RemoteApprovals``, which answers theirs through this broker)."""
        self.cfg = cfg
        self.metrics = metrics or NULL_METRICS
        self.store = store
        self.delivery = delivery
        self.notifier = notifier
        self.adapters = adapters
        self.access = access
        self.life = life
        self.instance = instance
        self._secret_values = secret_values
        self.timeout_seconds = cfg.timeout_seconds
        self.pending: dict[str, Request] = {}  # insertion order = oldest first
        self._grants: dict[str, set[str]] = {}  # session key -> command hashes approved for the session
        self._always: set[str] = set()
        # Recently settled requests, so a late press is answered at once (the row's update may still be queued).
        self._settled: OrderedDict[str, tuple[str, str | None]] = OrderedDict()
        self.remote = remote(self) if remote is not None else None

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self.life.loop

    def display(self, command: str) -> str:
        return shown_command(command, self._secret_values())

    def reason(self, reason: str) -> str:
        return shown_reason(reason, self._secret_values())

    # ---- start: state from the database, stale prompts resolved ------------------------------------

    async def start(self) -> None:
        self._always, self._grants, pending = await self.store.load()
        await self.instance.refresh()  # after the rows: their owners' heartbeats are all in this read
        # Only requests whose instance is gone: another daemon on the same database may be waiting on its own.
        stale = [r for r in pending if self.instance.gone(r.get("owner"))]
        if not stale:
            return
        await self.store.deny_stale([r["id"] for r in stale])
        for row in stale:
            self.metrics.approval("denied")
            log.info("approval_decided", approval_id=row["id"], outcome="denied", via="restart",
                     session_key=row["session_key"], command=row["command"])
        self.life.spawn(self.tell_restarted(stale), name="approvals:restarted")

    async def tell_restarted(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            adapter = self.adapters.get(row["platform"])
            if adapter is None:
                continue
            # This runs before the adapters connect: wait (a while) until this one can send.
            for _ in range(600):
                if adapter.state == "connected" or self.life.stopping:
                    break
                await asyncio.sleep(0.1)
            if row["prompt_message_id"]:
                head = decided_head("denied", None, None, "restart", self.timeout_seconds)
                text = self._fitted(adapter, head, row["command"], row["id"])
                await self._edit(adapter, row["chat_id"], row["prompt_message_id"], text, row["thread_id"])
            source = Source(row["platform"], row["chat_id"], row["requested_by"] or "", thread_id=row["thread_id"])
            what = ("a message to another chat was waiting for approval, so it was not sent"
                    if row.get("level") == "message" else "this command was waiting for approval, so it was not run")
            await self.notifier.notify(source, f"⚠️ Herald restarted while {what} (denied):\n{fenced(row['command'])}")

    # ---- the thread side's entry points ---------------------------------------------------------------

    def hook_for(self, session_key: str, source: Source | None, turn_id: str | None = None) -> TurnHook:
        """The ``extras["approve"]`` callable for one turn (cron turns also set ``extras["cron"] = True``).

        ``source`` is the chat the prompt goes to; a cron job without an origin chat may pass None (its
        dangerous commands then follow ``approvals.cron_mode``; there is nobody to show a prompt to).
        """
        return TurnHook(self, session_key, source, turn_id)

    async def begin(self, req: Request) -> None:
        try:
            if req.level != "hardline" and self.cfg.mode == "manual" and req.preset is None:
                # Re-read, so `herald approvals revoke` in another process takes effect at once (a dangerous
                # command is rare enough that one indexed read costs nothing).
                self._always = await self.store.always()
            auto = self._auto(req)
            if auto is not None:
                status, scope, message = auto
                self._settle(req, status, scope, None, "auto", message)
                await self._store_new(req, status, scope, "auto")
                log.info("approval_decided", approval_id=req.id, outcome=status, scope=scope, via="auto",
                         command=req.display, reason=req.reason, session_key=req.session_key)
                return
            self.pending[req.id] = req
            on_dashboard = self._ask_elsewhere(req)
            await self._store_new(req, "pending", None, None)
            log.info("approval_requested", approval_id=req.id, command=req.display, reason=req.reason,
                     session_key=req.session_key, requested_by=req.source.user_id, asked_in=req.elsewhere)
            if req.future.done():
                return  # decided (or stopped) while the row was being written; nothing to show
            if req.elsewhere is not None:  # the turn's own chat cannot answer: it is told where the prompt is
                await self.notifier.notify(req.source, f"⏳ Waiting for approval {req.elsewhere} (approval {req.id}).")
            if on_dashboard:
                return  # listed there (pending), answered with its buttons
            adapter = self.adapters.get(req.chat.platform)
            if adapter is None:
                await self._decide(req, "denied", None, None, "error",
                                   "Not run: the chat it is asked in is not connected, so nobody can approve it.")
                return
            labels = MESSAGE_LABELS if req.message_to else SCHEDULED_LABELS if req.scheduled else LABELS
            buttons = [Button(f"{BUTTON_PREFIX}:{req.id}:{c}", labels[c], STYLES[c]) for c in labels]  # type: ignore[arg-type]
            text = self._prompt_text(req, adapter)
            if text is None:
                await self._too_long(req)
                return
            out = OutboundMessage(text, buttons=buttons if adapter.capabilities.buttons else [],
                                  thread_id=req.chat.thread_id)
            report = await self.delivery.deliver(adapter, req.chat.chat_id, out)
            if report.failed or not report.message_ids:
                await self._decide(req, "denied", None, None, "error",
                                   "Not run: the approval prompt could not be shown in the chat.")
                return
            req.prompt_message_id = report.message_ids[-1]
            # Answered before the prompt had its id: nobody could edit it, so it is edited here. (One answered
            # from here on edits it itself.)
            unedited = req.final_text is not None
            await self.store.set_prompt(req.id, req.prompt_message_id)
            if unedited and req.final_text is not None:
                await self._edit(adapter, req.chat.chat_id, req.prompt_message_id, req.final_text,
                                 req.chat.thread_id)
        except Exception as exc:
            log.exception("approval_failed", approval_id=req.id)
            if not req.future.done():
                await self._decide(req, "denied", None, None, "error",
                                   f"Not run: asking for approval failed ({type(exc).__name__}).")

    def _ask_elsewhere(self, req: Request) -> bool:
        """Where the prompt goes when the turn's platform names a place (its clients cannot answer one): another
        chat (``req.asked_in``), or the dashboard alone (True). ``req.elsewhere`` says where, in words."""
        adapter = self.adapters.get(req.source.platform)
        target = adapter.approvals_to if adapter is not None else None
        if not target:
            return False
        if target == "dashboard":
            req.elsewhere = "on the dashboard"
            return True
        platform, _, rest = target.partition(":")
        chat_id, _, thread_id = rest.partition(":")
        req.asked_in = Source(platform, unquote(chat_id), "", thread_id=unquote(thread_id) or None)
        declared = PLATFORMS.get(platform)
        req.elsewhere = f"in {declared.label if declared is not None else platform}"
        return False

    def _auto(self, req: Request) -> tuple[str, str | None, str] | None:
        """(status, scope, message) when nobody needs to be asked."""
        if req.preset is not None:
            return req.preset
        if req.level == "hardline":
            return "forbidden", None, Decision.forbidden(req.reason).message
        if req.message_to is not None:
            return None  # a message to another chat: always a person (tools.send_message.allow is checked before)
        if req.scheduled:
            # It will run unattended, again and again: always a person, and a cron run has nobody to ask.
            if req.cron:
                return "denied", None, ("Not scheduled: denied — a job's script needs a person's approval and "
                                        "nobody can be asked here.")
            return None
        if self.cfg.mode == "off":
            return "approved", "off", "Ran without asking (approvals.mode is off)."
        # approvals.allow names commands, not files: it never covers one that runs a file the agent can rewrite.
        covered = (req.verdict.covered_by(self.cfg.allow) if req.verdict is not None
                   else req.kind == "command" and matches_allowlist(req.command, self.cfg.allow))
        if covered and not (req.deps is not None and req.deps.changeable):
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

    def _messages(self, adapter: PlatformAdapter, text: str) -> int:
        """How many messages delivery will send ``text`` in."""
        return len(chunk_text(adapter.render(text), adapter.capabilities.max_message_length, adapter.measure))

    def _prompt_text(self, req: Request, adapter: PlatformAdapter) -> str | None:
        """The whole prompt (the command never cut), or None when it would take more than MAX_PROMPT_MESSAGES."""
        several = len(self.pending_in_chat(req.chat.platform, req.chat.chat_id)) > 1
        text = self._compose(req, adapter.capabilities, several)
        count = self._messages(adapter, text)
        if count > 1 and not several:
            # Split over messages: the last one (with the buttons) names the id, so /approve ID works from there.
            text = self._compose(req, adapter.capabilities, True)
            count = self._messages(adapter, text)
        return text if count <= MAX_PROMPT_MESSAGES else None

    async def _too_long(self, req: Request) -> None:
        chars = len(req.display)
        if req.message_to is not None:
            await self._decide(req, "denied", None, None, "too_long", (
                f"Not sent: the message is {chars} characters long, too long to show in the chat for approval. "
                "Send a shorter one."))
            await self.notifier.notify(req.source, f"⚠️ The agent wanted to send a message to {req.message_to} "
                                                   f"that is too long to show here ({chars} characters), so it "
                                                   "was not sent.")
            return
        await self._decide(req, "denied", None, None, "too_long", (
            f"Not run: the command is {chars} characters long, too long to show in the chat for approval (a person "
            "must be able to read all of what runs). Split the work into shorter commands."))
        await self.notifier.notify(req.source, f"⚠️ The agent wanted to run a command needing approval that is too long "
                                               f"to show here ({chars} characters), so it was not run.")

    def _fitted(self, adapter: PlatformAdapter, head: str, display: str, approval_id: str) -> str:
        """A decided prompt's text for the edit of its last message: with the command when that fits in one."""
        text = f"{head}\n{fenced(display)}"
        if self._messages(adapter, text) <= 1:
            return text
        return f"{head} (approval {approval_id}: the command is in the message above)"

    def _compose(self, req: Request, caps: Capabilities, name_id: bool) -> str:
        hint = caps.command("approve", req.id if name_id else "")
        deny = caps.command("deny")
        if req.message_to is not None:
            return (f"⚠️ Approval needed (id {req.id})\n"
                    f"The agent wants to send this message to {req.message_to}:\n{fenced(req.display)}\n"
                    f"Answer with the buttons, or {hint}, or {deny}. "
                    f"It is not sent if nobody answers within {duration(self.timeout_seconds)}.")
        if req.scheduled:
            return (f"⚠️ Approval needed (id {req.id})\n"
                    f"The agent wants to schedule this script:\n{fenced(req.display)}\n"
                    f"Why it asks: {req.reason}.\n"
                    f"Answer with the buttons, or {hint}, or {deny}. Approving covers this script in this job only "
                    "(a changed script is asked again). "
                    f"It is denied if nobody answers within {duration(self.timeout_seconds)}.")
        if req.kind == "mcp":
            return (f"⚠️ Approval needed (id {req.id})\n"
                    f"The agent wants to call a tool of an MCP server:\n{fenced(req.display)}\n"
                    f"Why it asks: {req.reason}.\n"
                    f"Answer with the buttons, or {hint} (add `session` or `always`: they cover this tool with these "
                    f"very arguments), or {deny}. "
                    f"It is denied if nobody answers within {duration(self.timeout_seconds)}.")
        files = ""
        if req.deps is not None and req.deps.files:
            files = (f"Approving for the session or always covers it only while these stay unchanged: "
                     f"{req.deps.names()}.\n")
        return (f"⚠️ Approval needed (id {req.id})\n"
                f"The agent wants to run:\n{fenced(req.display)}\n"
                f"Why it asks: {req.reason}.\n{files}"
                f"Answer with the buttons, or {hint} (add `session` or `always`), or {deny}. "
                f"It is denied if nobody answers within {duration(self.timeout_seconds)}.")

    async def _store_new(self, req: Request, status: str, scope: str | None, via: str | None) -> None:
        await self.store.insert(dict(
            id=req.id, session_key=req.session_key, platform=req.chat.platform, chat_id=req.chat.chat_id,
            # Asked in another platform's chat: the requester is named with their own platform (api:NAME).
            thread_id=req.chat.thread_id, requested_by=req.source.user_id if req.asked_in is None
            else f"{req.source.platform}:{req.source.user_id}", turn_id=req.turn_id,
            command=req.display, command_sha256=exact_hash(req.command), reason=req.reason, level=req.level,
            status=status, scope=scope, decided_via=via, created_at=req.created_at,
            decided_at=time.time() if status != "pending" else None, owner=self.instance.id,
        ))
        req.stored = True

    # ---- deciding -------------------------------------------------------------------------------------

    def _settle(self, req: Request, status: str, scope: str | None, by: Source | None, via: str,
                message: str) -> bool:
        """Synchronous, on the loop: the one place a request's outcome is fixed. False if already fixed."""
        if req.future.done():
            return False
        self.pending.pop(req.id, None)
        if by is not None and status == "approved":
            req.decided_by = f"{by.platform}:{by.user_id}"
        if scope == "session" and via != "auto":
            self._grants.setdefault(req.session_key, set()).add(req.hash)
        if scope == "always" and via != "auto":
            self._always.add(req.hash)
        self._settled[req.id] = (status, by.user_id if by is not None else None)
        while len(self._settled) > 1000:
            self._settled.popitem(last=False)
        outcome = status if status in ("approved", "denied", "expired", "forbidden") else "denied"
        req.future.set_result(Decision(outcome, message))  # type: ignore[arg-type]
        self.metrics.approval(status)
        return True

    async def _decide(self, req: Request, status: str, scope: str | None, by: Source | None, via: str,
                      message: str) -> bool:
        if not self._settle(req, status, scope, by, via, message):
            return False
        by_name = who(by) if by is not None else None
        log.info("approval_decided", approval_id=req.id, outcome=status, scope=scope, via=via, decided_by=by_name,
                 command=req.display, session_key=req.session_key)
        values = dict(status=status, scope=scope, decided_by=by.user_id if by else None, decided_via=via,
                      decided_at=time.time())
        try:
            if not req.stored:
                # The row is still being inserted (decided within milliseconds): let that land first.
                for _ in range(100):
                    if req.stored:
                        break
                    await asyncio.sleep(0.01)
            await self.store.decide(req.id, values, req.session_key, req.hash, req.display)
        except Exception:
            log.exception("approval_store_failed", approval_id=req.id)
        # A scheduled script's approval reads "Approved by …": "once" would suggest it runs once.
        head = decided_head(status, None if req.scheduled or req.message_to else scope, by_name, via,
                            self.timeout_seconds)
        adapter = self.adapters.get(req.chat.platform)
        req.final_text = (self._fitted(adapter, head, req.display, req.id) if adapter is not None
                          else f"{head}\n{fenced(req.display)}")
        if adapter is not None and req.prompt_message_id is not None:
            await self._edit(adapter, req.chat.chat_id, req.prompt_message_id, req.final_text, req.chat.thread_id)
        told = outcome_elsewhere(req, status, by_name, via, self.timeout_seconds)
        if told is not None:
            await self.notifier.notify(req.source, told)
        if status == "approved" and scope in ("session", "always") and via != "auto":
            # The same command already waiting elsewhere (another call of the batch) is covered by this answer.
            for other in [r for r in self.pending.values() if r.hash == req.hash and not r.scheduled
                          and (scope == "always" or r.session_key == req.session_key)]:
                await self._decide(other, "approved", scope, by, via, message)
        return True

    async def _edit(self, adapter: PlatformAdapter, chat_id: str, message_id: str, text: str,
                    thread_id: str | None) -> None:
        if not adapter.capabilities.edits:
            return
        try:
            await adapter.edit(chat_id, message_id, adapter.render(text), buttons=[], thread_id=thread_id)
        except Exception as exc:
            log.warning("approval_prompt_edit_failed", platform=adapter.name, chat_id=chat_id, error=str(exc))

    async def expire(self, req: Request) -> None:
        await self._decide(req, "expired", None, None, "timeout", expired_message(self.timeout_seconds))

    async def interrupted(self, req: Request) -> None:
        if self.life.stopping:
            # Shutting down: the row stays pending and is resolved (and the user told) after the restart.
            self.pending.pop(req.id, None)
            if not req.future.done():
                req.future.set_result(Decision("denied", "Not run: Herald is restarting."))
            return
        await self._decide(req, "denied", None, None, "interrupted",
                           "Not run: the turn was stopped before anyone approved it.")

    def may_decide(self, req: Request, by: Source, trusted: bool = False) -> bool:
        """The requester (if they may talk here), approvers and admins — and only from the prompt's chat."""
        if by.platform != req.chat.platform or by.chat_id != req.chat.chat_id:
            return False
        if trusted or self.access.admin(by):
            return True
        if by.user_id in self.cfg.approvers.get(by.platform, []):
            return True
        if req.asked_in is not None:  # a chat the operator named for these prompts: whoever may talk there
            return self.access.known(by)
        # In an open group anyone may talk, but only someone on an allowlist (or paired) answers for a shell.
        return by.user_id == req.source.user_id and self.access.known(by)

    async def decide(self, approval_id: str, choice: str, by: Source, via: str, trusted: bool = False, *,
                     forward: bool = True) -> str:
        """A person's answer (button or command); returns the notice for them. A request waiting in another
        instance of the database is answered there (``forward``; remote.py)."""
        req = self.pending.get(approval_id)
        if req is None:
            if forward and self.remote is not None:
                notice = await self.remote.forward(approval_id, choice, by, via, trusted)
                if notice is not None:
                    return notice
            return await self._gone(approval_id)
        if not self.may_decide(req, by, trusted):
            log.info("approval_refused", approval_id=approval_id, user_id=by.user_id, platform=by.platform,
                     chat_id=by.chat_id, choice=choice)
            return ("You can't answer this approval: only the person who asked (if they may use this bot) or a "
                    "configured approver can, in the chat where it was asked. Nothing was changed.")
        scope = CHOICES[choice]
        if req.message_to is not None and scope != "deny":
            ok = await self._decide(req, "approved", "once", by, via, f"Approved by {who(by)}.")
            return "Approved: it will be sent." if ok else await self._gone(approval_id)
        if req.scheduled and scope != "deny":
            # A scheduled script is approved for itself only (see the module's docstring), whatever was typed.
            ok = await self._decide(req, "approved", "once", by, via, f"Approved by {who(by)}.")
            done = "Approved." if scope == "once" else ("Approved this script only (a scheduled script is never "
                                                        "approved for the session or always).")
            return done if ok else await self._gone(approval_id)
        if scope == "deny":
            message = (f"Not run: {who(by)} denied this command. Do not run it another way; ask the user "
                       "what they want instead.")
            if req.message_to is not None:
                message = f"Not sent: {who(by)} denied it. Do not send it another way."
            ok = await self._decide(req, "denied", None, by, via, message)
            done = "Denied."
        else:
            what = {"once": "once", "session": "for this session", "always": "always"}[scope]
            ok = await self._decide(req, "approved", scope, by, via, f"Approved {what} by {who(by)}.")
            done = f"Approved {what}."
        return done if ok else await self._gone(approval_id)

    async def decide_as_operator(self, approval_id: str, choice: str, *, forward: bool = True) -> str:
        """The operator's answer from the dashboard: the same path as a press in the chat (the prompt there is
        edited the same way), decided by ``OPERATOR`` via ``dashboard`` in the audit trail."""
        req = self.pending.get(approval_id)
        if req is None:
            if forward and self.remote is not None:
                notice = await self.remote.forward(approval_id, choice, None, "dashboard", True)
                if notice is not None:
                    return notice
            return await self._gone(approval_id)
        chat = req.chat
        by = Source(chat.platform, chat.chat_id, OPERATOR, chat.chat_type, thread_id=chat.thread_id,
                    user_name="the operator (dashboard)", scope=chat.scope)
        return await self.decide(approval_id, choice, by, "dashboard", trusted=True)

    async def _gone(self, approval_id: str) -> str:
        if approval_id in self._settled:
            status, by = self._settled[approval_id]
            return f"This approval was already answered: {status}{f' by {by}' if by else ''}."
        row = await self.store.status(approval_id)
        if row is None or row[0] == "pending":
            return "This approval is no longer active."
        return f"This approval was already answered: {row[0]}{f' by {row[1]}' if row[1] else ''}."

    async def handle_button(self, adapter: PlatformAdapter, press: ButtonPress) -> str | None:
        parts = press.button_id.split(":")
        if len(parts) != 3 or parts[2] not in CHOICES:
            return "This button is no longer active."
        return await self.decide(parts[1], parts[2], press.source, "button", adapter.trusted)

    async def deny_session(self, session_key: str, via: str) -> int:
        """/stop and /new: deny everything pending in this session."""
        reqs = [r for r in list(self.pending.values()) if r.session_key == session_key]
        why = "/stop" if via == "stop" else "/new"
        for req in reqs:
            await self._decide(req, "denied", None, None, via, f"Not run: denied — the user sent {why}.")
        if via == "new":
            self._grants.pop(session_key, None)
            await self.store.drop_grants(session_key)
        return len(reqs)

    async def waiting_in_chat(self, platform: str, chat_id: str) -> list[Any]:
        """What waits for an answer in this chat, here and (several instances) in the others, oldest first."""
        here: list[Any] = self.pending_in_chat(platform, chat_id)
        if self.remote is None:
            return here
        return here + await self.remote.waiting_in_chat(platform, chat_id)

    def asking(self, session_key: str) -> bool:
        """A person is being asked for this session's turn (an approval prompt is up)."""
        return any(r.session_key == session_key for r in self.pending.values())

    def pending_in_chat(self, platform: str, chat_id: str) -> list[Request]:
        return [r for r in self.pending.values() if r.chat.platform == platform and r.chat.chat_id == chat_id]

