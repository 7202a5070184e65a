"""The Graph API (Cloud API) over one pooled aiohttp session, and its errors in the delivery layer's terms.

Meta answers a refused call with ``{"error": {"code", "message", "error_data": {"details"}, ...}}``; the code
decides what delivery does: a rate limit (130429 throughput, 131056 the pair rate limit between the business and
one person, 4 / 80007 / 613 the app's and the account's) becomes ``RateLimited``, so only that chat waits; Meta
being unwell (5xx, 1, 2, 131000, 131016) ``TransientError``; 131047 (more than 24 hours since the person wrote)
``WindowClosed``, which the outbound part turns into a template; everything else ``PermanentError`` with Meta's
own words, which the dashboard shows. Nothing here retries: delivery decides.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gateway.platforms.base import PermanentError, RateLimited, TransientError

PAIR_RATE_LIMIT = 131056
RE_ENGAGEMENT = 131047
THROUGHPUT = frozenset({130429, 4, 80007, 613})
UNWELL = frozenset({1, 2, 131000, 131016, 133004})
# The token is wrong, expired or lacks a permission: no retry can help, an operator must act.
CREDENTIALS = frozenset({0, 3, 10, 102, 190, 200, 131005})


class WindowClosed(PermanentError):
    """WhatsApp takes no free-form message now: the person's last message is more than 24 hours old."""


class GraphError(Exception):
    """A call the Graph API refused: ``status`` (HTTP), ``code`` (Meta's), and its words."""

    def __init__(self, status: int, code: int | None, title: str, details: str = "") -> None:
        self.status, self.code, self.title, self.details = status, code, title, details
        super().__init__(self.said())

    def said(self) -> str:
        words = self.title if not self.details or self.details in self.title else f"{self.title}: {self.details}"
        return f"WhatsApp refused it ({self.code if self.code is not None else f'HTTP {self.status}'}): {words}"


def error_of(status: int, body: Any) -> GraphError:
    """The ``GraphError`` an answer with ``status`` and JSON ``body`` (or whatever came) stands for."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return GraphError(status, None, f"HTTP {status}")
    code = error.get("code")
    data = error.get("error_data") if isinstance(error.get("error_data"), dict) else {}
    return GraphError(status, code if isinstance(code, int) and not isinstance(code, bool) else None,
                      str(error.get("error_user_msg") or error.get("message") or error.get("title") or "error")[:300],
                      str(data.get("details") or "")[:500])


def map_error(exc: BaseException, backoff: float) -> Exception:
    """A Graph API or aiohttp exception -> the delivery layer's class (returned, for ``raise ... from exc``);
    ``backoff``: the seconds a rate-limited chat waits now (the caller grows it while the limit holds)."""
    import aiohttp

    if isinstance(exc, GraphError):
        if exc.code == RE_ENGAGEMENT:
            return WindowClosed(exc.said())
        if exc.code == PAIR_RATE_LIMIT or exc.code in THROUGHPUT or exc.status == 429:
            return RateLimited(backoff, exc.said())
        if exc.code in UNWELL or exc.status >= 500:
            return TransientError(exc.said())
        if exc.code in CREDENTIALS or exc.status == 401:
            return PermanentError(f"{exc.said()} (check the access token in platforms.whatsapp.access_token_env)")
        return PermanentError(exc.said())
    if isinstance(exc, aiohttp.ClientError | TimeoutError | ConnectionError):
        return TransientError(f"{type(exc).__name__}: {exc}")
    return PermanentError(f"{type(exc).__name__}: {exc}")


def signature(secret: str, body: bytes) -> str:
    """X-Hub-Signature-256's value for ``body``: HMAC-SHA256 with the app secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def appsecret_proof(token: str, app_secret: str) -> str:
    """What the Graph API checks a call against when the app asks for it: the token signed with the app secret."""
    return hmac.new(app_secret.encode(), token.encode(), hashlib.sha256).hexdigest()


def file_hosts(base_url: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """Where the access token may go for a file's bytes: the API's host, and Meta's file hosts (by suffix)."""
    return frozenset({urlsplit(base_url).hostname or ""} - {""}), (".fbsbx.com", ".facebook.com", ".whatsapp.net")


def http_session(pool_size: int = 256) -> Any:
    import aiohttp

    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=pool_size, keepalive_timeout=60),
                                 timeout=aiohttp.ClientTimeout(total=60, sock_connect=10))


class Graph:
    """The calls Herald makes, for one business number: messages, media, the number itself."""

    def __init__(self, base_url: str, phone_number_id: str, token: str, session: Any) -> None:
        self.base = base_url.rstrip("/")
        self.phone = phone_number_id
        self.session = session
        self.headers = {"Authorization": f"Bearer {token}"}
        self.hosts, self.host_suffixes = file_hosts(base_url)

    async def _json(self, method: str, url: str, **kwargs: Any) -> dict[str, Any]:
        async with self.session.request(method, url, headers=self.headers, **kwargs) as resp:
            try:
                body = await resp.json(content_type=None)
            except ValueError:
                body = None
            if resp.status >= 400 or not isinstance(body, dict) or "error" in body:
                raise error_of(resp.status, body)
            return body

    async def message(self, payload: dict[str, Any]) -> dict[str, Any]:
        """POST /{phone number id}/messages: a message, or a read receipt (with the typing indicator)."""
        return await self._json("POST", f"{self.base}/{self.phone}/messages",
                                json={"messaging_product": "whatsapp", **payload})

    async def number(self, **params: str) -> dict[str, Any]:
        return await self._json("GET", f"{self.base}/{self.phone}", params=params)

    async def upload(self, path: Path, filename: str, mime: str) -> str:
        """POST /{phone number id}/media (multipart): the media id a message then sends the file by."""
        import aiohttp

        form = aiohttp.FormData()
        form.add_field("messaging_product", "whatsapp")
        form.add_field("type", mime)
        with path.open("rb") as f:
            form.add_field("file", f, filename=filename, content_type=mime)
            body = await self._json("POST", f"{self.base}/{self.phone}/media", data=form)
        media_id = body.get("id")
        if not isinstance(media_id, str) or not media_id:
            raise GraphError(200, None, "the upload gave no media id")
        return media_id

    async def media(self, media_id: str) -> dict[str, Any]:
        """GET /{media id}: where a file someone sent can be had for the next few minutes (url, mime_type,
        sha256, file_size)."""
        return await self._json("GET", f"{self.base}/{media_id}")

    def may_fetch(self, url: str) -> bool:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if host in self.hosts:
            return parts.scheme in ("http", "https")
        return parts.scheme == "https" and host.endswith(self.host_suffixes)

    async def stream(self, url: str) -> AsyncIterator[bytes]:
        """The bytes at a media URL, with the token (only to ``may_fetch`` hosts)."""
        if not self.may_fetch(url):
            raise PermanentError("the media URL is not on a host the access token may be sent to")
        async with self.session.get(url, headers=self.headers) as resp:
            if resp.status >= 400:
                raise GraphError(resp.status, None, f"the file download answered HTTP {resp.status}")
            async for chunk in resp.content.iter_chunked(64 * 1024):
                yield chunk
