"""The fake Discord's files: message bodies sent as multipart (``payload_json`` and ``files[n]``, as discord.py
uploads), the uploaded files kept on the ``Sent`` message and echoed back as its attachments, and
``GET /guilds/{id}`` with the server's boost level (``premium_tier``), which sets how large a file may be.

``hold_uploads``: a message with files is recorded, then not answered while it is set (the bot gives up or dies
meanwhile).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

FILES = "_files"  # where read_body puts the uploaded files: [(file name, bytes)]


async def read_body(request: web.Request) -> dict[str, Any]:
    """A request's JSON body, or a multipart one's ``payload_json`` with its files under ``FILES``."""
    if not request.content_type.startswith("multipart/"):
        return await request.json()
    body: dict[str, Any] = {}
    files: list[tuple[str, bytes]] = []
    reader = await request.multipart()
    async for part in reader:
        if part.name == "payload_json":
            body = json.loads(await part.text())
        elif part.name and part.name.startswith("files["):
            files.append((part.filename or "file", bytes(await part.read())))
    body[FILES] = files
    return body


def attachments_of(sent: Any) -> list[dict[str, Any]]:
    return [{"id": str(sent.id * 10 + n), "filename": name, "size": len(data), "url": f"https://cdn/{name}",
             "proxy_url": f"https://cdn/{name}"} for n, (name, data) in enumerate(sent.files)]


class DiscordFiles:
    def _files_init(self) -> None:
        self.premium_tier = 0
        self._released = asyncio.Event()  # set: uploads are answered (see hold_uploads)
        self._released.set()
        self.guild_reads = 0

    @property
    def hold_uploads(self) -> bool:
        return not self._released.is_set()

    @hold_uploads.setter
    def hold_uploads(self, on: bool) -> None:
        if on:
            self._released.clear()
        else:
            self._released.set()

    def uploads(self, channel_id: int | None = None) -> list[tuple[str, bytes]]:
        return [f for m in self.sent if channel_id is None or m.channel_id == channel_id  # type: ignore[attr-defined]
                for f in m.files]

    async def uploaded(self) -> None:
        await self._released.wait()  # held: the bot is killed (or gives up) meanwhile

    async def _get_guild(self, _r: web.Request, _b: Any, guild: str) -> web.Response:
        self.guild_reads += 1
        payload = self.guild_payload()  # type: ignore[attr-defined]
        if payload["id"] != guild:
            return _json({"message": "Unknown Guild", "code": 10004}, status=404)
        return _json(payload)


def _json(data: Any, status: int = 200) -> web.Response:
    # Exactly "application/json", as Discord sends it (discord.py decodes nothing else).
    return web.Response(body=json.dumps(data).encode(), status=status, content_type="application/json")
