"""Files through the API, both ways.

In: an image part of the request's last user message, as a ``data:`` URL only. Fetching a client's
``http(s)://`` URL from the daemon would let any key holder make it reach hosts only it can reach (SSRF), so such
a part is refused. The bytes are checked (base64, a declared image type, the bytes say an image, ``MAX_IMAGE_BYTES``)
before anything is accepted, then held under a random id in the profile's home (``api_files/in``, out of the
agent's sight) until the message's turn: the lane's ``prepare`` moves each into the media folder as any platform's
download, and from there the media rules take over (checked, image parts for a vision model, a path and a note
otherwise, the history keeping the path).

Out: a file the agent's ``send_file`` sent in an API turn is linked from the answer, one Markdown line per file,
to ``GET /v1/files/<id>/<name>``. The id is a random token whose record (``api_files/out/<id>.json``) names the
copy delivery made and the key's holder whose turn sent it: only that holder's key opens it, and only a copy
inside the daemon's own media folder is ever served.
"""

from __future__ import annotations

import asyncio
import binascii
import contextlib
import json
import os
import re
import secrets
import shutil
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

from aiohttp import web

from gateway.api.wire import ApiError
from gateway.media.sniff import HEAD, sniff

# The largest image a request may carry, decoded (the request body's own cap, api.max_body_bytes, comes first).
MAX_IMAGE_BYTES = 20 * 1024 * 1024
MAX_IMAGES = 8  # in one message
_DATA = re.compile(r"^data:(?P<mime>[A-Za-z0-9.+/-]*)(?P<params>(?:;[^,;]*)*?);base64,", re.ASCII)
_TYPES = {"image/png": ".png", "image/jpeg": ".jpg", "image/jpg": ".jpg", "image/gif": ".gif",
          "image/webp": ".webp", "image/bmp": ".bmp"}
_HELD = re.compile(r"^[0-9a-f]{32}$")
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{32}$")
_SAFE = re.compile(r"[^A-Za-z0-9._ -]+")


def decode_image(url: Any, param: str) -> tuple[bytes, str]:
    """(the bytes, a file name) of an image part's URL; ``ApiError`` (400) for anything but a data: URL of an
    image within ``MAX_IMAGE_BYTES``."""
    if not isinstance(url, str) or not url:
        raise ApiError(400, f"{param} must be a data: URL of an image.", param=param, code="invalid_image_url")
    if url[:8].lower().startswith(("http://", "https://")):
        raise ApiError(400, f"{param}: Herald's API takes images only as data: URLs (data:image/png;base64,...); "
                            "it does not fetch URLs, which would let a request reach hosts only the daemon can.",
                       param=param, code="invalid_image_url")
    found = _DATA.match(url)
    if found is None:
        raise ApiError(400, f"{param} is not a base64 data: URL (data:image/png;base64,...).", param=param,
                       code="invalid_image_url")
    mime = found["mime"].lower()
    if mime not in _TYPES:
        raise ApiError(400, f"{param}: {mime or 'no type'} is not an image type Herald takes (PNG, JPEG, GIF, WEBP, "
                            "BMP).", param=param, code="invalid_image_format")
    payload = url[found.end():]
    too_big = ApiError(400, f"{param}: the image is larger than {MAX_IMAGE_BYTES / 1048576:g} MB.", param=param,
                       code="image_too_large")
    if len(payload) // 4 * 3 > MAX_IMAGE_BYTES + 3:
        raise too_big
    try:
        data = binascii.a2b_base64(payload.strip(), strict_mode=True)
    except (binascii.Error, ValueError):
        raise ApiError(400, f"{param}: the data: URL's base64 does not decode.", param=param,
                       code="invalid_image_url") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise too_big
    if not data or not sniff(data[:HEAD]).image:
        raise ApiError(400, f"{param}: the data is not a {mime} image (its bytes say otherwise).", param=param,
                       code="invalid_image_format")
    return data, f"image{_TYPES[mime]}"


def _link_name(name: str) -> str:
    return _SAFE.sub("_", os.path.basename(name))[-100:].strip() or "file"


class ApiFiles:
    def __init__(self, home: Path, out_dir: Path | None) -> None:
        self.held = home / "api_files" / "in"
        self.links = home / "api_files" / "out"
        self.out_dir = Path(os.path.realpath(out_dir)) if out_dir is not None else None

    # ---- in -------------------------------------------------------------------------------------------

    async def hold(self, images: list[tuple[bytes, str]]) -> list[dict[str, Any]]:
        """The images saved until their turn: one ``pending["files"]`` entry (a ``file_ref``) each."""

        def save() -> list[dict[str, Any]]:
            self.held.mkdir(parents=True, exist_ok=True)
            out = []
            for data, name in images:
                held = uuid.uuid4().hex
                partial = self.held / f"{held}.part"
                partial.write_bytes(data)
                os.replace(partial, self.held / held)
                out.append({"name": name, "kind": "image", "size": len(data), "held": held})
            return out

        return await asyncio.to_thread(save)

    async def take(self, held: str, target: Path) -> None:
        """A held image moved to ``target`` (the media folder); ``FileNotFoundError`` when it is not there."""
        if not _HELD.match(held):
            raise FileNotFoundError(held)
        await asyncio.to_thread(shutil.move, self.held / held, target)

    async def drop(self, refs: list[dict[str, Any]]) -> None:
        """Held images whose message was not taken."""

        def unlink() -> None:
            for ref in refs:
                if _HELD.match(str(ref.get("held"))):
                    with contextlib.suppress(FileNotFoundError):
                        (self.held / ref["held"]).unlink()

        await asyncio.to_thread(unlink)

    # ---- out ------------------------------------------------------------------------------------------

    async def link(self, holder: str, path: str, filename: str) -> tuple[str, str]:
        """A new id for the copy at ``path``, which only ``holder`` may download: (the name shown, the link's
        path)."""
        token = secrets.token_urlsafe(24)
        name = _link_name(filename)
        record = {"holder": holder, "path": path, "name": name}

        def write() -> None:
            self.links.mkdir(parents=True, exist_ok=True)
            (self.links / f"{token}.json").write_text(json.dumps(record))

        await asyncio.to_thread(write)
        return name, f"/v1/files/{token}/{quote(name, safe='')}"

    async def serve(self, request: web.Request, holder: str) -> web.StreamResponse:
        token = request.match_info["file_id"]
        gone = ApiError(404, f"No file found with id '{token[:40]}'.", code="file_not_found")
        if not _TOKEN.match(token):
            raise gone

        def find() -> tuple[dict[str, Any], str] | None:
            try:
                record = json.loads((self.links / f"{token}.json").read_text())
            except (OSError, ValueError):
                return None
            if not isinstance(record, dict) or self.out_dir is None:
                return None
            real = os.path.realpath(str(record.get("path")))
            if not real.startswith(str(self.out_dir) + os.sep) or not os.path.isfile(real):
                return None
            return record, real

        found = await asyncio.to_thread(find)
        # Another holder's file is answered as an unknown one: whether an id exists is not told to other keys.
        if found is None or found[0].get("holder") != holder:
            raise gone
        record, real = found
        name = str(record.get("name") or "file")
        headers = {"Content-Type": "application/octet-stream", "X-Content-Type-Options": "nosniff",
                   "Content-Disposition": f"attachment; filename*=UTF-8''{quote(name, safe='')}",
                   "Content-Security-Policy": "default-src 'none'; sandbox", "Cache-Control": "private, no-store"}
        return web.FileResponse(real, headers=headers)
