"""Telegram's files out: sendPhoto for images Telegram takes as photos (10 MB at most; anything else it could
refuse as a photo goes as a document), sendVoice for Ogg voice notes, sendMediaGroup for several images at
once, sendDocument for the rest. The Bot API takes uploads up to 50 MB. Captions are the agent's markdown
as text + entities, like messages, cut at Telegram's 1024 units. Telegram has no idempotency key: a file
resent after a crash is announced by delivery first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from gateway.kernel.chunking import utf16_len
from gateway.platforms.base import Attachment, OutboundMessage, TransientError
from gateway.platforms.telegram.transport import map_error

if TYPE_CHECKING:
    from telegram import Bot

log = structlog.get_logger("herald.telegram")

UPLOAD_LIMIT = 50 * 1024 * 1024  # what the Bot API takes from a bot
PHOTO_LIMIT = 10 * 1024 * 1024
CAPTION_MAX = 1024
ALBUM_MAX = 10


class TelegramFiles:
    def __init__(self, bot: Callable[[], Bot | None], convert: Callable[[str], tuple[str, list[dict[str, Any]]]]
                 ) -> None:
        self._get_bot = bot
        self._convert = convert  # markdown -> (text, entities), as for messages

    def _bot(self) -> Bot:
        bot = self._get_bot()
        if bot is None:
            raise TransientError("telegram is not connected right now")
        return bot

    def _caption(self, caption: str | None) -> tuple[str | None, list[dict[str, Any]]]:
        if not caption:
            return None, []
        text, entities = self._convert(caption)
        if utf16_len(text) > CAPTION_MAX:
            return text[: CAPTION_MAX - 1] + "…", []  # a cut caption keeps no entities that could overrun it
        return text, entities

    def _common(self, message: OutboundMessage) -> dict[str, Any]:
        return {"message_thread_id": int(message.thread_id)} if message.thread_id else {}

    async def send(self, chat_id: str, att: Attachment, message: OutboundMessage) -> list[str]:
        from telegram import InputFile
        from telegram import error as tg

        data = await asyncio.to_thread(Path(att.path).read_bytes)
        caption, entities = self._caption(att.caption)
        api = self._common(message)
        if entities:
            api["caption_entities"] = entities
        bot = self._bot()
        upload = InputFile(data, filename=att.filename)
        try:
            if att.kind == "image" and len(data) <= PHOTO_LIMIT and att.mime in ("image/jpeg", "image/png",
                                                                                "image/webp", "image/gif"):
                try:
                    sent = await bot.send_photo(int(chat_id), upload, caption=caption, api_kwargs=api)
                    return [str(sent.message_id)]
                except tg.BadRequest as exc:  # dimensions Telegram refuses for a photo: it goes as a file
                    log.info("telegram_photo_as_document", error=str(exc))
                    upload = InputFile(data, filename=att.filename)
            if att.kind == "voice" and att.mime == "audio/ogg":
                sent = await bot.send_voice(int(chat_id), upload, caption=caption, api_kwargs=api)
            else:
                sent = await bot.send_document(int(chat_id), upload, caption=caption, api_kwargs=api)
        except tg.TelegramError as exc:
            raise map_error(exc) from exc
        return [str(sent.message_id)]

    async def send_album(self, chat_id: str, atts: list[Attachment], message: OutboundMessage) -> list[str]:
        from telegram import InputFile, InputMediaPhoto
        from telegram import error as tg

        media = []
        for att in atts[:ALBUM_MAX]:
            data = await asyncio.to_thread(Path(att.path).read_bytes)
            caption, entities = self._caption(att.caption)
            media.append(InputMediaPhoto(InputFile(data, filename=att.filename, attach=True), caption=caption,
                                         caption_entities=entities or None))
        try:
            sent = await self._bot().send_media_group(int(chat_id), media, api_kwargs=self._common(message))
        except tg.TelegramError as exc:
            raise map_error(exc) from exc
        return [str(m.message_id) for m in sent]
