"""What one of the agent's commands may consume: memory, CPU time, file size, open files, and the workspace.

Each limit binds the command and never the daemon: the rlimits are set by a small bash prelude that runs
inside the sandbox before the command (tools/sandbox.py ``argv``), and the memory cgroup is a systemd scope
of the command's own. What happens at each limit:

- memory (``max_memory_mb``): where systemd can give the command a transient scope (``systemd-run --scope``:
  the system manager when Herald runs as root, the user's manager otherwise), a cgroup holds all of the
  command's processes together to ``MemoryMax`` with no swap, and the kernel's OOM killer ends one of them
  there. Elsewhere each process gets RLIMIT_AS (address space): allocations past it fail ("Cannot allocate
  memory", MemoryError) and most programs exit. Programs that reserve much more address space than they use
  (the JVM with its default heap, Chromium, some WebAssembly engines) refuse to start under RLIMIT_AS unless
  told to reserve less (``java -Xmx512m``): raise the limit, or set 0.
- CPU time (``max_cpu_seconds``): RLIMIT_CPU per process; SIGXCPU at the limit (exit status 152), SIGKILL
  five seconds later.
- file size (``max_file_mb``): RLIMIT_FSIZE; a write past it fails and the writer gets SIGXFSZ (exit status
  153). It counts in /tmp too.
- open files (``max_open_files``): RLIMIT_NOFILE; opening more fails with "Too many open files".
- the workspace (``max_workspace_mb``): measured after each terminal command; the agent is told when it
  holds more, commands still run.

An rlimit above the daemon's own hard limit is lowered to it (nobody may raise a hard limit). 0: no limit.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import threading
from dataclasses import dataclass
from typing import Any, Literal

Scope = Literal["system", "user"]

_PROBE_TIMEOUT = 15.0
_SIGXCPU_GRACE = 5  # seconds between SIGXCPU (a chance to say so) and SIGKILL
_SCOPE_ENV = ("XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS")  # systemd-run --user finds the manager there
_lock = threading.Lock()
_scope_cache: dict[str, Scope | None] = {}


@dataclass(frozen=True)
class Limits:
    memory_mb: int = 0
    cpu_seconds: int = 0
    file_mb: int = 0
    open_files: int = 0
    workspace_mb: int = 0
    memory_scope: Scope | None = None  # a systemd scope holds the memory; None: RLIMIT_AS does


def from_config(terminal: Any) -> Limits:
    """The limits of a ``TerminalConfig`` (a config without these keys has none)."""
    memory = getattr(terminal, "max_memory_mb", 0)
    return Limits(memory_mb=memory, cpu_seconds=getattr(terminal, "max_cpu_seconds", 0),
                  file_mb=getattr(terminal, "max_file_mb", 0), open_files=getattr(terminal, "max_open_files", 0),
                  workspace_mb=getattr(terminal, "max_workspace_mb", 0),
                  memory_scope=memory_scope() if memory else None)


# ---- the memory cgroup: a systemd scope per command ------------------------------------------------------


def reset() -> None:
    with _lock:
        _scope_cache.clear()


def _systemd_run() -> str | None:
    return shutil.which("systemd-run", path="/usr/bin:/bin:/usr/local/bin")


def memory_scope() -> Scope | None:
    """Which systemd manager gives commands a memory-limited scope here, probed once: "system" for root,
    "user" for a user with a running user manager, None (RLIMIT_AS instead) elsewhere."""
    run = _systemd_run()
    if run is None or not os.path.isdir("/run/systemd/system"):  # not booted with systemd
        return None
    with _lock:
        if run in _scope_cache:
            return _scope_cache[run]
    scope: Scope = "system" if os.geteuid() == 0 else "user"
    cmd = [run, *scope_args(Limits(memory_mb=64, memory_scope=scope)), "true"]
    env = {"PATH": "/usr/bin:/bin", **{n: os.environ[n] for n in _SCOPE_ENV if n in os.environ}}
    try:
        res = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=_PROBE_TIMEOUT, env=env)
        found: Scope | None = scope if res.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        found = None
    with _lock:
        _scope_cache[run] = found
    return found


def scope_args(limits: Limits) -> list[str]:
    """systemd-run's arguments (its path excluded) that put a command in a scope of its own, up to "--"."""
    return [*(["--user"] if limits.memory_scope == "user" else []), "--scope", "--quiet", "--collect",
            "-p", f"MemoryMax={limits.memory_mb}M", "-p", "MemorySwapMax=0", "--"]


def scope_prefix(limits: Limits) -> list[str]:
    """What goes before the sandbox's command line: systemd-run when a scope holds the memory."""
    if not limits.memory_mb or limits.memory_scope is None:
        return []
    run = _systemd_run()
    return [run, *scope_args(limits)] if run else []


