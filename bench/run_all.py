#!/usr/bin/env python3
"""Every bench, one after the other, at small sizes (`make bench`): prints each one's figures as it runs and
writes them to bench/RESULTS.md, with the date, the machine and the commit they were measured on.

    .venv/bin/python bench/run_all.py                       # all of them, small: about a minute and a half
    .venv/bin/python bench/run_all.py --only telegram,discord
    .venv/bin/python bench/run_all.py --size tiny --no-write  # a few chats x 2-3 messages: does each still run?
    .venv/bin/python bench/run_all.py --db-url postgresql+asyncpg://...   # cluster_load too

The benches run one at a time, each in its own process: two at once would share the cores and each would
measure the other. cluster_load runs only with a PostgreSQL server (--db-url, or $HERALD_TEST_DATABASE_URL),
sandbox_cost only where bubblewrap is installed; otherwise they are skipped and the reason is said. soak (an hour)
is not part of it: `make soak`; `--only soak` runs a short one.

RESULTS.md keeps one section per bench: a run of some of them (--only) refreshes those and keeps the others as
they were, each with its own date and commit. The tiny size never writes it (its figures say nothing).

Exits 1 if a bench failed what it checks besides speed (a message lost or answered twice, a wrong answer, the
daemon not exiting 0 on SIGTERM, a bench that crashed or timed out); a missed speed target is reported, not
failed on, as the benches themselves do (sandbox_cost's exit code 1 is its speed target).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RESULTS = BENCH / "RESULTS.md"
SIZES = ("small", "tiny")
TIMEOUT = {"small": 300.0, "tiny": 180.0}  # seconds a bench may take before it counts as failed


def _chats(chats: int, messages: int, *more: str) -> tuple[str, ...]:
    return ("--chats", str(chats), "--messages-per-chat", str(messages), *more)


@dataclass(frozen=True)
class Bench:
    """One bench script: its arguments at each size, what it needs to run at all, and how to read its exit code."""

    name: str
    small: tuple[str, ...]
    tiny: tuple[str, ...]
    needs: str = ""  # "postgresql" or "bwrap"
    speed_exit: int | None = None  # an exit code that means a speed target was missed (not a failure)
    counts: bool = True  # prints how many messages were lost and answered twice
    in_make: bool = True  # part of `make bench` (soak is not: it is an hour)

    def args(self, size: str, db_url: str | None) -> list[str]:
        extra = ["--database-url", db_url] if self.needs == "postgresql" and db_url else []
        return [*(self.small if size == "small" else self.tiny), *extra]


BENCHES = [
    # 64 turns sit in the model call while the load runs again: the loop-lag figure; they outlast the load.
    Bench("telegram_load", _chats(20, 20, "--slow-turns", "64", "--slow-seconds", "12"),
          _chats(3, 3, "--slow-turns", "4", "--slow-seconds", "2")),
    Bench("discord_load", _chats(20, 20), _chats(3, 3)),
    Bench("matrix_load", _chats(20, 20), _chats(3, 3)),
    Bench("whatsapp_load", _chats(20, 20), _chats(3, 3)),
    Bench("slack_load", _chats(20, 10, "--slow-turns", "64", "--slow-seconds", "4"),
          _chats(3, 2, "--slow-turns", "4", "--slow-seconds", "1")),
    Bench("web_load", _chats(16, 10), _chats(3, 2, "--model-delay", "0.05")),
    Bench("api_load", ("--clients", "20", "--requests-per-client", "10"),
          ("--clients", "3", "--requests-per-client", "2")),
    Bench("cluster_load", _chats(10, 10, "--instances", "1,2"), _chats(3, 2, "--instances", "1,2"),
          needs="postgresql"),
    Bench("sandbox_cost", ("--runs", "20"), ("--runs", "3"), needs="bwrap", speed_exit=1, counts=False),
    Bench("classify_time", (), (), counts=False),
    Bench("dashboard_charts", ("--per-day", "20000", "--old-days", "2", "--reads", "3"),
          ("--per-day", "500", "--old-days", "1", "--reads", "2"), counts=False),
    Bench("soak", ("--minutes", "3"), ("--minutes", "0.3", "--rate", "5", "--chats", "4"), in_make=False),
]
BY_NAME = {b.name: b for b in BENCHES}

# The rows RESULTS.md's table shows, by the label the benches print them under (the first of each).
KEY_FIGURES = {
    "messages/s": "msg/s", "requests/s": "req/s", "ingress-to-reply p99": "p99",
    "ingress-to-reply latency p99": "p99", "time to first token p99": "first token p99",
    "daemon CPU per message": "CPU/msg", "daemon CPU per request": "CPU/req",
    "daemon RSS at end / peak (HWM)": "RSS end/peak", "daemon RSS idle / end / peak": "RSS idle/end/peak",
    "start to first answered message": "start to first answer",
    "loop lag p99 during the load": "loop lag p99",
    "loop lag p99 with the slow turns": "loop lag p99 with the slow turns",
}
LOST = re.compile(r"^\s+(?:lost|lost messages|missing or wrong answers)\s+(\d+)\b", re.MULTILINE)
TWICE = re.compile(r"^\s+(?:messages )?answered more than once\s+(\d+)\b", re.MULTILINE)
SOAK_COUNTS = re.compile(r"\blost (\d+), answered twice (\d+)")


def figure(output: str, label: str) -> str | None:
    """The value of the first report row with this label (rows: label, value, then the target 3 spaces on)."""
    m = re.search(rf"^\s+{re.escape(label)}\s+(\S(?:.*?\S)?)(?:\s{{3,}}|\s*$)", output, re.MULTILINE)
    return m.group(1) if m else None


def invariants(output: str) -> tuple[int, int, int]:
    """(rows found, messages lost, messages answered more than once) over every load the bench reported."""
    lost = [int(x) for x in LOST.findall(output)]
    twice = [int(x) for x in TWICE.findall(output)]
    for a, b in SOAK_COUNTS.findall(output):
        lost.append(int(a))
        twice.append(int(b))
    return len(lost) + len(twice), sum(lost), sum(twice)


@dataclass
class Outcome:
    bench: Bench
    status: str  # ok, failed, speed target missed, skipped
    output: str = ""
    seconds: float = 0.0
    code: int | None = None
    command: str = ""
    when: str = field(default_factory=lambda: datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"))
    load: tuple[float, float, float] = field(default_factory=os.getloadavg)  # as the bench started

    @property
    def failed(self) -> bool:
        return self.status == "failed"


def missing(bench: Bench, db_url: str | None) -> str | None:
    """Why the bench cannot run here, or None."""
    if bench.needs == "postgresql" and not (db_url and db_url.startswith("postgresql")):
        return "needs PostgreSQL: pass --db-url or set HERALD_TEST_DATABASE_URL"
    if bench.needs == "bwrap" and shutil.which("bwrap") is None:
        return "needs bubblewrap (bwrap), which is not installed here"
    return None


def run_bench(bench: Bench, size: str, db_url: str | None = None, echo: bool = False) -> Outcome:
    """The bench's script in a process of its own; its output (stdout and stderr) echoed as it comes if ``echo``."""
    reason = missing(bench, db_url)
    if reason:
        return Outcome(bench, "skipped", output=reason)
    cmd = [sys.executable, str(BENCH / f"{bench.name}.py"), *bench.args(size, db_url)]
    shown = " ".join(["python", f"bench/{bench.name}.py", *bench.args(size, db_url and "URL")])
    start = Outcome(bench, "running")  # the date and the load average as it starts
    started = time.monotonic()
    lines: list[str] = []
    # A session of its own: a bench that hangs is stopped with the daemon and helpers it started.
    with subprocess.Popen(cmd, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, start_new_session=True) as proc:
        timer = _Deadline(proc, TIMEOUT[size])
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if echo:
                print(line, end="", flush=True)
        code = proc.wait()
        timer.cancel()
    output = "".join(lines)
    found, lost, twice = invariants(output)
    if timer.fired:
        status, output = "failed", output + f"\n(stopped: still running after {TIMEOUT[size]:g} s)\n"
    elif code == 2 and bench.needs:
        status = "skipped"  # the bench found what it needs unusable, and said why
    elif code == bench.speed_exit:
        status = "speed target missed"
    elif code != 0 or lost or twice or (bench.counts and not found):
        status = "failed"
    else:
        status = "ok"
    return Outcome(bench, status, output, time.monotonic() - started, code, shown, start.when, start.load)


