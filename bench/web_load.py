#!/usr/bin/env python3
"""Load benchmark for the web API: N chats talking to a real `herald run` backed by a fake LLM.

Each chat posts its next message as soon as the previous reply arrived (seen on the chat's SSE stream).
Prints throughput, latencies, an outside probe of event-loop responsiveness, and lost messages, with the
targets beside the figures. Starts and cleans up everything it needs; exits non-zero if messages were lost.

    .venv/bin/python bench/web_load.py [--chats 16] [--messages-per-chat 20] [--model-delay 0.2] [--port auto]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import sys
import threading
import time
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.harness import (  # noqa: E402
    Daemon,
    LoadResult,
    Report,
    echo_model,
    herald_config,
    histogram_quantile,
    measure,
    metric,
    percentile,
    verdict,
)

REPLY_TIMEOUT = 60.0
LOOP_LAG_TARGET_MS = 20.0
TURN_START_P50_TARGET_MS = 5.0


class Probe(threading.Thread):
    """GET /healthz every ``period`` seconds over one keep-alive connection, recording each latency."""

    def __init__(self, port: int, period: float = 0.010) -> None:
        super().__init__(name="healthz-probe", daemon=True)
        self.port = port
        self.period = period
        self.latencies: list[float] = []
        self.errors = 0
        self._halt = threading.Event()

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        next_at = time.perf_counter()
        while not self._halt.is_set():
            t0 = time.perf_counter()
            try:
                conn.request("GET", "/healthz")
                resp = conn.getresponse()
                resp.read()
                if resp.status == 200:
                    self.latencies.append(time.perf_counter() - t0)
                else:
                    self.errors += 1
            except (OSError, http.client.HTTPException):
                self.errors += 1
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
            next_at += self.period
            delay = next_at - time.perf_counter()
            if delay > 0:
                self._halt.wait(delay)
            else:
                next_at = time.perf_counter()
        conn.close()

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=15)


async def run_chat(session: aiohttp.ClientSession, base: str, chat_id: str, count: int,
                   latencies: list[float], failures: list[str]) -> None:
    """One chat: post, wait for the assistant's answer on the SSE stream, repeat; one latency per answer seen."""
    replies: asyncio.Queue[str] = asyncio.Queue()
    connected = asyncio.Event()

    async def listen() -> None:
        async with session.get(f"{base}/api/v1/chats/{chat_id}/events",
                               timeout=aiohttp.ClientTimeout(total=None, sock_read=None)) as resp:
            resp.raise_for_status()
            event, data = "message", []
            async for raw in resp.content:
                line = raw.decode().rstrip("\r\n")
                if line.startswith(": connected"):
                    connected.set()
                if not line:
                    if event == "message" and data:
                        payload = json.loads("\n".join(data))
                        if payload.get("role") == "assistant":
                            replies.put_nowait(payload["text"])
                    event, data = "message", []
                elif line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].strip())

    listener = asyncio.create_task(listen())
    try:
        await asyncio.wait_for(connected.wait(), 10)
        for i in range(count):
            text = f"{chat_id} message {i}"
            t0 = time.perf_counter()
            async with session.post(f"{base}/api/v1/messages",
                                    json={"chat_id": chat_id, "user_id": "bench", "text": text}) as resp:
                if resp.status != 202:
                    failures.append(f"{chat_id}: POST {i} -> {resp.status}")
                    continue
            try:
                while True:
                    reply = await asyncio.wait_for(replies.get(), REPLY_TIMEOUT)
                    if reply == f"echo: {text}":
                        break
            except TimeoutError:
                failures.append(f"{chat_id}: no reply to message {i} within {REPLY_TIMEOUT}s")
                break
            latencies.append(time.perf_counter() - t0)
    finally:
        listener.cancel()
        with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
            await listener


