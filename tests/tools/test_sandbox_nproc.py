"""The process cap: a fork bomb the classifier misses, run for real inside bubblewrap, stops at
tools.terminal.max_processes tasks and ends with the command's timeout, while the daemon can still start threads
and processes meanwhile.

The kernel does not apply RLIMIT_NPROC to root, so when the tests run as root the daemon's side (tools.sandbox
driving bwrap) runs in a child process under a user id of its own, as Herald runs under its own user in
production. An id no one else has, not ``nobody``: the test counts the user's tasks, and a second copy of the
suite running this test at the same time would count its fork bomb too. That child is itself held to
SAFETY_NET tasks, so a regression cannot take the machine's pids with it. It may not be able to enter the
checkout (a root user's clone under /root, a ``mktemp -d`` folder): it imports a copy of the ``tools``
package from a temporary folder anyone can read.
"""

from __future__ import annotations

import json
import os
import pwd
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from tools import processes, sandbox
from tools.sandbox import resolve_mode

REPO = Path(__file__).resolve().parents[2]
CAP = 64
SAFETY_NET = 1000  # what the daemon's user may run in all (a fork bomb without the cap stops here)
SECONDS = 6.0

DAEMON = textwrap.dedent('''
    import asyncio, json, os, re, subprocess, sys, threading, time
    from types import SimpleNamespace
    from tools import sandbox

    def user_tasks():  # this user's tasks, threads included, as RLIMIT_NPROC counts them
        total = 0
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                status = open(f"/proc/{entry}/status").read()
            except OSError:
                continue
            if int(re.search(r"^Uid:\\s+(\\d+)", status, re.M).group(1)) == os.getuid():
                total += int(re.search(r"^Threads:\\s+(\\d+)", status, re.M).group(1))
        return total

    ws, cap, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    terminal = SimpleNamespace(sandbox="bwrap", network=False, hidden_paths=[], env_passthrough=[],
                               timeout_seconds=seconds, max_processes=cap)
    policy = sandbox.make_policy(terminal, workspace=ws)
    before = user_tasks()
    peak, done, probes = 0, threading.Event(), {}

    def sample():
        global peak
        while not done.is_set():
            peak = max(peak, user_tasks())
            time.sleep(0.05)

    def probe():  # the daemon in the middle of the bomb: can it still make a thread and a process?
        time.sleep(seconds / 2)
        try:
            t = threading.Thread(target=lambda: None)
            t.start()
            t.join()
            probes["thread"] = True
        except RuntimeError as exc:
            probes["thread"] = str(exc)
        try:
            probes["process"] = subprocess.run(["/bin/true"]).returncode == 0
        except OSError as exc:
            probes["process"] = str(exc)

    threading.Thread(target=sample, daemon=True).start()
    prober = threading.Thread(target=probe)
    prober.start()
    try:
        # The shell stays (sleep): when it exits, the PID namespace and every process in it go at once.
        asyncio.run(sandbox.run_sandboxed("exec 2>bomb.log; :(){ :|:& };:; sleep 600", policy, timeout=seconds))
        ended = "exited"
    except TimeoutError:
        ended = "timed out"
    prober.join()
    time.sleep(0.5)
    done.set()
    print(json.dumps({"scope": getattr(policy, "nproc_scope", "none"), "before": before, "peak": peak,
                      "after": user_tasks(), "probes": probes, "ended": ended}))
''')

_MODE, _PROBLEM = resolve_mode("bwrap")


def _own_uid() -> int:
    """A user id that has no passwd entry and runs nothing on this machine."""
    rng = random.SystemRandom()
    while True:
        uid = rng.randrange(1 << 30, 1 << 31)
        try:
            pwd.getpwuid(uid)
        except KeyError:
            if processes.user_tasks(uid) == 0:
                return uid


def _interpreter(uid: int | None) -> str | None:
    """A python the daemon's user can run (tools.sandbox needs only the standard library)."""
    for candidate in (sys.executable, shutil.which("python3", path="/usr/bin:/bin")):
        if not candidate:
            continue
        try:
            ran = subprocess.run([candidate, "-c", ""], user=uid, capture_output=True, cwd="/")
        except OSError:
            continue
        if ran.returncode == 0:
            return candidate
    return None


