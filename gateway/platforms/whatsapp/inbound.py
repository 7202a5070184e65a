"""WhatsApp inbound: a webhook POST's body becomes messages, button presses and statuses.

Meta POSTs ``{"object": "whatsapp_business_account", "entry": [{"changes": [{"field": "messages", "value":
{...}}]}]}``; a value holds ``metadata.phone_number_id`` (the business number it is for: only ours is read),
``contacts`` (the senders' profile names), ``messages`` and ``statuses``. A person's number comes without the
``+`` (``from``, ``wa_id``); Herald writes it in E.164 (``+15551230001``) as their user id and chat id: a
conversation with a business number is always one to one. A message's ``id`` (a wamid) is its platform
message id, which is what makes a redelivered webhook one message. Photos, voice notes, documents, audio,
video and stickers are listed in ``pending`` by their media id and downloaded after the acknowledgement, before
the turn (the adapter's ``download``): only for people the gateway accepted. A tap on a reply button or a list
row is a ``ButtonPress`` (its ``context.id`` is the message it was on).

A body that is not what Meta sends (not an object, ``entry`` not a list, a message without ``from`` or ``id``)
is refused with ``Malformed`` (a 400), before anything of it is taken.
"""

from __future__ import annotations

import hmac
import time
from dataclasses import dataclass, field
from typing import Any

from gateway.platforms.base import ButtonPress, InboundMessage, Source, file_ref, parse_text_command
from gateway.platforms.whatsapp.transport import signature

SIGNATURE_HEADER = "X-Hub-Signature-256"
# What a file someone sends is called in the workspace when WhatsApp gives no name, by its kind.
_NAMES = {"image": "photo", "video": "video", "audio": "audio", "sticker": "sticker", "document": "document"}
_KINDS = {"image": "photo", "video": "video", "audio": "audio file", "sticker": "sticker", "document": "document"}
_EXTENSIONS = {"image/jpeg": ".jpg", "image/png": ".png", "image/webp": ".webp", "audio/ogg": ".ogg",
               "audio/mpeg": ".mp3", "audio/aac": ".aac", "audio/amr": ".amr", "audio/mp4": ".m4a",
               "video/mp4": ".mp4", "video/3gpp": ".3gp", "application/pdf": ".pdf", "text/plain": ".txt"}


class Malformed(ValueError):
    """The body is not a webhook of Meta's: ``str()`` says what is wrong (it goes back in the 400)."""


@dataclass(frozen=True, slots=True)
class Status:
    """What WhatsApp says of a message the bot sent."""

    message_id: str
    state: str  # sent | delivered | read | failed
    chat: str  # the recipient, E.164
    code: int | None = None  # a failure's code (131047: the window is closed; 131056: the pair rate limit)
    error: str | None = None


@dataclass(slots=True)
class Batch:
    """What one webhook POST carried for our number, in the order it came."""

    events: list[InboundMessage | ButtonPress] = field(default_factory=list)
    statuses: list[Status] = field(default_factory=list)
    seen: list[tuple[str, float, str]] = field(default_factory=list)  # (chat, when, message id) of every message


def verified(app_secret: str, body: bytes, header: str | None) -> bool:
    """Whether ``header`` (X-Hub-Signature-256) is ``body``'s HMAC-SHA256 with the app secret."""
    if not header or not app_secret:
        return False
    return hmac.compare_digest(header.strip().lower().encode(), signature(app_secret, body).encode())


def e164(number: Any) -> str:
    return "+" + str(number).lstrip("+")


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise Malformed(f"{what} must be a list")
    return value