async def load(base: str, token: str, chats: int, per_chat: int) -> tuple[LoadResult, list[str], str]:
    """The load, then what it found: the figures, the chats' failures, and the daemon's /metrics text."""
    latencies: list[float] = []
    failures: list[str] = []
    connector = aiohttp.TCPConnector(limit=0)
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:
        t0 = time.perf_counter()
        await asyncio.gather(
            *(run_chat(session, base, f"bench-{c:03d}", per_chat, latencies, failures) for c in range(chats))
        )
        elapsed = time.perf_counter() - t0
        # Count from the daemon's own record as well: every question must have exactly one answer.
        lost = 0
        duplicated = 0
        for c in range(chats):
            chat_id = f"bench-{c:03d}"
            async with session.get(f"{base}/api/v1/chats/{chat_id}/messages") as resp:
                msgs = (await resp.json())["messages"]
            texts = [m["text"] for m in msgs if m["role"] == "assistant"]
            for i in range(per_chat):
                n = texts.count(f"echo: {chat_id} message {i}")
                lost += n == 0
                duplicated += max(0, n - 1)
        async with session.get(f"{base}/metrics") as resp:
            metrics = await resp.text()
    return LoadResult(elapsed, chats * per_chat, latencies, lost, duplicated), failures, metrics


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chats", type=int, default=16)
    parser.add_argument("--messages-per-chat", type=int, default=20)
    parser.add_argument("--model-delay", type=float, default=0.2, help="seconds the fake model takes per answer")
    parser.add_argument("--port", default="auto", help="daemon http port, or 'auto' for a free one")
    args = parser.parse_args()
    port = None if args.port == "auto" else int(args.port)

    llm = echo_model(args.model_delay)
    exit_code: int | None = None
    try:
        llm.start()
        config = herald_config(llm.base_url, turns=16, max_queue=max(20, args.chats), port=port)
        with Daemon(config) as daemon:
            daemon.wait_ready()
            token = (daemon.home / "web_token").read_text().strip()
            probe = Probe(daemon.port)
            probe.start()
            try:
                # The daemon's CPU over the load includes the probe's /healthz requests (~100 a second).
                (result, failures, metrics), usage = asyncio.run(
                    measure(daemon, load(daemon.url, token, args.chats, args.messages_per_chat)))
            finally:
                probe.stop()
            exit_code = daemon.stop()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        llm.stop()

    probe_ms = [x * 1000 for x in probe.latencies]
    ideal = args.chats / args.model_delay if args.model_delay else float("inf")
    report = Report(label_width=58, value_width=10)
    p99_probe = percentile(probe_ms, 99)
    # The daemon's own histogram of arrival -> turn start (no per-message log line at the default level).
    p50_start = histogram_quantile(metrics, "herald_turn_queue_wait_seconds", 0.5) * 1000
    p99_start = histogram_quantile(metrics, "herald_turn_queue_wait_seconds", 0.99) * 1000
    turns = metric(metrics, "herald_turn_queue_wait_seconds_count") or 0
    print(f"herald web load: {args.chats} chats x {args.messages_per_chat} messages, "
          f"model delay {args.model_delay * 1000:.0f} ms, max_concurrent_turns 16")
    report.row("messages/s", f"{result.rate:.1f}", f"(ceiling with this model delay: {ideal:.1f})")
    report.row("ingress-to-reply latency p50", f"{result.latency_ms(50):.1f} ms")
    report.row("ingress-to-reply latency p99", f"{result.latency_ms(99):.1f} ms")
    report.row("ingress-to-turn-start latency p50 (daemon histogram)", f"{p50_start:.2f} ms",
               f"target < {TURN_START_P50_TARGET_MS:g} ms: {verdict(p50_start < TURN_START_P50_TARGET_MS)}")
    report.row("ingress-to-turn-start latency p99 (daemon histogram)", f"{p99_start:.2f} ms")
    report.row("http probe latency p99 (upper bound on loop lag)", f"{p99_probe:.2f} ms",
               f"target loop lag p99 < {LOOP_LAG_TARGET_MS:g} ms: {verdict(p99_probe < LOOP_LAG_TARGET_MS)}"
               f"  [{len(probe_ms)} probes, {probe.errors} errors]")
    lag = metric(metrics, "herald_loop_lag_p99_seconds")
    if lag is not None:
        report.row("loop lag p99 (daemon metric herald_loop_lag_p99_seconds)", f"{lag * 1000:.2f} ms",
                   f"target < {LOOP_LAG_TARGET_MS:g} ms: {verdict(lag * 1000 < LOOP_LAG_TARGET_MS)}")
    else:
        report.row("loop lag p99 (daemon metric)", "n/a", "(/metrics has no herald_loop_lag_p99_seconds)")
    report.cpu(usage, result)
    report.row("lost messages", f"{result.lost}", f"target 0: {verdict(result.lost == 0)}")
    report.row("messages answered more than once", f"{result.twice}", "target 0")
    report.row("turns delivered (daemon histogram count)", f"{turns:.0f}", f"(sent {result.asked})")
    report.row("daemon exit code after SIGTERM", f"{exit_code}", "expected 0")
    for failure in failures[:10]:
        print(f"  ! {failure}")
    ok = result.lost == 0 and result.twice == 0 and exit_code == 0 and not failures
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
