"""Session keys: which conversation a message belongs to."""

from __future__ import annotations

from gateway.platforms.base import Source


def session_key(source: Source, per_user_in_groups: bool = True) -> str:
    """platform + chat (+ thread), plus the user in group chats so that people don't share a context."""
    parts = [source.platform, source.chat_type, source.chat_id]
    if source.thread_id:
        parts.append(f"t{source.thread_id}")
    if source.chat_type != "dm" and per_user_in_groups:
        parts.append(f"u{source.user_id}")
    return ":".join(parts)
