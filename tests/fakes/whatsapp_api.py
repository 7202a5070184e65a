"""A fake WhatsApp Cloud API (aiohttp) speaking Meta's wire format, for tests and benchmarks: the Graph API
(``/{phone number id}/messages``, ``/{phone number id}/media``, ``/{media id}``, the number itself) and the webhooks
Meta POSTs, signed with the app secret.

The bot under test points at it with ``platforms.whatsapp.api_base_url`` (``fake.api_url``). Tests make people
act and read what the bot did:

    fake = FakeWhatsApp(); await fake.start()
    fake.webhook_url = "http://127.0.0.1:<port>/whatsapp/webhook"
    body = fake.message("+15551230001", "hi")                 # a webhook body, as Meta sends it
    status, _, seconds = await fake.post(body)                # signed, like Meta; (HTTP status, body, seconds)
    await fake.wait_sent(lambda sent: any(m.text == "echo: hi" for m in sent))

As Meta does, the fake keeps each person's 24-hour window (opened by ``message`` and its kin; ``age(user,
hours)`` moves it into the past): a free-form message outside it is taken and then reported failed with
131047 in a status webhook (``window_errors = "sync"`` refuses it at once instead). With ``statuses`` on, every
message the bot sends is reported ``sent`` then ``delivered`` to ``webhook_url``. Limits are Meta's: a text's
4096 characters, a reply-button body's 1024 and three buttons of 20-character titles, a list's ten rows of
24-character titles, template parameters without line breaks or tabs; a violation is refused with 131009 (or
100) as Meta refuses it.

Faults on demand: ``fail(kind, to=..., times=...)`` with kind "131056" (pair rate limit), "130429"
(throughput), "131047" (outside the window), "190" (bad token), "500", "drop" (connection closed), or
"status:<code>" (taken, then reported failed with that code); ``file_delay`` slows every media download.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import ClientSession, web

from tests.fakes.base import PlatformFake

VERSION = "v23.0"
PHONE_NUMBER_ID = "1098765432100"
DISPLAY_NUMBER = "15550009999"
WINDOW = 24 * 3600.0


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@dataclass
class WaMessage:
    id: str
    to: str  # E.164
    type: str  # text | interactive | template | image | document | audio | video
    text: str  # what the person reads: the body, a template with its parameters filled in, a caption
    payload: dict[str, Any]
    monotonic: float = 0.0
    buttons: list[str] = field(default_factory=list)  # what a tap on each reply button or list row sends back
    titles: list[str] = field(default_factory=list)
    reply_to: str | None = None
    template: str | None = None
    media: tuple[str, bytes] | None = None  # (filename, bytes) of a file sent


@dataclass
class Fault:
    kind: str
    to: str | None
    times: int


class FakeWhatsApp(PlatformFake[WaMessage]):
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host, port)
        self.token = "EAA" + secrets.token_urlsafe(40).replace("-", "a").replace("_", "b")
        self.app_secret = secrets.token_hex(16)
        self.verify_token = secrets.token_urlsafe(12)
        self.phone_number_id = PHONE_NUMBER_ID
        self.webhook_url: str | None = None
        self.statuses = False  # report sent and delivered for every message the bot sends
        self.window_errors = "status"  # outside the window: "status" (a failed status later) or "sync"
        self.templates: dict[tuple[str, str], str] = {}  # (name, language) -> body with {{1}} or {{name}}
        self.last_inbound: dict[str, float] = {}  # E.164 -> when the person last wrote (time.time())
        self.reads: list[tuple[str, bool, float]] = []  # (message id, with the typing indicator, monotonic)
        self.media: dict[str, tuple[str, str, bytes]] = {}  # media id -> (mime, filename, bytes)
        self.uploads: list[tuple[str, str, int]] = []  # (mime, filename, size) of each upload
        self.file_delay = 0.0
        self.faults: list[Fault] = []
        self.refused: list[tuple[int, dict[str, Any]]] = []  # (code, payload) of each send refused
        self.posted: list[tuple[int, dict[str, Any]]] = []  # (HTTP status, body) of each webhook POST
        self.statuses_taken = 0  # status webhooks the daemon answered 200
        self.on_send: Callable[[WaMessage], None] | None = None
        self.http: ClientSession | None = None
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[Any]] = set()

    # ---- lifecycle -------------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        """What goes into ``platforms.whatsapp.api_base_url``."""
        return f"{self.root}/{VERSION}"

    def routes(self) -> list[web.AbstractRouteDef]:
        return [web.post(f"/{VERSION}/{{phone}}/messages", self._messages),
                web.post(f"/{VERSION}/{{phone}}/media", self._upload),
                web.get(f"/{VERSION}/{{object_id}}", self._object),
                web.get("/lookaside/{media_id}", self._download)]

    async def start(self) -> str:
        await self.serve()
        self.http = ClientSession()
        return self.api_url

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.http is not None:
            await self.http.close()
        await self.close()

    def env(self) -> dict[str, str]:
        """The daemon's secrets, under the config's default variable names."""
        return {"WHATSAPP_ACCESS_TOKEN": self.token, "WHATSAPP_APP_SECRET": self.app_secret,
                "WHATSAPP_VERIFY_TOKEN": self.verify_token}

    def wamid(self) -> str:
        return f"wamid.HBgL{next(self._ids):010d}{secrets.token_hex(6).upper()}"

    # ---- what people do: webhook bodies ------------------------------------------------------------

    def envelope(self, value: dict[str, Any]) -> dict[str, Any]:
        return {"object": "whatsapp_business_account", "entry": [{"id": "102290129340398", "changes": [{
            "field": "messages", "value": {"messaging_product": "whatsapp", "metadata": {
                "display_phone_number": DISPLAY_NUMBER, "phone_number_id": self.phone_number_id}, **value}}]}]}

    def incoming(self, user: str, kind: str, content: dict[str, Any], *, context: str | None = None,
                 name: str = "Alice", at: float | None = None) -> dict[str, Any]:
        """A person's message of ``kind`` as a webhook body; it opens their window (at ``at``, default now)."""
        at = time.time() if at is None else at
        self.last_inbound[user] = max(self.last_inbound.get(user, 0.0), at)
        digits = user.lstrip("+")
        message: dict[str, Any] = {"from": digits, "id": self.wamid(), "timestamp": str(int(at)), "type": kind,
                                   kind: content}
        if context:
            message["context"] = {"from": DISPLAY_NUMBER, "id": context}
        return self.envelope({"contacts": [{"profile": {"name": name}, "wa_id": digits}], "messages": [message]})

    def message(self, user: str, text: str, **kw: Any) -> dict[str, Any]:
        return self.incoming(user, "text", {"body": text}, **kw)

    def press(self, user: str, message: WaMessage, button_id: str) -> dict[str, Any]:
        """A tap on the reply button (or list row) of ``message`` that sends ``button_id``."""
        index = message.buttons.index(button_id)
        if message.payload["interactive"]["type"] == "list":
            reply = {"type": "list_reply", "list_reply": {"id": button_id, "title": message.titles[index]}}
        else:
            reply = {"type": "button_reply", "button_reply": {"id": button_id, "title": message.titles[index]}}
        return self.incoming(user, "interactive", reply, context=message.id)

    def add_media(self, content: bytes, mime: str, filename: str | None = None) -> str:
        media_id = str(10**15 + next(self._ids))
        self.media[media_id] = (mime, filename or "", content)
        return media_id

    def media_message(self, user: str, kind: str, content: bytes, mime: str, *, caption: str = "",
                      filename: str | None = None, voice: bool = False) -> dict[str, Any]:
        media_id = self.add_media(content, mime, filename)
        body: dict[str, Any] = {"id": media_id, "mime_type": mime, "sha256": hashlib.sha256(content).hexdigest()}
        if caption:
            body["caption"] = caption
        if filename:
            body["filename"] = filename
        if voice:
            body["voice"] = True
        return self.incoming(user, kind, body)

    def status(self, message_id: str, state: str, to: str, code: int | None = None) -> dict[str, Any]:
        status: dict[str, Any] = {"id": message_id, "status": state, "timestamp": str(int(time.time())),
                                  "recipient_id": to.lstrip("+")}
        if code is not None:
            status["errors"] = [{"code": code, "title": _TITLES.get(code, "Message failed to send"),
                                 "message": _TITLES.get(code, "Message failed to send"),
                                 "error_data": {"details": _DETAILS.get(code, "")}}]
        return self.envelope({"statuses": [status]})

    def age(self, user: str, hours: float) -> None:
        """The person's last message is ``hours`` old now (their window closes past 24)."""
        self.last_inbound[user] = time.time() - hours * 3600

    # ---- delivering: signed POSTs ----------------------------------------------------------------

    def sign(self, raw: bytes, secret: str | None = None) -> str:
        return "sha256=" + hmac.new((secret or self.app_secret).encode(), raw, hashlib.sha256).hexdigest()

    async def post(self, body: dict[str, Any] | bytes, url: str | None = None, *, secret: str | None = None,
                   signature: str | None = None) -> tuple[int, str, float]:
        """POST ``body`` to the webhook as Meta does (X-Hub-Signature-256 over the raw bytes); ``signature``
        instead of the right one ("" for none). Returns (status, body, seconds to the answer)."""
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        sig = self.sign(raw, secret) if signature is None else signature
        if sig:
            headers["X-Hub-Signature-256"] = sig
        assert self.http is not None and (url or self.webhook_url)
        started = time.monotonic()
        async with self.http.post(url or self.webhook_url, data=raw, headers=headers) as resp:
            text = await resp.text()
        self.posted.append((resp.status, body if isinstance(body, dict) else {}))
        return resp.status, text, time.monotonic() - started

    def _later(self, body: dict[str, Any]) -> None:
        """Post ``body`` soon, retrying until the daemon takes it (as Meta does, quicker)."""
        async def post() -> None:
            for _ in range(50):
                try:
                    if (await self.post(body))[0] == 200:
                        self.statuses_taken += 1
                        return
                except OSError:
                    pass
                await asyncio.sleep(0.1)

        task = asyncio.get_running_loop().create_task(post())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- faults ----------------------------------------------------------------------------------

    def fail(self, kind: str, to: str | None = None, times: int = 1) -> None:
        self.faults.append(Fault(kind, to, times))

    def _fault_for(self, to: str) -> Fault | None:
        for fault in self.faults:
            if fault.to in (None, to) and fault.times > 0:
                fault.times -= 1
                return fault
        return None

    @staticmethod
    def _error(code: int, message: str, details: str = "", status: int = 400) -> web.Response:
        error: dict[str, Any] = {"message": f"(#{code}) {message}", "type": "OAuthException", "code": code,
                                 "fbtrace_id": secrets.token_urlsafe(8)}
        if details:
            error["error_data"] = {"messaging_product": "whatsapp", "details": details}
        return web.json_response({"error": error}, status=status)

    def _authorised(self, request: web.Request) -> web.Response | None:
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return self._error(190, "Invalid OAuth access token - Cannot parse access token", status=401)
        return None

    # ---- the Graph API ---------------------------------------------------------------------------

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        refused = self._authorised(request)
        if refused is not None:
            return refused
        if request.match_info["phone"] != self.phone_number_id:
            return self._error(100, "Unsupported post request", "no such phone number id")
        payload = await request.json()
        if payload.get("messaging_product") != "whatsapp":
            return self._error(100, "Invalid parameter", "messaging_product must be whatsapp")
        if payload.get("status") == "read":
            self.reads.append((str(payload.get("message_id")), "typing_indicator" in payload, time.monotonic()))
            return web.json_response({"success": True})
        to = "+" + str(payload.get("to") or "").lstrip("+")
        fault = self._fault_for(to)
        if fault is not None and not fault.kind.startswith("status:"):
            return await self._serve_fault(request, fault.kind)
        problem, sent = self._read_message(to, payload)
        if problem is not None:
            self.refused.append((problem[0], payload))
            return self._error(*problem)
        assert sent is not None
        outside = sent.template is None and time.time() > self.last_inbound.get(to, 0.0) + WINDOW
        if outside and self.window_errors == "sync":
            self.refused.append((131047, payload))
            return self._error(131047, _TITLES[131047], _DETAILS[131047])
        answer = {"messaging_product": "whatsapp", "contacts": [{"input": to.lstrip("+"), "wa_id": to.lstrip("+")}],
                  "messages": [{"id": sent.id}]}
        code = int(fault.kind.split(":")[1]) if fault is not None else (131047 if outside else None)
        if code is not None:  # taken, then reported failed, as Meta does
            self.refused.append((code, payload))
            if self.webhook_url:
                self._later(self.status(sent.id, "failed", to, code))
            return web.json_response(answer)
        sent.monotonic = time.monotonic()
        self.sent.append(sent)
        self._changed.set()
        if self.on_send is not None:
            self.on_send(sent)
        if self.statuses and self.webhook_url:
            self._later(self.status(sent.id, "sent", to))
            self._later(self.status(sent.id, "delivered", to))
        return web.json_response(answer)

    async def _serve_fault(self, request: web.Request, kind: str) -> web.StreamResponse:
        if kind == "drop":
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        if kind == "500":
            return web.json_response({"error": {"message": "An unknown error occurred", "code": 1}}, status=500)
        code = int(kind)
        status = 401 if code == 190 else 400
        return self._error(code, _TITLES.get(code, "error"), _DETAILS.get(code, ""), status=status)

    def _read_message(self, to: str, p: dict[str, Any]) -> tuple[tuple[int, str, str] | None, WaMessage | None]:
        """The message ``p`` asks for, or (code, message, details) of why Meta would refuse it."""
        kind = p.get("type")
        reply_to = (p.get("context") or {}).get("message_id")
        sent = WaMessage(self.wamid(), to, str(kind), "", p, reply_to=reply_to)
        body = p.get(kind) if isinstance(p.get(kind), dict) else {}
        if kind == "text":
            sent.text = str(body.get("body") or "")
            if not sent.text or len(sent.text) > 4096:
                return (100, "Invalid parameter", "text.body must be 1-4096 characters"), None
        elif kind == "interactive":
            problem = self._read_interactive(body, sent)
            if problem:
                return (131009, "Parameter value is not valid", problem), None
        elif kind == "template":
            problem = self._read_template(body, sent)
            if problem:
                return problem, None
        elif kind in ("image", "document", "audio", "video", "sticker"):
            media = self.media.get(str(body.get("id")))
            if media is None:
                return (131053, "Media upload error", "no media with that id"), None
            if kind == "audio" and "caption" in body:
                return (100, "Invalid parameter", "audio takes no caption"), None
            sent.text = str(body.get("caption") or "")
            sent.media = (str(body.get("filename") or media[1]), media[2])
        else:
            return (100, "Invalid parameter", f"unknown type {kind!r}"), None
        return None, sent

    @staticmethod
    def _read_interactive(body: dict[str, Any], sent: WaMessage) -> str | None:
        text = str((body.get("body") or {}).get("text") or "")
        action = body.get("action") or {}
        sent.text = text
        if body.get("type") == "button":
            buttons = action.get("buttons") or []
            if not text or len(text) > 1024:
                return "interactive.body.text must be 1-1024 characters for reply buttons"
            if not 1 <= len(buttons) <= 3:
                return "reply buttons: 1 to 3"
            replies = [b.get("reply") or {} for b in buttons]
            sent.buttons = [str(r.get("id") or "") for r in replies]
            sent.titles = [str(r.get("title") or "") for r in replies]
            if len(set(sent.titles)) != len(sent.titles):
                return "button titles must be unique"
            if any(not t or len(t) > 20 for t in sent.titles) or any(not i or len(i) > 256 for i in sent.buttons):
                return "a button's title is 1-20 characters, its id 1-256"
            return None
        if body.get("type") == "list":
            sections = action.get("sections") or []
            rows = [r for s in sections for r in s.get("rows") or []]
            if not text or len(text) > 4096:
                return "interactive.body.text must be 1-4096 characters for a list"
            if not action.get("button") or len(action["button"]) > 20:
                return "a list's button is 1-20 characters"
            if not 1 <= len(rows) <= 10 or (len(sections) > 1 and not all(s.get("title") for s in sections)):
                return "a list has 1-10 rows, and titled sections when there are several"
            sent.buttons = [str(r.get("id") or "") for r in rows]
            sent.titles = [str(r.get("title") or "") for r in rows]
            if any(not t or len(t) > 24 for t in sent.titles) or any(not i or len(i) > 200 for i in sent.buttons) \
                    or any(len(r.get("description") or "") > 72 for r in rows):
                return "a row's title is 1-24 characters, its id 1-200, its description up to 72"
            return None
        return f"unknown interactive type {body.get('type')!r}"

    def _read_template(self, body: dict[str, Any], sent: WaMessage) -> tuple[int, str, str] | None:
        name, language = body.get("name"), (body.get("language") or {}).get("code")
        text = self.templates.get((str(name), str(language)))
        if text is None:
            return 132001, "Template name does not exist in the translation", f"{name} ({language})"
        params = [p for c in body.get("components") or [] if c.get("type") == "body" for p in c.get("parameters", [])]
        wanted = re.findall(r"\{\{(\w+)\}\}", text)
        if len(params) != len(wanted):
            return 132000, "Number of parameters does not match the expected number of params", ""
        for param, slot in zip(params, wanted, strict=True):
            value = str(param.get("text") or "")
            if re.search(r"[\n\t]| {5,}", value) or not value:
                return 132018, "There's an issue with the parameters in your template", \
                    "Param text cannot have new-line/tab characters or more than 4 consecutive spaces"
            key = param.get("parameter_name") or slot
            text = text.replace("{{" + str(key) + "}}", value, 1)
        sent.text, sent.template = text, str(name)
        return None

    async def _upload(self, request: web.Request) -> web.Response:
        refused = self._authorised(request)
        if refused is not None:
            return refused
        form = await request.post()
        file = form.get("file")
        if form.get("messaging_product") != "whatsapp" or file is None or not hasattr(file, "file"):
            return self._error(100, "Invalid parameter", "messaging_product and file are required")
        content = file.file.read()
        mime = str(form.get("type") or file.content_type)
        self.uploads.append((mime, file.filename, len(content)))
        return web.json_response({"id": self.add_media(content, mime, file.filename)})

    async def _object(self, request: web.Request) -> web.Response:
        refused = self._authorised(request)
        if refused is not None:
            return refused
        object_id = request.match_info["object_id"]
        if object_id == self.phone_number_id:
            proof = request.query.get("appsecret_proof")
            if proof is not None and proof != hmac.new(self.app_secret.encode(), self.token.encode(),
                                                       hashlib.sha256).hexdigest():
                return self._error(100, "Invalid appsecret_proof provided in the API argument")
            return web.json_response({"display_phone_number": "+1 555-000-9999", "verified_name": "Herald Test",
                                      "id": self.phone_number_id})
        media = self.media.get(object_id)
        if media is None:
            return self._error(100, "Unsupported get request", f"object {object_id} does not exist", status=404)
        mime, _name, content = media
        return web.json_response({"messaging_product": "whatsapp", "url": f"{self.root}/lookaside/{object_id}",
                                  "mime_type": mime, "sha256": hashlib.sha256(content).hexdigest(),
                                  "file_size": len(content), "id": object_id})

    async def _download(self, request: web.Request) -> web.Response:
        refused = self._authorised(request)
        if refused is not None:
            return refused
        media = self.media.get(request.match_info["media_id"])
        if media is None:
            return web.Response(status=404)
        if self.file_delay:
            await asyncio.sleep(self.file_delay)
        return web.Response(body=media[2], content_type=media[0])

    # ---- what the bot did ------------------------------------------------------------------------

    def sent_to(self, user: str) -> list[WaMessage]:
        return [m for m in self.sent if m.to == user]

    def texts(self, user: str | None = None) -> list[str]:
        return [m.text for m in self.sent if user is None or m.to == user]


_TITLES = {131047: "Re-engagement message", 131056: "(Business Account, Consumer Account) pair rate limit hit",
           130429: "Rate limit hit", 190: "Invalid OAuth access token", 131026: "Message undeliverable"}
_DETAILS = {131047: "Message failed to send because more than 24 hours have passed since the customer last "
                    "replied to this number.",
            131056: "Too many messages sent from the sender phone number to the same recipient phone number in a "
                    "short period of time.",
            130429: "Cloud API message throughput has been reached."}