def scope_env(limits: Limits) -> dict[str, str]:
    """The variables systemd-run --user needs to find the manager (the prelude drops them again)."""
    if not limits.memory_mb or limits.memory_scope != "user":
        return {}
    return {n: os.environ[n] for n in _SCOPE_ENV if n in os.environ}


# ---- the rlimits, as prelude fragments -------------------------------------------------------------------


def _under_hard(kind: int, value: int) -> int:
    hard = resource.getrlimit(kind)[1]
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


def prelude(limits: Limits) -> list[tuple[str, list[str]]]:
    """(bash fragment, its arguments) for each rlimit, run inside the sandbox before the command. Each
    fragment takes its values from "$1"... and shifts them away."""
    parts: list[tuple[str, list[str]]] = []
    if limits.memory_scope == "user" and limits.memory_mb:
        parts.append((f"unset {' '.join(_SCOPE_ENV)}; ", []))
    if limits.memory_mb and limits.memory_scope is None:
        kib = _under_hard(resource.RLIMIT_AS, limits.memory_mb << 20) >> 10
        parts.append(('ulimit -v "$1" || exit 126; shift; ', [str(kib)]))
    if limits.cpu_seconds:
        hard = _under_hard(resource.RLIMIT_CPU, limits.cpu_seconds + _SIGXCPU_GRACE)
        soft = min(limits.cpu_seconds, hard)
        parts.append(('ulimit -St "$1" && ulimit -Ht "$2" || exit 126; shift 2; ', [str(soft), str(hard)]))
    if limits.file_mb:
        kib = _under_hard(resource.RLIMIT_FSIZE, limits.file_mb << 20) >> 10  # bash counts 1024-byte blocks
        parts.append(('ulimit -f "$1" || exit 126; shift; ', [str(kib)]))
    if limits.open_files:
        parts.append(('ulimit -n "$1" || exit 126; shift; ',
                      [str(_under_hard(resource.RLIMIT_NOFILE, limits.open_files))]))
    return parts


# ---- after the command -----------------------------------------------------------------------------------


def workspace_usage(path: str, stop_above: int = 0) -> int:
    """Bytes the files under ``path`` take on disk (hard links once), without following symlinks. Stops
    counting once past ``stop_above`` (when set): the caller only needs to know it is over."""
    total = 0
    seen: set[tuple[int, int]] = set()
    stack = [path]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                elif st.st_nlink > 1:
                    if (st.st_dev, st.st_ino) in seen:
                        continue
                    seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
                if stop_above and total > stop_above:
                    return total
    return total


# What programs print when an allocation fails (glibc, Python, C++, the JVM, V8).
_NO_MEMORY = ("Cannot allocate memory", "MemoryError", "Could not allocate", "bad_alloc", "out of memory",
              "Out of memory")


def exit_note(limits: Limits, returncode: int | None, output: str = "") -> str | None:
    """What the agent is told when a command's exit status (or what it printed) says it ran into a limit."""
    if returncode == 128 + 24 and limits.cpu_seconds:  # SIGXCPU
        return (f"stopped: a process used up its CPU time (tools.terminal.max_cpu_seconds: {limits.cpu_seconds} s "
                "per process)")
    if returncode == 128 + 25 and limits.file_mb:  # SIGXFSZ
        return f"stopped: a file reached the size limit (tools.terminal.max_file_mb: {limits.file_mb} MB)"
    if returncode == 128 + 9 and limits.memory_mb and limits.memory_scope is not None:
        return (f"killed (SIGKILL): if it used much memory, it reached tools.terminal.max_memory_mb "
                f"({limits.memory_mb} MB for the whole command)")
    if returncode and limits.memory_mb and limits.memory_scope is None and any(s in output for s in _NO_MEMORY):
        return (f"an allocation failed: each process may reserve at most {limits.memory_mb} MB of address space "
                "(tools.terminal.max_memory_mb); a runtime that reserves much more than it uses (the JVM's default "
                "heap) needs a smaller reservation, e.g. java -Xmx512m")
    return None


def workspace_note(limits: Limits, workspace: str) -> str | None:
    """What the agent is told when the workspace holds more than ``max_workspace_mb``."""
    if not limits.workspace_mb:
        return None
    cap = limits.workspace_mb << 20
    used = workspace_usage(workspace, stop_above=cap)
    if used <= cap:
        return None
    return (f"the workspace holds more than its limit of {limits.workspace_mb} MB (tools.terminal.max_workspace_mb): "
            "delete what is no longer needed before writing more")
