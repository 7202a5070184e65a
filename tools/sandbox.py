"""The sandbox around everything the agent executes, and the view of the filesystem the file tools share.

With bubblewrap (``bwrap``) a command runs in new PID, IPC, UTS and network namespaces (the daemon's processes,
its ``/proc``, the host's loopback services and abstract unix sockets are not visible), with no capabilities,
in a session of its own, killed with its parent. With network on, its one way out is the egress proxy
(tools/egress.py), whose socket folder is bound at ``/run/herald-egress`` and bridged to a port on the
sandbox's loopback (tools/bridge.py). Its filesystem is the host's, read-only, except:

- the workspace (``tools.terminal.cwd``), bound read-write and also ``$HOME``;
- ``/tmp``: an empty private tmpfs for each command (``$TMPDIR``);
- hidden paths: each hidden folder is covered with an empty read-only tmpfs, each hidden file with
  ``/dev/null`` (on a nodev bind it cannot even be opened). The gateway hides Herald's home (every
  profile, ``.env``, ``web_token``, ``state.db``, media, logs, backups), the config file, the database
  file, the credential lock folder, the daemon user's home directory (``$HOME`` and the passwd entry's:
  ~/.ssh, ~/.aws, ~/.netrc, ~/.config/gh, ~/.pgpass... and whatever else lives there; commands have the
  network) and ``tools.terminal.hidden_paths``. ``/run`` is hidden too (``/var/run``
  is usually a link to it): a read-only bind still lets a process connect to the unix sockets there
  (docker.sock, the D-Bus buses, ``$XDG_RUNTIME_DIR``); only the real target of ``/etc/resolv.conf``
  is shown again when it lives there.
- ``/dev`` is a minimal one (null, zero, random, tty, shm, ...), ``/proc`` that of the new PID namespace.

Processes: each command may run at most ``tools.terminal.max_processes`` tasks (RLIMIT_NPROC, set inside
the sandbox, never on the daemon); how the kernel counts them is in tools/processes.py. Memory, CPU time,
file size and open files are limited the same way (tools/limits.py), by a bash prelude that runs inside the
sandbox before the command and also starts the network bridge.

bwrap reads its options from a memfd it then closes (``--args``): neither the host's ``ps`` nor
``/proc/*/cmdline`` inside names the paths it hides or binds. The mount table (``/proc/self/mountinfo``)
still lists the hidden paths as mount points: bwrap cannot hide where its mounts are.

Mount order makes the workspace visible even inside a hidden folder (the default workspace is
``<profile home>/workspace``) while hidden paths inside the workspace stay hidden: hides, then the
workspace, then the hides that lie inside it. The environment is an allowlist (:func:`child_env`).

The file tools ask :func:`resolve_for_read` / :func:`resolve_for_write`, which walk a path the way the
kernel would (symlinks, ``..``) and refuse it when any step lands somewhere the sandbox does not show.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import signal
import stat
import subprocess
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from tools import bridge, limits, processes
from tools.bridge import Bridge
from tools.egress import SANDBOX_DIR, EgressPoint
from tools.limits import Limits
from tools.processes import NprocScope

Mode = Literal["bwrap", "none", "off"]

INSTALL_HINT = "apt install bubblewrap"
NOT_INSTALLED = "bubblewrap (bwrap) is not installed"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Variables commands get from the daemon's environment besides PATH (none of them is a secret).
_LOCALE_ENV = ("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ")
# Runtime state and unix sockets (docker.sock, D-Bus, $XDG_RUNTIME_DIR/...). /var/run usually links to /run.
SYSTEM_HIDDEN = ("/run", "/var/run")
PRIVATE_TMP = "/tmp"
_PROBE_TIMEOUT = 15.0
_MAX_SYMLINKS = 40


class SandboxUnavailable(RuntimeError):
    """The configured sandbox cannot run commands here (``policy.problem`` says why)."""


class Refused(Exception):
    """A file tool may not touch this path; ``str()`` is the plain sentence for the model."""


@dataclass(frozen=True)
class SandboxPolicy:
    """What one command may see and do. ``mode`` is resolved: "bwrap", "none", or "off" (cannot run)."""

    mode: Mode
    workspace: Path
    hidden: tuple[Path, ...] = ()
    network: bool = True
    env_passthrough: tuple[str, ...] = ()
    timeout: float = 120.0
    problem: str | None = None  # why mode is "off"
    bwrap: str = "bwrap"  # the binary's path (found on the daemon's PATH)
    max_processes: int = 0  # tasks (processes and threads) one command may have; 0: no cap
    nproc_scope: NprocScope = "none"
    limits: Limits = field(default_factory=Limits)
    egress: EgressPoint | None = None  # the way out with network on (tools/egress.py); None: no way out
    bridge: Bridge | None = None  # what turns the egress sockets into ports inside (tools/bridge.py)

    @property
    def bridged(self) -> bool:
        """Commands reach the network through the egress proxy."""
        return self.mode == "bwrap" and self.network and self.egress is not None and self.bridge is not None


# ---- the mode: is bubblewrap usable here? ------------------------------------------------------------

_probe_lock = threading.Lock()
_probe_cache: dict[str, str | None] = {}


def find_bwrap() -> str | None:
    return shutil.which("bwrap")


def _probe(bwrap: str) -> str | None:
    """None when bwrap can build the namespaces commands get, else what went wrong (its stderr)."""
    cmd = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
           "--unshare-net", "--proc", "/proc", "--tmpfs", PRIVATE_TMP,
           "--cap-drop", "ALL", "--die-with-parent", "--new-session", "--", "true"]
    try:
        res = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=_PROBE_TIMEOUT,
                             env={"PATH": DEFAULT_PATH})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"
    if res.returncode == 0:
        return None
    err = res.stderr.decode(errors="replace").strip().splitlines()
    return err[-1] if err else f"bwrap exited with status {res.returncode}"


def resolve_mode(configured: str, network: bool = True) -> tuple[Mode, str | None]:
    """("bwrap" | "none" | "off", problem). Probes bwrap once per process. Commands get a network namespace
    of their own either way (``network`` only says whether it has a way out), so the probe is the same."""
    if configured == "none":
        return "none", None
    bwrap = find_bwrap()
    if bwrap is None:
        return "off", NOT_INSTALLED
    with _probe_lock:
        if bwrap not in _probe_cache:
            _probe_cache[bwrap] = _probe(bwrap)
        failure = _probe_cache[bwrap]
    if failure is not None:
        return "off", f"bubblewrap (bwrap) cannot create a sandbox here: {failure}"
    return "bwrap", None


def reset_probe_cache() -> None:
    with _probe_lock:
        _probe_cache.clear()
    processes.reset()
    limits.reset()


def startup_problem(mode: Mode, problem: str | None) -> str | None:
    """The one line start-up, ``herald check-config`` and /readyz show for this mode (None: all is well)."""
    if mode == "none":
        return "tools.terminal.sandbox is none: the agent's commands run unsandboxed"
    if mode == "off":
        if problem == NOT_INSTALLED:
            return (f"terminal tool off: bubblewrap is not installed ({INSTALL_HINT}), or set "
                    "tools.terminal.sandbox: none to run commands unsandboxed")
        return (f"terminal tool off: {problem} (see the README's \"The sandbox\"), or set "
                "tools.terminal.sandbox: none to run commands unsandboxed")
    return None


def model_problem(problem: str | None) -> str:
    """What the model is told when it calls the terminal while it is off."""
    if problem == NOT_INSTALLED:
        return (f"the terminal is off: {NOT_INSTALLED}; the operator must install it ({INSTALL_HINT}) or set "
                "tools.terminal.sandbox: none. Tell the user; no command can run until then.")
    return (f"the terminal is off: {problem}. The operator must fix that or set tools.terminal.sandbox: none. "
            "Tell the user; no command can run until then.")


# ---- building a policy --------------------------------------------------------------------------------


def daemon_homes() -> list[Path]:
    """The daemon user's home directories: ``$HOME`` and the passwd entry's (they differ under ``sudo -u``
    or a unit that sets HOME), leaving out ``/``, which is no one's private folder."""
    found = [os.environ.get("HOME") or ""]
    for uid in dict.fromkeys((os.getuid(), os.geteuid())):
        try:
            found.append(pwd.getpwuid(uid).pw_dir)
        except KeyError:
            pass
    homes = [Path(h) for h in found if h and os.path.isabs(h)]
    return [h for h in dict.fromkeys(homes) if os.path.realpath(h) != "/"]


