"""Discord inbound: a ``discord.Message`` or ``discord.Interaction`` becomes an ``InboundMessage`` or a
``ButtonPress`` (or nothing).

Where: a DM is one chat; a server channel is a group chat (per user by default, the core's rule); a thread is
the thread of its parent channel, so it is a session of its own and answers go into it. The server is the
``scope``. Server channels and threads are heard when the bot is mentioned (its user or its own role), replied
to, or addressed with a known ``/command`` typed as text; everything with ``require_mention: false``. The bot
ignores itself, other bots, webhooks and system messages. Application commands are native commands; the
member's roles travel in ``Source.roles`` for ``allowed_roles``. A MESSAGE_UPDATE with an ``edited_timestamp`` (a
person's edit, not an embed resolving) is an edit (``edit_of``). A message's files are listed in ``pending``
and downloaded into the media folder (the agent's workspace) up to ``max_media_mb`` once the inbox has the
message, before its turn (the adapter's ``download``), so only for people the gateway accepted; a stranger's
never are.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import discord
import structlog

from gateway.platforms.base import (
    ButtonPress,
    ChatType,
    CommandCall,
    Gateway,
    InboundMessage,
    Source,
    file_ref,
    parse_text_command,
)

if TYPE_CHECKING:
    from gateway.platforms.discord.config import DiscordConfig

log = structlog.get_logger("herald.discord")

_TALK = (discord.MessageType.default, discord.MessageType.reply)
MAX_FILES = 10  # Discord's own limit per message

Place = tuple[ChatType, str, str | None, str | None]  # chat type, chat id, thread id, scope (server)


class DiscordInbound:
    def __init__(self, name: str, cfg: DiscordConfig, gateway: Gateway, media_dir: Path,
                 client: Callable[[], discord.Client | None]) -> None:
        self.name = name
        self.cfg = cfg
        self.gateway = gateway
        self.media_dir = media_dir
        self._client = client
        self.bot_id = 0
        self.command_names: frozenset[str] = frozenset()  # the gateway's commands, known at start
        self._parents: OrderedDict[int, int | None] = OrderedDict()  # channel -> its thread's parent (or None)
        self._members: OrderedDict[tuple[int, int], tuple[float, tuple[str, ...]]] = OrderedDict()

    # ---- where a message was posted -----------------------------------------------------------------

    async def place(self, channel: Any, channel_id: int, guild_id: int | None) -> Place:
        if guild_id is None:
            return "dm", str(channel_id), None, None
        parent: int | None
        if isinstance(channel, discord.Thread):
            parent = channel.parent_id
        elif isinstance(channel, discord.abc.GuildChannel):
            parent = None
        else:  # not in discord.py's cache (a thread it was not told about): ask Discord once
            parent = await self._parent_of(channel_id)
        if parent is not None:
            return "group", str(parent), str(channel_id), str(guild_id)
        return "group", str(channel_id), None, str(guild_id)

    async def _parent_of(self, channel_id: int) -> int | None:
        if channel_id in self._parents:
            return self._parents[channel_id]
        client = self._client()
        parent = None
        if client is not None:
            try:
                fetched = await client.fetch_channel(channel_id)
                parent = fetched.parent_id if isinstance(fetched, discord.Thread) else None
            except discord.HTTPException as exc:
                log.info("discord_channel_unknown", channel_id=channel_id, error=str(exc))
        self._parents[channel_id] = parent
        while len(self._parents) > 10_000:
            self._parents.popitem(last=False)
        return parent

    async def roles(self, user: Any, guild: discord.Guild | None) -> tuple[str, ...]:
        """The sender's roles in ``guild`` (without @everyone); looked up only where ``allowed_roles`` needs it."""
        if guild is None:
            return ()
        if isinstance(user, discord.Member):
            return tuple(str(r.id) for r in user.roles if not r.is_default())
        if not self.cfg.allowed_roles:
            return ()
        # A message read back from a channel's history comes without its author's roles.
        key = (guild.id, user.id)
        cached = self._members.get(key)
        if cached is not None and time.monotonic() - cached[0] < 60:
            return cached[1]
        try:
            member = await guild.fetch_member(user.id)
            roles = tuple(str(r.id) for r in member.roles if not r.is_default())
        except discord.HTTPException as exc:
            log.info("discord_member_unknown", user_id=user.id, error=str(exc))
            roles = ()
        self._members[key] = (time.monotonic(), roles)
        while len(self._members) > 10_000:
            self._members.popitem(last=False)
        return roles

    # ---- messages ------------------------------------------------------------------------------------

    def ignored(self, message: discord.Message) -> bool:
        """Not for the agent whatever it says: the bot itself, other bots, webhooks, system messages."""
        return (message.author.bot or message.author.id == self.bot_id or message.webhook_id is not None
                or message.type not in _TALK)

    def addressed(self, message: discord.Message) -> bool:
        """In a server: mentions the bot (or its role), replies to it, or is a known command typed as text."""
        if not self.cfg.require_mention or self.bot_id in message.raw_mentions:
            return True
        me = message.guild.self_role if message.guild is not None else None
        if me is not None and me.id in message.raw_role_mentions:
            return True
        resolved = message.reference.resolved if message.reference is not None else None
        if isinstance(resolved, discord.Message) and resolved.author.id == self.bot_id:
            return True
        parsed = parse_text_command(message.content)
        return parsed is not None and parsed[1] is None and parsed[0].name in self.command_names

    def _strip_mention(self, text: str, message: discord.Message) -> str:
        """A leading mention of the bot goes; one further in reads as its name."""
        me = message.guild.self_role if message.guild is not None else None
        tokens = [f"<@{self.bot_id}>", f"<@!{self.bot_id}>"] + ([f"<@&{me.id}>"] if me is not None else [])
        stripped = text.lstrip()
        for token in tokens:
            if stripped.startswith(token):
                stripped = stripped[len(token):].lstrip(" ,:")
                break
        client = self._client()
        name = client.user.display_name if client is not None and client.user is not None else "Herald"
        for token in tokens:
            stripped = stripped.replace(token, f"@{name}")
        return stripped

    async def normalise(self, message: discord.Message) -> InboundMessage | None:
        if self.ignored(message):
            return None
        guild = message.guild
        if guild is not None and not self.addressed(message):
            return None
        chat_type, chat_id, thread_id, scope = await self.place(message.channel, message.channel.id,
                                                                guild.id if guild is not None else None)
        text = self._strip_mention(message.content, message)
        command = None
        parsed = parse_text_command(text)
        if parsed is not None and parsed[1] is None:
            command = parsed[0]
        author = message.author
        source = Source(platform=self.name, chat_id=chat_id, user_id=str(author.id), chat_type=chat_type,
                        thread_id=thread_id, user_name=author.display_name, scope=scope,
                        roles=await self.roles(author, guild))
        notes = [f"[The user sent a sticker: {s.name}.]" for s in message.stickers]
        if notes:
            text = "\n".join([text, *notes]) if text else "\n".join(notes)
        # Each with its attachment id: two files of one message may share a name (two pasted image.png).
        files = [file_ref(a.filename, size=a.size, url=a.url, id=str(a.id)) for a in message.attachments[:MAX_FILES]]
        if not text.strip() and not files:
            return None
        reply_to = None
        if message.reference is not None and message.reference.message_id is not None:
            reply_to = str(message.reference.message_id)
        return InboundMessage(source=source, text=text, platform_message_id=str(message.id), reply_to=reply_to,
                              received_at=time.time(), command=command,
                              pending={"files": files} if files else None)

    async def edit(self, message: discord.Message, edited_at: str) -> InboundMessage | None:
        """A person edited ``message``: taken like a message (the same rules on who and where), as an edit of it
        named by the edit's time. Its files were fetched already; an edited command is not run again."""
        msg = await self.normalise(message)
        if msg is None:
            return None
        msg.edit_of, msg.platform_message_id = msg.platform_message_id, f"{msg.platform_message_id}@{edited_at}"
        msg.command, msg.pending = None, None
        return msg

    # ---- interactions --------------------------------------------------------------------------------

    async def _source(self, interaction: discord.Interaction) -> Source:
        channel_id = interaction.channel_id or 0
        chat_type, chat_id, thread_id, scope = await self.place(interaction.channel, channel_id,
                                                                interaction.guild_id)
        user = interaction.user
        return Source(platform=self.name, chat_id=chat_id, user_id=str(user.id), chat_type=chat_type,
                      thread_id=thread_id, user_name=user.display_name, scope=scope,
                      roles=await self.roles(user, interaction.guild))

    async def command(self, interaction: discord.Interaction, handle: dict[str, Any]) -> InboundMessage:
        """An application command: a native command (an unknown name is answered, not given to the model)."""
        data: dict[str, Any] = interaction.data or {}  # type: ignore[assignment]
        name = str(data.get("name", "")).lower()
        args = " ".join(str(o.get("value", "")) for o in data.get("options") or [] if o.get("name") == "args")
        return InboundMessage(source=await self._source(interaction), text=f"/{name} {args}".strip(),
                              platform_message_id=f"i{interaction.id}", received_at=time.time(),
                              command=CommandCall(name, args.strip(), native=True), reply_handle=handle)

    async def press(self, interaction: discord.Interaction, handle: dict[str, Any]) -> ButtonPress:
        data: dict[str, Any] = interaction.data or {}  # type: ignore[assignment]
        message = interaction.message
        return ButtonPress(source=await self._source(interaction), button_id=str(data.get("custom_id", "")),
                           message_id=str(message.id) if message is not None else None, reply_handle=handle)
