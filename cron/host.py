"""What cron gets from the gateway, in one place: its configuration, the store, the turn executor for its
runs, delivery and the adapters for its results, and the daemon's lifecycle. Built by the runner and
handed to the scheduler; nothing in cron imports the runner."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.config import Config
from gateway.kernel.faults import NULL_FAULTS, Faults
from gateway.kernel.metrics import NULL_METRICS, Metrics
from gateway.outbound.delivery import Delivery
from gateway.platforms.base import Source
from gateway.ports import Adapters, DetachedTurns, Lifecycle
from gateway.storage.store import Store
from tools.sandbox import SandboxPolicy


@dataclass(frozen=True)
class CronHost:
    cfg: Config
    store: Store
    turns: DetachedTurns
    delivery: Delivery
    adapters: Adapters
    life: Lifecycle
    is_admin: Callable[[Source], bool]  # may act on every chat's jobs
    # The policy the agent's commands run under: jobs' scripts run under it too.
    sandbox: Callable[[], SandboxPolicy | None]
    metrics: Metrics = NULL_METRICS  # cron_run(status) for each finished run
    # The other instances of the database (gateway/cluster/bus.py): told when a run's delivery is left to them.
    peers: Any = None
    faults: Faults = NULL_FAULTS  # record("clock_jump", ...) when the wall clock steps