def _dict(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Malformed(f"{what} must be an object")
    return value


def _timestamp(value: Any) -> float | None:
    try:
        at = float(value)
    except (TypeError, ValueError):
        return None
    return at if at > 0 else None


class WhatsAppInbound:
    def __init__(self, name: str, phone_number_id: str) -> None:
        self.name = name
        self.phone_number_id = phone_number_id

    def read(self, body: dict[str, Any]) -> Batch:
        """The messages, presses and statuses of a webhook body for our number; ``Malformed`` for a body that
        is not a webhook. Another object (a page's, an account's) or another number's changes are passed over."""
        batch = Batch()
        if body.get("object") != "whatsapp_business_account":
            return batch
        for entry in _list(body.get("entry"), "entry"):
            for change in _list(_dict(entry, "an entry").get("changes"), "changes"):
                change = _dict(change, "a change")
                if change.get("field") != "messages":
                    continue
                value = _dict(change.get("value"), "a change's value")
                metadata = value.get("metadata") if isinstance(value.get("metadata"), dict) else {}
                if str(metadata.get("phone_number_id") or "") != self.phone_number_id:
                    continue
                names = {str(c.get("wa_id")): str((c.get("profile") or {}).get("name") or "")
                         for c in _list(value.get("contacts"), "contacts") if isinstance(c, dict)}
                for raw in _list(value.get("messages"), "messages"):
                    self._message(_dict(raw, "a message"), names, batch)
                for raw in _list(value.get("statuses"), "statuses"):
                    status = self._status(_dict(raw, "a status"))
                    if status is not None:
                        batch.statuses.append(status)
        return batch

    def _message(self, raw: dict[str, Any], names: dict[str, str], batch: Batch) -> None:
        sender, message_id = raw.get("from"), raw.get("id")
        if not isinstance(sender, str | int) or not isinstance(message_id, str) or not sender or not message_id:
            raise Malformed("a message must have its sender (from) and its id")
        chat = e164(sender)
        kind = str(raw.get("type") or "")
        if kind in ("reaction", "system", "request_welcome"):
            return  # not something the person said to the agent (and no window opens for it)
        at = _timestamp(raw.get("timestamp"))
        batch.seen.append((chat, at or time.time(), message_id))
        source = Source(platform=self.name, chat_id=chat, user_id=chat, chat_type="dm",
                        user_name=names.get(str(sender).lstrip("+")) or None)
        context = raw.get("context") if isinstance(raw.get("context"), dict) else {}
        replied = str(context.get("id")) if context.get("id") else None
        if kind == "interactive":
            interactive = raw.get("interactive") if isinstance(raw.get("interactive"), dict) else {}
            reply = interactive.get("button_reply") or interactive.get("list_reply")
            if isinstance(reply, dict) and reply.get("id"):
                batch.events.append(ButtonPress(source, str(reply["id"]), replied,
                                                {"message_id": message_id}))
                return
        text, media = self._content(kind, raw)
        if not text.strip() and media is None:
            return
        parsed = parse_text_command(text)
        batch.events.append(InboundMessage(
            source=source, text=text, platform_message_id=message_id, reply_to=replied,
            received_at=time.time(), command=parsed[0] if parsed is not None else None,
            pending={"files": [media]} if media is not None else None))

    @staticmethod
    def _content(kind: str, raw: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        """(the text, the file to fetch after the ack) of a message of ``kind``."""
        body = raw.get(kind) if isinstance(raw.get(kind), dict) else {}
        if kind == "text":
            return str(body.get("body") or ""), None
        if kind == "button":  # a template's quick-reply button: its words are the answer
            return str(body.get("text") or body.get("payload") or ""), None
        if kind in _NAMES and body.get("id"):
            mime = str(body.get("mime_type") or "").split(";")[0].strip()
            voice = kind == "audio" and (body.get("voice") or mime == "audio/ogg")
            name = str(body.get("filename") or "") or ("voice" if voice else _NAMES[kind]) + _EXTENSIONS.get(mime, "")
            ref = file_ref(name, "voice note" if voice else _KINDS[kind], None, media_id=str(body["id"]),
                           mime=mime, sha256=str(body.get("sha256") or ""))
            return str(body.get("caption") or ""), ref
        if kind == "location":
            where = ", ".join(str(body[k]) for k in ("name", "address") if body.get(k))
            return (f"[The user shared a location: {where + ' ' if where else ''}"
                    f"({body.get('latitude')}, {body.get('longitude')}).]"), None
        if kind == "contacts":
            people = [str(((c or {}).get("name") or {}).get("formatted_name") or "someone")
                      for c in raw.get("contacts") or [] if isinstance(c, dict)]
            return f"[The user shared a contact: {', '.join(people) or 'someone'}.]", None
        return f"[The user sent a message of a kind WhatsApp does not pass on to bots ({kind or 'unknown'}).]", None

    @staticmethod
    def _status(raw: dict[str, Any]) -> Status | None:
        message_id, state = raw.get("id"), raw.get("status")
        if not isinstance(message_id, str) or state not in ("sent", "delivered", "read", "failed"):
            return None
        code: int | None = None
        error = None
        errors = raw.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            first = errors[0]
            code = first.get("code") if isinstance(first.get("code"), int) else None
            data = first.get("error_data") if isinstance(first.get("error_data"), dict) else {}
            words = str(first.get("title") or first.get("message") or "failed")
            details = str(data.get("details") or "")
            error = f"WhatsApp could not deliver it ({code}): {words}" + (f": {details}" if details else "")
        return Status(message_id, str(state), e164(raw.get("recipient_id") or ""), code, error)
