#!/usr/bin/env python3
"""Soak: `herald run` for a long while (an hour by default) at a steady load through Telegram and the web API,
with a cron job every minute, watching for leaks.

The fake Bot API (tests/fakes/telegram_api.py) runs on this script's loop, the fake model (answering
`echo: <text>` after 50-300 ms) in a thread; the daemon is a subprocess in a temporary HERALD_HOME. Half the
chats are Telegram private chats, half web chats (POST /api/v1/messages, answers read from each chat's SSE
stream). Every chat sends at its share of --rate, whether or not its last message was answered (an open loop:
the daemon must keep up, not set the pace). A cron job (`every 1m`, a script whose output names the run) delivers
into a web chat of its own.

    .venv/bin/python bench/soak.py [--minutes 60] [--rate 20] [--chats 20] [--sample-seconds 60]

Every sample (a minute; 15 s for runs under 10 minutes, so a short run still has a slope to judge) prints the
daemon's RSS, open file descriptors (/proc/<pid>/fd), database size (the SQLite file and its WAL), asyncio tasks
(the `herald_tasks` gauge of /metrics), and messages asked / answered so far.

Exit code 1 when
  - any message is lost (no answer once the load stops and a minute has passed) or answered twice, or a cron run
    is doubled (two runs for one due time, one result delivered twice) or finished but never delivered;
  - something grows without bound: the least-squares slope over the samples after the warm-up is above 1 MB/min
    for RSS, 1/min for open fds, or 1/min for asyncio tasks. The warm-up is the first half of the run, and at
    least its first 5 minutes: caches fill meanwhile (each active session's history, up to twice
    agent.max_history_messages; SQLite's page cache; connection pools). Fewer than 3 samples after it are not
    judged (said so: a run of a few minutes shows the figures, not a verdict on growth);
  - the daemon did not exit 0 on SIGTERM.
The database grows with the history it keeps by design (retention_days is off here): printed, not judged.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import aiohttp  # noqa: E402

from bench.harness import HERALD_BIN, Daemon, echo_model, herald_config, rss_mb, run_async  # noqa: E402
from tests.fakes.telegram_api import FakeTelegram, SentMessage  # noqa: E402

FIRST_TG_CHAT = 70_000
CRON_CHAT = "soak-cron"
CRON_TOKEN = re.compile(r"cron-\d+")
RSS_SLOPE_MB = 1.0  # per minute
FD_SLOPE = 1.0
TASK_SLOPE = 1.0
SETTLE_SECONDS = 60.0
WARM_UP_SECONDS = 300.0
POST_CONNECTIONS = 8


def slope_per_minute(samples: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) pairs, per minute."""
    n = len(samples)
    mean_t = sum(t for t, _ in samples) / n
    mean_v = sum(v for _, v in samples) / n
    var = sum((t - mean_t) ** 2 for t, _ in samples)
    if var == 0:
        return 0.0
    return sum((t - mean_t) * (v - mean_v) for t, v in samples) / var * 60


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def db_size_mb(home: Path) -> float:
    return sum(p.stat().st_size for p in home.glob("state.db*") if p.is_file()) / 1e6


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.tg = FakeTelegram()
        self.tg_chats = [FIRST_TG_CHAT + n for n in range(args.chats // 2)]
        self.web_chats = [f"soak{n}" for n in range(args.chats - len(self.tg_chats))]
        self.asked: dict[str, list[str]] = defaultdict(list)
        self.answers: dict[str, Counter[str]] = defaultdict(Counter)  # chat -> question -> answers seen
        self.web_ids: set[str] = set()  # SSE message ids already counted (one message, one count)
        self.cron_texts: list[str] = []
        self.post_failures = 0
        self.stopping = False
        self.daemon: Daemon | None = None
        self.token = ""

    # ---- what the bot sent -------------------------------------------------------------------------

    def on_send(self, sent: SentMessage) -> None:
        self._answer(str(sent.chat_id), sent.text)

    def _answer(self, chat: str, text: str) -> None:
        if text.startswith("echo: "):
            self.answers[chat][text.removeprefix("echo: ")] += 1

    async def follow(self, session: aiohttp.ClientSession, chat: str) -> None:
        """The chat's SSE stream: each assistant message counted once by its id."""
        assert self.daemon is not None
        url = f"{self.daemon.url}/api/v1/chats/{chat}/events"
        headers = {"Authorization": f"Bearer {self.token}"}
        while not self.stopping:
            try:
                async with session.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=None)) as resp:
                    event = "message"
                    async for raw in resp.content:
                        line = raw.decode().rstrip("\r\n")
                        if line.startswith("event:"):
                            event = line[6:].strip()
                        elif line.startswith("data:") and event == "message":
                            data = json.loads(line[5:])
                            if data.get("role") == "assistant" and data.get("id") not in self.web_ids:
                                self.web_ids.add(data.get("id"))
                                if chat == CRON_CHAT:
                                    self.cron_texts.append(data.get("text") or "")
                                else:
                                    self._answer(chat, data.get("text") or "")
                        elif not line:
                            event = "message"
            except (aiohttp.ClientError, TimeoutError, ValueError):
                await asyncio.sleep(0.5)

    # ---- the load ----------------------------------------------------------------------------------

    async def ask_web(self, session: aiohttp.ClientSession, chat: str, question: str) -> None:
        assert self.daemon is not None
        body = {"chat_id": chat, "user_id": "soaker", "text": question, "message_id": question}
        for _attempt in range(20):
            try:
                async with session.post(f"{self.daemon.url}/api/v1/messages", json=body,
                                        headers={"Authorization": f"Bearer {self.token}"}) as resp:
                    if resp.status == 202:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.5)
        self.post_failures += 1

    async def door(self, chats: list[Any], ask: Any, prefix: str, share: float) -> None:
        """Round robin over ``chats`` at ``share`` messages a second (a fixed timetable: no drift)."""
        if not chats:
            return
        gap = 1.0 / share
        nxt = time.monotonic()
        i = 0
        pending: set[asyncio.Task[None]] = set()
        while not self.stopping:
            for n, chat in enumerate(chats):
                if self.stopping:
                    break
                question = f"{prefix}{n}-{i}"
                self.asked[str(chat)].append(question)
                result = ask(chat, question)
                if asyncio.iscoroutine(result):
                    task = asyncio.ensure_future(result)
                    pending.add(task)
                    task.add_done_callback(pending.discard)
                nxt += gap
                await asyncio.sleep(max(0.0, nxt - time.monotonic()))
            i += 1
        if pending:
            await asyncio.gather(*pending)

    def counts(self) -> tuple[int, int]:
        asked = sum(len(q) for q in self.asked.values())
        answered = sum(1 for chat, qs in self.asked.items() for q in qs if self.answers[chat][q])
        return asked, answered

    # ---- samples -----------------------------------------------------------------------------------

    async def tasks(self, session: aiohttp.ClientSession) -> float:
        assert self.daemon is not None
        try:
            async with session.get(f"{self.daemon.url}/metrics") as resp:
                for line in (await resp.text()).splitlines():
                    if line.startswith("herald_tasks "):
                        return float(line.split()[1])
        except aiohttp.ClientError:
            pass
        return float("nan")

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        assert self.daemon is not None
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HERALD_", "TELEGRAM_"))}
        env.update(HERALD_HOME=str(self.daemon.home), XDG_STATE_HOME=str(self.daemon.home / "state"))
        return subprocess.run([str(HERALD_BIN), "cron", *args], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=60)


