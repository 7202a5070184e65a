"""Matrix outbound: answers as ``m.text`` with ``org.matrix.custom.html`` (markup.py), in their thread and as
replies, edits as ``m.replace`` events, files uploaded to the content repository, and the "working" reaction
while a turn runs.

Buttons do not exist in Matrix; reactions stand in for them (reactions.py): a message with buttons names a
reaction per button in its last line and carries the buttons in its content (``org.herald.buttons``), and the
bot reacts with each key itself, so a person taps one. Every send carries its idempotency key as the
transaction id (``PUT /send/{type}/{txnId}``): the homeserver answers a resend with the event it already
made, so a chunk sent again after a crash is not shown twice. An end-to-end encrypted room is written to only
with encryption on (nio encrypts); with it off the send is refused, never made in the clear.
"""

from __future__ import annotations

import mimetypes
import uuid
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from gateway.platforms.base import Button, Outbound, OutboundMessage, PermanentError, TransientError
from gateway.platforms.matrix.inbound import MESSAGE, REACTION, MatrixInbound
from gateway.platforms.matrix.markup import MAX_CONTENT, Markup
from gateway.platforms.matrix.reactions import BUTTONS_KEY, Keys, Working, legend
from gateway.platforms.matrix.transport import Media, call, check, map_exception

log = structlog.get_logger("herald.matrix")

_KINDS = (("image/", "m.image"), ("audio/", "m.audio"), ("video/", "m.video"))
NO_MENTIONS: dict[str, Any] = {}  # m.mentions: the text of an answer pings nobody by accident


def too_big(name: str, size: int, limit: int | None) -> PermanentError:
    said = f"the homeserver's {human_size(limit)} limit" if limit else "the homeserver's limit"
    return PermanentError(f"{name} is {human_size(size)}, over {said} for files")


def human_size(size: int) -> str:
    if size >= 1_048_576:
        return f"{size / 1_048_576:.1f} MB"
    return f"{size / 1024:.0f} KB" if size >= 10_240 else f"{size} bytes"


def event_id_of(platform_message_id: str | None, room_id: str) -> str | None:
    """The event behind a ``<room>/<event>`` id, when it is in ``room_id``."""
    if not platform_message_id:
        return None
    room, _, event = platform_message_id.partition("/")
    return event if event and room == room_id else None


