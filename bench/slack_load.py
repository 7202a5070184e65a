#!/usr/bin/env python3
"""Load benchmark through Slack: N DMs talking to a real `herald run` via the fake Slack, in Socket Mode and in
HTTP mode (the Events API at /slack/events).

The daemon runs in a subprocess (its own CPU, its RSS measurable) with `platforms.slack.api_base_url` pointing
at the fake Slack (tests/fakes/slack_api.py) served here, and a fake model (tests/fakes/llm.py, in a thread)
that answers at once. Each chat sends its next message as soon as the bot's answer to the previous one
reached the fake. Ingress-to-reply is measured from the moment the fake hands the event over (the envelope
is sent / the POST starts) to the moment the bot's chat.postMessage for it arrives; an event's ack time from
the same moment to its Socket Mode ack / its HTTP 200.

Then the same load again while 64 slow turns (--slow-seconds each) run in 64 other chats: every event must
still be acknowledged well within Slack's 3 s.

    .venv/bin/python bench/slack_load.py [--mode socket|http|both] [--chats 20] [--messages-per-chat 50]
                                         [--slow-turns 64] [--slow-seconds 6] [--log-level info]

Exits 1 if a message was lost or answered twice, an ack took 3 s or more, or the daemon did not exit 0 on
SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fakes.llm import FakeLLMThread, Reply, last_user_message, message_text  # noqa: E402
from tests.fakes.slack_api import FakeSlack, SlackMessage  # noqa: E402

HERALD_BIN = Path(sys.executable).with_name("herald")
REPLY_TIMEOUT = 30.0
TARGET_RATE = 100.0
TARGET_P99_MS = 1000.0
ACK_LIMIT_S = 3.0  # Slack's
FIRST_CHAT = 10_000


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def rss_mb(pid: int) -> tuple[float, float]:
    """(current RSS, peak RSS) of a process in MB, from /proc."""
    values = {}
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) / 1024
    return values.get("VmRSS", float("nan")), values.get("VmHWM", float("nan"))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def user(n: int) -> str:
    return f"U{n:08d}"


def dm(n: int) -> str:
    return f"D{n:08d}"


class Daemon:
    def __init__(self, home: Path, port: int, llm_url: str, fake: FakeSlack, mode: str, users: list[str],
                 log_level: str) -> None:
        self.home = home
        self.port = port
        config = {
            "model": {"base_url": llm_url, "name": "fake-model", "max_retries": 0},
            "http": {"port": port},
            # Room for the 64 slow turns and the fast chats beside them.
            "gateway": {"max_concurrent_turns": 128, "drain_seconds": 5, "max_queue": 50},
            "logging": {"level": log_level},
            "platforms": {
                "web": {"enabled": False},
                "slack": {"enabled": True, "mode": mode, "api_base_url": fake.api_url, "allowed_users": users},
            },
        }
        (home / "config.yaml").write_text(yaml.safe_dump(config))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HERALD_", "SLACK_"))}
        env.update(HERALD_HOME=str(home), XDG_STATE_HOME=str(home / "state"), SLACK_BOT_TOKEN=fake.bot_token,
                   SLACK_APP_TOKEN=fake.app_token, SLACK_SIGNING_SECRET=fake.signing_secret)
        self._out = open(home / "stdout.txt", "wb")  # noqa: SIM115 - closed in stop()
        self._err = open(home / "stderr.txt", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen([str(HERALD_BIN), "run"], cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                                     stdout=self._out, stderr=self._err)

    async def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        url = f"http://127.0.0.1:{self.port}/readyz"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"herald exited with {self.proc.returncode}:\n{self.stderr()[-2000:]}")

            def probe() -> bool:
                with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as resp:
                    return resp.status == 200
                return False

            if await asyncio.to_thread(probe):
                return
            await asyncio.sleep(0.1)
        raise RuntimeError(f"herald was not ready within {timeout}s:\n{self.stderr()[-2000:]}")

    def stderr(self) -> str:
        return (self.home / "stderr.txt").read_text(errors="replace")

    def stop(self) -> int | None:
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(30)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            return self.proc.returncode
        finally:
            self._out.close()
            self._err.close()


class Load:
    """Users on the fake Slack; what the bot answered; how fast each event was acknowledged."""

    def __init__(self, fake: FakeSlack, mode: str, port: int) -> None:
        self.fake = fake
        self.mode = mode
        self.url = f"http://127.0.0.1:{port}/slack/events"
        self.waiting: dict[str, tuple[float, asyncio.Future[float]]] = {}
        self.answers: dict[str, int] = {}
        self.acks: list[float] = []
        self.unacked = 0
        fake.on_send = self.on_send

    def on_send(self, sent: SlackMessage) -> None:
        now = time.perf_counter()
        question = sent.text.removeprefix("echo: ")
        self.answers[question] = self.answers.get(question, 0) + 1
        entry = self.waiting.pop(question, None)
        if entry is not None and not entry[1].done():
            entry[1].set_result(now - entry[0])

    async def send(self, n: int, text: str) -> asyncio.Future[float]:
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        body = self.fake.message(dm(n), user(n), text)
        self.waiting[text] = (time.perf_counter(), future)
        if self.mode == "http":
            status, _, seconds = await self.fake.post(self.url, "events_api", body)
            if status == 200:
                self.acks.append(seconds)
            else:
                self.unacked += 1
        else:
            envelope = await self.fake.deliver_socket("events_api", body)
            asyncio.get_running_loop().create_task(self._socket_ack(envelope))
        return future

    async def _socket_ack(self, envelope: str) -> None:
        deadline = time.monotonic() + 10
        while envelope not in self.fake.acked_at:
            if time.monotonic() > deadline:
                self.unacked += 1
                return
            await asyncio.sleep(0.005)
        self.acks.append(self.fake.acked_at[envelope] - self.fake.handed_out[envelope])

    async def chats(self, chats: int, per_chat: int, tag: str) -> dict[str, Any]:
        latencies: list[float] = []
        asked: list[str] = []

        async def chat(n: int) -> None:
            for i in range(per_chat):
                text = f"{tag}{n}-{i}"
                asked.append(text)
                future = await self.send(n, text)
                try:
                    latencies.append(await asyncio.wait_for(future, REPLY_TIMEOUT))
                except TimeoutError:
                    return  # counted as lost below

        self.acks.clear()
        started = time.perf_counter()
        await asyncio.gather(*(chat(FIRST_CHAT + n) for n in range(chats)))
        elapsed = time.perf_counter() - started
        await asyncio.sleep(1.0)  # late duplicates show up here
        return {"elapsed": elapsed, "answered": len(latencies), "asked": len(asked), "latencies": latencies,
                "lost": sum(1 for q in asked if self.answers.get(q, 0) == 0),
                "twice": sum(1 for q in asked if self.answers.get(q, 0) > 1), "acks": list(self.acks)}


def report(title: str, result: dict[str, Any], unacked: int) -> bool:
    lat_ms = [x * 1000 for x in result["latencies"]]
    ack_ms = [x * 1000 for x in result["acks"]]
    rate = result["answered"] / result["elapsed"] if result["elapsed"] else 0.0
    p50, p99 = percentile(lat_ms, 50), percentile(lat_ms, 99)
    ack_max = max(ack_ms, default=float("nan"))

    def row(label: str, value: str, target: str = "") -> None:
        print(f"  {label:34} {value:>14}   {target}")

    def verdict(ok: bool) -> str:
        return "ok" if ok else "MISSED"

    print(title)
    row("messages answered", f"{result['answered']}/{result['asked']}")
    row("messages/s", f"{rate:.1f}", f">= {TARGET_RATE:g}  {verdict(rate >= TARGET_RATE)}")
    row("ingress-to-reply p50", f"{p50:.1f} ms")
    row("ingress-to-reply p99", f"{p99:.1f} ms", f"< {TARGET_P99_MS:g} ms  {verdict(p99 < TARGET_P99_MS)}")
    row("ack p50 / p99", f"{percentile(ack_ms, 50):.1f} / {percentile(ack_ms, 99):.1f} ms")
    row("ack max", f"{ack_max:.1f} ms", f"< {ACK_LIMIT_S * 1000:g} ms  {verdict(ack_max < ACK_LIMIT_S * 1000)}")
    row("not acknowledged", str(unacked), f"0  {verdict(unacked == 0)}")
    row("lost", str(result["lost"]), f"0  {verdict(result['lost'] == 0)}")
    row("answered more than once", str(result["twice"]), f"0  {verdict(result['twice'] == 0)}")
    return bool(result["lost"] or result["twice"] or unacked or not ack_max < ACK_LIMIT_S * 1000)


async def run_mode(args: argparse.Namespace, mode: str) -> int:
    def responder(request: dict[str, Any]) -> Reply:
        text = message_text(last_user_message(request))
        return Reply("echo: " + text, delay=args.slow_seconds if text.startswith("slow") else 0.0)

    llm = FakeLLMThread()
    llm.responder = responder
    fake = FakeSlack()
    home = Path(tempfile.mkdtemp(prefix="herald-slack-bench-"))
    slow_first = FIRST_CHAT + args.chats
    users = [user(FIRST_CHAT + n) for n in range(args.chats + args.slow_turns)]
    daemon: Daemon | None = None
    code: int | None = None
    failed = False
    try:
        llm.start()
        await fake.start()
        port = free_port()
        daemon = Daemon(home, port, llm.base_url, fake, mode, users, args.log_level)
        await daemon.wait_ready()
        load = Load(fake, mode, port)
        cpu_before = cpu_seconds(daemon.proc.pid)
        plain = await load.chats(args.chats, args.messages_per_chat, "q")
        cpu = cpu_seconds(daemon.proc.pid) - cpu_before
        print(f"\nSlack load ({mode} mode): {args.chats} chats x {args.messages_per_chat} messages, instant model")
        failed |= report("", plain, load.unacked)
        print(f"  {'daemon CPU per message':34} {cpu / max(1, plain['answered']) * 1000:>11.2f} ms")
        # The same again while slow turns run in other chats.
        load.unacked = 0
        slow = [await load.send(slow_first + n, f"slow{slow_first + n}") for n in range(args.slow_turns)]
        busy = await load.chats(args.chats, args.messages_per_chat, "b")
        slow_acks = list(load.acks)
        done = await asyncio.wait_for(asyncio.gather(*slow, return_exceptions=True), REPLY_TIMEOUT)
        still = sum(1 for d in done if isinstance(d, BaseException))
        failed |= report(f"  ... while {args.slow_turns} turns of {args.slow_seconds:g} s run in other chats:",
                         {**busy, "acks": slow_acks}, load.unacked)
        print(f"  {'slow turns answered':34} {args.slow_turns - still:>11}/{args.slow_turns}")
        failed |= bool(still)
        code = await asyncio.to_thread(daemon.stop)
        print(f"  {'daemon exit code on SIGTERM':34} {code!s:>14}   0  {'ok' if code == 0 else 'MISSED'}")
    finally:
        if daemon is not None and daemon.proc.poll() is None:
            daemon.stop()
        await fake.stop()
        llm.stop()
        if code not in (0, None) and daemon is not None:
            print(daemon.stderr()[-3000:], file=sys.stderr)
        shutil.rmtree(home, ignore_errors=True)
    return 1 if failed or code != 0 else 0


async def run(args: argparse.Namespace) -> int:
    modes = ["socket", "http"] if args.mode == "both" else [args.mode]
    results = [await run_mode(args, mode) for mode in modes]
    return max(results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", default="both", choices=["socket", "http", "both"])
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--messages-per-chat", type=int, default=50)
    parser.add_argument("--slow-turns", type=int, default=64)
    parser.add_argument("--slow-seconds", type=float, default=6.0)
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    args = parser.parse_args()
    try:
        return asyncio.run(run(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
