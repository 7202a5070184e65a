"""What a file is, from its first bytes: a name or a platform's word for it is never trusted (a "photo.png"
that is HTML stays a document; a "voice.ogg" that is not Ogg is refused before any transcription)."""

from __future__ import annotations

import os
from dataclasses import dataclass

HEAD = 64  # bytes ``sniff`` needs

# (magic at offset 0, mime, kind); checked in order.
_MAGIC: tuple[tuple[bytes, str, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png", "image"),
    (b"\xff\xd8\xff", "image/jpeg", "image"),
    (b"GIF87a", "image/gif", "image"),
    (b"GIF89a", "image/gif", "image"),
    (b"BM", "image/bmp", "image"),
    (b"OggS", "audio/ogg", "audio"),
    (b"fLaC", "audio/flac", "audio"),
    (b"ID3", "audio/mpeg", "audio"),
    (b"%PDF-", "application/pdf", "document"),
    (b"PK\x03\x04", "application/zip", "document"),
    (b"\x1f\x8b", "application/gzip", "document"),
    (b"\x1aE\xdf\xa3", "video/webm", "video"),
)
_MP4_AUDIO_BRANDS = (b"M4A ", b"M4B ", b"F4A ")
_IMAGE_MIMES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp"})


@dataclass(frozen=True, slots=True)
class Sniffed:
    mime: str
    kind: str  # image | audio | video | document

    @property
    def image(self) -> bool:
        return self.mime in _IMAGE_MIMES


def sniff(head: bytes) -> Sniffed:
    """The type of a file beginning with ``head`` (at least ``HEAD`` bytes where the file has them)."""
    for magic, mime, kind in _MAGIC:
        if head.startswith(magic):
            return Sniffed(mime, kind)
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return Sniffed("image/webp", "image")
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return Sniffed("audio/wav", "audio")
    if head[4:8] == b"ftyp":
        brand = head[8:12]
        return Sniffed("audio/mp4", "audio") if brand in _MP4_AUDIO_BRANDS else Sniffed("video/mp4", "video")
    if len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0 and head[1] & 0x06:
        return Sniffed("audio/mpeg", "audio")  # an MPEG audio frame without an ID3 tag
    text = head.lstrip().lower()
    if text.startswith((b"<!doctype html", b"<html", b"<?xml", b"<svg")):
        return Sniffed("text/html" if b"html" in text[:16] else "application/xml", "document")
    if b"\0" not in head:
        try:
            head.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start < len(head) - 3:  # not only a character cut at the end of the head
                return Sniffed("application/octet-stream", "document")
        return Sniffed("text/plain", "document")
    return Sniffed("application/octet-stream", "document")


def sniff_file(path: str) -> Sniffed:
    with open(path, "rb") as f:
        return sniff(f.read(HEAD))


class BadMedia(Exception):
    """A file that is not what it should be; ``str()`` says why in one line for the user."""


def check_audio(path: str) -> Sniffed:
    """The audio file's type, or ``BadMedia``: empty, not audio at all, or an Ogg stream whose first page is
    damaged (its checksum does not match: a transcription server would choke on it)."""
    size = os.path.getsize(path)
    if size == 0:
        raise BadMedia("the audio is empty (0 bytes)")
    with open(path, "rb") as f:
        head = f.read(65_536)
    found = sniff(head[:HEAD])
    if found.kind not in ("audio", "video"):
        raise BadMedia(f"it is not audio (it looks like {found.mime})")
    if found.mime == "audio/ogg" and not _ogg_page_ok(head):
        raise BadMedia("the audio is damaged (not a valid Ogg stream)")
    return found


def _ogg_page_ok(data: bytes) -> bool:
    """The first Ogg page is whole and its CRC matches (RFC 3533)."""
    if len(data) < 27 or data[:4] != b"OggS" or data[4] != 0:
        return False
    segments = data[26]
    table_end = 27 + segments
    if len(data) < table_end:
        return False
    end = table_end + sum(data[27:table_end])
    if len(data) < end or end == table_end:
        return False
    page = bytearray(data[:end])
    stored = int.from_bytes(page[22:26], "little")
    page[22:26] = b"\0\0\0\0"
    return _ogg_crc(bytes(page)) == stored


def _ogg_crc(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ _OGG_TABLE[((crc >> 24) & 0xFF) ^ byte]
    return crc


def _table() -> list[int]:
    table = []
    for i in range(256):
        r = i << 24
        for _ in range(8):
            r = ((r << 1) ^ 0x04C11DB7) if r & 0x80000000 else r << 1
        table.append(r & 0xFFFFFFFF)
    return table


# zlib's CRC-32 is the reflected one; Ogg's is not, hence a table of its own.
_OGG_TABLE = _table()
