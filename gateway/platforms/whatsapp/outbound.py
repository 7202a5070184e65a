"""WhatsApp outbound: text, reply buttons and lists, templates outside the 24-hour window, files, typing and
read receipts, through the Cloud API's ``/messages`` and ``/media``.

Inside a person's window (gateway/platforms/whatsapp/window.py) a chunk goes as a text message, or with
buttons as an interactive message: up to three as reply buttons (whose body holds 1024 characters: a longer
chunk's head goes first as text), more as a list message (its rows hold the choices; the approval broker's
four do). Outside it the chunk goes as the configured template (``platforms.whatsapp.templates.notify``), its
words in the template's parameters, in several templates if it is long; without a template it is refused with a
``PermanentError`` saying why and what to do, which the outbox records and the dashboard shows. WhatsApp saying
so on a send (131047) takes the same path.

Rate limits slow the chat that met them: the pair rate limit with one person (131056) and Meta's throughput
limits become ``RateLimited`` with a wait that doubles while they last. WhatsApp can also refuse a message after
taking it (a failed status): the words of the last few thousand messages are kept for a while, so the adapter
can send them again as a template or after the rate limit (``resend``).

The typing indicator is sent with a read receipt of the person's latest message (one call); a message that gets
no turn (a command) is marked read on its own a moment after it arrived.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from gateway.kernel.chunking import chunk_text
from gateway.platforms.base import Button, Outbound, OutboundMessage, PermanentError, TransientError
from gateway.platforms.buttons import ButtonIds
from gateway.platforms.whatsapp import markup
from gateway.platforms.whatsapp.config import TEXT, Template, Templates
from gateway.platforms.whatsapp.transport import (
    PAIR_RATE_LIMIT,
    Graph,
    GraphError,
    WindowClosed,
    map_error,
)
from gateway.platforms.whatsapp.window import ServiceWindow

log = structlog.get_logger("herald.whatsapp")

MAX_TEXT = 4096
BUTTON_BODY_MAX = 1024
REPLY_BUTTONS_MAX = 3
BUTTON_TITLE_MAX = 20
LIST_ROWS_MAX = 10
ROW_TITLE_MAX = 24
ROW_DESCRIPTION_MAX = 72
BUTTON_ID_MAX = 200  # a list row's id (a reply button's holds 256)
LIST_BUTTON = "Choose"
CAPTION_MAX = 1024
PAIR_BACKOFF = (4.0, 8.0, 16.0, 32.0, 60.0)  # seconds, while the pair rate limit with one person lasts
THROUGHPUT_BACKOFF = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
TYPING_EVERY = 20.0  # the indicator shows for up to 25 s, or until the next message
READ_DELAY = 1.0  # a message whose turn shows typing by then is marked read with it
RECENT = 4096  # sent messages whose words are kept for a resend
RECENT_SECONDS = 3600.0
# Files by MIME type: how WhatsApp sends them and up to how many bytes; anything else goes as a document.
MEDIA = {"image/jpeg": "image", "image/png": "image", "video/mp4": "video", "video/3gpp": "video",
         "audio/aac": "audio", "audio/amr": "audio", "audio/mpeg": "audio", "audio/mp4": "audio", "audio/ogg": "audio"}
LIMITS = {"image": 5 * 1024**2, "video": 16 * 1024**2, "audio": 16 * 1024**2, "document": 100 * 1024**2}


@dataclass
class Sent:
    """A message sent lately: enough to send its words again."""

    chat: str
    payload: dict[str, Any]
    text: str  # finished, for a template
    at: float
    attempts: int = 0


def digits(chat: str) -> str:
    return chat.lstrip("+")


def e164(chat: str) -> str:
    return "+" + chat.lstrip("+")


def _ago(seconds: float) -> str:
    if seconds < 7200:
        return f"{int(seconds // 60)} minutes ago"
    if seconds < 2 * 86400:
        return f"{int(seconds // 3600)} hours ago"
    return f"{int(seconds // 86400)} days ago"


def _title(label: str, limit: int) -> str:
    label = " ".join(label.split()) or "…"
    return label if len(label) <= limit else label[:limit - 1] + "…"


def template_pieces(text: str, size: int) -> list[str]:
    """One line of text in pieces of at most ``size`` characters, cut at spaces; numbered when several."""
    line = markup.one_line(text) or "…"
    if len(line) <= size:
        return [line]
    room = size - len("(99/99) ")
    pieces: list[str] = []
    while line:
        if len(line) <= room:
            pieces.append(line)
            break
        cut = line.rfind(" ", room // 2, room + 1)
        cut = cut if cut > 0 else room
        pieces.append(line[:cut].rstrip())
        line = line[cut:].lstrip()
    return [f"({i}/{len(pieces)}) {p}" for i, p in enumerate(pieces, 1)]


def template_payload(template: Template, words: str) -> dict[str, Any]:
    if isinstance(template.body, dict):
        parameters = [{"type": "text", "parameter_name": key, "text": value.replace(TEXT, words)}
                      for key, value in template.body.items()]
    else:
        parameters = [{"type": "text", "text": value.replace(TEXT, words)} for value in template.body]
    return {"type": "template", "template": {"name": template.name, "language": {"code": template.language},
                                             "components": [{"type": "body", "parameters": parameters}]}}


class WhatsAppOutbound(Outbound):
    def __init__(self, graph: Callable[[], Graph | None], window: ServiceWindow, templates: Templates) -> None:
        self._graph = graph
        self.window = window
        self.templates = templates
        self.buttons = ButtonIds(BUTTON_ID_MAX)
        self.recent: OrderedDict[str, Sent] = OrderedDict()  # message id -> what it said
        self._pair: dict[str, int] = {}  # chat -> 131056s in a row
        self._throughput = 0
        self.latest: OrderedDict[str, str] = OrderedDict()  # chat -> the person's latest message id
        self._read: dict[str, str] = {}  # chat -> the message id marked read last
        self._typed: dict[str, float] = {}  # chat -> when typing was last shown
        self._tasks: set[asyncio.Task[Any]] = set()

    def graph(self) -> Graph:
        graph = self._graph()
        if graph is None:
            raise TransientError("whatsapp is not connected right now")
        return graph

    # ---- formatting ------------------------------------------------------------------------------

    def render(self, markdown: str) -> str:
        return markup.render(markdown)

    def measure(self, text: str) -> int:
        return markup.measure(text)

    # ---- sending ---------------------------------------------------------------------------------

    async def send(self, chat_id: str, text: str, message: OutboundMessage, *,
                   idempotency_key: str | None = None) -> list[str]:
        chat = e164(chat_id)
        self._typed.pop(chat, None)  # a message ends the indicator: the next turn's typing shows it again
        if not self.window.is_open(chat):
            return await self.template(chat, markup.finish(text))
        try:
            return await self._free_form(chat, text, message)
        except WindowClosed:
            self.window.closed(chat)
            log.info("whatsapp_window_closed", chat_id=chat)
            return await self.template(chat, markup.finish(text))

    async def _free_form(self, chat: str, text: str, message: OutboundMessage) -> list[str]:
        context = {"context": {"message_id": message.reply_to}} if message.reply_to else {}
        buttons = message.buttons
        if not buttons:
            body = markup.finish(text) if text.strip() else "…"
            return [await self.post(chat, {"type": "text", "text": {"body": body, "preview_url": False}, **context},
                                    body)]
        if len(buttons) > REPLY_BUTTONS_MAX:
            body = markup.finish(text) if text.strip() else "…"
            return [await self.post(chat, self._list(body, buttons) | context, body)]
        pieces = chunk_text(text, BUTTON_BODY_MAX, markup.measure, markup.WHATSAPP) or ["…"]
        ids: list[str] = []
        for index, piece in enumerate(pieces):
            body = markup.finish(piece) if piece.strip() else "…"
            here = context if index == 0 else {}
            if index < len(pieces) - 1:
                payload = {"type": "text", "text": {"body": body, "preview_url": False}, **here}
            else:
                payload = self._reply_buttons(body, buttons) | here
            ids.append(await self.post(chat, payload, body))
        return ids

    def _reply_buttons(self, body: str, buttons: list[Button]) -> dict[str, Any]:
        titles: list[str] = []
        for b in buttons:  # WhatsApp refuses two buttons of one title: labels cut alike are numbered
            title = _title(b.label, BUTTON_TITLE_MAX)
            if title in titles:
                suffix = f" {len(titles) + 1}"
                title = _title(b.label, BUTTON_TITLE_MAX - len(suffix)) + suffix
            titles.append(title)
        return {"type": "interactive", "interactive": {
            "type": "button", "body": {"text": body},
            "action": {"buttons": [{"type": "reply", "reply": {"id": self.buttons.encode(b.id), "title": title}}
                                   for b, title in zip(buttons, titles, strict=True)]}}}

    def _list(self, body: str, buttons: list[Button]) -> dict[str, Any]:
        if len(buttons) > LIST_ROWS_MAX:
            log.warning("whatsapp_buttons_dropped", shown=LIST_ROWS_MAX, dropped=len(buttons) - LIST_ROWS_MAX)
        rows = []
        for b in buttons[:LIST_ROWS_MAX]:
            row = {"id": self.buttons.encode(b.id), "title": _title(b.label, ROW_TITLE_MAX)}
            if row["title"] != " ".join(b.label.split()):  # cut short: the whole label goes underneath
                row["description"] = _title(b.label, ROW_DESCRIPTION_MAX)
            rows.append(row)
        return {"type": "interactive", "interactive": {
            "type": "list", "body": {"text": body},
            "action": {"button": LIST_BUTTON, "sections": [{"rows": rows}]}}}

    async def post(self, chat: str, payload: dict[str, Any], text: str) -> str:
        """One message to ``chat``; its id. Rate limits and errors in delivery's terms."""
        try:
            answer = await self.graph().message({"recipient_type": "individual", "to": digits(chat), **payload})
        except GraphError as exc:
            raise map_error(exc, self._backoff(chat, exc)) from exc
        except Exception as exc:
            raise map_error(exc, 0.0) from exc
        self._pair.pop(chat, None)
        self._throughput = 0
        messages = answer.get("messages")
        message_id = messages[0].get("id") if isinstance(messages, list) and messages and \
            isinstance(messages[0], dict) else None
        if not isinstance(message_id, str) or not message_id:
            raise PermanentError("WhatsApp took the message but gave it no id")
        self._remember(message_id, Sent(chat, payload, text, time.time()))
        return message_id

    def _backoff(self, chat: str, exc: GraphError) -> float:
        if exc.code == PAIR_RATE_LIMIT:
            count = self._pair[chat] = self._pair.get(chat, 0) + 1
            return PAIR_BACKOFF[min(count, len(PAIR_BACKOFF)) - 1]
        self._throughput += 1
        return THROUGHPUT_BACKOFF[min(self._throughput, len(THROUGHPUT_BACKOFF)) - 1]

    def _remember(self, message_id: str, sent: Sent) -> None:
        self.recent[message_id] = sent
        horizon = sent.at - RECENT_SECONDS
        while self.recent and (len(self.recent) > RECENT or next(iter(self.recent.values())).at < horizon):
            self.recent.popitem(last=False)

    # ---- outside the window: the template ----------------------------------------------------------

    async def template(self, chat: str, text: str) -> list[str]:
        """``text`` (finished) as the notify template, in as many as it takes; ``PermanentError`` without one."""
        template = self.templates.notify
        if not template.name:
            since = self.window.since(chat)
            when = "has never written" if since is None else f"last wrote {_ago(since)}"
            raise PermanentError(
                f"not sent: more than 24 hours after a person's last message WhatsApp delivers only an approved "
                f"template, and platforms.whatsapp.templates.notify is not set ({chat} {when}). Set it, or ask "
                f"them to send a message first")
        ids = []
        for piece in template_pieces(text, template.max_text):
            try:
                ids.append(await self.post(chat, template_payload(template, piece), piece))
            except PermanentError as exc:
                raise PermanentError(f"the template {template.name!r} ({template.language}) was refused: {exc}") \
                    from exc
        return ids

    async def resend(self, message_id: str, window_closed: bool) -> list[str] | None:
        """A message WhatsApp refused after taking it, sent again: as the template when its window closed, as it
        was after a rate limit (the wait doubling each time). None when its words are no longer known, or it
        was tried three times already. Raises ``DeliveryError`` when the new attempt fails."""
        sent = self.recent.pop(message_id, None)
        if sent is None or sent.attempts >= 3:
            return None
        if window_closed:
            self.window.closed(sent.chat)
            if sent.payload.get("type") == "template" or not self.templates.notify.name:
                return None
            return await self.template(sent.chat, sent.text)
        count = self._pair[sent.chat] = self._pair.get(sent.chat, 0) + 1
        await asyncio.sleep(PAIR_BACKOFF[min(count, len(PAIR_BACKOFF)) - 1])
        new_id = await self.post(sent.chat, sent.payload, sent.text)
        self.recent[new_id].attempts = sent.attempts + 1
        return [new_id]

    # ---- files -----------------------------------------------------------------------------------

    async def send_file(self, chat_id: str, path: str | Path, filename: str, mime: str, caption: str = "",
                        *, reply_to: str | None = None) -> list[str]:
        """Upload a file to /media and send it by its id, with ``caption`` (markdown); the message ids. A file
        over WhatsApp's limit for its kind goes as a document when that takes it, else ``PermanentError`` says
        the size and the limit."""
        chat = e164(chat_id)
        if not self.window.is_open(chat):
            since = self.window.since(chat)
            raise PermanentError(f"not sent: {filename} cannot go to {chat} now: more than 24 hours after a "
                                 f"person's last message WhatsApp delivers only templates "
                                 f"({'never wrote' if since is None else 'last wrote ' + _ago(since)})")
        path = Path(path)
        size = await asyncio.to_thread(lambda: path.stat().st_size)
        kind = MEDIA.get(mime.split(";")[0].strip().lower(), "document")
        if size > LIMITS[kind]:
            kind = "document"
        if size > LIMITS[kind]:
            raise PermanentError(f"not sent: {filename} is {size / 1024**2:.1f} MB, and WhatsApp takes files up to "
                                 f"{LIMITS[kind] // 1024**2} MB")
        try:
            media_id = await self.graph().upload(path, filename, mime or "application/octet-stream")
        except GraphError as exc:
            raise map_error(exc, self._backoff(chat, exc)) from exc
        except OSError as exc:
            raise PermanentError(f"not sent: {filename} could not be read ({type(exc).__name__})") from exc
        except Exception as exc:
            raise map_error(exc, 0.0) from exc
        words = markup.finish(markup.render(caption)) if caption.strip() else ""
        media: dict[str, Any] = {"id": media_id}
        if kind == "document":
            media["filename"] = filename
        if words and kind != "audio" and len(words) <= CAPTION_MAX:
            media["caption"], words = words, ""
        payload: dict[str, Any] = {"type": kind, kind: media}
        if reply_to:
            payload["context"] = {"message_id": reply_to}
        ids = [await self.post(chat, payload, filename)]
        if words:  # audio has no caption, and a long one is a message of its own
            ids += await self.send(chat, markup.render(caption), OutboundMessage(caption))
        return ids

    # ---- typing and read receipts ----------------------------------------------------------------

    def note_inbound(self, chat: str, message_id: str) -> None:
        """A message the gateway took: it is marked read shortly (with the typing indicator, if its turn
        starts by then)."""
        self.latest[chat] = message_id
        self.latest.move_to_end(chat)
        while len(self.latest) > 10_000:
            self.latest.popitem(last=False)
        self.spawn(self._read_later(chat, message_id))

    async def _read_later(self, chat: str, message_id: str) -> None:
        await asyncio.sleep(READ_DELAY)
        if self.latest.get(chat) == message_id and self._read.get(chat) != message_id:
            await self._mark_read(chat, message_id, typing=False)

    def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        chat = e164(chat_id)
        message_id = self.latest.get(chat)
        if message_id is None or time.monotonic() - self._typed.get(chat, float("-inf")) < TYPING_EVERY:
            return
        self._typed[chat] = time.monotonic()
        self.spawn(self._mark_read(chat, message_id, typing=True))

    async def _mark_read(self, chat: str, message_id: str, *, typing: bool) -> None:
        self._read[chat] = message_id
        payload: dict[str, Any] = {"status": "read", "message_id": message_id}
        if typing:
            payload["typing_indicator"] = {"type": "text"}
        try:
            await self.graph().message(payload)
        except Exception as exc:
            log.debug("whatsapp_read_failed", chat_id=chat, error=f"{type(exc).__name__}: {exc}")
        if len(self._read) > 10_000:
            self._read.clear()

    # ---- background --------------------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """A background task of the adapter's (cancelled at stop)."""
        task = asyncio.create_task(coro, name="whatsapp:outbound")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        tasks, self._tasks = list(self._tasks), set()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        self._typed.clear()
