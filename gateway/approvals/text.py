"""What people read about approvals: the command as it runs, prompts, outcomes.

The approver must see what runs, so the command is shown whole and as written (gateway/kernel/shown.py says
how). Nothing is cut: a prompt longer than one message is chunked by delivery, and one too long to read in a
few messages is refused instead (broker.py).
"""

from __future__ import annotations

import re
from typing import Any

from gateway.platforms.base import Source


def fenced(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def who(source: Source | None) -> str:
    if source is None:
        return "nobody"
    return source.user_name or source.user_id


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:g} seconds"
    minutes = seconds / 60
    return f"{minutes:g} minute{'s' if minutes != 1 else ''}"


def decided_head(status: str, scope: str | None, by: str | None, via: str, timeout: float) -> str:
    """The first line of a decided prompt: what happened and who decided."""
    if status == "approved":
        what = {"once": "Approved once", "session": "Approved for this session",
                "always": "Always approved"}.get(scope or "", "Approved")
        head = f"✅ {what} by {by}"
    elif status == "expired":
        head = f"⌛ Expired — denied (nobody answered within {duration(timeout)})"
    elif via in ("button", "command", "dashboard"):
        head = f"🚫 Denied by {by}"
    elif via == "stop":
        head = "🚫 Denied — the turn was stopped (/stop)"
    elif via == "new":
        head = "🚫 Denied — /new started a fresh conversation"
    elif via == "interrupted":
        head = "🚫 Denied — the turn ended before anyone answered"
    elif via == "restart":
        head = "🚫 Denied — Herald restarted before anyone answered"
    else:
        head = "🚫 Denied"
    return head


def decided_text(display: str, status: str, scope: str | None, by: str | None, via: str, timeout: float) -> str:
    """The prompt's text once it is decided (the buttons go)."""
    return f"{decided_head(status, scope, by, via, timeout)}\n{fenced(display)}"


def expired_message(timeout: float) -> str:
    return (f"Not run: expired — nobody approved it within {duration(timeout)}, so it was denied. Tell the user "
            "what you wanted to run and why.")


def outcome_elsewhere(req: Any, status: str, by: str | None, via: str, timeout: float) -> str | None:
    """What the turn's own chat is told of a decision taken where its prompt was put instead (another chat, the
    dashboard): a plain sentence, since it never saw the prompt. None when there is nothing to tell (nobody asked
    there, or the turn itself ended)."""
    where = req.elsewhere
    if where is None or via == "auto":
        return None
    if status == "approved":
        return f"✅ Approved {where}{f' by {by}' if by else ''}; running it."
    if status == "expired":
        return f"⌛ Nobody answered {where} within {duration(timeout)}, so the command was not run."
    if via in ("button", "command", "dashboard"):
        return f"🚫 Denied {where}{f' by {by}' if by else ''}, so the command was not run."
    return None
