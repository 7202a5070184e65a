"""/voice on|off: answers in this chat also come as a voice note (``tts.*``), after the text, which is always
sent. Stored on the session row (``sessions.voice``), so it survives a restart, and a session that follows
(/new, a reset) keeps it: it is the chat's choice. Off by default."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.commands.registry import CommandContext, CommandSet
from gateway.session.manager import SessionManager
from gateway.storage.store import Store


@dataclass(frozen=True)
class VoiceDeps:
    sessions: SessionManager
    store: Store
    available: bool  # a speech endpoint is configured (tts.base_url or model.base_url)


VOICE_COMMANDS: CommandSet[VoiceDeps] = CommandSet()


@VOICE_COMMANDS.command("voice", "answers also as a voice note", args_hint="[on | off]")
async def voice(deps: VoiceDeps, ctx: CommandContext) -> str:
    caps = ctx.adapter.capabilities
    choice = ctx.args.strip().lower()
    if choice not in ("", "on", "off"):
        return f"Unknown setting {choice!r}: use {caps.command('voice', 'on')} or {caps.command('voice', 'off')}."
    if not choice:
        row = deps.sessions.peek(ctx.session_key) or await deps.store.sessions.active(ctx.session_key) or {}
        now = "on" if row.get("voice") == "on" else "off"
        return f"Voice replies are {now}. {caps.command('voice', 'on | off')} changes it for this chat."
    if choice == "on" and not deps.available:
        return "Voice replies need a speech endpoint: set tts.base_url (or model.base_url) in config.yaml."
    row = await deps.sessions.get(ctx.session_key, ctx.adapter.name)
    value = "on" if choice == "on" else None
    await deps.store.sessions.update(row["id"], voice=value)
    row["voice"] = value  # the cached row: the next answer reads it
    if value:
        return "🔊 Voice replies on: each answer also comes as a voice note (the text is always sent too)."
    return "Voice replies off."
