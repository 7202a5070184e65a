"""Tool registry: built-in modules register themselves with the ``@tool`` decorator on import."""

from __future__ import annotations

import importlib
import json
import logging
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tools.config import ToolsConfig
from tools.sandbox import SandboxPolicy

log = logging.getLogger(__name__)

BUILTIN_MODULES = ("tools.terminal", "tools.files", "tools.cronjob", "tools.memory", "tools.clarify",
                   "tools.send_message", "tools.online", "tools.sendfile")


def always(_config: ToolsConfig) -> bool:
    return True


@dataclass
class ToolContext:
    session_key: str
    cwd: str
    interrupt: threading.Event
    config: ToolsConfig
    # Hooks the gateway or agent attach (``on_activity``, approval, ...).
    extras: dict[str, Any] = field(default_factory=dict)
    # What commands and the file tools may see and touch (tools/sandbox.py); None = built from ``config``
    # with the default hidden paths and ``cwd`` as the workspace.
    sandbox: SandboxPolicy | None = None
    # Tools this turn offers beyond the agent's own list, fixed when the turn begins (the MCP servers' tools that
    # are up then: tools/mcp/).
    extra_tools: tuple[str, ...] = ()

    def heartbeat(self, what: str) -> None:
        """Tell the turn's watchdog a long-running tool is still alive."""
        fn = self.extras.get("on_activity")
        if fn is not None:
            try:
                fn(what)
            except Exception:
                log.exception("on_activity callback failed")


Handler = Callable[[dict[str, Any], ToolContext], Any]


