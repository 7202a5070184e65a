"""The web chat's files, both ways, behind the bearer token like the rest of ``/api/``.

In: ``POST /api/v1/uploads?name=NAME`` streams one file (at most ``MAX_UPLOAD`` bytes) into the media folder
and answers its id; ``POST /api/v1/messages`` names the ids in ``files`` and the message carries those files
(the page uploads what is chosen, dropped or pasted, then sends). The sender is the owner, never a stranger.

Out: ``send_file`` keeps a copy under the profile's home (out of the agent's reach) and posts a message that
links to ``GET /api/v1/files/<id>/<name>``; the page fetches it with the token (a plain link could not carry
it), shows an image inline and saves anything else. The copy's id is the delivery's idempotency key, so a
file resent after a crash is stored and shown once.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import uuid
from pathlib import Path

from aiohttp import web

from gateway.platforms.base import Attachment
from gateway.platforms.files import TooBig, save_stream

MAX_UPLOAD = 20 * 1024 * 1024
MAX_FILES = 10
_ID = re.compile(r"[A-Za-z0-9_-]{8,80}")
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_INLINE = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def _bad(text: str, status: int = 400) -> web.HTTPException:
    cls = web.HTTPRequestEntityTooLarge if status == 413 else web.HTTPBadRequest
    if status == 413:
        return cls(max_size=MAX_UPLOAD, actual_size=MAX_UPLOAD + 1, text=json.dumps({"error": text}),
                   content_type="application/json")
    return cls(text=json.dumps({"error": text}), content_type="application/json")


def safe_name(name: str) -> str:
    return _SAFE.sub("_", os.path.basename(name or ""))[-80:].lstrip(".") or "file"


class WebFiles:
    def __init__(self, inbound_dir: Path, outbound_dir: Path) -> None:
        self.inbound_dir = inbound_dir  # where the agent finds what the owner sent
        self.outbound_dir = outbound_dir  # copies of what the agent sent, served to the page

    # ---- in ----------------------------------------------------------------------------------------

    async def upload(self, request: web.Request) -> web.Response:
        name = safe_name(request.query.get("name", "file"))
        upload_id = uuid.uuid4().hex
        self.inbound_dir.mkdir(parents=True, exist_ok=True)
        target = self.inbound_dir / f"web-{upload_id}-{name}"
        try:
            await save_stream(request.content.iter_chunked(65536), target, MAX_UPLOAD, MAX_UPLOAD / 1048576)
        except TooBig:
            raise _bad(f"the file is larger than {MAX_UPLOAD // 1048576} MB", 413) from None
        return web.json_response({"file": upload_id, "name": name}, status=201)

    def paths(self, ids: object) -> list[str]:
        """The uploaded files a message names (``files``: a list of upload ids)."""
        if ids is None:
            return []
        if not isinstance(ids, list) or len(ids) > MAX_FILES or not all(isinstance(i, str) and _ID.fullmatch(i)
                                                                         for i in ids):
            raise _bad(f"files must be a list of at most {MAX_FILES} upload ids")
        found = []
        for upload_id in ids:
            match = sorted(self.inbound_dir.glob(f"web-{upload_id}-*"))
            if not match:
                raise _bad(f"no upload {upload_id}")
            found.append(str(match[0]))
        return found

    # ---- out ---------------------------------------------------------------------------------------

    async def keep(self, att: Attachment, key: str | None) -> tuple[str, str]:
        """The copy the page fetches: (its URL, its file id)."""
        file_id = _SAFE.sub("_", key or uuid.uuid4().hex)[-80:]
        name = safe_name(att.filename)
        folder = self.outbound_dir / file_id
        await asyncio.to_thread(_copy, Path(att.path), folder, name, att.mime)
        return f"/api/v1/files/{file_id}/{name}", file_id

    @staticmethod
    def text(att: Attachment, url: str, size: int) -> str:
        mark = "🖼" if att.mime in _INLINE else "📎"
        line = f"{mark} [{att.filename}]({url}) ({_size(size)})"
        return f"{line}\n\n{att.caption}" if att.caption else line

    async def serve(self, request: web.Request) -> web.StreamResponse:
        file_id, name = request.match_info["file_id"], request.match_info["name"]
        if not _ID.fullmatch(file_id) or safe_name(name) != name:
            raise web.HTTPNotFound()
        folder = self.outbound_dir / file_id
        path = folder / name
        if not path.is_file():
            raise web.HTTPNotFound()
        mime = (folder / ".mime").read_text().strip() if (folder / ".mime").is_file() else ""
        inline = mime in _INLINE
        headers = {"Content-Type": mime if inline else "application/octet-stream",
                   "X-Content-Type-Options": "nosniff", "Cache-Control": "private, no-store",
                   "Content-Disposition": f'{"inline" if inline else "attachment"}; filename="{name}"'}
        return web.FileResponse(path, headers=headers)


def _copy(source: Path, folder: Path, name: str, mime: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    if not target.exists():
        partial = folder / f".{name}.part"
        shutil.copyfile(source, partial)
        os.replace(partial, target)
    (folder / ".mime").write_text(mime)


def _size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / 1048576:.1f} MB"
