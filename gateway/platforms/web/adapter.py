"""The local web chat: its page, a small JSON API + SSE stream on the daemon's http app, behind a bearer token.

The token lives in ``$HERALD_HOME/web_token`` (0600, created on first start); whoever holds it is the
owner, so the web chat needs no allowlist, and the daemon's whole HTTP API (/api/) lets them in. The chat
history it serves is kept in the database (chat_log), so a restart keeps it. Sends are idempotent: a chunk's
idempotency key is its message id, so a chunk resent after a crash is stored (and shown) once.

The owner has many chats: the list of them (titles, last activity), rename, delete and search go through the
chats' port the runner provides (``AdapterContext.chats``), so this package imports only the contract. Files
uploaded with a message, and those the agent sends, are files.py's.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import secrets
import time
import uuid
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

import structlog
from aiohttp import web

from gateway.kernel.logs import add_secret
from gateway.kernel.untrusted import read_object
from gateway.platforms.base import (
    AdapterContext,
    Attachment,
    Button,
    ButtonPress,
    Capabilities,
    ChatBusy,
    FileUnavailable,
    InboundMessage,
    OutboundMessage,
    PermanentError,
    PlatformAdapter,
    ShuttingDown,
    Source,
    file_ref,
    parse_text_command,
)
from gateway.platforms.web import PAGE, TOKEN_FILE
from gateway.platforms.web.files import MAX_FILES, WebFiles
from gateway.platforms.web.markdown import to_html
from gateway.platforms.web.markdown import warm as warm_markdown

log = structlog.get_logger("herald.web")

MAX_TEXT = 32_000
# The events that move a chat in the list of chats (gateway/platforms/web/static/chat.js).
_MOVES = ("message", "renamed", "deleted")
# The page's script and style are files of this package, never inline: nothing injected into it could run.
_PAGE_POLICY = {"Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
                                           "form-action 'self'"}


def load_or_create_token(path: Path) -> str:
    if path.exists():
        token = path.read_text().strip()
        if token:
            return token
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.chmod(path, 0o600)
    return token


def web_token(cfg: Any, home: Path) -> str:
    """The web chat's token: ``platforms.web.token_env``'s variable when set, else the profile's file."""
    from gateway.kernel.configbase import secret

    return secret(getattr(cfg, "token_env", None)) or load_or_create_token(home / TOKEN_FILE)


def _valid_id(value: Any, what: str, max_len: int = 128) -> str:
    """Any printable text (ids are opaque: ':' and '/' are fine), but no control characters."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if (not isinstance(value, str) or not value.strip() or len(value) > max_len
            or any(ord(ch) < 32 or ord(ch) == 127 for ch in value)):
        raise web.HTTPBadRequest(
            text=json.dumps({"error": f"{what} must be a non-empty string of at most {max_len} printable "
                                      "characters"}),
            content_type="application/json",
        )
    return value


def _button(b: Button) -> dict[str, Any]:
    return {"id": b.id, "label": b.label, "style": b.style}


def _bad(message: str) -> web.HTTPBadRequest:
    return web.HTTPBadRequest(text=json.dumps({"error": message}), content_type="application/json")


def _message(message_id: str, role: str, text: str, buttons: list[dict[str, Any]] | None,
             files: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A message as the API and the event stream show it. The model's replies are markdown: ``html`` is that
    rendered and made safe (gateway/platforms/web/markdown.py), so the page never renders markdown itself.
    The user's own text is shown as typed. ``files``: what it carries, each with the address that opens it."""
    out = {"id": message_id, "role": role, "text": text, "buttons": buttons or [], "files": files or []}
    if role == "assistant":
        out["html"] = to_html(text)
    return out


