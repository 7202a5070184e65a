"""MCP servers as the agent's tools, on the official ``mcp`` SDK: the config models (``mcp.servers.<name>``), the
launch of a stdio server inside the same bubblewrap sandbox as the terminal's commands (launch.py, spawn.py), the
address rules for HTTP servers (http.py), one connection per server kept up by a hub on a thread of its own
(client.py, hub.py), and the registry tools that validate a call, ask the approval gate and convert the result
(convert.py, tools.py). Like the rest of tools/, nothing here imports the gateway: the gateway hands in the
sandbox policy, the approval hook (``ToolContext.extras["approve"]``) and what to do when a server comes or goes.
"""
