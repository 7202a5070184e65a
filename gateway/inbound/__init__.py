"""Inbound: the path of a message from the adapter to its session's lane. ``accept`` (access check,
de-duplication, the durable inbox row), ``dispatch`` (control commands go inline even to a busy session,
everything else joins the session's FIFO lane), access rules, pairing of strangers, routing of a session's
work to the instance that owns it, recovery of unfinished work after a restart, and the supervisor that
keeps adapters connected under their credential locks.

May import the kernel, storage, cluster, commands, turns (the lanes) and outbound; never the runner.
"""
