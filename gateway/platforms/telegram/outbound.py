"""Telegram outbound: markdown becomes plain text + ``MessageEntity`` pairs (telegramify-markdown), which
cannot fail to parse the way MarkdownV2/HTML can; messages are sent, edited, shown as "typing".

The adapter's dialect is markdown (``render`` keeps it) and ``measure`` is the UTF-16 length of the text
after conversion, so delivery's chunks fit Telegram's 4096 units as sent. If Telegram still refuses the
entities, the same text is resent without them.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

from gateway.kernel.chunking import utf16_len
from gateway.platforms.base import Button, Outbound, OutboundMessage, TransientError
from gateway.platforms.buttons import ButtonIds, utf8_len
from gateway.platforms.telegram.transport import is_entity_error, map_error

if TYPE_CHECKING:
    from telegram import Bot

log = structlog.get_logger("herald.telegram")

MAX_UTF16 = 4096
CALLBACK_DATA_MAX = 64
TYPING_DELAY = 0.5  # seconds a turn runs before "typing…" is shown
# Below this many UTF-16 units the converted text can't reach the limit (conversion adds a few characters
# per line at most), so measuring it needs no conversion.
_SURELY_FITS = MAX_UTF16 // 2


def to_entities(markdown: str) -> tuple[str, list[dict[str, Any]]]:
    """Markdown -> (plain text, entity dicts). Never raises: a converter failure gives plain markdown."""
    try:
        import telegramify_markdown

        text, entities = telegramify_markdown.convert(markdown)
        return text, [e.to_dict() for e in entities]
    except Exception as exc:  # a converter bug must not cost the user the answer
        log.warning("telegram_format_failed", error=f"{type(exc).__name__}: {exc}")
        return markdown, []


def split_formatted(text: str, entities: list[dict[str, Any]], limit: int = MAX_UTF16
                    ) -> list[tuple[str, list[dict[str, Any]]]]:
    """Pieces of at most ``limit`` UTF-16 units, entities cut with them (a last resort: chunks fit already)."""
    if utf16_len(text) <= limit:
        return [(text, entities)]
    import telegramify_markdown
    from telegramify_markdown.entity import MessageEntity

    objs = [MessageEntity(**e) if not isinstance(e, MessageEntity) else e for e in entities]
    return [(t, [e.to_dict() for e in ents]) for t, ents in telegramify_markdown.split_entities(text, objs, limit)]


class TelegramOutbound(Outbound):
    def __init__(self, bot: Callable[[], Bot | None]) -> None:
        self._get_bot = bot
        self.buttons = ButtonIds(CALLBACK_DATA_MAX, utf8_len)  # callback data is at most 64 bytes
        self._typing: dict[tuple[str, str | None], asyncio.Task[None]] = {}
        self._converted: OrderedDict[str, tuple[str, list[dict[str, Any]]]] = OrderedDict()

    # ---- formatting ------------------------------------------------------------------------------

    def convert(self, markdown: str) -> tuple[str, list[dict[str, Any]]]:
        """``to_entities``, remembered for the few texts just measured (delivery measures, then sends)."""
        hit = self._converted.get(markdown)
        if hit is None:
            hit = self._converted[markdown] = to_entities(markdown)
            while len(self._converted) > 64:
                self._converted.popitem(last=False)
        return hit

    def measure(self, text: str) -> int:
        units = utf16_len(text)
        if units <= _SURELY_FITS:
            return units
        return utf16_len(self.convert(text)[0])

    # ---- buttons ---------------------------------------------------------------------------------

    def markup(self, buttons: list[Button]) -> dict[str, Any] | None:
        if not buttons:
            return None
        row_size = 3 if all(len(b.label) <= 12 for b in buttons) else 1
        rows = [[{"text": b.label[:64], "callback_data": self.buttons.encode(b.id)} for b in buttons[i:i + row_size]]
                for i in range(0, len(buttons), row_size)]
        return {"inline_keyboard": rows}

    # ---- sending ---------------------------------------------------------------------------------

    def _bot(self) -> Bot:
        bot = self._get_bot()
        if bot is None:
            raise TransientError("telegram is not connected right now")
        return bot

    @staticmethod
    def _reply_id(reply_to: str | None, chat_id: str) -> int | None:
        if not reply_to:
            return None
        chat, _, mid = reply_to.rpartition("/")
        if chat and chat != chat_id:
            return None
        return int(mid) if mid.isdigit() else None

    async def send(self, chat_id: str, text: str, message: OutboundMessage, *,
                   idempotency_key: str | None = None) -> list[str]:
        self._cancel_typing(chat_id, message.thread_id)
        plain, entities = self.convert(text)
        if not plain.strip():
            plain, entities = (text.strip() or "…"), []
        parts = split_formatted(plain, entities)
        ids: list[str] = []
        for index, (part, ents) in enumerate(parts):
            kwargs: dict[str, Any] = {}
            if index == 0 and (reply := self._reply_id(message.reply_to, chat_id)) is not None:
                kwargs["reply_parameters"] = {"message_id": reply, "allow_sending_without_reply": True}
            if index == len(parts) - 1 and (markup := self.markup(message.buttons)):
                kwargs["reply_markup"] = markup
            if message.thread_id:
                kwargs["message_thread_id"] = int(message.thread_id)
            ids.append(await self._send_part(chat_id, part, ents, kwargs))
        return ids

    async def _send_part(self, chat_id: str, text: str, entities: list[dict[str, Any]],
                         kwargs: dict[str, Any]) -> str:
        from telegram import error as tg

        bot = self._bot()
        api: dict[str, Any] = dict(kwargs)
        if entities:
            api["entities"] = entities
        try:
            sent = await bot.send_message(int(chat_id), text, api_kwargs=api)
        except tg.BadRequest as exc:
            if not (entities and is_entity_error(exc)):
                raise map_error(exc) from exc
            # Telegram refused the formatting: the same words, unformatted, never truncated.
            log.warning("telegram_entities_rejected", chat_id=chat_id, error=str(exc))
            api.pop("entities", None)
            try:
                sent = await bot.send_message(int(chat_id), text, api_kwargs=api)
            except tg.TelegramError as exc2:
                raise map_error(exc2) from exc2
        except tg.TelegramError as exc:
            raise map_error(exc) from exc
        return str(sent.message_id)

    async def edit(self, chat_id: str, message_id: str, text: str | None, buttons: list[Button] | None = None,
                   *, thread_id: str | None = None) -> None:
        from telegram import error as tg

        bot = self._bot()
        markup = self.markup(buttons or []) or {"inline_keyboard": []}
        try:
            if text is None:
                await bot.edit_message_reply_markup(int(chat_id), int(message_id), api_kwargs={"reply_markup": markup})
                return
            plain, entities = self.convert(text)
            plain, entities = split_formatted(plain or text, entities)[0]
            api: dict[str, Any] = {"reply_markup": markup}
            if entities:
                api["entities"] = entities
            try:
                await bot.edit_message_text(plain, int(chat_id), int(message_id), api_kwargs=api)
            except tg.BadRequest as exc:
                if not (entities and is_entity_error(exc)):
                    raise
                api.pop("entities")
                await bot.edit_message_text(plain, int(chat_id), int(message_id), api_kwargs=api)
        except tg.BadRequest as exc:
            if "not modified" in str(exc).lower():
                return
            raise map_error(exc) from exc
        except tg.TelegramError as exc:
            raise map_error(exc) from exc

    # ---- typing ----------------------------------------------------------------------------------

    def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        """Show "typing…" unless the answer beats ``TYPING_DELAY``: a fast reply costs no extra request."""
        key = (chat_id, thread_id)
        if key not in self._typing:
            self._typing[key] = asyncio.create_task(self._typing_later(key))

    async def _typing_later(self, key: tuple[str, str | None]) -> None:
        try:
            await asyncio.sleep(TYPING_DELAY)
        finally:
            if self._typing.get(key) is asyncio.current_task():
                del self._typing[key]
        chat_id, thread_id = key
        try:
            await self._bot().send_chat_action(int(chat_id), "typing",
                                               message_thread_id=int(thread_id) if thread_id else None)
        except Exception as exc:
            log.debug("telegram_typing_failed", chat_id=chat_id, error=str(exc))

    def _cancel_typing(self, chat_id: str, thread_id: str | None) -> None:
        task = self._typing.pop((chat_id, thread_id), None)
        if task is not None:
            task.cancel()

    def stop(self) -> None:
        for task in self._typing.values():
            task.cancel()
        self._typing.clear()
