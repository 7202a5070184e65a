"""Telegram: DMs, groups and forum topics through python-telegram-bot's ``Bot`` (Bot API over HTTP).

Inbound. Long polling is done here, not by PTB's ``Updater``: the Updater confirms an update (asks for the
next offset) as soon as it has queued it, before anyone persisted it. Here a batch from ``getUpdates`` is
normalised, every message is put into the inbox (``runner.ingest``), and only then does the next
``getUpdates`` carry the higher offset that confirms them to Telegram. A crash before that point makes
Telegram hand the same updates out again, and the inbox drops the ones it already has (platform message id
``<chat_id>/<message_id>``): nothing lost, nothing answered twice. Webhook mode answers Telegram's POST
only after the same persistence, so a failure there makes Telegram redeliver.

What happens to an accepted message after persistence (a command's reply, a "Queued" notice) runs in a
task of its own, so a chat waiting out a 429 never holds up polling for the others.

Outbound. The core chunks the agent's markdown at 4096 UTF-16 units (fences closed and reopened); each
chunk becomes plain text + ``MessageEntity`` pairs (telegramify-markdown), which cannot fail to parse the
way MarkdownV2/HTML can. If Telegram still refuses the entities, the same text is resent without them.
Errors map onto the delivery layer's classes: ``RetryAfter`` -> ``RateLimited`` (only that chat's lane
waits), network trouble -> ``TransientError``, blocked / chat not found / no rights -> ``PermanentError``.
PTB's Bot has no rate limiter or retry of its own, so nothing blocks other chats underneath.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import random
import re
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
from aiohttp import web

from gateway.config import secret
from gateway.platforms.base import (
    Button,
    ButtonPress,
    Capabilities,
    InboundMessage,
    OutboundMessage,
    PermanentError,
    PlatformAdapter,
    RateLimited,
    Source,
    TransientError,
)

if TYPE_CHECKING:
    from telegram import Bot, Message, Update

    from gateway.config import TelegramConfig
    from gateway.runner import Accepted

# Opt in to PTB's future timedelta periods (RetryAfter.retry_after, ...): it warns on every 429 otherwise, and
# _retry_seconds reads both forms.
os.environ.setdefault("PTB_TIMEDELTA", "1")

log = structlog.get_logger("herald.telegram")

MAX_UTF16 = 4096
CALLBACK_DATA_MAX = 64
POLL_TIMEOUT = 25
TYPING_DELAY = 0.5  # seconds a turn runs before "typing…" is shown
ALLOWED_UPDATES = ["message", "callback_query"]
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
_COMMAND_NAME = re.compile(r"[a-z0-9_]{1,32}")
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
# Content a person can send that we don't open: the agent gets a short note instead.
_UNSUPPORTED = ("sticker", "poll", "location", "venue", "contact", "dice", "game", "animation", "video_note",
                "story", "invoice")


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


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
    """Pieces of at most ``limit`` UTF-16 units (the conversion can grow a chunk, e.g. heading icons)."""
    if utf16_len(text) <= limit:
        return [(text, entities)]
    import telegramify_markdown
    from telegramify_markdown.entity import MessageEntity

    objs = [MessageEntity(**e) if not isinstance(e, MessageEntity) else e for e in entities]
    return [(t, [e.to_dict() for e in ents]) for t, ents in telegramify_markdown.split_entities(text, objs, limit)]


def _retry_seconds(exc: Any) -> float:
    value = getattr(exc, "_retry_after", None)
    if value is None:
        value = exc.retry_after
    return value.total_seconds() if hasattr(value, "total_seconds") else float(value)


def map_error(exc: Exception) -> Exception:
    """A PTB exception -> the delivery layer's class (returned, for ``raise ... from exc``)."""
    from telegram import error as tg

    if isinstance(exc, tg.RetryAfter):
        return RateLimited(_retry_seconds(exc), str(exc))
    if isinstance(exc, tg.Forbidden | tg.InvalidToken | tg.ChatMigrated):
        return PermanentError(str(exc))
    if isinstance(exc, tg.BadRequest):  # a subclass of NetworkError: test it first
        return PermanentError(str(exc))
    if isinstance(exc, tg.NetworkError | tg.Conflict):
        return TransientError(str(exc))
    return PermanentError(f"{type(exc).__name__}: {exc}")


def _is_entity_error(exc: Exception) -> bool:
    text = str(exc).lower()
    return "parse entities" in text or ("entity" in text and "bad request" in text)


