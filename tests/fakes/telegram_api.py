"""A fake Telegram Bot API server (aiohttp) speaking the real wire format, for tests and benchmarks.

The bot under test points python-telegram-bot at it through ``base_url`` (``<fake.base_url>`` + token,
the way PTB appends it). Tests inject what users do and read what the bot did:

    fake = FakeTelegram(); await fake.start()
    fake.user_message(chat_id=111, user_id=111, text="hi")          # DM
    fake.user_message(chat_id=-100, user_id=5, text="@herald_bot hi", chat_type="supergroup")
    fake.press(chat_id=111, user_id=111, message_id=7, data="approve:x")
    await fake.wait_sent(lambda sent: any(m.text == "echo: hi" for m in sent))

Faults on demand: ``fake.fail(method, kind, chat_id=..., times=...)`` with kind "429" (parameters.
retry_after), "parse" (400 can't parse entities), "403" (blocked), "400-chat" (chat not found), "409"
(another poller), "502" (bad gateway), "500", "drop" (the connection is closed without an answer),
"reset" (aborted) or "taken-reset" (the call is carried out — a message sent — and then the connection aborted
instead of answered); ``fake.outage(method, kind, seconds)`` serves a kind for a stretch instead of a count;
``fake.flood(chat_id, seconds)`` makes every send to that chat answer 429 until the window ends.

Updates stay queued until a later getUpdates confirms them
with a higher offset, exactly like Telegram; ``handed_out``, ``confirmed_at`` and ``answered_at`` record
when (``time.monotonic()``) each update went to the bot, when the bot confirmed it and when a callback query
was answered, so tests can hold the bot to an acknowledgement deadline.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import ClientSession, web

from tests.fakes.base import PlatformFake
from tests.fakes.loop_thread import ServedInThread
from tests.fakes.telegram_media import TelegramMedia

BOT_ID = 900_000_001
BOT_USERNAME = "herald_test_bot"

_JSON_KEYS = frozenset({"entities", "caption_entities", "reply_markup", "reply_parameters", "allowed_updates",
                        "commands", "link_preview_options", "scope"})
_INT_KEYS = frozenset({"chat_id", "offset", "timeout", "limit", "message_id", "message_thread_id"})
_ENTITY_TYPES = frozenset({
    "mention", "hashtag", "cashtag", "bot_command", "url", "email", "phone_number", "bold", "italic", "underline",
    "strikethrough", "spoiler", "blockquote", "expandable_blockquote", "code", "pre", "text_link", "text_mention",
    "custom_emoji", "date_time",
})


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@dataclass
class SentMessage:
    message_id: int
    chat_id: int
    text: str
    entities: list[dict[str, Any]] = field(default_factory=list)
    thread_id: int | None = None
    reply_to: int | None = None
    reply_markup: dict[str, Any] | None = None
    at: float = 0.0
    edits: int = 0
    monotonic: float = 0.0  # when it arrived, on the clock the acknowledgement records use
    # Every editMessageText that changed it: (time.monotonic() on arrival, text, entities).
    edit_log: list[tuple[float, str, list[dict[str, Any]]]] = field(default_factory=list)
    first_text: str = ""  # as it was sent, before any edit

    def __post_init__(self) -> None:
        self.first_text = self.first_text or self.text

    @property
    def texts(self) -> list[str]:
        """Every text it showed: as sent, then each edit."""
        return [self.first_text, *(text for _at, text, _entities in self.edit_log)]

    @property
    def buttons(self) -> list[dict[str, Any]]:
        rows = (self.reply_markup or {}).get("inline_keyboard") or []
        return [b for row in rows for b in row]


@dataclass
class Fault:
    method: str
    kind: str
    chat_id: int | None
    times: int
    retry_after: int = 1
    until: float | None = None  # a stretch (time.monotonic()): served until then, whatever ``times`` says
    served: int = 0
    every: int = 1  # served to every n-th request it matches (the others pass), for faults that come and go
    seen: int = 0


class FakeTelegram(TelegramMedia, PlatformFake[SentMessage]):
    runner_options = {**PlatformFake.runner_options, "handler_cancellation": True}  # long polls

    def __init__(self, token: str | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host, port)
        self.token = token or f"{secrets.randbelow(10**9)}:{secrets.token_urlsafe(24)}"
        self.updates: list[dict[str, Any]] = []  # not yet confirmed, ordered by update_id
        self.confirmed_offset = 0
        self.handed_out: dict[int, float] = {}  # update_id -> first getUpdates answer that carried it
        self.confirmed_at: dict[int, float] = {}  # update_id -> the getUpdates whose offset confirmed it
        self._update_ids = itertools.count(1)
        self._message_ids: dict[int, itertools.count[int]] = {}
        self._new_update = asyncio.Condition()
        self.by_id: dict[tuple[int, int], SentMessage] = {}
        self.chat_actions: list[tuple[int, str, int | None]] = []
        self.callback_answers: list[dict[str, Any]] = []
        self.answered_at: dict[str, float] = {}  # callback_query_id -> when answerCallbackQuery came
        self.commands: list[dict[str, Any]] | None = None
        self.webhook: dict[str, Any] | None = None
        self.calls: list[str] = []
        self.get_updates_calls = 0
        self.files: dict[str, tuple[str, bytes]] = {}
        self.file_delay = 0.0  # seconds a file download takes
        self.faults: list[Fault] = []
        self.faulted: list[tuple[float, str, Any]] = []  # (time.monotonic(), method, chat_id) of each fault served
        self.floods: dict[int, float] = {}
        self.blocked: set[int] = set()
        self.on_send: Callable[[SentMessage], None] | None = None
        self._closing = False
        self._media_init()

    # ---- lifecycle -------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """What goes into ``platforms.telegram.base_url``: PTB appends the token."""
        return f"{self.root}/bot"

    def routes(self) -> list[web.AbstractRouteDef]:
        return [web.route("*", "/bot{token}/{method}", self._api), web.get("/file/bot{token}/{path:.+}", self._file)]

    async def start(self) -> str:
        self._closing = False
        self.down = False
        await self.serve()
        return self.base_url

    async def go_down(self) -> None:
        """A network loss as far as the bot can tell: every request's connection is dropped (long polls in
        flight included) until ``come_back()``. The port stays ours, so nothing else can take it meanwhile."""
        self.down = True
        async with self._new_update:
            self._new_update.notify_all()

    def come_back(self) -> None:
        self.down = False

    async def stop(self) -> None:
        """Stop serving; ``start()`` again to come back."""
        self._closing = True
        async with self._new_update:
            self._new_update.notify_all()  # long polls in flight answer now
        await self.close()

    # ---- what users do ---------------------------------------------------------------------------

    def _next_message_id(self, chat_id: int) -> int:
        counter = self._message_ids.get(chat_id)
        if counter is None:
            counter = self._message_ids[chat_id] = itertools.count(1)
        return next(counter)

    def _push(self, update: dict[str, Any]) -> dict[str, Any]:
        update["update_id"] = next(self._update_ids)
        self.updates.append(update)
        loop_notify = self._notify()
        try:
            asyncio.get_running_loop().create_task(loop_notify)
        except RuntimeError:
            loop_notify.close()
        return update

    async def _notify(self) -> None:
        async with self._new_update:
            self._new_update.notify_all()

    @staticmethod
    def chat(chat_id: int, chat_type: str = "private", is_forum: bool = False) -> dict[str, Any]:
        if chat_type == "private":
            return {"id": chat_id, "type": "private", "first_name": f"user{chat_id}"}
        chat = {"id": chat_id, "type": chat_type, "title": f"group {chat_id}"}
        if is_forum:
            chat["is_forum"] = True
        return chat

    @staticmethod
    def user(user_id: int) -> dict[str, Any]:
        return {"id": user_id, "is_bot": False, "first_name": f"User {user_id}", "username": f"user{user_id}"}

    def message(self, chat_id: int, user_id: int, text: str | None = None, *, chat_type: str = "private",
                thread_id: int | None = None, reply_to: dict[str, Any] | None = None,
                entities: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
        msg: dict[str, Any] = {
            "message_id": self._next_message_id(chat_id), "date": int(time.time()),
            "chat": self.chat(chat_id, chat_type, is_forum=thread_id is not None),
            "from": self.user(user_id),
        }
        if text is not None:
            msg["text"] = text
            ents = list(entities or [])
            if text.startswith("/"):
                word = text.split()[0]
                ents.insert(0, {"type": "bot_command", "offset": 0, "length": utf16_len(word)})
            at = f"@{BOT_USERNAME}"
            if at in text and not any(e["type"] == "mention" for e in ents):
                prefix = text[: text.index(at)]
                if not prefix.endswith("/") and "/" not in prefix.split(" ")[-1]:
                    ents.append({"type": "mention", "offset": utf16_len(prefix), "length": utf16_len(at)})
            if ents:
                msg["entities"] = ents
        if thread_id is not None:
            msg["message_thread_id"] = thread_id
            msg["is_topic_message"] = True
        if reply_to is not None:
            msg["reply_to_message"] = reply_to
        msg.update(extra)
        return msg

    def user_message(self, chat_id: int, user_id: int | None = None, text: str | None = "hi", **kw: Any
                     ) -> dict[str, Any]:
        """A user sends a message; returns the update (``update["message"]["message_id"]``)."""
        return self._push({"message": self.message(chat_id, user_id if user_id is not None else chat_id, text, **kw)})

    def user_edit(self, update: dict[str, Any], text: str) -> dict[str, Any]:
        """The user edits the message of ``update`` to ``text``; returns the ``edited_message`` update."""
        old = update.get("message") or update["edited_message"]
        chat = old["chat"]
        new = self.message(chat["id"], old["from"]["id"], text, chat_type=chat["type"],
                           thread_id=old.get("message_thread_id"))
        new.update(message_id=old["message_id"], date=old["date"], edit_date=int(time.time()))
        return self._push({"edited_message": new})

    def bot_message_dict(self, sent: SentMessage) -> dict[str, Any]:
        msg: dict[str, Any] = {
            "message_id": sent.message_id, "date": int(sent.at), "chat": self.chat(sent.chat_id),
            "from": {"id": BOT_ID, "is_bot": True, "first_name": "Herald", "username": BOT_USERNAME},
            "text": sent.text,
        }
        if sent.entities:
            msg["entities"] = sent.entities
        if sent.thread_id is not None:
            msg["message_thread_id"] = sent.thread_id
            msg["is_topic_message"] = True
        if sent.reply_markup:
            msg["reply_markup"] = sent.reply_markup
        return msg

    def reply_to_bot(self, sent: SentMessage, user_id: int, text: str, chat_type: str = "supergroup"
                     ) -> dict[str, Any]:
        reply = self.bot_message_dict(sent)
        reply["chat"] = self.chat(sent.chat_id, chat_type)
        return self.user_message(sent.chat_id, user_id, text, chat_type=chat_type, reply_to=reply,
                                 thread_id=sent.thread_id)

    def press(self, chat_id: int, user_id: int, message_id: int, data: str,
              chat_type: str = "private") -> dict[str, Any]:
        sent = self.by_id.get((chat_id, message_id))
        message = self.bot_message_dict(sent) if sent else {
            "message_id": message_id, "date": int(time.time()), "chat": self.chat(chat_id, chat_type)}
        message["chat"] = self.chat(chat_id, chat_type, is_forum=message.get("is_topic_message", False))
        query = {"id": secrets.token_hex(8), "from": self.user(user_id), "chat_instance": str(chat_id),
                 "message": message, "data": data}
        return self._push({"callback_query": query})

    def add_file(self, content: bytes, name: str = "file.bin") -> str:
        file_id = f"f{secrets.token_hex(6)}"
        self.files[file_id] = (f"documents/{name}", content)
        return file_id

    # ---- faults ----------------------------------------------------------------------------------

    def fail(self, method: str, kind: str, chat_id: int | None = None, times: int = 1, retry_after: int = 1) -> None:
        self.faults.append(Fault(method, kind, chat_id, times, retry_after))

    def outage(self, method: str, kind: str, seconds: float, chat_id: int | None = None,
               retry_after: int = 1, every: int = 1) -> Fault:
        """``method`` answers ``kind`` (as for ``fail``) for ``seconds`` from now, to every ``every``-th request
        it matches; ``.served`` counts them, ``.until = 0`` ends it early."""
        fault = Fault(method, kind, chat_id, 1 << 30, retry_after, until=time.monotonic() + seconds, every=every)
        self.faults.append(fault)
        return fault

    def flood(self, chat_id: int, seconds: float) -> None:
        self.floods[chat_id] = time.monotonic() + seconds

    def _fault_for(self, method: str, chat_id: Any) -> Fault | None:
        for fault in self.faults:
            if fault.until is not None and time.monotonic() >= fault.until:
                continue
            if fault.method == method and (fault.chat_id is None or fault.chat_id == chat_id) and fault.times > 0:
                fault.seen += 1
                if fault.seen % fault.every:
                    continue
                fault.times -= 1
                fault.served += 1
                return fault
        return None

    # ---- what the bot did ------------------------------------------------------------------------

    def sent_to(self, chat_id: int) -> list[SentMessage]:
        return [m for m in self.sent if m.chat_id == chat_id]

    def texts(self, chat_id: int | None = None) -> list[str]:
        return [m.text for m in self.sent if chat_id is None or m.chat_id == chat_id]

    # ---- the API ---------------------------------------------------------------------------------

    async def _params(self, request: web.Request) -> dict[str, Any]:
        if request.content_type == "application/json":
            body = await request.json()
            return dict(body or {})
        raw: dict[str, Any] = dict(await request.post()) if request.can_read_body else {}
        raw.update(request.query)
        params: dict[str, Any] = {}
        for key, value in raw.items():
            if not isinstance(value, str):
                params[key] = value
            elif key in _JSON_KEYS:
                params[key] = json.loads(value)
            elif key in _INT_KEYS:
                try:
                    params[key] = int(value)
                except ValueError:
                    params[key] = value
            elif value in ("true", "false"):
                params[key] = value == "true"
            else:
                params[key] = value
        return params

    @staticmethod
    def _ok(result: Any) -> web.Response:
        return web.json_response({"ok": True, "result": result})

    @staticmethod
    def _error(code: int, description: str, parameters: dict[str, Any] | None = None) -> web.Response:
        body: dict[str, Any] = {"ok": False, "error_code": code, "description": description}
        if parameters:
            body["parameters"] = parameters
        return web.json_response(body, status=code)

    async def _api(self, request: web.Request) -> web.StreamResponse:
        if self.down:
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        if request.match_info["token"] != self.token:
            return self._error(401, "Unauthorized")
        method = request.match_info["method"]
        params = await self._params(request)
        self.calls.append(method)
        chat_id = params.get("chat_id")
        fault = self._fault_for(method, chat_id)
        if fault is not None:
            self.faulted.append((time.monotonic(), method, chat_id))
            if fault.kind == "drop":
                assert request.transport is not None
                request.transport.close()
                return web.Response()
            if fault.kind in ("reset", "taken-reset"):
                assert request.transport is not None
                if fault.kind == "taken-reset" and (taken := getattr(self, f"_m_{method}", None)) is not None:
                    await taken(params)
                request.transport.abort()
                return web.Response()
            if fault.kind == "409":
                return self._error(409, "Conflict: terminated by other getUpdates request; make sure that only "
                                        "one bot instance is running")
            if fault.kind == "502":
                return self._error(502, "Bad Gateway")
            if fault.kind == "429":
                return self._error(429, f"Too Many Requests: retry after {fault.retry_after}",
                                   {"retry_after": fault.retry_after})
            if fault.kind == "parse":
                return self._error(400, "Bad Request: can't parse entities: Can't find end of the entity "
                                        "starting at byte offset 3")
            if fault.kind == "403":
                return self._error(403, "Forbidden: bot was blocked by the user")
            if fault.kind == "400-chat":
                return self._error(400, "Bad Request: chat not found")
            return self._error(500, "Internal Server Error")
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return self._error(404, "Not Found: method not found")
        return await handler(params)

    async def _m_getMe(self, p: dict[str, Any]) -> web.Response:
        return self._ok({"id": BOT_ID, "is_bot": True, "first_name": "Herald", "username": BOT_USERNAME,
                         "can_join_groups": True, "can_read_all_group_messages": False,
                         "supports_inline_queries": False})

    async def _m_getUpdates(self, p: dict[str, Any]) -> web.Response:
        if self.webhook:
            return self._error(409, "Conflict: can't use getUpdates method while webhook is active; use "
                                    "deleteWebhook to delete the webhook first")
        self.get_updates_calls += 1
        offset = int(p.get("offset") or 0)
        if offset > self.confirmed_offset:
            self.confirmed_offset = offset
            now = time.monotonic()
            for u in self.updates:
                if u["update_id"] < offset:
                    self.confirmed_at.setdefault(u["update_id"], now)
            self.updates = [u for u in self.updates if u["update_id"] >= offset]
        limit = int(p.get("limit") or 100)
        timeout = float(p.get("timeout") or 0)
        deadline = time.monotonic() + timeout
        while True:
            pending = [u for u in self.updates if u["update_id"] >= offset][:limit]
            remaining = deadline - time.monotonic()
            if pending or remaining <= 0 or self._closing or self.down:
                now = time.monotonic()
                for u in pending:
                    self.handed_out.setdefault(u["update_id"], now)
                return self._ok(pending)
            async with self._new_update:
                try:
                    await asyncio.wait_for(self._new_update.wait(), remaining)
                except TimeoutError:
                    pass

    def _check_text(self, text: Any, entities: list[dict[str, Any]]) -> web.Response | None:
        if not isinstance(text, str) or not text.strip():
            return self._error(400, "Bad Request: message text is empty")
        size = utf16_len(text)
        if size > 4096:
            return self._error(400, "Bad Request: message is too long")
        for e in entities:
            if (e.get("type") not in _ENTITY_TYPES or e.get("offset", -1) < 0 or e.get("length", 0) <= 0
                    or e["offset"] + e["length"] > size or (e["type"] == "text_link" and not e.get("url"))):
                return self._error(400, f"Bad Request: can't parse entities: bad entity {e!r}")
        return None

    def _check_markup(self, markup: Any) -> web.Response | None:
        if not markup:
            return None
        for row in markup.get("inline_keyboard", []):
            for button in row:
                data = button.get("callback_data")
                if data is not None and not 1 <= len(data.encode()) <= 64:
                    return self._error(400, "Bad Request: BUTTON_DATA_INVALID")
                if not button.get("text"):
                    return self._error(400, "Bad Request: text buttons are unallowed in the inline keyboard")
        return None

    async def _m_sendMessage(self, p: dict[str, Any]) -> web.Response:
        chat_id = p.get("chat_id")
        if not isinstance(chat_id, int):
            return self._error(400, "Bad Request: chat not found")
        if chat_id in self.blocked:
            return self._error(403, "Forbidden: bot was blocked by the user")
        until = self.floods.get(chat_id)
        if until is not None:
            left = until - time.monotonic()
            if left > 0:
                retry = max(1, round(left))
                return self._error(429, f"Too Many Requests: retry after {retry}", {"retry_after": retry})
            del self.floods[chat_id]
        entities = p.get("entities") or []
        if p.get("parse_mode"):
            return self._error(400, "Bad Request: this fake only accepts entities, not parse_mode")
        problem = self._check_text(p.get("text"), entities) or self._check_markup(p.get("reply_markup"))
        if problem is not None:
            return problem
        reply_to = (p.get("reply_parameters") or {}).get("message_id")
        sent = SentMessage(self._next_message_id(chat_id), chat_id, p["text"], entities,
                           p.get("message_thread_id"), reply_to, p.get("reply_markup"), time.time(),
                           monotonic=time.monotonic())
        self.sent.append(sent)
        self.by_id[(chat_id, sent.message_id)] = sent
        if self.on_send is not None:
            self.on_send(sent)
        self._changed.set()
        return self._ok(self.bot_message_dict(sent))

    async def _m_editMessageText(self, p: dict[str, Any]) -> web.Response:
        sent = self.by_id.get((p.get("chat_id"), p.get("message_id")))  # type: ignore[arg-type]
        if sent is None:
            return self._error(400, "Bad Request: message to edit not found")
        entities = p.get("entities") or []
        problem = self._check_text(p.get("text"), entities) or self._check_markup(p.get("reply_markup"))
        if problem is not None:
            return problem
        if sent.text == p["text"] and sent.entities == entities and sent.reply_markup == p.get("reply_markup"):
            return self._error(400, "Bad Request: message is not modified: specified new message content and "
                                    "reply markup are exactly the same as a current content and reply markup")
        sent.text, sent.entities, sent.reply_markup = p["text"], entities, p.get("reply_markup")
        sent.edits += 1
        sent.edit_log.append((time.monotonic(), sent.text, entities))
        self._changed.set()
        return self._ok(self.bot_message_dict(sent))

    async def _m_editMessageReplyMarkup(self, p: dict[str, Any]) -> web.Response:
        sent = self.by_id.get((p.get("chat_id"), p.get("message_id")))  # type: ignore[arg-type]
        if sent is None:
            return self._error(400, "Bad Request: message to edit not found")
        problem = self._check_markup(p.get("reply_markup"))
        if problem is not None:
            return problem
        sent.reply_markup = p.get("reply_markup")
        sent.edits += 1
        self._changed.set()
        return self._ok(self.bot_message_dict(sent))

    async def _m_sendChatAction(self, p: dict[str, Any]) -> web.Response:
        self.chat_actions.append((p["chat_id"], p["action"], p.get("message_thread_id")))
        self._changed.set()
        return self._ok(True)

    async def _m_answerCallbackQuery(self, p: dict[str, Any]) -> web.Response:
        if p.get("callback_query_id") in self.answered_at:
            return self._error(400, "Bad Request: query is too old and response timeout expired or query ID is "
                                    "invalid")  # Telegram takes one answer per query
        self.answered_at[p.get("callback_query_id", "")] = time.monotonic()
        self.callback_answers.append(p)
        self._changed.set()
        return self._ok(True)

    async def _m_setMyCommands(self, p: dict[str, Any]) -> web.Response:
        import re

        for c in p.get("commands") or []:
            name, desc = c.get("command", ""), c.get("description", "")
            if not re.fullmatch(r"[a-z0-9_]{1,32}", name) or not 1 <= len(desc) <= 256:
                return self._error(400, "Bad Request: BOT_COMMAND_INVALID")
        self.commands = p.get("commands") or []
        return self._ok(True)

    async def _m_deleteMyCommands(self, p: dict[str, Any]) -> web.Response:
        self.commands = []
        return self._ok(True)

    async def _m_getFile(self, p: dict[str, Any]) -> web.Response:
        entry = self.files.get(p.get("file_id", ""))
        if entry is None:
            return self._error(400, "Bad Request: invalid file_id")
        path, content = entry
        return self._ok({"file_id": p["file_id"], "file_unique_id": p["file_id"] + "u", "file_size": len(content),
                         "file_path": path})

    async def _file(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return self._error(401, "Unauthorized")
        await asyncio.sleep(self.file_delay)
        for path, content in self.files.values():
            if path == request.match_info["path"]:
                return web.Response(body=content)
        return self._error(404, "Not Found")

    async def _m_setWebhook(self, p: dict[str, Any]) -> web.Response:
        if not p.get("url"):
            self.webhook = None
        else:
            self.webhook = {"url": p["url"], "secret_token": p.get("secret_token"),
                            "allowed_updates": p.get("allowed_updates")}
        return self._ok(True)

    async def _m_deleteWebhook(self, p: dict[str, Any]) -> web.Response:
        self.webhook = None
        if p.get("drop_pending_updates"):
            self.updates.clear()
        return self._ok(True)

    async def _m_getWebhookInfo(self, p: dict[str, Any]) -> web.Response:
        info = {"url": (self.webhook or {}).get("url", ""), "has_custom_certificate": False,
                "pending_update_count": len(self.updates)}
        return self._ok(info)

    async def deliver_webhook(self, update: dict[str, Any] | None = None, secret_token: str | None = None
                              ) -> int:
        """POST one update (default: the oldest pending) to the registered webhook, as Telegram does.

        Returns the HTTP status; a 2xx confirms the update (it leaves the queue), anything else keeps it.
        """
        assert self.webhook, "no webhook registered"
        if update is None:
            update = self.updates[0]
        token = secret_token if secret_token is not None else self.webhook.get("secret_token")
        headers = {"X-Telegram-Bot-Api-Secret-Token": token} if token else {}
        async with ClientSession() as session, session.post(self.webhook["url"], json=update,
                                                              headers=headers) as resp:
            status = resp.status
        if 200 <= status < 300 and update in self.updates:
            self.updates.remove(update)
        return status


class FakeTelegramThread(ServedInThread):
    """A FakeTelegram served from a background thread with its own loop, for tests that run ``herald run``.

    ``call(fn, *args)`` runs ``fn(fake, *args)`` on the fake's loop and returns its result.
    """

    thread_name = "fake-telegram"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(FakeTelegram(**kwargs))

    @property
    def token(self) -> str:
        return self.fake.token

    @property
    def base_url(self) -> str:
        return self.fake.base_url

