"""The dashboard's charts panel: the figures (gateway/ops/dashboard/stats.py) drawn as small SVG charts
(charts.py) with a line of words each — messages per minute and turn latency over the last hour and day, token
cost per day, cron runs on a timeline (ran and delivered apart), faults per class."""

from __future__ import annotations

import time
from collections.abc import Sequence

from gateway.ops.dashboard import charts
from gateway.ops.dashboard.charts import Mark, Series, e, num
from gateway.ops.dashboard.stats import MINUTES, Figures, merged, percentile

HOUR_TICKS = ((0.0, "−60 min"), (0.5, "−30 min"), (1.0, "now"))
DAY_TICKS = ((0.0, "−24 h"), (0.25, "−18 h"), (0.5, "−12 h"), (0.75, "−6 h"), (1.0, "now"))
# The classes of a run's two halves, as the job tables colour their badges.
RAN = {"ok": "good", "running": "warn", "failed": "bad", "timed_out": "bad", "missed": "warn", "skipped": "muted"}
DELIVERED = {"delivered": "good", "pending": "warn", "failed": "bad"}
LANES_SHOWN = 12


def charts_section(f: Figures) -> str:
    panels = [_messages(f), _latency(f), _cost(f), _cron(f), _faults(f)]
    return f'<section id="charts"><h2>Activity</h2><div class="panels">{"".join(panels)}</div></section>'


def _panel(ident: str, title: str, note: str, *svgs: str) -> str:
    return (f'<figure class="panel" id="{e(ident)}"><figcaption><strong>{e(title)}</strong> '
            f'<span class="muted">{e(note)}</span></figcaption>{"".join(svgs)}</figure>')


def _chunks(values: Sequence[object], size: int) -> list[Sequence[object]]:
    return [values[i:i + size] for i in range(0, len(values), size)]


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{num(value)} s"


def _messages(f: Figures) -> str:
    minutes = f.traffic.messages
    hour = minutes[-60:]
    hour_tips = [f"{n} message{'s' if n != 1 else ''}, {60 - i} min ago" for i, n in enumerate(hour)]
    quarters = [sum(c) / 15 for c in _chunks(minutes, 15)]  # type: ignore[arg-type]
    day_tips = [f"{num(v)} per minute, {(len(quarters) - i) * 15} min ago" for i, v in enumerate(quarters)]
    note = f"{sum(hour)} in the last hour, {sum(minutes)} in the last day"
    return _panel("chart-messages", "Messages per minute", note,
                  charts.bars(hour, label="messages per minute, last hour", ticks=HOUR_TICKS, tips=hour_tips),
                  charts.bars(quarters, label="messages per minute, last day (15-minute averages)",
                              ticks=DAY_TICKS, tips=day_tips))


def _latency(f: Figures) -> str:
    bins = f.traffic.latency

    def lines(step: int, span: int, ticks: Sequence[tuple[float, str]], label: str) -> str:
        groups = [merged(g) for g in _chunks(bins[-span:], step)]  # type: ignore[arg-type]
        return charts.lines([Series("p50", [percentile(g, 0.5) for g in groups], "p50"),
                             Series("p99", [percentile(g, 0.99) for g in groups], "p99")],
                            label=label, ticks=ticks, unit=" s", empty="No answers yet.")

    hour, day = merged(bins[-60:]), merged(bins)
    note = (f"arrival to answer delivered: p50 {_seconds(percentile(hour, 0.5))}, p99 "
            f"{_seconds(percentile(hour, 0.99))} in the last hour; p50 {_seconds(percentile(day, 0.5))}, p99 "
            f"{_seconds(percentile(day, 0.99))} in the last day")
    return _panel("chart-latency", "Turn latency", note,
                  lines(5, 60, HOUR_TICKS, "turn latency p50 and p99, last hour (5-minute steps)"),
                  lines(30, MINUTES, DAY_TICKS, "turn latency p50 and p99, last day (30-minute steps)"))


def _cost(f: Figures) -> str:
    days = f.costs
    priced = any(d.cost is not None for d in days)
    values = [(d.cost or 0.0) if priced else float(d.tokens) for d in days]
    labels = [time.strftime("%m-%d", time.localtime(d.start)) for d in days]
    tips = [f"{label}: " + (f"${d.cost:.4f}, " if d.cost is not None else "") + f"{d.tokens:,} tokens"
            + (f" (no price for {', '.join(d.unpriced)})" if d.unpriced else "") for label, d in zip(labels, days,
                                                                                                   strict=True)]
    ticks = [(0.0, labels[0]), (0.5, labels[len(labels) // 2]), (1.0, labels[-1])] if labels else []
    total = sum(values)
    if priced:
        note = f"US$, estimated from model.prices: ${total:.4f} over {len(days)} days"
    else:
        note = f"tokens (no model.prices set, so no cost): {total:,.0f} over {len(days)} days"
    return _panel("chart-cost", "Token cost per day", note,
                  charts.bars(values, label="token cost per day" if priced else "tokens per day", ticks=ticks,
                              tips=tips, prefix="$" if priced else "", empty="No model calls yet."))


def _cron(f: Figures) -> str:
    lanes: dict[str, list[Mark]] = {}
    for run in f.runs:
        name = run["name"] or f"{run['job_id']} (removed)"
        at = run["started_at"] or run["due_at"]
        when = time.strftime("%H:%M", time.localtime(at))
        tip = (f"{name}: {run['trigger']} run {run['id']} at {when}: ran {run['status']}, "
               f"delivered {run['delivery_status']}")
        lanes.setdefault(name, []).append(Mark(at, "ran " + RAN.get(run["status"], "muted"),
                                               "delivered " + DELIVERED.get(run["delivery_status"], "muted"), tip))
    shown = sorted(lanes.items())[:LANES_SHOWN]
    ok = sum(1 for r in f.runs if r["status"] == "ok")
    delivered = sum(1 for r in f.runs if r["delivery_status"] == "delivered")
    note = (f"last 24 h, upper half: ran, lower half: delivered — {len(f.runs)} runs, {ok} ran ok, "
            f"{delivered} delivered")
    return _panel("chart-cron", "Cron runs", note,
                  charts.timeline(shown, start=f.now - 86_400, end=f.now, label="cron runs, last 24 hours",
                                  ticks=DAY_TICKS, empty="No cron runs in the last day."))


def _faults(f: Figures) -> str:
    items = sorted(f.faults_day.items(), key=lambda kv: (-kv[1], kv[0]))
    bars = [(name, float(n), f"{name}: {f.faults_hour.get(name, 0)} in the last hour, {n} in the last day")
            for name, n in items]
    note = (f"{sum(f.faults_hour.values())} in the last hour, {sum(f.faults_day.values())} in the last day "
            "(met and handled by this instance since it started)")
    return _panel("chart-faults", "Faults per class", note,
                  charts.hbars(bars, label="faults per class, last day", empty="No faults in the last day."))
