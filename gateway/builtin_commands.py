"""The built-in chat commands: /help, /new, /stop, /status, /queue."""

from __future__ import annotations

import time

from gateway.commands import CommandContext, CommandRegistry


def register_builtin_commands(registry: CommandRegistry) -> None:
    @registry.command("help", "list the commands", aliases=("commands",))
    async def help_(ctx: CommandContext) -> str:
        return ctx.runner.commands.help_text(ctx.adapter.name)

    @registry.command("new", "start a fresh conversation", aliases=("reset",))
    async def new(ctx: CommandContext) -> str:
        runner = ctx.runner
        stopped = runner.stop_turn(ctx.session_key)
        await runner.approvals.deny_session(ctx.session_key, "new")
        await runner.sessions.reset(ctx.session_key, ctx.adapter.name, reason="new")
        lane = runner.lane(ctx.session_key)
        waiting = len(lane.queue) if lane else 0
        text = "🆕 Started a fresh conversation."
        if stopped:
            text += " The turn that was running was stopped."
        if waiting:
            text += f" {waiting} queued message(s) will be answered in the new conversation."
        return text

    @registry.command("stop", "stop the running turn", aliases=("cancel",))
    async def stop(ctx: CommandContext) -> str:
        runner = ctx.runner
        stopped = runner.stop_turn(ctx.session_key)
        await runner.approvals.deny_session(ctx.session_key, "stop")  # its waiting commands: denied
        if not stopped:
            return "Nothing is running."
        lane = runner.lane(ctx.session_key)
        waiting = len(lane.queue) if lane else 0
        text = "⏹ Stopped."
        if waiting:
            text += f" {waiting} queued message(s) are still waiting; /queue clear drops them."
        return text

    @registry.command("status", "what this session is doing")
    async def status(ctx: CommandContext) -> str:
        runner = ctx.runner
        lane = runner.lane(ctx.session_key)
        session = runner.sessions.peek(ctx.session_key) or await runner.store.session_active(ctx.session_key)
        lines = []
        if lane and lane.turn:
            secs = time.monotonic() - lane.turn.started
            lines.append(f"Busy for {secs:.0f}s (last step: {lane.turn.last_step}).")
        else:
            lines.append("Idle.")
        lines.append(f"Queued: {len(lane.queue) if lane else 0}.")
        if session:
            count = await runner.store.session_count_messages(session["id"])
            lines.append(f"Session {session['id'][:8]}: {count} messages since "
                         f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(session['created_at']))}.")
        else:
            lines.append("No conversation yet.")
        model = runner.cfg.model.name or "none configured"
        lines.append(f"Model: {model}.")
        return "\n".join(lines)

    @registry.command("queue", "show waiting messages, add one, or clear them", args_hint="[text | clear]")
    async def queue(ctx: CommandContext) -> str | None:
        runner = ctx.runner
        if ctx.args.lower() == "clear":
            dropped = await runner.clear_queue(ctx.session_key)
            return f"Dropped {dropped} queued message(s)." if dropped else "The queue is empty."
        if ctx.args:
            # Queue a follow-up explicitly, even when busy_mode is interrupt.
            from gateway.runner import Accepted

            item = Accepted(0, ctx.message, ctx.session_key)
            row = await runner.store.inbox_add(
                ctx.adapter.name, ctx.message.platform_message_id + ":queued", ctx.session_key,
                {**ctx.message.to_dict(), "text": ctx.args},
            )
            if row is None:
                return None
            item.inbox_id = row
            item.msg = type(ctx.message).from_dict({**ctx.message.to_dict(), "text": ctx.args})
            await runner.submit(ctx.adapter, item, notify=False)
            lane = runner.lane(ctx.session_key)
            return f"⏳ Queued ({len(lane.queue) if lane else 0} waiting)."
        lane = runner.lane(ctx.session_key)
        if not lane or not lane.queue:
            return "The queue is empty."
        lines = [f"{len(lane.queue)} waiting:"]
        for i, item in enumerate(lane.queue, 1):
            text = item.msg.text.replace("\n", " ")
            lines.append(f"{i}. {text[:80]}{'…' if len(text) > 80 else ''}")
        return "\n".join(lines)
