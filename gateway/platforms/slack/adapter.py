"""Slack through Bolt (slack-bolt's AsyncApp) and slack_sdk: the adapter's lifecycle, Socket Mode, HTTP mode
(``POST /slack/events`` on the daemon's http app), acknowledgements and button-press answers. Normalising
lives in inbound.py, sending in outbound.py, converting in mrkdwn.py, the SDK's HTTP in transport.py.

Bolt runs with ``process_before_response``: the HTTP response (or the Socket Mode ack) goes out when our
listener returns, and the listener returns as soon as ``accept`` has made the message durable, which takes
milliseconds; the gateway dispatches the turn itself. Before ``accept`` come only lookups under one shared
deadline (inbound.LOOKUP_BUDGET); files are downloaded after the ack, in ``prepare``, before the turn. An
exception in ``accept`` (the daemon is draining) leaves the event unacknowledged, so Slack delivers it
again later. Retries (X-Slack-Retry-Num, Socket Mode
redeliveries) carry the same message, whose id (``<channel>/<ts>``) the inbox already has: answered once.
In HTTP mode Bolt checks the request signature (``v0:{ts}:{body}`` with the signing secret) and refuses a
timestamp more than 5 minutes off: 401 either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
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
    InboundMessage,
    OutboundMessage,
    PlatformAdapter,
    Prepared,
    Unavailable,
)
from gateway.platforms.slack.files import UPLOAD_LIMIT, SlackFiles
from gateway.platforms.slack.inbound import LOOKUP_BUDGET, Deadline, SlackInbound
from gateway.platforms.slack.mrkdwn import MRKDWN
from gateway.platforms.slack.outbound import MAX_TEXT, SlackOutbound
from gateway.platforms.slack.transport import file_hosts, http_session, web_client, webhook_client

if TYPE_CHECKING:
    from gateway.platforms.slack.config import SlackConfig

log = structlog.get_logger("herald.slack")

EVENTS_PATH = "/slack/events"
CONNECT_TIMEOUT = 30.0
# At most this long after its arrival does a message wait for an earlier one of its channel (whose own
# lookups end within LOOKUP_BUDGET of its arrival, which came first).
ORDER_WAIT = LOOKUP_BUDGET + 0.5
NOT_ALLOWED = "You are not allowed to use this bot here."
PING_INTERVAL = 10.0  # Socket Mode's ping; a connection silent for 4 of these is replaced


class SlackAdapter(PlatformAdapter):
    name = "slack"
    capabilities = Capabilities(max_message_length=MAX_TEXT, dialect=MRKDWN, buttons=True, edits=True,
                                threads=True, typing=True, command_prefix="!",
                                min_edit_interval=1.0)
    prompt_hint = ("You are talking on Slack. Your Markdown is shown as Slack formatting (bold, italics, "
                   "strikethrough, links, code, lists, quotes); tables show as code blocks.")

    def __init__(self, ctx: AdapterContext) -> None:
        super().__init__(ctx)
        self.cfg: SlackConfig = ctx.config
        self._client: Any = None
        self._session: Any = None
        self._app: Any = None
        self._socket: Any = None
        self._normalising: dict[str, list[str]] = {}  # channel -> ts of its messages being normalised now
        self._accepted = asyncio.Event()  # set whenever one of them is done
        self.inbound = SlackInbound(self.name, self.cfg, self.gateway, ctx.media_dir, lambda: self._client,
                                    lambda: self._session, file_hosts(self.cfg.api_base_url))
        self.outbound = SlackOutbound(lambda: self._client, self._webhook, self.inbound.joined)
        self.files = SlackFiles(lambda: self._client, lambda: self._session, self.outbound.render)

    # ---- lifecycle -------------------------------------------------------------------------------

    def _tokens(self) -> tuple[str, str | None, str | None]:
        token = secret(self.cfg.bot_token_env)
        if not token:
            raise RuntimeError(f"platforms.slack is enabled but the bot token is not set: put it in the "
                               f"environment variable {self.cfg.bot_token_env} (or $HERALD_HOME/.env)")
        app_token = signing = None
        if self.cfg.mode == "socket":
            app_token = secret(self.cfg.app_token_env)
            if not app_token:
                raise RuntimeError(f"platforms.slack.mode is socket but the app-level token is not set: put it in "
                                   f"{self.cfg.app_token_env} (Basic Information > App-Level Tokens, with "
                                   f"connections:write), or use mode: http")
        else:
            signing = secret(self.cfg.signing_secret_env)
            if not signing:
                raise RuntimeError(f"platforms.slack.mode is http but the signing secret is not set: put it in "
                                   f"{self.cfg.signing_secret_env} (Basic Information > Signing Secret)")
        return token, app_token, signing

    def exclusive_credentials(self) -> bool:
        # Webhooks: every instance of the database takes them (the inbox drops a second copy).
        return self.cfg.mode != "http"

    @classmethod
    def credentials_of(cls, config: Any) -> list[tuple[str, str]]:
        out = []
        token = secret(config.bot_token_env)
        if token:
            out.append(("slack", token))
        app_token = secret(config.app_token_env) if config.mode == "socket" else None
        if app_token:
            out.append(("slack-app", app_token))
        return out

    @classmethod
    async def check_credentials(cls, config: Any, timeout: float) -> str | None:
        """auth.test with the bot token; in socket mode also apps.connections.open with the app-level token (it
        only hands out a websocket address, which expires unused: nothing connects)."""
        token = secret(config.bot_token_env)
        if not token:
            return None
        import aiohttp

        base = (config.api_base_url or "https://slack.com/api/").rstrip("/")
        refused = ("invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired")
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as http:
            async with http.post(f"{base}/auth.test", headers={"Authorization": f"Bearer {token}"}) as resp:
                body = await resp.json(content_type=None)
            if not (isinstance(body, dict) and body.get("ok")):
                said = body.get("error") if isinstance(body, dict) else f"HTTP {resp.status}"
                if said in refused:
                    raise CredentialRejected(f"Slack refused the bot token: {said}")
                raise ConnectionError(f"Slack answered: {said}")
            who = f"bot {body.get('user')} in {body.get('team')}"
            app_token = secret(config.app_token_env) if config.mode == "socket" else None
            if not app_token:
                return who
            async with http.post(f"{base}/apps.connections.open",
                                 headers={"Authorization": f"Bearer {app_token}"}) as resp:
                body = await resp.json(content_type=None)
        if isinstance(body, dict) and body.get("ok"):
            return f"{who}; app-level token accepted (socket mode)"
        said = body.get("error") if isinstance(body, dict) else f"HTTP {resp.status}"
        if said in (*refused, "not_allowed_token_type", "missing_scope"):
            raise CredentialRejected(f"Slack refused the app-level token in {config.app_token_env}: {said} (it must "
                                     "be the xapp-… token of Basic Information > App-Level Tokens, with "
                                     "connections:write)")
        raise ConnectionError(f"Slack answered apps.connections.open: {said}")

    async def start(self) -> None:
        token, app_token, signing = self._tokens()
        self._session = http_session()
        client = web_client(token, self.cfg.api_base_url, self._session)
        try:
            auth = await client.auth_test()
            self.inbound.bot_user, self.inbound.bot_id = str(auth["user_id"]), str(auth.get("bot_id") or "")
            self.inbound.token = token
            self.inbound.command_names = frozenset(name for name, _ in self.gateway.command_menu(self.name))
            self._app = self._bolt(auth, token, signing)
            self._client = client
            if app_token is not None:
                await self._connect_socket(app_token)
        except BaseException:
            await self.stop()
            raise
        self.state, self.last_error = "connected", None
        log.info("slack_connected", mode=self.cfg.mode, bot=self.inbound.bot_user, team=auth.get("team_id"))

    async def stop(self) -> None:
        self.outbound.stop()
        socket, self._socket = self._socket, None
        if socket is not None:
            try:
                await socket.close_async()
            except Exception as exc:
                log.debug("slack_socket_close_failed", error=str(exc))
        self._client = self._app = None
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _bolt(self, auth: Any, token: str, signing: str | None) -> Any:
        from slack_bolt.async_app import AsyncApp
        from slack_bolt.authorization import AuthorizeResult

        result = AuthorizeResult(enterprise_id=auth.get("enterprise_id"), team_id=auth.get("team_id"),
                                 team=auth.get("team"), url=auth.get("url"), bot_user_id=auth["user_id"],
                                 bot_id=auth.get("bot_id"), bot_token=token)

        async def authorize(**_kwargs: Any) -> AuthorizeResult:
            return result  # one workspace, known since auth.test: no call per request

        bolt_log = logging.getLogger("herald.slack.bolt")
        # Bolt reads SLACK_BOT_TOKEN from the environment on its own and warns that the client's (none) wins:
        # the tokens here come from the configured variables, so that warning is noise at every start.
        bolt_log.setLevel(logging.ERROR)
        app = AsyncApp(
            logger=bolt_log,
            # Bolt's own client is only a carrier for apps.connections.open (which takes the app token).
            client=web_client(None, self.cfg.api_base_url, self._session),  # type: ignore[arg-type]
            authorize=authorize, signing_secret=signing or "", process_before_response=True,
            request_verification_enabled=self.cfg.mode == "http",
        )
        bolt_log.setLevel(logging.NOTSET)
        app.event("message")(self._on_message)
        app.event("app_mention")(self._on_message)
        app.event(re.compile(".*"))(self._on_other_event)  # acknowledged, not answered (or Slack retries)
        app.action(re.compile(".*"))(self._on_action)
        app.command(re.compile(".*"))(self._on_command)
        app.error(self._on_error)
        return app

    async def _connect_socket(self, app_token: str) -> None:
        from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler

        assert self._client is not None
        # Asked here rather than inside the SDK, whose connect() retries a refused token forever.
        url = (await self._client.apps_connections_open(app_token=app_token))["url"]
        handler = AsyncSocketModeHandler(self._app, app_token, logger=logging.getLogger("herald.slack.socket"),
                                         ping_interval=PING_INTERVAL)
        handler.client.wss_uri = url
        handler.client.on_close_listeners.append(self._socket_closed)
        handler.client.message_listeners.append(self._socket_message)
        self._socket = handler
        await asyncio.wait_for(handler.connect_async(), CONNECT_TIMEOUT)

    async def _socket_closed(self, _message: Any) -> None:
        if self._socket is not None:
            self.state, self.last_error = "retrying", "Socket Mode connection closed; reconnecting"
            log.info("slack_socket_closed")

    async def _socket_message(self, _client: Any, message: dict[str, Any], _raw: str | None) -> None:
        if message.get("type") == "hello" and self.state != "connected":
            self.state, self.last_error = "connected", None
            log.info("slack_socket_resumed")

    # ---- Bolt listeners --------------------------------------------------------------------------

    async def _on_message(self, body: dict[str, Any]) -> None:
        event = body.get("event") or {}
        key = (str(event.get("channel") or ""), str(event.get("ts") or ""))
        arrived = asyncio.get_running_loop().time()
        self._normalising.setdefault(key[0], []).append(key[1])
        try:
            msg = await self.inbound.message(body, Deadline(LOOKUP_BUDGET))
            if msg is None:
                return
            await self._earlier_first(*key, arrived + ORDER_WAIT)
            # Raises while draining: Bolt answers 500 / sends no ack, and Slack delivers the event again.
            accepted = await self.accept(msg)
        finally:
            waiting = self._normalising.get(key[0])
            if waiting is not None:
                waiting.remove(key[1])
                if not waiting:
                    del self._normalising[key[0]]
            self._accepted.set()
        if accepted and msg.edit_of is None:
            source = msg.source
            maybe = bool(msg.pending and msg.pending.get("thread"))  # not known to be the bot's thread yet
            if source.thread_id and source.chat_type != "dm" and not maybe:
                self.inbound.joined(source.chat_id, source.thread_id)
            self.outbound.note_message(source.chat_id, source.thread_id, msg.platform_message_id.rpartition("/")[2])

    async def _earlier_first(self, channel: str, ts: str, deadline: float) -> None:
        """Wait (a little) while an earlier message of the same channel is still being normalised.

        Events are handled concurrently, and normalising one can take API lookups: a message sent right
        after another must not reach the inbox (and the session's lane) before it. Slack's ts orders a
        channel's messages. The wait ends at ``deadline``, so that the ack stays well inside Slack's 3 s.
        """
        while any(other < ts for other in self._normalising.get(channel, ())):
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return
            self._accepted.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._accepted.wait(), left)

    async def _on_other_event(self, body: dict[str, Any]) -> None:
        return None

    async def _on_command(self, ack: Any, body: dict[str, Any]) -> None:
        msg = await self.inbound.command(body)
        try:
            accepted = await self.accept(msg)
        except Unavailable:
            # Slack never sends a slash command again: acknowledged, refused, and its sender told so (by accept,
            # through the response_url) instead of Slack's "failed with operation_timeout".
            await ack()
            return
        await ack()  # empty: the answer follows through response_url
        if not accepted and not self.gateway.may_talk(msg.source):
            # Someone who may not talk to the bot hears so, privately (as on Discord), rather than nothing.
            self.outbound.spawn(self._tell_privately(msg, NOT_ALLOWED))

    def unavailable_notice(self, msg: InboundMessage, reason: str) -> str | None:
        if msg.reply_handle is not None:  # a slash command
            return (f"Herald cannot take this right now ({reason}): it was not run. Please send it again in a "
                    "moment.")
        # Unacknowledged, an event is sent again by Slack: at once, after a minute and after five, then never.
        return (f"⚠️ Herald cannot take messages right now ({reason}). Slack will hand me your message again over "
                "the next few minutes: if this is fixed by then I'll answer it, otherwise please send it again.")

    async def _tell_privately(self, msg: InboundMessage, text: str) -> None:
        out = OutboundMessage(text, reply_handle=msg.reply_handle, ephemeral=True)
        try:
            await self.outbound.send(msg.source.chat_id, self.render(text), out)
        except Exception as exc:
            log.info("slack_notice_failed", error=f"{type(exc).__name__}: {exc}")

    # ---- after the ack, before the turn ----------------------------------------------------------

    async def prepare(self, msg: InboundMessage) -> Prepared:
        """A thread follow-up that was only maybe for the bot is checked patiently first (a thread it turns
        out not to be in drops it); then the files are downloaded (the contract's default)."""
        thread = (msg.pending or {}).get("thread")
        if thread:
            found = await self.inbound.thread_check(msg.source.chat_id, str(thread))
            if found is None:
                msg.pending = None
                return Prepared(drop="Slack never said whether the bot is in this thread (conversations.replies)")
            if not found:
                msg.pending = None
                return Prepared(drop="a thread follow-up without a mention, in a thread the bot is not in")
        return await super().prepare(msg)

    async def send_file(self, chat_id: str, attachment: Attachment, message: OutboundMessage,
                        idempotency_key: str | None = None) -> list[str]:
        return await self.files.send(chat_id, attachment, message)

    async def file_limit(self, chat_id: str) -> int:
        return UPLOAD_LIMIT

    async def download(self, msg: InboundMessage, ref: dict[str, Any], index: int) -> str:
        ts = msg.platform_message_id.rpartition("/")[2]
        target = self.media_path("slack", msg.source.chat_id, ts, str(index), str(ref.get("name") or "file"))
        await self.inbound.download(ref, target)
        return str(target)

    async def _on_action(self, ack: Any, body: dict[str, Any]) -> None:
        await ack()
        press = await self.inbound.press(body) if body.get("type") == "block_actions" else None
        if press is None or not press.button_id:
            return
        button_id = self.outbound.buttons.decode(press.button_id)
        if button_id is None:  # a digest of a long id, sent by a process before a restart
            self.outbound.spawn(self.answer_press(press, "This button is no longer active."))
            return
        self.press(ButtonPress(press.source, button_id, press.message_id, press.reply_handle))

    async def _on_error(self, error: BaseException, body: dict[str, Any]) -> None:
        log.warning("slack_listener_failed", error=f"{type(error).__name__}: {error}",
                    kind=body.get("type") or ("command" if "command" in body else None))

    # ---- HTTP mode -------------------------------------------------------------------------------

    def http_routes(self) -> list[Any]:
        if self.cfg.mode != "http":
            return []
        return [web.post(EVENTS_PATH, self._events)]

    async def _events(self, request: web.Request) -> web.Response:
        from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request

        if self._app is None:
            return web.json_response({"error": "not connected yet"}, status=503)
        check_body(await request.read(), request.headers.get("Content-Type"))
        return await to_aiohttp_response(await self._app.async_dispatch(await to_bolt_request(request)))

    # ---- outbound --------------------------------------------------------------------------------

    def _webhook(self, url: str) -> Any:
        return webhook_client(url, self._session)

    async def answer_press(self, press: ButtonPress, notice: str | None) -> bool:
        """The notice only the presser sees: chat.postEphemeral, else the press's response_url."""
        if not notice:
            return True  # the press was acknowledged on arrival; nothing to say
        source = press.source
        text = self.render(notice)
        if await self.outbound.post_ephemeral(source.chat_id, source.user_id, text, source.thread_id):
            return True
        url = (press.reply_handle or {}).get("response_url")
        if url:
            try:
                resp = await self._webhook(url).send(text=text, response_type="ephemeral", replace_original=False)
                return bool(resp.status_code == 200)
            except Exception as exc:
                log.info("slack_response_url_failed", error=f"{type(exc).__name__}: {exc}")
        return False


def check_body(raw: bytes, content_type: str | None) -> None:
    """Refuse (400) a body Bolt would choke on (it parses before it checks the signature, and raises on what
    is not UTF-8, not JSON, too deeply nested, or a JSON array): decided as Bolt's ``parse_body`` decides how
    to read it."""
    from urllib.parse import parse_qsl

    if not raw:
        return
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise bad_request("the body must be UTF-8 text") from None
    if content_type == "application/json" or text.startswith("{"):
        parse_object(text)
    elif "payload" in text:
        payload = dict(parse_qsl(text, keep_blank_values=True)).get("payload")
        if payload is not None:
            parse_object(payload)