class _Deadline:
    """Stops a bench's whole process group once its time is up."""

    def __init__(self, proc: subprocess.Popen[str], seconds: float) -> None:
        self.fired = False
        self._proc = proc
        self._timer = threading.Timer(seconds, self._stop)
        self._timer.daemon = True
        self._timer.start()

    def _stop(self) -> None:
        self.fired = True
        try:
            os.killpg(self._proc.pid, signal.SIGTERM)
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def cancel(self) -> None:
        self._timer.cancel()


def commit() -> str:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def machine() -> str:
    return f"{os.cpu_count()} cores, Python {sys.version.split()[0]}"


def key_figures(outcome: Outcome) -> str:
    if outcome.status == "skipped":
        return outcome.output.strip()
    shown = []
    for label, short in KEY_FIGURES.items():
        value = figure(outcome.output, label)
        if value is not None and not any(s.startswith(short + " ") for s in shown):
            shown.append(f"{short} {value}")
    found, lost, twice = invariants(outcome.output)
    if found:
        shown.append(f"lost {lost}, twice {twice}")
    if not shown:  # the benches that print a few lines rather than rows: those lines are their figures
        shown = [" ".join(line.split()) for line in outcome.output.splitlines() if line.strip()][-3:]
    return "; ".join(shown).replace("|", "/")


