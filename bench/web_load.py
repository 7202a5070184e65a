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
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fakes.llm import FakeLLMThread, Reply, last_user_message, message_text  # noqa: E402

HERALD_BIN = Path(sys.executable).with_name("herald")
REPLY_TIMEOUT = 60.0
LOOP_LAG_TARGET_MS = 20.0
TURN_START_P50_TARGET_MS = 5.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


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


class Daemon:
    def __init__(self, home: Path, port: int, base_url: str, chats: int) -> None:
        self.home = home
        self.port = port
        config = {
            "model": {"base_url": base_url, "name": "fake-model", "max_retries": 0},
            "http": {"port": port},
            "gateway": {"max_concurrent_turns": 16, "drain_seconds": 5, "max_queue": max(20, chats)},
            "logging": {"level": "info"},
        }
        (home / "config.yaml").write_text(yaml.safe_dump(config))
        env = {k: v for k, v in os.environ.items() if not k.startswith("HERALD_")}
        env["HERALD_HOME"] = str(home)
        self._out = open(home / "stdout.txt", "wb")  # noqa: SIM115 - closed in stop()
        self._err = open(home / "stderr.txt", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen([str(HERALD_BIN), "run"], cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                                     stdout=self._out, stderr=self._err)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"herald exited with {self.proc.returncode}:\n{self.stderr()[-2000:]}")
            with contextlib.suppress(OSError), urllib.request.urlopen(self.base + "/readyz", timeout=2) as resp:
                if resp.status == 200:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"herald was not ready within {timeout}s")

    def stderr(self) -> str:
        return (self.home / "stderr.txt").read_text(errors="replace")

    @property
    def token(self) -> str:
        return (self.home / "web_token").read_text().strip()

    def stop(self) -> int | None:
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(20)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            return self.proc.returncode
        finally:
            self._out.close()
            self._err.close()



async def run_chat(session: aiohttp.ClientSession, base: str, chat_id: str, count: int,
                   latencies: list[float], failures: list[str]) -> int:
    """One chat: post, wait for the assistant's answer on the SSE stream, repeat. Returns answers seen."""
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
    answered = 0
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
            answered += 1
    finally:
        listener.cancel()
        with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
            await listener
    return answered


