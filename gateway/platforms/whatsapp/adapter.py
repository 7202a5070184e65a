"""WhatsApp through Meta's Cloud API: the adapter's lifecycle and the webhook at ``/whatsapp/webhook`` on the
daemon's http app. Reading webhooks lives in inbound.py, sending in outbound.py, the windows in window.py, the
Graph API in transport.py.

Meta checks the callback URL once with a GET (``hub.mode=subscribe``, ``hub.verify_token``, ``hub.challenge``):
the challenge is echoed when the verify token matches. Every POST must carry ``X-Hub-Signature-256``, the
HMAC-SHA256 of the raw body with the app secret, or it is refused with 401 before it is read. A signed POST is
answered 200 only once what it carried is stored: its messages in the inbox (``accept``), the senders'
windows in the cursors, its statuses on the outbox rows; anything failing on the way gets 503, and Meta
delivers the POST again (for up to 7 days), which the inbox drops as duplicates (a message's id is its wamid).
So nothing is lost across a restart and nothing is answered twice; there is nothing to read back.

Statuses: sent, delivered and read are recorded as the message's receipt; a failure fails its outbox row with
WhatsApp's reason (the dashboard shows it), except that a message refused because the person's window had
closed (131047) is sent again as the notify template, and one refused by a rate limit (131056, 130429) again
after a wait, while its words are still known (outbound.py ``resend``).
"""

from __future__ import annotations

import asyncio
import hmac
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import structlog
from aiohttp import web

from gateway.kernel.configbase import secret
from gateway.kernel.untrusted import bad_request, parse_object
from gateway.platforms.base import (
    AdapterContext,
    Attachment,
    ButtonPress,
    Capabilities,
    CredentialRejected,
    DeliveryError,
    FileUnavailable,
    InboundMessage,
    OutboundMessage,
    PlatformAdapter,
    ShuttingDown,
    TooBig,
    save_stream,
)
from gateway.platforms.whatsapp.inbound import SIGNATURE_HEADER, Malformed, Status, WhatsAppInbound, verified
from gateway.platforms.whatsapp.markup import WHATSAPP
from gateway.platforms.whatsapp.outbound import LIMITS, MAX_TEXT, WhatsAppOutbound
from gateway.platforms.whatsapp.transport import (
    PAIR_RATE_LIMIT,
    RE_ENGAGEMENT,
    THROUGHPUT,
    Graph,
    GraphError,
    appsecret_proof,
    http_session,
)
from gateway.platforms.whatsapp.window import ServiceWindow

if TYPE_CHECKING:
    from gateway.platforms.whatsapp.config import WhatsAppConfig

log = structlog.get_logger("herald.whatsapp")

WEBHOOK_PATH = "/whatsapp/webhook"
# A receipt can outrun the send's own record of the message: tried again after these waits (seconds).
RECEIPT_RETRIES = (0.5, 1.0, 2.0, 4.0, 8.0)
PRESSES_KEPT = 5000  # presses' message ids remembered, so a redelivered press is taken once