def default_hidden() -> list[Path]:
    """What is hidden when no gateway said more: Herald's home, the credential lock folder and the daemon
    user's home."""
    base = Path(os.environ.get("HERALD_HOME") or Path.home() / ".herald").expanduser()
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state").expanduser()
    return [base, state / "herald", *daemon_homes()]


def make_policy(terminal: Any, *, workspace: str | Path, hidden: Iterable[str | Path] = (),
                egress: EgressPoint | None = None) -> SandboxPolicy:
    """A policy from a ``TerminalConfig`` (its sandbox, network, env_passthrough, hidden_paths, timeout and
    limits). ``egress``: the running proxy commands reach the network through (without it, none)."""
    mode, problem = resolve_mode(terminal.sandbox, terminal.network)
    extra = [Path(p).expanduser() for p in terminal.hidden_paths]
    policy = SandboxPolicy(
        mode=mode, problem=problem, bwrap=find_bwrap() or "bwrap",
        workspace=Path(os.path.realpath(Path(workspace).expanduser())),
        hidden=tuple(dict.fromkeys(Path(p) for p in [*hidden, *extra])),
        network=terminal.network, env_passthrough=tuple(terminal.env_passthrough),
        timeout=terminal.timeout_seconds, max_processes=getattr(terminal, "max_processes", 0),
        nproc_scope=processes.scope(mode, find_bwrap() or "bwrap") if mode != "off" else "none",
        limits=limits.from_config(terminal) if mode != "off" else Limits(),
        egress=egress if mode == "bwrap" and terminal.network else None,
    )
    if policy.egress is None:
        return policy
    view = layers(policy)
    return replace(policy, bridge=bridge.find(lambda real: hidden_reason(real, view) is None))