async def load(base: str, token: str, chats: int, per_chat: int) -> dict[str, Any]:
    latencies: list[float] = []
    failures: list[str] = []
    connector = aiohttp.TCPConnector(limit=0)
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:
        t0 = time.perf_counter()
        answered = await asyncio.gather(
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
    return {"latencies": latencies, "failures": failures, "answered": sum(answered), "elapsed": elapsed,
            "lost": lost, "duplicated": duplicated, "metrics": metrics}


def histogram_quantile(text: str, name: str, q: float) -> float:
    """Like Prometheus' histogram_quantile(): linear inside the bucket the quantile falls in."""
    from prometheus_client.parser import text_string_to_metric_families

    buckets = sorted((float(s.labels["le"]), s.value) for f in text_string_to_metric_families(text) if f.name == name
                     for s in f.samples if s.name == f"{name}_bucket")
    if not buckets or buckets[-1][1] == 0:
        return float("nan")
    rank, lower, below = q * buckets[-1][1], 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if upper == float("inf"):
                return lower
            return lower + (upper - lower) * ((rank - below) / (count - below) if count > below else 0)
        lower, below = upper, count
    return lower


def metric(text: str, name: str) -> float | None:
    m = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})?\s+([0-9.eE+-]+|NaN)\s*$", text, re.MULTILINE)
    return float(m.group(1)) if m else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chats", type=int, default=16)
    parser.add_argument("--messages-per-chat", type=int, default=20)
    parser.add_argument("--model-delay", type=float, default=0.2, help="seconds the fake model takes per answer")
    parser.add_argument("--port", default="auto", help="daemon http port, or 'auto' for a free one")
    args = parser.parse_args()
    port = free_port() if args.port == "auto" else int(args.port)

    def responder(request: dict[str, Any]) -> Reply:
        return Reply("echo: " + message_text(last_user_message(request)), delay=args.model_delay)

    fake = FakeLLMThread()
    fake.responder = responder
    home = Path(tempfile.mkdtemp(prefix="herald-bench-"))
    daemon: Daemon | None = None
    probe: Probe | None = None
    exit_code: int | None = None
    try:
        fake.start()
        daemon = Daemon(home, port, fake.base_url, args.chats)
        daemon.wait_ready()
        probe = Probe(port)
        probe.start()
        result = asyncio.run(load(daemon.base, daemon.token, args.chats, args.messages_per_chat))
        probe.stop()
        exit_code = daemon.stop()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        try:
            if probe is not None:
                probe.stop()
            if daemon is not None and exit_code is None:
                daemon.stop()
        finally:
            fake.stop()
            shutil.rmtree(home, ignore_errors=True)

    sent = args.chats * args.messages_per_chat
    lat_ms = [x * 1000 for x in result["latencies"]]
    probe_ms = [x * 1000 for x in probe.latencies]
    rate = result["answered"] / result["elapsed"] if result["elapsed"] else 0.0
    ideal = args.chats / args.model_delay if args.model_delay else float("inf")

    def row(label: str, value: str, target: str = "") -> None:
        print(f"  {label:<58} {value:>10}   {target}")

    def verdict(value: float, limit: float) -> str:
        return "ok" if value < limit else "MISSED"

    p99_probe = percentile(probe_ms, 99)
    # The daemon's own histogram of arrival -> turn start (no per-message log line at the default level).
    p50_start = histogram_quantile(result["metrics"], "herald_turn_queue_wait_seconds", 0.5) * 1000
    p99_start = histogram_quantile(result["metrics"], "herald_turn_queue_wait_seconds", 0.99) * 1000
    turns = metric(result["metrics"], "herald_turn_queue_wait_seconds_count") or 0
    print(f"herald web load: {args.chats} chats x {args.messages_per_chat} messages, "
          f"model delay {args.model_delay * 1000:.0f} ms, max_concurrent_turns 16")
    row("messages/s", f"{rate:.1f}", f"(ceiling with this model delay: {ideal:.1f})")
    row("ingress-to-reply latency p50", f"{percentile(lat_ms, 50):.1f} ms")
    row("ingress-to-reply latency p99", f"{percentile(lat_ms, 99):.1f} ms")
    row("ingress-to-turn-start latency p50 (daemon histogram)", f"{p50_start:.2f} ms",
        f"target < {TURN_START_P50_TARGET_MS:g} ms: {verdict(p50_start, TURN_START_P50_TARGET_MS)}")
    row("ingress-to-turn-start latency p99 (daemon histogram)", f"{p99_start:.2f} ms")
    row("http probe latency p99 (upper bound on loop lag)", f"{p99_probe:.2f} ms",
        f"target loop lag p99 < {LOOP_LAG_TARGET_MS:g} ms: {verdict(p99_probe, LOOP_LAG_TARGET_MS)}"
        f"  [{len(probe_ms)} probes, {probe.errors} errors]")
    lag = metric(result["metrics"], "herald_loop_lag_p99_seconds")
    if lag is not None:
        row("loop lag p99 (daemon metric herald_loop_lag_p99_seconds)", f"{lag * 1000:.2f} ms",
            f"target < {LOOP_LAG_TARGET_MS:g} ms: {verdict(lag * 1000, LOOP_LAG_TARGET_MS)}")
    else:
        row("loop lag p99 (daemon metric)", "n/a", "(/metrics has no herald_loop_lag_p99_seconds)")
    row("lost messages", f"{result['lost']}", f"target 0: {'ok' if result['lost'] == 0 else 'MISSED'}")
    row("messages answered more than once", f"{result['duplicated']}", "target 0")
    row("turns delivered (daemon histogram count)", f"{turns:.0f}", f"(sent {sent})")
    row("daemon exit code after SIGTERM", f"{exit_code}", "expected 0")
    for failure in result["failures"][:10]:
        print(f"  ! {failure}")
    ok = result["lost"] == 0 and result["duplicated"] == 0 and exit_code == 0 and not result["failures"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
