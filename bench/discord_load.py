#!/usr/bin/env python3
"""Load benchmark through Discord: N DMs talking to a real `herald run` via the fake Discord.

The daemon runs in a subprocess (its own CPU, its RSS measurable) with `platforms.discord.api_base_url` and
`gateway_url` pointing at the fake Discord (tests/fakes/discord_api.py: REST and the gateway websocket)
served here, and a fake model that answers at once (tests/fakes/llm.py, in a thread). Each chat sends its
next message as soon as the bot's answer to the previous one arrived at the fake. Ingress-to-reply is
measured from the moment the fake sends the MESSAGE_CREATE on the gateway to the moment the bot's
POST /channels/{id}/messages for it reaches the fake.

    .venv/bin/python bench/discord_load.py [--chats 20] [--messages-per-chat 50] [--model-delay 0]
                                           [--log-level info] [--profile FILE]

--profile FILE runs the daemon under cProfile and writes the stats there (slower; for finding hot spots:
`python -c "import pstats; pstats.Stats('FILE').sort_stats('cumtime').print_stats(40)"`).
Exits 1 if a message was lost or answered twice, or the daemon did not exit 0 on SIGTERM.
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

from tests.fakes.discord_api import FakeDiscord, Sent  # noqa: E402
from tests.fakes.llm import FakeLLMThread, Reply, last_user_message, message_text  # noqa: E402

HERALD_BIN = Path(sys.executable).with_name("herald")
REPLY_TIMEOUT = 30.0
TARGET_RATE = 100.0
TARGET_P99_MS = 1000.0
TARGET_RSS_MB = 130.0
FIRST_USER = 400_000_000_000_000_000


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


class Daemon:
    def __init__(self, home: Path, port: int, llm_url: str, dc: FakeDiscord, chats: int, log_level: str,
                 profile: str | None) -> None:
        self.home = home
        self.port = port
        config = {
            "model": {"base_url": llm_url, "name": "fake-model", "max_retries": 0},
            "http": {"port": port},
            "gateway": {"max_concurrent_turns": 32, "drain_seconds": 5, "max_queue": 50},
            "logging": {"level": log_level},
            "platforms": {
                "web": {"enabled": False},
                "discord": {"enabled": True, "api_base_url": dc.api_url, "gateway_url": dc.gateway_url,
                            "allowed_users": [FIRST_USER + n for n in range(chats)]},
            },
        }
        (home / "config.yaml").write_text(yaml.safe_dump(config))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HERALD_", "DISCORD_"))}
        env.update(HERALD_HOME=str(home), DISCORD_BOT_TOKEN=dc.token, XDG_STATE_HOME=str(home / "state"))
        self._out = open(home / "stdout.txt", "wb")  # noqa: SIM115 - closed in stop()
        self._err = open(home / "stderr.txt", "wb")  # noqa: SIM115
        if profile:
            code = ("import cProfile, sys; sys.argv = ['herald', 'run']; from gateway.cli import main; "
                    f"cProfile.run('main()', {profile!r})")
            cmd = [sys.executable, "-c", code]
        else:
            cmd = [str(HERALD_BIN), "run"]
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=self._out,
                                     stderr=self._err)

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


async def load(dc: FakeDiscord, chats: int, per_chat: int, daemon: Daemon) -> dict[str, Any]:
    waiting: dict[str, tuple[float, asyncio.Future[float]]] = {}
    answers: dict[str, int] = {}
    unexpected: list[str] = []

    def on_send(sent: Sent) -> None:
        now = time.perf_counter()
        question = sent.content.removeprefix("echo: ")
        answers[question] = answers.get(question, 0) + 1
        entry = waiting.pop(question, None)
        if entry is None:
            unexpected.append(sent.content)
        elif not entry[1].done():
            entry[1].set_result(now - entry[0])

    dc.on_send = on_send
    latencies: list[float] = []
    asked: list[str] = []
    rss_samples: list[float] = []

    async def chat(user_id: int) -> None:
        loop = asyncio.get_running_loop()
        channel = dc.dm(user_id)
        for i in range(per_chat):
            text = f"q{user_id % 1000}-{i}"
            future: asyncio.Future[float] = loop.create_future()
            waiting[text] = (time.perf_counter(), future)
            asked.append(text)
            dc.user_message(channel, user_id, text)
            try:
                latencies.append(await asyncio.wait_for(future, REPLY_TIMEOUT))
            except TimeoutError:
                return  # counted as lost below

    async def sample_rss() -> None:
        while True:
            rss_samples.append(rss_mb(daemon.proc.pid)[0])
            await asyncio.sleep(0.5)

    sampler = asyncio.create_task(sample_rss())
    started = time.perf_counter()
    await asyncio.gather(*(chat(FIRST_USER + n) for n in range(chats)))
    elapsed = time.perf_counter() - started
    await asyncio.sleep(1.0)  # late duplicates show up here
    sampler.cancel()
    lost = sum(1 for q in asked if answers.get(q, 0) == 0)
    twice = sum(1 for q in asked if answers.get(q, 0) > 1)
    return {"elapsed": elapsed, "answered": len(latencies), "asked": len(asked), "latencies": latencies,
            "lost": lost, "twice": twice, "unexpected": len(unexpected), "rss_samples": rss_samples}


async def run(args: argparse.Namespace) -> int:
    def responder(request: dict[str, Any]) -> Reply:
        return Reply("echo: " + message_text(last_user_message(request)), delay=args.model_delay)

    llm = FakeLLMThread()
    llm.responder = responder
    dc = FakeDiscord()
    home = Path(tempfile.mkdtemp(prefix="herald-dc-bench-"))
    daemon: Daemon | None = None
    code: int | None = None
    try:
        llm.start()
        await dc.start()
        daemon = Daemon(home, free_port(), llm.base_url, dc, args.chats, args.log_level, args.profile)
        await daemon.wait_ready()
        rss_idle = rss_mb(daemon.proc.pid)[0]
        cpu_before = cpu_seconds(daemon.proc.pid)
        result = await load(dc, args.chats, args.messages_per_chat, daemon)
        cpu = cpu_seconds(daemon.proc.pid) - cpu_before
        rss_now, rss_peak = rss_mb(daemon.proc.pid)
        code = await asyncio.to_thread(daemon.stop)
    finally:
        if daemon is not None and daemon.proc.poll() is None:
            daemon.stop()
        await dc.stop()
        llm.stop()
        if code not in (0, None) and daemon is not None:
            print(daemon.stderr()[-3000:], file=sys.stderr)
        shutil.rmtree(home, ignore_errors=True)

    lat_ms = [x * 1000 for x in result["latencies"]]
    rate = result["answered"] / result["elapsed"] if result["elapsed"] else 0.0
    p50, p99 = percentile(lat_ms, 50), percentile(lat_ms, 99)

    def row(label: str, value: str, target: str = "") -> None:
        print(f"  {label:34} {value:>14}   {target}")

    def verdict(ok: bool) -> str:
        return "ok" if ok else "MISSED"

    print(f"\nDiscord load: {args.chats} chats x {args.messages_per_chat} messages, model delay "
          f"{args.model_delay * 1000:g} ms, log level {args.log_level}")
    row("messages answered", f"{result['answered']}/{result['asked']}")
    row("duration", f"{result['elapsed']:.2f} s")
    row("messages/s", f"{rate:.1f}", f">= {TARGET_RATE:g}  {verdict(rate >= TARGET_RATE)}")
    row("ingress-to-reply p50", f"{p50:.1f} ms")
    row("ingress-to-reply p99", f"{p99:.1f} ms", f"< {TARGET_P99_MS:g} ms  {verdict(p99 < TARGET_P99_MS)}")
    row("ingress-to-reply max", f"{max(lat_ms, default=float('nan')):.1f} ms")
    row("lost", str(result["lost"]), f"0  {verdict(result['lost'] == 0)}")
    row("answered more than once", str(result["twice"]), f"0  {verdict(result['twice'] == 0)}")
    row("daemon CPU per message", f"{cpu / max(1, result['answered']) * 1000:.2f} ms",
        f"(the load used {cpu / result['elapsed'] if result['elapsed'] else 0:.2f} of the daemon's cores)")
    row("daemon RSS idle", f"{rss_idle:.1f} MB")
    row("daemon RSS at end / peak (HWM)", f"{rss_now:.1f} / {rss_peak:.1f} MB",
        f"< {TARGET_RSS_MB:g} MB  {verdict(rss_peak < TARGET_RSS_MB)}")
    row("daemon exit code on SIGTERM", str(code), f"0  {verdict(code == 0)}")
    failed = result["lost"] or result["twice"] or code != 0
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--messages-per-chat", type=int, default=50)
    parser.add_argument("--model-delay", type=float, default=0.0, help="seconds the fake model takes per answer")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--profile", default=None, help="write the daemon's cProfile stats to this file")
    args = parser.parse_args()
    try:
        return asyncio.run(run(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
