"""Which files a command's verdict depends on, so that a grant never outlives them.

"Approve for this session" and "Always approve" are remembered by a key. For ``rm -rf build`` the text is the
whole story; for ``bash run.sh`` the classifier's verdict came from run.sh as it was then, and the agent can
rewrite run.sh (write_file, another command) and run the same text again. So the key also holds the sha256
of every file the verdict depends on:

- each file the classifier opened while it classified the command (scripts, sourced files, files piped into
  a shell, at any depth). Its verdict does not list them, so they are seen as they are opened: a
  process-wide audit hook (``sys.addaudithook``) records ``open`` events for the one thread inside
  ``recording()`` and nothing else, leaving out Python's own files (imports);
- each word of the command that names an existing file inside the workspace: what the classifier may have
  looked at without opening it (a script too large to read is still what the command runs).

A file changed, added or removed changes the key: the grant no longer answers and a person is asked again.
The hook takes the fingerprint again when the answer comes back, so a file changed between the prompt and
the run (by another call of the same batch) voids the approval.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import stat
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from tools.dangerous import classify, normalize

MAX_HASHED = 16 * 1024 * 1024  # larger files are fingerprinted by size, mtime and inode instead
_local = threading.local()
_install_lock = threading.Lock()
_installed = False


def _audit(event: str, args: tuple[object, ...]) -> None:
    if event != "open":
        return
    found = getattr(_local, "opened", None)
    if found is None:
        return
    try:  # an exception here would fail the open() that raised the event
        path, mode, flags = args
        if isinstance(path, int):
            return  # an fd: whatever it is was opened (and recorded) by name before
        if mode is None and isinstance(flags, int) and flags & os.O_ACCMODE == os.O_WRONLY:
            return  # os.open for writing only: nothing read
        found.append(os.fsdecode(path))  # type: ignore[arg-type]
    except Exception:
        return


def _install() -> None:
    global _installed
    with _install_lock:
        if not _installed:
            sys.addaudithook(_audit)  # cannot be removed: it is a no-op outside recording()
            _installed = True


@contextlib.contextmanager
def recording() -> Iterator[list[str]]:
    """The paths this thread opens inside the block (as given, not resolved)."""
    _install()
    before = getattr(_local, "opened", None)
    _local.opened = opened = []
    try:
        yield opened
    finally:
        _local.opened = before


def _within(path: str, root: str) -> bool:
    return path == root or root == "/" or path.startswith(root.rstrip("/") + "/")


def _python_dirs(workspace: str | None) -> list[str]:
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    dirs |= {p for p in sys.path if p and os.path.isdir(p)}
    real = {os.path.realpath(d) for d in dirs}
    # A workspace that is (or lies under) one of them must not be ignored with it.
    return sorted(d for d in real if workspace is None or not (_within(workspace, d)))


def classifier_reads(command: str, workspace: str | None) -> list[str]:
    """The real paths of the regular files the classifier opens for ``command`` (the terminal's way: the
    workspace is also the working directory)."""
    with recording() as opened:
        classify(command, workspace=workspace, cwd=workspace)
    ignored = _python_dirs(workspace)
    out = set()
    for path in opened:
        real = os.path.realpath(path if os.path.isabs(path) or workspace is None else os.path.join(workspace, path))
        if real.endswith(".pyc") or any(_within(real, d) for d in ignored):
            continue
        out.add(real)
    return sorted(out)


def named_files(command: str, workspace: str | None) -> list[str]:
    """Real paths of existing files inside the workspace that a word of the command names (``run.sh``,
    ``./x``, ``X=run.sh``, ``~/x``: the sandbox's home is the workspace)."""
    if workspace is None:
        return []
    text = normalize(command)
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:  # an unbalanced quote: the plain words will do
        words = text.split()
    out = set()
    for word in words:
        for candidate in {word, word.partition("=")[2]}:
            if not candidate:
                continue
            if candidate == "~" or candidate.startswith("~/"):
                candidate = workspace + candidate[1:]
            real = os.path.realpath(os.path.join(workspace, candidate))
            if _within(real, workspace) and os.path.isfile(real):
                out.add(real)
    return sorted(out)


def digest(path: str) -> str:
    """The file's sha256, ``stat:…`` for a very large one, ``absent`` when it is gone or unreadable."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                return "absent"
            if st.st_size > MAX_HASHED:
                return f"stat:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"
            h = hashlib.sha256()
            while chunk := f.read(1 << 20):
                h.update(chunk)
            return h.hexdigest()
    except OSError:
        return "absent"


@dataclass(frozen=True)
class Dependencies:
    """The files a command's meaning depends on, each with its digest when it was taken."""

    workspace: str | None
    read: tuple[str, ...]  # what the classifier opened
    files: tuple[tuple[str, str], ...]  # (real path, digest), read and named together, sorted

    @property
    def changeable(self) -> list[str]:
        """The files the agent can change without asking: those inside the workspace."""
        ws = self.workspace
        return [p for p, _ in self.files if ws is not None and _within(p, ws) and p != ws]

    def key(self, command_hash: str) -> str:
        """The grant key: the command's hash alone when no file is involved (as before files were counted)."""
        if not self.files:
            return command_hash
        text = command_hash + "".join(f"\n{p}\0{d}" for p, d in self.files)
        return hashlib.sha256(text.encode()).hexdigest()

    def changed(self, now: Dependencies) -> str:
        """The files that differ between this fingerprint and ``now``, as people read them."""
        paths = sorted({p for p, _ in set(self.files) ^ set(now.files)})
        ws = self.workspace
        inside = [os.path.relpath(p, ws) for p in paths if ws and _within(p, ws)]
        others = len(paths) - len(inside)
        if others:
            inside.append(f"{others} file{'s' if others != 1 else ''} outside the workspace")
        return ", ".join(inside) or "a file"

    def names(self, limit: int = 5) -> str:
        """The files as people read them: relative to the workspace, the others only counted."""
        ws = self.workspace
        inside = [os.path.relpath(p, ws) for p in self.changeable] if ws else []
        shown = ", ".join(inside[:limit]) + (f" and {len(inside) - limit} more" if len(inside) > limit else "")
        others = len(self.files) - len(inside)
        if others:
            shown += f"{' and ' if shown else ''}{others} file{'s' if others != 1 else ''} outside the workspace"
        return shown


def take(command: str, workspace: str | None) -> Dependencies:
    ws = os.path.realpath(workspace) if workspace else None
    read = classifier_reads(command, ws)
    paths = sorted(set(read) | set(named_files(command, ws)))
    return Dependencies(ws, tuple(read), tuple((p, digest(p)) for p in paths))
