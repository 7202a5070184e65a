"""The figures behind the dashboard's charts, read from what the database holds already: nothing is recorded for
them on the way of a message.

- Messages per minute: the inbox rows (one per message taken in) by ``created_at``.
- Turn latency: for the rows answered (``done``), ``updated_at - created_at``: from the message's arrival to its
  answer delivered, what the person waited. Counted per minute into logarithmic bins in SQL, so a day of
  traffic comes back as at most (minutes x bins) rows, never one per message; p50 and p99 are read from the
  bins (to within a bin, about 20 %).
- Token cost per day: the ``usage`` table (/usage's data) per local day and model, priced by ``model.prices``.
- Cron runs: ``cron_runs`` of the last day, with their job's name.

Tables are read from the first row of the window on: the id where ``created_at`` reaches it is found by a
binary search over the primary key (ids grow with time), so a query reads the window's rows, not the table's,
and the inbox needs no index of its own for it (an index would cost every message its upkeep). ``Figures`` keeps
what no longer changes — the minutes older than an hour, the days before today — so after the first read each
one reads only the last hour's messages and today's usage (bench/dashboard_charts.py measures both). An answer
that took longer than an hour comes too late for its minute's latency bins.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Integer, Table, and_, case, cast, func, select, true
from sqlalchemy.engine import Connection

from gateway.storage.tables import cron_jobs, cron_runs, inbox, usage

MINUTES = 24 * 60
# Latency bins in seconds: from 10 ms, each √2 wider, to about half an hour; above the last, the overflow bin.
BOUNDS: tuple[float, ...] = tuple(0.01 * 2 ** (i / 2) for i in range(36))
COST_DAYS = 14
RUNS_SHOWN = 1000


@dataclass
class Traffic:
    start: float  # the first of the day's minutes
    messages: list[int] = field(default_factory=lambda: [0] * MINUTES)  # per minute, oldest first
    latency: list[dict[int, int]] = field(default_factory=lambda: [{} for _ in range(MINUTES)])  # bin -> count


@dataclass
class DayCost:
    start: float  # local midnight
    tokens: int
    cost: float | None  # None: no model used that day has a price
    unpriced: list[str]


def first_id_since(conn: Connection, table: Table, since: float) -> int | None:
    """An id from which on every row was created at ``since`` or later and before which none was (ids grow with
    time); None when no row is that recent."""
    # Two statements: SQLite reads min() or max() alone from the index's ends, both together by a full scan.
    lo = conn.execute(select(func.min(table.c.id))).scalar()
    hi = conn.execute(select(func.max(table.c.id))).scalar()
    if lo is None or hi is None:
        return None
    probe = select(table.c.created_at).order_by(table.c.id).limit(1)

    def created_from(at: int) -> float:  # the first row's from id ``at`` on (there is one: ``hi``'s)
        return float(conn.execute(probe.where(table.c.id >= at)).scalar_one())

    if created_from(hi) < since:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if created_from(mid) >= since:
            hi = mid
        else:
            lo = mid + 1
    return int(lo)


def _whole(conn: Connection, value: Any) -> Any:
    """``value`` rounded down to an integer in SQL (SQLite's CAST truncates, which is the same for what is
    never negative here; PostgreSQL's rounds, so it floors first)."""
    return cast(value if conn.dialect.name == "sqlite" else func.floor(value), Integer)


def _bin(waited: Any, low: int = 0, high: int = len(BOUNDS)) -> Any:
    """The latency bin of ``waited`` as a CASE that halves the bounds at each step (six comparisons a row, not
    one per bound)."""
    if low == high:
        return low
    mid = (low + high) // 2
    return case((waited < BOUNDS[mid], _bin(waited, low, mid)), else_=_bin(waited, mid + 1, high))


SETTLED = 60  # minutes after which a minute's figures are kept, no longer read


def minutes_since(conn: Connection, since: float) -> dict[int, tuple[int, dict[int, int]]]:
    """Per minute (since the epoch) from ``since`` on: messages, and the answered ones' latency bins."""
    first = first_id_since(conn, inbox, since)
    if first is None:
        return {}
    minute = _whole(conn, inbox.c.created_at / 60)
    bin_ = case((inbox.c.status != "done", -1), else_=_bin(inbox.c.updated_at - inbox.c.created_at))
    out: dict[int, tuple[int, dict[int, int]]] = {}
    for m, b, n in conn.execute(select(minute, bin_, func.count())
                                .where(and_(inbox.c.id >= first, inbox.c.created_at >= since))
                                .group_by(minute, bin_)):
        count, bins = out.setdefault(int(m), (0, {}))
        if b >= 0:
            bins[int(b)] = bins.get(int(b), 0) + n
        out[int(m)] = (count + n, bins)
    return out


def merged(bins: list[dict[int, int]]) -> dict[int, int]:
    out: dict[int, int] = {}
    for per in bins:
        for b, n in per.items():
            out[b] = out.get(b, 0) + n
    return out


def percentile(hist: dict[int, int], q: float) -> float | None:
    """The ``q`` quantile (0..1) of the latencies counted in ``hist``, interpolated within its bin."""
    total = sum(hist.values())
    if not total:
        return None
    rank = q * total
    seen = 0
    for b in sorted(hist):
        n = hist[b]
        if seen + n >= rank:
            low = BOUNDS[b - 1] if 0 < b <= len(BOUNDS) else 0.0
            high = BOUNDS[b] if b < len(BOUNDS) else BOUNDS[-1] * 2
            return low + (high - low) * max(0.0, min(1.0, (rank - seen) / n))
        seen += n
    return BOUNDS[-1] * 2


def day_starts(now: float, days: int) -> list[float]:
    """Local midnights of the last ``days`` days, oldest first (the last is today's): /usage's days."""
    today = dt.datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0)
    return [(today - dt.timedelta(days=k)).timestamp() for k in range(days - 1, -1, -1)]


