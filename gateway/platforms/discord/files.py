"""Discord's files out: a message with the file attached (multipart), the caption as its content, under the
same nonce scheme as messages (``enforce_nonce``: a send retried after a lost answer is shown once). How
large a file may be depends on where it goes: a server's boost level (its ``premium_tier``, read from the
API and kept ten minutes), or Discord's default in a DM."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import discord
from discord.http import handle_message_parameters
from discord.utils import DEFAULT_FILE_SIZE_LIMIT_BYTES, MISSING

from gateway.platforms.base import Attachment, OutboundMessage, TransientError
from gateway.platforms.discord.transport import map_error, nonce

LIMIT_TTL = 600.0
CAPTION_MAX = 2000


class DiscordFiles:
    def __init__(self, client: Callable[[], discord.Client | None], render: Callable[[str], str],
                 mentions: discord.AllowedMentions) -> None:
        self._get_client = client
        self._render = render
        self._mentions = mentions
        self._tiers: dict[int, tuple[float, int]] = {}  # guild id -> (read at, bytes)

    def _client(self) -> discord.Client:
        client = self._get_client()
        if client is None or client.is_closed():
            raise TransientError("discord is not connected right now")
        return client

    async def send(self, chat_id: str, att: Attachment, message: OutboundMessage, key: str | None) -> list[str]:
        target = message.thread_id or chat_id
        client = self._client()
        caption = self._render(att.caption)[:CAPTION_MAX] if att.caption else None
        try:
            upload = discord.File(att.path, filename=att.filename)
            with handle_message_parameters(content=caption or MISSING, file=upload,
                                           nonce=nonce(key, target, att.filename, caption),
                                           allowed_mentions=self._mentions) as params:
                data = await client.http.send_message(int(target), params=params)
        except Exception as exc:
            raise map_error(exc) from exc
        return [str(data["id"])]

    async def limit(self, chat_id: str) -> int:
        client = self._client()
        try:
            channel: Any = client.get_channel(int(chat_id)) or await client.fetch_channel(int(chat_id))
        except Exception as exc:
            raise map_error(exc) from exc
        guild_id = getattr(channel, "guild_id", None) or getattr(getattr(channel, "guild", None), "id", None)
        if guild_id is None:
            return DEFAULT_FILE_SIZE_LIMIT_BYTES  # a DM
        known = self._tiers.get(guild_id)
        if known is not None and time.monotonic() - known[0] < LIMIT_TTL:
            return known[1]
        try:
            data = await client.http.get_guild(guild_id)
        except Exception as exc:
            raise map_error(exc) from exc
        tier = int(data.get("premium_tier") or 0)
        limits = discord.Guild._PREMIUM_GUILD_LIMITS  # discord.py's table of what each boost level allows
        size = int(limits.get(tier, limits[0]).filesize)
        self._tiers[guild_id] = (time.monotonic(), size)
        return size
