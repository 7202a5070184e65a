"""What the health endpoints may say about an adapter: its state, its error's class, a fixed hint.

``/readyz`` and ``/healthz`` answer without authentication, so they never carry exception text: an
InvalidToken or a URL error can quote the bot token itself. They show the error's class name (code,
not data) and, for the classes we know, a short fixed hint. The full text, redacted, stays in the log
and in ``last_error`` for callers who are authenticated (``GET /api/v1/status``).
"""

from __future__ import annotations

import re
from typing import Any

# An exception class name, or the "Kind: message" prefix adapters store in last_error.
_KIND = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_KIND_PREFIX = re.compile(r"([A-Z][A-Za-z0-9]{0,63})(?::|$)")
UNKNOWN_KIND = "Error"

HINTS: dict[str, str] = {
    "CredentialLocked": "another Herald process is using this bot's credential; retrying until it is free",
    "InvalidToken": "the platform rejected the bot token: check the variable its *_env key names",
    "Forbidden": "the platform refused this bot's credential",
    "Unauthorized": "the platform refused this bot's credential",
    "Conflict": "another program is reading this bot's updates with the same token",
    "RetryAfter": "rate limited by the platform; retrying later",
    "NetworkError": "cannot reach the platform; retrying",
    "TimedOut": "the platform did not answer in time; retrying",
    "TimeoutError": "the platform did not answer in time; retrying",
    "ConnectionError": "the connection to the platform closed; reconnecting",
    "ClientConnectorError": "cannot reach the platform; retrying",
}


def kind_of(error: BaseException | str | None) -> str | None:
    """The class of an error: the exception's class name, or the ``Kind:`` prefix of a stored text."""
    if error is None:
        return None
    if isinstance(error, BaseException):
        name = type(error).__name__
        return name if _KIND.fullmatch(name) else UNKNOWN_KIND
    # From text, only what is certainly a class name: a word at the start of the text could be anything,
    # a token included ("https", "sk-...", a secret someone logged first).
    match = _KIND_PREFIX.match(error)
    name = match.group(1) if match else ""
    return name if name in HINTS or name.endswith(("Error", "Exception")) else UNKNOWN_KIND


def public_status(adapter: Any) -> dict[str, Any]:
    """For unauthenticated callers: state, error class and hint — never the error's text."""
    out: dict[str, Any] = {"state": adapter.state}
    kind = getattr(adapter, "error_kind", None)
    if kind is None and adapter.last_error:
        kind = kind_of(adapter.last_error)
    if kind:
        out["error"] = kind
        if kind in HINTS:
            out["hint"] = HINTS[kind]
    return out


def private_status(adapter: Any) -> dict[str, Any]:
    """For authenticated callers: the public status plus ``last_error`` (stored redacted)."""
    out = public_status(adapter)
    if adapter.last_error:
        out["last_error"] = adapter.last_error
    return out
