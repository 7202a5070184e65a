"""Waiting in tests for something the system does on its own time: poll, never sleep a guessed amount."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

INTERVAL = 0.02

# What a wait was for: a text, or a function giving one when the wait fails (the state at that moment).
What = str | Callable[[], str]


def _failed(what: What, timeout: float) -> AssertionError:
    return AssertionError(f"{what() if callable(what) else what}: not met within {timeout}s")


async def wait_until(predicate: Any, timeout: float = 10.0, what: What = "condition", interval: float = INTERVAL,
                     ) -> Any:
    """Poll ``predicate`` (a function, or one returning a coroutine) until it gives something truthy; return it.
    Fails naming ``what`` once ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise _failed(what, timeout)
        await asyncio.sleep(interval)


def wait_until_sync(predicate: Callable[[], Any], timeout: float = 10.0, what: What = "condition",
                    interval: float = INTERVAL) -> Any:
    """``wait_until`` for a test that is not on an event loop (one driving a daemon process over HTTP)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise _failed(what, timeout)
        time.sleep(interval)
