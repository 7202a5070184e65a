"""The fake model's audio endpoints (OpenAI's wire format): ``POST /v1/audio/transcriptions`` (multipart: file,
model, response_format, language) answers ``{"text": ...}`` and ``POST /v1/audio/speech`` (JSON: model, voice,
input, response_format) answers audio bytes.

``transcripts``: what the next transcriptions answer (FIFO; empty: ``"transcript of <file name>"``);
``audio_down``: an HTTP status every audio request gets instead (500, 503...); ``transcriptions`` and
``speeches``: what was asked, in order.
"""

from __future__ import annotations

import collections
from typing import Any

from aiohttp import web


def _crc(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) & 0xFFFFFFFF if crc & 0x80000000 else (crc << 1) & 0xFFFFFFFF
    return crc


def ogg_page(packet: bytes, serial: int = 7) -> bytes:
    """One Ogg page (RFC 3533) holding ``packet`` (< 255 bytes), with its checksum right."""
    header = b"OggS" + bytes([0, 2]) + (0).to_bytes(8, "little") + serial.to_bytes(4, "little") \
        + (0).to_bytes(4, "little") + b"\0\0\0\0" + bytes([1, len(packet)])
    page = header + packet
    return page[:22] + _crc(page).to_bytes(4, "little") + page[26:]


# What /audio/speech answers by default, and what a test's voice note is: an Opus stream's first page.
OGG_OPUS = ogg_page(b"OpusHead\x01\x01\x38\x01\x80\xbb\x00\x00\x00\x00\x00")


class AudioEndpoints:
    def _audio_init(self) -> None:
        self.transcripts: collections.deque[str] = collections.deque()
        self.audio_down: int | None = None
        self.transcriptions: list[dict[str, Any]] = []
        self.speeches: list[dict[str, Any]] = []
        self.speech_audio = OGG_OPUS

    def audio_routes(self) -> list[web.AbstractRouteDef]:
        return [web.post("/v1/audio/transcriptions", self._transcribe), web.post("/v1/audio/speech", self._speak)]

    async def _transcribe(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form.get("file")
        entry = {"model": form.get("model"), "language": form.get("language"),
                 "filename": getattr(upload, "filename", None),
                 "bytes": upload.file.read() if upload is not None and hasattr(upload, "file") else b"",
                 "content_type": getattr(upload, "content_type", None),
                 "authorization": request.headers.get("Authorization")}
        self.transcriptions.append(entry)
        if self.audio_down is not None:
            return web.json_response({"error": {"message": "down"}}, status=self.audio_down)
        if not entry["bytes"]:
            return web.json_response({"error": {"message": "no file"}}, status=400)
        text = self.transcripts.popleft() if self.transcripts else f"transcript of {entry['filename']}"
        return web.json_response({"text": text})

    async def _speak(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.speeches.append(body)
        if self.audio_down is not None:
            return web.json_response({"error": {"message": "down"}}, status=self.audio_down)
        return web.Response(body=self.speech_audio, content_type="audio/ogg")