def table_row(outcome: Outcome, revision: str) -> str:
    took = f"{outcome.seconds:.0f} s" if outcome.status != "skipped" else ""
    return (f"| {outcome.bench.name} | {outcome.when} | {revision} | {outcome.status} | {took} | "
            f"{key_figures(outcome)} |")


def section(outcome: Outcome, revision: str) -> str:
    load = " / ".join(f"{x:.2f}" for x in outcome.load)
    head = (f"## {outcome.bench.name}\n\n{outcome.when}, commit {revision}, {machine()}, load average {load} "
            f"(1 / 5 / 15 min) as it started; {outcome.status}")
    if outcome.status == "skipped":
        return f"{head}: {outcome.output.strip()}\n"
    return (f"{head}, exit code {outcome.code}, {outcome.seconds:.1f} s.\n\n`{outcome.command}`\n\n"
            f"```\n{outcome.output.strip()}\n```\n")


def _kept(old: str, fresh: set[str]) -> tuple[list[str], dict[str, str]]:
    """From the RESULTS.md there was: the table rows and sections of the benches this run did not run."""
    rows = [line for line in old.splitlines()
            if line.startswith("| ") and line.split("|")[1].strip() in BY_NAME.keys() - fresh]
    sections = {}
    for part in old.split("\n## ")[1:]:
        name = part.split("\n", 1)[0].strip()
        if name in BY_NAME and name not in fresh:
            sections[name] = "## " + part.rstrip() + "\n"
    return rows, sections


def write_results(outcomes: list[Outcome], note: str, started_load: tuple[float, float, float],
                  path: Path = RESULTS) -> None:
    revision = commit()
    old = path.read_text() if path.exists() else ""
    rows, sections = _kept(old, {o.bench.name for o in outcomes})
    rows += [table_row(o, revision) for o in outcomes]
    sections.update({o.bench.name: section(o, revision) for o in outcomes})
    order = list(BY_NAME)
    rows.sort(key=lambda row: order.index(row.split("|")[1].strip()))
    busy = ""
    if started_load[0] >= 0.5:  # the benches' own processes had not started yet: this load is other work's
        busy = (f"; the machine was shared: other work was running (load average {started_load[0]:.2f} before the "
                f"first bench, on {os.cpu_count()} cores)")
    text = [
        "# Bench results\n",
        "Written by `make bench` (bench/run_all.py): each bench's latest figures at the small sizes set in "
        "bench/run_all.py, one bench at a time. Compare figures measured on the same machine at a similar load; "
        "the targets are in bench/README.md.\n",
        f"The last run: {outcomes[0].when if outcomes else ''}, commit {revision}, {machine()}{busy}.",
        *([f"\n{note}"] if note else []),
        "\n| bench | when | commit | result | took | key figures |\n|---|---|---|---|---|---|",
        *rows,
        "",
        *(sections[name] for name in order if name in sections),
    ]
    path.write_text("\n".join(text).rstrip() + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=SIZES, default="small")
    parser.add_argument("--tiny", dest="size", action="store_const", const="tiny", help="the same as --size tiny")
    parser.add_argument("--only", default="", help="comma-separated bench names (telegram or telegram_load)")
    parser.add_argument("--db-url", default=os.environ.get("HERALD_TEST_DATABASE_URL"),
                        help="PostgreSQL for cluster_load (default: $HERALD_TEST_DATABASE_URL)")
    parser.add_argument("--no-write", action="store_true", help="leave bench/RESULTS.md as it is")
    parser.add_argument("--note", default="", help="a line for RESULTS.md about this run (the machine, its load)")
    args = parser.parse_args()
    chosen = [b for b in BENCHES if b.in_make]
    if args.only:
        names = args.only.split(",")
        chosen = [b for b in BENCHES if any(b.name == n or b.name.startswith(n + "_") for n in names)]
        unknown = [n for n in names if not any(b.name == n or b.name.startswith(n + "_") for b in BENCHES)]
        if unknown:
            parser.error(f"no bench {', '.join(unknown)}; there are {', '.join(BY_NAME)}")
    started_load = os.getloadavg()
    began = time.monotonic()
    outcomes = []
    for bench in chosen:
        print(f"\n===== {bench.name} ({args.size})", flush=True)
        outcome = run_bench(bench, args.size, args.db_url, echo=True)
        if outcome.status == "skipped":
            print(f"skipped: {outcome.output}")
        outcomes.append(outcome)
    print(f"\n===== {len(outcomes)} benches in {time.monotonic() - began:.0f} s ({machine()}, commit {commit()})")
    for o in outcomes:
        print(f"  {o.bench.name:18} {o.status:20} {key_figures(o)}")
    if args.size == "small" and not args.no_write:
        write_results(outcomes, args.note, started_load)
        print(f"written to {RESULTS.relative_to(REPO)}")
    return 1 if any(o.failed for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