# ---- the view: which mounts cover which path ----------------------------------------------------------


def within(path: str, root: str) -> bool:
    return path == root or root == "/" or path.startswith(root + "/")


def layers(policy: SandboxPolicy) -> list[tuple[str, str]]:
    """The sandbox's mounts over the read-only root, in order, as (kind, real path).

    kind: "tmp" (private writable tmpfs), "hide_dir" (empty read-only tmpfs), "hide_file" (/dev/null),
    "workspace" (read-write bind), "show" (read-only bind of a file inside a hidden folder). A later
    mount covering a path decides what the sandbox shows there. Paths that do not exist are left out, so
    this is worked out again for each command.
    """
    ws = os.path.realpath(policy.workspace)
    out: list[tuple[str, str]] = [("tmp", PRIVATE_TMP)]
    covered = [PRIVATE_TMP]  # hidden folders so far, outside the workspace
    for d in SYSTEM_HIDDEN:
        real = os.path.realpath(d)
        if os.path.isdir(real) and not any(within(real, c) for c in covered):
            out.append(("hide_dir", real))
            covered.append(real)
    resolv = os.path.realpath("/etc/resolv.conf")
    if os.path.isfile(resolv) and any(within(resolv, c) for c in covered[1:]):
        out.append(("show", resolv))
    outside: list[tuple[str, str]] = []
    inside: list[tuple[str, str]] = []
    for p in policy.hidden:
        real = os.path.realpath(p)
        if real == "/" or not os.path.lexists(real):
            continue
        kind = "hide_dir" if os.path.isdir(real) else "hide_file"
        # Strictly inside the workspace: hidden again after the workspace is bound.
        (inside if real != ws and within(real, ws) else outside).append((kind, real))
    out += _prune(outside, covered)
    out.append(("workspace", ws))
    out += _prune(inside, [])
    return out


def _prune(group: list[tuple[str, str]], covered: list[str]) -> list[tuple[str, str]]:
    """Shallowest first, leaving out what a hidden folder before it already covers."""
    kept_dirs, out = list(covered), []
    for kind, real in sorted(group, key=lambda kp: (kp[1].count("/"), kp[1])):
        if any(within(real, c) for c in kept_dirs):
            continue
        out.append((kind, real))
        if kind == "hide_dir":
            kept_dirs.append(real)
    return out


