"""What the load benchmarks share: `herald run` in a subprocess, its CPU and memory from /proc, chats that talk
through a platform's fake, and the report rows with their targets.

A bench script keeps only what is its own: which fake it serves, how a user's message goes in, how it sees the
bot's answer, its extra figures and its exit-code rule. The scripts put the repository on sys.path before they
import this module (as `bench.harness`), which is also what makes `tests.fakes` importable here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from tests.fakes.llm import FakeLLMThread, Reply, last_user_message, message_text

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[1]
HERALD_BIN = Path(sys.executable).with_name("herald")
REPLY_TIMEOUT = 30.0
LOG_LEVELS = ["debug", "info", "warning", "error"]
# Never inherited by the bench's daemon: it must run on the config and credentials the bench gives it, not on
# the developer's own Herald settings or real bot tokens.
NOT_INHERITED = ("HERALD_", "TELEGRAM_", "DISCORD_", "SLACK_", "WHATSAPP_", "MATRIX_")


def compileall_quietly() -> None:
    """Bytecode for Herald's packages, written where it is missing or older than its source."""
    import compileall

    for package in ("gateway", "agent_core", "tools", "cron"):
        compileall.compile_dir(REPO / package, quiet=2)


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


def echo_model(delay: float | Callable[[str], float] = 0.0) -> FakeLLMThread:
    """A fake model (in a thread) answering "echo: <the user's text>" after ``delay`` (or ``delay(text)``) seconds.

    The answer names its question: that is how the benches tell which message an answer belongs to.
    """
    llm = FakeLLMThread()

    def responder(request: dict[str, Any]) -> Reply:
        # The first line: a message with a file has the gateway's block of paths (and notes) below its words.
        text = message_text(last_user_message(request)).split("\n", 1)[0]
        return Reply("echo: " + text, delay=delay(text) if callable(delay) else delay)

    llm.responder = responder
    return llm


def herald_config(llm_url: str, *, turns: int, max_queue: int = 50, log_level: str = "info",
                  platforms: dict[str, Any] | None = None, port: int | None = None,
                  vision: bool = False) -> dict[str, Any]:
    """A config.yaml for the bench's daemon: the fake model, ``turns`` concurrent turns, a free port by default;
    ``vision``: the model takes images (each photo is prepared for it, and read again from the history)."""
    config: dict[str, Any] = {
        "model": {"base_url": llm_url, "name": "fake-model", "max_retries": 0, "vision": vision},
        "http": {"port": port or free_port()},
        "gateway": {"max_concurrent_turns": turns, "drain_seconds": 5, "max_queue": max_queue},
        "logging": {"level": log_level},
    }
    if platforms is not None:
        config["platforms"] = platforms
    return config


