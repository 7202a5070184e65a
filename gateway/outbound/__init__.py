"""Outbound: delivery (render, chunk, send in order per chat, retry rate limits and outages without
blocking other chats, record every chunk in the outbox), pacing per chat, and streaming (live edits,
progress and verbose tool lines).

May import the kernel, storage, cluster and commands; never inbound, turns or the runner.
"""
