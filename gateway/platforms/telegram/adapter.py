"""Telegram through python-telegram-bot's ``Bot`` (Bot API over HTTP): the adapter's lifecycle, long polling
and the webhook. Normalising lives in inbound.py, sending in outbound.py, PTB's HTTP in transport.py.

Long polling is done here, not by PTB's ``Updater``: the Updater confirms an update (asks for the next
offset) as soon as it has queued it, before anyone persisted it. Here a batch from ``getUpdates`` is
normalised, every message is ``accept``ed (durable in the inbox when that returns), and only then does the
next ``getUpdates`` carry the higher offset that confirms them to Telegram. A crash before that point makes
Telegram hand the same updates out again, and the inbox drops the ones it already has (platform message id
``<chat_id>/<message_id>``): nothing lost, nothing answered twice. Webhook mode answers Telegram's POST
only after the same persistence, so a failure there makes Telegram redeliver. The gateway dispatches
accepted messages itself, so a chat waiting out a 429 never holds up polling for the others.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import random
import re
from typing import TYPE_CHECKING, Any

import structlog
from aiohttp import web

from gateway.kernel.configbase import secret
from gateway.platforms.base import (
    AdapterContext,
    Attachment,
    ButtonPress,
    Capabilities,
    CredentialRejected,
    FileUnavailable,
    InboundMessage,
    OutboundMessage,
    PlatformAdapter,
    ShuttingDown,
    TooBig,
    Unavailable,
)
from gateway.platforms.telegram.files import ALBUM_MAX, UPLOAD_LIMIT, TelegramFiles
from gateway.platforms.telegram.inbound import TelegramInbound
from gateway.platforms.telegram.outbound import MAX_UTF16, TelegramOutbound
from gateway.platforms.telegram.transport import file_base_url, make_request, retry_seconds

if TYPE_CHECKING:
    from telegram import Bot, Update

    from gateway.platforms.telegram.config import TelegramConfig

log = structlog.get_logger("herald.telegram")

POLL_TIMEOUT = 25
ALLOWED_UPDATES = ["message", "edited_message", "callback_query"]
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
# A button press's callback query is answered within this many seconds (the client's spinner stops): with
# the handler's notice if it is ready by then, else empty, and the notice follows in the chat.
ANSWER_WITHIN = 1.0
TOAST_MAX = 200  # answerCallbackQuery's text limit
_COMMAND_NAME = re.compile(r"[a-z0-9_]{1,32}")
# getUpdates answered 409: another program polls (or a webhook is set for) this bot's token.
CONFLICT_CONDITION = "telegram_conflict"
CONFLICT_REASON = ("Telegram answered 409 Conflict: another program is reading this bot's updates with the same "
                   "token (or a webhook is set); waiting for it to stop")


class TelegramAdapter(PlatformAdapter):
    name = "telegram"
    capabilities = Capabilities(max_message_length=MAX_UTF16, buttons=True, edits=True,
                                threads=True, typing=True, min_edit_interval=1.0, album=ALBUM_MAX)
    prompt_hint = ("You are talking on Telegram. Your Markdown is shown formatted (bold, italic, code, code "
                   "blocks, links, quotes); tables show as plain text, so prefer lists.")

    def __init__(self, ctx: AdapterContext) -> None:
        super().__init__(ctx)
        self.cfg: TelegramConfig = ctx.config
        self.bot: Bot | None = None
        self.username: str = ""
        self.inbound = TelegramInbound(self.name, self.cfg, self.gateway, ctx.media_dir, lambda: self.bot)
        self.outbound = TelegramOutbound(lambda: self.bot)
        self.files = TelegramFiles(lambda: self.bot, self.outbound.convert)
        self._offset: int | None = None
        self._confirmed: int | None = None
        self._poller: asyncio.Task[None] | None = None
        self._closed: asyncio.Future[None] | None = None
        self._webhook_secret: str | None = None
        self._answering: set[asyncio.Task[bool]] = set()
        self._unanswered: dict[str, asyncio.TimerHandle] = {}  # callback_query_id -> its deadline's answer

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
        self.inbound.bot_id = bot.bot.id
        self.inbound.username = self.username = bot.bot.username or ""
        self._closed = asyncio.get_running_loop().create_future()
        url = None
        if self.cfg.mode == "webhook":
            if not self.cfg.public_url:
                raise RuntimeError("platforms.telegram.mode is webhook but platforms.telegram.public_url is not set")
            url = self.cfg.public_url.rstrip("/") + self.cfg.webhook_path
        # The menu and the webhook are separate calls: sent together, start waits one round trip, not two.
        menu = asyncio.create_task(self._set_commands(), name="telegram:menu")
        try:
            if url is not None:
                self._webhook_secret = self._secret_token(token)
                await bot.set_webhook(url, secret_token=self._webhook_secret, allowed_updates=ALLOWED_UPDATES)
                log.info("telegram_webhook_set", url=url, bot=self.username)
            else:
                # getUpdates refuses to work while a webhook is set; pending updates are kept.
                await bot.delete_webhook(drop_pending_updates=False)
        except BaseException:
            menu.cancel()
            raise
        await menu  # before polling: the command names it sets are what inbound reads commands by
        if url is None:
            self._poller = asyncio.create_task(self._poll(), name="telegram:poll")
            log.info("telegram_polling", bot=self.username)

    async def stop(self) -> None:
        self.outbound.stop()
        self.ctx.faults.end(CONFLICT_CONDITION)  # whoever else polls is no longer in our way
        for timer in self._unanswered.values():
            timer.cancel()  # the bot is going away: the clients' spinners time out on their own
        self._unanswered.clear()
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

    def exclusive_credentials(self) -> bool:
        # Webhooks: every instance of the database takes them (the inbox drops a second copy).
        return self.cfg.mode != "webhook"

    @classmethod
    def credentials_of(cls, config: Any) -> list[tuple[str, str]]:
        token = secret(config.token_env)
        return [("telegram", token)] if token else []

    @classmethod
    async def check_credentials(cls, config: Any, timeout: float) -> str | None:
        """getMe: Telegram answers 401 (404 on some servers) for a token it does not know."""
        token = secret(config.token_env)
        if not token:
            return None
        import aiohttp

        base = config.base_url or "https://api.telegram.org/bot"
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as http, \
                http.get(f"{base}{token}/getMe") as resp:
            body = await resp.json(content_type=None)
        if isinstance(body, dict) and body.get("ok"):
            return f"bot @{body['result'].get('username')}"
        said = body.get("description") if isinstance(body, dict) else None
        if resp.status in (401, 404):
            raise CredentialRejected(f"Telegram refused the token: {said or 'Unauthorized'} (HTTP {resp.status})")
        raise ConnectionError(f"Telegram answered HTTP {resp.status}: {said}")

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

        menu = self.gateway.command_menu(self.name)
        self.inbound.command_names = frozenset(name for name, _ in menu)
        commands = [BotCommand(name, (desc or name)[:256]) for name, desc in menu
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
            # After a failure the first poll is a short one: a long poll the server took only says "over" when
            # it returns (up to POLL_TIMEOUT later), and /readyz would stay "retrying" (a conflict "on") so long.
            wait_s = POLL_TIMEOUT if self.state == "connected" else 0
            try:
                updates, last_id = await self._get_updates(bot, wait_s)
                self._confirmed = self._offset
            except asyncio.CancelledError:
                raise
            except (tg.InvalidToken, tg.Forbidden) as exc:
                self._die(exc)
                return
            except (tg.NetworkError, tg.Conflict, tg.RetryAfter) as exc:
                wait = retry_seconds(exc) if isinstance(exc, tg.RetryAfter) else delay
                self._poll_fault(exc)
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
                self.ctx.faults.end(CONFLICT_CONDITION)
                log.info("telegram_poll_resumed")
            delay = 1.0
            done = await self._process(updates) if updates else 0
            if done == len(updates) and last_id is not None:
                self._offset = last_id + 1  # past any unreadable update after the last good one too
            elif done:
                self._offset = updates[done - 1].update_id + 1
            if done < len(updates):
                # The inbox could not take one: leave it (and the rest) unconfirmed and try again shortly.
                if self.gateway.stopping:
                    return
                await asyncio.sleep(1.0)

    async def _get_updates(self, bot: Bot, wait_s: int) -> tuple[list[Update], int | None]:
        """getUpdates, each update parsed on its own; also the highest update id handed out.

        PTB's ``get_updates`` parses the whole batch at once: one update it cannot read (a field of an
        unexpected type) failed every poll, the offset never moved past it, and the bot heard nothing more.
        Here such an update is skipped (confirmed with the rest) and counted as a bad request."""
        from telegram import Update

        raw = await bot._post("getUpdates", {"offset": self._offset, "timeout": wait_s,
                                             "allowed_updates": ALLOWED_UPDATES}, read_timeout=POLL_TIMEOUT + 10)
        updates: list[Update] = []
        last_id: int | None = None
        for item in raw if isinstance(raw, list) else []:
            update_id = item.get("update_id") if isinstance(item, dict) else None
            if isinstance(update_id, int) and not isinstance(update_id, bool):
                last_id = update_id if last_id is None else max(last_id, update_id)
            try:
                update = Update.de_json(item, bot)
            except Exception as exc:
                update = None
                log.warning("telegram_update_unreadable", update_id=update_id, error=type(exc).__name__)
            if update is None or not isinstance(update_id, int):
                self.faults.record("bad_request", door="telegram", kind="unreadable update")
                continue
            updates.append(update)
        return updates, last_id

    def _poll_fault(self, exc: Exception) -> None:
        from telegram import error as tg

        faults = self.ctx.faults
        if isinstance(exc, tg.Conflict):
            # Lasting until the other poller stops: /readyz says so (once), and the adapter keeps trying.
            faults.begin(CONFLICT_CONDITION, "platform_conflict", CONFLICT_REASON, platform=self.name)
        elif isinstance(exc, tg.RetryAfter):
            faults.record("platform_rate_limited", platform=self.name, method="getUpdates")
        else:
            faults.record("platform_unavailable", platform=self.name, method="getUpdates")

    def _die(self, exc: BaseException) -> None:
        log.error("telegram_poll_stopped", error=f"{type(exc).__name__}: {exc}")
        if self._closed is not None and not self._closed.done():
            self._closed.set_exception(exc)

    async def _process(self, updates: list[Update]) -> int:
        """Normalise and accept updates; returns how many leading ones are safely taken.

        Chats are accepted side by side, each chat's updates in order: their inbox rows share the store's group
        commits instead of waiting for one commit each (a poll with 200 chats' messages took a second before).
        Past an update that could not be taken nothing is confirmed; what was taken beyond it comes again and
        is a duplicate then. Presses act once, so only those before that point are taken, after the messages."""
        normalised = await asyncio.gather(*(self.inbound.normalise(u) for u in updates), return_exceptions=True)
        chats: dict[str, list[int]] = {}
        for index, (update, item) in enumerate(zip(updates, normalised, strict=True)):
            if isinstance(item, BaseException):
                # A bug in normalising one update must not wedge the chat: log it and move on.
                log.error("telegram_update_failed", update_id=update.update_id, error=f"{type(item).__name__}: {item}")
                self.faults.record("bad_request", door="telegram", kind="update not understood")
            elif item is None:
                if (update.api_kwargs and update.message is None and update.edited_message is None
                        and update.callback_query is None):
                    # A kind of update Herald never asked for (not in allowed_updates): ignored, and counted.
                    self.faults.record("bad_request", door="telegram", kind="unknown update")
            elif isinstance(item, InboundMessage):
                chats.setdefault(item.source.chat_id, []).append(index)
        stops = await asyncio.gather(*(self._accept_in_order(updates, normalised, indexes)
                                       for indexes in chats.values()))
        done = min((stop for stop in stops if stop is not None), default=len(updates))
        for item in normalised[:done]:
            if isinstance(item, ButtonPress):
                self._take_press(item)
        return done

    async def _accept_in_order(self, updates: list[Update], normalised: list[Any], indexes: list[int]) -> int | None:
        """One chat's messages, in order; the index of the first that could not be taken (None: all were)."""
        for n, index in enumerate(indexes):
            update, item = updates[index], normalised[index]
            try:
                await self.accept(item)
            except ShuttingDown:
                return index
            except Unavailable as exc:
                # Not confirmed: Telegram hands this update (and the ones after it) out again on the next poll.
                # Its sender was told so by accept; the chat's messages behind it are told too.
                log.warning("telegram_update_refused", update_id=update.update_id, reason=exc.reason)
                for waiting in indexes[n + 1:]:
                    self.tell_unavailable(normalised[waiting], exc.reason)
                return index
            except Exception as exc:
                log.error("telegram_accept_failed", update_id=update.update_id, error=f"{type(exc).__name__}: {exc}")
                return index
        return None

    def unavailable_notice(self, msg: InboundMessage, reason: str) -> str | None:
        # Left unconfirmed, an update is handed out again (Telegram keeps it for a day): it is answered then.
        return (f"⚠️ Herald cannot take messages right now ({reason}). Your message is kept and will be answered "
                "once this is fixed.")

    def _take_press(self, press: ButtonPress) -> None:
        query_id = (press.reply_handle or {}).get("callback_query_id")
        button_id = self.outbound.buttons.decode(press.button_id) if press.button_id else None
        if button_id is None:  # a digest from before a restart, or a query without data
            if query_id is not None:
                self._answer_soon(query_id, "This button is no longer active." if press.button_id else None)
            return
        if query_id is not None:
            # The client shows a spinner on the button until the query is answered: answer it within
            # ANSWER_WITHIN whatever the handler does. A notice that comes later goes into the chat instead.
            self._unanswered[query_id] = asyncio.get_running_loop().call_later(
                ANSWER_WITHIN, self._answer_soon, query_id, None)
        self.press(ButtonPress(press.source, button_id, press.message_id, press.reply_handle))

    def _answer_soon(self, query_id: str, notice: str | None) -> None:
        self._unanswered.pop(query_id, None)
        task = asyncio.create_task(self._answer(query_id, notice), name="telegram:answer")
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)

    async def _answer(self, query_id: str, notice: str | None) -> bool:
        if self.bot is None:
            return False
        try:
            await self.bot.answer_callback_query(query_id, text=notice or None)
        except Exception as exc:
            log.info("telegram_answer_failed", error=str(exc))
            return False
        return True

    async def answer_press(self, press: ButtonPress, notice: str | None) -> bool:
        """The notice as the query's answer (a toast under the button) when it comes in time and fits one.

        Otherwise (the query was already answered at the deadline, or the notice is longer than a toast
        holds) False: the gateway posts the notice into the chat, where it can be read whole.
        """
        query_id = (press.reply_handle or {}).get("callback_query_id")
        timer = self._unanswered.pop(query_id, None) if query_id is not None else None
        if timer is None:
            return False
        timer.cancel()
        if notice and len(notice) > TOAST_MAX:
            self._answer_soon(query_id, None)  # stop the spinner now; the words go to the chat
            return False
        return await self._answer(query_id, notice)

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

    # ---- files out -------------------------------------------------------------------------------

    async def send_file(self, chat_id: str, attachment: Attachment, message: OutboundMessage,
                        idempotency_key: str | None = None) -> list[str]:
        return await self.files.send(chat_id, attachment, message)

    async def send_album(self, chat_id: str, attachments: list[Attachment], message: OutboundMessage,
                         idempotency_key: str | None = None) -> list[str]:
        return await self.files.send_album(chat_id, attachments, message)

    async def file_limit(self, chat_id: str) -> int:
        return UPLOAD_LIMIT

    # ---- after the offset, before the turn -----------------------------------------------------

    async def download(self, msg: InboundMessage, ref: dict[str, Any], index: int) -> str:
        """getFile, then the file itself (Telegram's Bot API serves at most 20 MB)."""
        cap_mb = self.cfg.max_media_mb
        cap = int(cap_mb * 1024 * 1024)
        if int(ref.get("size") or 0) > cap:
            raise TooBig(cap_mb)
        bot = self.bot
        if bot is None:
            raise FileUnavailable("Telegram is not connected right now")
        file = await bot.get_file(str(ref["file_id"]), read_timeout=30)
        if file.file_size and file.file_size > cap:
            raise TooBig(cap_mb)
        message_id = msg.platform_message_id.rpartition("/")[2]
        target = self.media_path("tg", msg.source.chat_id, message_id, str(index), str(ref.get("name") or "file"))
        await file.download_to_drive(target, read_timeout=120)
        return str(target)
