"""The gateway's database: SQLAlchemy 2 (async), SQLite via aiosqlite by default, PostgreSQL via asyncpg.

Everything that must survive a restart lives here: sessions and their messages, the inbox (every
platform message we accepted, de-duplicated by platform id), the outbox (every chunk we sent), and the
chat log that the web chat serves.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

import structlog
from sqlalchemy import (
    and_,
    bindparam,
    create_engine,
    event,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from gateway.tables import chat_log, create_schema, inbox, messages, outbox, sessions

# What a platform without its own history (the web chat) serves back to its clients.


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def make_engine(url: str) -> AsyncEngine:
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


def _is_unique_violation(exc: Exception) -> bool:
    text = str(getattr(exc, "orig", exc)).lower()
    return "unique" in text or "duplicate key" in text


HISTORY_CACHE_SESSIONS = 256


class Store:
    """Async data access. Every method is a coroutine: the event loop never waits on a sync DB call."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        # SQLite has one writer at a time. Our writes queue here and one thread commits whatever piled up
        # in a single transaction (group commit): one hop to that thread per batch instead of a round trip
        # to aiosqlite's thread for every statement, and no pooled connections colliding in SQLite's busy
        # handler. Reads stay on aiosqlite. PostgreSQL takes every write as its own asyncpg transaction.
        self._batched = url.startswith("sqlite")
        # The newest messages of recently active sessions, as each turn sends them to the model: loading
        # and decoding them from the database every turn was a fifth of the per-message CPU. Appends go
        # through ``append_messages`` (the only writer of ``messages``), which keeps these in step.
        self._history: OrderedDict[str, tuple[int, list[dict[str, Any]]]] = OrderedDict()
        self._history_loading: dict[str, bool] = {}  # session id -> an append raced its read
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
        async with self.write() as conn:
            added = await conn.run_sync(create_schema)
        if added:
            structlog.get_logger("herald.db").info("schema_upgraded", columns=added)

    async def close(self) -> None:
        if self._writer is not None and not self._writer.done():
            await self._writer
        await self.engine.dispose()
        if self._writer_engine is not None and self._writer_thread is not None:
            await asyncio.get_running_loop().run_in_executor(self._writer_thread, self._writer_engine.dispose)
            self._writer_thread.shutdown(wait=False)
        if self._reader_engine is not None and self._reader_threads is not None:
            self._reader_threads.shutdown(wait=True)
            self._reader_engine.dispose()

    # ---- inbox -------------------------------------------------------------------------------

    async def inbox_add(self, platform: str, platform_message_id: str, session_key: str,
                        payload: dict[str, Any]) -> int | None:
        """Store an accepted message; ``None`` when this platform message was already taken."""
        now = time.time()
        params = {
            "platform": platform, "platform_message_id": platform_message_id, "session_key": session_key,
            "payload": payload, "status": "pending", "created_at": now, "updated_at": now,
        }

        def op(conn: Connection) -> int:
            return int(conn.execute(_INBOX_INSERT, params).inserted_primary_key[0])

        try:
            return await self.run_write(op)
        except Exception as exc:
            if _is_unique_violation(exc):
                return None
            raise

    async def inbox_set(self, inbox_id: int, status: str, *, reply: str | None = None,
                        error: str | None = None) -> None:
        values: dict[str, Any] = {"status": status, "updated_at": time.time()}
        if reply is not None:
            values["reply"] = reply
        if error is not None:
            values["error"] = error
        await self.run_write(_exec((_INBOX_UPDATE, {"b_id": inbox_id, **values})))

    async def inbox_unfinished(self) -> list[dict[str, Any]]:
        """Messages accepted but not finished before the last stop, oldest first."""
        return await self.run_read(_all(
            select(inbox).where(inbox.c.status.in_(("pending", "running", "replied"))).order_by(inbox.c.id)
        ))

    async def inbox_get(self, inbox_id: int) -> dict[str, Any] | None:
        return await self.run_read(_first(select(inbox).where(inbox.c.id == inbox_id)))

    # ---- outbox ------------------------------------------------------------------------------

    async def outbox_sent_chunks(self, inbox_id: int) -> set[int]:
        rows = await self.run_read(_all(
            select(outbox.c.chunk_index).where(and_(outbox.c.inbox_id == inbox_id, outbox.c.status == "sent"))
        ))
        return {r["chunk_index"] for r in rows}

    async def outbox_record(self, inbox_id: int | None, platform: str, chat_id: str, chunk_index: int,
                            platform_message_id: str | None, status: str, error: str | None = None,
                            finish_inbox: str | None = None) -> None:
        """Record one chunk; with ``finish_inbox`` the inbox row moves to that status in the same commit."""
        now = time.time()
        stmts: list[Any] = [(_OUTBOX_INSERT, {
            "inbox_id": inbox_id, "platform": platform, "chat_id": chat_id, "chunk_index": chunk_index,
            "platform_message_id": platform_message_id, "status": status, "error": error, "created_at": now,
        })]
        if finish_inbox is not None and inbox_id is not None:
            values: dict[str, Any] = {"status": finish_inbox, "updated_at": now}
            if error is not None:
                values["error"] = error
            stmts.append((_INBOX_UPDATE, {"b_id": inbox_id, **values}))
        await self.run_write(_exec(*stmts))

    # ---- sessions and messages ---------------------------------------------------------------

    async def session_active(self, key: str) -> dict[str, Any] | None:
        return await self.run_read(_first(
            select(sessions)
            .where(and_(sessions.c.key == key, sessions.c.ended_at.is_(None)))
            .order_by(sessions.c.created_at.desc())
            .limit(1)
        ))

    async def session_create(self, session_id: str, key: str, platform: str, system_prompt: str | None,
                             parent_id: str | None = None) -> dict[str, Any]:
        now = time.time()
        row = {
            "id": session_id, "key": key, "parent_id": parent_id, "platform": platform,
            "system_prompt": system_prompt, "created_at": now, "updated_at": now,
            "ended_at": None, "end_reason": None,
        }
        await self.run_write(_exec(insert(sessions).values(**row)))
        return row

    async def session_end(self, session_id: str, reason: str) -> None:
        await self.run_write(_exec(
            update(sessions)
            .where(and_(sessions.c.id == session_id, sessions.c.ended_at.is_(None)))
            .values(ended_at=time.time(), end_reason=reason)
        ))

    async def session_history(self, session_id: str, limit: int = 0) -> list[dict[str, Any]]:
        """The session's messages in order; with ``limit``, the newest ``limit`` of them, starting at a user
        message (a tool result without its call, or a call without its result, is invalid for the model)."""
        if not limit:
            params: dict[str, Any] = {"b_session": session_id}
            return await self.run_read(lambda conn: [_to_openai(r) for r in conn.execute(_HISTORY, params)])
        cached = self._history.get(session_id)
        if cached is not None and cached[0] == limit:
            self._history.move_to_end(session_id)
            tail = cached[1]
            return _from_user_message(tail[-limit:]) if len(tail) > limit else list(tail)
        params = {"b_session": session_id, "b_limit": limit}
        self._history_loading[session_id] = False
        try:
            newest = await self.run_read(
                lambda conn: [_to_openai(r) for r in conn.execute(_HISTORY_TAIL, params)])
        finally:
            raced = self._history_loading.pop(session_id, True)
        newest.reverse()
        tail = _from_user_message(newest)
        if not raced:  # an append during the read may or may not be in it: then don't keep it
            self._history[session_id] = (limit, tail)
            while len(self._history) > HISTORY_CACHE_SESSIONS:
                self._history.popitem(last=False)
        return list(tail)

    async def session_count_messages(self, session_id: str) -> int:
        stmt = select(func.count()).select_from(messages).where(messages.c.session_id == session_id)
        return int(await self.run_read(lambda conn: conn.execute(stmt).scalar_one()))

    async def append_messages(self, session_id: str, msgs: Iterable[dict[str, Any]],
                              inbox_id: int | None = None, inbox_status: str | None = None,
                              reply: str | None = None) -> None:
        """Persist a turn's messages and (optionally) move its inbox row on, in one transaction."""
        now = time.time()
        rows = [
            {
                "session_id": session_id, "role": m["role"], "content": m.get("content"),
                "tool_calls": m.get("tool_calls"), "tool_call_id": m.get("tool_call_id"), "created_at": now,
            }
            for m in msgs
        ]
        stmts: list[Any] = [(_SESSION_TOUCH, {"b_id": session_id, "updated_at": now})]
        if inbox_id is not None and inbox_status is not None:
            values: dict[str, Any] = {"status": inbox_status, "updated_at": now}
            if reply is not None:
                values["reply"] = reply
            stmts.append((_INBOX_UPDATE, {"b_id": inbox_id, **values}))

        def op(conn: Connection) -> None:
            if rows:
                conn.execute(_MESSAGES_INSERT, rows)
            for stmt, params in stmts:
                conn.execute(stmt, params)

        await self.run_write(op)
        if session_id in self._history_loading:
            self._history_loading[session_id] = True
        cached = self._history.get(session_id)
        if cached is not None:
            limit, tail = cached
            tail.extend(_openai_message(m) for m in msgs)
            if len(tail) > 2 * limit:  # trimmed now and then, not on every append
                tail[:] = _from_user_message(tail[-limit:])

    # ---- chat log (web chat history) ---------------------------------------------------------

    async def chat_log_add(self, platform: str, chat_id: str, message_id: str, role: str, text: str,
                           buttons: list[dict[str, Any]] | None = None, user_id: str | None = None) -> bool:
        now = time.time()
        try:
            await self.run_write(_exec(insert(chat_log).values(
                platform=platform, chat_id=chat_id, message_id=message_id, role=role, user_id=user_id,
                text=text, buttons=buttons, created_at=now, updated_at=now,
            )))
            return True
        except Exception as exc:
            if _is_unique_violation(exc):
                return False
            raise

    async def chat_log_edit(self, platform: str, message_id: str, text: str | None,
                            buttons: list[dict[str, Any]] | None) -> dict[str, Any] | None:
        values: dict[str, Any] = {"updated_at": time.time(), "buttons": buttons}
        if text is not None:
            values["text"] = text
        where = and_(chat_log.c.platform == platform, chat_log.c.message_id == message_id)

        def op(conn: Connection) -> dict[str, Any] | None:
            conn.execute(update(chat_log).where(where).values(**values))
            row = conn.execute(select(chat_log).where(where)).first()
            return dict(row._mapping) if row else None

        return await self.run_write(op)

    async def chat_log_get(self, platform: str, message_id: str) -> dict[str, Any] | None:
        return await self.run_read(_first(
            select(chat_log).where(and_(chat_log.c.platform == platform, chat_log.c.message_id == message_id))
        ))

    async def chat_log_list(self, platform: str, chat_id: str, limit: int = 500) -> list[dict[str, Any]]:
        rows = await self.run_read(_all(
            select(chat_log)
            .where(and_(chat_log.c.platform == platform, chat_log.c.chat_id == chat_id))
            .order_by(chat_log.c.id.desc())
            .limit(limit)
        ))
        rows.reverse()
        return rows


