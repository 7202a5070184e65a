"""``memory``: short notes the agent keeps about the user it talks with, across conversations.

The gateway puts its memory book in ``ToolContext.extras["memory_api"]`` and the chat's sender in
``extras["source"]``; notes are per user (gateway/turns/memory.py), never shared with anyone else's
conversations. The tool runs in a worker thread; the book hands each change to the event loop.
"""

from __future__ import annotations

from typing import Any

from tools.registry import ToolContext, error, tool


@tool(
    "memory",
    "Your notes about the user you are talking with, kept across conversations: lasting facts and "
    "preferences worth knowing next time (name, language, projects, how they like answers), not what this "
    "conversation is about. Size-limited: keep entries short; replace or remove stale ones. They appear in "
    "your instructions from the user's next conversation. Actions: add (content), replace (old_text: a "
    "piece of one entry; content: its new text), remove (old_text), list.",
    {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["add", "replace", "remove", "list"]},
            "content": {"type": "string", "description": "The entry's text (add, replace)."},
            "old_text": {"type": "string", "description": "A unique piece of the entry to change (replace, remove)."},
        },
        "required": ["action"],
    },
    toolset="memory",
)
def memory(args: dict[str, Any], ctx: ToolContext) -> Any:
    book = ctx.extras.get("memory_api")
    if book is None:
        return error("memory is not available here (no gateway is running)")
    try:
        return book.call(str(args.get("action") or ""), args, ctx.extras.get("source"))
    except ValueError as exc:  # MemoryRefused: what is wrong with the call, for the model
        return error(str(exc))