class Daemon:
    """`herald run` in a subprocess (its own CPU, its RSS measurable) in a temporary HERALD_HOME.

    ``env`` adds to the environment (the platform's tokens); ``profile`` runs the daemon under cProfile and
    writes its stats to that file. Leaving the ``with`` block stops the daemon if it still runs, prints the
    tail of its stderr if it did not exit 0 (the home, its log included, is removed right after) and removes
    the home.
    """

    def __init__(self, config: dict[str, Any], env: dict[str, str] | None = None, *,
                 home_prefix: str = "herald-bench-", profile: str | None = None) -> None:
        self.home = Path(tempfile.mkdtemp(prefix=home_prefix))
        self.port = int(config["http"]["port"])
        (self.home / "config.yaml").write_text(yaml.safe_dump(config))
        environ = {k: v for k, v in os.environ.items() if not k.startswith(NOT_INHERITED)}
        # XDG_STATE_HOME: the daemon's credential locks (gateway/cluster/locks.py) stay apart from a real daemon's.
        environ.update(HERALD_HOME=str(self.home), XDG_STATE_HOME=str(self.home / "state"))
        environ.update(env or {})
        # As an install leaves them (the Makefile's compileall, a wheel, the image): with PYTHONDONTWRITEBYTECODE
        # set, stale or missing bytecode would be compiled again at every start and counted as start-up.
        compileall_quietly()
        if profile:
            code = ("import cProfile, sys; sys.argv = ['herald', 'run']; from gateway.cli import main; "
                    f"cProfile.run('main()', {profile!r})")
            cmd = [sys.executable, "-c", code]
        else:
            cmd = [str(HERALD_BIN), "run"]
        self._out = open(self.home / "stdout.txt", "wb")  # noqa: SIM115 - closed in stop()
        self._err = open(self.home / "stderr.txt", "wb")  # noqa: SIM115
        self.started = time.perf_counter()  # the start-up figures run from here
        try:
            self.proc = subprocess.Popen(cmd, cwd=REPO, env=environ, stdin=subprocess.DEVNULL, stdout=self._out,
                                         stderr=self._err)
        except BaseException:
            self._out.close()
            self._err.close()
            shutil.rmtree(self.home, ignore_errors=True)
            raise

    def __enter__(self) -> Daemon:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        try:
            # After an exception the daemon is only being cleaned up (wait_ready's error carries its stderr).
            if self.stop() != 0 and exc_type is None:
                print(self.stderr()[-3000:], file=sys.stderr)
        finally:
            shutil.rmtree(self.home, ignore_errors=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Block until /readyz answers 200; raise, with the stderr tail, if the daemon exits or takes too long.

        The benches whose fakes run on their event loop call this through asyncio.to_thread: the fake has to
        answer the daemon while it starts.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"herald exited with {self.proc.returncode}:\n{self.stderr()[-2000:]}")
            with contextlib.suppress(OSError), urllib.request.urlopen(self.url + "/readyz", timeout=2) as resp:
                if resp.status == 200:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"herald was not ready within {timeout}s:\n{self.stderr()[-2000:]}")

    def stderr(self) -> str:
        return (self.home / "stderr.txt").read_text(errors="replace")

    def metrics(self) -> str:
        """The daemon's GET /metrics (Prometheus text); blocking, so a bench whose fake runs on its loop calls
        it through asyncio.to_thread."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as resp:
            return resp.read().decode()

    def stop(self) -> int | None:
        """SIGTERM, as a service manager stops it, and its exit code; killed if it has not exited in 30 s."""
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


def metric(text: str, name: str) -> float | None:
    """One sample's value from /metrics text (the first, whatever its labels); None if it is not there."""
    m = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})?\s+([0-9.eE+-]+|NaN)\s*$", text, re.MULTILINE)
    return float(m.group(1)) if m else None


def _buckets(text: str, name: str) -> list[tuple[float, float]]:
    from prometheus_client.parser import text_string_to_metric_families

    return sorted((float(s.labels["le"]), s.value) for f in text_string_to_metric_families(text) if f.name == name
                  for s in f.samples if s.name == f"{name}_bucket")


def histogram_quantile(text: str, name: str, q: float, since: str | None = None) -> float:
    """Like Prometheus' histogram_quantile(): linear inside the bucket the quantile falls in. ``since``: an earlier
    /metrics text, whose counts are taken away, so the quantile is of what was observed between the two."""
    buckets = _buckets(text, name)
    if since is not None:
        before = dict(_buckets(since, name))
        buckets = [(upper, count - before.get(upper, 0.0)) for upper, count in buckets]
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


@dataclass
class Usage:
    """The daemon's CPU over a load, and its memory before, after and at its peak."""

    cpu: float  # seconds, user + system
    rss_idle: float  # MB
    rss_end: float
    rss_peak: float  # VmHWM: the peak since start, between samples too


async def measure(daemon: Daemon, load: Awaitable[T]) -> tuple[T, Usage]:
    """Run ``load`` and what the daemon's process used meanwhile."""
    pid = daemon.proc.pid
    rss_idle = rss_mb(pid)[0]
    cpu_before = cpu_seconds(pid)
    result = await load
    cpu = cpu_seconds(pid) - cpu_before
    return result, Usage(cpu, rss_idle, *rss_mb(pid))


