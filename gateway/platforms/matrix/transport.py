"""Matrix's transport: matrix-nio's ``AsyncClient`` as the adapter drives it, its answers in the delivery layer's
terms, and the content repository (downloads with the token, the upload limit).

nio would sleep through a 429 itself (``max_limit_exceeded``) and retry a timeout forever (``max_timeouts``):
both are off, so ``M_LIMIT_EXCEEDED``'s ``retry_after_ms`` becomes ``RateLimited`` (only that chat's lane waits),
network trouble and 5xx ``TransientError``, a refusal (forbidden, unknown room, too large) ``PermanentError``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from gateway.platforms.base import (
    DeliveryError,
    FileUnavailable,
    PermanentError,
    RateLimited,
    TooBig,
    TransientError,
    save_stream,
)

REQUEST_TIMEOUT = 30.0
DOWNLOAD_TIMEOUT = 120.0
RATE_LIMIT_DEFAULT = 5.0  # seconds, when M_LIMIT_EXCEEDED names no wait
_REFUSED = frozenset({"M_FORBIDDEN", "M_NOT_FOUND", "M_TOO_LARGE", "M_BAD_JSON", "M_NOT_JSON", "M_UNKNOWN_TOKEN",
                      "M_MISSING_TOKEN", "M_INVALID_PARAM", "M_UNRECOGNIZED", "M_GUEST_ACCESS_FORBIDDEN"})


def make_client(homeserver: str, user_id: str, *, device_id: str | None = None, store: Path | None = None,
                pickle_key: str | None = None) -> Any:
    """nio's client; with ``store`` (a folder) end-to-end encryption is on and its keys live there."""
    from nio import AsyncClient, AsyncClientConfig

    config = AsyncClientConfig(
        encryption_enabled=store is not None, store_sync_tokens=False, pickle_key=pickle_key or "DEFAULT_KEY",
        max_limit_exceeded=0, max_timeouts=0, request_timeout=REQUEST_TIMEOUT,
    )
    return AsyncClient(homeserver, user_id, device_id=device_id or "", store_path=str(store) if store else "",
                       config=config)


def http_status(response: Any) -> int | None:
    transport = getattr(response, "transport_response", None)
    return getattr(transport, "status", None)


def error_of(response: Any) -> DeliveryError | None:
    """None for a success; otherwise what the delivery layer makes of nio's error response."""
    from nio import ErrorResponse

    if not isinstance(response, ErrorResponse):
        return None
    code, status = response.status_code, http_status(response)
    said = f"{code or 'HTTP ' + str(status)}: {response.message}"
    if code == "M_LIMIT_EXCEEDED" or status == 429:
        wait = (response.retry_after_ms or 0) / 1000 or RATE_LIMIT_DEFAULT
        return RateLimited(wait, f"the homeserver limits this bot's rate ({said})")
    if status is None or status >= 500:
        return TransientError(said)
    if code in _REFUSED or 400 <= status < 500:
        return PermanentError(said)
    return TransientError(said)


def check(response: Any) -> Any:
    """``response``, or its error raised as the delivery layer's class."""
    error = error_of(response)
    if error is not None:
        raise error
    return response


def map_exception(exc: BaseException) -> DeliveryError:
    import aiohttp
    from nio import LocalProtocolError, SendRetryError

    if isinstance(exc, DeliveryError):
        return exc
    if isinstance(exc, aiohttp.ClientError | TimeoutError | ConnectionError | SendRetryError):
        return TransientError(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, LocalProtocolError):
        return PermanentError(str(exc))
    return PermanentError(f"{type(exc).__name__}: {exc}")


async def call(coro: Any) -> Any:
    """Await a nio request: its response, or the delivery layer's error raised (never nio's or aiohttp's)."""
    try:
        response = await coro
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        raise map_exception(exc) from exc
    return check(response)


