"""A server's tools as registry tools (tools/registry.py): ``mcp_<server>_<tool>``, the server's own schema.

A call is checked against the schema first (a mismatch is answered with the error and never sent), then put to the
approval gate: the turn's ``extras["approve"]`` hook (the gateway's) gets an ``Ask`` — server, tool and the whole
arguments — for every call, so every call is recorded, and it asks a person when the server's ``approve`` says so:
``always``; ``dangerous`` (the default) for a tool the server does not mark read-only (``readOnlyHint``); never for
``never``. Without a hook nobody can approve: a call that needs approval is not run.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import structlog
from mcp.shared.exceptions import MCPError

from tools.mcp.client import ToolInfo
from tools.mcp.config import McpServerConfig
from tools.mcp.convert import checker, description, result_text, tool_name, validation_error
from tools.mcp.hub import CallFailed, Interrupted, McpHub
from tools.registry import Tool, ToolContext, code, error
from tools.sandbox import context_policy

log = structlog.get_logger("herald.mcp")

TOOLSET = "mcp"


@dataclass(frozen=True)
class Ask:
    """One MCP call put to the approval gate."""

    server: str
    tool: str
    arguments: dict[str, Any]
    needs_approval: bool
    reason: str

    @property
    def key(self) -> str:
        """What a session or always grant covers: this server, this tool, these very arguments."""
        canonical = json.dumps([self.server, self.tool, self.arguments], sort_keys=True, ensure_ascii=False,
                               separators=(",", ":"))
        return "mcp:" + hashlib.sha256(canonical.encode()).hexdigest()

    def text(self) -> str:
        """What the person reads: server, tool and every argument."""
        return (f"server: {self.server}\ntool: {self.tool}\narguments:\n"
                f"{json.dumps(self.arguments, indent=2, ensure_ascii=False, sort_keys=True)}")


class Gate(Protocol):
    def ask_tool(self, ask: Ask, ctx: ToolContext) -> Any: ...


def needs_approval(server: McpServerConfig, info: ToolInfo) -> tuple[bool, str]:
    if server.approve == "always":
        return True, "the server's entry says approve: always"
    if server.approve == "never":
        return False, "the server's entry says approve: never"
    if info.read_only:
        return False, "the server marks this tool read-only"
    return True, "the server does not mark this tool read-only"


def _decide(ask: Ask, ctx: ToolContext) -> tuple[bool, str | None, dict[str, Any] | None]:
    """(may run, what the approval said, the refusal to return)."""
    hook = ctx.extras.get("approve")
    if hook is not None and hasattr(hook, "ask_tool"):
        decision = hook.ask_tool(ask, ctx)
        if not decision.approved:
            return False, None, {"status": decision.outcome, "error": decision.message}
        return True, decision.message if ask.needs_approval else None, None
    if ask.needs_approval:
        return False, None, {"status": "denied", "error": "Not run: this MCP tool needs approval "
                                                          f"({ask.reason}) and nobody can approve it here."}
    return True, None, None


def make_tools(server: str, cfg: McpServerConfig, offered: tuple[ToolInfo, ...], hub: McpHub,
               taken: set[str]) -> list[Tool]:
    """The registry tools for what ``server`` offers now, those its ``tools`` filter lets through and whose schema
    is valid JSON Schema; ``taken`` names already used (grows)."""
    out = []
    for info in offered:
        if not cfg.tools.allows(info.name):
            continue
        check = checker(info.input_schema)
        if check is None:
            log.warning("mcp_tool_skipped", server=server, tool=info.name,
                        reason="its input schema is not valid JSON Schema")
            continue
        name = tool_name(server, info.name, taken)
        taken.add(name)
        out.append(Tool(name, description(server, info.description, info.read_only), info.input_schema,
                        _handler(server, cfg, info, hub, check), toolset=TOOLSET,
                        max_result_chars=cfg.max_result_chars,
                        progress=lambda args, s=server, t=info.name: f"using {code(t)} of MCP server {code(s)}…"))
    return out


def _handler(server: str, cfg: McpServerConfig, info: ToolInfo, hub: McpHub, check: Any) -> Callable[..., str]:
    def handle(args: dict[str, Any], ctx: ToolContext) -> str:
        wrong = validation_error(check, args)
        if wrong is not None:
            _audit(server, info.name, ctx, "invalid", 0.0)
            return error(f"the arguments do not match the tool's schema, so the call was not sent: {wrong}")
        needed, why = needs_approval(cfg, info)
        ask = Ask(server, info.name, args, needed, why)
        allowed, approval, refusal = _decide(ask, ctx)
        if not allowed:
            _audit(server, info.name, ctx, refusal["status"] if refusal else "denied", 0.0)
            return json.dumps(refusal, ensure_ascii=False)
        started = time.monotonic()
        try:
            result = hub.call(server, info.name, args, cfg.timeout_seconds, ctx.interrupt, ctx.heartbeat)
        except CallFailed as exc:
            _audit(server, info.name, ctx, "failed", time.monotonic() - started)
            return error(str(exc), server=server)
        except Interrupted:
            _audit(server, info.name, ctx, "interrupted", time.monotonic() - started)
            return error("the turn was stopped while the MCP call ran; its outcome is unknown", server=server)
        except MCPError as exc:
            _audit(server, info.name, ctx, "error", time.monotonic() - started)
            return error(f"the MCP server {server} answered with an error: {exc}", server=server)
        _audit(server, info.name, ctx, "error" if getattr(result, "is_error", False) else "ok",
               time.monotonic() - started)
        limit = cfg.max_result_chars or ctx.config.max_result_chars
        try:
            policy = context_policy(ctx)
        except Exception:  # a context without a usable config: images are then not kept
            policy = None
        text = result_text(result, server, policy, limit)
        if approval is not None:
            loaded = json.loads(text)
            text = json.dumps({"approval": approval, **loaded}, ensure_ascii=False)
        return text

    return handle


def _audit(server: str, tool: str, ctx: ToolContext, outcome: str, seconds: float) -> None:
    log.info("mcp_call", server=server, tool=tool, outcome=outcome, seconds=round(seconds, 3),
             session_key=ctx.session_key)
