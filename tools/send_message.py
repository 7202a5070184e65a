"""``send_message``: the agent sends a message to another chat (or, explicitly, to the one it talks in).

The gateway puts its messenger in ``ToolContext.extras["messenger"]`` (gateway/talk/outgoing.py). A target is
what cron's ``deliver`` takes: a platform's name (its home chat) or ``platform:chat_id[:thread_id]``; the chat the
agent talks in needs no approval, any other asks the person (showing the target and the whole text) unless
the operator listed it in ``tools.send_message.allow``. Sent through the outbox, exactly once.
"""

from __future__ import annotations

from typing import Any

from tools.registry import ToolContext, error, short, tool

MAX_TEXT = 20_000


@tool(
    "send_message",
    "Send a message to another chat: a platform's home chat (the target is the platform's name) or a chat by id "
    "('platform:chat_id', 'platform:chat_id:thread_id'). Use it when the user asks you to tell someone or "
    "somewhere else something; your answer in this chat needs no tool. Sending anywhere but this chat asks the "
    "user for approval first (unless the operator allowed that target), and the call waits for their answer. "
    "Only chats the bot talks in can be reached.",
    {
        "type": "object",
        "properties": {
            "target": {"type": "string", "description": "platform, or platform:chat_id[:thread_id]"},
            "text": {"type": "string", "description": "The message (markdown), complete: the readers there have "
                                                      "not seen this conversation."},
        },
        "required": ["target", "text"],
    },
    toolset="conversation",
    check_enabled=lambda config: bool(config.send_message.enabled),
    disabled_reason=lambda _c: "send_message is disabled in the configuration (tools.send_message.enabled: false)",
    progress=lambda args: f"sending a message to {short(args.get('target', ''), 40)}",
)
def send_message(args: dict[str, Any], ctx: ToolContext) -> Any:
    target = str(args.get("target") or "").strip()
    text = str(args.get("text") or "")
    if not target:
        return error("target is empty: a platform (its home chat) or platform:chat_id[:thread_id]")
    if not text.strip():
        return error("text is empty")
    if len(text) > MAX_TEXT:
        return error(f"the text is {len(text)} characters; at most {MAX_TEXT}")
    messenger = ctx.extras.get("messenger")
    if messenger is None:
        return error("messages to other chats cannot be sent here (no gateway is running)")
    return messenger.send(target, text, ctx)