class MatrixOutbound(Outbound):
    def __init__(self, client: Callable[[], Any], inbound: MatrixInbound, media: Callable[[], Media | None]) -> None:
        self._client = client
        self._media = media
        self.inbound = inbound
        self.markup = Markup()
        self.keys = Keys(self)
        self.working = Working(self)
        self._texts: OrderedDict[str, str] = OrderedDict()  # event id -> its markdown, for a buttons-only edit

    def client(self) -> Any:
        client = self._client()
        if client is None:
            raise TransientError("matrix is not connected right now")
        return client

    # ---- formatting ------------------------------------------------------------------------------

    def measure(self, text: str) -> int:
        return self.markup.measure(text)

    def _content(self, text: str, buttons: list[Button]) -> dict[str, Any]:
        keyed = self.keys.assign(buttons)
        shown = text if text.strip() else "…"
        if keyed:
            shown = f"{shown}\n\n{legend(keyed)}"
        content = self.markup.content(shown)
        content["m.mentions"] = NO_MENTIONS
        if keyed:
            content[BUTTONS_KEY] = [{"key": key, "id": b.id, "label": b.label} for key, b in keyed]
        return content

    @staticmethod
    def _relation(room: str, message: OutboundMessage) -> dict[str, Any] | None:
        reply = event_id_of(message.reply_to, room)
        if message.thread_id:
            return {"rel_type": "m.thread", "event_id": message.thread_id, "is_falling_back": reply is None,
                    "m.in_reply_to": {"event_id": reply or message.thread_id}}
        return {"m.in_reply_to": {"event_id": reply}} if reply else None

    # ---- sending ---------------------------------------------------------------------------------

    async def room_send(self, room: str, event_type: str, content: dict[str, Any], txn: str | None = None) -> str:
        """One event into ``room``; its id. Refused in an encrypted room while encryption is off."""
        client = self.client()
        known = client.rooms.get(room)
        if known is not None and known.encrypted and client.olm is None:
            raise PermanentError("the room is end-to-end encrypted and platforms.matrix.encryption is off")
        response = await call(client.room_send(room, event_type, content, tx_id=txn or uuid.uuid4().hex,
                                               ignore_unverified_devices=True))
        self.inbound.saw_own(room, {"event_id": response.event_id, "content": content})
        return str(response.event_id)

    async def send(self, chat_id: str, text: str, message: OutboundMessage, *,
                   idempotency_key: str | None = None) -> list[str]:
        if message.reply_to:
            self.working.done(chat_id, message.thread_id)  # the answer is here: the reaction goes
        content = self._content(text, message.buttons)
        relation = self._relation(chat_id, message)
        if relation:
            content["m.relates_to"] = relation
        event_id = await self.room_send(chat_id, MESSAGE, content, idempotency_key)
        self._remember(event_id, text)
        if message.buttons:
            self.keys.posted(chat_id, event_id, message.thread_id, content[BUTTONS_KEY])
        return [event_id]

    def _remember(self, event_id: str, text: str) -> None:
        self._texts[event_id] = text
        while len(self._texts) > 2000:
            self._texts.popitem(last=False)

    async def edit(self, chat_id: str, message_id: str, text: str | None, buttons: list[Button] | None = None,
                   *, thread_id: str | None = None) -> None:
        if text is None:
            text = self._texts.get(message_id)
            if text is None:
                raise PermanentError("an edit needs the text, and this message's is no longer known")
        new = self._content(text, buttons or [])
        content = {"msgtype": "m.text", "body": f"* {new['body']}", "format": new["format"],
                   "formatted_body": f"* {new['formatted_body']}", "m.new_content": new,
                   "m.mentions": NO_MENTIONS, "m.relates_to": {"rel_type": "m.replace", "event_id": message_id}}
        await self.room_send(chat_id, MESSAGE, content)
        self._remember(message_id, text)
        self.keys.replaced(chat_id, message_id, thread_id, new.get(BUTTONS_KEY) or [])

    async def react(self, room: str, event_id: str, key: str) -> str:
        content = {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
        return await self.room_send(room, REACTION, content)

    async def redact(self, room: str, event_id: str) -> None:
        await call(self.client().room_redact(room, event_id, tx_id=uuid.uuid4().hex))

    # ---- files -----------------------------------------------------------------------------------

    async def send_file(self, chat_id: str, path: str | Path, *, filename: str | None = None, mime: str | None = None,
                        caption: str | None = None, thread_id: str | None = None, reply_to: str | None = None,
                        idempotency_key: str | None = None) -> list[str]:
        """``path`` uploaded to the content repository (encrypted first in an encrypted room) and sent as an
        image, audio, video or file message, with ``caption`` as its text; its event id. ``PermanentError``
        saying the size and the limit when the homeserver would not take it."""
        client, media = self.client(), self._media()
        path = Path(path)
        name = filename or path.name
        mime = mime or mimetypes.guess_type(name)[0] or "application/octet-stream"
        size = path.stat().st_size
        limit = await media.upload_limit() if media is not None else None
        if limit is not None and size > limit:
            raise too_big(name, size, limit)
        room = client.rooms.get(chat_id)
        encrypt = bool(room is not None and room.encrypted and client.olm is not None)
        try:
            uploaded, keys = await client.upload(lambda *_: path, content_type=mime, filename=name, encrypt=encrypt,
                                                 filesize=size)
        except Exception as exc:
            raise map_exception(exc) from exc
        if getattr(uploaded, "status_code", None) == "M_TOO_LARGE" and media is not None:
            limit = await media.upload_limit(again=True)  # the limit changed since it was read
            raise too_big(name, size, limit)
        check(uploaded)
        msgtype = next((kind for prefix, kind in _KINDS if mime.startswith(prefix)), "m.file")
        content: dict[str, Any] = {"msgtype": msgtype, "body": caption or name, "filename": name,
                                   "info": {"mimetype": mime, "size": size}, "m.mentions": NO_MENTIONS}
        if encrypt:
            content["file"] = {**(keys or {}), "url": uploaded.content_uri}
        else:
            content["url"] = uploaded.content_uri
        if caption:
            html = self.markup.html(caption)
            if len(html) < MAX_CONTENT:
                content.update(format="org.matrix.custom.html", formatted_body=html)
        relation = self._relation(chat_id, OutboundMessage("", reply_to=reply_to, thread_id=thread_id))
        if relation:
            content["m.relates_to"] = relation
        return [await self.room_send(chat_id, MESSAGE, content, idempotency_key)]

    # ---- "working" -------------------------------------------------------------------------------

    def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        self.working.renew(chat_id, thread_id)

    def stop(self) -> None:
        self.working.stop()
        self.keys.stop()

