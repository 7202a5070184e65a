"""Waiting in tests for something the system does on its own time: poll, never sleep a guessed amount."""

from __future__ import annotations

import asyncio
import time
from typing import Any


async def wait_until(predicate: Any, timeout: float = 10.0, what: str = "condition") -> Any:
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
            raise AssertionError(f"{what}: not met within {timeout}s")
        await asyncio.sleep(0.02)