@dataclass
class LoadResult:
    elapsed: float  # seconds, from the first question to the last answer
    asked: int
    latencies: list[float]  # seconds, one per answered question
    lost: int  # questions without an answer
    twice: int  # questions answered more than once

    @property
    def answered(self) -> int:
        return len(self.latencies)

    @property
    def rate(self) -> float:
        return self.answered / self.elapsed if self.elapsed else 0.0

    def latency_ms(self, p: float) -> float:
        return percentile([x * 1000 for x in self.latencies], p)


class Conversations:
    """Chats that each ask their next question as soon as the answer to the previous one arrived.

    The platform's fake hands every message the bot sends to answered(). The echo model's answer names its
    question, so late, out-of-order and repeated answers are all counted against the right question. A
    question's latency runs from just before it is handed to the fake to the moment its answer arrives.
    """

    def __init__(self) -> None:
        self.waiting: dict[str, tuple[float, asyncio.Future[float]]] = {}
        self.answers: Counter[str] = Counter()

    def answered(self, text: str) -> None:
        now = time.perf_counter()
        question = text.removeprefix("echo: ")
        self.answers[question] += 1
        entry = self.waiting.pop(question, None)
        if entry is not None and not entry[1].done():
            entry[1].set_result(now - entry[0])

    def expect(self, question: str) -> asyncio.Future[float]:
        """Start the clock for ``question``: the future resolves to the seconds until its answer arrived."""
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.waiting[question] = (time.perf_counter(), future)
        return future

    async def run(self, chats: int, per_chat: int, ask: Callable[[int, str], Awaitable[object]],
                  tag: str = "q") -> LoadResult:
        """``chats`` chats, numbered from 0, each asking ``per_chat`` questions; ``ask(chat, text)`` sends one.

        A chat that waits REPLY_TIMEOUT for an answer stops there; its question counts as lost.
        """
        latencies: list[float] = []
        asked: list[str] = []

        async def chat(n: int) -> None:
            for i in range(per_chat):
                question = f"{tag}{n}-{i}"
                asked.append(question)
                future = self.expect(question)
                await ask(n, question)
                try:
                    latencies.append(await asyncio.wait_for(future, REPLY_TIMEOUT))
                except TimeoutError:
                    return

        started = time.perf_counter()
        await asyncio.gather(*(chat(n) for n in range(chats)))
        elapsed = time.perf_counter() - started
        await asyncio.sleep(1.0)  # late duplicates show up here
        return LoadResult(elapsed, len(asked), latencies, lost=sum(1 for q in asked if self.answers[q] == 0),
                          twice=sum(1 for q in asked if self.answers[q] > 1))


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