def file_base_url(base_url: str) -> str:
    """``http://host/bot`` -> ``http://host/file/bot`` (how the Bot API serves files)."""
    if base_url.endswith("/bot"):
        return base_url[: -len("/bot")] + "/file/bot"
    return base_url.rstrip("/") + "/file/bot"


def make_request(pool_size: int, read_s: float, connect_s: float = 10.0, pool_s: float = 30.0) -> Any:
    """PTB's networking backend (a ``telegram.request.BaseRequest``) on aiohttp instead of httpx.

    Same wire format as PTB's HTTPXRequest (form-encoded parameters, multipart for uploads) and the same
    exceptions (``TimedOut``/``NetworkError``; PTB maps the status codes to the rest). aiohttp's C parser
    costs a fraction of httpx per request, and requests are most of the adapter's CPU under load.
    """
    import aiohttp
    from telegram.error import NetworkError, TimedOut
    from telegram.request import BaseRequest, RequestData

    default = type(BaseRequest.DEFAULT_NONE)

    class AiohttpRequest(BaseRequest):
        __slots__ = ("_session",)

        def __init__(self) -> None:
            self._session: aiohttp.ClientSession | None = None

        @property
        def read_timeout(self) -> float | None:
            return read_s

        async def initialize(self) -> None:
            if self._session is None or self._session.closed:
                self._session = aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(limit=pool_size, keepalive_timeout=60),
                    headers={"User-Agent": self.USER_AGENT},
                )

        async def shutdown(self) -> None:
            session, self._session = self._session, None
            if session is not None:
                await session.close()

        async def do_request(self, url: str, method: str, request_data: RequestData | None = None,
                             read_timeout: Any = BaseRequest.DEFAULT_NONE,
                             write_timeout: Any = BaseRequest.DEFAULT_NONE,
                             connect_timeout: Any = BaseRequest.DEFAULT_NONE,
                             pool_timeout: Any = BaseRequest.DEFAULT_NONE) -> tuple[int, bytes]:
            if self._session is None:
                raise RuntimeError("this request object is not initialized")
            read = read_s if isinstance(read_timeout, default) else read_timeout
            connect = connect_s if isinstance(connect_timeout, default) else connect_timeout
            pool = pool_s if isinstance(pool_timeout, default) else pool_timeout
            # aiohttp has no write timeout of its own: sock_read bounds a stalled exchange.
            timeout = aiohttp.ClientTimeout(total=None, sock_read=read, sock_connect=connect,
                                            connect=None if connect is None or pool is None else connect + pool)
            data: Any = None
            if request_data is not None:
                if request_data.contains_files:
                    form = aiohttp.FormData()
                    for key, value in request_data.json_parameters.items():
                        form.add_field(key, value)
                    for key, value in request_data.multipart_data.items():
                        if isinstance(value, tuple):
                            filename, content, *rest = value
                            form.add_field(key, content, filename=filename, content_type=rest[0] if rest else None)
                        else:
                            form.add_field(key, value)
                    data = form
                else:
                    data = request_data.json_parameters
            try:
                async with self._session.request(method, url, data=data, timeout=timeout) as resp:
                    return resp.status, await resp.read()
            except TimeoutError as exc:
                raise TimedOut from exc
            except aiohttp.ClientError as exc:
                raise NetworkError(f"aiohttp.{type(exc).__name__}: {exc}") from exc

    return AiohttpRequest()