def mxc_parts(mxc: str) -> tuple[str, str]:
    """``mxc://server/media_id`` -> (server, media_id); FileUnavailable for anything else."""
    parts = urlsplit(mxc)
    media_id = parts.path.lstrip("/")
    if parts.scheme != "mxc" or not parts.netloc or not media_id or "/" in media_id:
        raise FileUnavailable("the message names no file on the homeserver")
    return parts.netloc, media_id


class Media:
    """The content repository over aiohttp, with the bot's token: authenticated media first (``/_matrix/client/v1
    /media``, spec 1.11), the older ``/_matrix/media/v3`` where the homeserver does not have it. Redirects are
    not followed: the token goes to the homeserver and nowhere else."""

    def __init__(self, homeserver: str, token: str) -> None:
        self.homeserver = homeserver.rstrip("/")
        self.token = token
        self._http: Any = None
        self._upload_limit: int | None = None

    def _session(self) -> Any:
        import aiohttp

        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(headers={"Authorization": f"Bearer {self.token}"})
        return self._http

    async def close(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.close()

    async def download(self, mxc: str, target: Path, cap_mb: float, encrypted: dict[str, Any] | None = None) -> None:
        """The file behind ``mxc`` into ``target``, refused past ``cap_mb``; ``encrypted`` (an event's ``file``)
        decrypts it (its hash checked)."""
        import aiohttp

        server, media_id = mxc_parts(mxc)
        cap = int(cap_mb * 1024 * 1024)
        path = f"{quote(server, safe='')}/{quote(media_id, safe='')}"
        timeout = aiohttp.ClientTimeout(total=DOWNLOAD_TIMEOUT)
        for base in ("/_matrix/client/v1/media/download/", "/_matrix/media/v3/download/"):
            async with self._session().get(self.homeserver + base + path, allow_redirects=False,
                                           timeout=timeout) as resp:
                if resp.status in (400, 404, 405) and base.startswith("/_matrix/client"):
                    said = await resp.read()
                    if resp.status != 404 or b"M_UNRECOGNIZED" in said:
                        continue  # an older homeserver: the unauthenticated path
                if resp.status == 404:
                    raise FileUnavailable("the homeserver no longer has it")
                if resp.status != 200:
                    raise FileUnavailable(f"the homeserver answered HTTP {resp.status}")
                if encrypted is None:
                    await save_stream(resp.content.iter_chunked(65536), target, cap, cap_mb)
                    return
                body = bytearray()
                async for chunk in resp.content.iter_chunked(65536):
                    body += chunk
                    if len(body) > cap:
                        raise TooBig(cap_mb)
                await save_decrypted(bytes(body), encrypted, target)
                return
        raise FileUnavailable("the homeserver does not serve media")

    async def upload_limit(self, again: bool = False) -> int | None:
        """The largest upload the homeserver takes (``m.upload.size``), or None when it does not say; read once
        (``again``: read anew, after the homeserver refused a file the old figure let through)."""
        if self._upload_limit is not None and not again:
            return self._upload_limit
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
        for path in ("/_matrix/client/v1/media/config", "/_matrix/media/v3/config"):
            try:
                async with self._session().get(self.homeserver + path, allow_redirects=False,
                                               timeout=timeout) as resp:
                    if resp.status != 200:
                        continue
                    body = await resp.json(content_type=None)
            except (aiohttp.ClientError, TimeoutError, ValueError):
                continue
            size = body.get("m.upload.size") if isinstance(body, dict) else None
            if isinstance(size, int) and size > 0:
                self._upload_limit = size
                return size
        return None


async def save_decrypted(ciphertext: bytes, file: dict[str, Any], target: Path) -> None:
    from nio.crypto import decrypt_attachment

    try:
        plain = await asyncio.to_thread(decrypt_attachment, ciphertext, file["key"]["k"], file["hashes"]["sha256"],
                                        file["iv"])
    except Exception as exc:
        raise FileUnavailable(f"it could not be decrypted ({type(exc).__name__})") from exc

    async def once() -> Any:
        yield plain

    await save_stream(once(), target, len(plain) + 1, 0)
