"""The built-in chat commands: /help, /new, /stop, /status, /queue, /steer."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway.commands.registry import CommandContext, CommandSet
from gateway.ports import SessionDenials, TurnControl
from gateway.session.manager import SessionManager
from gateway.storage.store import Store


@dataclass(frozen=True)
class BuiltinDeps:
    turns: TurnControl
    sessions: SessionManager
    store: Store
    approvals: SessionDenials
    help_text: Callable[[str, str], str]  # (platform, command prefix) -> the commands there (CommandRegistry)
    model_name: str | None  # model.name: what /status names for a session that chose none (/model)


BUILTIN_COMMANDS: CommandSet[BuiltinDeps] = CommandSet()


@BUILTIN_COMMANDS.command("help", "list the commands", aliases=("commands",))
async def help_(deps: BuiltinDeps, ctx: CommandContext) -> str:
    return deps.help_text(ctx.adapter.name, ctx.adapter.capabilities.command_prefix)


@BUILTIN_COMMANDS.command("new", "start a fresh conversation", aliases=("reset",))
async def new(deps: BuiltinDeps, ctx: CommandContext) -> str:
    stopped = deps.turns.stop_turn(ctx.session_key)
    await deps.approvals.deny_session(ctx.session_key, "new")
    await deps.sessions.reset(ctx.session_key, ctx.adapter.name, reason="new", source=ctx.message.source)
    waiting = len(deps.turns.queued(ctx.session_key))
    text = "🆕 Started a fresh conversation."
    if stopped:
        text += " The turn that was running was stopped."
    if waiting:
        text += f" {waiting} queued message(s) will be answered in the new conversation."
    return text


@BUILTIN_COMMANDS.command("stop", "stop the running turn", aliases=("cancel",))
async def stop(deps: BuiltinDeps, ctx: CommandContext) -> str:
    stopped = deps.turns.stop_turn(ctx.session_key)
    await deps.approvals.deny_session(ctx.session_key, "stop")  # its waiting commands: denied
    if not stopped:
        return "Nothing is running."
    waiting = len(deps.turns.queued(ctx.session_key))
    text = "⏹ Stopped."
    if waiting:
        text += (f" {waiting} queued message(s) are still waiting; "
                 f"{ctx.adapter.capabilities.command('queue', 'clear')} drops them.")
    return text


@BUILTIN_COMMANDS.command("status", "what this session is doing")
async def status(deps: BuiltinDeps, ctx: CommandContext) -> str:
    busy = deps.turns.busy(ctx.session_key)
    session = deps.sessions.peek(ctx.session_key) or await deps.store.sessions.active(ctx.session_key)
    lines = [f"Busy for {busy[0]:.0f}s (last step: {busy[1]})." if busy else "Idle.",
             f"Queued: {len(deps.turns.queued(ctx.session_key))}."]
    if session:
        count = await deps.store.messages.count(session["id"])
        lines.append(f"Session {session['id'][:8]}: {count} messages since "
                     f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(session['created_at']))}.")
    else:
        lines.append("No conversation yet.")
    lines.append(f"Model: {(session or {}).get('model') or deps.model_name or 'none configured'}.")  # /model
    return "\n".join(lines)


@BUILTIN_COMMANDS.command("queue", "show waiting messages, add one, or clear them", args_hint="[text | clear]")
async def queue(deps: BuiltinDeps, ctx: CommandContext) -> str | None:
    if ctx.args.lower() == "clear":
        dropped = await deps.turns.clear_queue(ctx.session_key)
        return f"Dropped {dropped} queued message(s)." if dropped else "The queue is empty."
    if ctx.args:
        # Queue a follow-up explicitly, even when busy_mode is interrupt.
        follow_up = type(ctx.message).from_dict({**ctx.message.to_dict(), "text": ctx.args, "command": None})
        waiting = await deps.turns.enqueue(ctx.adapter, follow_up, ctx.session_key)
        return None if waiting is None else f"⏳ Queued ({waiting} waiting)."
    waiting_texts = deps.turns.queued(ctx.session_key)
    if not waiting_texts:
        return "The queue is empty."
    lines = [f"{len(waiting_texts)} waiting:"]
    for i, text in enumerate(waiting_texts, 1):
        text = text.replace("\n", " ")
        lines.append(f"{i}. {text[:80]}{'…' if len(text) > 80 else ''}")
    return "\n".join(lines)


@BUILTIN_COMMANDS.command("steer", "add something to what the agent is working on, without stopping it",
                          args_hint="text")
async def steer(deps: BuiltinDeps, ctx: CommandContext) -> str | None:
    if not ctx.args:
        return (f"Say what to add: {ctx.adapter.capabilities.command('steer', 'use Postgres, not SQLite')}. "
                "The agent reads it before its next step.")
    text = type(ctx.message).from_dict({**ctx.message.to_dict(), "text": ctx.args, "command": None})
    joined = await deps.turns.steer_text(ctx.adapter, text, ctx.session_key)
    if joined is None:
        return None
    if joined:
        return "↪ Added to what I'm working on: I'll read it before my next step."
    return "Nothing was running, so I'll answer it as a new message."
