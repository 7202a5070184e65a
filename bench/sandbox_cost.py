#!/usr/bin/env python3
"""What the sandbox adds to one command: `true` run bare, in bubblewrap as it was (the host's network, no
limits), and as it is now (a network namespace of its own, the limits' prelude, the egress bridge).

    .venv/bin/python bench/sandbox_cost.py [--runs 40] [--workspace PATH]

Each row is the median (and p90) wall time of starting the command and waiting for it, as the terminal tool
does (fork/exec, bwrap, the prelude, exit). The rows after the first say what each layer adds. The target:
network on costs at most 20 ms more than the sandbox as it was. With --workspace, also the time to measure that
folder's size after a command (tools.terminal.max_workspace_mb). Figures depend on the machine and its load;
compare rows of one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import limits, sandbox
from tools.config import TerminalConfig
from tools.egress import Egress

TARGET_MS = 20.0


def _quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(0.9 * (len(ordered) - 1))]


def timed(run: object, runs: int) -> tuple[float, float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        run()  # type: ignore[operator]
        samples.append((time.perf_counter() - start) * 1000)
    return _quantiles(samples)


def command(policy: sandbox.SandboxPolicy, line_of: object = None) -> object:
    env = sandbox.child_env(policy)

    def run() -> None:
        with sandbox.launch("true", policy) as (line, fds):
            if line_of is not None:
                line = line_of(line)  # type: ignore[operator]
            proc = subprocess.Popen(line, cwd=policy.workspace, env=env, stdin=subprocess.DEVNULL,
                                    start_new_session=True, pass_fds=fds)
        if proc.wait() != 0:
            raise SystemExit(f"the sandboxed command failed: {line}")

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--workspace", type=Path, default=None, help="also time measuring this folder's size")
    args = parser.parse_args()
    if sandbox.resolve_mode("bwrap")[0] != "bwrap":
        print("bubblewrap is unusable here:", sandbox.resolve_mode("bwrap")[1])
        return 2
    egress = Egress()
    with tempfile.TemporaryDirectory(prefix="herald-bench-") as ws:
        point = egress.start()
        try:
            on = sandbox.make_policy(TerminalConfig(sandbox="bwrap"), workspace=ws, hidden=sandbox.default_hidden(),
                                     egress=point)
            off = sandbox.make_policy(TerminalConfig(sandbox="bwrap", network=False), workspace=ws,
                                      hidden=sandbox.default_hidden())
            bare_limits = replace(off, limits=limits.Limits(), max_processes=0)
            rows = [
                ("bare: bash -c true", command(replace(bare_limits, mode="none"))),
                ("bwrap as before (host network, no limits)",
                 command(bare_limits, lambda line: [a for a in line if a != "--unshare-net"])),
                ("bwrap, own network namespace, no limits", command(bare_limits)),
                ("bwrap + limits (network: false)", command(off)),
                ("bwrap + limits + network (socat bridge)", command(on)),
            ]
            python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
            real = os.path.realpath(python) if python else None
            if real and sandbox.hidden_reason(real, sandbox.layers(on)) is None:
                rows.append(("bwrap + limits + network (python bridge)",
                             command(replace(on, bridge=("python", real)))))
            for _, run in rows:
                run()  # warm the page cache
            # Round-robin, so a change in the machine's load falls on every row alike.
            samples: list[list[float]] = [[] for _ in rows]
            for _ in range(args.runs):
                for i, (_, run) in enumerate(rows):
                    start = time.perf_counter()
                    run()  # type: ignore[operator]
                    samples[i].append((time.perf_counter() - start) * 1000)
            figures = [(label, *_quantiles(times)) for (label, _), times in zip(rows, samples, strict=True)]
        finally:
            egress.stop()
    before = figures[1][1]
    print(f"{'per command':<48} {'median':>9} {'p90':>9} {'vs before':>10}")
    for label, median, p90 in figures:
        print(f"{label:<48} {median:8.1f}ms {p90:8.1f}ms {median - before:+9.1f}ms")
    network = figures[4][1] - before
    print(f"network on adds {network:.1f} ms per command to the sandbox as it was (target <= {TARGET_MS:g} ms)")
    if args.workspace:
        median, p90 = timed(lambda: limits.workspace_usage(str(args.workspace)), max(5, args.runs // 4))
        used = limits.workspace_usage(str(args.workspace)) / (1 << 20)
        print(f"measuring {args.workspace} ({used:.0f} MB): median {median:.1f} ms, p90 {p90:.1f} ms")
    return 0 if network <= TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