@pytest.mark.slow
@pytest.mark.skipif(_MODE != "bwrap", reason=f"bubblewrap is unusable here: {_PROBLEM}")
def test_a_fork_bomb_stops_at_the_cap_and_the_daemon_is_unaffected() -> None:
    uid = _own_uid() if os.getuid() == 0 else None
    python = _interpreter(uid)
    if python is None:
        pytest.skip("no python the daemon's user can run")
    ws = Path(tempfile.mkdtemp(prefix="herald-nproc-", dir="/var/tmp"))
    lib = Path(tempfile.mkdtemp(prefix="herald-nproc-lib-", dir="/var/tmp"))
    try:
        if uid is not None:
            os.chown(ws, uid, uid)
        shutil.copytree(REPO / "tools", lib / "tools", ignore=shutil.ignore_patterns("__pycache__"))
        for path in [lib, *lib.rglob("*")]:  # readable whatever the checkout's own modes
            path.chmod(0o755 if path.is_dir() else 0o644)
        # The safety net: lowered in the child (after it became the daemon's user), so only that user is held.
        cmd = ["/bin/bash", "-c", 'ulimit -u "$1" && shift && exec "$@"', "net", str(SAFETY_NET),
               python, "-c", DAEMON, str(ws), str(CAP), str(SECONDS)]
        res = subprocess.run(cmd, user=uid, group=uid, extra_groups=[] if uid is not None else None,
                             capture_output=True, text=True, cwd=ws,
                             env={"PATH": sandbox.DEFAULT_PATH, "PYTHONPATH": str(lib)}, timeout=SECONDS + 60)
        assert res.returncode == 0, res.stderr
        out = json.loads(res.stdout.strip().splitlines()[-1])
        log = (ws / "bomb.log").read_text(errors="replace")
    finally:
        shutil.rmtree(ws, ignore_errors=True)
        shutil.rmtree(lib, ignore_errors=True)
    assert out["scope"] in ("sandbox", "uid"), out
    # The cap held: the user's tasks never went far past what the daemon itself runs plus the cap (the sandbox's
    # own bwrap process and sampling slack aside), nowhere near the safety net.
    assert out["peak"] <= out["before"] + CAP + 16, out
    assert "Resource temporarily unavailable" in log, log[-2000:]
    # The daemon could still make threads and processes in the middle of it.
    assert out["probes"] == {"thread": True, "process": True}, out
    # The bomb ended with the command: nothing of it is left.
    assert out["ended"] == "timed out" and out["after"] <= out["before"] + 1, (out, log[-3000:])


def test_the_cap_is_set_inside_the_sandbox_and_counted_as_the_kernel_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    ws = str(REPO)
    per_sandbox = sandbox.SandboxPolicy(mode="none", workspace=Path(ws), max_processes=100, nproc_scope="sandbox")
    line = sandbox.argv("echo hi", per_sandbox)
    assert line[:3] == ["/bin/bash", "-c", 'ulimit -u "$1" || exit 126; shift; exec "$@"']
    assert line[4:] == ["100", "/bin/bash", "-c", "echo hi"]
    monkeypatch.setattr(processes, "user_tasks", lambda uid=None: 40)
    per_user = sandbox.SandboxPolicy(mode="none", workspace=Path(ws), max_processes=100, nproc_scope="uid")
    assert sandbox.argv("echo hi", per_user)[4] == "140"
    for off in (sandbox.SandboxPolicy(mode="none", workspace=Path(ws), max_processes=0, nproc_scope="uid"),
                sandbox.SandboxPolicy(mode="none", workspace=Path(ws), max_processes=100, nproc_scope="none")):
        assert sandbox.argv("echo hi", off) == ["/bin/bash", "-c", "echo hi"]
    # With bwrap the wrapper runs inside the sandbox, after bwrap made its user namespace.
    if _MODE == "bwrap":
        boxed = sandbox.argv("echo hi", sandbox.SandboxPolicy(mode="bwrap", workspace=Path(ws), max_processes=100,
                                                              nproc_scope="sandbox", bwrap="bwrap"))
        assert boxed[boxed.index("--") + 1:][:2] == ["/bin/bash", "-c"] and boxed[-3:] == ["/bin/bash", "-c", "echo hi"]
    # Root: the kernel would not apply it, so none is claimed.
    if os.getuid() == 0:
        assert processes.scope("bwrap", "bwrap") == "none"