class WhatsAppAdapter(PlatformAdapter):
    name = "whatsapp"
    capabilities = Capabilities(max_message_length=MAX_TEXT, dialect=WHATSAPP, buttons=True, edits=False,
                                threads=False, typing=True)
    prompt_hint = ("You are talking on WhatsApp. Your Markdown is shown as WhatsApp formatting (bold, italic, "
                   "strikethrough, monospace code, lists, quotes); headings become bold lines, tables show as "
                   "monospace blocks and links as their address, so keep answers short and plain.")

    def __init__(self, ctx: AdapterContext) -> None:
        super().__init__(ctx)
        self.cfg: WhatsAppConfig = ctx.config
        self._graph: Graph | None = None
        self._session: Any = None
        self._app_secret: str | None = None
        self.inbound = WhatsAppInbound(self.name, self.cfg.phone_number_id)
        self.window = ServiceWindow(self.name, ctx.cursors)
        self.outbound = WhatsAppOutbound(lambda: self._graph, self.window, self.cfg.templates)
        self._pressed: OrderedDict[str, None] = OrderedDict()

    # ---- lifecycle -------------------------------------------------------------------------------

    def _secrets(self) -> tuple[str, str]:
        token, app_secret = secret(self.cfg.access_token_env), secret(self.cfg.app_secret_env)
        for value, key, what in ((token, "access_token_env", "access token"),
                                 (app_secret, "app_secret_env", "app secret"),
                                 (secret(self.cfg.verify_token_env), "verify_token_env", "verify token")):
            if not value:
                raise RuntimeError(f"platforms.whatsapp is enabled but the {what} is not set: put it in the "
                                   f"environment variable {getattr(self.cfg, key)} (or $HERALD_HOME/.env)")
        if not self.cfg.phone_number_id:
            raise RuntimeError("platforms.whatsapp.phone_number_id is not set (WhatsApp > API Setup in the Meta app)")
        assert token is not None and app_secret is not None
        return token, app_secret

    async def start(self) -> None:
        token, app_secret = self._secrets()
        session = http_session()
        graph = Graph(self.cfg.api_base_url, self.cfg.phone_number_id, token, session)
        try:
            number = await graph.number(fields="display_phone_number,verified_name")
            await self.window.load()
        except GraphError as exc:
            await session.close()
            if exc.status == 401 or exc.code == 190:
                raise CredentialRejected(exc.said()) from None
            raise ConnectionError(exc.said()) from None
        except BaseException:
            await session.close()
            raise
        self._session, self._graph, self._app_secret = session, graph, app_secret
        self.state, self.last_error = "connected", None
        log.info("whatsapp_connected", number=number.get("display_phone_number"), name=number.get("verified_name"))

    async def stop(self) -> None:
        await self.outbound.stop()
        self._graph = None
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def exclusive_credentials(self) -> bool:
        # Webhooks: every instance of the database takes them (the inbox drops a second copy).
        return False

    @classmethod
    def credentials_of(cls, config: Any) -> list[tuple[str, str]]:
        # The number is what two processes must not drive (a token may serve several numbers).
        if not (secret(config.access_token_env) and config.phone_number_id):
            return []
        return [("whatsapp", f"phone-number-id:{config.phone_number_id}")]

    @classmethod
    async def check_credentials(cls, config: Any, timeout: float) -> str | None:
        """GET /{phone number id} with the access token, and with the app secret's proof of it: Meta refuses a
        token it does not know (190), a proof that does not match (the app secret is not the token's app's), a
        number id the token cannot see."""
        token = secret(config.access_token_env)
        if not token or not config.phone_number_id:
            return None
        import aiohttp

        params = {"fields": "display_phone_number,verified_name"}
        app_secret = secret(config.app_secret_env)
        if app_secret:
            params["appsecret_proof"] = appsecret_proof(token, app_secret)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as http:
            graph = Graph(config.api_base_url, config.phone_number_id, token, http)
            try:
                number = await graph.number(**params)
            except GraphError as exc:
                said = exc.said()
                if exc.status == 401 or exc.code == 190:
                    raise CredentialRejected(f"Meta refused the access token: {said}") from None
                if "appsecret_proof" in said:
                    raise CredentialRejected(f"the app secret in {config.app_secret_env} is not the access token's "
                                             f"app's: {said}") from None
                if exc.code in (100, 803) or exc.status == 404:
                    raise CredentialRejected(f"no business number {config.phone_number_id} for this token: "
                                             f"{said}") from None
                raise ConnectionError(said) from None
        return f"number {number.get('display_phone_number')} ({number.get('verified_name')})"

    # ---- the webhook -----------------------------------------------------------------------------

    def http_routes(self) -> list[Any]:
        return [web.get(WEBHOOK_PATH, self._handshake), web.post(WEBHOOK_PATH, self._webhook)]

    async def _handshake(self, request: web.Request) -> web.Response:
        query = request.query
        mode, token, challenge = query.get("hub.mode"), query.get("hub.verify_token"), query.get("hub.challenge")
        if not (mode and token and challenge):
            raise bad_request("expected hub.mode, hub.verify_token and hub.challenge")
        expected = secret(self.cfg.verify_token_env) or ""
        if mode != "subscribe" or not expected or not hmac.compare_digest(token.encode(), expected.encode()):
            log.warning("whatsapp_verification_refused", mode=mode)
            return web.json_response({"error": "wrong verify token"}, status=403)
        log.info("whatsapp_webhook_verified")
        return web.Response(text=challenge, content_type="text/plain")

    async def _webhook(self, request: web.Request) -> web.Response:
        raw = await request.read()
        app_secret = self._app_secret or secret(self.cfg.app_secret_env) or ""
        if not verified(app_secret, raw, request.headers.get(SIGNATURE_HEADER)):
            return web.json_response({"error": f"missing or wrong {SIGNATURE_HEADER}"}, status=401)
        body = parse_object(raw)
        try:
            batch = self.inbound.read(body)
        except Malformed as exc:
            raise bad_request(str(exc)) from None
        if self._graph is None:
            return web.json_response({"error": "not connected yet"}, status=503)
        for chat, at, _message_id in batch.seen:
            self.window.seen(chat, at)
        try:
            for event in batch.events:
                if isinstance(event, ButtonPress):
                    self._press(event)
                elif await self.accept(event):
                    self.outbound.note_inbound(event.source.chat_id, event.platform_message_id)
            await self.window.save()
            for status in batch.statuses:
                await self._status(status)
        except ShuttingDown:
            return web.json_response({"error": "shutting down; send it again later"}, status=503)
        return web.json_response({"ok": True})

    def _press(self, press: ButtonPress) -> None:
        message_id = str((press.reply_handle or {}).get("message_id") or "")
        if message_id in self._pressed:
            return  # Meta delivered the same tap again
        self._pressed[message_id] = None
        while len(self._pressed) > PRESSES_KEPT:
            self._pressed.popitem(last=False)
        self.outbound.note_inbound(press.source.chat_id, message_id)
        button_id = self.outbound.buttons.decode(press.button_id)
        if button_id is None:  # a digest of a long id, sent by a process before a restart
            self.outbound.spawn(self._notice(press, "This button is no longer active."))
            return
        self.press(ButtonPress(press.source, button_id, press.message_id, press.reply_handle))

    async def _notice(self, press: ButtonPress, text: str) -> None:
        """A word to whoever pressed, in the chat (WhatsApp shows nothing to one person only)."""
        try:
            await self.outbound.send(press.source.chat_id, self.render(text), OutboundMessage(text))
        except DeliveryError as exc:
            log.info("whatsapp_notice_failed", error=str(exc))

    # ---- statuses --------------------------------------------------------------------------------

    async def _status(self, status: Status) -> None:
        receipts = self.ctx.receipts
        if status.state == "failed":
            closed = status.code == RE_ENGAGEMENT
            again = closed or status.code == PAIR_RATE_LIMIT or status.code in THROUGHPUT
            if again and status.message_id in self.outbound.recent:
                self.outbound.spawn(self._resend(status, closed))
                return
            if closed:
                self.window.closed(status.chat)
            log.warning("whatsapp_delivery_failed", chat_id=status.chat, code=status.code, error=status.error)
        if receipts is None:
            return
        found = await receipts.receipt(self.name, status.message_id, status.state, status.error)
        if not found and status.message_id in self.outbound.recent:  # sent here just now: its record is on its way
            self.outbound.spawn(self._receipt_later(status))

    async def _receipt_later(self, status: Status) -> None:
        receipts = self.ctx.receipts
        assert receipts is not None
        for wait in RECEIPT_RETRIES:
            await asyncio.sleep(wait)
            try:
                if await receipts.receipt(self.name, status.message_id, status.state, status.error):
                    return
            except Exception as exc:
                log.info("whatsapp_receipt_failed", error=f"{type(exc).__name__}: {exc}")
        log.info("whatsapp_receipt_unmatched", message_id=status.message_id, state=status.state)

    async def _resend(self, status: Status, window_closed: bool) -> None:
        """Send again what WhatsApp refused after taking it; record what became of it on its row."""
        error = status.error
        try:
            new_ids = await self.outbound.resend(status.message_id, window_closed)
        except DeliveryError as exc:
            new_ids, error = None, f"{status.error}; sent again, it failed: {exc}"
        receipts = self.ctx.receipts
        if receipts is None:
            return
        if not new_ids and window_closed and not self.cfg.templates.notify.name:
            error = (f"{error} (more than 24 hours after the person's last message: set "
                     "platforms.whatsapp.templates.notify to send it as a template)")
        for wait in (0.0, *RECEIPT_RETRIES):
            await asyncio.sleep(wait)
            try:
                if new_ids:
                    done = await receipts.replace(self.name, status.message_id, new_ids)
                else:
                    done = await receipts.receipt(self.name, status.message_id, "failed", error)
            except Exception as exc:
                log.info("whatsapp_receipt_failed", error=f"{type(exc).__name__}: {exc}")
                continue
            if done:
                log.info("whatsapp_resent" if new_ids else "whatsapp_delivery_failed", chat_id=status.chat,
                         code=status.code, error=None if new_ids else error)
                return

    # ---- files -----------------------------------------------------------------------------------

    async def download(self, msg: InboundMessage, ref: dict[str, Any], index: int) -> str:
        """GET /{media id} for the file's address (good for a few minutes), then the file with the token."""
        cap_mb = self.cfg.max_media_mb
        cap = int(cap_mb * 1024 * 1024)
        graph = self._graph
        if graph is None:
            raise FileUnavailable("WhatsApp is not connected right now")
        try:
            info = await graph.media(str(ref.get("media_id") or ""))
        except GraphError as exc:
            raise FileUnavailable(f"WhatsApp would not hand it over ({exc.code or exc.status})") from None
        size = info.get("file_size")
        if isinstance(size, int) and size > cap:
            raise TooBig(cap_mb)
        url = str(info.get("url") or "")
        if not graph.may_fetch(url):
            raise FileUnavailable("WhatsApp gave an address Herald will not send its token to")
        target = self.media_path("wa", msg.source.chat_id, msg.platform_message_id[-24:], str(index),
                                 str(ref.get("name") or "file"))
        try:
            await save_stream(graph.stream(url), target, cap, cap_mb)
        except GraphError as exc:
            raise FileUnavailable(f"the download answered HTTP {exc.status}") from None
        return str(target)

    async def send_file(self, chat_id: str, attachment: Attachment, message: OutboundMessage,
                        idempotency_key: str | None = None) -> list[str]:
        """Upload the file (/media) and send it by id, with its caption: the message ids. ``DeliveryError`` as
        ``send`` raises them (a ``PermanentError`` names the size and the limit of a file too big for its kind)."""
        return await self.outbound.send_file(chat_id, attachment.path, attachment.filename, attachment.mime,
                                             attachment.caption or "", reply_to=message.reply_to)

    async def file_limit(self, chat_id: str) -> int:
        # The largest any kind takes (a document); a smaller kind's limit (an image's 5 MB) is met by sending it
        # as a document, and past that send_file names the size and the limit.
        return max(LIMITS.values())

