"""Files for the media tests, made here (no fixtures on disk): images with and without EXIF, a voice note."""

from __future__ import annotations

import io
from pathlib import Path

from tests.fakes.llm_audio import OGG_OPUS

VOICE = OGG_OPUS  # a valid Ogg/Opus first page: what a voice note's bytes begin with
HTML_AS_PNG = b"<!DOCTYPE html><html><body>not a picture</body></html>"


def image_bytes(width: int = 64, height: int = 48, fmt: str = "PNG", color: tuple[int, int, int] = (200, 30, 30),
                orientation: int | None = None, comment: str | None = None) -> bytes:
    """An image; ``orientation`` sets the EXIF orientation tag, ``comment`` a GPS-like EXIF field to strip."""
    from PIL import Image

    img = Image.new("RGB", (width, height), color)
    img.putpixel((0, 0), (0, 0, 255))  # a mark in the top-left corner, to see where it ends up
    out = io.BytesIO()
    kwargs = {}
    if orientation is not None or comment is not None:
        exif = Image.Exif()
        if orientation is not None:
            exif[0x0112] = orientation
        if comment is not None:
            exif[0x010E] = comment  # ImageDescription
        kwargs["exif"] = exif.tobytes()
    img.save(out, fmt, **kwargs)
    return out.getvalue()


def bomb_png(width: int = 30_000, height: int = 30_000) -> bytes:
    """A tiny PNG whose header claims a huge image (decoding it would take gigabytes)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    row = b"\0" + b"\0" * 3 * 16
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(row)) + chunk(b"IEND", b"")


def image_parts(request: dict) -> list[str]:
    """The data URLs of the image parts in a chat request's last user message."""
    for msg in reversed(request.get("messages") or []):
        if msg.get("role") == "user":
            content = msg.get("content")
            if not isinstance(content, list):
                return []
            return [p["image_url"]["url"] for p in content if isinstance(p, dict) and p.get("type") == "image_url"]
    return []


def workspace_with(runner: object, files: dict[str, bytes]) -> Path:
    """The runner's workspace, with ``files`` (name -> bytes) written into it."""
    ws = Path(runner.agents.sandbox.workspace)  # type: ignore[attr-defined]
    ws.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (ws / name).write_bytes(data)
    return ws