class Report:
    """Rows of figures on stdout: label, value, and the target with its verdict where there is one.

    People compare these rows between runs and machines, so the labels and the layout stay as they are; the
    column widths are the bench's own.
    """

    def __init__(self, label_width: int = 34, value_width: int = 14) -> None:
        self.label_width = label_width
        self.value_width = value_width

    def row(self, label: str, value: str, target: str | None = "") -> None:
        """``target=None`` prints no target column at all (not even its separating spaces)."""
        line = f"  {label:{self.label_width}} {value:>{self.value_width}}"
        print(line if target is None else f"{line}   {target}")

    def check(self, label: str, value: str, target: str, ok: bool) -> None:
        self.row(label, value, f"{target}  {verdict(ok)}")

    def replies(self, result: LoadResult, *, rate_target: float, p99_target_ms: float, brief: bool = False) -> None:
        """Answered, messages/s and ingress-to-reply latency; ``brief`` leaves out the duration and the maximum."""
        self.row("messages answered", f"{result.answered}/{result.asked}")
        if not brief:
            self.row("duration", f"{result.elapsed:.2f} s")
        self.check("messages/s", f"{result.rate:.1f}", f">= {rate_target:g}", result.rate >= rate_target)
        self.row("ingress-to-reply p50", f"{result.latency_ms(50):.1f} ms")
        p99 = result.latency_ms(99)
        self.check("ingress-to-reply p99", f"{p99:.1f} ms", f"< {p99_target_ms:g} ms", p99 < p99_target_ms)
        if not brief:
            self.row("ingress-to-reply max", f"{result.latency_ms(100):.1f} ms")  # the 100th percentile is the max

    def delivery(self, result: LoadResult) -> None:
        self.check("lost", str(result.lost), "0", result.lost == 0)
        self.check("answered more than once", str(result.twice), "0", result.twice == 0)

    def cpu(self, usage: Usage, result: LoadResult, *, cores: bool = True, target_ms: float | None = None) -> None:
        """Daemon CPU per answered message; ``cores`` adds how much of the daemon's cores the load kept busy."""
        ms = usage.cpu / max(1, result.answered) * 1000
        per_message = f"{ms:.2f} ms"
        if not cores:
            self.row("daemon CPU per message", per_message, None)
            return
        busy = usage.cpu / result.elapsed if result.elapsed else 0
        used = f"(the load used {busy:.2f} of the daemon's cores)"
        if target_ms is None:
            self.row("daemon CPU per message", per_message, used)
        else:
            self.check("daemon CPU per message", per_message, f"<= {target_ms:g} ms  {used}", ms <= target_ms)

    def memory(self, usage: Usage, *, rss_target_mb: float) -> None:
        self.row("daemon RSS idle", f"{usage.rss_idle:.1f} MB")
        self.check("daemon RSS at end / peak (HWM)", f"{usage.rss_end:.1f} / {usage.rss_peak:.1f} MB",
                   f"< {rss_target_mb:g} MB", usage.rss_peak < rss_target_mb)

    def exit_code(self, code: int | None) -> None:
        self.check("daemon exit code on SIGTERM", str(code), "0", code == 0)


FIRST_QUESTION = "first0-0"  # chat 0's, queued before the daemon starts
SLOW_TAG = "slow"  # the questions the model sits on for --slow-seconds
LOOP_LAG_TARGET_MS = 10.0
START_TARGET_MS = 1000.0


@dataclass
class BusyLoad:
    """The same load again while --slow-turns turns sit in the model call in other chats."""

    result: LoadResult
    running: tuple[float, float]  # herald_turns_running just before the load and just after it
    lag_p99: float  # seconds: herald_loop_lag_seconds observed during the load, its p99
    lag_gauge: float | None  # herald_loop_lag_p99_seconds when the load ended: the daemon's last minute
    uptime: float  # seconds the daemon had run when the gauge was read
    slow_answered: int


async def wait_turns_running(daemon: Daemon, at_least: int, timeout: float = REPLY_TIMEOUT) -> float:
    """Until the daemon says ``at_least`` turns run (or ``timeout``: the report then shows how many did); how many
    it said last."""
    deadline = time.monotonic() + timeout
    while True:
        running = metric(await asyncio.to_thread(daemon.metrics), "herald_turns_running") or 0
        if running >= at_least or time.monotonic() > deadline:
            return running
        await asyncio.sleep(0.05)


async def with_lag(daemon: Daemon, load: Awaitable[T]) -> tuple[T, float, str]:
    """``load``'s result, the p99 of the daemon's loop lag while it ran (its histogram read before and after, so
    the start-up and what came before are left out), and the /metrics text after it."""
    before = await asyncio.to_thread(daemon.metrics)
    result = await load
    after = await asyncio.to_thread(daemon.metrics)
    return result, histogram_quantile(after, "herald_loop_lag_seconds", 0.99, since=before), after


