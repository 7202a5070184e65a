"""One daemon's MCP servers: started in the background after start-up, their tools in this daemon's registry while
they are up, their trouble in ``/readyz``, ``/mcp reload``.

The tool list a turn offers is the agent's own tools, then the MCP tools of the servers up when the turn begins,
server by server (sorted), each server's tools sorted: the list changes only when a server comes or goes (or
changes what it offers), so the model provider's prompt cache is kept between turns otherwise. The system prompt
never names MCP tools or carries a server's instructions (it stays byte-stable for the session, and a server's text
is not the operator's): each tool says in its description which server it belongs to.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

from gateway.config import Config, ConfigError, Paths, load_config
from gateway.kernel.faults import Faults
from gateway.kernel.logs import add_secret, redact
from tools.mcp.config import McpConfig, McpServerConfig
from tools.registry import ToolRegistry
from tools.sandbox import SandboxPolicy, resolve_mode

if TYPE_CHECKING:
    from tools.mcp.hub import McpHub, ServerView

log = structlog.get_logger("herald.mcp")

FAULT = "mcp_server_down"


def condition(name: str) -> str:
    return f"mcp:{name}"


def warnings(cfg: McpConfig) -> list[str]:
    """Start-up's words about the servers: unsandboxed by choice, or sandboxed without a sandbox to run in."""
    out = []
    for name, server in cfg.enabled().items():
        if server.command is None:
            continue
        if server.sandbox == "none":
            out.append(f"mcp.servers.{name}.sandbox is none: this MCP server runs unsandboxed, with the daemon's view "
                       "of the machine")
        elif resolve_mode("bwrap")[0] != "bwrap":
            out.append(f"mcp.servers.{name}: bubblewrap cannot run here, so this MCP server is not started (install "
                       "bubblewrap, or set its sandbox: none)")
    return out


class McpService:
    def __init__(self, cfg: Config, paths: Paths, registry: ToolRegistry, faults: Faults,
                 sandbox: Callable[[], SandboxPolicy | None]) -> None:
        """``registry``: this daemon's (over the built-in tools); ``sandbox``: the tools' policy, once built."""
        self.config = cfg.mcp
        self.paths = paths
        self.registry = registry
        self.faults = faults
        self._sandbox = sandbox
        self._tools: dict[str, list[str]] = {}  # server -> its registered tool names, in order
        self._lock = threading.Lock()
        # Made when the first server is to run: the SDK takes a while to import, and most daemons have none.
        self.hub: McpHub | None = None

    # ---- lifecycle --------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the enabled servers in the background (returns before any is up)."""
        for line in warnings(self.config):
            log.warning("mcp_warning", message=line)
        if self.config.enabled():
            await self._apply(self.config)

    async def _apply(self, cfg: McpConfig) -> None:
        if self.hub is None:
            self.hub = await asyncio.to_thread(self._start_hub)
        await asyncio.wrap_future(self.hub.apply(cfg.enabled(), self._sandbox()))

    def _start_hub(self) -> McpHub:
        from tools.mcp.hub import McpHub

        hub = McpHub(self._changed)
        hub.start()
        return hub

    async def stop(self) -> None:
        if self.hub is not None:
            await asyncio.to_thread(self.hub.stop)

    # ---- what turns offer -----------------------------------------------------------------------------------

    def tool_names(self) -> tuple[str, ...]:
        """The MCP tools a turn beginning now offers."""
        with self._lock:
            return tuple(n for server in sorted(self._tools) for n in self._tools[server])

    def _changed(self, view: ServerView) -> None:
        """On the hub's thread: a server's tools registered while it is up, withdrawn otherwise; its condition."""
        from tools.mcp.tools import make_tools

        server = self.config.servers.get(view.name)
        with self._lock:
            for name in self._tools.pop(view.name, []):
                self.registry.unregister(name)
            if view.status == "up" and server is not None:
                taken = {n for names in self._tools.values() for n in names}
                assert self.hub is not None
                tools = make_tools(view.name, server, view.offer.tools, self.hub, taken)
                for tool in tools:
                    self.registry.register(tool, replace=True)
                self._tools[view.name] = sorted(t.name for t in tools)
        if view.status == "down":
            self.faults.begin(condition(view.name), FAULT, f"MCP server {view.name} is down: its tools are withdrawn "
                              "and it is started again with backoff", degraded=True, server=view.name)
        elif view.status in ("up", "stopped"):
            self.faults.end(condition(view.name))

    # ---- /mcp -------------------------------------------------------------------------------------------

    def views(self) -> dict[str, ServerView | None]:
        """Every configured server: its view, or None when it is disabled."""
        running = {v.name: v for v in self.hub.views()} if self.hub is not None else {}
        return {name: running.get(name) if server.enabled else None for name, server in self.config.servers.items()}

    async def reload(self) -> str:
        """Re-read ``mcp.servers`` from the config file and apply it (the rest of the file is not applied)."""
        try:
            cfg = await asyncio.to_thread(load_config, self.paths)
        except ConfigError as exc:
            return f"Not reloaded: the config has a problem: {exc}"
        old, new = self.config.servers, cfg.mcp.servers
        for server in new.values():
            for variable in [*server.env.values(), *server.headers_env.values()]:
                add_secret(_env(variable))  # masked in the log and in approval prompts from now on
        self.config = cfg.mcp
        for line in warnings(cfg.mcp):
            log.warning("mcp_warning", message=line)
        await self._apply(cfg.mcp)
        for name in set(old) - set(new):
            self.faults.end(condition(name))
        words = _changes(old, new)
        log.info("mcp_reloaded", changes=words)
        return f"Reloaded mcp.servers: {words}." if words else "Reloaded mcp.servers: nothing changed."


def _env(name: str) -> str | None:
    return os.environ.get(name)


def _changes(old: dict[str, McpServerConfig], new: dict[str, McpServerConfig]) -> str:
    added = sorted(set(new) - set(old))
    removed = sorted(set(old) - set(new))
    changed = sorted(n for n in set(old) & set(new) if old[n] != new[n])
    parts = [f"{what} {', '.join(names)}" for what, names in
             (("added", added), ("removed", removed), ("changed", changed)) if names]
    return "; ".join(parts)


def describe(name: str, server: McpServerConfig, view: ServerView | None, now: float | None = None) -> str:
    """One server's line (or lines) for /mcp."""
    now = time.time() if now is None else now
    kind = "stdio" if server.command is not None else server.transport.replace("_", " ")
    if view is None:
        return f"• {name} ({kind}): disabled"
    if view.status == "up":
        tools = [t.name for t in view.offer.tools if server.tools.allows(t.name)]
        line = f"• {name} ({kind}): up, {len(tools)} tool{'s' if len(tools) != 1 else ''}"
        line += f": {', '.join(tools[:20])}{' …' if len(tools) > 20 else ''}" if tools else ""
        for label, items in (("resources", view.offer.resources), ("prompts", view.offer.prompts)):
            if items:
                line += f"\n  {label}: {', '.join(items[:10])}{' …' if len(items) > 10 else ''}"
        return line
    if view.status == "down":
        retry = f" (next try in {max(0, round(view.retry_at - now))} s)" if view.retry_at else ""
        return f"• {name} ({kind}): down — {redact(view.error or 'unknown')}{retry}"
    return f"• {name} ({kind}): {view.status}{f' (last: {redact(view.error)})' if view.error else ''}"


def summary(service: Any) -> str:
    views = service.views()
    if not views:
        return "No MCP servers are configured (mcp.servers in config.yaml)."
    return "MCP servers:\n" + "\n".join(describe(name, service.config.servers[name], view)
                                         for name, view in views.items())
