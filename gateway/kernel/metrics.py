"""The daemon's figures for ``GET /metrics``, in the Prometheus text format written by ``prometheus_client``.

One ``CollectorRegistry`` per runner (tests start several runners in one process; the library's global
registry would refuse the second set of names). Cheap on the hot path: the message counters stay plain
ints in ``Counters`` and the gauges (turns running, queue depth, adapter state) are read
only when scraped, by ``_Snapshot``; what is observed as it happens (turn and LLM latency, deliveries,
approvals, cron runs, loop lag) is one histogram or counter update, with label children bound up front.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, get_args

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from agent_core.errors import ErrorKind
from gateway.kernel.faults import FAULT_CLASSES

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Seconds. Turns span milliseconds (a command, a cached answer) to minutes (tools, approvals).
TURN_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)
WAIT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
LLM_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120)
LAG_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1)

ADAPTER_STATES = ("stopped", "starting", "connected", "retrying", "failed", "disabled")
APPROVAL_OUTCOMES = ("approved", "denied", "expired")
CRON_STATUSES = ("ok", "failed", "timed_out", "missed", "skipped")


@dataclass
class Counters:
    """Messages taken in and turns run, bumped where they happen (one int each) and read at scrape time."""

    messages_accepted: int = 0
    messages_duplicate: int = 0
    messages_denied: int = 0
    messages_routed: int = 0  # accepted and stored for the instance that owns its session
    turns_started: int = 0
    turns_ok: int = 0
    turns_failed: int = 0
    turns_interrupted: int = 0
    turns_timed_out: int = 0
    queue_rejected: int = 0
    messages_parked: int = 0  # set aside after gateway.max_attempts turns that took the daemon down


class Source(Protocol):
    """What the scrape-time gauges read (the runner)."""

    counters: Counters
    adapters: Mapping[str, Any]
    lanes: Any  # .running(), .waiting()

    def loop_lag_quantiles(self) -> tuple[float, float, float]: ...

    def task_count(self) -> int: ...




class Metrics:
    def __init__(self, source: Source | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        r = self.registry
        self.turn_seconds = Histogram(
            "herald_turn_duration_seconds", "From a message's arrival to its reply delivered (queue wait included).",
            buckets=TURN_BUCKETS, registry=r)
        self.turn_wait = Histogram(
            "herald_turn_queue_wait_seconds", "From a message's arrival to its turn starting (session queue, "
            "compute slot).", buckets=WAIT_BUCKETS, registry=r)
        self.loop_lag = Histogram(
            "herald_loop_lag_seconds", "How late the event loop woke a 50 ms timer (anything blocking the loop).",
            buckets=LAG_BUCKETS, registry=r)
        self.llm_seconds = Histogram(
            "herald_llm_request_duration_seconds", "One chat-completions request to the model, by outcome.",
            ["outcome"], buckets=LLM_BUCKETS, registry=r)
        self.llm_errors = Counter(
            "herald_llm_errors", "Failed model requests by kind (rate_limit, server, timeout, auth, ...).",
            ["kind"], registry=r)
        self.deliveries = Counter(
            "herald_deliveries", "Messages delivered to a platform, by outcome (sent, failed).",
            ["platform", "outcome"], registry=r)
        self.approvals = Counter(
            "herald_approvals", "Dangerous-command approval requests settled, by outcome (approved, denied, "
            "expired).", ["outcome"], registry=r)
        self.cron_runs = Counter(
            "herald_cron_runs", "Cron job runs finished, by status (ok, failed, timed_out, missed, skipped).",
            ["status"], registry=r)
        # One family for every fault the daemon meets and survives (tests/faults/ injects them): a platform
        # that rate-limits or drops its connection, a model that fails, a database that goes away, bad input.
        self.faults = Counter(
            "herald_faults", "Faults met (and handled), by class.", ["fault"], registry=r)
        self._llm_ok = self.llm_seconds.labels("ok")
        self._llm_error = self.llm_seconds.labels("error")
        # Every known label value starts at 0, so a rate() works from the first scrape and no family is empty.
        for kind in get_args(ErrorKind):
            self.llm_errors.labels(kind)
        for outcome in APPROVAL_OUTCOMES:
            self.approvals.labels(outcome)
        for status in CRON_STATUSES:
            self.cron_runs.labels(status)
        for fault in FAULT_CLASSES:
            self.faults.labels(fault)
        if source is not None:
            r.register(_Snapshot(source))

    # ---- observations (each a few hundred nanoseconds) -------------------------------------------------

    def turn_done(self, total_seconds: float, waited_seconds: float | None) -> None:
        self.turn_seconds.observe(total_seconds)
        if waited_seconds is not None:
            self.turn_wait.observe(waited_seconds)

    def llm_call(self, seconds: float, error_kind: str | None) -> None:
        """From the agent's worker threads (prometheus_client's metrics are thread-safe)."""
        if error_kind is None:
            self._llm_ok.observe(seconds)
        else:
            self._llm_error.observe(seconds)
            self.llm_errors.labels(error_kind).inc()

    def add_platform(self, platform: str) -> None:
        for outcome in ("sent", "failed"):
            self.deliveries.labels(platform, outcome)

    def delivered(self, platform: str, ok: bool) -> None:
        self.deliveries.labels(platform, "sent" if ok else "failed").inc()

    def fault(self, fault: str) -> None:
        """Count one fault of class ``fault``; the caller logs one structured event naming the same class."""
        self.faults.labels(fault).inc()

    def approval(self, outcome: str) -> None:
        self.approvals.labels(outcome).inc()

    def cron_run(self, status: str) -> None:
        self.cron_runs.labels(status).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _Snapshot(Collector):
    """Gauges and the runner's plain counters, read at scrape time only."""

    def __init__(self, source: Source) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        s = self.source
        c = s.counters
        messages = CounterMetricFamily("herald_messages", "Messages taken in, by outcome (accepted, duplicate "
                                       "dropped, sender denied; routed: accepted and stored for the instance that "
                                       "owns its session).", labels=["outcome"])
        for outcome, count in (("accepted", c.messages_accepted), ("duplicate", c.messages_duplicate),
                               ("denied", c.messages_denied), ("routed", c.messages_routed)):
            messages.add_metric([outcome], count)
        yield messages
        yield CounterMetricFamily("herald_turns_started", "Agent turns started.", value=c.turns_started)
        turns = CounterMetricFamily("herald_turns", "Agent turns finished, by outcome.", labels=["outcome"])
        for outcome, count in (("ok", c.turns_ok), ("failed", c.turns_failed), ("interrupted", c.turns_interrupted),
                               ("timed_out", c.turns_timed_out)):
            turns.add_metric([outcome], count)
        yield turns
        yield CounterMetricFamily("herald_queue_rejected", "Messages refused because their session's queue was "
                                  "full.", value=c.queue_rejected)
        yield CounterMetricFamily("herald_messages_parked", "Messages set aside, not run again: their turns began "
                                  "gateway.max_attempts times and the daemon stopped each time.",
                                  value=c.messages_parked)
        yield GaugeMetricFamily("herald_turns_running", "Agent turns running now.", value=s.lanes.running())
        yield GaugeMetricFamily("herald_queue_depth", "Messages waiting in session queues now.",
                                value=s.lanes.waiting())
        p50, p99, worst = s.loop_lag_quantiles()
        for name, value, what in (("p50", p50, "median"), ("p99", p99, "99th percentile"), ("max", worst, "worst")):
            yield GaugeMetricFamily(f"herald_loop_lag_{name}_seconds", f"Event-loop lag over the last minute, "
                                    f"{what}.", value=value)
        yield GaugeMetricFamily("herald_tasks", "asyncio tasks alive in the daemon's event loop now (one that only "
                                "grows under a steady load is a leak: bench/soak.py watches it).", value=s.task_count())
        up = GaugeMetricFamily("herald_adapter_up", "1 when the platform adapter is connected.", labels=["platform"])
        state = GaugeMetricFamily("herald_adapter_state", "The platform adapter's state (1 for the current one).",
                                  labels=["platform", "state"])
        for name, adapter in s.adapters.items():
            up.add_metric([name], 1 if adapter.state == "connected" else 0)
            for st in ADAPTER_STATES:
                state.add_metric([name, st], 1 if adapter.state == st else 0)
        yield up
        yield state


NULL_METRICS = Metrics()  # for parts built without a runner (tests, the CLI): observations go nowhere read

LLMObserver = Callable[[float, str | None], None]
