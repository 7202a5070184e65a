"""Slack's transport: slack_sdk's AsyncWebClient on one shared aiohttp session, and its errors in the delivery
layer's terms.

slack_sdk opens a new aiohttp session per call unless it is given one: the adapter passes a pooled session,
so a busy workspace reuses its connections. The clients get no retry handlers at all (``retry_handlers=[]``):
slack_sdk's default one sends a request again when its connection breaks, and a chat.postMessage Slack had
already taken then shows twice, unannounced. Delivery owns every retry instead: a 429 becomes
``RateLimited`` with Slack's Retry-After, so only the conversation that hit it waits (delivery sleeps in that
chat's coroutine) and nothing queues up in the SDK; a connection that broke after the request may have
reached Slack becomes ``MaybeSent`` (Slack has no idempotency key: delivery announces the resend).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from gateway.platforms.base import FormattingError, MaybeSent, PermanentError, RateLimited, TransientError
from gateway.platforms.errors import may_have_arrived

DEFAULT_BASE_URL = "https://slack.com/api/"
# Slack refused the formatting (blocks, or text it could not take): the same words go again as plain text.
_FORMATTING = frozenset({"invalid_blocks", "invalid_blocks_format", "msg_too_long", "no_text", "invalid_attachments",
                         "markdown_text_conflict"})
# Retrying cannot help: the bot is not there, not allowed, or its token is gone.
_PERMANENT = frozenset({"channel_not_found", "not_in_channel", "is_archived", "msg_blocked", "cant_update_message",
                        "message_not_found", "edit_window_closed", "invalid_auth", "not_authed", "account_inactive",
                        "token_revoked", "token_expired", "missing_scope", "no_permission", "restricted_action",
                        "user_not_in_channel", "ekm_access_denied", "team_access_not_granted"})


def web_client(token: str, base_url: str | None, session: Any) -> Any:
    from slack_sdk.web.async_client import AsyncWebClient

    return AsyncWebClient(token=token, base_url=base_url or DEFAULT_BASE_URL, session=session, timeout=30,
                          retry_handlers=[])


def webhook_client(url: str, session: Any) -> Any:
    """A response_url's client (a slash command's or a press's answer), as unretried as the Web API's."""
    from slack_sdk.webhook.async_client import AsyncWebhookClient

    return AsyncWebhookClient(url, session=session, timeout=10, retry_handlers=[])


def http_session(pool_size: int = 256) -> Any:
    import aiohttp

    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=pool_size, keepalive_timeout=60),
                                 timeout=aiohttp.ClientTimeout(total=60, sock_connect=10))


def slack_error(exc: BaseException) -> str | None:
    """Slack's error code ("channel_not_found") of a failed Web API call, if it is one."""
    from slack_sdk.errors import SlackApiError

    if isinstance(exc, SlackApiError):
        return str((exc.response.data or {}).get("error") or "") if isinstance(exc.response.data, dict) else ""
    return None


def retry_after(exc: BaseException) -> float | None:
    """Seconds from a 429's Retry-After header; None when ``exc`` is no rate limit."""
    from slack_sdk.errors import SlackApiError

    if not isinstance(exc, SlackApiError):
        return None
    if exc.response.status_code != 429 and slack_error(exc) != "ratelimited":
        return None
    headers = exc.response.headers or {}
    value = headers.get("Retry-After") or headers.get("retry-after") or "1"
    try:
        return max(float(value[0] if isinstance(value, list) else value), 0.0)
    except ValueError:
        return 1.0


def map_error(exc: BaseException) -> Exception:
    """A slack_sdk / aiohttp exception -> the delivery layer's class (returned, for ``raise ... from exc``)."""
    import aiohttp
    from slack_sdk.errors import SlackApiError

    wait = retry_after(exc)
    if wait is not None:
        return RateLimited(wait, f"slack rate limit: retry after {wait:g}s")
    if isinstance(exc, SlackApiError):
        code = slack_error(exc) or ""
        status = exc.response.status_code
        if code in _FORMATTING:
            return FormattingError(code)
        if code in _PERMANENT or (400 <= status < 500 and status != 408):
            return PermanentError(code or f"HTTP {status}")
        if status >= 500 or code in ("internal_error", "fatal_error", "service_unavailable", "request_timeout"):
            return TransientError(code or f"HTTP {status}")
        return PermanentError(code or f"HTTP {status}")
    if isinstance(exc, aiohttp.ClientError | TimeoutError | ConnectionError):
        if may_have_arrived(exc):
            return MaybeSent(f"{type(exc).__name__}: {exc}")
        return TransientError(f"{type(exc).__name__}: {exc}")
    return PermanentError(f"{type(exc).__name__}: {exc}")


def file_hosts(base_url: str | None) -> frozenset[str]:
    """Hosts the bot token may be sent to for a file download: Slack's, or the configured API host's."""
    hosts = {"files.slack.com", "slack-files.com", "files.slack-gov.com"}
    if base_url:
        hosts.add(urlsplit(base_url).hostname or "")
    return frozenset(h for h in hosts if h)
