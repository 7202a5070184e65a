"""Answering approvals by typing: ``/approve [session|always] [id]`` and ``/deny [id]`` (the buttons' text
fallback). The buttons themselves are answered by ``ApprovalBroker.handle_button`` (broker.py)."""

from __future__ import annotations

from typing import Any, Protocol

from gateway.commands.registry import CommandContext, CommandSet
from gateway.platforms.base import Source


class Answers(Protocol):
    """The broker, as a typed answer reaches it."""

    async def waiting_in_chat(self, platform: str, chat_id: str) -> list[Any]: ...

    def may_decide(self, req: Any, by: Source, trusted: bool = False) -> bool: ...

    async def decide(self, approval_id: str, choice: str, by: Source, via: str, trusted: bool = False) -> str: ...


async def _answer_from_chat(broker: Answers, ctx: CommandContext, deny: bool) -> str:
    source = ctx.message.source
    scope, ident = "once", None
    for part in ctx.args.split():
        if not deny and part.lower() in ("once", "session", "always"):
            scope = part.lower()
        else:
            ident = part.strip("`")
    waiting = await broker.waiting_in_chat(ctx.adapter.name, source.chat_id)
    if ident is None:
        if not waiting:
            return "Nothing is waiting for approval here."
        # The oldest this sender may answer: another person's request that they may not decide is no default.
        theirs = [r for r in waiting if broker.may_decide(r, source, ctx.adapter.trusted)]
        if not theirs:
            return (f"You can't answer what is waiting here ({', '.join(r.id for r in waiting)}): only the person "
                    "who asked (if they may use this bot) or a configured approver can. Nothing was changed.")
        ident = theirs[0].id
    choice = "d" if deny else {"once": "o", "session": "s", "always": "a"}[scope]
    notice = await broker.decide(ident, choice, source, "command", ctx.adapter.trusted)
    left = [r.id for r in await broker.waiting_in_chat(ctx.adapter.name, source.chat_id)]
    if left:
        caps = ctx.adapter.capabilities
        answers = f"{caps.command('approve', 'ID')} or {caps.command('deny', 'ID')}"
        notice += f" Still waiting: {', '.join(left)} ({answers})."
    return notice


APPROVAL_COMMANDS: CommandSet[Answers] = CommandSet()


@APPROVAL_COMMANDS.command("approve", "approve the waiting command (once, or for the session, or always)",
                           args_hint="[session | always] [id]")
async def approve(broker: Answers, ctx: CommandContext) -> str:
    return await _answer_from_chat(broker, ctx, deny=False)


@APPROVAL_COMMANDS.command("deny", "refuse the waiting command", args_hint="[id]")
async def deny(broker: Answers, ctx: CommandContext) -> str:
    return await _answer_from_chat(broker, ctx, deny=True)
