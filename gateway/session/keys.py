"""Session keys: which conversation a message belongs to.

``platform[:s<scope>]:chat_type:chat_id[:t<thread_id>][:u<user_id>]``, every id percent-encoded, so ids
may contain any character (``:`` and ``/`` included) without two conversations sharing a key.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

from gateway.platforms.base import Source


def encode_id(value: str) -> str:
    return quote(value, safe="")


def session_key(source: Source, per_user_in_groups: bool = True) -> str:
    """platform + chat (+ thread), plus the user in group chats so that people don't share a context."""
    parts = [source.platform]
    if source.scope:
        parts.append("s" + encode_id(source.scope))
    parts += [source.chat_type, encode_id(source.chat_id)]
    if source.thread_id:
        parts.append("t" + encode_id(source.thread_id))
    if source.chat_type != "dm" and per_user_in_groups:
        parts.append("u" + encode_id(source.user_id))
    return ":".join(parts)


def person_id(source: Source) -> str:
    """The sender as ``sessions.user_id`` records them: their id, inside their scope (a Slack workspace)
    where the platform has one; encoded like keys, so the two forms never meet."""
    user = encode_id(source.user_id)
    return f"{encode_id(source.scope)}:{user}" if source.scope else user


def session_owner(source: Source, per_user_in_groups: bool = True) -> str | None:
    """The person whose conversation ``source``'s session is (the sender of a DM, or of a group message
    when each member has their own session); None when people share it."""
    return person_id(source) if source.chat_type == "dm" or per_user_in_groups else None


def chat_of(key: str) -> str:
    """The chat id ``key`` was made of (``session_key``'s chat part, decoded)."""
    parts = key.split(":")
    rest = parts[2:] if len(parts) > 2 and parts[1].startswith("s") else parts[1:]
    return unquote(rest[1]) if len(rest) > 1 else ""
