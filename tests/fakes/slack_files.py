"""The fake Slack's external upload flow (files.upload is retired): ``files.getUploadURLExternal`` (filename,
length) answers an upload URL on this fake and a file id; the bytes are POSTed there (multipart or raw);
``files.completeUploadExternal`` (files JSON, channel_id, thread_ts, initial_comment) shares them into the
channel. ``shared`` holds what reached a channel, in order, with the ts of the message Slack made for it (shared
with messages' ts, so text and files can be ordered).

``hold_uploads``: completeUploadExternal records the share, then does not answer while it is set (the bot gives up
or dies meanwhile).
"""

from __future__ import annotations

import asyncio
import json
import secrets
from dataclasses import dataclass
from typing import Any

from aiohttp import web


@dataclass
class SharedFile:
    file_id: str
    channel: str
    name: str
    content: bytes
    ts: str
    thread_ts: str | None = None
    comment: str | None = None


class SlackFiles:
    def _files_init(self) -> None:
        self.pending_uploads: dict[str, dict[str, Any]] = {}  # file id -> {name, length, content}
        self.shared: list[SharedFile] = []
        self._released = asyncio.Event()  # set: uploads are answered (see hold_uploads)
        self._released.set()

    def upload_routes(self) -> list[web.AbstractRouteDef]:
        return [web.post("/upload/{file_id}", self._receive)]

    @property
    def hold_uploads(self) -> bool:
        return not self._released.is_set()

    @hold_uploads.setter
    def hold_uploads(self, on: bool) -> None:
        if on:
            self._released.clear()
        else:
            self._released.set()

    async def _m_files_getUploadURLExternal(self, p: dict[str, Any]) -> web.Response:
        name, length = p.get("filename"), p.get("length")
        try:
            size = int(length)
        except (TypeError, ValueError):
            return self._err("invalid_arguments")  # type: ignore[attr-defined]
        if not name or size <= 0:
            return self._err("invalid_arguments")  # type: ignore[attr-defined]
        file_id = f"F{secrets.token_hex(5).upper()}"
        self.pending_uploads[file_id] = {"name": name, "length": size, "content": None}
        return self._ok(upload_url=f"{self.root}/upload/{file_id}", file_id=file_id)  # type: ignore[attr-defined]

    async def _receive(self, request: web.Request) -> web.Response:
        entry = self.pending_uploads.get(request.match_info["file_id"])
        if entry is None:
            return web.Response(status=404, text="no such upload")
        if request.content_type.startswith("multipart/"):
            form = await request.post()
            part = next(iter(form.values()))
            data = part.file.read() if hasattr(part, "file") else str(part).encode()
        else:
            data = await request.read()
        if len(data) != entry["length"]:
            return web.Response(status=400, text="length does not match")
        entry["content"] = data
        return web.Response(text="OK - " + str(len(data)))

    async def _m_files_completeUploadExternal(self, p: dict[str, Any]) -> web.Response:
        files = p.get("files")
        files = json.loads(files) if isinstance(files, str) else files
        channel = p.get("channel_id")
        if not isinstance(files, list) or not files or not channel:
            return self._err("invalid_arguments")  # type: ignore[attr-defined]
        done = []
        for f in files:
            entry = self.pending_uploads.get(str(f.get("id")))
            if entry is None or entry["content"] is None:
                return self._err("file_not_found")  # type: ignore[attr-defined]
            shared = SharedFile(str(f["id"]), channel, entry["name"], entry["content"], self.next_ts(),  # type: ignore[attr-defined]
                                p.get("thread_ts") or None, p.get("initial_comment") or None)
            self.shared.append(shared)
            done.append({"id": shared.file_id, "title": f.get("title") or entry["name"]})
        self._changed.set()  # type: ignore[attr-defined]
        await self._released.wait()  # held: the bot is killed (or gives up) meanwhile
        return self._ok(files=done)  # type: ignore[attr-defined]
