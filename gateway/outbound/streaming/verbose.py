"""/verbose off|tools|all: how much a session's streamed replies show while tools run, stored on the session
row (``sessions.verbose``) so it survives a restart; a new session starts from ``display.verbose``."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import update

from gateway.commands.registry import CommandContext, CommandSet
from gateway.outbound.streaming import Streams
from gateway.outbound.streaming.progress import VERBOSE_CHOICES
from gateway.session.manager import SessionManager
from gateway.storage.db import op_exec
from gateway.storage.store import Store
from gateway.storage.tables import sessions as sessions_table

MEANING = {
    "off": "no progress lines",
    "tools": "a line per tool call",
    "all": "a line per tool call, and what the model writes between them",
}


async def set_verbose(store: Store, session_id: str, value: str) -> None:
    await store.run_write(op_exec(update(sessions_table).where(sessions_table.c.id == session_id)
                                  .values(verbose=value)))


@dataclass(frozen=True)
class VerboseDeps:
    sessions: SessionManager
    store: Store
    streams: Streams


VERBOSE_COMMANDS: CommandSet[VerboseDeps] = CommandSet()


@VERBOSE_COMMANDS.command("verbose", "progress lines while tools run", args_hint="[off | tools | all]")
async def verbose(deps: VerboseDeps, ctx: CommandContext) -> str:
    caps = ctx.adapter.capabilities
    choice = ctx.args.strip().lower()
    if not choice:
        row = deps.sessions.peek(ctx.session_key) or await deps.store.sessions.active(ctx.session_key) or {}
        current = row.get("verbose") or deps.streams.cfg.verbose
        text = (f"Progress: {current} ({MEANING[current]}). "
                f"{caps.command('verbose', 'off | tools | all')} changes it for this session.")
    elif choice not in VERBOSE_CHOICES:
        return f"Unknown setting {choice!r}: use {caps.command('verbose', 'off')}, tools or all."
    else:
        row = await deps.sessions.get(ctx.session_key, ctx.adapter.name)
        await set_verbose(deps.store, row["id"], choice)
        row["verbose"] = choice  # the cached row: a turn running now reads it at its next edit
        text = f"Progress: {choice} ({MEANING[choice]}) for this session."
    if not (caps.edits and deps.streams.cfg.streaming):
        text += " (Here replies arrive in one piece, so there is nothing to show while they are written.)"
    return text
