"""Turns: what happens between a message leaving its lane and the answer going out. The lanes (one turn
at a time per session, FIFO), the executor (the synchronous agent loop in a bounded thread pool, its steps
journaled so a recovered turn never repeats a command), the agent factory, context compression, memory,
token usage, and the tools' sandbox set-up.

May import the kernel, storage, cluster, commands, session and outbound; never inbound or the runner.
"""
