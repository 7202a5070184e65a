"""The MCP servers of one daemon, kept up on a thread of their own with an event loop of its own: a server that
floods, hangs or crashes never delays the daemon's loop, and a tool call from a turn's worker thread waits only for
its own server.

Each server has a supervisor task: start (within ``startup_timeout_seconds``), list what it offers, then watch it —
the end of a stdio server's stderr, a probe every ``PROBE_EVERY`` seconds, and a probe at once after a call that
timed out or lost its connection. A server that fails to start, dies or stops answering is *down*: ``on_change``
says so (the gateway withdraws its tools and marks it in /readyz), and it is started again after a backoff
(1 s doubling to ``MAX_BACKOFF``). ``apply`` takes a new set of servers (``/mcp reload``): new ones start, removed
ones stop, changed ones restart, the others are left alone — and so are the calls running on them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import structlog
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

from tools.mcp.client import Connection, Offer
from tools.mcp.config import McpServerConfig
from tools.mcp.spawn import NotStartable
from tools.sandbox import SandboxPolicy

log = structlog.get_logger("herald.mcp")

Status = Literal["starting", "up", "down", "stopped"]
PROBE_EVERY = 60.0
PROBE_TIMEOUT = 10.0
FIRST_BACKOFF = 1.0
MAX_BACKOFF = 300.0
UP_RESETS_BACKOFF = 60.0  # up this long: the next failure starts the backoff anew
STOP_WAIT = 10.0  # for a server to wind down before its supervisor is cancelled (the SDK still ends the process)
_POLL = 0.1
_HEARTBEAT_EVERY = 5.0


class CallFailed(Exception):
    """A call did not get an answer from the server; ``str()`` is the sentence for the model."""


class Interrupted(Exception):
    """The turn was stopped while the call ran (the call is abandoned)."""


@dataclass(frozen=True)
class ServerView:
    """One server as the gateway shows it: state, why it is down, what it offers."""

    name: str
    kind: str
    status: Status
    error: str | None = None
    offer: Offer = field(default_factory=Offer)
    since: float = field(default_factory=time.time)
    restarts: int = 0
    retry_at: float | None = None  # time.time() of the next start when down


@dataclass(eq=False)
class _Server:
    name: str
    cfg: McpServerConfig
    view: ServerView
    conn: Connection | None = None
    task: asyncio.Task[None] | None = None
    stopping: bool = False
    probe: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def describe(exc: BaseException) -> str:
    """An error as one line for the log and /mcp (the log masks secrets in it)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, NotStartable):
        return str(exc)
    if isinstance(exc, TimeoutError):
        return "it did not answer in time"
    text = " ".join(str(exc).split())[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class McpHub:
    def __init__(self, on_change: Callable[[ServerView], None]) -> None:
        """``on_change`` is called on the hub's thread with each server's new view (keep it short)."""
        self._on_change = on_change
        self._servers: dict[str, _Server] = {}
        self._policy: SandboxPolicy | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    # ---- the thread ------------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="mcp-hub", daemon=True)
        self._thread.start()
        self._ready.wait()

    def _run(self) -> None:
        # The servers' death signal is tied to this thread (PR_SET_PDEATHSIG follows the thread that forked):
        # it lives until the hub stops.
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        loop.call_soon(self._ready.set)
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def _submit(self, coro: Any) -> concurrent.futures.Future[Any]:
        if self._loop is None or self._loop.is_closed():
            coro.close()
            raise CallFailed("the MCP servers are not running (the daemon is stopping)")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def stop(self, timeout: float = 15.0) -> None:
        """Stop every server (the SDK closes stdin, then terminates what is left) and the thread."""
        if self._loop is None or self._thread is None:
            return
        with contextlib.suppress(Exception):
            self._submit(self._apply({}, None)).result(timeout)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)

    # ---- what the gateway calls (any thread) ---------------------------------------------------------------

    def apply(self, servers: dict[str, McpServerConfig],
              policy: SandboxPolicy | None) -> concurrent.futures.Future[Any]:
        """Run these servers from now on (returns once each is started or stopped, not once it is up)."""
        return self._submit(self._apply(dict(servers), policy))

    def views(self) -> list[ServerView]:
        return [s.view for s in list(self._servers.values())]

    def call(self, server: str, tool: str, arguments: dict[str, Any], timeout: float,
             interrupt: threading.Event | None = None, heartbeat: Callable[[str], None] | None = None) -> Any:
        """Call ``tool`` from a worker thread and wait: the ``CallToolResult``, or ``CallFailed`` (not up, timed
        out, connection lost), ``MCPError`` (the server's error answer), ``Interrupted``."""
        future = self._submit(self._call(server, tool, arguments, timeout))
        next_beat = time.monotonic() + _HEARTBEAT_EVERY
        while True:
            try:
                return future.result(timeout=_POLL)
            except concurrent.futures.TimeoutError:
                pass
            if interrupt is not None and interrupt.is_set():
                future.cancel()
                raise Interrupted()
            if heartbeat is not None and time.monotonic() >= next_beat:
                heartbeat(f"mcp: {server} is still working on {tool}")
                next_beat = time.monotonic() + _HEARTBEAT_EVERY

    # ---- on the hub's loop -------------------------------------------------------------------------------

    async def _apply(self, servers: dict[str, McpServerConfig], policy: SandboxPolicy | None) -> None:
        if policy is not None:
            self._policy = policy
        stopping = [s for name, s in self._servers.items() if servers.get(name) != s.cfg]
        for srv in stopping:
            del self._servers[srv.name]
        await asyncio.gather(*(self._stop(s) for s in stopping))
        for name, cfg in servers.items():
            if name not in self._servers:
                srv = _Server(name, cfg, ServerView(name, cfg.kind, "starting"))
                self._servers[name] = srv
                srv.task = asyncio.get_running_loop().create_task(self._supervise(srv), name=f"mcp:{name}")

    async def _stop(self, srv: _Server) -> None:
        srv.stopping = True
        srv.probe.set()
        if srv.task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(srv.task), STOP_WAIT)
            if not srv.task.done():
                srv.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await srv.task
        self._set(srv, status="stopped", error=None, offer=Offer())

    def _set(self, srv: _Server, **changes: Any) -> None:
        srv.view = replace(srv.view, since=time.time(), **changes)
        try:
            self._on_change(srv.view)
        except Exception:
            log.exception("mcp_on_change_failed", server=srv.name)

    async def _supervise(self, srv: _Server) -> None:
        backoff = FIRST_BACKOFF
        while not srv.stopping:
            error, up_since = await self._session(srv)
            if srv.stopping:
                return
            if up_since is not None and time.monotonic() - up_since >= UP_RESETS_BACKOFF:
                backoff = FIRST_BACKOFF
            log.warning("mcp_server_down", server=srv.name, error=error, retry_in=backoff)
            self._set(srv, status="down", error=error, offer=Offer(), retry_at=time.time() + backoff,
                      restarts=srv.view.restarts + (1 if up_since is not None else 0))
            srv.probe.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(backoff):
                    await srv.probe.wait()  # set by a stop: no more waiting
            backoff = min(backoff * 2, MAX_BACKOFF)
            if not srv.stopping:
                self._set(srv, status="starting", retry_at=None)

    async def _session(self, srv: _Server) -> tuple[str, float | None]:
        """Start the server and watch it until it is gone: (why it is down, monotonic time it came up or None)."""
        up_since: float | None = None
        conn = Connection(srv.name, srv.cfg)
        try:
            async with contextlib.AsyncExitStack() as stack:
                async with asyncio.timeout(srv.cfg.startup_timeout_seconds):
                    await conn.open(stack, self._policy)
                srv.conn = conn
                up_since = time.monotonic()
                log.info("mcp_server_up", server=srv.name, tools=len(conn.offer.tools))
                self._set(srv, status="up", error=None, offer=conn.offer, retry_at=None)
                error = await self._watch(srv, conn)
                srv.conn = None
                return error, up_since
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # SDK task groups raise groups; every failure is a "down"
            if not isinstance(exc, Exception | BaseExceptionGroup):
                raise
            return (("it stopped answering" if up_since is not None else f"it did not start: {describe(exc)}")
                    if not isinstance(exc, NotStartable) else str(exc)), up_since
        finally:
            srv.conn = None

    async def _watch(self, srv: _Server, conn: Connection) -> str:
        ended = conn.pump.ended if conn.pump is not None else asyncio.Event()
        while not srv.stopping:
            waits = [asyncio.ensure_future(srv.probe.wait()), asyncio.ensure_future(ended.wait())]
            _done, pending = await asyncio.wait(waits, timeout=PROBE_EVERY, return_when=asyncio.FIRST_COMPLETED)
            for w in pending:
                w.cancel()
            srv.probe.clear()
            if srv.stopping:
                break
            if ended.is_set():
                return "its process exited"
            before = conn.offer
            if not await conn.alive(PROBE_TIMEOUT):
                return "it stopped answering"
            if conn.offer != before:
                self._set(srv, offer=conn.offer)
        return "stopped"

    async def _call(self, server: str, tool: str, arguments: dict[str, Any], timeout: float) -> Any:
        srv = self._servers.get(server)
        conn = srv.conn if srv is not None else None
        if srv is None or conn is None or srv.view.status != "up":
            raise CallFailed(f"the MCP server {server} is not running now (it is {srv.view.status if srv else 'gone'})")
        try:
            async with asyncio.timeout(timeout):
                async with srv.lock if srv.cfg.serialize else contextlib.nullcontext():
                    return await conn.client.call_tool(tool, arguments)
        except TimeoutError:
            srv.probe.set()  # a hung server is found at once, not at the next periodic probe
            raise CallFailed(f"the MCP server {server} did not answer within {timeout:g} s (timeout_seconds); the "
                             "call was abandoned") from None
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise
            srv.probe.set()
            raise CallFailed(f"the MCP server {server} closed the connection during the call (it may have "
                             "crashed); it is restarted in the background") from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            srv.probe.set()
            raise CallFailed(f"the call to the MCP server {server} failed: {describe(exc)}") from None
