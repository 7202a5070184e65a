"""Which files the classifier reads to see the code a command runs, and how it finds them.

A script, a sourced file, a hook or a module is read only when its real path (symlinks and ``..``
resolved) lies inside the *read root*: the workspace, or the working directory when there is no workspace
(never ``/`` or the home directory). Anything else - a host file named by an absolute path, a hidden
file of the daemon, ``/proc`` - is never opened; running it needs approval. Nothing read here is ever
quoted in a reason: findings in read code say which file they are in, not what it says.
"""

from __future__ import annotations

import glob
import os
import posixpath
import re

from tools.shell.paths import critical

SCRIPT_LIMIT = 256 * 1024
STDIN_NAMES = frozenset({"/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "-"})

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "ash", "csh", "tcsh", "yash", "posh",
                    "rbash", "oksh", "loksh"})
LANGS = {"python": "python", "python2": "python", "python3": "python", "pypy": "python", "pypy3": "python",
         "perl": "perl", "ruby": "ruby", "node": "node", "nodejs": "node", "bun": "node", "deno": "node",
         "php": "php", "lua": "lua", "luajit": "lua", "awk": "awk", "gawk": "awk", "mawk": "awk",
         "nawk": "awk", "busybox-awk": "awk"}
_EXT_LANG = {".sh": "shell", ".bash": "shell", ".zsh": "shell", ".py": "python", ".pl": "perl", ".rb": "ruby",
             ".js": "node", ".mjs": "node", ".cjs": "node", ".php": "php", ".lua": "lua", ".awk": "awk"}
NODE_CORE = frozenset({
    "assert", "async_hooks", "buffer", "child_process", "cluster", "console", "constants", "crypto", "dgram",
    "diagnostics_channel", "dns", "domain", "events", "fs", "fs/promises", "http", "http2", "https", "inspector",
    "module", "net", "os", "path", "perf_hooks", "process", "punycode", "querystring", "readline", "repl",
    "stream", "string_decoder", "sys", "timers", "tls", "trace_events", "tty", "url", "util", "v8", "vm",
    "wasi", "worker_threads", "zlib", "path/posix", "stream/promises", "timers/promises", "util/types",
})


def read_root(workspace: str | None, cwd: str | None) -> str | None:
    root = workspace or (os.path.realpath(cwd) if cwd and posixpath.isabs(cwd) else None)
    if root is None or critical(root) is not None or root == os.path.realpath(os.path.expanduser("~")):
        return None
    return root


def within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def open_inside(path: str, root: str | None) -> tuple[bytes | None, str, str]:
    """(bytes, real path, why not) for a file that must lie inside ``root``."""
    if root is None:
        return None, "", "cannot be read here"
    real = os.path.realpath(path)
    if not within(real, root):
        return None, real, "is outside the workspace"
    try:
        if not os.path.isfile(real) or os.stat(real).st_size > SCRIPT_LIMIT:
            return None, real, "is not a small regular file"
        with open(real, "rb") as f:
            return f.read(SCRIPT_LIMIT + 1), real, ""
    except OSError:
        return None, real, "cannot be read"


def script_lang(text: str, path: str) -> str | None:
    if text.startswith("#!"):
        line = text.split("\n", 1)[0][2:].strip().split()
        if not line:
            return "shell"
        prog = posixpath.basename(line[0])
        if prog == "env":
            rest = [x for x in line[1:] if not x.startswith("-") and "=" not in x]
            prog = posixpath.basename(rest[0]) if rest else ""
        base = re.sub(r"[\d.]+$", "", prog)
        if prog in SHELLS or base in SHELLS:
            return "shell"
        return LANGS.get(prog) or LANGS.get(base)
    ext = posixpath.splitext(path)[1]
    return _EXT_LANG.get(ext, "shell")


def python_module_files(module: str, bases: list[str]) -> list[str]:
    """Files under ``bases`` that ``import module`` would load before anything installed."""
    found: list[str] = []
    parts = module.split(".")
    for base in bases:
        for n in range(1, len(parts) + 1):
            stem = posixpath.join(base, *parts[:n])
            for candidate in (stem + ".py", posixpath.join(stem, "__init__.py")):
                if os.path.isfile(candidate):
                    found.append(candidate)
        if found:
            break
    return found


def node_module_files(spec: str, base: str) -> list[str]:
    stem = posixpath.normpath(posixpath.join(base, spec))
    for candidate in (stem, stem + ".js", stem + ".mjs", stem + ".cjs", stem + ".json",
                      posixpath.join(stem, "index.js")):
        if os.path.isfile(candidate):
            return [] if candidate.endswith(".json") else [candidate]
    return []


def python_user_site(home: str | None) -> bool:
    """Whether the sandbox's home (the workspace) holds a user site-packages with anything in it: python runs
    its .pth files and usercustomize at start-up and imports its packages before the system's."""
    if home is None:
        return False
    return any(os.listdir(d) for d in glob.glob(posixpath.join(home, ".local", "lib", "python*", "site-packages"))
               if os.path.isdir(d))
