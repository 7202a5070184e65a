"""Starting a stdio MCP server inside the sandbox the terminal's commands run in (tools/sandbox.py).

The server sees what a command sees: the workspace (read-write, also ``$HOME``), the rest of the filesystem
read-only with Herald's home, the daemon user's home, credentials and runtime sockets hidden, a ``/proc`` of its own
PID namespace (never the daemon's environment), its own ``/tmp``; its network only through the sandbox's proxy.
Its environment is an allowlist: PATH, locale, HOME, the proxy, and only the variables its ``env`` names (values
read from the daemon's environment). Its own process cap and memory limit; no CPU-time limit (it runs for as long as
the daemon). The first program is tools/mcp/launch.py, which ties its life to the daemon's.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from mcp.client.stdio import StdioServerParameters

from tools import limits, processes
from tools.mcp.config import McpServerConfig
from tools.mcp.launch import SPEC
from tools.sandbox import (
    SandboxPolicy,
    SandboxUnavailable,
    child_env,
    command_parts,
    find_bwrap,
    resolve_mode,
    workspace_dir,
)

LAUNCHER = str(Path(__file__).with_name("launch.py"))


class NotStartable(Exception):
    """The server cannot be started as configured here (no sandbox, a variable not set); ``str()`` says why."""


def server_policy(server: McpServerConfig, base: SandboxPolicy) -> SandboxPolicy:
    """The terminal's policy (hidden paths, workspace, proxy) with the server's own sandbox mode, network, process
    cap and limits. ``NotStartable`` when the sandbox it asks for cannot run here."""
    if server.sandbox == "none":
        mode = "none"
    else:
        mode, problem = resolve_mode("bwrap")
        if mode != "bwrap":
            raise NotStartable(f"{problem}; or set sandbox: none for this server to run it unsandboxed")
    bwrap = find_bwrap() or "bwrap"
    network = server.network and base.network
    scope = limits.memory_scope() if server.max_memory_mb else None
    return replace(
        base, mode=mode, env_passthrough=(), network=network,
        egress=base.egress if network and mode == "bwrap" else None,
        bridge=base.bridge if network and mode == "bwrap" else None,
        max_processes=server.max_processes, nproc_scope=processes.scope(mode, bwrap),
        limits=replace(base.limits, cpu_seconds=0, workspace_mb=0, memory_mb=server.max_memory_mb,
                       memory_scope=scope),
    )


def server_env(server: McpServerConfig, environ: os._Environ[str] | dict[str, str] | None = None) -> dict[str, str]:
    """The variables ``env`` hands the server, read from the daemon's environment; ``NotStartable`` naming one
    that is not set."""
    source = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for key, variable in server.env.items():
        value = source.get(variable)
        if value is None:
            raise NotStartable(f"env.{key}: the environment variable {variable} is not set")
        out[key[: -len("_env")]] = value
    return out


def stdio_parameters(server: McpServerConfig, base: SandboxPolicy) -> StdioServerParameters:
    """What the SDK's stdio transport starts: the launcher, which becomes bwrap (or the server's parent). Blocks
    briefly (the process cap may read /proc): call it off the event loop."""
    policy = server_policy(server, base)
    assert server.command is not None
    try:
        cwd = workspace_dir(policy)
        head, options, inner = command_parts("exec " + shlex.join([server.command, *server.args]), policy)
    except (SandboxUnavailable, FileNotFoundError) as exc:
        raise NotStartable(str(exc)) from None
    env = {**child_env(policy), **server_env(server)}
    env[SPEC] = _spec(head, options, inner)
    return StdioServerParameters(command=sys.executable, args=["-I", "-S", LAUNCHER], env=env, cwd=cwd,
                                 encoding_error_handler="replace")


def _spec(head: list[str], options: list[str] | None, inner: list[str]) -> str:
    import json

    return json.dumps({"head": head, "options": options, "inner": inner, "parent": os.getpid()})