async def busy_load(args: argparse.Namespace, daemon: Daemon, talk: Conversations,
                    ask: Callable[[int, str], Awaitable[object]]) -> BusyLoad:
    """--slow-turns chats (numbered after the load's) each ask one question the model takes --slow-seconds over;
    once their turns all run, the load runs again beside them, with the daemon's loop lag read over it."""
    slow = []
    for n in range(args.chats, args.chats + args.slow_turns):
        slow.append(talk.expect(f"{SLOW_TAG}{n}-0"))
        await ask(n, f"{SLOW_TAG}{n}-0")
    running = await wait_turns_running(daemon, args.slow_turns)
    result, lag, after = await with_lag(daemon, talk.run(args.chats, args.messages_per_chat, ask, tag="b"))
    # In REPLY_TIMEOUT past their model's time: a slow turn not answered by then is lost.
    done = await asyncio.gather(*(asyncio.wait_for(f, args.slow_seconds + REPLY_TIMEOUT) for f in slow),
                                return_exceptions=True)
    return BusyLoad(result, (running, metric(after, "herald_turns_running") or 0), lag,
                    metric(after, "herald_loop_lag_p99_seconds"), time.perf_counter() - daemon.started,
                    slow_answered=sum(1 for d in done if not isinstance(d, BaseException)))


def report_busy(report: Report, args: argparse.Namespace, busy: BusyLoad, *, rate_target: float,
                p99_target_ms: float) -> bool:
    """The busy load's rows; whether it failed (a message lost or answered twice, a slow turn not answered)."""
    print(f"  ... while {args.slow_turns} turns sit {args.slow_seconds:g} s in the model call in other chats:")
    report.replies(busy.result, rate_target=rate_target, p99_target_ms=p99_target_ms, brief=True)
    report.delivery(busy.result)
    report.row("turns running, load start / end", f"{busy.running[0]:.0f} / {busy.running[1]:.0f}",
               f"(the slow ones: {args.slow_turns})")
    lag = busy.lag_p99 * 1000
    report.check("loop lag p99 with the slow turns", f"{lag:.2f} ms", f"< {LOOP_LAG_TARGET_MS:g} ms",
                 lag < LOOP_LAG_TARGET_MS)
    if busy.lag_gauge is not None and busy.uptime < 60:
        # The gauge's minute then holds the daemon's start-up (imports, connecting), not only this load.
        report.row("loop lag p99, daemon's last minute", f"{busy.lag_gauge * 1000:.2f} ms",
                   f"(up {busy.uptime:.0f} s: its start-up included)")
    elif busy.lag_gauge is not None:
        gauge = busy.lag_gauge * 1000
        report.check("loop lag p99, daemon's last minute", f"{gauge:.2f} ms", f"< {LOOP_LAG_TARGET_MS:g} ms",
                     gauge < LOOP_LAG_TARGET_MS)
    report.row("slow turns answered", f"{busy.slow_answered}/{args.slow_turns}", None)
    return bool(busy.result.lost or busy.result.twice or busy.slow_answered < args.slow_turns)


async def first_answer(question: asyncio.Future[float] | None) -> float | None:
    """Seconds from the question queued before the daemon started to its answer (NaN if it never came); None when
    there was no such question."""
    if question is None:
        return None
    try:
        return await asyncio.wait_for(question, REPLY_TIMEOUT)
    except TimeoutError:
        return float("nan")


