"""What can go wrong at a platform's door, in the contract's terms (gateway/platforms/base.py re-exports it all):
the delivery layer decides what to do about a failed ``send``/``edit`` from the class of ``DeliveryError`` it
raised; ``CredentialRejected`` and ``ShuttingDown`` are the other two ways a call ends.

``may_have_arrived``: whether a failed request may have reached the platform, what an adapter needs to know
before it calls a failure ``MaybeSent`` (a resend may show the message twice) or a plain ``TransientError`` (it
never left).

A connection that could not be opened (refused, no route, DNS, TLS, the pool or the connect timing out) carried
nothing. One that broke or went quiet after the request was written (reset, closed by the server, a read timing
out, a torn answer) may have been acted on: the platform could have posted the message and lost only the answer.
aiohttp cannot say whether a reused keep-alive connection was closed before or after it read the request, so a
server closing idle connections shows as the second kind too.
"""

from __future__ import annotations


class CredentialRejected(Exception):
    """The platform refused a credential (wrong, revoked): ``str()`` is what it said, never the credential."""


class ShuttingDown(Exception):
    """New messages are refused while the daemon drains."""


class DeliveryError(Exception):
    """Raised by ``send``/``edit``. The delivery layer decides what to do from the subclass."""


class RateLimited(DeliveryError):
    def __init__(self, retry_after: float, message: str = "rate limited") -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TransientError(DeliveryError):
    """Worth retrying with backoff (network trouble, 5xx)."""


class MaybeSent(TransientError):
    """The connection failed after the request may have reached the platform (``may_have_arrived``): the
    message may be showing already. ``recognised_for``: seconds the platform recognises a resend by its
    idempotency key (Discord's nonce: a few minutes); 0, a resend shows twice, so delivery announces it."""

    def __init__(self, message: str, recognised_for: float = 0.0) -> None:
        super().__init__(message)
        self.recognised_for = recognised_for


class PermanentError(DeliveryError):
    """Retrying won't help (blocked by the user, chat not found, no rights)."""


class FormattingError(DeliveryError):
    """The platform rejected the formatted text; the delivery layer resends it plain."""


def may_have_arrived(exc: BaseException) -> bool:
    """``exc`` (aiohttp's, the OS's, a timeout) broke a request that may have reached the platform already."""
    import aiohttp

    if isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ConnectionTimeoutError | aiohttp.InvalidURL
                  | ConnectionRefusedError):
        return False
    return isinstance(exc, aiohttp.ClientError | OSError | TimeoutError)
