"""Serve an async fake (anything with ``async start()`` / ``async stop()``) from a thread with its own loop,
for tests that run ``herald run`` as a subprocess and for benchmarks."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any


class ServedInThread:
    thread_name = "fake"

    def __init__(self, fake: Any) -> None:
        self.fake = fake
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> str:
        """Start the fake; returns what its ``start()`` returned (its base URL)."""
        ready = threading.Event()
        result: list[Any] = []
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                result.append(loop.run_until_complete(self.fake.start()))
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.fake.stop())
            loop.close()

        self._thread = threading.Thread(target=run, name=self.thread_name, daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        return result[0]

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float = 10, **kwargs: Any) -> Any:
        """``fn(fake, *args)`` run on the fake's loop (a coroutine it returns is awaited there); its result."""
        assert self._loop is not None

        async def run() -> Any:
            result = fn(self.fake, *args, **kwargs)
            return await result if asyncio.iscoroutine(result) else result

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout)

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop = None
            self._thread = None
