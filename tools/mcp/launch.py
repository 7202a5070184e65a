"""The first program of a stdio MCP server: run by the daemon's Python as ``python -I -S launch.py`` (isolated: no
workspace module can shadow anything), with what to start in ``HERALD_MCP_LAUNCH`` (JSON), which it removes.

It dies with the daemon: ``PR_SET_PDEATHSIG`` is set before anything else, and if the daemon is already gone it
does not start. With bubblewrap it becomes bwrap (``exec``), handing bwrap its options through a memfd as the
terminal does (tools/sandbox.py); bwrap's ``--die-with-parent`` and its PID namespace take every process of the
server with it. Unsandboxed it stays as the server's parent: the server gets the same death signal from it, and when
the daemon dies this launcher kills its whole process group before it goes. Only the standard library: it runs before
anything else is set up.
"""

import ctypes
import json
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
SPEC = "HERALD_MCP_LAUNCH"


def _die_with_parent(sig: int, parent: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
        os._exit(126)
    if os.getppid() != parent:  # the daemon died before the signal was armed
        os._exit(126)


def _exec_bwrap(head: list[str], options: list[str], inner: list[str]) -> None:
    fd = os.memfd_create("herald-bwrap-args", 0)  # inherited by bwrap, which reads and closes it
    os.write(fd, b"".join(os.fsencode(o) + b"\0" for o in options))
    os.lseek(fd, 0, os.SEEK_SET)
    argv = [*head, "--args", str(fd), "--", *inner]
    os.execv(argv[0], argv)


def _supervise(argv: list[str]) -> None:
    def end(_sig: int, _frame: object) -> None:
        # The daemon is gone (or stops the server): everything of this group goes, this launcher last.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            os.killpg(0, signal.SIGKILL)
        finally:
            os._exit(137)

    signal.signal(signal.SIGTERM, end)
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _die_with_parent(signal.SIGKILL, os.getppid())
        os.execvp(argv[0], argv)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def main() -> None:
    spec = json.loads(os.environ.pop(SPEC))
    if spec["options"] is not None:
        _die_with_parent(signal.SIGKILL, spec["parent"])
        _exec_bwrap(spec["head"], spec["options"], spec["inner"])
    else:
        _die_with_parent(signal.SIGTERM, spec["parent"])
        _supervise([*spec["head"], *spec["inner"]])


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:  # said on stderr, which the daemon logs
        print(f"herald mcp launcher: {type(exc).__name__}: {exc}", file=sys.stderr)
        os._exit(126)
