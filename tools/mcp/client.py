"""One connection to one MCP server through the official SDK's ``Client``: its transport (stdio in the sandbox,
streamable HTTP or SSE under the address rules), what it offers (tools, resources, prompts), whether it still
answers. Entered and left in the same task (the SDK's task groups require it): the hub's supervisor of that server.

A stdio server's stderr goes to the log, line by line (capped, rate-limited; the log masks secrets), and its end
(every process holding it gone) says the server is gone even when nobody is calling it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Any

import structlog
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, Implementation

from tools.mcp.config import McpServerConfig
from tools.mcp.http import guarded_client
from tools.mcp.spawn import NotStartable, stdio_parameters
from tools.sandbox import SandboxPolicy

log = structlog.get_logger("herald.mcp")

MAX_PAGES = 50
STDERR_LINE = 1000  # characters of one stderr line kept
STDERR_BURST = 200  # lines logged per STDERR_WINDOW; the rest are counted
STDERR_WINDOW = 60.0


@dataclass(frozen=True)
class ToolInfo:
    name: str
    description: str | None
    input_schema: dict[str, Any]
    read_only: bool


@dataclass(frozen=True)
class Offer:
    """What a server offers, as listed when it came up (and refreshed by each probe)."""

    tools: tuple[ToolInfo, ...] = ()
    resources: tuple[str, ...] = ()
    prompts: tuple[str, ...] = ()


class StderrPump:
    """Reads a stdio server's stderr into the log; ``ended`` is set when nothing holds its write end any more."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.ended = asyncio.Event()
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self._task: asyncio.Task[None] | None = None
        self._window = (0.0, 0, 0)  # (start, logged, dropped)

    def errlog(self) -> Any:
        return os.fdopen(self.write_fd, "w", closefd=False)

    def begin(self) -> None:
        """Read from now on: a server that writes much while it starts must not block on a full pipe."""
        self._task = asyncio.get_running_loop().create_task(self._read())

    def spawned(self) -> None:
        """The process has its copy: ours goes, so that the end of the server is the end of the pipe."""
        if self.write_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.write_fd)
            self.write_fd = -1

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 16)
        pipe = os.fdopen(self.read_fd, "rb", buffering=0)
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
        pending = b""
        try:
            while chunk := await reader.read(65536):
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                if len(pending) > STDERR_LINE * 4:
                    lines.append(pending)
                    pending = b""
                for line in lines:
                    self._line(line)
            if pending:
                self._line(pending)
        finally:
            transport.close()
            self.ended.set()

    def _line(self, raw: bytes) -> None:
        text = raw.decode(errors="replace").rstrip()
        if not text:
            return
        start, logged, dropped = self._window
        now = time.monotonic()
        if now - start > STDERR_WINDOW:
            if dropped:
                log.warning("mcp_stderr_dropped", server=self.server, lines=dropped)
            start, logged, dropped = now, 0, 0
        if logged >= STDERR_BURST:
            self._window = (start, logged, dropped + 1)
            return
        self._window = (start, logged + 1, dropped)
        log.info("mcp_stderr", server=self.server, line=text[:STDERR_LINE])

    async def close(self) -> None:
        self.spawned()
        if self._task is None:
            with contextlib.suppress(OSError):
                os.close(self.read_fd)
            return
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(self.ended.wait()), 2.0)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task


@dataclass
class Connection:
    """A live session with one server (``open`` enters it on an exit stack owned by the caller's task)."""

    name: str
    server: McpServerConfig
    client: Any = None
    pump: StderrPump | None = None
    offer: Offer = field(default_factory=Offer)

    async def open(self, stack: contextlib.AsyncExitStack, policy: SandboxPolicy | None) -> None:
        self.client = await stack.enter_async_context(Client(
            self._transport(stack, await self._params(policy)), mode="auto",
            client_info=Implementation(name="herald", version="1")))
        if self.pump is not None:
            self.pump.spawned()
        self.offer = await self.list()

    async def _params(self, policy: SandboxPolicy | None) -> Any:
        if self.server.command is None:
            return None
        if policy is None:
            raise NotStartable("the sandbox is not set up")
        return await asyncio.to_thread(stdio_parameters, self.server, policy)

    def _transport(self, stack: contextlib.AsyncExitStack, params: Any) -> Any:
        s = self.server
        if params is not None:
            self.pump = StderrPump(self.name)
            self.pump.begin()
            stack.push_async_callback(self.pump.close)
            return stdio_client(params, errlog=self.pump.errlog())
        assert s.url is not None
        headers = {header: os.environ.get(variable) or "" for header, variable in s.headers_env.items()}
        missing = [v for v in s.headers_env.values() if not os.environ.get(v)]
        if missing:
            raise NotStartable(f"headers_env: the environment variable {missing[0]} is not set")
        if s.transport == "sse":
            def factory(headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None) -> Any:
                return guarded_client(dict(headers or {}), s.allow_private)

            return sse_client(s.url, headers=headers, httpx_client_factory=factory)
        http = guarded_client(headers, s.allow_private)
        stack.push_async_callback(http.aclose)
        return streamable_http_client(s.url, http_client=http)

    async def list(self) -> Offer:
        tools: list[ToolInfo] = []
        cursor = None
        for _ in range(MAX_PAGES):
            page = await self.client.list_tools(cursor=cursor, cache_mode="refresh")
            for t in page.tools:
                hints = t.annotations
                tools.append(ToolInfo(t.name, t.description, dict(t.input_schema or {}),
                                      bool(hints is not None and hints.read_only_hint)))
            cursor = page.next_cursor
            if cursor is None:
                break
        caps = self.client.server_capabilities
        resources: tuple[str, ...] = ()
        prompts: tuple[str, ...] = ()
        if getattr(caps, "resources", None) is not None:
            with contextlib.suppress(MCPError, TimeoutError):
                found = await self.client.list_resources()
                resources = tuple(f"{r.uri}{f' ({r.name})' if r.name else ''}" for r in found.resources[:100])
        if getattr(caps, "prompts", None) is not None:
            with contextlib.suppress(MCPError, TimeoutError):
                listed = await self.client.list_prompts()
                prompts = tuple(p.name for p in listed.prompts[:100])
        return Offer(tuple(tools), resources, prompts)

    async def alive(self, timeout: float) -> bool:
        """Whether the server still answers (a refreshed tool list, kept as its offer)."""
        if self.pump is not None and self.pump.ended.is_set():
            return False
        try:
            async with asyncio.timeout(timeout):
                self.offer = await self.list()
            return True
        except MCPError as exc:
            return exc.code != CONNECTION_CLOSED  # an error answer is an answer
        except Exception:
            return False


async def probe(name: str, server: McpServerConfig, policy: SandboxPolicy | None, timeout: float) -> Offer:
    """Start the server, list what it offers, stop it (``herald doctor``); raises what went wrong."""
    conn = Connection(name, server)
    async with contextlib.AsyncExitStack() as stack:
        async with asyncio.timeout(timeout):
            await conn.open(stack, policy)
        return conn.offer