async def chat_bench(args: argparse.Namespace, *, title: str, talk: Conversations,
                     ask: Callable[[int, str], Awaitable[object]], platform: dict[str, Any], env: dict[str, str],
                     home_prefix: str, rate_target: float, p99_target_ms: float, rss_target_mb: float,
                     ask_before_start: bool = False, cpu_target_ms: float | None = None) -> int:
    """The Telegram, Discord and Matrix benches once their fake runs: the daemon on ``platform`` (its platforms:
    entry) and ``env``, an echo model answering after --model-delay, --chats chats of --messages-per-chat through
    ``ask``, then the report. ``ask_before_start``: the platform's fake keeps a message until the bot fetches it,
    so one is queued before `herald run` is spawned, and the time to its answer is the start-up figure. With
    --slow-turns, the load runs again beside that many slow turns. Returns the exit code: 1 if a message was lost
    or answered twice, or the daemon did not exit 0 on SIGTERM; the targets are for reading, not for failing.
    """
    llm = echo_model(lambda text: args.slow_seconds if text.startswith(SLOW_TAG) else args.model_delay)
    busy = None
    try:
        llm.start()
        config = herald_config(llm.base_url, turns=max(32, args.chats + args.slow_turns), log_level=args.log_level,
                               platforms={"web": {"enabled": False}, **platform},
                               vision=bool(getattr(args, "image_every", 0)))
        early = talk.expect(FIRST_QUESTION) if ask_before_start else None
        if ask_before_start:
            await ask(0, FIRST_QUESTION)
        with Daemon(config, env, home_prefix=home_prefix, profile=args.profile) as daemon:
            await asyncio.to_thread(daemon.wait_ready)
            ready = time.perf_counter() - daemon.started
            first = await first_answer(early)
            (result, usage), lag, _ = await with_lag(daemon, measure(daemon, talk.run(args.chats,
                                                                                       args.messages_per_chat, ask)))
            if args.slow_turns:
                busy = await busy_load(args, daemon, talk, ask)
            # In a thread: the platform's fake runs on this loop and must keep answering the daemon as it drains.
            code = await asyncio.to_thread(daemon.stop)
    finally:
        llm.stop()

    report = Report()
    images = getattr(args, "image_every", 0)
    print(f"\n{title} load: {args.chats} chats x {args.messages_per_chat} messages, model delay "
          f"{args.model_delay * 1000:g} ms, log level {args.log_level}"
          + (f", a photo in every {images} messages (vision on)" if images else ""))
    report.row("start to /readyz", f"{ready * 1000:.0f} ms")
    failed = False
    if first is not None:
        report.check("start to first answered message", f"{first * 1000:.0f} ms", f"< {START_TARGET_MS:g} ms",
                     first * 1000 < START_TARGET_MS)
        failed = math.isnan(first) or talk.answers[FIRST_QUESTION] > 1
    report.replies(result, rate_target=rate_target, p99_target_ms=p99_target_ms)
    report.delivery(result)
    report.cpu(usage, result, target_ms=cpu_target_ms)
    report.memory(usage, rss_target_mb=rss_target_mb)
    report.row("loop lag p99 during the load", f"{lag * 1000:.2f} ms")
    if busy is not None:
        failed |= report_busy(report, args, busy, rate_target=rate_target, p99_target_ms=p99_target_ms)
    report.exit_code(code)
    return 1 if failed or result.lost or result.twice or code != 0 else 0


def chat_bench_main(doc: str, run: Callable[[argparse.Namespace], Coroutine[Any, Any, int]]) -> int:
    """The command line of the Telegram, Discord and Matrix benches."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--messages-per-chat", type=int, default=50)
    parser.add_argument("--model-delay", type=float, default=0.0, help="seconds the fake model takes per answer")
    parser.add_argument("--log-level", default="info", choices=LOG_LEVELS)
    parser.add_argument("--profile", default=None, help="write the daemon's cProfile stats to this file")
    parser.add_argument("--image-every", type=int, default=0,
                        help="every Nth message of a chat is a photo (its question as the caption), and the model "
                             "takes images; 0: text only")
    parser.add_argument("--slow-turns", type=int, default=0,
                        help="then the load again while this many turns (in other chats) sit in the model call")
    parser.add_argument("--slow-seconds", type=float, default=8.0, help="how long the model takes over a slow turn")
    return run_async(run, parser.parse_args())


def run_async(run: Callable[[argparse.Namespace], Coroutine[Any, Any, int]], args: argparse.Namespace) -> int:
    """``run(args)`` on a new event loop; Ctrl-C exits 130, as a shell reports it, without a traceback."""
    try:
        return asyncio.run(run(args))
    except KeyboardInterrupt:
        return 130
