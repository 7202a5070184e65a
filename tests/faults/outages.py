"""Shared pieces of the model- and platform-fault tests: reading what the daemon counted and said about the
faults it met (``herald_faults_total``, ``/readyz``), what a chat shows and what a session stored; and a store
whose database is out of reach (``database_down``)."""

from __future__ import annotations

import asyncio
import re
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import aiohttp

from gateway.platforms.base import Source
from gateway.runner import GatewayRunner

_FAULT_LINE = re.compile(r'^herald_faults_total\{fault="([a-z_]+)"\} ([0-9.e+]+)$', re.M)
# What a user must never be shown when a turn gives up: a stack trace, a Python exception's repr.
TRACE_MARKS = ("Traceback", 'File "', "Error(", "Exception(", "LLMError", "httpx", "openai.")


def fault_counts(runner: GatewayRunner) -> dict[str, int]:
    """``herald_faults_total`` by class, as the /metrics text says."""
    text = runner.metrics.render().decode()
    return {name: int(float(value)) for name, value in _FAULT_LINE.findall(text)}


def faults_since(runner: GatewayRunner, before: dict[str, int]) -> dict[str, int]:
    """The classes that grew since ``before`` (a ``fault_counts``), and by how much."""
    now = fault_counts(runner)
    return {k: v - before.get(k, 0) for k, v in now.items() if v != before.get(k, 0)}


async def readyz(runner: GatewayRunner) -> tuple[int, dict[str, Any]]:
    url = f"http://127.0.0.1:{runner._http.port}/readyz"
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        return resp.status, await resp.json()


async def until(predicate: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def until_async(predicate: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def shown(qa: Any) -> dict[str, str]:
    """Each message a QA channel holds, by id, with its text after every edit."""
    current = {s.message_id: s.text for s in qa.sent}
    for _chat, message_id, text in qa.edits:
        if text is not None:
            current[message_id] = text
    return current


def shown_in(qa: Any, chat_id: str) -> list[str]:
    """What ``chat_id`` shows now, in the order its messages were posted."""
    now = shown(qa)
    return [now[s.message_id] for s in qa.sent if s.chat_id == chat_id]


async def stored_history(runner: GatewayRunner, source: Source) -> list[dict[str, Any]]:
    """Every message the chat's active session stored, in order."""
    row = await runner.store.sessions.active(runner.key_for(source))
    return [] if row is None else await runner.store.messages.history(row["id"])


def consistent(history: list[dict[str, Any]]) -> list[str]:
    """What is wrong with a stored history as the model would be sent it: an assistant message with neither
    text nor tool calls, tool calls without their results (or results without their call), arguments
    that are not a JSON object. Empty: nothing."""
    import json

    problems: list[str] = []
    open_calls: set[str] = set()
    for n, msg in enumerate(history):
        role = msg.get("role")
        if role != "tool" and open_calls:
            problems.append(f"#{n}: calls {sorted(open_calls)} have no result before a {role} message")
            open_calls.clear()
        if role == "assistant":
            calls = msg.get("tool_calls") or []
            if not calls and not (msg.get("content") or "").strip():
                problems.append(f"#{n}: an empty assistant message")
            for call in calls:
                open_calls.add(call.get("id"))
                try:
                    if not isinstance(json.loads(call["function"]["arguments"]), dict):
                        raise ValueError
                except (ValueError, KeyError, TypeError):
                    problems.append(f"#{n}: tool call arguments that are not a JSON object")
        elif role == "tool":
            if msg.get("tool_call_id") not in open_calls:
                problems.append(f"#{n}: a result without its call")
            open_calls.discard(msg.get("tool_call_id"))
    if open_calls:
        problems.append(f"calls {sorted(open_calls)} have no result at the end")
    return problems


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def median(values: list[float]) -> float:
    return statistics.median(values)


@contextmanager
def database_down(store: Any) -> Iterator[None]:
    """``store``'s database out of reach for the block, as when PostgreSQL stops: every operation meets a refused
    connection, which the store takes for the database being down (``unavailable_kind``). What may wait (work
    taken already) waits and finishes afterwards; what may not (a new message) is refused with ``Unavailable``."""

    down = True
    write, read = store._write_once, store._read_once

    # A waiting operation keeps the function it was given: once the block ends it must reach the database, as a
    # retry does when PostgreSQL is back, not meet a refusal for ever.
    async def write_once(op: Any) -> Any:
        if down:
            raise ConnectionRefusedError(111, "Connection refused")
        return await write(op)

    async def read_once(op: Any) -> Any:
        if down:
            raise ConnectionRefusedError(111, "Connection refused")
        return await read(op)

    store._write_once, store._read_once = write_once, read_once
    try:
        yield
    finally:
        down = False
        del store._write_once, store._read_once  # the class's own again