def hidden_reason(real: str, view: list[tuple[str, str]]) -> str | None:
    """Why the sandbox does not show ``real`` (a path without symlinks), or None when it does."""
    if within(real, "/proc"):
        return "the file tools do not read /proc: here it is the daemon's (commands see a /proc of their own)"
    if within(real, "/dev"):
        return "the file tools do not read device files (/dev)"
    kind, at = None, -1
    for i, (k, p) in enumerate(view):
        if within(real, p):
            kind, at = k, i
    if any(within(p, real) for _, p in view[at + 1 :]):
        return None  # a folder on the way to a later mount: it exists in the sandbox too (empty but for that)
    if kind == "tmp":
        return (f"{real} is in the host's /tmp, which the sandbox does not show (each command gets an empty /tmp "
                "of its own; keep files in the workspace)")
    if kind in ("hide_dir", "hide_file"):
        return (f"{real} is hidden from the agent (Herald's own files, the daemon user's home, credentials and "
                "runtime sockets are)")
    return None


def _walk(path: str, check: Any) -> str:
    """Resolve ``path`` (absolute) like the kernel would, calling ``check`` on every place it passes."""
    pending = [c for c in reversed(path.split("/")) if c]
    resolved = "/"
    links = 0
    exists = True
    while pending:
        comp = pending.pop()
        if comp == ".":
            continue
        if comp == "..":
            resolved = os.path.dirname(resolved)
            continue
        candidate = os.path.join(resolved, comp)
        check(candidate)
        if exists:
            try:
                st = os.lstat(candidate)
            except (FileNotFoundError, NotADirectoryError):
                exists = False
            else:
                if stat.S_ISLNK(st.st_mode):
                    links += 1
                    if links > _MAX_SYMLINKS:
                        raise Refused(f"{path}: too many levels of symbolic links")
                    target = os.readlink(candidate)
                    if target.startswith("/"):
                        resolved = "/"
                    pending.extend(c for c in reversed(target.split("/")) if c)
                    continue
        resolved = candidate
    check(resolved)
    return resolved


def _expand(path: str, ws: str) -> str:
    if path == "~" or path.startswith("~/"):
        path = ws + path[1:]  # the sandbox's $HOME is the workspace
    elif path.startswith("~"):
        path = os.path.expanduser(path)
    return path if os.path.isabs(path) else os.path.join(ws, path)


def _resolve(path: str, policy: SandboxPolicy, tool: str, write: bool) -> str:
    view = layers(policy)
    ws = os.path.realpath(policy.workspace)

    def check(place: str) -> None:
        reason = hidden_reason(place, view)
        if reason is None:
            return
        if write and not within(place, ws):
            raise Refused(f"{tool} may only write inside the workspace {ws}; {path} resolves to {place} outside it")
        raise Refused(f"{tool} cannot {'write' if write else 'read'} {path}: {reason}")

    real = _walk(_expand(path, ws), check)
    if write and (real == ws or not within(real, ws)):
        raise Refused(f"{tool} may only write inside the workspace {ws}; {path} resolves to {real} outside it")
    return real


def resolve_for_read(path: str, policy: SandboxPolicy, tool: str = "read_file") -> str:
    """The real path behind ``path`` (relative = from the workspace), or ``Refused`` naming why.

    Refused when the path, or any place resolving it passes (a symlink, a ``..``), is not what the sandbox
    shows: a hidden path, the host's /tmp, /run, /proc, /dev.
    """
    return _resolve(path, policy, tool, write=False)


def resolve_for_write(path: str, policy: SandboxPolicy, tool: str = "write_file") -> str:
    """Like :func:`resolve_for_read`, and the real target must lie inside the workspace."""
    return _resolve(path, policy, tool, write=True)


# ---- running a command ------------------------------------------------------------------------------


def _sane_path(value: str | None) -> str:
    parts = [p for p in (value or "").split(":") if p.startswith("/")]
    return ":".join(dict.fromkeys(parts)) or DEFAULT_PATH


