"""Discord's transport: discord.py's ``Client`` pointed at Discord (or a Discord-compatible API), and its errors
in the delivery layer's terms.

discord.py keeps its own rate-limit buckets: a 429 whose ``retry_after`` is within ``MAX_RATELIMIT_WAIT`` is
slept through inside discord.py (holding only that route's bucket, so other chats go on; a global limit holds
all, as Discord means it to), a longer one raises and becomes ``RateLimited`` (only that chat's lane waits).
Nothing of ours queues behind it. Missing permissions, unknown channels and messages are ``PermanentError``
(recorded by delivery, never retried), 5xx after discord.py's own retries and network trouble
``TransientError``; a connection that broke after the request may have reached Discord ``MaybeSent``. discord.py
repeats a request itself only after a 5xx answer or a reset (errno 54/10054: macOS and Windows only), and a
message carries its nonce (``enforce_nonce``), which Discord recognises for a few minutes: delivery resends within
``NONCE_WINDOW`` without a word, later ones announced. Interaction follow-ups carry no nonce.
"""

from __future__ import annotations

import hashlib
from typing import Any

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route

from gateway.platforms.base import MaybeSent, PermanentError, RateLimited, TransientError
from gateway.platforms.errors import may_have_arrived

DISCORD_API = "https://discord.com/api/v10"
DISCORD_GATEWAY = "wss://gateway.discord.gg/"
# discord.py sleeps through a 429 up to this long itself (its floor is 30 s); a longer one raises.
MAX_RATELIMIT_WAIT = 30.0
NONCE_MAX = 25  # Discord's limit on a message nonce
# How long Discord recognises a nonce it saw ("the past few minutes", its documentation says): taken short.
NONCE_WINDOW = 120.0
# Discord's JSON error codes that mean the interaction's webhook is gone (older than 15 minutes, or unknown):
# the answer goes into the channel instead.
GONE_INTERACTION = frozenset({10015, 10062})


def point_at(api_base_url: str | None, gateway_url: str | None) -> None:
    """Aim discord.py at ``api_base_url`` (REST, interaction callbacks and webhooks) and ``gateway_url``.

    discord.py reads both from class attributes, so this is process-wide: one Discord bot per process, which
    the credential lock makes true anyway. Unset means Discord itself.
    """
    Route.BASE = (api_base_url or DISCORD_API).rstrip("/")
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway_url or DISCORD_GATEWAY)


def intents() -> discord.Intents:
    """Servers (their channels, threads and roles), messages in them and in DMs, and their text."""
    chosen = discord.Intents.none()
    chosen.guilds = True
    chosen.guild_messages = True
    chosen.dm_messages = True
    chosen.message_content = True  # privileged: switch it on in the Developer Portal (Bot -> Message Content)
    return chosen


def client_options() -> dict[str, Any]:
    # The bot has no voice: discord.py's warnings that voice libraries are missing are noise at every start.
    discord.VoiceClient.warn_nacl = False
    discord.VoiceClient.warn_dave = False
    return {
        "intents": intents(),
        "max_ratelimit_timeout": MAX_RATELIMIT_WAIT,
        # No message cache: every message is handled once, as it comes; keeping 1000 of them costs memory.
        "max_messages": None,
        # Without the members intent there is nothing to chunk; members come with their messages.
        "chunk_guilds_at_startup": False,
        "member_cache_flags": discord.MemberCacheFlags.none(),
        # READY is followed by a GUILD_CREATE per server within a moment: this much silence means all are in
        # (discord.py's default, 2 s, only delays the start).
        "guild_ready_timeout": 0.5,
        # Nobody is pinged by what the agent writes; a reply still notifies the person it answers.
        "allowed_mentions": discord.AllowedMentions(everyone=False, users=False, roles=False, replied_user=True),
    }


def nonce(key: str | None, *parts: str | None) -> str | None:
    """Delivery's idempotency key as a message nonce: Discord returns the message it already made for a nonce
    it saw from the bot in the last few minutes, so a send retried after a lost answer is not shown twice.

    The key alone (``herald-<inbox id>-<chunk>``) is unique only within one database; another profile on the
    same bot would have its message swallowed. The channel, the message answered and the text go into it too.
    """
    if not key:
        return None
    digest = hashlib.sha256("\x1f".join([key, *(p or "" for p in parts)]).encode()).hexdigest()
    return digest[:NONCE_MAX]


def error_code(exc: BaseException) -> int:
    return int(getattr(exc, "code", 0) or 0)


def map_error(exc: BaseException, recognised_for: float = 0.0) -> Exception:
    """A discord.py (or aiohttp) exception -> the delivery layer's class, for ``raise ... from exc``;
    ``recognised_for``: how long Discord knows the request again if it is repeated (``MaybeSent``)."""
    if isinstance(exc, discord.RateLimited):
        return RateLimited(exc.retry_after, str(exc))
    if isinstance(exc, discord.HTTPException):
        text = f"{exc.status} (Discord code {exc.code}): {exc.text or type(exc).__name__}"
        if exc.status == 429:  # not one discord.py could wait out (Cloudflare's, without Discord's body)
            retry = exc.response.headers.get("Retry-After") if exc.response is not None else None
            return RateLimited(float(retry) if retry else 5.0, text)
        if exc.status >= 500:
            return TransientError(text)
        return PermanentError(text)  # 400 invalid form body, 403 missing permissions, 404 unknown channel
    if isinstance(exc, aiohttp.ClientError | OSError | TimeoutError):
        if may_have_arrived(exc):
            return MaybeSent(f"{type(exc).__name__}: {exc}", recognised_for)
        return TransientError(f"{type(exc).__name__}: {exc}")
    return PermanentError(f"{type(exc).__name__}: {exc}")