def cron_check(runs: list[dict[str, Any]], texts: list[str]) -> list[str]:
    problems = []
    dues = Counter(r["due_at"] for r in runs if r["trigger"] == "scheduled")
    problems += [f"due time {d} ran {n} times" for d, n in dues.items() if n > 1]
    delivered = Counter(m.group(0) for t in texts for m in CRON_TOKEN.finditer(t))
    problems += [f"{tok} delivered {n} times" for tok, n in delivered.items() if n > 1]
    for r in runs:
        m = CRON_TOKEN.search(r.get("output") or "")
        if r["status"] == "ok" and (m is None or not delivered[m.group(0)]):
            problems.append(f"run {r['id']} finished ok but was not delivered ({r['delivery_status']})")
    return problems


async def run(args: argparse.Namespace) -> int:
    soak = Soak(args)
    rng = random.Random(args.seed)
    llm = echo_model(lambda _text: rng.uniform(0.05, 0.3))
    sample_every = args.sample_seconds or (60.0 if args.minutes >= 10 else 15.0)
    samples: list[dict[str, float]] = []
    soak.tg.on_send = soak.on_send
    await soak.tg.start()
    llm.start()
    code: int | None = None
    try:
        telegram = {"enabled": True, "base_url": soak.tg.base_url, "allowed_users": soak.tg_chats}
        config = herald_config(llm.base_url, turns=32, max_queue=200, log_level=args.log_level,
                               platforms={"telegram": telegram})
        # The cron job's script runs unsandboxed: this bench must run where bubblewrap cannot.
        config["tools"] = {"terminal": {"enabled": True, "sandbox": "none"}}
        config["display"] = {"streaming": False}
        with Daemon(config, {"TELEGRAM_BOT_TOKEN": soak.tg.token}, home_prefix="herald-soak-") as daemon:
            soak.daemon = daemon
            await asyncio.to_thread(daemon.wait_ready)
            soak.token = (daemon.home / "web_token").read_text().strip()
            added = await asyncio.to_thread(soak.cli, "add", "--schedule", "every 1m", "--name", "soak", "--no-agent",
                                            "--script", "echo cron-$(date +%s%N)", "--deliver", f"web:{CRON_CHAT}")
            if added.returncode != 0:
                print(added.stderr, file=sys.stderr)
                return 1
            job_id = added.stdout.split()[0]
            pid = daemon.proc.pid
            # The client's keep-alive pools are bounded and apart (a stream holds its connection for good): the
            # daemon's open fds then measure the daemon, not how many idle connections this client keeps.
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=POST_CONNECTIONS)) as session, \
                    aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as streams:
                followers = [asyncio.ensure_future(soak.follow(streams, chat))
                             for chat in [*soak.web_chats, CRON_CHAT]]
                await asyncio.sleep(0.5)  # the streams are open before the first answer
                share_tg = args.rate * len(soak.tg_chats) / args.chats
                doors = [
                    asyncio.ensure_future(soak.door(soak.tg_chats, lambda c, q: soak.tg.user_message(c, c, q), "t",
                                                    share_tg)),
                    asyncio.ensure_future(soak.door(soak.web_chats, lambda c, q: soak.ask_web(session, c, q), "w",
                                                    args.rate - share_tg)),
                ]
                print(f"soak: {args.minutes:g} min at {args.rate:g} msg/s over {args.chats} chats "
                      f"({len(soak.tg_chats)} Telegram, {len(soak.web_chats)} web), cron every 1m, "
                      f"a sample every {sample_every:g} s")
                print(f"  {'min':>6} {'RSS MB':>8} {'fds':>5} {'DB MB':>7} {'tasks':>6} {'asked':>8} {'answered':>9}")
                started = time.monotonic()
                end = started + args.minutes * 60
                while True:
                    await asyncio.sleep(max(0.0, min(sample_every, end - time.monotonic())))
                    t = time.monotonic() - started
                    s = {"t": t, "rss": rss_mb(pid)[0], "fds": open_fds(pid), "db": db_size_mb(daemon.home),
                         "tasks": await soak.tasks(session)}
                    asked, answered = soak.counts()
                    samples.append(s)
                    print(f"  {t / 60:6.2f} {s['rss']:8.1f} {s['fds']:5.0f} {s['db']:7.1f} {s['tasks']:6.0f} "
                          f"{asked:8d} {answered:9d}", flush=True)
                    if time.monotonic() >= end - 0.5:
                        break
                soak.stopping = True
                await asyncio.gather(*doors)
                deadline = time.monotonic() + SETTLE_SECONDS
                for _ in range(int(SETTLE_SECONDS * 2)):  # until every question has its answer, or a minute
                    if time.monotonic() > deadline or soak.counts()[1] >= soak.counts()[0]:
                        break
                    await asyncio.sleep(0.5)
                await asyncio.to_thread(soak.cli, "pause", job_id)
                await asyncio.sleep(3)  # a run claimed before the pause is delivered
                await asyncio.sleep(2)  # late doubles show up here
                for f in followers:
                    f.cancel()
                await asyncio.gather(*followers, return_exceptions=True)
            history = await asyncio.to_thread(soak.cli, "history", job_id, "--json", "--limit", "100000")
            runs = json.loads(history.stdout) if history.returncode == 0 else []
            code = await asyncio.to_thread(daemon.stop)
    finally:
        llm.stop()
        await soak.tg.stop()

    return verdict(args, soak, runs, samples, code)