def child_env(policy: SandboxPolicy) -> dict[str, str]:
    """The whole environment a command gets: an allowlist, never the daemon's environment minus a denylist."""
    ws = str(policy.workspace)
    env = {"PATH": _sane_path(os.environ.get("PATH")), "TERM": os.environ.get("TERM") or "dumb",
           "SHELL": "/bin/bash"}
    try:
        user = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        user = None
    if user:
        env["USER"] = env["LOGNAME"] = user
    for name in (*_LOCALE_ENV, *policy.env_passthrough):
        value = os.environ.get(name)
        if value is not None:
            env[name] = value
    env["HOME"] = ws
    env["TMPDIR"] = PRIVATE_TMP if policy.mode == "bwrap" else os.environ.get("TMPDIR", "/tmp")
    if policy.bridged:
        assert policy.egress is not None
        env.update(policy.egress.env())
    env.update(limits.scope_env(policy.limits))  # for systemd-run only: the prelude drops them
    return env


def _prelude(command: str, policy: SandboxPolicy) -> list[str]:
    """``bash -c command``, behind a bash prelude that sets the command's limits and starts the network
    bridge first (inside the sandbox, after bwrap made its namespaces: nothing of it binds the daemon).

    Blocks briefly (reads /proc) when the process cap is counted per user: call it off the event loop.
    """
    shell = ["/bin/bash", "-c", command]
    parts: list[tuple[str, list[str]]] = []
    cap = processes.cap(policy.max_processes, policy.nproc_scope)
    if cap is not None:
        parts.append(('ulimit -u "$1" || exit 126; shift; ', [str(cap)]))
    parts += limits.prelude(policy.limits)
    if policy.bridged:
        assert policy.egress is not None and policy.bridge is not None
        parts.append(bridge.fragment(policy.bridge, policy.egress.bridges()))
    if not parts:
        return shell
    script = "".join(text for text, _ in parts) + 'exec "$@"'
    return ["/bin/bash", "-c", script, "herald-sandbox", *(a for _, args in parts for a in args), *shell]


