"""The gateway's database: SQLAlchemy 2 (async), SQLite via aiosqlite by default, PostgreSQL via asyncpg.

Everything that must survive a restart lives here: sessions and their messages, the inbox (every
platform message we accepted, de-duplicated by platform id), the outbox (every chunk we sent), and the
chat log that the web chat serves.
"""

from __future__ import annotations

import asyncio
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

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

# What a platform without its own history (the web chat) serves back to its clients.


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


def is_unique_violation(exc: Exception) -> bool:
    text = str(getattr(exc, "orig", exc)).lower()
    return "unique" in text or "duplicate key" in text


class Database:
    """Async access to the database: every method is a coroutine, the event loop never waits on a sync call.

    ``run_read``/``run_write`` run a synchronous operation (a function of a ``Connection``) off the loop; the
    domain operations live on ``gateway.store.Store``.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self._engine: AsyncEngine | None = None
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

    async def run_write(self, op: WriteOp) -> Any:
        """Run the synchronous ``op(conn)`` in a write transaction off the loop and return its result."""
        if not self._batched:
            async with self.engine.begin() as conn:
                return await conn.run_sync(op)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append((op, future))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_batches())
        return await asyncio.shield(future)

    async def run_read(self, op: WriteOp) -> Any:
        """Run the synchronous ``op(conn)`` on a read connection off the loop and return its result."""
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
            async with self._write_lock:
                outcomes = await loop.run_in_executor(self._writer_thread, self._commit_batch, [op for op, _ in batch])
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
            try:
                with self._writer_engine.begin() as conn:
                    outcomes.append((True, op(conn)))
            except Exception as exc:
                outcomes.append((False, exc))
        return outcomes

    async def init(self) -> None:
        """Bring the schema to the newest revision (gateway/migrations/) before anything reads or writes."""
        from gateway.migrations import upgrade

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
