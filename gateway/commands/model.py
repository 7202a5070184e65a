"""Per-session settings as commands: /model, /reasoning, /personality (gateway/session/settings.py says
what they are and what a following session inherits).

/model and /reasoning change the session in place (from its next turn); /personality changes the system
prompt, which stays byte-stable within a session, so it starts a fresh session with the new preset.
"""

from __future__ import annotations

from typing import Any

from gateway.commands.conversation import plain
from gateway.commands.registry import CommandContext, CommandRegistry
from gateway.ports import SessionDenials, TurnControl
from gateway.session.manager import SessionManager
from gateway.session.settings import EFFORTS, SessionSettings
from gateway.storage.store import Store

DEFAULT_WORDS = ("default", "none", "off")


def register_model_commands(registry: CommandRegistry, turns: TurnControl, sessions: SessionManager, store: Store,
                            approvals: SessionDenials, settings: SessionSettings) -> None:
    async def current(ctx: CommandContext) -> dict[str, Any] | None:
        return sessions.peek(ctx.session_key) or await store.sessions.active(ctx.session_key)

    @registry.command("model", "show or switch this conversation's model", args_hint="[name]")
    async def model(ctx: CommandContext) -> str:
        choices = settings.model_choices()
        if not choices:
            return "No model is configured (model.name in config.yaml)."
        cmd = ctx.adapter.capabilities.command
        wanted = ctx.args.strip()
        if not wanted:
            session = await current(ctx)
            now = settings.model_of(session)
            lines = [f"Model: `{now}`{' (the default)' if now == settings.default_model else ''}."]
            if len(choices) > 1:
                lines.append("Choices: " + ", ".join(f"`{c}`" for c in choices) + ".")
                lines.append(f"{cmd('model', 'NAME')} switches this conversation; {cmd('model', 'default')} "
                             "goes back.")
            else:
                lines.append("There are no others to choose from (model.choices in config.yaml).")
            return "\n".join(lines)
        if wanted.lower() in DEFAULT_WORDS:
            wanted = settings.default_model or ""
        if wanted not in choices:
            return (f"{plain(wanted)} is not one of the models here, so nothing changed. Choices: "
                    + ", ".join(f"`{c}`" for c in choices) + ".")
        session = await sessions.get(ctx.session_key, ctx.adapter.name, source=ctx.message.source)
        stored = None if wanted == settings.default_model else wanted
        await store.sessions.update(session["id"], model=stored)
        session["model"] = stored
        text = f"🧠 This conversation now uses `{wanted}`."
        effort = session.get("reasoning_effort")
        if effort and not settings.takes_reasoning(wanted):
            text += f" It takes no reasoning effort, so “{effort}” is not sent to it."
        return text

    @registry.command("reasoning", "how hard the model thinks: low, medium or high", args_hint="[low|medium|high]")
    async def reasoning(ctx: CommandContext) -> str:
        wanted = ctx.args.strip().lower()
        cmd = ctx.adapter.capabilities.command
        session = await current(ctx)
        name = settings.model_of(session)
        if not wanted:
            if not settings.takes_reasoning(name):
                return f"`{name}` takes no reasoning effort here (model.reasoning in config.yaml)."
            effort = settings.effort_of(session)
            return (f"Reasoning effort: {effort or 'the model’s default'}. "
                    f"{cmd('reasoning', 'low|medium|high')} changes it; {cmd('reasoning', 'default')} goes back.")
        if wanted not in (*EFFORTS, *DEFAULT_WORDS):
            return f"Use {cmd('reasoning', 'low')}, {cmd('reasoning', 'medium')} or {cmd('reasoning', 'high')}."
        if not settings.takes_reasoning(name):
            return (f"`{name}` does not take a reasoning effort (model.reasoning in config.yaml), "
                    "so nothing changed.")
        effort = None if wanted in DEFAULT_WORDS else wanted
        session = await sessions.get(ctx.session_key, ctx.adapter.name, source=ctx.message.source)
        await store.sessions.update(session["id"], reasoning_effort=effort)
        session["reasoning_effort"] = effort
        return f"🧠 Reasoning effort: {effort or 'the model’s default'}."

    @registry.command("personality", "list the personalities, or start afresh with one", args_hint="[name]")
    async def personality(ctx: CommandContext) -> str:
        presets = settings.personalities()
        cmd = ctx.adapter.capabilities.command
        session = await current(ctx)
        now = settings.personality_of(session)
        wanted = ctx.args.strip().lower()
        if not wanted:
            if not presets:
                return "No personalities are configured (agent.personalities in config.yaml)."
            names = ", ".join(f"{n}{' (current)' if n == now else ''}" for n in presets)
            return (f"Personalities: {names}; default{' (current)' if now is None else ''}. "
                    f"{cmd('personality', 'NAME')} starts a fresh conversation with one.")
        target = None if wanted in DEFAULT_WORDS else wanted
        if target is not None and target not in presets:
            known = ", ".join(presets) or "none are configured"
            return f"There is no personality {plain(wanted)} ({known}), so nothing changed."
        if target == now:
            return f"Already {'the default personality' if target is None else target}."
        stopped = turns.stop_turn(ctx.session_key)
        await approvals.deny_session(ctx.session_key, "new")
        await sessions.reset(ctx.session_key, ctx.adapter.name, reason="personality", source=ctx.message.source,
                             personality=target)
        preset = "Default personality" if target is None else f"Personality {target}"
        text = f"🎭 {preset}: started a fresh conversation."
        if stopped:
            text += " The turn that was running was stopped."
        waiting = len(turns.queued(ctx.session_key))
        if waiting:
            text += f" {waiting} queued message(s) will be answered in it."
        return text