def _bwrap_options(policy: SandboxPolicy) -> list[str]:
    ws = os.path.realpath(policy.workspace)
    # A network namespace of its own even with network on: the host's loopback services and abstract unix
    # sockets stay out of reach; the way out is the egress proxy (tools/egress.py).
    args = ["--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net"]
    # Run as root, bwrap would keep every capability (enough to unmount what hides Herald's files).
    args += ["--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    read_only: list[str] = []
    for kind, path in layers(policy):
        if kind == "tmp":
            args += ["--tmpfs", path]
        elif kind == "hide_dir":
            args += ["--tmpfs", path]
            read_only.append(path)
        elif kind == "hide_file":
            args += ["--ro-bind", "/dev/null", path]
        elif kind == "workspace":
            args += ["--bind", path, path]
        elif kind == "show":
            args += ["--ro-bind", path, path]
    if policy.bridged:
        assert policy.egress is not None
        args += ["--ro-bind", policy.egress.folder, SANDBOX_DIR]  # a socket on a read-only mount still connects
    # Last, so the folders the later binds needed could still be created in these tmpfs.
    for path in read_only:
        args += ["--remount-ro", path]
    # The environment is handed to bwrap (Popen env=), not spelled out as --setenv: argv is world-readable.
    return [*args, "--chdir", ws]


def _parts(command: str, policy: SandboxPolicy) -> tuple[list[str], list[str] | None, list[str]]:
    """(what goes before bwrap, bwrap's options or None without bwrap, the command behind them)."""
    if policy.mode not in ("bwrap", "none"):
        raise SandboxUnavailable(policy.problem or "no sandbox")
    prefix = limits.scope_prefix(policy.limits)
    inner = _prelude(command, policy)
    if policy.mode == "none":
        return prefix, None, inner
    return [*prefix, policy.bwrap], _bwrap_options(policy), inner


def command_parts(command: str, policy: SandboxPolicy) -> tuple[list[str], list[str] | None, list[str]]:
    """(what goes before bwrap, bwrap's options or None without bwrap, the command behind them): for a launcher
    that hands bwrap its options itself (an MCP server's, tools/mcp/launch.py). Call it off the event loop."""
    return _parts(command, policy)


def argv(command: str, policy: SandboxPolicy) -> list[str]:
    """The whole command line that runs ``command`` with ``/bin/bash -c`` under ``policy`` (what
    :func:`launch` hands bwrap partly through a file descriptor). Call it off the event loop."""
    head, options, inner = _parts(command, policy)
    return [*head, *(options or []), *(["--"] if options is not None else []), *inner]


def launch(command: str, policy: SandboxPolicy) -> contextlib.AbstractContextManager[tuple[list[str], tuple[int, ...]]]:
    """(command line, descriptors to pass) for Popen: bwrap reads its options from a memfd (``--args``)
    and closes it, so neither ``ps`` on the host nor ``/proc/*/cmdline`` in the sandbox shows the paths
    it hides or binds. The descriptor is closed when the block ends (after the process started). Call it
    off the event loop."""
    return _launch(*_parts(command, policy))


@contextlib.contextmanager
def _launch(head: list[str], options: list[str] | None,
            inner: list[str]) -> Iterator[tuple[list[str], tuple[int, ...]]]:
    if options is None:
        yield [*head, *inner], ()
        return
    fd = os.memfd_create("herald-bwrap-args", os.MFD_CLOEXEC)
    try:
        os.write(fd, b"".join(os.fsencode(o) + b"\0" for o in options))
        os.lseek(fd, 0, os.SEEK_SET)
        yield [*head, "--args", str(fd), "--", *inner], (fd,)
    finally:
        os.close(fd)


def workspace_dir(policy: SandboxPolicy) -> str:
    """The workspace's real path; ``FileNotFoundError`` when it does not exist."""
    ws = os.path.realpath(policy.workspace)
    if not os.path.isdir(ws):
        raise FileNotFoundError(f"working directory does not exist: {ws}")
    return ws


def _kill_group(pid: int, sig: int = signal.SIGKILL) -> None:
    """bwrap leads the group; its death takes the sandbox (--die-with-parent, PID namespace) with it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


async def _drain(stream: asyncio.StreamReader | None, cap: int) -> bytes:
    kept = bytearray()
    if stream is None:
        return b""
    while chunk := await stream.read(65536):
        kept += chunk
        if len(kept) > 2 * cap:
            del kept[: len(kept) - cap]
    return bytes(kept[-cap:]) if cap else b""


async def run_sandboxed(command: str, policy: SandboxPolicy, timeout: float | None = None, *,
                        max_output: int = 1 << 20) -> tuple[int, str, str]:
    """Run ``command`` under ``policy``: (returncode, stdout, stderr), each output its last ``max_output`` bytes.

    ``timeout`` (default ``policy.timeout``) raises ``TimeoutError`` and cancellation re-raises, both after
    the command's whole process group (and with bwrap, its sandbox) is killed. ``SandboxUnavailable`` when
    the policy cannot run commands.
    """
    if policy.mode == "off":
        raise SandboxUnavailable(policy.problem or "no sandbox")
    ws = workspace_dir(policy)
    limit = policy.timeout if timeout is None else timeout
    parts = await asyncio.to_thread(_parts, command, policy)
    with _launch(*parts) as (line, fds):
        proc = await asyncio.create_subprocess_exec(
            *line, cwd=ws, env=child_env(policy), stdin=asyncio.subprocess.DEVNULL, pass_fds=fds,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
    try:
        async with asyncio.timeout(limit):
            out, err, _ = await asyncio.gather(_drain(proc.stdout, max_output), _drain(proc.stderr, max_output),
                                               proc.wait())
    except BaseException:
        _kill_group(proc.pid)
        with contextlib.suppress(Exception):
            await asyncio.shield(proc.wait())
        raise
    return proc.returncode if proc.returncode is not None else -1, out.decode(errors="replace"), \
        err.decode(errors="replace")


def context_policy(ctx: Any) -> SandboxPolicy:
    """A ToolContext's policy: the one the gateway attached, else one from its config (default hidden paths)."""
    if ctx.sandbox is not None:
        return ctx.sandbox
    return make_policy(ctx.config.terminal, workspace=ctx.config.terminal.cwd or ctx.cwd, hidden=default_hidden())
