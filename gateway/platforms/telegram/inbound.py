"""Telegram inbound: an ``Update`` becomes an ``InboundMessage`` or a ``ButtonPress`` (or nothing).

An ``edited_message`` is an ``InboundMessage`` with ``edit_of`` (the gateway decides what an edit does); its id is
the message's with the update's, so Telegram handing it out again is the same edit.

DMs, groups (when the bot is mentioned, replied to, or addressed with ``/cmd@ThisBot``; everything with
``require_mention: false``) and forum topics (the topic is the thread). ``/name args`` fills
``InboundMessage.command`` by syntax; whether ``name`` is a command is the gateway's call (an unknown name is
prose for the model). Photos, documents, voice notes, audio and video are listed in ``pending`` and
downloaded to the media folder after the update is confirmed, before the turn (the adapter's ``download``),
so only for people the gateway accepted; a stranger's never are. The messages of an album (a media group)
carry its id in ``pending["album"]``: the lane makes them one turn.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from gateway.platforms.base import ButtonPress, Gateway, InboundMessage, Source, file_ref, parse_text_command

if TYPE_CHECKING:
    from telegram import Bot, Message, Update

    from gateway.platforms.telegram.config import TelegramConfig

log = structlog.get_logger("herald.telegram")

# Content a person can send that we don't open: the agent gets a short note instead.
_UNSUPPORTED = ("sticker", "poll", "location", "venue", "contact", "dice", "game", "animation", "video_note",
                "story", "invoice")


class TelegramInbound:
    def __init__(self, name: str, cfg: TelegramConfig, gateway: Gateway, media_dir: Path,
                 bot: Callable[[], Bot | None]) -> None:
        self.name = name
        self.cfg = cfg
        self.gateway = gateway
        self.media_dir = media_dir
        self._bot = bot
        self.username = ""
        self.bot_id: int | None = None
        self.command_names: frozenset[str] = frozenset()  # the gateway's commands here, known at start

    async def normalise(self, update: Update) -> InboundMessage | ButtonPress | None:
        if update.callback_query is not None:
            return self.press(update)
        msg = update.message or update.edited_message
        if msg is None or msg.from_user is None or msg.from_user.is_bot:
            return None
        chat = msg.chat
        if chat.type == "private":
            chat_type = "dm"
        elif chat.type in ("group", "supergroup"):
            chat_type = "group"
        else:
            return None
        text = msg.text or msg.caption or ""
        if chat_type == "group" and not self._addressed(msg):
            return None
        text = self._strip_mention(text)
        edited = update.message is None
        parsed = parse_text_command(text) if not edited else None  # an edited command is not run again
        if parsed is not None:
            call, addressee = parsed
            if addressee is not None and addressee.lower() != self.username.lower():
                return None  # /cmd@OtherBot
            command: Any = call
        else:
            command = None
        user = msg.from_user
        source = Source(
            platform=self.name, chat_id=str(chat.id), user_id=str(user.id), chat_type=chat_type,
            thread_id=str(msg.message_thread_id) if msg.is_topic_message and msg.message_thread_id else None,
            user_name=user.username or user.full_name,
        )
        note, media = self._media(msg)
        if note:
            text = f"{text}\n{note}" if text else note
        if not text.strip() and media is None:
            return None  # service messages (joins, pins, topic edits)
        reply_to = None
        if msg.reply_to_message is not None and not msg.reply_to_message.forum_topic_created:
            reply_to = f"{chat.id}/{msg.reply_to_message.message_id}"
        message_id = f"{chat.id}/{msg.message_id}"
        if edited:  # the edit's own id: the message and its update (handed out again, the update keeps its id;
            # edit_date has whole seconds, too coarse for two quick edits)
            return InboundMessage(source=source, text=text, platform_message_id=f"{message_id}@{update.update_id}",
                                  reply_to=reply_to, received_at=time.time(), edit_of=message_id)
        pending: dict[str, Any] | None = {"files": [media]} if media is not None else None
        if pending is not None and msg.media_group_id:
            # One of an album's messages: the lane gathers the others into the same turn.
            pending["album"] = f"{chat.id}/{msg.media_group_id}"
        return InboundMessage(source=source, text=text, platform_message_id=message_id,
                              reply_to=reply_to, received_at=time.time(), command=command, pending=pending)

    def _addressed(self, msg: Message) -> bool:
        """In a group: mentions the bot, replies to it, or is a command (``/cmd`` or ``/cmd@ThisBot``)."""
        text = msg.text or msg.caption or ""
        parsed = parse_text_command(text)
        if parsed is not None and parsed[1] is not None:
            return parsed[1].lower() == self.username.lower()
        if parsed is not None and parsed[0].name in self.command_names:
            return True  # "/status" in a group; "/etc is full" without a mention is not for us
        if not self.cfg.require_mention:
            return True
        me = f"@{self.username}".lower()
        for entity, value in (msg.parse_entities() or msg.parse_caption_entities()).items():
            if entity.type == "mention" and value.lower() == me:
                return True
            if entity.type == "text_mention" and entity.user is not None and entity.user.id == self.bot_id:
                return True
        reply = msg.reply_to_message
        return bool(reply is not None and reply.from_user is not None and reply.from_user.id == self.bot_id
                    and not reply.forum_topic_created)

    def _strip_mention(self, text: str) -> str:
        """A leading ``@ThisBot`` mention is dropped (``/cmd@ThisBot`` is parsed as a command)."""
        me = f"@{self.username}"
        if self.username and text[: len(me)].lower() == me.lower():
            return text[len(me):].lstrip(" ,:")
        return text

    @staticmethod
    def _media(msg: Message) -> tuple[str | None, dict[str, Any] | None]:
        """(a note for the agent, the file to download after the ack) for what the message carries."""
        kind, obj, name = None, None, None
        if msg.photo:
            kind, obj = "photo", msg.photo[-1]
            name = "photo.jpg"
        elif msg.document is not None:
            kind, obj, name = "document", msg.document, msg.document.file_name or "document"
        elif msg.voice is not None:
            kind, obj, name = "voice note", msg.voice, "voice.ogg"
        elif msg.audio is not None:
            kind, obj, name = "audio file", msg.audio, msg.audio.file_name or "audio"
        elif msg.video is not None:
            kind, obj, name = "video", msg.video, msg.video.file_name or "video.mp4"
        if kind is None or obj is None or name is None:
            for attr in _UNSUPPORTED:
                value = getattr(msg, attr, None)
                if value:
                    if attr == "sticker":
                        return f"[The user sent a sticker{' ' + value.emoji if value.emoji else ''}.]", None
                    if attr == "poll":
                        return f"[The user sent a poll: {value.question}]", None
                    return f"[The user sent a {attr.replace('_', ' ')}, which I can't open here.]", None
            return None, None
        return None, file_ref(name, kind, getattr(obj, "file_size", None) or 0, file_id=obj.file_id)

    def press(self, update: Update) -> ButtonPress | None:
        """A callback query; its id is the reply handle (the adapter answers it with the notice)."""
        query = update.callback_query
        assert query is not None
        message = query.message
        handle = {"callback_query_id": query.id}
        if message is None or query.data is None:
            return ButtonPress(Source(self.name, "", str(query.from_user.id)), "", None, handle)
        chat = message.chat
        thread = getattr(message, "message_thread_id", None) if getattr(message, "is_topic_message", False) else None
        source = Source(platform=self.name, chat_id=str(chat.id), user_id=str(query.from_user.id),
                        chat_type="dm" if chat.type == "private" else "group",
                        thread_id=str(thread) if thread else None,
                        user_name=query.from_user.username or query.from_user.full_name)
        return ButtonPress(source=source, button_id=query.data, message_id=str(message.message_id),
                           reply_handle=handle)
