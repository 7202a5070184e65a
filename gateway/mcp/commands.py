"""``/mcp``: the MCP servers, their state and what they offer; ``/mcp reload`` (admins): ``mcp.servers`` re-read
from the config file without a restart (servers added start, removed ones stop, changed ones restart; running turns
and the other servers are left alone)."""

from __future__ import annotations

from gateway.commands.registry import CommandContext, CommandSet
from gateway.mcp.service import McpService, summary

MCP_COMMANDS: CommandSet[McpService] = CommandSet()


@MCP_COMMANDS.command("mcp", "MCP servers: their state and tools (/mcp reload: re-read the config, admins)",
                      args_hint="[reload]")
async def mcp(service: McpService, ctx: CommandContext) -> str:
    word = ctx.args.strip().lower()
    if word == "reload":
        if not ctx.admin:
            return "Only an admin can reload the MCP servers."
        return await service.reload()
    if word:
        return "Usage: /mcp, or /mcp reload (admins)."
    return summary(service)
