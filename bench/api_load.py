#!/usr/bin/env python3
"""Load benchmark for the OpenAI-compatible API: N clients streaming chat completions from a real `herald run`
backed by a fake model that answers at once.

Each client has a conversation of its own (X-Herald-Session) and asks its next question as soon as the stream of
the previous answer ended with [DONE]. The clients speak raw HTTP + server-sent events (aiohttp), as a chat UI's
backend would, so the bench's own CPU goes to the load and not to an SDK. Prints requests/s, time to first token
(request sent -> the first content chunk) and to the whole answer, the daemon's CPU per request and its memory;
exits 1 if an answer was missing or not the question's, or the daemon did not exit 0.

    .venv/bin/python bench/api_load.py [--clients 20] [--requests-per-client 25] [--model-delay 0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.harness import HERALD_BIN, Daemon, Report, echo_model, herald_config, measure, percentile  # noqa: E402

ANSWER_TIMEOUT = 60.0


def make_key(daemon: Daemon) -> str:
    env = {"HERALD_HOME": str(daemon.home), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([str(HERALD_BIN), "api-key", "create", "bench"], env=env, capture_output=True, text=True,
                         timeout=60, check=True)
    return out.stdout.strip()


async def ask(session: aiohttp.ClientSession, url: str, client: int, question: str) -> tuple[float, float, str]:
    """One streamed question: (seconds to the first content chunk, seconds to [DONE], the answer)."""
    started = time.perf_counter()
    first = None
    parts: list[str] = []
    body = {"model": "herald", "stream": True, "messages": [{"role": "user", "content": question}]}
    async with session.post(url, json=body, headers={"X-Herald-Session": f"bench-{client}"}) as resp:
        if resp.status != 200:
            raise RuntimeError(f"{resp.status}: {await resp.text()}")
        async for raw in resp.content:
            line = raw.decode().strip()
            if not line.startswith("data: "):
                continue
            data = line[len("data: "):]
            if data == "[DONE]":
                break
            for choice in json.loads(data)["choices"]:
                if choice["delta"].get("content"):
                    first = first if first is not None else time.perf_counter() - started
                    parts.append(choice["delta"]["content"])
    return first if first is not None else float("nan"), time.perf_counter() - started, "".join(parts)


async def load(url: str, key: str, clients: int, per_client: int) -> tuple[float, list[float], list[float], list[str]]:
    firsts: list[float] = []
    totals: list[float] = []
    problems: list[str] = []
    timeout = aiohttp.ClientTimeout(total=ANSWER_TIMEOUT)
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}, timeout=timeout,
                                     connector=connector) as session:

        async def client(n: int) -> None:
            for i in range(per_client):
                question = f"q{n}-{i}"
                try:
                    first, total, answer = await ask(session, url, n, question)
                except (aiohttp.ClientError, TimeoutError, RuntimeError) as exc:
                    problems.append(f"{question}: {type(exc).__name__}: {exc}")
                    return
                if answer != f"echo: {question}":
                    problems.append(f"{question}: answered {answer!r}")
                firsts.append(first)
                totals.append(total)

        started = time.perf_counter()
        await asyncio.gather(*(client(n) for n in range(clients)))
        elapsed = time.perf_counter() - started
    return elapsed, firsts, totals, problems


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests-per-client", type=int, default=25)
    parser.add_argument("--model-delay", type=float, default=0.0, help="seconds the fake model takes per answer")
    args = parser.parse_args()

    with echo_model(args.model_delay) as llm:
        config = herald_config(llm.base_url, turns=args.clients, log_level="warning",
                               platforms={"web": {"enabled": False}})
        config["api"] = {"enabled": True, "requests_per_minute": 100_000}
        config["display"] = {"streaming": True}
        with Daemon(config, home_prefix="herald-api-bench-") as daemon:
            await asyncio.to_thread(daemon.wait_ready)
            key = await asyncio.to_thread(make_key, daemon)
            url = f"{daemon.url}/v1/chat/completions"
            await ask_once_to_warm(url, key)
            (elapsed, firsts, totals, problems), usage = await measure(
                daemon, load(url, key, args.clients, args.requests_per_client))
            code = daemon.stop()

    asked = args.clients * args.requests_per_client
    answered = len(totals)
    report = Report()
    print(f"OpenAI-compatible API: {args.clients} streaming clients x {args.requests_per_client} requests, "
          f"model delay {args.model_delay:g} s")
    report.row("requests answered", f"{answered}/{asked}")
    report.row("duration", f"{elapsed:.2f} s")
    report.row("requests/s", f"{answered / elapsed:.1f}" if elapsed else "-")
    report.row("time to first token p50", f"{percentile([f * 1000 for f in firsts], 50):.1f} ms")
    report.row("time to first token p99", f"{percentile([f * 1000 for f in firsts], 99):.1f} ms")
    report.row("time to the whole answer p50", f"{percentile([t * 1000 for t in totals], 50):.1f} ms")
    report.row("time to the whole answer p99", f"{percentile([t * 1000 for t in totals], 99):.1f} ms")
    report.row("daemon CPU per request", f"{usage.cpu / max(1, answered) * 1000:.2f} ms")
    report.row("daemon RSS idle / end / peak", f"{usage.rss_idle:.0f}/{usage.rss_end:.0f}/{usage.rss_peak:.0f} MB")
    wrong = sum(1 for problem in problems if ": answered " in problem)
    report.check("missing or wrong answers", str(asked - answered + wrong), "0", not problems and answered == asked)
    for problem in problems[:10]:
        print(f"    {problem}")
    report.check("daemon exit code", str(code), "0", code == 0)
    return 0 if not problems and answered == asked and code == 0 else 1


async def ask_once_to_warm(url: str, key: str) -> None:
    """One request before the clock starts: the first turn builds the agent's caches."""
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as session:
        await ask(session, url, -1, "warm-up")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
