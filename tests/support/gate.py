"""A tool the scripted model can call that runs until the test lets it finish: a slow command without a
guessed sleep (the test waits for ``entered``, does what it must while the tool runs, then ``open``s it)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tools.registry import Tool, ToolContext, registry

NAME = "wait_here"


class Gate:
    def __init__(self) -> None:
        self.entered = threading.Event()
        self.open = threading.Event()

    def handler(self, _args: dict[str, Any], ctx: ToolContext) -> str:
        self.entered.set()
        while not self.open.wait(0.05):
            if ctx.interrupt.is_set():
                return "interrupted"
        return "tool finished"


@contextmanager
def blocking_tool() -> Iterator[Gate]:
    """Registered for the test (before its runner starts: the agent's tool list is fixed at start)."""
    gate = Gate()
    registry.register(Tool(NAME, "waits for the test", {"type": "object", "properties": {}}, gate.handler),
                      replace=True)
    try:
        yield gate
    finally:
        gate.open.set()
        registry._tools.pop(NAME, None)
        registry._schema_cache.clear()