def verdict(args: argparse.Namespace, soak: Soak, runs: list[dict[str, Any]], samples: list[dict[str, float]],
            code: int | None) -> int:
    """Prints what the soak found; 1 when something was lost, doubled or kept growing."""
    asked, answered = soak.counts()
    lost = asked - answered
    doubled = sum(1 for chat, qs in soak.asked.items() for q in qs if soak.answers[chat][q] > 1)
    cron = cron_check(runs, soak.cron_texts)
    print(f"\nmessages asked {asked}, answered {answered}, lost {lost}, answered twice {doubled}, "
          f"web posts given up {soak.post_failures}")
    print(f"cron runs {len(runs)} ({sum(r['status'] == 'ok' for r in runs)} ok), delivered "
          f"{len(soak.cron_texts)}, problems {len(cron)}" + "".join(f"\n  {p}" for p in cron[:10]))
    failed = bool(lost or doubled or cron or soak.post_failures or code != 0)
    warm_up = max(args.minutes * 60 / 2, WARM_UP_SECONDS)
    half = [s for s in samples if s["t"] >= warm_up - 1]
    if len(half) < 3:
        print(f"growth: {len(half)} samples after the warm-up ({warm_up / 60:g} min), not judged (run longer)")
    else:
        for key, unit, limit in (("rss", "MB/min", RSS_SLOPE_MB), ("fds", "/min", FD_SLOPE),
                                 ("tasks", "/min", TASK_SLOPE)):
            slope = slope_per_minute([(s["t"], s[key]) for s in half])
            ok = slope <= limit
            failed |= not ok
            print(f"{key} slope after the warm-up: {slope:+.3f} {unit} (limit {limit:g}) "
                  f"{'ok' if ok else 'GROWING'}")
        print(f"db slope after the warm-up: {slope_per_minute([(s['t'], s['db']) for s in half]):+.3f} MB/min "
              "(history kept by design: not judged)")
    print(f"daemon exit code on SIGTERM: {code}")
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=20.0, help="messages a second over all chats")
    parser.add_argument("--chats", type=int, default=20, help="half Telegram, half web")
    parser.add_argument("--sample-seconds", type=float, default=0.0,
                        help="between samples (default: 60, or 15 for runs under 10 minutes)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return run_async(run, parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
