"""Every fault the daemon meets and survives is visible: counted, logged, and shown by ``/readyz``.

A *fault* is one event of a class in ``FAULT_CLASSES`` (a model 429, a platform 502, a
malformed request...): ``record`` counts it in ``herald_faults_total{fault}`` and logs one structured
event ``fault`` naming the class. A *condition* is a fault that lasts (the database is unreachable, the
disk is full, another poller holds the bot's updates): ``begin`` records it once when it starts and
``/readyz`` is not ready, giving the reason, until ``end``. Recent faults (the last few minutes) are listed
by ``/readyz`` too, so an operator sees "model_rate_limited: 12" without reading the log.

Everything here is cheap and callable from any thread (the agent's worker threads meet model faults).
What it stores and shows is the class and a fixed reason: never exception text, which can carry a token.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from contextvars import ContextVar
from typing import Any, Protocol

import structlog

log = structlog.get_logger("herald.faults")

RECENT_SECONDS = 300.0

# The classes of faults the daemon counts (herald_faults_total{fault=...}) and names in its log events.
FAULT_CLASSES = (
    "platform_rate_limited", "platform_unavailable", "platform_conflict", "platform_rejected",
    "model_rate_limited", "model_error", "model_timeout", "model_stream_cut", "model_bad_output",
    "database_unavailable", "disk_full", "bad_request", "clock_jump",
    "transcription_failed", "speech_failed", "bad_media",
    "mcp_server_down", "mcp_call_failed",
)


class Counter(Protocol):
    """Where each fault is counted (gateway/kernel/metrics.py's ``Metrics``: ``herald_faults_total{fault}``). A
    protocol, so the ledger imports nothing of the gateway: the store and the adapters use it from below."""

    def fault(self, fault: str) -> None: ...


class _Uncounted:
    def fault(self, fault: str) -> None:
        return None

# agent_core's names for what a model endpoint did (LLMClient's ``on_fault``) -> the fault class. The
# request's own faults (bad_request, context_overflow) and interruptions are not the endpoint's.
MODEL_FAULTS = {
    "rate_limit": "model_rate_limited",
    "timeout": "model_timeout",
    "stream_cut": "model_stream_cut",
    "bad_output": "model_bad_output",
    "server": "model_error",
    "overloaded": "model_error",
    "connection": "model_error",
    "auth": "model_error",
}
_MAX_RECENT = 4096  # events kept for the "recent" counts; more than this in five minutes is shown as a floor
_MINUTES_KEPT = 24 * 60 + 1


class Faults:
    def __init__(self, metrics: Counter | None = None, *, clock: Any = time.monotonic) -> None:
        self.metrics = metrics if metrics is not None else _Uncounted()
        self._clock = clock
        self._lock = threading.Lock()
        self._recent: deque[tuple[float, str]] = deque(maxlen=_MAX_RECENT)
        # Per minute of the clock, the faults per class of the last day (the dashboard's chart): a count, not
        # an event each, so a storm of faults costs no memory.
        self._minutes: deque[tuple[int, dict[str, int]]] = deque(maxlen=_MINUTES_KEPT)
        self._conditions: dict[str, tuple[str, str, float]] = {}  # name -> (fault class, reason, since)
        self._degraded: set[str] = set()  # conditions shown by /readyz that do not make it "not ready"

    def record(self, fault: str, **fields: Any) -> None:
        """One fault of class ``fault``: counted, and logged as one event. ``fields`` are plain data (a
        platform name, a status code, an attempt number), never exception text."""
        if fault not in FAULT_CLASSES:
            raise ValueError(f"unknown fault class {fault!r}")
        with self._lock:
            now = self._clock()
            self._recent.append((now, fault))
            minute = int(now // 60)
            if not self._minutes or self._minutes[-1][0] != minute:
                self._minutes.append((minute, {}))
            counts = self._minutes[-1][1]
            counts[fault] = counts.get(fault, 0) + 1
        self.metrics.fault(fault)
        log.warning("fault", fault=fault, **fields)

    def model(self, kind: str) -> None:
        """A model endpoint's fault as agent_core names it (``LLMClient(on_fault=...)``), from a worker thread."""
        fault = MODEL_FAULTS.get(kind)
        if fault is not None:
            self.record(fault, kind=kind)

    def begin(self, condition: str, fault: str, reason: str, *, degraded: bool = False, **fields: Any) -> bool:
        """A lasting fault starts (``condition`` names it, e.g. ``database`` or ``telegram``): recorded once,
        however often it is reported while it lasts; ``/readyz`` is not ready until ``end`` — unless it is
        ``degraded`` (a part the rest works without, an MCP server): then it is listed and marked so, and the
        daemon stays ready. True when it was not already on."""
        with self._lock:
            if condition in self._conditions:
                return False
            self._conditions[condition] = (fault, reason, self._clock())
            if degraded:
                self._degraded.add(condition)
        self.record(fault, condition=condition, **fields)
        return True

    def end(self, condition: str) -> bool:
        """The condition is over (logged once, with how long it lasted). True when it was on."""
        with self._lock:
            entry = self._conditions.pop(condition, None)
            self._degraded.discard(condition)
        if entry is None:
            return False
        fault, _reason, since = entry
        log.info("fault_cleared", fault=fault, condition=condition,
                 seconds=round(self._clock() - since, 1))
        return True

    def active(self, condition: str) -> bool:
        with self._lock:
            return condition in self._conditions

    def conditions(self) -> dict[str, dict[str, Any]]:
        """What is wrong now, for ``/readyz``: condition -> fault class, fixed reason, seconds so far."""
        now = self._clock()
        with self._lock:
            items = list(self._conditions.items())
            degraded = set(self._degraded)
        return {name: {"fault": fault, "reason": reason, "seconds": round(now - since, 1),
                       **({"degraded": True} if name in degraded else {})}
                for name, (fault, reason, since) in items}

    def blocking(self) -> list[str]:
        """The conditions that make ``/readyz`` not ready (all but the degraded ones)."""
        with self._lock:
            return [name for name in self._conditions if name not in self._degraded]

    def recent(self, seconds: float = RECENT_SECONDS) -> dict[str, int]:
        """Faults per class over the last ``seconds``."""
        horizon = self._clock() - seconds
        counts: dict[str, int] = {}
        with self._lock:
            for at, fault in reversed(self._recent):
                if at < horizon:
                    break
                counts[fault] = counts.get(fault, 0) + 1
        return counts


    def per_class(self, seconds: float) -> dict[str, int]:
        """Faults per class over the last ``seconds`` (whole minutes, up to a day): every one, however many."""
        since = int((self._clock() - seconds) // 60)
        counts: dict[str, int] = {}
        with self._lock:
            for minute, per in reversed(self._minutes):
                if minute <= since:
                    break
                for fault, n in per.items():
                    counts[fault] = counts.get(fault, 0) + n
        return counts


NULL_FAULTS = Faults()


# Whether an operation on the database waits (retrying) while it is unavailable. Work already taken does; a
# caller who is there to read (an HTTP GET: the dashboard, a chat's history) is better answered 503 at once.
WAIT_WHILE_UNAVAILABLE: ContextVar[bool] = ContextVar("herald_wait_while_unavailable", default=True)


class Unavailable(Exception):
    """Something the daemon needs to take new work is down for a while (the database is unreachable, its disk
    is full): the work is refused, not half-taken. An adapter does not acknowledge the platform's event, so
    the platform delivers it again later; an HTTP caller gets a 503 with ``reason``, a fixed text fit for a
    user (never exception text)."""

    def __init__(self, condition: str, fault: str, reason: str) -> None:
        super().__init__(reason)
        self.condition = condition
        self.fault = fault
        self.reason = reason
