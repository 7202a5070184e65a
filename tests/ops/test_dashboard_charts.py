"""The dashboard's charts: the SVG builders (shapes, escaping, empty data, well-formed), the figures read from
the database (messages and latency per minute from the inbox, cost per local day from usage, cron runs), and
the panel that puts them together."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from sqlalchemy import delete, insert

from gateway.config import ModelPrice
from gateway.ops.dashboard import charts, panels, stats
from gateway.ops.dashboard.charts import Mark, Series
from gateway.storage.store import Store
from gateway.storage.tables import cron_jobs, cron_runs, inbox, usage

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = '<script>alert("x")</script>&'


def parsed(svg: str) -> ET.Element:
    """The chart as XML: it must be well-formed (escaping included) to be shown at all."""
    return ET.fromstring(svg.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1))


def texts(root: ET.Element) -> list[str]:
    return ["".join(el.itertext()) for el in root.iter(SVG + "text")]


def test_bars_draw_one_rect_per_figure_above_zero_with_its_tooltip() -> None:
    root = parsed(charts.bars([3, 0, 7, 1, 0], label=f"messages {HOSTILE}", tips=["a", "b", HOSTILE, "d", "e"],
                              ticks=[(0, "−60 min"), (1, "now")]))
    rects = root.findall(f".//{SVG}rect")
    assert len(rects) == 3
    assert [r.find(SVG + "title").text for r in rects] == ["a", HOSTILE, "d"]
    heights = [float(r.get("height")) for r in rects]
    assert heights[1] > heights[0] > heights[2]  # 7 > 3 > 1, to scale
    assert root.get("aria-label") == f"messages {HOSTILE}"
    assert "10" in texts(root) and "−60 min" in texts(root)  # the axis tops out at a round 10


def test_the_markup_escapes_what_it_is_given() -> None:
    svg = charts.bars([1], label=HOSTILE, tips=[HOSTILE])
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    svg = charts.timeline([(HOSTILE, [Mark(50, "ran good", "delivered bad", HOSTILE)])], start=0, end=100,
                          label="runs")
    assert "<script>" not in svg
    svg = charts.hbars([(HOSTILE, 2, HOSTILE)], label="faults")
    assert "<script>" not in svg
    svg = charts.lines([Series(HOSTILE, [1.0], "p50")], label="latency")
    assert "<script>" not in svg


def test_empty_data_draws_the_frame_and_says_so() -> None:
    for svg in (charts.bars([], label="x", empty="Nothing yet."), charts.bars([0, 0], label="x", empty="Nothing yet."),
                charts.lines([Series("p50", [None, None], "p50")], label="x", empty="Nothing yet."),
                charts.timeline([], start=0, end=1, label="x", empty="Nothing yet."),
                charts.hbars([], label="x", empty="Nothing yet.")):
        root = parsed(svg)
        assert "Nothing yet." in texts(root)
        assert root.findall(f".//{SVG}rect") == [] and root.findall(f".//{SVG}path") == []


def test_lines_break_where_a_figure_is_missing() -> None:
    root = parsed(charts.lines([Series("p50", [0.2, 0.3, None, 0.25], "p50"),
                                Series("p99", [1.5, None, None, 2.0], "p99")], label="latency", unit=" s"))
    paths = {p.get("class"): p.get("d") for p in root.iter(SVG + "path")}
    assert paths["line p50"].count("M") == 2 and paths["line p50"].count("L") == 1
    assert paths["line p99"].count("M") == 2 and "L" not in paths["line p99"]
    assert len(root.findall(f".//{SVG}circle")) == 5
    assert {"p50", "p99"} <= set(texts(root))


def test_a_timeline_has_a_row_per_lane_and_two_halves_per_run() -> None:
    root = parsed(charts.timeline([("report", [Mark(10, "ran good", "delivered good", "ok"),
                                               Mark(90, "ran bad", "delivered muted", "failed")]),
                                   ("backup", [Mark(50, "ran good", "delivered bad", "not delivered")])],
                                  start=0, end=100, label="runs"))
    marks = [g for g in root.iter(SVG + "g") if g.get("class") == "mark"]
    assert [g.find(SVG + "title").text for g in marks] == ["ok", "failed", "not delivered"]
    assert [[r.get("class") for r in g.findall(SVG + "rect")] for g in marks][1] == ["ran bad", "delivered muted"]
    xs = [float(g.find(SVG + "rect").get("x")) for g in marks]
    assert xs[0] < xs[2] < xs[1]  # placed by time
    assert {"report", "backup"} <= set(texts(root))


def test_figures_are_written_short() -> None:
    assert [charts.num(v) for v in (0, 3, 0.0123, 0.5, 12.345, 1234.5)] == ["0", "3", "0.012", "0.50", "12", "1,234"]
    assert [charts.nice_max(v) for v in (0, 0.3, 7, 10, 11, 4500)] == [1, 0.5, 10, 10, 20, 5000]


def test_percentiles_are_read_from_the_bins() -> None:
    def bin_of(seconds: float) -> int:
        return next((i for i, bound in enumerate(stats.BOUNDS) if seconds < bound), len(stats.BOUNDS))

    hist: dict[int, int] = {}
    for seconds in [0.1] * 98 + [5.0] * 2:
        hist[bin_of(seconds)] = hist.get(bin_of(seconds), 0) + 1
    p50, p99 = stats.percentile(hist, 0.5), stats.percentile(hist, 0.99)
    assert p50 is not None and 0.07 < p50 < 0.15
    assert p99 is not None and 3.5 < p99 < 7.1
    assert stats.percentile({}, 0.5) is None


@pytest.fixture
async def store(db_url: str) -> Any:
    store = Store(db_url)
    await store.init()
    yield store
    await store.close()


async def test_messages_and_latency_per_minute_come_from_the_inbox(store: Store) -> None:
    now = time.time()
    rows = [{"platform": "web", "platform_message_id": f"m{i}", "session_key": "web:dm:c", "payload": {},
             "status": status, "created_at": at, "updated_at": at + waited}
            for i, (at, waited, status) in enumerate(
                [(now - 2 * 86_400, 1, "done")]  # older than the day: not counted
                + [(now - 30 * 60 + i, 0.2, "done") for i in range(10)]
                + [(now - 30 * 60 + 20, 8.0, "done"), (now - 30 * 60 + 30, 0, "pending"),
                   (now - 5 * 3600, 2.0, "done")])]
    await store.run_write(lambda conn: conn.execute(insert(inbox), rows))
    # A gap in the ids (retention, a rolled-back insert) does not mislead the search for the window's first row.
    await store.run_write(lambda conn: conn.execute(delete(inbox).where(inbox.c.platform_message_id == "m3")))
    figures = stats.FigureCache()
    traffic = await store.run_read(lambda conn: figures.traffic(conn, now))
    assert sum(traffic.messages) == 12 and sum(traffic.messages[-60:]) == 11
    last_hour = stats.merged(traffic.latency[-60:])
    assert sum(last_hour.values()) == 10  # answered ones only
    p50, p99 = stats.percentile(last_hour, 0.5), stats.percentile(last_hour, 0.99)
    assert p50 is not None and 0.14 < p50 < 0.29
    assert p99 is not None and 5.6 < p99 < 11.4
    assert sum(stats.merged(traffic.latency).values()) == 11


async def test_minutes_older_than_an_hour_are_read_once_and_kept(store: Store) -> None:
    now = time.time()

    def row(name: str, at: float) -> dict[str, Any]:
        return {"platform": "web", "platform_message_id": name, "session_key": "k", "payload": {}, "status": "done",
                "created_at": at, "updated_at": at + 1}

    await store.run_write(lambda conn: conn.execute(insert(inbox), [row("old", now - 3 * 3600),
                                                                     row("recent", now - 600)]))
    figures = stats.FigureCache()
    assert sum((await store.run_read(lambda conn: figures.traffic(conn, now))).messages) == 2
    # Kept: what is older than an hour is not read again (here: it is gone and still counted); the last hour is.
    await store.run_write(lambda conn: conn.execute(delete(inbox)))
    await store.run_write(lambda conn: conn.execute(insert(inbox), [row("new", now - 60)]))
    traffic = await store.run_read(lambda conn: figures.traffic(conn, now + 5))
    assert sum(traffic.messages) == 2 and sum(traffic.messages[-60:]) == 1
    # A day later, the kept minutes are gone too.
    assert sum((await store.run_read(lambda conn: figures.traffic(conn, now + 86_400))).messages) == 0
    assert all(m > (now // 60) for m in figures.minutes)


async def test_first_id_since_finds_the_window_on_the_primary_key(store: Store) -> None:
    rows = [{"platform": "web", "platform_message_id": f"m{i}", "session_key": "k", "payload": {}, "status": "done",
             "created_at": 1000.0 + i, "updated_at": 1000.0 + i} for i in range(50)]
    await store.run_write(lambda conn: conn.execute(insert(inbox), rows))
    ids = await store.run_read(lambda conn: [stats.first_id_since(conn, inbox, t) for t in (0, 1020, 1049, 1050)])
    first = ids[0]
    assert ids[1:] == [first + 20, first + 49, None]


async def test_cost_per_local_day_from_usage(store: Store) -> None:
    now = time.time()
    today, yesterday = stats.day_starts(now, 2)[1], stats.day_starts(now, 2)[0]
    rows = [{"platform": "web", "user_id": "u", "model": model, "prompt_tokens": p, "completion_tokens": c,
             "cached_tokens": 0, "calls": 1, "estimated": False, "created_at": at}
            for model, p, c, at in [("priced", 0, 1_000_000, yesterday + 5), ("priced", 1_000_000, 0, today + 1),
                                    ("free", 500, 500, today + 2)]]  # in the order they happened, as ids grow
    await store.run_write(lambda conn: conn.execute(insert(usage), rows))
    prices = {"priced": ModelPrice(input_per_million=2.0, output_per_million=8.0)}
    days = await store.run_read(lambda conn: stats.FigureCache().costs(conn, now, prices))
    assert len(days) == stats.COST_DAYS
    assert (days[-1].cost, days[-1].tokens, days[-1].unpriced) == (pytest.approx(2.0), 1_001_000, ["free"])
    assert (days[-2].cost, days[-2].tokens) == (pytest.approx(8.0), 1_000_000)
    assert days[0].cost is None and days[0].tokens == 0
    unpriced = await store.run_read(lambda conn: stats.FigureCache().costs(conn, now, {}))
    assert unpriced[-1].cost is None and unpriced[-1].tokens == 1_001_000


async def test_the_panel_draws_every_chart_from_the_figures(store: Store) -> None:
    now = time.time()
    job = {"id": "j1", "name": HOSTILE, "prompt": "p", "schedule": "every 1h", "kind": "interval",
           "deliver": "web:x", "enabled": True, "runs_done": 1, "no_agent": False, "created_at": now,
           "updated_at": now}
    run = {"job_id": "j1", "due_at": now - 600, "trigger": "scheduled", "status": "ok",
           "delivery_status": "failed", "delivery_attempts": 1, "started_at": now - 600}
    await store.run_write(lambda conn: (conn.execute(insert(cron_jobs), job), conn.execute(insert(cron_runs), run)))
    traffic, costs, runs = await store.run_read(stats.FigureCache().read(now, {}))
    html = panels.charts_section(stats.Figures(now, traffic, costs, runs, {"bad_request": 1},
                                               {"bad_request": 3, "model_timeout": 1}))
    assert html.count("<svg") == 7  # messages and latency twice (hour, day), cost, cron, faults
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'class="ran good"' in html and 'class="delivered bad"' in html
    assert "1 in the last hour, 4 in the last day" in html
    assert "No answers yet." in html and "No model calls yet." in html
