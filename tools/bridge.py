"""The bridge inside the sandbox: ports on the sandbox's own loopback that lead to the egress proxy's unix
sockets (tools/egress.py), started by the command's prelude before the command itself.

``socat`` (Debian's ``socat``) is the bridge when it is installed: one listener per port, a process per
connection, a few milliseconds to start; the prelude waits until every listener is up (socat says so on a
pipe), so the command's first connection never races it. Without socat a small
Python forwarder does the same with a python the sandbox shows; it returns once it listens. It costs the
interpreter's start-up (tens of milliseconds) on every command with network.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable

Bridge = tuple[str, str]  # (kind: "socat" | "python", the program's path)

_SEARCH = "/usr/local/bin:/usr/bin:/bin"

# Arguments: socat's path, then port=socket pairs up to "--". socat logs "listening on" once it listens (without
# a newline: read by words); the prelude blocks on that word, then closes the pipe (socat ignores SIGPIPE, so
# its later log lines just fail). A socat that cannot listen ends the pipe, and the command starts anyway.
SOCAT = (
    'b=$1; shift; '
    'while [ "$1" != -- ]; do '
    'exec {r}< <(trap "" PIPE; exec "$b" -d -d "TCP-LISTEN:${1%%=*},bind=127.0.0.1,fork,reuseaddr" '
    '"UNIX-CONNECT:${1#*=}" 2>&1 >/dev/null </dev/null); '
    'while IFS= read -r -d " " -u "$r" t && [[ $t != listening ]]; do :; done; exec {r}<&-; shift; '
    'done; shift; unset b r t; '
)

# Arguments: the python's path, the forwarder's code, then port=socket pairs up to "--".
PYTHON = (
    'b=$1; f=$2; shift 2; a=(); while [ "$1" != -- ]; do a+=("$1"); shift; done; shift; '
    '"$b" -I -S -c "$f" "${a[@]}" </dev/null >/dev/null 2>&1; unset b f a; '
)

FORWARDER = """\
import os, socket, sys, threading
def pump(src, dst):
    try:
        while data := src.recv(65536):
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass
def pair(conn, path):
    up = socket.socket(socket.AF_UNIX)
    try:
        up.connect(path)
        back = threading.Thread(target=pump, args=(up, conn), daemon=True)
        back.start()
        pump(conn, up)
        back.join()
    except OSError:
        pass
    finally:
        conn.close()
        up.close()
def serve(listener, path):
    while True:
        conn = listener.accept()[0]
        threading.Thread(target=pair, args=(conn, path), daemon=True).start()
listeners = []
for spec in sys.argv[1:]:
    port, path = spec.split("=", 1)
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(port)))
    listener.listen(128)
    listeners.append((listener, path))
if os.fork():
    os._exit(0)
for listener, path in listeners[1:]:
    threading.Thread(target=serve, args=(listener, path), daemon=True).start()
serve(*listeners[0])
"""


def find(visible: Callable[[str], bool]) -> Bridge | None:
    """The bridge to use: socat, else a python the sandbox shows (``visible`` judges a real path)."""
    socat = shutil.which("socat", path=_SEARCH)
    if socat and visible(os.path.realpath(socat)):
        return ("socat", os.path.realpath(socat))
    for python in (sys.executable, shutil.which("python3", path=_SEARCH)):
        real = os.path.realpath(python) if python else ""
        if real and os.access(real, os.X_OK) and visible(real):
            return ("python", real)  # run with -I -S: no venv or site needed
    return None


def fragment(bridge: Bridge, ports: list[tuple[int, str]]) -> tuple[str, list[str]]:
    """The prelude's (bash fragment, arguments) starting the listeners for (port, socket inside) pairs."""
    pairs = [f"{port}={path}" for port, path in ports]
    kind, program = bridge
    if kind == "socat":
        return SOCAT, [program, *pairs, "--"]
    return PYTHON, [program, FORWARDER, *pairs, "--"]
