"""Per-session settings as commands: /model, /reasoning, /personality (gateway/session/settings.py says
what they are and what a following session inherits).

/model and /reasoning change the session in place (from its next turn); /personality changes the system
prompt, which stays byte-stable within a session, so it starts a fresh session with the new preset.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.commands.conversation import plain
from gateway.commands.registry import CommandContext, CommandSet
from gateway.ports import SessionDenials, TurnControl
from gateway.session.manager import SessionManager
from gateway.session.settings import EFFORTS, SessionSettings
from gateway.storage.store import Store

DEFAULT_WORDS = ("default", "none", "off")


@dataclass(frozen=True)
class ModelDeps:
    turns: TurnControl
    sessions: SessionManager
    store: Store
    approvals: SessionDenials
    settings: SessionSettings  # the models, efforts and personalities there are, and a session's choice


MODEL_COMMANDS: CommandSet[ModelDeps] = CommandSet()


async def current(deps: ModelDeps, ctx: CommandContext) -> dict[str, Any] | None:
    return deps.sessions.peek(ctx.session_key) or await deps.store.sessions.active(ctx.session_key)


@MODEL_COMMANDS.command("model", "show or switch this conversation's model", args_hint="[name]")
async def model(deps: ModelDeps, ctx: CommandContext) -> str:
    choices = deps.settings.model_choices()
    if not choices:
        return "No model is configured (model.name in config.yaml)."
    cmd = ctx.adapter.capabilities.command
    wanted = ctx.args.strip()
    if not wanted:
        session = await current(deps, ctx)
        now = deps.settings.model_of(session)
        lines = [f"Model: `{now}`{' (the default)' if now == deps.settings.default_model else ''}."]
        if len(choices) > 1:
            lines.append("Choices: " + ", ".join(f"`{c}`" for c in choices) + ".")
            lines.append(f"{cmd('model', 'NAME')} switches this conversation; {cmd('model', 'default')} "
                         "goes back.")
        else:
            lines.append("There are no others to choose from (model.choices in config.yaml).")
        return "\n".join(lines)
    if wanted.lower() in DEFAULT_WORDS:
        wanted = deps.settings.default_model or ""
    if wanted not in choices:
        return (f"{plain(wanted)} is not one of the models here, so nothing changed. Choices: "
                + ", ".join(f"`{c}`" for c in choices) + ".")
    session = await deps.sessions.get(ctx.session_key, ctx.adapter.name, source=ctx.message.source)
    stored = None if wanted == deps.settings.default_model else wanted
    await deps.store.sessions.update(session["id"], model=stored)
    session["model"] = stored
    text = f"🧠 This conversation now uses `{wanted}`."
    effort = session.get("reasoning_effort")
    if effort and not deps.settings.takes_reasoning(wanted):
        text += f" It takes no reasoning effort, so “{effort}” is not sent to it."
    return text


@MODEL_COMMANDS.command("reasoning", "how hard the model thinks: low, medium or high", args_hint="[low|medium|high]")
async def reasoning(deps: ModelDeps, ctx: CommandContext) -> str:
    wanted = ctx.args.strip().lower()
    cmd = ctx.adapter.capabilities.command
    session = await current(deps, ctx)
    name = deps.settings.model_of(session)
    if not wanted:
        if not deps.settings.takes_reasoning(name):
            return f"`{name}` takes no reasoning effort here (model.reasoning in config.yaml)."
        effort = deps.settings.effort_of(session)
        return (f"Reasoning effort: {effort or 'the model’s default'}. "
                f"{cmd('reasoning', 'low|medium|high')} changes it; {cmd('reasoning', 'default')} goes back.")
    if wanted not in (*EFFORTS, *DEFAULT_WORDS):
        return f"Use {cmd('reasoning', 'low')}, {cmd('reasoning', 'medium')} or {cmd('reasoning', 'high')}."
    if not deps.settings.takes_reasoning(name):
        return (f"`{name}` does not take a reasoning effort (model.reasoning in config.yaml), "
                "so nothing changed.")
    effort = None if wanted in DEFAULT_WORDS else wanted
    session = await deps.sessions.get(ctx.session_key, ctx.adapter.name, source=ctx.message.source)
    await deps.store.sessions.update(session["id"], reasoning_effort=effort)
    session["reasoning_effort"] = effort
    return f"🧠 Reasoning effort: {effort or 'the model’s default'}."


@MODEL_COMMANDS.command("personality", "list the personalities, or start afresh with one", args_hint="[name]")
async def personality(deps: ModelDeps, ctx: CommandContext) -> str:
    presets = deps.settings.personalities()
    cmd = ctx.adapter.capabilities.command
    session = await current(deps, ctx)
    now = deps.settings.personality_of(session)
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
    stopped = deps.turns.stop_turn(ctx.session_key)
    await deps.approvals.deny_session(ctx.session_key, "new")
    await deps.sessions.reset(ctx.session_key, ctx.adapter.name, reason="personality", source=ctx.message.source,
                         personality=target)
    preset = "Default personality" if target is None else f"Personality {target}"
    text = f"🎭 {preset}: started a fresh conversation."
    if stopped:
        text += " The turn that was running was stopped."
    waiting = len(deps.turns.queued(ctx.session_key))
    if waiting:
        text += f" {waiting} queued message(s) will be answered in it."
    return text
