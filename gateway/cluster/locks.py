"""Credential locks: one bot token, one process.

Two processes polling with the same bot token steal each other's updates (Telegram answers 409 Conflict,
Discord/Slack double-answer). Adapters declare their credentials (``PlatformAdapter.credentials()``) and
the runner's adapter supervision takes a lock keyed by scope + sha256 of each one before the adapter
connects, and releases it when the adapter stops. A second process gets ``CredentialLocked`` naming the
holder (pid, profile, host); only that adapter is refused, and the runner keeps retrying, so it takes
over once the first one stops.

- Always: an OS file lock (flock) in ``$XDG_STATE_HOME/herald/locks`` (default
  ``~/.local/state/herald/locks``), shared by every profile of the user on this machine. The lock dies
  with its process, so a crash (even SIGKILL) never leaves a stale lock behind.
- With PostgreSQL as well: a session-level advisory lock on a connection of its own, kept open while the
  lock is held, so two machines sharing the database can't drive the same bot either. The server drops
  it when that connection ends (crash, network loss); the holder pings the connection and gives the
  adapter up if it is lost. The holder's identity is in ``credential_lock_holders`` for the loser to read.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import socket
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from sqlalchemy import delete, insert, select, text
from sqlalchemy.engine import Connection

from gateway.storage.db import unavailable_kind
from gateway.storage.tables import credential_lock_holders


def describe_holder(holder: dict[str, Any] | None) -> str:
    if not holder or not holder.get("pid"):
        return "another process"
    parts = [f"pid {holder['pid']}"]
    if holder.get("profile"):
        parts.append(f"profile {holder['profile']}")
    if holder.get("host"):
        parts.append(f"host {holder['host']}")
    return ", ".join(parts)


class LockDatabaseDown(ConnectionError):
    """The database that holds a credential's lock is unreachable (the lock was lost with its connection, or
    cannot be taken): retried soon, since the database coming back should bring the adapter back with it."""


class CredentialLocked(RuntimeError):
    def __init__(self, scope: str, holder: dict[str, Any] | None, where: str) -> None:
        super().__init__(f"this {scope} credential is in use by another Herald process ({describe_holder(holder)}; "
                         f"{where}); stop that one or give this profile its own credential")
        self.scope = scope
        self.holder = holder or {}
        self.holder_pid: int | None = self.holder.get("pid")


def lock_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base).expanduser() / "herald" / "locks"


def credential_digest(credential: str) -> str:
    return hashlib.sha256(credential.encode()).hexdigest()


def advisory_key(scope: str, credential: str) -> int:
    """A signed 64-bit key for pg_try_advisory_lock, from the scope and the credential's sha256."""
    digest = hashlib.sha256(f"herald-credential:{scope}:{credential_digest(credential)}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def this_holder(profile: str | None = None) -> dict[str, Any]:
    return {"pid": os.getpid(), "profile": profile, "host": socket.gethostname()}


class CredentialLock:
    """``acquire()`` / ``release()`` an exclusive file lock on one credential (idempotent both ways)."""

    def __init__(self, scope: str, credential: str, directory: Path | None = None,
                 holder: dict[str, Any] | None = None) -> None:
        self.scope = scope
        self.path = (directory or lock_dir()) / f"{scope}-{credential_digest(credential)[:32]}.lock"
        self.holder = holder or this_holder()
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
                raw = os.pread(fd, 4096, 0).decode(errors="replace").strip()
            finally:
                os.close(fd)
            raise CredentialLocked(self.scope, _parse_holder(raw), f"lock {self.path}") from None
        record = json.dumps({**self.holder, "since": time.time()})
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{record}\n".encode(), 0)
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


def _parse_holder(raw: str) -> dict[str, Any] | None:
    if raw.isdigit():  # written by an older Herald: the pid alone
        return {"pid": int(raw)}
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class PgCredentialLock:
    """A session-level PostgreSQL advisory lock on a dedicated connection, held while the connection lives."""

    def __init__(self, url: str, scope: str, credential: str, holder: dict[str, Any] | None = None,
                 shared: bool = False) -> None:
        self.url = url
        self.scope = scope
        self.key = advisory_key(scope, credential)
        self.holder = holder or this_holder()
        # Shared: instances of one database that all receive by webhook hold it together; it still keeps a
        # poller (which wants it alone) away, and they away from a poller.
        self.shared = shared
        self._engine: Any = None
        self._conn: Any = None

    @property
    def held(self) -> bool:
        return self._conn is not None

    async def acquire(self) -> None:
        if self._conn is not None:
            return
        from sqlalchemy.ext.asyncio import create_async_engine
        from sqlalchemy.pool import NullPool

        engine = create_async_engine(self.url, poolclass=NullPool)
        key, scope, holder = self.key, self.scope, self.holder
        try_lock = "SELECT pg_try_advisory_lock_shared(:k)" if self.shared else "SELECT pg_try_advisory_lock(:k)"

        def take(conn: Connection) -> dict[str, Any] | None:
            """None when taken (and our identity recorded); otherwise the holder's record."""
            if conn.execute(text(try_lock), {"k": key}).scalar():
                conn.execute(delete(credential_lock_holders).where(credential_lock_holders.c.lock_key == key))
                conn.execute(insert(credential_lock_holders).values(
                    lock_key=key, scope=scope, pid=holder.get("pid"), profile=holder.get("profile"),
                    host=holder.get("host"), acquired_at=time.time()))
                return None
            row = conn.execute(select(credential_lock_holders).where(credential_lock_holders.c.lock_key == key)).first()
            return dict(row._mapping) if row else {}

        conn = None
        try:
            conn = await engine.connect()
            other = await conn.run_sync(take)
            await conn.commit()
        except BaseException:
            if conn is not None:
                await conn.close()
            await engine.dispose()
            raise
        if other is not None:
            await conn.close()
            await engine.dispose()
            raise CredentialLocked(self.scope, other, "PostgreSQL advisory lock")
        self._engine, self._conn = engine, conn

    async def check(self) -> None:
        """Raise ConnectionError if the lock's connection (and with it the lock) is gone."""
        if self._conn is None:
            raise ConnectionError(f"the {self.scope} credential lock is not held")
        try:
            await asyncio.wait_for(self._conn.run_sync(lambda c: c.execute(text("SELECT 1")).scalar()), 10)
            await self._conn.commit()
        except Exception as exc:
            raise LockDatabaseDown(f"lost the {self.scope} credential lock's database connection: "
                                  f"{type(exc).__name__}") from exc

    async def release(self) -> None:
        conn, engine, self._conn, self._engine = self._conn, self._engine, None, None
        if conn is None:
            return
        key = self.key
        unlock = "SELECT pg_advisory_unlock_shared(:k)" if self.shared else "SELECT pg_advisory_unlock(:k)"
        try:
            await conn.run_sync(lambda c: c.execute(text(unlock), {"k": key}))
            await conn.commit()
        except Exception:
            pass  # closing the connection below releases it anyway
        finally:
            with contextlib.suppress(Exception):
                await conn.close()
            await engine.dispose()


class CredentialLocks:
    """The runner's locks, per adapter: taken before it connects, released when it stops."""

    check_seconds = 10.0  # how often a held PostgreSQL lock's connection is pinged

    def __init__(self, db_url: str, profile: str | None = None, directory: Path | None = None) -> None:
        self.pg_url = db_url if db_url.startswith("postgresql") else None
        self.holder = this_holder(profile)
        self.directory = directory
        self._held: dict[str, list[CredentialLock | PgCredentialLock]] = {}

    async def acquire(self, owner: str, credentials: list[tuple[str, str]], exclusive: bool = True) -> None:
        """Lock each credential. ``exclusive`` False (the adapter receives by webhook): with PostgreSQL, every
        instance of the database may hold it at once (any of them takes any webhook); without, it is one
        process's all the same (one SQLite database, one instance)."""
        await self.release(owner)
        shared = not exclusive and self.pg_url is not None
        held: list[CredentialLock | PgCredentialLock] = []
        try:
            for scope, credential in credentials:
                if not shared:
                    file_lock = CredentialLock(scope, credential, self.directory, self.holder)
                    await asyncio.to_thread(file_lock.acquire)
                    held.append(file_lock)
                if self.pg_url:
                    pg_lock = PgCredentialLock(self.pg_url, scope, credential, self.holder, shared=shared)
                    await pg_lock.acquire()
                    held.append(pg_lock)
        except BaseException as exc:
            for lock in reversed(held):
                await _release(lock)
            if isinstance(exc, Exception) and unavailable_kind(exc) is not None:
                raise LockDatabaseDown(f"cannot take the credential lock: the database is unavailable "
                                       f"({type(exc).__name__})") from exc
            raise
        if held:
            self._held[owner] = held

    async def release(self, owner: str) -> None:
        for lock in reversed(self._held.pop(owner, [])):
            await _release(lock)

    async def watch(self, owner: str, closed: Awaitable[None]) -> None:
        """Wait for the adapter's connection to end; raise early if a database lock is lost meanwhile."""
        pg = [lock for lock in self._held.get(owner, []) if isinstance(lock, PgCredentialLock)]
        if not pg:
            await closed
            return
        task = asyncio.ensure_future(closed)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self.check_seconds)
                if done:
                    task.result()
                    return
                for lock in pg:
                    await lock.check()
        finally:
            task.cancel()

    def held(self, owner: str) -> bool:
        return bool(self._held.get(owner))


async def _release(lock: CredentialLock | PgCredentialLock) -> None:
    if isinstance(lock, PgCredentialLock):
        await lock.release()
    else:
        lock.release()
