"""How many processes one of the agent's commands may run: RLIMIT_NPROC, and how the kernel counts it.

Each command runs under ``ulimit -u`` (set by the command's bash prelude inside the sandbox, tools/sandbox.py,
so the limit binds the command and never the daemon). The kernel counts that limit per user *per user namespace* (since
Linux 5.14), and an unprivileged bwrap gives every sandbox a user namespace of its own: there the cap is
simply ``tools.terminal.max_processes`` tasks for that command, whatever the daemon's own threads or other
commands count (scope ``sandbox``). Where a command shares the daemon's user namespace (a setuid bwrap,
``sandbox: none``, an older kernel) the count is the user's everywhere, so the cap is what the user runs at
the start plus ``max_processes`` (scope ``uid``): a fork bomb still stops there, but a busy moment of the
daemon leaves the command less room; the daemon itself is never limited (its rlimit is not touched). Root is
exempt from RLIMIT_NPROC altogether: a daemon running as root gets no cap (scope ``none``; start-up logs it).
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import threading
from typing import Literal

NprocScope = Literal["sandbox", "uid", "none"]

_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_PROBE_TIMEOUT = 15.0
_lock = threading.Lock()
_userns_cache: dict[str, bool] = {}


def reset() -> None:
    with _lock:
        _userns_cache.clear()


def _kernel_counts_per_namespace() -> bool:
    """RLIMIT_NPROC counted per user namespace (ucounts): Linux 5.14 and later."""
    m = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return m is not None and (int(m.group(1)), int(m.group(2))) >= (5, 14)


def _own_user_namespace(bwrap: str) -> bool:
    """Whether a sandbox gets a user namespace of its own (an unprivileged bwrap makes one; a setuid one or
    a root daemon does not). Probed once per binary."""
    with _lock:
        if bwrap in _userns_cache:
            return _userns_cache[bwrap]
    cmd = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-pid", "--proc", "/proc", "--die-with-parent",
           "--", "readlink", "/proc/self/ns/user"]
    try:
        res = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=_PROBE_TIMEOUT,
                             env={"PATH": _PATH})
        own = res.returncode == 0 and res.stdout.strip() != os.readlink("/proc/self/ns/user").encode()
    except (OSError, subprocess.TimeoutExpired):
        own = False
    with _lock:
        _userns_cache[bwrap] = own
    return own


def scope(mode: str, bwrap: str) -> NprocScope:
    """How a command's cap is counted under sandbox ``mode`` ("bwrap" or "none")."""
    if os.getuid() == 0:
        return "none"  # the kernel does not apply RLIMIT_NPROC to root
    if mode == "bwrap" and _kernel_counts_per_namespace() and _own_user_namespace(bwrap):
        return "sandbox"
    return "uid"


def user_tasks(uid: int | None = None) -> int:
    """How many tasks (threads included, as RLIMIT_NPROC counts) the user runs now, by real uid."""
    uid = os.getuid() if uid is None else uid
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", "rb") as f:
                status = f.read()
        except OSError:
            continue  # gone meanwhile
        m_uid = re.search(rb"^Uid:\s+(\d+)", status, re.M)
        m_threads = re.search(rb"^Threads:\s+(\d+)", status, re.M)
        if m_uid and m_threads and int(m_uid.group(1)) == uid:
            total += int(m_threads.group(1))
    return total


def cap(max_processes: int, counted: NprocScope) -> int | None:
    """The RLIMIT_NPROC a command gets, or None for none (no cap configured, or root). Reads /proc when the
    count is the user's: call it off the event loop."""
    if max_processes <= 0 or counted == "none":
        return None
    limit = max_processes + (user_tasks() if counted == "uid" else 0)
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    return limit if hard == resource.RLIM_INFINITY else min(limit, hard)