# A database operation: a synchronous function of a (sync) Connection, run off the loop (writes inside a
# transaction). On PostgreSQL it runs through asyncpg via run_sync; on SQLite in the store's threads.
WriteOp = Callable[[Connection], Any]
READERS = 2


def _all(stmt: Any) -> WriteOp:
    return lambda conn: [dict(r._mapping) for r in conn.execute(stmt)]


def _first(stmt: Any) -> WriteOp:
    def op(conn: Connection) -> dict[str, Any] | None:
        row = conn.execute(stmt).first()
        return dict(row._mapping) if row else None

    return op


def _exec(*stmts: Any) -> WriteOp:
    """Statements, or (statement, parameters) pairs, executed in order."""
    def op(conn: Connection) -> None:
        for stmt in stmts:
            if isinstance(stmt, tuple):
                conn.execute(*stmt)
            else:
                conn.execute(stmt)

    return op


# Hot-path statements built once: parameters travel separately, so SQLAlchemy skips re-building (and
# re-coercing) a statement per message and hits its compiled cache directly.
_INBOX_INSERT = insert(inbox)
_INBOX_UPDATE = update(inbox).where(inbox.c.id == bindparam("b_id"))
_OUTBOX_INSERT = insert(outbox)
_MESSAGES_INSERT = insert(messages)
_SESSION_TOUCH = update(sessions).where(sessions.c.id == bindparam("b_id"))
_HISTORY = (
    select(messages.c.role, messages.c.content, messages.c.tool_calls, messages.c.tool_call_id)
    .where(messages.c.session_id == bindparam("b_session"))
    .order_by(messages.c.id)
)
_HISTORY_TAIL = (
    select(messages.c.role, messages.c.content, messages.c.tool_calls, messages.c.tool_call_id)
    .where(messages.c.session_id == bindparam("b_session"))
    .order_by(messages.c.id.desc())
    .limit(bindparam("b_limit"))
)


def _from_user_message(msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    start = next((n for n, m in enumerate(msgs) if m["role"] == "user"), len(msgs))
    return msgs[start:]


def _openai_message(m: dict[str, Any]) -> dict[str, Any]:
    """What ``_to_openai`` makes of the row ``append_messages`` writes for ``m``."""
    msg: dict[str, Any] = {"role": m["role"], "content": m.get("content")}
    if m.get("tool_calls"):
        msg["tool_calls"] = m["tool_calls"]
    if m.get("tool_call_id"):
        msg["tool_call_id"] = m["tool_call_id"]
    return msg


def _to_openai(row: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": row.role, "content": row.content}
    if row.tool_calls:
        msg["tool_calls"] = row.tool_calls if not isinstance(row.tool_calls, str) else json.loads(row.tool_calls)
    if row.tool_call_id:
        msg["tool_call_id"] = row.tool_call_id
    return msg
