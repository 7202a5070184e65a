"""The built-in chat commands: /help, /new, /stop, /status, /queue."""

from __future__ import annotations

import time

from gateway.commands.registry import CommandContext, CommandRegistry
from gateway.ports import SessionDenials, TurnControl
from gateway.session.manager import SessionManager
from gateway.storage.store import Store


def register_builtin_commands(registry: CommandRegistry, turns: TurnControl, sessions: SessionManager, store: Store,
                              approvals: SessionDenials, model_name: str | None) -> None:
    @registry.command("help", "list the commands", aliases=("commands",))
    async def help_(ctx: CommandContext) -> str:
        return registry.help_text(ctx.adapter.name, ctx.adapter.capabilities.command_prefix)

    @registry.command("new", "start a fresh conversation", aliases=("reset",))
    async def new(ctx: CommandContext) -> str:
        stopped = turns.stop_turn(ctx.session_key)
        await approvals.deny_session(ctx.session_key, "new")
        await sessions.reset(ctx.session_key, ctx.adapter.name, reason="new", source=ctx.message.source)
        waiting = len(turns.queued(ctx.session_key))
        text = "🆕 Started a fresh conversation."
        if stopped:
            text += " The turn that was running was stopped."
        if waiting:
            text += f" {waiting} queued message(s) will be answered in the new conversation."
        return text

    @registry.command("stop", "stop the running turn", aliases=("cancel",))
    async def stop(ctx: CommandContext) -> str:
        stopped = turns.stop_turn(ctx.session_key)
        await approvals.deny_session(ctx.session_key, "stop")  # its waiting commands: denied
        if not stopped:
            return "Nothing is running."
        waiting = len(turns.queued(ctx.session_key))
        text = "⏹ Stopped."
        if waiting:
            text += (f" {waiting} queued message(s) are still waiting; "
                     f"{ctx.adapter.capabilities.command('queue', 'clear')} drops them.")
        return text

    @registry.command("status", "what this session is doing")
    async def status(ctx: CommandContext) -> str:
        busy = turns.busy(ctx.session_key)
        session = sessions.peek(ctx.session_key) or await store.sessions.active(ctx.session_key)
        lines = [f"Busy for {busy[0]:.0f}s (last step: {busy[1]})." if busy else "Idle.",
                 f"Queued: {len(turns.queued(ctx.session_key))}."]
        if session:
            count = await store.messages.count(session["id"])
            lines.append(f"Session {session['id'][:8]}: {count} messages since "
                         f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(session['created_at']))}.")
        else:
            lines.append("No conversation yet.")
        lines.append(f"Model: {(session or {}).get('model') or model_name or 'none configured'}.")  # /model
        return "\n".join(lines)

    @registry.command("queue", "show waiting messages, add one, or clear them", args_hint="[text | clear]")
    async def queue(ctx: CommandContext) -> str | None:
        if ctx.args.lower() == "clear":
            dropped = await turns.clear_queue(ctx.session_key)
            return f"Dropped {dropped} queued message(s)." if dropped else "The queue is empty."
        if ctx.args:
            # Queue a follow-up explicitly, even when busy_mode is interrupt.
            follow_up = type(ctx.message).from_dict({**ctx.message.to_dict(), "text": ctx.args, "command": None})
            waiting = await turns.enqueue(ctx.adapter, follow_up, ctx.session_key)
            return None if waiting is None else f"⏳ Queued ({waiting} waiting)."
        waiting_texts = turns.queued(ctx.session_key)
        if not waiting_texts:
            return "The queue is empty."
        lines = [f"{len(waiting_texts)} waiting:"]
        for i, text in enumerate(waiting_texts, 1):
            text = text.replace("\n", " ")
            lines.append(f"{i}. {text[:80]}{'…' if len(text) > 80 else ''}")
        return "\n".join(lines)
