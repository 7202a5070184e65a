"""The MCP servers of this daemon as the gateway runs them: the service (service.py) that starts them in the
background once the daemon is up, registers each server's tools while it is up and withdraws them while it is down,
marks a down server in ``/readyz`` (a degraded condition of the fault ledger) and re-reads ``mcp.servers`` on
``/mcp reload``; and the ``/mcp`` command (commands.py). The client, the sandboxed launch and the tools themselves are
tools/mcp/; the approval of a call goes through gateway/approvals (``TurnHook.ask_tool``). Imports the kernel, the
config, the command registry and tools/.
"""
