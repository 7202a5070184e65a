"""What the protocol fakes share: an aiohttp app on a port of their own, and what the bot did, waited for by
condition (never by sleeping a guessed amount).

``HttpFake`` serves ``routes()`` on ``host:port`` (port 0: a free one, known once ``serve()`` returns; served
again on the same port after ``close()``). ``PlatformFake`` adds ``sent`` — the bot's messages, in order, as
the fake records them — and ``wait_sent`` / ``wait_until``. A fake's ``start()`` serves and returns the URL
the code under test is pointed at; ``stop()`` ends what it keeps open, then closes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

from aiohttp import web

from tests.support import polling

SentT = TypeVar("SentT")


class HttpFake:
    client_max_size: ClassVar[int] = 10 * 1024**2  # the largest request body taken
    # AppRunner's: handler_cancellation for a fake with long polls or hangs (a client that gave up must not
    # keep a handler waiting); a short shutdown_timeout keeps close() quick with requests still in flight.
    runner_options: ClassVar[dict[str, Any]] = {"shutdown_timeout": 0.5}

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self._runner: web.AppRunner | None = None
        self.ssl_context: Any = None  # set before serving: the fake speaks HTTPS with it

    @property
    def root(self) -> str:
        return f"{'https' if self.ssl_context is not None else 'http'}://{self.host}:{self.port}"

    def routes(self) -> list[web.AbstractRouteDef]:
        raise NotImplementedError

    async def serve(self) -> None:
        app = web.Application(client_max_size=self.client_max_size)
        app.add_routes(self.routes())
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, **self.runner_options)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True, ssl_context=self.ssl_context)
        await site.start()
        if self.port == 0:
            self.port = self._runner.addresses[0][1]

    def open_connections(self) -> int:
        """Connections clients hold open to the fake now."""
        server = self._runner.server if self._runner is not None else None
        return len(server.connections) if server is not None else 0

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


class PlatformFake(HttpFake, Generic[SentT]):
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host, port)
        self.sent: list[SentT] = []
        self._changed = asyncio.Event()  # set whenever the bot did something a test may wait for

    @staticmethod
    def shown(message: SentT) -> str:
        """How a sent message appears in a timed-out wait's report."""
        return str(getattr(message, "text", message))[:80]

    async def wait_sent(self, predicate: Callable[[list[SentT]], bool], timeout: float = 10.0) -> list[SentT]:
        """Until ``predicate(sent)`` holds; ``sent``. Fails showing what was sent by then."""
        async def loop() -> list[SentT]:
            while not predicate(self.sent):
                self._changed.clear()
                await self._changed.wait()
            return self.sent

        try:
            return await asyncio.wait_for(loop(), timeout)
        except TimeoutError:
            raise AssertionError(f"timed out; sent so far: {[self.shown(m) for m in self.sent]!r}") from None

    async def wait_until(self, predicate: Callable[[], Any], timeout: float = 10.0,
                         what: str = "the fake's state") -> Any:
        """For what the fake records besides ``sent`` (answers, confirmations): polled."""
        return await polling.wait_until(predicate, timeout, what)
