"""The HTTP client under the openai SDK: keep-alive connections on ``http.client``, shared without a lock.

The SDK's default transport (httpcore over h11, in pure Python) was the largest single cost of a turn: about
half of a model call's CPU went to h11's state machine and header validation, and with a hundred turns in
the model call at once the connection pool's one lock convoyed every worker thread through the GIL. Here the
idle connections wait in a deque per server, taken and given back with its atomic pop and append: the newest
is reused first, and those idle past ``IDLE_SECONDS`` are closed as others come back, so the open connections
follow how many calls ran at once lately. The SDK still builds each request, makes each error from the
response, and reads the body.

A proxy from the environment (``HTTPS_PROXY`` and the rest) keeps the SDK's default client, which honours it.
"""

from __future__ import annotations

import collections
import http.client
import select
import ssl
import time
import urllib.request
import weakref
from typing import Any

from agent_core.sdk import openai

try:  # the SDK moved from httpx to its httpx2 fork
    import httpx2 as httpx
except ImportError:  # pragma: no cover
    import httpx

__all__ = ["LeanTransport", "model_http_client"]

Key = tuple[str, str, int | None]  # scheme, host, port
IDLE_SECONDS = 5.0  # an idle connection older than this is closed, not reused (httpcore's keep-alive expiry)
# As many idle connections as the SDK may open: past its default 100, each finished call closed its connection.
LIMITS = httpx.Limits(max_connections=1000, max_keepalive_connections=1000)


def model_http_client(timeout: float) -> Any:
    """The ``http_client`` for an ``openai.OpenAI``: the SDK's defaults, on a ``LeanTransport`` unless a proxy
    is configured in the environment."""
    proxies = urllib.request.getproxies()  # what httpx reads from the environment too
    if any(proxies.get(scheme) for scheme in ("http", "https", "all")):
        return openai.DefaultHttpxClient(timeout=timeout, limits=LIMITS)
    return openai.DefaultHttpxClient(timeout=timeout, transport=LeanTransport())


class LeanTransport(httpx.BaseTransport):
    """HTTP/1.1 with keep-alive; errors raised as httpx's own."""

    def __init__(self) -> None:
        self._clock = time.monotonic
        self._waiting: dict[Key, collections.deque[tuple[float, http.client.HTTPConnection]]] = {}
        self._open: weakref.WeakSet[http.client.HTTPConnection] = weakref.WeakSet()
        self._ssl: ssl.SSLContext | None = None
        self._closed = False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"the model's URL has an unsupported scheme: {url.scheme!r}")
        body = request.read()
        headers = request.headers.raw
        if "transfer-encoding" in request.headers:  # a streamed body, read whole above: sent with its length
            headers = [(n, v) for n, v in headers if n.lower() not in (b"transfer-encoding", b"content-length")]
            headers.append((b"Content-Length", str(len(body)).encode()))
        timeouts = request.extensions.get("timeout") or {}
        key = (url.scheme, url.host, url.port)
        conn = self._idle(key)
        if conn is None:
            conn = self._connect(url, timeouts.get("connect"), timeouts.get("read"))
        try:
            conn.putrequest(request.method, url.raw_path.decode("ascii"), skip_host=True, skip_accept_encoding=True)
            for name, value in headers:
                conn.putheader(name, value)
            conn.endheaders(body or None)
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise _mapped(exc, httpx.WriteTimeout, httpx.WriteError, request) from exc
        try:
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise _mapped(exc, httpx.ReadTimeout, httpx.RemoteProtocolError, request) from exc
        return httpx.Response(resp.status, headers=resp.getheaders(), stream=_Body(self, key, conn, resp, request),
                              extensions={"http_version": b"HTTP/1.1", "reason_phrase": resp.reason.encode()})

    def close(self) -> None:
        self._closed = True
        for conn in list(self._open):
            conn.close()

    # ---- connections ----------------------------------------------------------------------------------

    def _idle(self, key: Key) -> http.client.HTTPConnection | None:
        idle = self._waiting.get(key)
        now = self._clock()
        while idle:
            try:
                since, conn = idle.pop()
            except IndexError:  # another thread took the last one
                return None
            # Readable while idle means the server closed it (or sent what no request asked for): not reusable.
            if now - since < IDLE_SECONDS and conn.sock is not None and not _readable(conn.sock):
                return conn
            conn.close()
        return None

    def _release(self, key: Key, conn: http.client.HTTPConnection) -> None:
        if self._closed:
            conn.close()
            return
        idle = self._waiting.get(key)
        if idle is None:
            idle = self._waiting.setdefault(key, collections.deque())
        now = self._clock()
        idle.append((now, conn))
        # The oldest wait at the left: those idle too long are closed here rather than kept for a reuse that
        # would only find them stale.
        while True:
            try:
                if now - idle[0][0] < IDLE_SECONDS:
                    break
                since, old = idle.popleft()
            except IndexError:  # other threads took the rest meanwhile
                break
            if now - since < IDLE_SECONDS:  # the deque moved meanwhile: it was a fresh one
                idle.append((since, old))
                break
            old.close()

    def _connect(self, url: httpx.URL, connect_s: float | None, read_s: float | None) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection
        if url.scheme == "https":
            if self._ssl is None:
                self._ssl = httpx.create_ssl_context()
            conn = http.client.HTTPSConnection(url.host, url.port, timeout=connect_s, context=self._ssl)
        else:
            conn = http.client.HTTPConnection(url.host, url.port, timeout=connect_s)
        try:
            conn.connect()
        except OSError as exc:
            conn.close()
            raise _mapped(exc, httpx.ConnectTimeout, httpx.ConnectError, None) from exc
        assert conn.sock is not None
        conn.sock.settimeout(read_s)
        self._open.add(conn)
        return conn


class _Body(httpx.SyncByteStream):
    """A response's body as it arrives; read to its end, its connection waits for the next request."""

    def __init__(self, transport: LeanTransport, key: Key, conn: http.client.HTTPConnection,
                 resp: http.client.HTTPResponse, request: httpx.Request) -> None:
        self._transport, self._key, self._conn, self._resp, self._request = transport, key, conn, resp, request

    def __iter__(self) -> Any:
        resp = self._resp
        while True:
            try:
                data = resp.read1(65536)
            except (OSError, http.client.HTTPException) as exc:
                raise _mapped(exc, httpx.ReadTimeout, httpx.ReadError, self._request) from exc
            if not data:
                return
            yield data

    def close(self) -> None:
        resp, conn = self._resp, self._conn
        # Only a body read to its end leaves the connection ready for the next request; a call cut short (an
        # interrupt, an error) closes it rather than drain what the server is still sending.
        whole = resp.isclosed() or resp.length == 0  # read1 leaves a sized body open at its end
        if whole and not resp.will_close and conn.sock is not None:
            resp.close()  # its file, not the socket: the connection takes its next request only after this
            self._transport._release(self._key, conn)
        else:
            resp.close()
            conn.close()


def _readable(sock: Any) -> bool:
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


def _mapped(exc: BaseException, timeout_cls: type[httpx.TransportError], other_cls: type[httpx.TransportError],
            request: httpx.Request | None) -> httpx.TransportError:
    """httpx's exception for ``exc``: the SDK and agent_core.errors classify those (a timeout stays one)."""
    cls = timeout_cls if isinstance(exc, TimeoutError) else other_cls
    err = cls(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    if request is not None:
        err.request = request
    return err
