"""Chat commands: the registry (``/name`` resolution, menus per platform, the two guards' view of what is
a command) and the built-in, conversation and model commands. Each command is a module-level handler that
gets a small dependencies object; features (approvals, cron, memory, usage, ...) register their own.

May import the kernel, storage, cluster and session; never the runner.
"""
