"""The conversation's daily commands: /retry, /undo, /title, /sessions, /resume, /search.

/retry and /undo act on the last exchange (gateway/session/history.py): its rows stay stored, marked
hidden, and the model never sees them again. A retry is a message of its own — a new inbox row, stored in
the same transaction that hides the old exchange — so it is answered exactly once like any message, after
a restart too. Both refuse while the session is busy: the last exchange is then still being written.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from gateway.cluster.instance import Instance
from gateway.commands.registry import CommandContext, CommandSet
from gateway.platforms.base import Accepted, InboundMessage
from gateway.ports import Resubmit, SessionDenials, TurnControl
from gateway.session.history import History
from gateway.session.keys import person_id
from gateway.session.manager import SessionManager
from gateway.session.search import query_words, snippet
from gateway.storage.store import Store

RESUME_LIST = 10
TITLE_LIMIT = 100


@dataclass(frozen=True)
class ConversationDeps:
    turns: TurnControl
    lanes: Resubmit  # /retry's new message joins the lane like any other
    sessions: SessionManager
    store: Store
    history: History
    approvals: SessionDenials
    instance: Instance  # owns the new inbox row of a /retry


CONVERSATION_COMMANDS: CommandSet[ConversationDeps] = CommandSet()


async def current(deps: ConversationDeps, ctx: CommandContext) -> dict[str, Any] | None:
    return deps.sessions.peek(ctx.session_key) or await deps.store.sessions.active(ctx.session_key)


def busy(deps: ConversationDeps, ctx: CommandContext, what: str) -> str | None:
    if deps.turns.busy(ctx.session_key) or deps.turns.queued(ctx.session_key):
        return (f"⏳ I'm still answering here, so there is nothing to {what} yet: wait for the answer, or "
                f"{ctx.adapter.capabilities.command('stop')} first.")
    return None


@CONVERSATION_COMMANDS.command("retry", "ask your last message again, for a new answer")
async def retry(deps: ConversationDeps, ctx: CommandContext) -> str | None:
    refused = busy(deps, ctx, "retry")
    if refused:
        return refused
    session = await current(deps, ctx)
    exchange = await deps.history.last_exchange(session["id"]) if session else None
    if session is None or exchange is None:
        return "Nothing to retry: this conversation has no message of yours yet."
    now = time.time()
    # The message the model saw, as its text (attachments' paths included); no handle of the command's
    # (a slash command's interaction is answered by this command, the answer goes into the chat).
    msg = InboundMessage.from_dict({**ctx.message.to_dict(), "text": exchange.text, "command": None,
                                    "attachments": [], "pending": None, "reply_handle": None,
                                    "received_at": now})
    row = {"platform": ctx.adapter.name, "platform_message_id": f"{ctx.message.platform_message_id}:retry",
           "session_key": ctx.session_key, "payload": msg.to_dict(), "status": "pending", "created_at": now,
           "updated_at": now, "owner": deps.instance.id, "lease_until": deps.instance.lease()}
    inbox_id = await deps.history.retry(session["id"], exchange, row, ctx.message.platform_message_id)
    if inbox_id is None:
        return None  # this very /retry was handled already
    deps.lanes.submit(ctx.adapter, Accepted(inbox_id, msg, ctx.session_key), notify=False)
    return f"🔁 Asking again: {quote(exchange.text)}"


@CONVERSATION_COMMANDS.command("undo", "take back your last message and my answer")
async def undo(deps: ConversationDeps, ctx: CommandContext) -> str:
    refused = busy(deps, ctx, "undo")
    if refused:
        return refused
    session = await current(deps, ctx)
    exchange = await deps.history.last_exchange(session["id"]) if session else None
    if session is None or exchange is None:
        return "Nothing to undo: this conversation has no message of yours left."
    await deps.history.undo(session["id"], exchange)
    text = f"↩️ Undone: your message {quote(exchange.text)}"
    if exchange.answer:
        text += f" and my answer {quote(exchange.answer)}"
    elif exchange.rows > 1:
        text += " and what followed it"
    return text + ". I won't see them any more."


@CONVERSATION_COMMANDS.command("title", "show or set this conversation's title", args_hint="[text]")
async def title(deps: ConversationDeps, ctx: CommandContext) -> str:
    text = " ".join(ctx.args.split())
    if not text:
        session = await current(deps, ctx)
        name = (session or {}).get("title")
        set_it = ctx.adapter.capabilities.command("title", "TEXT")
        return f"Title: {plain(name)}. {set_it} changes it." if name else f"No title yet; {set_it} sets one."
    if len(text) > TITLE_LIMIT:
        text = text[:TITLE_LIMIT - 1].rstrip() + "…"
    session = await deps.sessions.get(ctx.session_key, ctx.adapter.name, source=ctx.message.source)
    await deps.history.set_title(session["id"], text)
    session["title"] = text
    return f"🏷 Title: {plain(text)}"


@CONVERSATION_COMMANDS.command("sessions", "your recent conversations in this chat")
async def sessions_(deps: ConversationDeps, ctx: CommandContext) -> str:
    session = await current(deps, ctx)
    found = await deps.history.sessions_of(ctx.session_key, session["id"] if session else None, RESUME_LIST)
    if not found:
        return "No conversations here yet."
    lines = ["Conversations here, newest first:"]
    for n, info in enumerate(found, 1):
        mark = " ← current" if session and info.id == session["id"] else ""
        lines.append(f"{n}. {plain(info.title) if info.title else 'untitled'} — {when(info.updated_at)}, "
                     f"{info.messages} message{'s' if info.messages != 1 else ''}{mark}")
    lines.append(f"{ctx.adapter.capabilities.command('resume', 'N')} goes back to one.")
    return "\n".join(lines)


@CONVERSATION_COMMANDS.command("resume", "go back to an earlier conversation (see /sessions)", args_hint="N")
async def resume(deps: ConversationDeps, ctx: CommandContext) -> str:
    listing = ctx.adapter.capabilities.command("sessions")
    try:
        n = int(ctx.args.strip())
    except ValueError:
        n = 0
    session = await current(deps, ctx)
    found = await deps.history.sessions_of(ctx.session_key, session["id"] if session else None, RESUME_LIST)
    if not 1 <= n <= len(found):
        return f"Which one? {listing} numbers them; then {ctx.adapter.capabilities.command('resume', 'N')}."
    target = found[n - 1]
    if session is not None and target.id == session["id"]:
        return "That is the current conversation already."
    stopped = deps.turns.stop_turn(ctx.session_key)
    await deps.approvals.deny_session(ctx.session_key, "new")  # a conversation of its own: grants go too
    row = await deps.sessions.resume(ctx.session_key, target.id)
    if row is None:
        return f"That conversation is not there any more; {listing} shows what is."
    text = (f"▶️ Back to {plain(target.title) if target.title else 'an untitled conversation'} "
            f"({target.messages} message{'s' if target.messages != 1 else ''}).")
    if stopped:
        text += " The turn that was running was stopped."
    return text


@CONVERSATION_COMMANDS.command("search", "search your past messages", args_hint="TEXT")
async def search(deps: ConversationDeps, ctx: CommandContext) -> str:
    words = query_words(ctx.args)
    if not words:
        return f"Search for what? {ctx.adapter.capabilities.command('search', 'TEXT')}"
    hits = await deps.history.search(ctx.adapter.name, person_id(ctx.message.source), words)
    if not hits:
        return f"🔎 Nothing of yours mentions {quote(' '.join(words))}."
    lines = [f"🔎 {len(hits)} message{'s' if len(hits) != 1 else ''} with {quote(' '.join(words))}, newest first:"]
    for hit in hits:
        who = "you" if hit.role == "user" else "me"
        name = plain(hit.session_title) if hit.session_title else "untitled"
        lines.append(f"• {name}, {when(hit.created_at)}, {who}: {snippet(hit.text, words)}")
    return "\n".join(lines)


def plain(text: str) -> str:
    """Text of a person's (a title) shown inside a reply: on one line, its markdown neutralised."""
    return snippet(text, [], width=TITLE_LIMIT + 20)


def quote(text: str, width: int = 80) -> str:
    return f"“{snippet(text, [], width=width)}”"


def when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))
