"""Answering approvals by typing: ``/approve [session|always] [id]`` and ``/deny [id]`` (the buttons' text
fallback), and the button handler's registration."""

from __future__ import annotations

from gateway.approvals.broker import BUTTON_PREFIX, ApprovalBroker
from gateway.commands.registry import Command, CommandContext, CommandRegistry
from gateway.ports import ButtonHandler


async def _answer_from_chat(broker: ApprovalBroker, ctx: CommandContext, deny: bool) -> str:
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


def register_approvals(broker: ApprovalBroker, registry: CommandRegistry, buttons: dict[str, ButtonHandler]) -> None:
    buttons[BUTTON_PREFIX] = broker.handle_button

    async def approve(ctx: CommandContext) -> str:
        return await _answer_from_chat(broker, ctx, deny=False)

    async def deny(ctx: CommandContext) -> str:
        return await _answer_from_chat(broker, ctx, deny=True)

    registry.add(Command("approve", "approve the waiting command (once, or for the session, or always)", approve,
                         args_hint="[session | always] [id]"))
    registry.add(Command("deny", "refuse the waiting command", deny, args_hint="[id]"))
