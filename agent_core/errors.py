"""LLM failures, classified so that retry policy and user-facing wording are decided in one place."""

from __future__ import annotations

import email.utils
import time
from typing import Any, Literal

try:  # the SDK moved from httpx to its httpx2 fork; errors raised mid-stream come from whichever it uses
    import httpx2 as _httpx
except ImportError:  # pragma: no cover
    import httpx as _httpx

from agent_core.sdk import openai

ErrorKind = Literal[
    "auth",
    "rate_limit",
    "overloaded",
    "server",
    "timeout",
    "context_overflow",
    "bad_request",
    "connection",
    "interrupted",
]

# Transport errors can surface unwrapped by the SDK while a stream is being read.
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (_httpx.HTTPError,)

RETRYABLE_KINDS = frozenset({"rate_limit", "overloaded", "server", "timeout", "connection"})

_CONTEXT_HINTS = (
    "context_length",
    "context length",
    "context window",
    "maximum context",
    "too many tokens",
    "prompt is too long",
    "input is too long",
    "reduce the length",
)


class LLMError(Exception):
    def __init__(
        self,
        kind: ErrorKind,
        message: str = "",
        *,
        status: int | None = None,
        retryable: bool | None = None,
        retry_after: float | None = None,
        endpoint: str | None = None,
        fault: str | None = None,
    ) -> None:
        super().__init__(message or kind)
        self.kind: ErrorKind = kind
        self.message = message
        self.status = status
        self.retryable = kind in RETRYABLE_KINDS if retryable is None else retryable
        self.retry_after = retry_after
        self.endpoint = endpoint
        # What went wrong when the kind alone does not say it: "stream_cut" (the answer stopped half-way),
        # "bad_output" (the server's reply could not be read). ``fault_kind`` is what LLMClient reports.
        self.fault = fault

    @property
    def fault_kind(self) -> str:
        return self.fault or self.kind

    def __repr__(self) -> str:
        return f"LLMError(kind={self.kind!r}, status={self.status!r}, message={self.message!r})"

    def user_message(self) -> str:
        code = f" ({self.status})" if self.status else ""
        match self.kind:
            case "auth":
                return f"The model endpoint rejected the API key{code}. Check model.api_key_env."
            case "rate_limit":
                if not self.retryable:
                    return f"The model account is out of quota{code}. Check billing for the endpoint."
                return f"The model endpoint is rate-limiting requests{code}. Try again in a minute."
            case "overloaded":
                return f"The model endpoint is overloaded{code}. Try again shortly."
            case "server":
                if self.fault == "bad_output":
                    return "The model endpoint sent a reply that could not be read. Try again shortly."
                return f"The model endpoint failed with a server error{code}. Try again shortly."
            case "timeout":
                return "The model did not answer in time. Try again, or raise model.timeout_seconds."
            case "connection":
                if self.fault == "stream_cut":
                    return "The model's answer was cut off half-way (the connection dropped). Try again shortly."
                return "Could not reach the model endpoint. Check model.base_url and that the server is up."
            case "context_overflow":
                # In a chat turn this comes after compression was tried once (agent_core/agent.py).
                return ("This no longer fits the model's context window, even with the earlier conversation "
                        "summarised. Send /new to start over, or a shorter message.")
            case "bad_request":
                detail = _short(self.message)
                return f"The model endpoint rejected the request{code}" + (f": {detail}" if detail else ".")
            case "interrupted":
                return "Stopped."
        return f"The model call failed ({self.kind})."


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _body_text(exc: openai.APIStatusError) -> str:
    parts = [exc.message or "", exc.code or ""]
    body = exc.body
    if isinstance(body, dict):
        parts.extend(str(body.get(k) or "") for k in ("message", "code", "type"))
    elif isinstance(body, str):
        parts.append(body)
    return " ".join(parts).lower()


def classify(exc: BaseException) -> LLMError:
    if isinstance(exc, LLMError):
        return exc
    # APITimeoutError subclasses APIConnectionError, so it goes first.
    if isinstance(exc, openai.APITimeoutError):
        return LLMError("timeout", str(exc))
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        return LLMError("connection", f"{exc}" + (f" ({cause})" if cause else ""))
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retry_after = parse_retry_after(exc.response.headers)
        text = _body_text(exc)
        msg = exc.message or ""
        if status in (401, 403):
            return LLMError("auth", msg, status=status)
        if status == 429:
            # A spent quota will not come back within a retry window; retrying only delays the answer.
            quota = "insufficient_quota" in text
            return LLMError("rate_limit", msg, status=status, retry_after=retry_after, retryable=not quota)
        if status in (503, 529):
            return LLMError("overloaded", msg, status=status, retry_after=retry_after)
        if status >= 500:
            return LLMError("server", msg, status=status, retry_after=retry_after)
        if status == 413 or (status in (400, 422) and any(h in text for h in _CONTEXT_HINTS)):
            return LLMError("context_overflow", msg, status=status)
        if status == 408:
            return LLMError("timeout", msg, status=status)
        return LLMError("bad_request", msg, status=status)
    if isinstance(exc, openai.APIResponseValidationError):
        return LLMError("server", f"malformed response: {exc}", status=exc.status_code, fault="bad_output")
    if isinstance(exc, _httpx.TimeoutException | TimeoutError):
        return LLMError("timeout", str(exc))
    if isinstance(exc, _httpx.TransportError | ConnectionError):
        return LLMError("connection", str(exc))
    return LLMError("server", f"{type(exc).__name__}: {exc}", retryable=False)
