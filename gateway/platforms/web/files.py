"""The web chat's files: what the owner uploads with a message and what the agent sends, kept in the profile's
home (``web_files/``, out of the agent's sight) under a random id, and served back to the page at an address
signed with the web token.

An upload is saved as it arrives, capped at ``platforms.web.max_upload_mb`` whatever the request declared; the
message then carries it as a pending file (``InboundMessage.pending``), which ``prepare`` copies into the media
folder for the agent, as other platforms download theirs. The page cannot put a bearer token on an ``<img>``, so
a file's address carries ``sig``, an HMAC of its id under the token: it opens that one file, and stops working
when the token changes. A file is served inline only when its first bytes say it is a PNG, JPEG, GIF or WebP
image; anything else (an SVG or HTML file included) is a download, never rendered by the browser.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from aiohttp import web

from gateway.platforms.base import FileUnavailable, TooBig

FILES_DIR = "web_files"
MAX_FILES = 10  # in one message
CHUNK = 64 * 1024

_ID = re.compile(r"^[0-9a-f]{32}$")
_MIME = re.compile(r"^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}$")
# The images a browser may show inline from here, by their first bytes (never by the name or the declared type).
_IMAGES = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF87a", "image/gif"),
           (b"GIF89a", "image/gif"))


def sniff_image(head: bytes) -> str | None:
    """The image type ``head`` (a file's first bytes) starts, or None when it is not one shown inline."""
    for magic, mime in _IMAGES:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def kind_of(image: str | None, declared: str) -> str:
    if image:
        return "image"
    top = declared.split("/", 1)[0]
    return top if top in ("audio", "video") else "document"


def clean_name(name: str | None) -> str:
    """A file name as the page shows it: its last path part, printable, at most 120 characters (percent-escapes
    decoded: some clients send ``"`` and line breaks, or the whole name, escaped)."""
    base = re.split(r"[\\/]", unquote(name or ""))[-1]
    base = "".join(ch for ch in base if ch.isprintable()).strip()[-120:]
    return base or "file"


class WebFiles:
    def __init__(self, home: Path, token: str, cap_mb: float) -> None:
        self.dir = home / FILES_DIR
        self._key = token.encode()
        self.cap_mb = cap_mb
        self.cap = int(cap_mb * 1024 * 1024)

    def path(self, file_id: str) -> Path:
        if not _ID.match(file_id):
            raise FileUnavailable("not a file of this chat")
        return self.dir / file_id

    def sign(self, file_id: str) -> str:
        return hmac.new(self._key, f"file:{file_id}".encode(), hashlib.sha256).hexdigest()[:32]

    def url(self, meta: dict[str, Any]) -> str:
        return f"/chat/files/{meta['id']}/{quote(str(meta.get('name') or 'file'), safe='')}?sig={self.sign(meta['id'])}"

    def public(self, files: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
        """The files of a chat log row as the API shows them: with the address that opens each."""
        return [{"name": f.get("name"), "mime": f.get("mime"), "kind": f.get("kind"), "size": f.get("size"),
                 "url": self.url(f)} for f in files or [] if isinstance(f, dict) and _ID.match(str(f.get("id")))]

    async def save_part(self, part: Any) -> dict[str, Any]:
        """One multipart file part, saved under a new id; its metadata. ``TooBig`` past the cap."""
        file_id = uuid.uuid4().hex
        target = self.dir / file_id
        partial = target.with_name(file_id + ".part")
        await asyncio.to_thread(self.dir.mkdir, parents=True, exist_ok=True)
        size, head = 0, b""
        out = await asyncio.to_thread(open, partial, "wb")
        try:
            try:
                while chunk := await part.read_chunk(CHUNK):
                    size += len(chunk)
                    if size > self.cap:
                        raise TooBig(self.cap_mb)
                    if len(head) < 16:
                        head += chunk[:16 - len(head)]
                    await asyncio.to_thread(out.write, chunk)
            finally:
                await asyncio.to_thread(out.close)
            os.replace(partial, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                partial.unlink()
        declared = (part.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        return self._meta(file_id, part.filename, head, declared, size)

    async def keep(self, source: str, name: str, declared: str, file_id: str) -> dict[str, Any]:
        """A copy of ``source`` (a file the agent sends) under ``file_id``: the page is served the copy, which the
        agent cannot change or swap for a link afterwards. ``TooBig`` past the cap."""
        target = self.path(file_id)

        def copy() -> tuple[bytes, int]:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(source, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as src:
                size = os.fstat(src.fileno()).st_size
                if size > self.cap:
                    raise TooBig(self.cap_mb)
                head = src.read(16)
                src.seek(0)
                partial = target.with_name(file_id + ".part")
                with open(partial, "wb") as out:
                    shutil.copyfileobj(src, out, CHUNK)
                os.replace(partial, target)
            return head, size

        try:
            head, size = await asyncio.to_thread(copy)
        except OSError as exc:
            raise FileUnavailable(f"cannot be read ({exc.strerror or type(exc).__name__})") from None
        return self._meta(file_id, name, head, declared.lower(), size)

    def _meta(self, file_id: str, name: str | None, head: bytes, declared: str, size: int) -> dict[str, Any]:
        image = sniff_image(head)
        mime = image or (declared if _MIME.match(declared) else "application/octet-stream")
        return {"id": file_id, "name": clean_name(name), "mime": mime, "kind": kind_of(image, mime), "size": size}

    async def copy_out(self, file_id: str, target: Path) -> None:
        """The uploaded file, copied to ``target`` (the agent's media folder)."""
        source = self.path(file_id)
        try:
            await asyncio.to_thread(shutil.copyfile, source, target)
        except FileNotFoundError:
            raise FileUnavailable("the upload is no longer there") from None

    async def remove(self, file_ids: list[str]) -> None:
        def unlink() -> None:
            for file_id in file_ids:
                with contextlib.suppress(FileNotFoundError, FileUnavailable):
                    self.path(file_id).unlink()

        if file_ids:
            await asyncio.to_thread(unlink)

    async def serve(self, request: web.Request) -> web.StreamResponse:
        """GET /chat/files/{file_id}/{name}?sig=…: the file, if ``sig`` is its signature under the token."""
        file_id = request.match_info["file_id"]
        supplied = request.query.get("sig", "")
        if not _ID.match(file_id) or not hmac.compare_digest(supplied.encode(), self.sign(file_id).encode()):
            raise web.HTTPForbidden(text='{"error": "not a valid file address"}', content_type="application/json")
        path = self.dir / file_id

        def head() -> bytes | None:
            try:
                with open(path, "rb") as f:
                    return f.read(16)
            except FileNotFoundError:
                return None

        first = await asyncio.to_thread(head)
        if first is None:
            raise web.HTTPNotFound(text='{"error": "the file is gone"}', content_type="application/json")
        image = sniff_image(first)
        name = clean_name(request.match_info.get("name"))
        headers = {"X-Content-Type-Options": "nosniff", "Cache-Control": "private, max-age=86400",
                   "Content-Security-Policy": "default-src 'none'; sandbox", "Referrer-Policy": "no-referrer",
                   "Content-Type": image or "application/octet-stream"}
        if image is None:
            headers["Content-Disposition"] = f"attachment; filename*=UTF-8''{quote(name, safe='')}"
        return web.FileResponse(path, headers=headers)