def usage_by_day(conn: Connection, starts: list[float], until: float | None = None) -> list[dict[str, Any]]:
    """Per day of ``starts`` (local midnights, oldest first; the last day runs to ``until`` or on), the tokens per
    model."""
    from gateway.turns.usage import Totals

    by_day: list[dict[str, Any]] = [{} for _ in starts]
    first = first_id_since(conn, usage, starts[0])
    if first is None:
        return by_day
    day = case(*[(usage.c.created_at >= s, i) for i, s in reversed(list(enumerate(starts)))], else_=-1)
    where = and_(usage.c.id >= first, usage.c.created_at >= starts[0],
                 usage.c.created_at < until if until is not None else true())
    for d, model, prompt, completion, cached in conn.execute(
            select(day, usage.c.model, func.sum(usage.c.prompt_tokens), func.sum(usage.c.completion_tokens),
                   func.sum(usage.c.cached_tokens)).where(where).group_by(day, usage.c.model)):
        if d >= 0:
            by_day[d][model] = Totals(int(prompt or 0), int(completion or 0), int(cached or 0))
    return by_day


def day_cost(start: float, models: dict[str, Any], prices: dict[str, Any]) -> DayCost:
    from gateway.turns.usage import cost_of

    cost, unpriced = cost_of(models, prices)
    priced = any(m in prices for m, t in models.items() if t.tokens)
    return DayCost(start, sum(t.tokens for t in models.values()), cost if priced else None, unpriced)


def cron_runs_since(conn: Connection, since: float) -> list[dict[str, Any]]:
    """Runs due since ``since``, newest first, with their job's name (None when the job is gone)."""
    stmt = (select(cron_runs.c.id, cron_runs.c.job_id, cron_runs.c.due_at, cron_runs.c.started_at,
                   cron_runs.c.trigger, cron_runs.c.status, cron_runs.c.delivery_status, cron_jobs.c.name)
            .select_from(cron_runs.outerjoin(cron_jobs, cron_jobs.c.id == cron_runs.c.job_id))
            .where(cron_runs.c.due_at >= since).order_by(cron_runs.c.id.desc()).limit(RUNS_SHOWN))
    return [dict(r._mapping) for r in conn.execute(stmt)]


@dataclass
class Figures:
    now: float
    traffic: Traffic
    costs: list[DayCost]
    runs: list[dict[str, Any]]
    faults_hour: dict[str, int]
    faults_day: dict[str, int]


class FigureCache:
    """The database's part of the figures, read by ``read(now, prices)`` (an op for ``Store.run_read``; one at a
    time), keeping the minutes older than SETTLED and the days before today."""

    def __init__(self) -> None:
        self.minutes: dict[int, tuple[int, dict[int, int]]] = {}
        self.days: dict[float, dict[str, Any]] = {}

    def read(self, now: float, prices: dict[str, Any]) -> Any:
        def op(conn: Connection) -> tuple[Traffic, list[DayCost], list[dict[str, Any]]]:
            return self.traffic(conn, now), self.costs(conn, now, prices), cron_runs_since(conn, now - 86_400)

        return op

    def traffic(self, conn: Connection, now: float) -> Traffic:
        last = int(now // 60)
        first, settled = last - MINUTES + 1, last - SETTLED
        for m in [m for m in self.minutes if m < first]:
            del self.minutes[m]
        missing = [m for m in range(first, settled) if m not in self.minutes]
        fresh = minutes_since(conn, (missing[0] if missing else settled) * 60.0)
        for m in missing:
            self.minutes[m] = fresh.get(m, (0, {}))
        out = Traffic(first * 60.0)
        for i in range(MINUTES):
            count, bins = self.minutes.get(first + i) or fresh.get(first + i, (0, {}))
            out.messages[i], out.latency[i] = count, bins
        return out

    def costs(self, conn: Connection, now: float, prices: dict[str, Any]) -> list[DayCost]:
        starts = day_starts(now, COST_DAYS)
        for start in [s for s in self.days if s < starts[0]]:
            del self.days[start]
        past = [s for s in starts[:-1] if s not in self.days]
        if past:
            for start, models in zip(past, usage_by_day(conn, past, until=starts[-1]), strict=True):
                self.days[start] = models
        today = usage_by_day(conn, starts[-1:])[0]
        return [day_cost(s, self.days.get(s, today), prices) for s in starts]