class TelegramAdapter(PlatformAdapter):
    name = "telegram"
    capabilities = Capabilities(max_message_length=MAX_UTF16, length_unit="utf16", dialect="markdown",
                                buttons=True, edits=True, threads=True, typing=True)
    prompt_hint = ("You are talking on Telegram. Your Markdown is shown formatted (bold, italic, code, code "
                   "blocks, links, quotes); tables show as plain text, so prefer lists.")

    def __init__(self, runner: Any) -> None:
        super().__init__(runner)
        self.cfg: TelegramConfig = runner.cfg.platforms.telegram
        self.bot: Bot | None = None
        self.bot_id: int | None = None
        self.username: str = ""
        self._offset: int | None = None
        self._confirmed: int | None = None
        self._poller: asyncio.Task[None] | None = None
        self._closed: asyncio.Future[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._long_buttons: OrderedDict[str, str] = OrderedDict()
        self._webhook_secret: str | None = None
        self._typing: dict[tuple[str, str | None], asyncio.Task[None]] = {}

    # ---- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        from telegram import Bot

        token = secret(self.cfg.token_env)
        if not token:
            raise RuntimeError(f"platforms.telegram is enabled but the bot token is not set: put it in the "
                               f"environment variable {self.cfg.token_env} (or $HERALD_HOME/.env)")
        base_url = self.cfg.base_url or "https://api.telegram.org/bot"
        bot = Bot(
            token, base_url=base_url, base_file_url=file_base_url(base_url),
            request=make_request(pool_size=256, read_s=30),
            get_updates_request=make_request(pool_size=2, read_s=POLL_TIMEOUT + 10),
        )
        try:
            await bot.initialize()  # getMe: checks the token
        except Exception:
            await bot.shutdown()
            raise
        self.bot = bot
        self.bot_id = bot.bot.id
        self.username = bot.bot.username or ""
        self._closed = asyncio.get_running_loop().create_future()
        await self._set_commands()
        if self.cfg.mode == "webhook":
            if not self.cfg.public_url:
                raise RuntimeError("platforms.telegram.mode is webhook but platforms.telegram.public_url is not set")
            self._webhook_secret = self._secret_token(token)
            url = self.cfg.public_url.rstrip("/") + self.cfg.webhook_path
            await bot.set_webhook(url, secret_token=self._webhook_secret, allowed_updates=ALLOWED_UPDATES)
            log.info("telegram_webhook_set", url=url, bot=self.username)
        else:
            # getUpdates refuses to work while a webhook is set; pending updates are kept.
            await bot.delete_webhook(drop_pending_updates=False)
            self._poller = asyncio.create_task(self._poll(), name="telegram:poll")
            log.info("telegram_polling", bot=self.username)

    async def stop(self) -> None:
        for task in self._typing.values():
            task.cancel()
        self._typing.clear()
        poller, self._poller = self._poller, None
        if poller is not None:
            poller.cancel()
            await asyncio.gather(poller, return_exceptions=True)
        bot, self.bot = self.bot, None
        if bot is not None:
            if self._offset is not None and self._offset != self._confirmed:
                # Everything below the offset is in the inbox: tell Telegram, so a restart starts clean.
                try:
                    await bot.get_updates(offset=self._offset, timeout=0, limit=1, read_timeout=5)
                    self._confirmed = self._offset
                except Exception as exc:
                    log.debug("telegram_confirm_failed", error=str(exc))
            try:
                await bot.shutdown()
            except Exception as exc:
                log.debug("telegram_shutdown_failed", error=str(exc))
        if self._closed is not None and not self._closed.done():
            self._closed.cancel()
        self._webhook_secret = None

    def credentials(self) -> list[tuple[str, str]]:
        token = secret(self.cfg.token_env)
        return [("telegram", token)] if token else []

    async def wait_closed(self) -> None:
        assert self._closed is not None
        await asyncio.shield(self._closed)

    def _secret_token(self, token: str) -> str:
        configured = secret(self.cfg.webhook_secret_env)
        if configured:
            return configured
        return hmac.new(token.encode(), b"herald-telegram-webhook", hashlib.sha256).hexdigest()

    async def _set_commands(self) -> None:
        from telegram import BotCommand

        commands = [BotCommand(name, (desc or name)[:256]) for name, desc in self.runner.commands.menu(self.name)
                    if _COMMAND_NAME.fullmatch(name)][:100]
        try:
            assert self.bot is not None
            await self.bot.set_my_commands(commands)
        except Exception as exc:  # a menu is a nicety: never a reason not to connect
            log.warning("telegram_commands_failed", error=f"{type(exc).__name__}: {exc}")

    # ---- polling ---------------------------------------------------------------------------------

    async def _poll(self) -> None:
        from telegram import error as tg

        delay = 1.0
        while True:
            bot = self.bot
            if bot is None:
                return
            try:
                updates = await bot.get_updates(offset=self._offset, timeout=POLL_TIMEOUT,
                                                allowed_updates=ALLOWED_UPDATES, read_timeout=POLL_TIMEOUT + 10)
                self._confirmed = self._offset
            except asyncio.CancelledError:
                raise
            except (tg.InvalidToken, tg.Forbidden) as exc:
                self._die(exc)
                return
            except (tg.NetworkError, tg.Conflict, tg.RetryAfter) as exc:
                wait = _retry_seconds(exc) if isinstance(exc, tg.RetryAfter) else delay
                self.state, self.last_error = "retrying", f"{type(exc).__name__}: {exc}"
                log.warning("telegram_poll_failed", error=self.last_error, retry_in=round(wait, 1))
                await asyncio.sleep(wait * (0.8 + random.random() * 0.4))
                delay = min(delay * 2, 30.0)
                continue
            except Exception as exc:
                self._die(exc)
                return
            if self.state != "connected":
                self.state, self.last_error = "connected", None
                log.info("telegram_poll_resumed")
            delay = 1.0
            if not updates:
                continue
            done = await self._process(updates)
            if done:
                self._offset = updates[done - 1].update_id + 1
            if done < len(updates):
                # The inbox could not take one: leave it (and the rest) unconfirmed and try again shortly.
                if self.runner.stopping:
                    return
                await asyncio.sleep(1.0)

    def _die(self, exc: BaseException) -> None:
        log.error("telegram_poll_stopped", error=f"{type(exc).__name__}: {exc}")
        if self._closed is not None and not self._closed.done():
            self._closed.set_exception(exc)

    async def _process(self, updates: list[Update]) -> int:
        """Normalise and persist updates in order; returns how many leading ones are safely taken."""
        from gateway.runner import ShuttingDown

        normalised = await asyncio.gather(*(self._normalise(u) for u in updates), return_exceptions=True)
        for index, (update, item) in enumerate(zip(updates, normalised, strict=True)):
            if isinstance(item, BaseException):
                # A bug in normalising one update must not wedge the chat: log it and move on.
                log.error("telegram_update_failed", update_id=update.update_id, error=f"{type(item).__name__}: {item}")
                continue
            if item is None:
                continue
            if isinstance(item, ButtonPress):
                self._spawn(self._on_button(update, item))
                continue
            try:
                accepted = await self.runner.ingest(self, item)
            except ShuttingDown:
                return index
            except Exception as exc:
                log.error("telegram_ingest_failed", update_id=update.update_id, error=f"{type(exc).__name__}: {exc}")
                return index
            if accepted is not None:
                self._spawn(self._route(accepted))
        return len(updates)

    async def _route(self, accepted: Accepted) -> None:
        """Guard level 1 after persistence (as ``PlatformAdapter.handle_message``), off the polling path."""
        try:
            await self.dispatch(accepted)
        except Exception:
            log.exception("telegram_route_failed", platform_message_id=accepted.msg.platform_message_id)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- normalising -----------------------------------------------------------------------------

    async def _normalise(self, update: Update) -> InboundMessage | ButtonPress | None:
        if update.callback_query is not None:
            return self._press(update)
        msg = update.message
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
        text = self._strip_address(text)
        if text.startswith("/") and not self._command_for_us(text):
            return None
        user = msg.from_user
        source = Source(
            platform=self.name, chat_id=str(chat.id), user_id=str(user.id), chat_type=chat_type,
            thread_id=str(msg.message_thread_id) if msg.is_topic_message and msg.message_thread_id else None,
            user_name=user.username or user.full_name,
        )
        attachments: list[str] = []
        note = await self._media(msg, source, attachments)
        if note:
            text = f"{text}\n{note}" if text else note
        if not text.strip() and not attachments:
            return None  # service messages (joins, pins, topic edits)
        reply_to = None
        if msg.reply_to_message is not None and not msg.reply_to_message.forum_topic_created:
            reply_to = f"{chat.id}/{msg.reply_to_message.message_id}"
        return InboundMessage(source=source, text=text, platform_message_id=f"{chat.id}/{msg.message_id}",
                              attachments=attachments, reply_to=reply_to, received_at=time.time())

    def _addressed(self, msg: Message) -> bool:
        """In a group: mentions the bot, replies to it, or is a command (``/cmd`` or ``/cmd@ThisBot``)."""
        text = msg.text or msg.caption or ""
        if text.startswith("/"):
            return self._command_for_us(text)
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

    def _command_for_us(self, text: str) -> bool:
        word = text.split(maxsplit=1)[0] if text.strip() else ""
        _, at, bot = word.partition("@")
        return not at or bot.lower() == self.username.lower()

    def _strip_address(self, text: str) -> str:
        """``/cmd@ThisBot args`` -> ``/cmd args``; a leading ``@ThisBot`` mention is dropped."""
        if not self.username:
            return text
        if text.startswith("/"):
            word, _, rest = text.partition(" ")
            name, at, bot = word.partition("@")
            if at and bot.lower() == self.username.lower():
                return f"{name} {rest}".rstrip() if rest else name
            return text
        me = f"@{self.username}"
        if text[: len(me)].lower() == me.lower():
            return text[len(me):].lstrip(" ,:")
        return text

    async def _media(self, msg: Message, source: Source, attachments: list[str]) -> str | None:
        """Download photo/document/voice/audio/video to the media dir; returns a note for the agent."""
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
        if kind is None or obj is None:
            for attr in _UNSUPPORTED:
                value = getattr(msg, attr, None)
                if value:
                    if attr == "sticker":
                        return f"[The user sent a sticker{' ' + value.emoji if value.emoji else ''}.]"
                    if attr == "poll":
                        return f"[The user sent a poll: {value.question}]"
                    return f"[The user sent a {attr.replace('_', ' ')}, which I can't open here.]"
            return None
        if not self.runner.access.allowed(source):
            return f"[{kind}]"  # strangers' files are never downloaded; the inbox denies the message anyway
        cap = int(self.cfg.max_media_mb * 1024 * 1024)
        size = getattr(obj, "file_size", None) or 0
        if size > cap:
            return (f"[The user sent a {kind} ({name}, {size / 1048576:.1f} MB) bigger than the "
                    f"{self.cfg.max_media_mb:g} MB limit; it was not downloaded.]")
        try:
            assert self.bot is not None
            file = await self.bot.get_file(obj.file_id, read_timeout=30)
            if file.file_size and file.file_size > cap:
                return f"[The user sent a {kind} bigger than the {self.cfg.max_media_mb:g} MB limit.]"
            directory: Path = self.runner.paths.media_dir
            os.makedirs(directory, exist_ok=True)
            safe = _SAFE_NAME.sub("_", name)[-80:] or "file"
            target = directory / f"tg-{source.chat_id}-{msg.message_id}-{safe}"
            await file.download_to_drive(target, read_timeout=120)
        except Exception as exc:
            log.warning("telegram_media_failed", kind=kind, error=f"{type(exc).__name__}: {exc}")
            return f"[The user sent a {kind} that could not be downloaded ({type(exc).__name__}).]"
        attachments.append(str(target))
        return None if msg.caption else f"[The user sent a {kind}.]"

    # ---- buttons ---------------------------------------------------------------------------------

    def _button_data(self, button_id: str) -> str:
        """Callback data is at most 64 bytes: longer ids travel as a short digest remembered here."""
        if 0 < len(button_id.encode()) <= CALLBACK_DATA_MAX and not button_id.startswith("~"):
            return button_id
        digest = "~" + hashlib.sha256(button_id.encode()).hexdigest()[:40]
        self._long_buttons[digest] = button_id
        self._long_buttons.move_to_end(digest)
        while len(self._long_buttons) > 10_000:
            self._long_buttons.popitem(last=False)
        return digest

    def _markup(self, buttons: list[Button]) -> dict[str, Any] | None:
        if not buttons:
            return None
        row_size = 3 if all(len(b.label) <= 12 for b in buttons) else 1
        rows = [[{"text": b.label[:64], "callback_data": self._button_data(b.id)} for b in buttons[i:i + row_size]]
                for i in range(0, len(buttons), row_size)]
        return {"inline_keyboard": rows}

    def _press(self, update: Update) -> ButtonPress | None:
        query = update.callback_query
        assert query is not None
        message = query.message
        if message is None or query.data is None:
            self._spawn(self._answer(query.id, None))
            return None
        chat = message.chat
        thread = getattr(message, "message_thread_id", None) if getattr(message, "is_topic_message", False) else None
        source = Source(platform=self.name, chat_id=str(chat.id), user_id=str(query.from_user.id),
                        chat_type="dm" if chat.type == "private" else "group",
                        thread_id=str(thread) if thread else None,
                        user_name=query.from_user.username or query.from_user.full_name)
        return ButtonPress(source=source, button_id=query.data, message_id=str(message.message_id))

    async def _on_button(self, update: Update, press: ButtonPress) -> None:
        """Handle a press and answer the query promptly, so the client's spinner stops."""
        query = update.callback_query
        assert query is not None
        notice: str | None
        if press.button_id.startswith("~") and press.button_id not in self._long_buttons:
            notice = "This button is no longer active."
        else:
            button_id = self._long_buttons.get(press.button_id, press.button_id)
            press = ButtonPress(press.source, button_id, press.message_id)
            task = asyncio.ensure_future(self.handle_button(press))
            try:
                notice = await asyncio.wait_for(asyncio.shield(task), timeout=5.0)
            except TimeoutError:
                notice = None  # the handler goes on; the spinner must not
            except Exception as exc:
                log.exception("telegram_button_failed", button_id=button_id)
                notice = f"That did not work ({type(exc).__name__})."
        await self._answer(query.id, notice)

    async def _answer(self, query_id: str, notice: str | None) -> None:
        try:
            assert self.bot is not None
            await self.bot.answer_callback_query(query_id, text=(notice or None) and notice[:200])
        except Exception as exc:
            log.info("telegram_answer_failed", error=str(exc))

    # ---- webhook ---------------------------------------------------------------------------------

    def http_routes(self) -> list[Any]:
        if self.cfg.mode != "webhook":
            return []
        return [web.post(self.cfg.webhook_path, self._webhook)]

    async def _webhook(self, request: web.Request) -> web.Response:
        expected = self._webhook_secret
        if expected is None or self.bot is None:
            return web.json_response({"error": "not connected yet"}, status=503)
        supplied = request.headers.get(SECRET_HEADER, "")
        if not hmac.compare_digest(supplied.encode(), expected.encode()):
            return web.json_response({"error": "wrong or missing secret token"}, status=401)
        from telegram import Update

        try:
            update = Update.de_json(await request.json(), self.bot)
        except Exception:
            return web.json_response({"error": "body must be a Telegram update"}, status=400)
        done = await self._process([update])
        # Non-2xx makes Telegram redeliver: only answer OK once the update is in the inbox.
        return web.json_response({"ok": done == 1}, status=200 if done == 1 else 503)

    # ---- outbound --------------------------------------------------------------------------------

    def _bot(self) -> Bot:
        if self.bot is None:
            raise TransientError("telegram is not connected right now")
        return self.bot

    @staticmethod
    def _reply_id(reply_to: str | None, chat_id: str) -> int | None:
        if not reply_to:
            return None
        chat, _, mid = reply_to.rpartition("/")
        if chat and chat != chat_id:
            return None
        return int(mid) if mid.isdigit() else None

    async def send(self, chat_id: str, text: str, message: OutboundMessage) -> str:
        self._cancel_typing(chat_id, message.thread_id)
        plain, entities = to_entities(text)
        if not plain.strip():
            plain, entities = (text.strip() or "…"), []
        parts = split_formatted(plain, entities)
        first: str | None = None
        for index, (part, ents) in enumerate(parts):
            kwargs: dict[str, Any] = {}
            if index == 0 and (reply := self._reply_id(message.reply_to, chat_id)) is not None:
                kwargs["reply_parameters"] = {"message_id": reply, "allow_sending_without_reply": True}
            if index == len(parts) - 1 and (markup := self._markup(message.buttons)):
                kwargs["reply_markup"] = markup
            if message.thread_id:
                kwargs["message_thread_id"] = int(message.thread_id)
            mid = await self._send_part(chat_id, part, ents, kwargs)
            first = first or mid
        assert first is not None
        return first

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
            if not (entities and _is_entity_error(exc)):
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

    async def edit(self, chat_id: str, message_id: str, text: str | None, buttons: list[Button] | None = None) -> None:
        from telegram import error as tg

        bot = self._bot()
        markup = self._markup(buttons or []) or {"inline_keyboard": []}
        try:
            if text is None:
                await bot.edit_message_reply_markup(int(chat_id), int(message_id), api_kwargs={"reply_markup": markup})
                return
            plain, entities = to_entities(text)
            plain, entities = split_formatted(plain or text, entities)[0]
            api: dict[str, Any] = {"reply_markup": markup}
            if entities:
                api["entities"] = entities
            try:
                await bot.edit_message_text(plain, int(chat_id), int(message_id), api_kwargs=api)
            except tg.BadRequest as exc:
                if not (entities and _is_entity_error(exc)):
                    raise
                api.pop("entities")
                await bot.edit_message_text(plain, int(chat_id), int(message_id), api_kwargs=api)
        except tg.BadRequest as exc:
            if "not modified" in str(exc).lower():
                return
            raise map_error(exc) from exc
        except tg.TelegramError as exc:
            raise map_error(exc) from exc

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
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
