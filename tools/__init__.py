"""The agent's tools: the registry (schemas, enablement, dispatch), the built-in tools (terminal, read_file,
write_file, memory, cronjob), the bubblewrap sandbox every command runs in, and the command classifier
(``dangerous`` over ``shell/``: it parses a command and decides run, ask or refuse).

Imports nothing of ``gateway`` or ``cron``: the daemon hands tools what they need through ``ToolContext``.
"""
