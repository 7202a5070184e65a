"""Credential locks: one bot token, one process.

Two processes polling with the same bot token steal each other's updates (Telegram answers 409 Conflict,
Discord/Slack double-answer). Each adapter takes an OS file lock keyed by the sha256 of its credential
before it connects; a second process gets ``CredentialLocked`` naming the holder's pid, and the runner keeps
retrying, so it takes over once the first one stops. The lock dies with its process (flock), so a crash
never leaves a stale lock behind.

Locks live in ``$XDG_STATE_HOME/herald/locks`` (default ``~/.local/state/herald/locks``): shared by every
profile of the user, since profiles must not share a token either.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path


class CredentialLocked(RuntimeError):
    def __init__(self, scope: str, holder_pid: int | None, path: Path) -> None:
        who = f"pid {holder_pid}" if holder_pid else "another process"
        super().__init__(f"this {scope} credential is in use by another Herald process ({who}, lock {path}); "
                         "stop that one or give this profile its own credential")
        self.scope = scope
        self.holder_pid = holder_pid
        self.path = path


def lock_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base).expanduser() / "herald" / "locks"


class CredentialLock:
    """``acquire()`` / ``release()`` an exclusive lock on one credential (idempotent both ways)."""

    def __init__(self, scope: str, credential: str, directory: Path | None = None) -> None:
        digest = hashlib.sha256(credential.encode()).hexdigest()[:32]
        self.scope = scope
        self.path = (directory or lock_dir()) / f"{scope}-{digest}.lock"
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                raw = os.pread(fd, 32, 0).decode(errors="replace").strip()
            finally:
                os.close(fd)
            raise CredentialLocked(self.scope, int(raw) if raw.isdigit() else None, self.path) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
