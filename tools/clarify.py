"""``clarify``: the agent asks the person a question, with up to four choices, and waits for the answer.

The gateway puts its asker in ``ToolContext.extras["clarify"]`` (gateway/talk/asking.py): it shows the question
in the chat the turn came from (buttons where the platform has them, a numbered list elsewhere; a typed
answer always counts) and blocks this worker thread until someone who may answer does, the wait times out
(``tools.clarify.timeout_seconds``: the agent is told nobody answered) or the turn is stopped. A scheduled
run has nobody to ask.
"""

from __future__ import annotations

from typing import Any

from tools.registry import ToolContext, error, short, tool

MAX_CHOICES = 4
MAX_QUESTION = 2000
MAX_CHOICE = 200


def _enabled(config: Any) -> bool:
    return bool(config.clarify.enabled)


@tool(
    "clarify",
    "Ask the user a question and wait for the answer, when you cannot go on well without it (which of two "
    "readings they meant, a choice only they can make). Offer up to 4 short choices when the answer is one of "
    "a few; they may always type something else instead. Do not use it for small things you can decide "
    "yourself, or to ask permission for a command (dangerous commands ask on their own). If nobody answers in "
    "time you are told so: then go on with your best judgement and say what you assumed.",
    {
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": "The question, short and self-contained."},
            "choices": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_CHOICES,
                        "description": "Up to 4 possible answers (optional)."},
        },
        "required": ["question"],
    },
    toolset="conversation",
    check_enabled=_enabled,
    disabled_reason=lambda _c: "clarify is disabled in the configuration (tools.clarify.enabled: false)",
    progress=lambda args: f"asking: {short(args.get('question', ''), 60)}",
)
def clarify(args: dict[str, Any], ctx: ToolContext) -> Any:
    question = str(args.get("question") or "").strip()
    raw = args.get("choices") or []
    if not question:
        return error("question is empty: say what you want to know")
    if len(question) > MAX_QUESTION:
        return error(f"the question is {len(question)} characters long; keep it under {MAX_QUESTION}")
    if not isinstance(raw, list) or not all(isinstance(c, str | int | float) for c in raw):
        return error("choices is a list of short strings")
    choices = [str(c).strip() for c in raw if str(c).strip()]
    if len(choices) > MAX_CHOICES:
        return error(f"at most {MAX_CHOICES} choices (the person can always type something else)")
    if any(len(c) > MAX_CHOICE for c in choices):
        return error(f"a choice is at most {MAX_CHOICE} characters: make them short, put detail in the question")
    asker = ctx.extras.get("clarify")
    if ctx.extras.get("cron") or ctx.extras.get("cron_job_id"):
        return error("nobody can be asked in a scheduled run: decide yourself and say what you assumed")
    if asker is None:
        return error("nobody can be asked here (no chat to ask in)")
    return asker.ask(question, choices, ctx)
