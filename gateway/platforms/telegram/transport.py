"""Telegram's transport: python-telegram-bot's HTTP on aiohttp, and PTB's errors in the delivery layer's terms.

PTB's Bot has no rate limiter or retry of its own, so nothing blocks other chats underneath and delivery owns
every retry: ``RetryAfter`` becomes ``RateLimited`` (only that chat's lane waits), network trouble
``TransientError`` — ``MaybeSent`` when the connection broke after the request may have reached Telegram, which
has no idempotency key (delivery announces the resend) — blocked / chat not found / no rights ``PermanentError``.
"""

from __future__ import annotations

import os
from typing import Any

from gateway.kernel.imports import import_without
from gateway.platforms.base import MaybeSent, PermanentError, RateLimited, TransientError
from gateway.platforms.errors import may_have_arrived

# Opt in to PTB's future timedelta periods (RetryAfter.retry_after, ...): it warns on every 429 otherwise, and
# retry_seconds reads both forms.
os.environ.setdefault("PTB_TIMEDELTA", "1")
# Every module of this package that uses PTB imports this one first, so PTB is loaded here, once: without
# cryptography (Telegram Passport, never asked for: ~9 MB resident) and without httpx's command-line client
# (click, rich, pygments: ~4 MB), which PTB's import of httpx would bring. Its HTTP is aiohttp (below).
import_without("telegram", ("cryptography", "click", "rich"))


def retry_seconds(exc: Any) -> float:
    value = getattr(exc, "_retry_after", None)
    if value is None:
        value = exc.retry_after
    return value.total_seconds() if hasattr(value, "total_seconds") else float(value)


def map_error(exc: Exception) -> Exception:
    """A PTB exception -> the delivery layer's class (returned, for ``raise ... from exc``)."""
    from telegram import error as tg

    if isinstance(exc, tg.RetryAfter):
        return RateLimited(retry_seconds(exc), str(exc))
    if isinstance(exc, tg.Forbidden | tg.InvalidToken | tg.ChatMigrated):
        return PermanentError(str(exc))
    if isinstance(exc, tg.BadRequest):  # a subclass of NetworkError: test it first
        return PermanentError(str(exc))
    if isinstance(exc, tg.NetworkError | tg.Conflict):
        # Our transport raises with aiohttp's failure as the cause; PTB's own (a 5xx answered) has none.
        if exc.__cause__ is not None and may_have_arrived(exc.__cause__):
            return MaybeSent(str(exc))
        return TransientError(str(exc))
    return PermanentError(f"{type(exc).__name__}: {exc}")


def is_entity_error(exc: Exception) -> bool:
    text = str(exc).lower()
    return "parse entities" in text or ("entity" in text and "bad request" in text)


def file_base_url(base_url: str) -> str:
    """``http://host/bot`` -> ``http://host/file/bot`` (how the Bot API serves files)."""
    if base_url.endswith("/bot"):
        return base_url[: -len("/bot")] + "/file/bot"
    return base_url.rstrip("/") + "/file/bot"


FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def make_request(pool_size: int, read_s: float, connect_s: float = 10.0, pool_s: float = 30.0) -> Any:
    """PTB's networking backend (a ``telegram.request.BaseRequest``) on aiohttp instead of httpx.

    Same wire format as PTB's HTTPXRequest (form-encoded parameters, multipart for uploads) and the same
    exceptions (``TimedOut``/``NetworkError``; PTB maps the status codes to the rest). aiohttp's C parser
    costs a fraction of httpx per request, and requests are most of the adapter's CPU under load.
    """
    import aiohttp
    from telegram.error import NetworkError, TimedOut
    from telegram.request import BaseRequest, RequestData

    default = type(BaseRequest.DEFAULT_NONE)

    class AiohttpRequest(BaseRequest):
        __slots__ = ("_session",)

        def __init__(self) -> None:
            self._session: aiohttp.ClientSession | None = None

        @property
        def read_timeout(self) -> float | None:
            return read_s

        async def initialize(self) -> None:
            if self._session is None or self._session.closed:
                self._session = aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(limit=pool_size, keepalive_timeout=60),
                    headers={"User-Agent": self.USER_AGENT},
                )

        async def shutdown(self) -> None:
            session, self._session = self._session, None
            if session is not None:
                await session.close()

        async def do_request(self, url: str, method: str, request_data: RequestData | None = None,
                             read_timeout: Any = BaseRequest.DEFAULT_NONE,
                             write_timeout: Any = BaseRequest.DEFAULT_NONE,
                             connect_timeout: Any = BaseRequest.DEFAULT_NONE,
                             pool_timeout: Any = BaseRequest.DEFAULT_NONE) -> tuple[int, bytes]:
            if self._session is None:
                raise RuntimeError("this request object is not initialized")
            read = read_s if isinstance(read_timeout, default) else read_timeout
            connect = connect_s if isinstance(connect_timeout, default) else connect_timeout
            pool = pool_s if isinstance(pool_timeout, default) else pool_timeout
            # aiohttp has no write timeout of its own: sock_read bounds a stalled exchange.
            timeout = aiohttp.ClientTimeout(total=None, sock_read=read, sock_connect=connect,
                                            connect=None if connect is None or pool is None else connect + pool)
            data: Any = None
            headers: dict[str, str] | None = None
            if request_data is not None:
                if request_data.contains_files:
                    form = aiohttp.FormData()
                    for key, value in request_data.json_parameters.items():
                        form.add_field(key, value)
                    for key, value in request_data.multipart_data.items():
                        if isinstance(value, tuple):
                            filename, content, *rest = value
                            form.add_field(key, content, filename=filename, content_type=rest[0] if rest else None)
                        else:
                            form.add_field(key, value)
                    data = form
                else:
                    # Encoded here: given the dict, aiohttp builds a FormData (and a multipart writer) per request.
                    data = request_data.url_encoded_parameters().encode()
                    headers = FORM
            try:
                async with self._session.request(method, url, data=data, headers=headers, timeout=timeout) as resp:
                    return resp.status, await resp.read()
            except TimeoutError as exc:
                raise TimedOut from exc
            except aiohttp.ClientError as exc:
                raise NetworkError(f"aiohttp.{type(exc).__name__}: {exc}") from exc

    return AiohttpRequest()

