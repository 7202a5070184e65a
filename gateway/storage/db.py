"""The gateway's database: SQLAlchemy 2 (async), SQLite via aiosqlite by default, PostgreSQL via asyncpg.

``Database`` runs every operation off the loop (on SQLite through its own writer and reader threads, the
writes group-committed) and waits out a database that is down or a disk that is full. Everything that must
survive a restart goes through it; what is stored where (sessions and their messages, the inbox, the
outbox, the chat log...) is the stores' business (gateway/storage/store.py).
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import structlog
from sqlalchemy import (
    create_engine,
    event,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import StaticPool

from gateway.kernel.faults import WAIT_WHILE_UNAVAILABLE, Faults, Unavailable

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def make_engine(url: str) -> AsyncEngine:
    # Imported here: sqlalchemy.ext.asyncio brings the ORM (~8 MB resident), which a daemon on SQLite never
    # needs (its store works through its own threads; see Database.engine).
    from sqlalchemy.ext.asyncio import create_async_engine

    if url.startswith("sqlite"):
        engine = create_async_engine(url, connect_args={"timeout": 30})
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    return create_async_engine(url, pool_size=10, max_overflow=10, pool_pre_ping=True)


def make_sqlite_engine(url: str, readers: int = 0) -> Engine:
    """A pysqlite engine for the store's own threads: one writer connection, or a pool of readers."""
    sync_url = url.replace("sqlite+aiosqlite", "sqlite+pysqlite", 1)
    args = {"timeout": 30, "check_same_thread": False}
    if readers:
        engine = create_engine(sync_url, pool_size=readers, max_overflow=0, connect_args=args)
    else:
        engine = create_engine(sync_url, poolclass=StaticPool, connect_args=args)
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


# The lasting faults a database operation can meet, as (condition, fault class, reason for users and /readyz).
DATABASE_DOWN = ("database", "database_unavailable", "database unavailable")
DISK_FULL = ("disk", "disk_full", "disk full: the database cannot store anything")
# PostgreSQL's SQLSTATEs for a server that is gone, going or not yet there (class 08: connection exception;
# 57P01-03: admin shutdown, crash shutdown, cannot connect now) and for its disk being full (53100).
_PG_DOWN = ("08", "57P01", "57P02", "57P03")
_PG_FULL = ("53100",)
RETRY_FIRST, RETRY_MAX = 0.2, 2.0  # seconds between attempts while the database is unavailable


def _sqlstate(exc: BaseException) -> str:
    for candidate in (exc, getattr(exc, "orig", None), getattr(getattr(exc, "orig", None), "__cause__", None)):
        state = getattr(candidate, "sqlstate", None) or getattr(candidate, "pgcode", None)
        if isinstance(state, str) and state:
            return state
    return ""


def unavailable_kind(exc: BaseException) -> tuple[str, str, str] | None:
    """DATABASE_DOWN or DISK_FULL when ``exc`` says the database cannot be used for a while (any operation
    would fail the same way, and succeed again once the server is back or space is freed); None for an error
    of the operation itself (a bug, a constraint), which waiting would not cure."""
    if isinstance(exc, Unavailable):
        return None
    orig = getattr(exc, "orig", None)
    for err in (exc, orig):
        if isinstance(err, OSError):
            return DISK_FULL if err.errno == errno.ENOSPC else DATABASE_DOWN
    state = _sqlstate(exc)
    if state.startswith(_PG_FULL):
        return DISK_FULL
    if state.startswith(_PG_DOWN):
        return DATABASE_DOWN
    if getattr(exc, "connection_invalidated", False):
        return DATABASE_DOWN
    text = str(orig if orig is not None else exc).lower()
    if "interfaceerror" in type(orig).__name__.lower() + type(exc).__name__.lower() and "connection" in text \
            and ("closed" in text or "lost" in text):
        return DATABASE_DOWN  # asyncpg's "connection is closed": a connection the server dropped under us
    name = getattr(orig, "sqlite_errorname", None)
    if name == "SQLITE_FULL" or (orig is not None and "database or disk is full" in str(orig)):
        return DISK_FULL
    return None


def is_unique_violation(exc: Exception) -> bool:
    text = str(getattr(exc, "orig", exc)).lower()
    return "unique" in text or "duplicate key" in text


