"""What people read about approvals: commands with secrets masked, prompts, outcomes."""

from __future__ import annotations

import hashlib
import re

from gateway.platforms.base import Source
from tools.dangerous import normalize

MAX_SHOWN = 600

_SECRETISH = re.compile(
    r"(?i)(?P<k>(?:password|passwd|pwd|token|secret|api[_-]?key|access[_-]?key|auth)[\w-]*)(?P<sep>=|:\s*|\s+)"
    r"(?P<v>\"[^\"]*\"|'[^']*'|[^\s'\"]+)"
)
_URL_CREDENTIALS = re.compile(r"(?P<pre>://[^/\s:@]+:)[^/\s@]+@")
_AUTH_HEADER = re.compile(r"(?i)(authorization:\s*(?:bearer|basic|token)\s+)\S+")


def command_hash(command: str) -> str:
    return hashlib.sha256(normalize(command).encode()).hexdigest()


def exact_hash(command: str) -> str:
    """The exact text's hash (no normalisation): what a cron job's approved script is checked against."""
    return hashlib.sha256(command.encode()).hexdigest()


def redact_command(command: str, secret_values: list[str] | None = None) -> str:
    """The command as people see it: secrets masked, very long commands shortened in the middle."""
    from gateway.logs import REDACTED, redact

    text = normalize(command)
    for value in secret_values or ():
        if value and len(value) >= 6:
            text = text.replace(value, REDACTED)
    text = _AUTH_HEADER.sub(lambda m: m.group(1) + REDACTED, text)
    text = _URL_CREDENTIALS.sub(lambda m: m.group("pre") + REDACTED + "@", text)
    text = _SECRETISH.sub(lambda m: m.group("k") + m.group("sep") + REDACTED, text)
    text = redact(text)
    if len(text) > MAX_SHOWN:
        head, tail = text[:400], text[-150:]
        text = f"{head} … [{len(text) - 550} characters not shown] … {tail}"
    return text


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


def decided_text(display: str, status: str, scope: str | None, by: str | None, via: str, timeout: float) -> str:
    """The prompt's text once it is decided (the buttons go)."""
    if status == "approved":
        what = {"once": "Approved once", "session": "Approved for this session",
                "always": "Always approved"}.get(scope or "", "Approved")
        head = f"✅ {what} by {by}"
    elif status == "expired":
        head = f"⌛ Expired — denied (nobody answered within {duration(timeout)})"
    elif via in ("button", "command"):
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
    return f"{head}\n{fenced(display)}"


def expired_message(timeout: float) -> str:
    return (f"Not run: expired — nobody approved it within {duration(timeout)}, so it was denied. Tell the user "
            "what you wanted to run and why.")
