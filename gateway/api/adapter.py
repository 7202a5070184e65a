"""The API's adapter: an OpenAI request in, a turn through the gateway, the answer back to the request waiting.

Every ``/v1/`` route wants a key (``Authorization: Bearer sk-herald-...``, checked against its stored hash in
constant time) and counts against its holder's ``api.requests_per_minute``; whatever goes wrong is answered in
OpenAI's error shape, so a client's SDK raises what it would raise against OpenAI.

A question is an ``InboundMessage`` like any chat message: accepted into the inbox (durable before anything runs),
answered in its session's lane by the turn executor, the answer stored, then delivered — here, to the ``Exchange``
its request waits on (``send`` with ``reply_to`` the request's id). A streamed request gets the model's words as it
writes them (``live_text``). A client that goes away stops nothing: the turn finishes and its answer is stored, once;
the request's own tasks end with it. A turn that ends without sending an answer (stopped, cut short, answered by
another instance of the database) is found by polling the request's inbox row.

Images come in as data: URLs and go to the turn as a platform's downloaded files; files the agent sends are
linked from the answer (gateway/api/files.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import structlog
from aiohttp import web

from gateway.api import wire
from gateway.api.conversations import PLATFORM, Conversations, chat_for
from gateway.api.exchange import Ending, Exchange
from gateway.api.files import MAX_IMAGES, ApiFiles, decode_image
from gateway.api.limits import RateLimiter
from gateway.api.streams import ChatWriter, ResponsesWriter, closing
from gateway.api.wire import ApiError, Ask
from gateway.inbound.accept import MAX_MESSAGE_CHARS
from gateway.kernel.faults import WAIT_WHILE_UNAVAILABLE, Unavailable
from gateway.platforms.base import (
    AdapterContext,
    Attachment,
    Capabilities,
    FileUnavailable,
    InboundMessage,
    OutboundMessage,
    PlatformAdapter,
    Prepared,
    ShuttingDown,
    Source,
)
from gateway.storage.api_keys import ApiKeyStore

log = structlog.get_logger("herald.api")

POLL_SECONDS = 1.0  # how often a waiting request looks at its inbox row (a turn that ended without sending)
KEEP_ALIVE = 15.0  # a stream silent this long gets an SSE comment: proxies keep it open, a gone client shows
Handler = Callable[[web.Request, str], Awaitable[web.StreamResponse]]


def _error(exc: ApiError) -> web.Response:
    return web.json_response(exc.body, status=exc.status, headers=exc.headers)


def _request_id(holder: str, idempotency_key: str | None) -> str:
    """A request's id (its inbox row's platform id): drawn at random, or the same for a request sent again with
    the same ``Idempotency-Key`` by the same holder."""
    if not idempotency_key:
        return uuid.uuid4().hex
    return hashlib.sha256(f"{holder}\n{idempotency_key}".encode()).hexdigest()[:32]


class ApiAdapter(PlatformAdapter):
    name = PLATFORM
    # One message per answer, whatever its length (a client takes it whole); nothing is edited or pressed.
    capabilities = Capabilities(max_message_length=50_000_000, idempotent_send=True)
    prompt_hint = ("You are answering through Herald's OpenAI-compatible API (a chat app or a program built on the "
                   "OpenAI SDK); your Markdown is passed on as you write it. Nothing can be sent to this client "
                   "later: a scheduled job's results go to a chat (platform:chat_id) or stay local.")
    verified_senders = True  # each request carries its holder's own key

    def __init__(self, ctx: AdapterContext, keys: ApiKeyStore, conversations: Conversations,
                 out_dir: Path | None = None) -> None:
        """``out_dir``: where delivery's copies of the files the agent sends are (the only files served)."""
        super().__init__(ctx)
        self.keys = keys
        self.conversations = conversations
        self.files = ApiFiles(ctx.home, out_dir)
        self.approvals_to = ctx.config.approvals_to
        self.limiter = RateLimiter(ctx.config.requests_per_minute)
        self.created = int(time.time())
        self._open: dict[str, Exchange] = {}  # request id -> its exchange
        self._chats: dict[str, list[Exchange]] = {}  # chat -> its exchanges, oldest first

    # ---- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        return None  # served by the daemon's http app, already listening

    async def stop(self) -> None:
        for exchange in list(self._open.values()):
            exchange.end("shutdown")

    def announce(self, url: str, interactive: bool) -> str:
        return f"Herald API (OpenAI-compatible): {url}v1 (a key for a client: herald api-key create NAME)"

    # ---- the turn's side ---------------------------------------------------------------------------------

    async def send(self, chat_id: str, text: str, message: OutboundMessage, *,
                   idempotency_key: str | None = None) -> list[str]:
        exchange = self._open.get(message.reply_to) if message.reply_to else None
        if exchange is not None:
            exchange.answer(text + await self._links(exchange, message.attachments))
        elif waiting := self._chats.get(chat_id):
            waiting[0].note(text)  # the chat's turns run in order: the oldest request's is the one running
        else:
            # Nobody waits for it (the client went away; a cron result sent "here"): it is stored, not shown.
            log.info("api_nobody_waiting", chat_id=chat_id, answer=message.reply_to is not None, chars=len(text))
        return [f"{message.reply_to or chat_id}/{idempotency_key or uuid.uuid4().hex}"]

    async def _links(self, exchange: Exchange, sent: list[Attachment]) -> str:
        """The files the turn's ``send_file`` sent (named by the answer's last chunk; delivery sends them after
        its text, when the request is answered already), as Markdown links after the answer."""
        if not sent:
            return ""
        try:
            lines = []
            for att in sent:
                name, path = await self.files.link(exchange.holder, att.path, att.filename)
                lines.append(f"[{name}]({exchange.origin}{path})")
        except Exception as exc:  # the answer goes out without its links rather than not at all
            log.warning("api_file_links_failed", request_id=exchange.id, error=f"{type(exc).__name__}: {exc}")
            return ""
        return "\n\n" + "\n".join(lines)

    async def send_file(self, chat_id: str, attachment: Attachment, message: OutboundMessage,
                        idempotency_key: str | None = None) -> list[str]:
        # Already linked from the answer (``_links``): a client has no other way to be handed a file.
        return [f"{chat_id}/file/{idempotency_key or uuid.uuid4().hex}"]

    async def send_album(self, chat_id: str, attachments: list[Attachment], message: OutboundMessage,
                         idempotency_key: str | None = None) -> list[str]:
        return [f"{chat_id}/file/{idempotency_key or uuid.uuid4().hex}/{n}" for n in range(len(attachments))]

    async def file_limit(self, chat_id: str) -> int:
        return 1 << 50  # the send_file tool's own limit (media.max_send_mb) is the one that counts

    def live_text(self, msg: InboundMessage) -> Any:
        exchange = self._open.get(msg.platform_message_id)
        return exchange if exchange is not None and exchange.stream and not exchange.done else None

    async def prepare(self, msg: InboundMessage) -> Prepared:
        """In the session's lane: the conversation's session made to hold what the client holds."""
        pending, msg.pending = msg.pending or {}, None
        await self.conversations.settle(msg.source, pending)
        if not pending.get("files"):
            return Prepared()
        # The request's images, held since it was taken, go into the media folder as any platform's downloads.
        msg.pending = {"files": pending["files"]}
        return await super().prepare(msg)

    async def download(self, msg: InboundMessage, ref: dict[str, Any], index: int) -> str:
        held = str(ref.get("held") or "")
        target = self.media_path(held[:12], str(ref.get("name") or "image"))
        try:
            await self.files.take(held, target)
        except FileNotFoundError:
            raise FileUnavailable("it is no longer held (taken by an earlier try of this message)") from None
        return str(target)

    # ---- http ---------------------------------------------------------------------------------------------

    def http_routes(self) -> list[Any]:
        return [
            web.get("/v1/models", self._guard(self._models)),
            web.get("/v1/models/{model:.+}", self._guard(self._model)),
            web.post("/v1/chat/completions", self._guard(self._chat)),
            web.post("/v1/responses", self._guard(self._responses)),
            web.get("/v1/responses/{response_id}", self._guard(self._stored_response)),
            web.get("/v1/files/{file_id}/{name}", self._guard(self.files.serve)),
            web.route("*", "/v1/{tail:.*}", self._guard(self._unknown)),
        ]

    def _guard(self, handler: Handler) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def guarded(request: web.Request) -> web.StreamResponse:
            # No read or write of a request waits for a database that is down: the client is told at once (503)
            # and sends again, rather than hanging with nobody knowing whether its question was taken.
            reading = WAIT_WHILE_UNAVAILABLE.set(False)
            try:
                holder = await self._holder(request)
                wait = self.limiter.take(holder)
                if wait is not None:
                    raise ApiError(429, f"Rate limit reached for api:{holder}: {self.limiter.per_minute} requests per "
                                        f"minute (api.requests_per_minute). Try again in {wait:g} s.",
                                   "rate_limit_error", "rate_limit_exceeded", headers={"Retry-After": f"{wait:g}"})
                return await handler(request, holder)
            except ApiError as exc:
                return _error(exc)
            except ShuttingDown:
                return _error(ApiError(503, "Herald is shutting down: send this again in a moment.", "server_error",
                                       headers={"Retry-After": "5"}))
            except Unavailable as exc:
                return _error(ApiError(503, f"Herald cannot take this right now ({exc.reason}); nothing was stored: "
                                            "send it again in a moment.", "server_error",
                                       headers={"Retry-After": "5"}))
            finally:
                WAIT_WHILE_UNAVAILABLE.reset(reading)

        return guarded

    async def _holder(self, request: web.Request) -> str:
        scheme, _, supplied = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not supplied.strip():
            raise ApiError(401, "You didn't provide an API key: send it as Authorization: Bearer KEY (herald api-key "
                                "create NAME makes one).", code="missing_api_key",
                           headers={"WWW-Authenticate": "Bearer"})
        holder = await self.keys.verify(supplied.strip())
        if holder is None:
            raise ApiError(401, "Incorrect API key provided: it is not a Herald key, or it was revoked or expired.",
                           code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})
        return holder

    async def _body(self, request: web.Request) -> dict[str, Any]:
        cap = self.cfg.max_body_bytes
        too_big = ApiError(413, f"The request body is larger than {cap} bytes (api.max_body_bytes).",
                           code="request_too_large")
        if request.content_length is not None and request.content_length > cap:
            raise too_big
        data = bytearray()
        while chunk := await request.content.read(65536):
            data += chunk
            if len(data) > cap:
                raise too_big
        return wire.parse_body(bytes(data))

    async def _models(self, request: web.Request, holder: str) -> web.Response:
        models = [self._model_object(m) for m in self.conversations.models()]
        return web.json_response({"object": "list", "data": models})

    async def _model(self, request: web.Request, holder: str) -> web.Response:
        model = request.match_info["model"]
        if model not in self.conversations.models():
            raise ApiError(404, f"The model '{model}' does not exist", code="model_not_found", param="model")
        return web.json_response(self._model_object(model))

    def _model_object(self, model: str) -> dict[str, Any]:
        return {"id": model, "object": "model", "created": self.created, "owned_by": "herald"}

    async def _unknown(self, request: web.Request, holder: str) -> web.Response:
        raise ApiError(404, f"Herald's API has no {request.method} {request.path} (it serves /v1/models, "
                            "/v1/chat/completions, /v1/responses and the files its answers link to).",
                       code="unknown_url")

    async def _chat(self, request: web.Request, holder: str) -> web.StreamResponse:
        return await self._turn(request, holder, wire.chat_ask(await self._body(request)), "chat")

    async def _responses(self, request: web.Request, holder: str) -> web.StreamResponse:
        return await self._turn(request, holder, wire.responses_ask(await self._body(request)), "responses")

    async def _stored_response(self, request: web.Request, holder: str) -> web.Response:
        """A response as stored, however its request ended (a client cut off by a restart fetches it here)."""
        ident = request.match_info["response_id"]
        found = await self.conversations.request(ident.removeprefix("resp_"))
        if found is None or found["holder"] != holder:
            raise ApiError(404, f"No response found with id '{ident}'.", code="response_not_found")
        answered = found["status"] in ("replied", "done") and found["reply"] is not None
        status = "completed" if answered else "in_progress" if found["status"] == "pending" else "incomplete"
        output = [wire.output_message(f"msg_{ident.removeprefix('resp_')}", found["reply"])] if answered else []
        usage = wire.response_usage(await self._usage_of(ident.removeprefix("resp_")))
        return web.json_response(wire.response(ident, self.conversations.model_name, int(time.time()), status,
                                               output, None, usage))

    # ---- a question ---------------------------------------------------------------------------------------

    async def _turn(self, request: web.Request, holder: str, ask: Ask, kind: str) -> web.StreamResponse:
        try:
            model = self.conversations.model_setting(ask.model)
        except KeyError:
            raise ApiError(404, f"The model '{ask.model}' does not exist: GET /v1/models lists the ones here.",
                           code="model_not_found", param="model") from None
        if len(ask.text) > MAX_MESSAGE_CHARS:
            raise ApiError(400, f"The message is {len(ask.text):,} characters long; at most {MAX_MESSAGE_CHARS:,}.",
                           code="message_too_long")
        if len(ask.images) > MAX_IMAGES:
            raise ApiError(400, f"A message may carry at most {MAX_IMAGES} images.", code="too_many_images")
        # All checked before anything is taken; decoding megabytes of base64 does not hold the event loop.
        images = await asyncio.to_thread(lambda: [decode_image(url, param) for url, param in ask.images])
        chat_id, plan = await self._conversation(request, holder, ask)
        request_id = _request_id(holder, request.headers.get("Idempotency-Key"))
        msg = InboundMessage(source=Source(PLATFORM, chat_id, holder, "dm", user_name=holder), text=ask.text,
                             platform_message_id=request_id, received_at=time.time(),
                             pending={"conversation": plan, "model": model})
        exchange = Exchange(request_id, chat_id, ask.stream, holder, str(request.url.origin()))
        # A request sent again under its Idempotency-Key is not asked again: it gets the first one's answer, from
        # its inbox row, once there is one.
        repeated = request_id in self._open
        if not repeated:
            self._open[request_id] = exchange
            self._chats.setdefault(chat_id, []).append(exchange)
        try:
            if images and not repeated:
                msg.pending["files"] = await self.files.hold(images)  # type: ignore[index]
            # Once taken, the message is the gateway's: a client gone meanwhile does not undo it.
            if not repeated and not await asyncio.shield(self._take(msg)):
                self._forget(exchange)
            poll = asyncio.create_task(self._poll(exchange), name=f"api:poll:{request_id}")
            try:
                if ask.stream:
                    return await self._stream(request, exchange, ask, kind)
                return await self._answer(exchange, ask, kind, await asyncio.shield(exchange.ending))
            finally:
                poll.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await poll
        finally:
            self._forget(exchange)

    async def _take(self, msg: InboundMessage) -> bool:
        """``accept``, the images held for it dropped when it is not taken (a duplicate, a refusal, an error)."""
        held = list((msg.pending or {}).get("files") or [])
        taken = False
        try:
            taken = await self.accept(msg)
            return taken
        finally:
            if held and not taken:
                await self.files.drop(held)

    async def _conversation(self, request: web.Request, holder: str, ask: Ask) -> tuple[str, dict[str, Any]]:
        """The chat the question belongs to, and what the lane needs to settle its session."""
        if ask.previous_response_id:
            found = await self.conversations.request(ask.previous_response_id.removeprefix("resp_"))
            if found is None or found["holder"] != holder or not found["chat_id"]:
                raise ApiError(400, f"Previous response with id '{ask.previous_response_id}' not found.",
                               param="previous_response_id", code="previous_response_not_found")
            return found["chat_id"], {"mode": "after", "inbox": found["inbox_id"]}
        pinned = request.headers.get("X-Herald-Session")
        if pinned is not None:
            if not pinned.strip() or len(pinned) > 128 or any(ord(c) < 32 or ord(c) == 127 for c in pinned):
                raise ApiError(400, "X-Herald-Session must be a name of at most 128 printable characters.")
            chat_id = chat_for(holder, pinned=pinned.strip())
            if not ask.prior:
                return chat_id, {"mode": "append"}
        else:
            # Open WebUI names its user in a header of its own (ENABLE_FORWARD_USER_INFO_HEADERS), not in ``user``.
            user = ask.user or request.headers.get("X-OpenWebUI-User-Id", "")[:256]
            chat_id = chat_for(holder, user=user, first=ask.first)
        return chat_id, await self.conversations.plan(Source(PLATFORM, chat_id, holder), ask.prior)

    def _forget(self, exchange: Exchange) -> None:
        if self._open.get(exchange.id) is exchange:
            del self._open[exchange.id]
        waiting = self._chats.get(exchange.chat_id)
        if waiting is not None:
            with contextlib.suppress(ValueError):
                waiting.remove(exchange)
            if not waiting:
                del self._chats[exchange.chat_id]

    async def _poll(self, exchange: Exchange) -> None:
        """A turn that ended without sending here: seen twice finished, so the notice it sent is in by then."""
        seen = None
        while not exchange.done:
            await asyncio.sleep(POLL_SECONDS)
            try:
                outcome = await self.conversations.outcome(exchange.id)
            except Exception as exc:  # the database away for a moment: look again
                log.debug("api_poll_failed", error=f"{type(exc).__name__}: {exc}")
                continue
            if outcome is not None and outcome == seen:
                status, reply = outcome
                exchange.end(status, reply if status == "done" else None)
            seen = outcome

    async def _usage(self, exchange: Exchange) -> dict[str, Any]:
        return await self._usage_of(exchange.id)

    async def _usage_of(self, request_id: str) -> dict[str, Any]:
        try:
            return wire.usage_of(*await self.conversations.usage(request_id))
        except Exception as exc:
            log.warning("api_usage_unread", error=f"{type(exc).__name__}: {exc}")
            return wire.usage_of(0, 0)

    async def _answer(self, exchange: Exchange, ask: Ask, kind: str, ending: Ending) -> web.Response:
        if ending.status == "failed":
            raise ApiError(500, closing(ending), "server_error")
        if ending.status in ("shutdown", "rejected"):
            raise ApiError(503 if ending.status == "shutdown" else 429, closing(ending),
                           "server_error" if ending.status == "shutdown" else "rate_limit_error",
                           headers={"Retry-After": "5"})
        text = ending.answer if ending.answer is not None else closing(ending)
        usage = await self._usage(exchange)
        if kind == "chat":
            return web.json_response(wire.completion(f"chatcmpl-{exchange.id}", ask.model, text, usage))
        message = wire.output_message(f"msg_{exchange.id}", text)
        return web.json_response(wire.response(f"resp_{exchange.id}", ask.model, int(time.time()), "completed",
                                               [message], ask.previous_response_id, wire.response_usage(usage)))

    async def _stream(self, request: web.Request, exchange: Exchange, ask: Ask, kind: str) -> web.StreamResponse:
        writer = (ChatWriter(f"chatcmpl-{exchange.id}", ask.model, ask.include_usage) if kind == "chat" else
                  ResponsesWriter(f"resp_{exchange.id}", f"msg_{exchange.id}", ask.model, ask.previous_response_id))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                               "X-Accel-Buffering": "no"})
        try:
            await response.prepare(request)
            await response.write(writer.start())
            while True:
                try:
                    event, body = await asyncio.wait_for(exchange.events.get(), KEEP_ALIVE)
                except TimeoutError:
                    await response.write(b": keep-alive\n\n")
                    continue
                if event == "end":
                    break
                if data := writer.event(event, body):
                    await response.write(data)
            # A chat stream carries usage only when its client asked for it: otherwise not worth a read.
            wants_usage = kind != "chat" or ask.include_usage
            usage = await self._usage(exchange) if wants_usage else wire.usage_of(0, 0)
            await response.write(writer.finish(exchange.ending.result(), usage))
            await response.write_eof()
        except ConnectionError:
            # The client went away: its turn goes on (and is stored); only this request's waiting ends.
            log.info("api_client_gone", request_id=exchange.id)
        except Exception:  # the answer's headers are out: all that is left is to end the stream
            log.exception("api_stream_failed", request_id=exchange.id)
        return response
