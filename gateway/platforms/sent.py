"""Whether a failed request may have reached the platform: what an adapter needs to know before it calls a
failure ``MaybeSent`` (a resend may show the message twice) or a plain ``TransientError`` (it never left).

A connection that could not be opened (refused, no route, DNS, TLS, the pool or the connect timing out) carried
nothing. One that broke or went quiet after the request was written (reset, closed by the server, a read timing
out, a torn answer) may have been acted on: the platform could have posted the message and lost only the answer.
aiohttp cannot say whether a reused keep-alive connection was closed before or after it read the request, so a
server closing idle connections shows as the second kind too.
"""

from __future__ import annotations


def may_have_arrived(exc: BaseException) -> bool:
    """``exc`` (aiohttp's, the OS's, a timeout) broke a request that may have reached the platform already."""
    import aiohttp

    if isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ConnectionTimeoutError | aiohttp.InvalidURL
                  | ConnectionRefusedError):
        return False
    return isinstance(exc, aiohttp.ClientError | OSError | TimeoutError)