class WebAdapter(PlatformAdapter):
    name = "web"
    capabilities = Capabilities(max_message_length=16_000, buttons=True, edits=True,
                                threads=False, typing=True, idempotent_send=True)
    prompt_hint = "You are talking in Herald's local web chat, which renders Markdown."
    trusted = True  # every request carried the owner's bearer token

    def __init__(self, ctx: AdapterContext) -> None:
        super().__init__(ctx)
        self.token = web_token(ctx.config, ctx.home)
        self.log = ctx.chat_log
        self.chats = ctx.chats
        self.files = WebFiles(ctx.home, self.token, getattr(ctx.config, "max_upload_mb", 20.0))
        add_secret(self.token)  # masked in every log line and stored error from here on
        self._subscribers: dict[str, set[asyncio.Queue[str]]] = {}
        # The streams that asked to hear when another chat moves (the page, for its list of chats): stream -> its chat.
        self._watchers: dict[asyncio.Queue[str], str] = {}
        # Several instances behind one address: a client's event stream may be held by another instance than
        # the one answering its chat, so every event is told to the others too (a reference to the chat log
        # row, or the small event itself), and each passes on what its own clients wait for.
        self._broadcast = ctx.broadcast if ctx.broadcast is not None and ctx.broadcast.enabled else None
        self._origin = uuid.uuid4().hex
        self._heard_events: asyncio.Queue[dict[str, Any]] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        if self._broadcast is not None:
            self._broadcast.on("web", self._heard)
        warm_markdown()

    # ---- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        # Served by the runner's http app, which is already listening.
        return None

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        self._heard_events = None
        self._watchers.clear()
        for queues in self._subscribers.values():
            for q in queues:
                q.put_nowait("")  # wakes the stream so it can close
        self._subscribers.clear()

    # ---- outbound --------------------------------------------------------------------------------

    async def send(self, chat_id: str, text: str, message: OutboundMessage, *,
                   idempotency_key: str | None = None) -> list[str]:
        message_id = f"a-{idempotency_key or uuid.uuid4().hex}"
        buttons = [_button(b) for b in message.buttons]
        if await self.log.add(self.name, chat_id, message_id, "assistant", text, buttons):
            self._publish(chat_id, "message", self._public_message(message_id, "assistant", text, buttons),
                          ref=message_id)
        return [message_id]

    async def edit(self, chat_id: str, message_id: str, text: str | None, buttons: list[Button] | None = None,
                   *, thread_id: str | None = None) -> None:
        row = await self.log.edit(self.name, message_id, text, [_button(b) for b in buttons or []])
        if row is not None:
            self._publish(row["chat_id"], "edit", self._public(row), ref=message_id)

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        self._publish(chat_id, "typing", {})

    async def send_file(self, chat_id: str, attachment: Attachment, message: OutboundMessage,
                        idempotency_key: str | None = None) -> list[str]:
        message_id = f"f-{idempotency_key or uuid.uuid4().hex}"
        # The same chunk sent again (after a crash) copies to the same file and is logged once.
        file_id = hashlib.sha256(message_id.encode()).hexdigest()[:32]
        try:
            meta = await self.files.keep(attachment.path, attachment.filename, attachment.mime, file_id)
        except FileUnavailable as exc:
            raise PermanentError(f"{attachment.filename}: {exc}") from None
        text = attachment.caption or ""
        if await self.log.add(self.name, chat_id, message_id, "assistant", text, None, files=[meta]):
            self._publish(chat_id, "message", self._public_message(message_id, "assistant", text, None, [meta]),
                          ref=message_id)
        return [message_id]

    async def file_limit(self, chat_id: str) -> int:
        return self.files.cap

    async def answer_press(self, press: ButtonPress, notice: str | None) -> bool:
        if notice:
            self._publish(press.source.chat_id, "notice", {"text": notice})
        return True

    def _publish(self, chat_id: str, event: str, data: dict[str, Any], ref: str | None = None) -> None:
        """To this instance's streams of the chat, and to the other instances' (``ref``: the chat log row they
        read the message from; other events travel whole)."""
        self._deliver(chat_id, event, data)
        if self._broadcast is not None:
            told: dict[str, Any] = {"o": self._origin, "c": chat_id, "e": event}
            told.update({"m": ref} if ref is not None else {"d": data})
            payload = json.dumps(told, ensure_ascii=False)
            if len(payload.encode()) < 7000:  # a notice longer than a notification holds stays here
                self._spawn(self._broadcast.broadcast("web", payload))

    def _public_message(self, message_id: str, role: str, text: str, buttons: list[dict[str, Any]] | None,
                        files: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        return _message(message_id, role, text, buttons, self.files.public(files))

    def _public(self, row: dict[str, Any]) -> dict[str, Any]:
        return self._public_message(row["message_id"], row["role"], row["text"], row["buttons"], row.get("files"))

    def _deliver(self, chat_id: str, event: str, data: dict[str, Any]) -> None:
        queues = self._subscribers.get(chat_id)
        if queues:
            frame = f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
            for q in list(queues):
                if q.qsize() < 1000:
                    q.put_nowait(frame)
        if event in _MOVES and self._watchers:
            self._moved(chat_id)

    def _moved(self, chat_id: str) -> None:
        """The streams following other chats that asked (``?activity=1``) hear that this one moved: which chat,
        never what was said."""
        moved = f"event: activity\ndata: {json.dumps({'chat_id': chat_id}, ensure_ascii=False)}\n\n"
        for q, followed in list(self._watchers.items()):
            if followed != chat_id and q.qsize() < 1000:
                q.put_nowait(moved)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _heard(self, payload: str) -> None:
        """Another instance's event: passed on in the order heard, if a client here follows that chat."""
        try:
            told = json.loads(payload)
        except ValueError:
            return
        if told.get("o") == self._origin:
            return
        if told.get("c") not in self._subscribers:
            if told.get("e") in _MOVES and self._watchers:
                self._moved(str(told.get("c")))
            return
        if self._heard_events is None:
            self._heard_events = asyncio.Queue()
            self._spawn(self._pass_on(self._heard_events))
        self._heard_events.put_nowait(told)

    async def _pass_on(self, events: asyncio.Queue[dict[str, Any]]) -> None:
        while True:
            told = await events.get()
            try:
                if "m" in told:
                    row = await self.log.get(self.name, told["m"])
                    if row is not None:
                        self._deliver(told["c"], told["e"], self._public(row))
                else:
                    self._deliver(told["c"], told["e"], told.get("d") or {})
            except Exception as exc:
                log.info("web_event_pass_on_failed", error=f"{type(exc).__name__}: {exc}")

    # ---- the page and the http API ---------------------------------------------------------------

    @classmethod
    def page_credential(cls, config: Any, home: Path) -> tuple[str, str]:
        try:
            return "token", web_token(config, home)
        except OSError as exc:
            raise RuntimeError(f"cannot read or create the web token {home / TOKEN_FILE}: {exc.strerror or exc}; "
                               "check that this user may write there") from exc

    def announce(self, url: str, interactive: bool) -> str:
        # Logged without the token; `herald web-url` prints the whole address wherever stdout went.
        log.info("web_chat", url=url, token_file=str(self.ctx.home / TOKEN_FILE))
        if interactive:
            return f"Herald web chat: {url}#token={self.token}"
        return f"Herald web chat: {url} (the address with its access token: herald web-url)"

    def http_routes(self) -> list[Any]:
        return [
            web.get(PAGE, self._page),
            web.get("/chat/static/{name}", self._static),
            web.get("/chat/files/{file_id}/{name}", self.files.serve),
            web.post("/api/v1/messages", self._post_message),
            web.get("/api/v1/chats", self._list_chats),
            web.get("/api/v1/search", self._search),
            web.patch("/api/v1/chats/{chat_id}", self._rename_chat),
            web.delete("/api/v1/chats/{chat_id}", self._delete_chat),
            web.get("/api/v1/chats/{chat_id}/messages", self._get_messages),
            web.post("/api/v1/chats/{chat_id}/messages", self._post_with_files),
            web.post("/api/v1/chats/{chat_id}/buttons/{button_id}", self._press_button),
            web.get("/api/v1/chats/{chat_id}/events", self._events),
        ]

    def unavailable_notice(self, msg: InboundMessage, reason: str) -> str | None:
        # The POST that carried it is answered 503 with the reason (gateway/ops/http.py), and the page shows
        # that; a notice in the chat would need the chat's log, which is in the store that is out.
        return None

    async def _page(self, request: web.Request) -> web.Response:
        page = resources.files(__package__).joinpath("static/index.html").read_text()
        return web.Response(text=page, content_type="text/html", headers={"Cache-Control": "no-store", **_PAGE_POLICY})

    async def _static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        types = {"chat.js": "application/javascript", "chat.css": "text/css"}
        if name not in types:
            raise web.HTTPNotFound()
        body = resources.files(__package__).joinpath(f"static/{name}").read_text()
        return web.Response(text=body, content_type=types[name], headers={"Cache-Control": "no-cache"})

    def authorizes(self, request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        scheme, _, supplied = header.partition(" ")
        if scheme.lower() != "bearer" or not supplied:
            return False
        return hmac.compare_digest(supplied.strip().encode(), self.token.encode())

    async def _json(self, request: web.Request) -> dict[str, Any]:
        return await read_object(request)

    async def _post_message(self, request: web.Request) -> web.Response:
        body = await self._json(request)
        chat_id = _valid_id(body.get("chat_id"), "chat_id")
        user_id = _valid_id(body.get("user_id"), "user_id")
        text = body.get("text")
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT:
            raise _bad(f"text must be a non-empty string of at most {MAX_TEXT} characters")
        supplied = body.get("message_id")
        message_id = _valid_id(supplied, "message_id") if supplied is not None else uuid.uuid4().hex
        return await self._take(chat_id, user_id, message_id, text, [])

    async def _post_with_files(self, request: web.Request) -> web.Response:
        """A message with files, as multipart/form-data: ``user_id``, ``text`` and ``message_id`` (both
        optional), and up to MAX_FILES ``file`` parts, each saved as it arrives and capped."""
        chat_id = _valid_id(request.match_info["chat_id"], "chat_id")
        if not request.content_type.startswith("multipart/"):
            raise web.HTTPUnsupportedMediaType(text='{"error": "send multipart/form-data"}',
                                               content_type="application/json")
        fields: dict[str, str] = {}
        saved: list[dict[str, Any]] = []
        try:
            reader = await request.multipart()
            while (part := await reader.next()) is not None:
                if part.filename is not None:
                    if len(saved) >= MAX_FILES:
                        raise _bad(f"at most {MAX_FILES} files in one message")
                    saved.append(await self.files.save_part(part))
                elif part.name in ("user_id", "text", "message_id"):
                    raw = await part.read_chunk(MAX_TEXT * 4 + 1)
                    if len(raw) > MAX_TEXT * 4 or await part.read_chunk(1):
                        raise _bad(f"{part.name} is too long")
                    fields[part.name] = raw.decode("utf-8", "replace")
            text = fields.get("text", "")
            if len(text) > MAX_TEXT or not (text.strip() or saved):
                raise _bad(f"a message needs text (at most {MAX_TEXT} characters) or a file")
            user_id = _valid_id(fields.get("user_id"), "user_id")
            supplied = fields.get("message_id")
            message_id = _valid_id(supplied, "message_id") if supplied is not None else uuid.uuid4().hex
            return await self._take(chat_id, user_id, message_id, text, saved)
        except FileUnavailable as exc:  # TooBig
            await self.files.remove([f["id"] for f in saved])
            raise web.HTTPRequestEntityTooLarge(max_size=self.files.cap, actual_size=self.files.cap + 1,
                                                text=json.dumps({"error": f"a file is {exc}"}),
                                                content_type="application/json") from None
        except BaseException:
            await self.files.remove([f["id"] for f in saved])
            raise

    async def _take(self, chat_id: str, user_id: str, message_id: str, text: str,
                    files: list[dict[str, Any]]) -> web.Response:
        # Client ids are only unique within a chat; both are encoded, so no two (chat, id) pairs collide.
        platform_id = f"{quote(chat_id, safe='')}/{quote(message_id, safe='')}"
        parsed = parse_text_command(text) if not files else None
        public_id = f"u-{platform_id}"
        if self.gateway.stopping:
            raise web.HTTPServiceUnavailable(text='{"error": "shutting down"}', content_type="application/json")
        # The question is in the chat log before anything can answer it, so it always shows first.
        # Neither write waits for a database that is down: the caller gets a 503 (gateway/ops/http.py) and sends
        # again, rather than a request hanging with nobody knowing whether the message was taken.
        if await self.log.add(self.name, chat_id, public_id, "user", text, None, user_id, wait=False, files=files):
            self._publish(chat_id, "message", self._public_message(public_id, "user", text, None, files),
                          ref=public_id)
        elif files:  # sent again: the files are those the first attempt logged
            first = await self.log.get(self.name, public_id)
            await self.files.remove([f["id"] for f in files])
            files = list((first or {}).get("files") or [])
        msg = InboundMessage(
            source=Source(platform=self.name, chat_id=chat_id, user_id=user_id, chat_type="dm"),
            text=text, platform_message_id=platform_id, received_at=time.time(),
            command=parsed[0] if parsed else None,
            pending={"files": [file_ref(f["name"], f["kind"], f["size"], file=f["id"]) for f in files]}
            if files else None,
        )
        try:
            accepted = await self.accept(msg)
        except ShuttingDown:
            raise web.HTTPServiceUnavailable(text='{"error": "shutting down"}',
                                             content_type="application/json") from None
        return web.json_response({"id": public_id, "duplicate": not accepted}, status=202)

    async def download(self, msg: InboundMessage, ref: dict[str, Any], index: int) -> str:
        """An uploaded file, copied into the media folder where the agent's tools read it."""
        target = self.media_path(str(ref.get("file", ""))[:12], str(ref.get("name") or "file"))
        await self.files.copy_out(str(ref.get("file", "")), target)
        return str(target)

    async def _get_messages(self, request: web.Request) -> web.Response:
        chat_id = _valid_id(request.match_info["chat_id"], "chat_id")
        rows = await self.log.recent(self.name, chat_id)
        return web.json_response({"messages": [self._public(r) for r in rows]})

    # ---- the list of chats ----------------------------------------------------------------------

    def _chats(self) -> Any:
        if self.chats is None:
            raise web.HTTPNotImplemented(text='{"error": "this daemon keeps no list of chats"}',
                                         content_type="application/json")
        return self.chats

    async def _list_chats(self, request: web.Request) -> web.Response:
        chats = await self._chats().list(self.name)
        return web.json_response({"chats": [{"id": c.chat_id, "title": c.title, "last_activity": c.last_activity,
                                             "started_at": c.started_at} for c in chats]})

    async def _search(self, request: web.Request) -> web.Response:
        query = request.query.get("q", "")
        if len(query) > 500:
            raise _bad("q is at most 500 characters")
        hits = await self._chats().search(self.name, query)
        return web.json_response({"results": [{"chat_id": h.chat_id, "title": h.title, "role": h.role,
                                               "snippet": h.snippet, "at": h.at} for h in hits]})

    async def _rename_chat(self, request: web.Request) -> web.Response:
        chat_id = _valid_id(request.match_info["chat_id"], "chat_id")
        title = (await self._json(request)).get("title")
        if not isinstance(title, str) or not title.strip() or len(title) > 200:
            raise _bad("title must be a non-empty string of at most 200 characters")
        title = " ".join(title.split())
        if not await self._chats().rename(self.name, chat_id, title):
            raise web.HTTPNotFound(text='{"error": "this chat has no conversation yet: send a message first"}',
                                   content_type="application/json")
        self._publish(chat_id, "renamed", {"chat_id": chat_id, "title": title})
        return web.json_response({"id": chat_id, "title": title})

    async def _delete_chat(self, request: web.Request) -> web.Response:
        chat_id = _valid_id(request.match_info["chat_id"], "chat_id")
        try:
            files = await self._chats().delete(self.name, chat_id)
        except ChatBusy as exc:
            raise web.HTTPConflict(text=json.dumps({"error": str(exc)}), content_type="application/json") from None
        await self.files.remove(files)
        self._publish(chat_id, "deleted", {"chat_id": chat_id})
        return web.json_response({"deleted": chat_id})

    async def _press_button(self, request: web.Request) -> web.Response:
        chat_id = _valid_id(request.match_info["chat_id"], "chat_id")
        button_id = _valid_id(request.match_info["button_id"], "button_id")
        body = await self._json(request)
        user_id = _valid_id(body.get("user_id"), "user_id")
        # Answered at once; the notice for the presser follows on the event stream.
        self.press(ButtonPress(Source(platform=self.name, chat_id=chat_id, user_id=user_id), button_id))
        return web.json_response({"ok": True}, status=202)

    async def _events(self, request: web.Request) -> web.StreamResponse:
        chat_id = _valid_id(request.match_info["chat_id"], "chat_id")
        response = web.StreamResponse(headers={
            "Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no",
        })
        await response.prepare(request)
        queue: asyncio.Queue[str] = asyncio.Queue()
        self._subscribers.setdefault(chat_id, set()).add(queue)
        if request.query.get("activity") == "1":
            self._watchers[queue] = chat_id
        try:
            await response.write(b": connected\n\n")
            while True:
                try:
                    frame = await asyncio.wait_for(queue.get(), timeout=15)
                except TimeoutError:
                    frame = ": keep-alive\n\n"
                if not frame:
                    break
                await response.write(frame.encode())
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self._watchers.pop(queue, None)
            subs = self._subscribers.get(chat_id)
            if subs is not None:
                subs.discard(queue)
                if not subs:
                    self._subscribers.pop(chat_id, None)
        return response
