"""What the dashboard's charts cost to read: the figures (gateway/ops/dashboard/stats.py) over a database holding
``--per-day`` messages in the last day and as many in each of ``--old-days`` days before it (what the window must
skip), with one usage row per message. Prints the time of the first read (the whole day) and of the reads after
it (median and worst of ``--reads``), which read only what may still change; the dashboard reads them at most
every 5 s while someone watches, and never on the way of a message.

    .venv/bin/python bench/dashboard_charts.py [--per-day 100000] [--old-days 6] [--db-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import insert

from gateway.config import ModelPrice
from gateway.ops.dashboard import stats
from gateway.storage.store import Store
from gateway.storage.tables import inbox, usage

BATCH = 5000


async def fill(store: Store, per_day: int, days: int, now: float) -> None:
    step = 86_400 / per_day
    n = 0
    for day in range(days, -1, -1):
        start = now - (day + 1) * 86_400
        for first in range(0, per_day, BATCH):
            at = [start + (first + i) * step for i in range(min(BATCH, per_day - first))]
            rows = [{"platform": "web", "platform_message_id": f"m{n + i}", "session_key": f"web:dm:c{i % 50}",
                     "payload": {}, "status": "done", "created_at": t, "updated_at": t + 0.05 + (i % 100) / 50}
                    for i, t in enumerate(at)]
            spent = [{"platform": "web", "user_id": "u", "model": "m", "prompt_tokens": 900, "completion_tokens": 100,
                      "cached_tokens": 0, "calls": 1, "estimated": False, "created_at": t} for t in at]
            n += len(rows)
            await store.run_write(lambda conn, r=rows, s=spent: (conn.execute(insert(inbox), r),
                                                                 conn.execute(insert(usage), s)))


async def main(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="herald-bench-charts-") as tmp:
        store = Store(args.db_url or f"sqlite+aiosqlite:///{tmp}/state.db")
        await store.init()
        now = time.time()
        began = time.perf_counter()
        await fill(store, args.per_day, args.old_days, now)
        print(f"filled {args.per_day * (args.old_days + 1):,} messages in {time.perf_counter() - began:.1f} s")
        prices = {"m": ModelPrice(input_per_million=3.0, output_per_million=15.0)}
        figures = stats.FigureCache()
        began = time.perf_counter()
        traffic, _costs, _runs = await store.run_read(figures.read(now, prices))
        first = time.perf_counter() - began
        took = []
        for i in range(args.reads):  # as the dashboard reads them, every 5 s
            began = time.perf_counter()
            await store.run_read(figures.read(now + 5 * (i + 1), prices))
            took.append(time.perf_counter() - began)
        await store.close()
    print(f"the first read (the whole day) over {sum(traffic.messages):,} messages in the last day: "
          f"{first * 1000:.0f} ms")
    print(f"each read after it (the last hour, today's usage): median {statistics.median(took) * 1000:.0f} ms, "
          f"worst {max(took) * 1000:.0f} ms ({args.reads} reads)")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-day", type=int, default=100_000)
    parser.add_argument("--old-days", type=int, default=6)
    parser.add_argument("--reads", type=int, default=5)
    parser.add_argument("--db-url", default=None, help="a database URL instead of a temporary SQLite file")
    sys.exit(asyncio.run(main(parser.parse_args())))
