"""Paths: which targets are the system, the home directory or a disk, and which stay inside the workspace.

Inside-ness is decided lexically first (relative to the working directory, ``..`` folded, ``~`` and
``$HOME`` never inside) and then on the real filesystem: a target whose real path leaves the workspace
(a symlink) or that is a hard link to something else (more than one link) is not inside.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re

from tools.shell.parse import Word

SYSTEM_DIRS = frozenset({
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/media", "/mnt",
    "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var", "/snap",
    "/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib64", "/usr/local", "/usr/share", "/usr/include",
    "/usr/local/bin", "/var/lib", "/var/log", "/var/cache", "/var/spool", "/var/mail", "/var/www",
    "/System", "/Library", "/Applications", "/Users", "/private",
})
_HOME_RE = re.compile(r"^(?:~[A-Za-z0-9._-]*|\$HOME|\$\{HOME\}|/home/[^/]+|/Users/[^/]+|/root)$")
BLOCK_DEVICE = re.compile(
    r"^/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk\d|rdisk\d|md\d|dm-\d|loop\d|"
    r"mapper/|sr\d|fd\d|mtdblock)"
)
HARMLESS_SINKS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero"})
# Stand-ins a glob is tried against: every system directory and a home directory of each kind.
_GLOB_PROBES = sorted(SYSTEM_DIRS | {"/home/user", "/Users/user", "/root", "~", "$HOME"})


def clean_path(path: str) -> str:
    """``/etc/../`` -> ``/``; ``/usr/*`` -> ``/usr``; ``~/`` -> ``~``."""
    p = path.strip()
    if p.endswith(("/*", "/.*", "/{*,.*}")):
        p = p[: p.rfind("/")] or "/"
    if p in ("*", ".*"):
        return p
    if p.startswith("/"):
        p = posixpath.normpath(p)
        if p.startswith("//"):
            p = "/" + p.lstrip("/")
    elif p.startswith(("~", "$HOME", "${HOME}")):
        head, sep, rest = p.partition("/")
        if not sep:
            return p
        # Resolve as if home were /home/user, so ``~/..`` comes out as /home and ``~/../..`` as /.
        resolved = posixpath.normpath(posixpath.join("/home/user", rest))
        if resolved == "/home/user":
            return head
        return resolved if not resolved.startswith("/home/user/") else head + resolved[len("/home/user"):]
    return p


def critical(word: Word | str) -> str | None:
    """Why deleting (or chmod'ing) this path wholesale is out of the question, or None."""
    text = word.text if isinstance(word, Word) else word
    glob = word.glob if isinstance(word, Word) else False
    p = clean_path(text)
    if p == "/":
        return "the whole filesystem (/)"
    if p in SYSTEM_DIRS:
        return f"the system directory {p}"
    if _HOME_RE.match(p):
        return "the home directory"
    if glob and p.startswith(("/", "~", "$")):
        for probe in _GLOB_PROBES:
            if fnmatch.fnmatchcase(probe, p) or fnmatch.fnmatchcase(probe + "/", p):
                return critical(probe) or f"the system directory {probe}"
    return None


def plainly_outside(text: str) -> bool:
    """Absolute, home-relative or climbing out of the working directory."""
    if text.startswith(("/", "~", "$")):
        return True
    return posixpath.normpath(text).startswith("..")


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def inside(word: Word, cwd: str, workspace: str, *, glob_ok: bool = False) -> bool:
    """Whether this write target stays inside ``workspace`` (an absolute, real path)."""
    text = word.text
    if word.dynamic or not text or text.startswith("~") or text.startswith("-"):
        return False
    if word.glob:
        head, _tail = posixpath.split(text)
        if not glob_ok or re.search(r"[*?\[]", head):
            return False
        text = posixpath.join(head, "x") if head else "x"
    if not posixpath.isabs(cwd):
        return False
    lexical = posixpath.normpath(posixpath.join(cwd, text))
    if not _within(lexical, workspace):
        return False
    try:
        real = os.path.realpath(lexical)
        if not _within(real, workspace):
            return False
        st = os.lstat(real)
        return not (st.st_nlink > 1 and not os.path.isdir(real))
    except FileNotFoundError:
        return True
    except OSError:
        return False