@dataclass
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    handler: Handler
    toolset: str = "core"
    max_result_chars: int | None = None
    check_enabled: Callable[[ToolsConfig], bool] = always
    # Called for every call of a multi-call batch before the first runs (e.g. to ask for all approvals
    # at once), and ``finish`` once the batch is over, however it ended.
    prepare: Callable[[dict[str, Any], ToolContext], None] | None = None
    finish: Callable[[ToolContext], None] | None = None
    # Why check_enabled says no, in words for the model (None: "disabled in the configuration").
    disabled_reason: Callable[[ToolsConfig], str | None] | None = None
    # The progress line a chat shows while a call runs ("running `ls -la`…"), markdown, from the call's
    # arguments (``code`` and ``short`` help); None: "using <name>".
    progress: Callable[[dict[str, Any]], str] | None = None

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def short(text: Any, limit: int = 80) -> str:
    """``text`` on one line, at most ``limit`` characters (cut with "…")."""
    one = " ".join(str(text).split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def code(text: Any, limit: int = 80) -> str:
    """``short(text)`` as a markdown code span, fenced with more backticks than it contains."""
    one = short(text, limit)
    fence = "`" * (max((len(r) for r in re.findall(r"`+", one)), default=0) + 1)
    pad = " " if one.startswith("`") or one.endswith("`") else ""
    return f"{fence}{pad}{one}{pad}{fence}"


def error(message: str, **fields: Any) -> str:
    return json.dumps({"error": message, **fields}, ensure_ascii=False)


class ToolRegistry:
    def __init__(self, base: ToolRegistry | None = None) -> None:
        """``base``: a registry whose tools this one offers too, under its own (a daemon's MCP tools over the
        built-in ones: several daemons may share a process, each with its own servers)."""
        self._base = base
        # Replaced, never changed in place: tools come and go (MCP servers) while turns read the registry.
        self._tools: dict[str, Tool] = {}
        self._lock = threading.Lock()
        self._version = 0
        self._schema_cache: dict[tuple[tuple[int, ...], tuple[str, ...]], list[dict[str, Any]]] = {}

    def _stamp(self) -> tuple[int, ...]:
        """Changes whenever this registry or its base does (the schema cache's validity)."""
        return (self._version, *(self._base._stamp() if self._base is not None else ()))

    def _all(self) -> dict[str, Tool]:
        return {**self._base._all(), **self._tools} if self._base is not None else self._tools

    def register(self, tool: Tool, *, replace: bool = False) -> Tool:
        with self._lock:
            if tool.name in self._tools and not replace:
                raise ValueError(f"tool {tool.name!r} is already registered")
            self._tools = {**self._tools, tool.name: tool}
            self._version += 1
            self._schema_cache = {}
        return tool

    def unregister(self, name: str) -> None:
        with self._lock:
            if name in self._tools:
                self._tools = {n: t for n, t in self._tools.items() if n != name}
                self._version += 1
                self._schema_cache = {}

    def get(self, name: str) -> Tool | None:
        tool = self._tools.get(name)
        return tool if tool is not None or self._base is None else self._base.get(name)

    def __contains__(self, name: object) -> bool:
        return self.get(name) is not None if isinstance(name, str) else False

    def names(self, config: ToolsConfig, toolsets: Iterable[str] | None = None) -> list[str]:
        wanted = set(toolsets) if toolsets is not None else None
        return sorted(
            t.name for t in self._all().values() if (wanted is None or t.toolset in wanted) and t.check_enabled(config)
        )

    def schemas(self, names: Iterable[str]) -> list[dict[str, Any]]:
        """OpenAI ``tools`` list, cached per name tuple. Shared: callers must not mutate it."""
        names = tuple(names)
        key = (self._stamp(), names)
        cache = self._schema_cache
        cached = cache.get(key)
        if cached is None:
            found = [self.get(n) for n in names]
            cached = [t.schema() for t in found if t is not None]
            cache[key] = cached
        return cached

    def dispatch(self, name: str, args: dict[str, Any], ctx: ToolContext) -> str:
        """Run a tool; always returns a JSON string, never raises for tool failures."""
        tool = self.get(name)
        if tool is None:
            return error(f"unknown tool: {name}", available=self.names(ctx.config))
        # Checked again here, not only when building the schema list, so that a model naming a
        # disabled tool (e.g. terminal) cannot run it.
        if not tool.check_enabled(ctx.config):
            reason = tool.disabled_reason(ctx.config) if tool.disabled_reason else None
            return error(reason or f"tool {name} is disabled in the configuration")
        if not isinstance(args, dict):
            return error("tool arguments must be a JSON object")
        missing = [p for p in tool.parameters.get("required", ()) if p not in args]
        if missing:
            return error(f"missing required argument(s): {', '.join(missing)}")
        try:
            result = tool.handler(args, ctx)
        except Exception as exc:
            log.warning("tool failed", extra={"tool": name, "session_key": ctx.session_key}, exc_info=True)
            return error(f"{type(exc).__name__}: {exc}")
        if not isinstance(result, str):
            result = json.dumps(result, ensure_ascii=False, default=str)
        limit = tool.max_result_chars or ctx.config.max_result_chars
        if len(result) > limit:
            # Wrapped rather than cut, so the result stays valid JSON and says what happened.
            result = json.dumps(
                {
                    "truncated": True,
                    "note": f"result was {len(result)} chars; only the first {limit} are shown",
                    "content": result[:limit],
                },
                ensure_ascii=False,
            )
        return result


    def prepare_batch(self, calls: list[tuple[str, dict[str, Any]]], ctx: ToolContext) -> None:
        for name, args in calls:
            tool = self.get(name)
            if tool is None or tool.prepare is None or not isinstance(args, dict) or not tool.check_enabled(ctx.config):
                continue
            try:
                tool.prepare(args, ctx)
            except Exception:
                # Preparing is an optimisation; the call itself still runs (and reports) normally.
                log.warning("tool prepare failed", extra={"tool": name, "session_key": ctx.session_key}, exc_info=True)

    def finish_batch(self, names: Iterable[str], ctx: ToolContext) -> None:
        for name in dict.fromkeys(names):
            tool = self.get(name)
            if tool is None or tool.finish is None:
                continue
            try:
                tool.finish(ctx)
            except Exception:
                log.warning("tool finish failed", extra={"tool": name, "session_key": ctx.session_key}, exc_info=True)


registry = ToolRegistry()


def tool(
    name: str,
    description: str,
    parameters: dict[str, Any],
    *,
    toolset: str = "core",
    max_result_chars: int | None = None,
    check_enabled: Callable[[ToolsConfig], bool] = always,
    target: ToolRegistry | None = None,
    prepare: Callable[[dict[str, Any], ToolContext], None] | None = None,
    finish: Callable[[ToolContext], None] | None = None,
    disabled_reason: Callable[[ToolsConfig], str | None] | None = None,
    progress: Callable[[dict[str, Any]], str] | None = None,
) -> Callable[[Handler], Handler]:
    def decorate(fn: Handler) -> Handler:
        (target or registry).register(Tool(name, description, parameters, fn, toolset, max_result_chars, check_enabled,
                                           prepare, finish, disabled_reason, progress))
        return fn

    return decorate


def load_builtin_tools() -> ToolRegistry:
    for module in BUILTIN_MODULES:
        importlib.import_module(module)
    return registry
