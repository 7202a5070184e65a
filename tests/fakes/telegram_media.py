"""The fake Bot API's files: what users send (a photo, a voice note, a document, an album: a media group of
photos) and what the bot uploads (sendPhoto, sendDocument, sendVoice, sendMediaGroup, multipart as PTB sends
them), recorded in ``uploads`` with the chat's message ids (shared with ``sent``, so the order of text and
files in a chat can be compared).

``hold_uploads``: an upload is recorded, then not answered while it is set (the connection stays open; the bot
gives up or dies meanwhile): the moment between a file reaching Telegram and the bot recording it, for kill tests.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

_groups = itertools.count(1)


@dataclass
class SentFile:
    method: str  # sendPhoto | sendDocument | sendVoice | sendMediaGroup
    chat_id: int
    message_id: int
    filename: str
    content: bytes
    caption: str | None = None
    thread_id: int | None = None
    media_group: str | None = None
    at: float = 0.0


class TelegramMedia:
    def _media_init(self) -> None:
        self.uploads: list[SentFile] = []
        self._released = asyncio.Event()  # set: uploads are answered (see hold_uploads)
        self._released.set()

    # ---- what users send ---------------------------------------------------------------------------

    @property
    def hold_uploads(self) -> bool:
        return not self._released.is_set()

    @hold_uploads.setter
    def hold_uploads(self, on: bool) -> None:
        if on:
            self._released.clear()
        else:
            self._released.set()

    def _photo_sizes(self, content: bytes, name: str = "photo.jpg") -> list[dict[str, Any]]:
        file_id = self.add_file(content, name)  # type: ignore[attr-defined]
        return [{"file_id": file_id, "file_unique_id": file_id + "u", "width": 640, "height": 480,
                 "file_size": len(content)}]

    def photo_message(self, chat_id: int, content: bytes, caption: str | None = None, *,
                      user_id: int | None = None, media_group_id: str | None = None, **kw: Any) -> dict[str, Any]:
        extra: dict[str, Any] = {"photo": self._photo_sizes(content)}
        if caption:
            extra["caption"] = caption
        if media_group_id:
            extra["media_group_id"] = media_group_id
        return self.user_message(chat_id, user_id, None, **extra, **kw)  # type: ignore[attr-defined]

    def album(self, chat_id: int, contents: list[bytes], caption: str | None = None,
              user_id: int | None = None) -> list[dict[str, Any]]:
        """A media group: one message per photo, the caption on the first, as Telegram sends them."""
        group = f"g{next(_groups)}{secrets.token_hex(3)}"
        return [self.photo_message(chat_id, c, caption if n == 0 else None, user_id=user_id, media_group_id=group)
                for n, c in enumerate(contents)]

    def voice_message(self, chat_id: int, content: bytes, user_id: int | None = None) -> dict[str, Any]:
        file_id = self.add_file(content, "voice.ogg")  # type: ignore[attr-defined]
        voice = {"file_id": file_id, "file_unique_id": file_id + "u", "duration": 2, "mime_type": "audio/ogg",
                 "file_size": len(content)}
        return self.user_message(chat_id, user_id, None, voice=voice)  # type: ignore[attr-defined]

    def document_message(self, chat_id: int, content: bytes, name: str, caption: str | None = None,
                         user_id: int | None = None) -> dict[str, Any]:
        file_id = self.add_file(content, name)  # type: ignore[attr-defined]
        document = {"file_id": file_id, "file_unique_id": file_id + "u", "file_name": name,
                    "file_size": len(content)}
        extra: dict[str, Any] = {"document": document, **({"caption": caption} if caption else {})}
        return self.user_message(chat_id, user_id, None, **extra)  # type: ignore[attr-defined]

    # ---- what the bot uploads ----------------------------------------------------------------------

    def uploads_to(self, chat_id: int) -> list[SentFile]:
        return [u for u in self.uploads if u.chat_id == chat_id]

    async def _m_sendPhoto(self, p: dict[str, Any]) -> web.Response:
        return await self._upload("sendPhoto", p, "photo")

    async def _m_sendDocument(self, p: dict[str, Any]) -> web.Response:
        return await self._upload("sendDocument", p, "document")

    async def _m_sendVoice(self, p: dict[str, Any]) -> web.Response:
        return await self._upload("sendVoice", p, "voice")

    def _file_message(self, sent: SentFile, field: str) -> dict[str, Any]:
        info = {"file_id": f"up{sent.message_id}", "file_unique_id": f"up{sent.message_id}u",
                "file_size": len(sent.content)}
        body: Any = [{**info, "width": 1, "height": 1}] if field == "photo" else {**info, "file_name": sent.filename}
        msg = {"message_id": sent.message_id, "date": int(sent.at), "chat": self.chat(sent.chat_id),  # type: ignore[attr-defined]
               "from": {"id": 900_000_001, "is_bot": True, "first_name": "Herald"}, field: body}
        if sent.caption:
            msg["caption"] = sent.caption
        if sent.media_group:
            msg["media_group_id"] = sent.media_group
        return msg

    async def _hold(self) -> None:
        self._changed.set()  # type: ignore[attr-defined]
        await self._released.wait()  # held: the bot is killed (or gives up) meanwhile

    async def _upload(self, method: str, p: dict[str, Any], field: str) -> web.Response:
        chat_id = p.get("chat_id")
        upload = p.get(field)
        if not isinstance(chat_id, int):
            return self._error(400, "Bad Request: chat not found")  # type: ignore[attr-defined]
        if not hasattr(upload, "file"):
            return self._error(400, f"Bad Request: {field} must be an uploaded file here")  # type: ignore[attr-defined]
        sent = SentFile(method, chat_id, self._next_message_id(chat_id), upload.filename, upload.file.read(),  # type: ignore[attr-defined]
                        p.get("caption"), p.get("message_thread_id"), at=time.time())
        self.uploads.append(sent)
        await self._hold()
        return self._ok(self._file_message(sent, field))  # type: ignore[attr-defined]

    async def _m_sendMediaGroup(self, p: dict[str, Any]) -> web.Response:
        chat_id = p.get("chat_id")
        media = p.get("media")
        media = json.loads(media) if isinstance(media, str) else media
        if not isinstance(chat_id, int) or not isinstance(media, list) or not 2 <= len(media) <= 10:
            return self._error(400, "Bad Request: wrong media group")  # type: ignore[attr-defined]
        group = f"out{next(_groups)}"
        made = []
        for item in media:
            ref = str(item.get("media") or "")
            upload = p.get(ref.removeprefix("attach://")) if ref.startswith("attach://") else None
            if item.get("type") != "photo" or not hasattr(upload, "file"):
                return self._error(400, "Bad Request: media must be uploaded photos")  # type: ignore[attr-defined]
            sent = SentFile("sendMediaGroup", chat_id, self._next_message_id(chat_id), upload.filename,  # type: ignore[attr-defined]
                            upload.file.read(), item.get("caption"), p.get("message_thread_id"), group, time.time())
            self.uploads.append(sent)
            made.append(sent)
        await self._hold()
        return self._ok([self._file_message(s, "photo") for s in made])  # type: ignore[attr-defined]