class Database:
    """Async access to the database: every method is a coroutine, the event loop never waits on a sync call.

    ``run_read``/``run_write`` run a synchronous operation (a function of a ``Connection``) off the loop; the
    domain operations live on the stores per table family that ``gateway.storage.store.Store`` gathers.
    """

    def __init__(self, url: str, faults: Faults | None = None) -> None:
        self.url = url
        self._engine: AsyncEngine | None = None
        # Where a database that is down (or a disk that is full) shows: a condition /readyz reports until an
        # operation succeeds again. The store knows nothing of the runner: it is handed the ledger.
        self.faults = faults if faults is not None else Faults()
        self._down: set[str] = set()  # conditions on (read without the ledger's lock on every operation)
        self.waiting = True  # False once the daemon stops: operations fail instead of waiting for the database
        # SQLite has one writer at a time. Our writes queue here and one thread commits whatever piled up
        # in a single transaction (group commit): one hop to that thread per batch instead of a round trip
        # to aiosqlite's thread for every statement, and no pooled connections colliding in SQLite's busy
        # handler. Reads stay on aiosqlite. PostgreSQL takes every write as its own asyncpg transaction.
        self._batched = url.startswith("sqlite")
        if not self._batched:
            self._engine = make_engine(url)
        self._write_lock = asyncio.Lock()
        self._queue: list[tuple[WriteOp, asyncio.Future[Any]]] = []
        self._writer: asyncio.Task[None] | None = None
        self._writer_engine = make_sqlite_engine(url) if self._batched else None
        self._writer_thread = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="db-writer") if self._batched else None
        )
        # Reads likewise: one hop to a reader thread per query (WAL lets them run beside the writer).
        self._reader_engine = make_sqlite_engine(url, readers=READERS) if self._batched else None
        self._reader_threads = (
            ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="db-reader") if self._batched else None
        )

    @property
    def engine(self) -> AsyncEngine:
        """The async engine: every query on PostgreSQL; on SQLite only ``write()`` and ``engine.connect()``
        callers (tests, tools) use it, so it is made at first use there (and aiosqlite and the ORM with it)."""
        if self._engine is None:
            self._engine = make_engine(self.url)
        return self._engine

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction of its own (commits on exit), serialised with the batched writes."""
        if not self._batched:
            async with self.engine.begin() as conn:
                yield conn
            return
        async with self._write_lock, self.engine.begin() as conn:
            yield conn

    async def run_write(self, op: WriteOp, *, wait: bool = True) -> Any:
        """Run the synchronous ``op(conn)`` in a write transaction off the loop and return its result.

        While the database is unavailable (unreachable, or its disk full) the operation is tried again until it
        succeeds: work already taken finishes once the database is back. With ``wait`` False it raises
        ``Unavailable`` instead: new work (a platform's message) is refused, and the platform redelivers it."""
        return await self._retrying(self._write_once, op, wait, writes=True)

    async def run_read(self, op: WriteOp, *, wait: bool = True) -> Any:
        """Run the synchronous ``op(conn)`` on a read connection off the loop and return its result (waiting
        while the database is unreachable, as ``run_write``)."""
        return await self._retrying(self._read_once, op, wait, writes=False)

    async def _retrying(self, attempt: Callable[[WriteOp], Any], op: WriteOp, wait: bool, writes: bool) -> Any:
        delay = RETRY_FIRST
        while True:
            try:
                result = await attempt(op)
            except Exception as exc:
                kind = unavailable_kind(exc)
                if kind is None:
                    raise
                condition, fault, reason = kind
                if condition not in self._down:
                    self._down.add(condition)
                    self.faults.begin(condition, fault, reason, store="sqlite" if self._batched else "postgresql")
                if not wait or not self.waiting or not WAIT_WHILE_UNAVAILABLE.get():
                    raise Unavailable(condition, fault, reason) from None
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)
                continue
            if self._down:
                # A read says nothing about the disk (reads succeed on a full one); a write clears both.
                for condition in list(self._down):
                    if writes or condition == DATABASE_DOWN[0]:
                        self._down.discard(condition)
                        self.faults.end(condition)
            return result

    async def _write_once(self, op: WriteOp) -> Any:
        if not self._batched:
            async with self.engine.begin() as conn:
                return await conn.run_sync(op)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append((op, future))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_batches())
        return await asyncio.shield(future)

    async def _read_once(self, op: WriteOp) -> Any:
        if not self._batched:
            async with self.engine.connect() as conn:
                return await conn.run_sync(op)
        return await asyncio.get_running_loop().run_in_executor(self._reader_threads, self._read, op)

    def _read(self, op: WriteOp) -> Any:
        assert self._reader_engine is not None
        with self._reader_engine.connect() as conn:
            return op(conn)

    async def _write_batches(self) -> None:
        loop = asyncio.get_running_loop()
        while self._queue:
            batch, self._queue = self._queue, []
            try:
                async with self._write_lock:
                    outcomes = await loop.run_in_executor(self._writer_thread, self._commit_batch,
                                                          [op for op, _ in batch])
                if len(outcomes) != len(batch):
                    raise RuntimeError(f"{len(outcomes)} outcomes for a batch of {len(batch)}")
            except Exception as exc:  # never leave a waiting op without an answer (it would wait for ever)
                outcomes = [(False, exc)] * len(batch)
            for (_, future), (ok, value) in zip(batch, outcomes, strict=True):
                if not future.done():
                    if ok:
                        future.set_result(value)
                    else:
                        future.set_exception(value)

    def _commit_batch(self, ops: list[WriteOp]) -> list[tuple[bool, Any]]:
        """In the writer thread: all ops in one transaction; if one fails, each on its own."""
        assert self._writer_engine is not None
        try:
            with self._writer_engine.begin() as conn:
                return [(True, op(conn)) for op in ops]
        except Exception as exc:
            if len(ops) == 1:
                return [(False, exc)]
        outcomes: list[tuple[bool, Any]] = []
        for op in ops:
            # The outcome is known only once the commit is through: a commit that fails (a full disk fails
            # there, after the op ran) must not leave the op reported as done and then as failed too.
            try:
                with self._writer_engine.begin() as conn:
                    value = op(conn)
            except Exception as exc:
                outcomes.append((False, exc))
            else:
                outcomes.append((True, value))
        return outcomes

    async def init(self) -> None:
        """Bring the schema to the newest revision (gateway/storage/migrations/) before anything reads or writes."""
        from gateway.storage.migrations import upgrade

        if self._batched:  # in the writer's thread, on its connection, serialised with the batched writes
            assert self._writer_engine is not None and self._writer_thread is not None
            writer_engine = self._writer_engine

            def run_upgrade() -> tuple[str | None, str]:
                with writer_engine.begin() as conn:
                    return upgrade(conn)

            async with self._write_lock:
                before, after = await asyncio.get_running_loop().run_in_executor(self._writer_thread, run_upgrade)
        else:
            async with self.write() as conn:
                before, after = await conn.run_sync(upgrade)
        if before != after:
            structlog.get_logger("herald.db").info("schema_upgraded", revision_from=before, revision_to=after)

    async def close(self) -> None:
        if self._writer is not None and not self._writer.done():
            await self._writer
        if self._engine is not None:
            await self._engine.dispose()
        if self._writer_engine is not None and self._writer_thread is not None:
            await asyncio.get_running_loop().run_in_executor(self._writer_thread, self._writer_engine.dispose)
            self._writer_thread.shutdown(wait=False)
        if self._reader_engine is not None and self._reader_threads is not None:
            self._reader_threads.shutdown(wait=True)
            self._reader_engine.dispose()


# A database operation: a synchronous function of a (sync) Connection, run off the loop (writes inside a
# transaction). On PostgreSQL it runs through asyncpg via run_sync; on SQLite in the store's threads.
WriteOp = Callable[[Connection], Any]
READERS = 2


def op_all(stmt: Any) -> WriteOp:
    return lambda conn: [dict(r._mapping) for r in conn.execute(stmt)]


def op_first(stmt: Any) -> WriteOp:
    def op(conn: Connection) -> dict[str, Any] | None:
        row = conn.execute(stmt).first()
        return dict(row._mapping) if row else None

    return op


def op_exec(*stmts: Any) -> WriteOp:
    """Statements, or (statement, parameters) pairs, executed in order."""
    def op(conn: Connection) -> None:
        for stmt in stmts:
            if isinstance(stmt, tuple):
                conn.execute(*stmt)
            else:
                conn.execute(stmt)

    return op
