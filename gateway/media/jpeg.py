"""A JPEG's metadata taken out without decoding it: the segments that carry it (EXIF and XMP in APP1, ICC
profiles, IPTC, vendor blocks, comments) are dropped and the image data is copied as it is. For a photo that
needs nothing else (already upright, within the size limit) this is what re-encoding it would achieve, at a
fraction of the time and memory (no decoded pixels at all); anything it cannot vouch for is left to Pillow.
"""

from __future__ import annotations

_KEEP_APP = (0xE0, 0xEE)  # APP0 (JFIF) and APP14 (Adobe: how to read the colour channels)
_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})  # TEM, RSTn: markers without a length


def strip(data: bytes) -> bytes | None:
    """``data`` without its metadata segments; None when it is not a whole, well-formed JPEG (the caller then
    decodes it, and a damaged one is refused there)."""
    if not data.startswith(b"\xff\xd8") or not data.rstrip(b"\0").endswith(b"\xff\xd9"):
        return None
    out = bytearray(b"\xff\xd8")
    at = 2
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in _STANDALONE:
            out += data[at:at + 2]
            at += 2
            continue
        length = int.from_bytes(data[at + 2:at + 4], "big")
        end = at + 2 + length
        if length < 2 or end > len(data):
            return None
        if marker == 0xDA:  # start of scan: the image data (and any later scans) follow as they are
            out += data[at:]
            return bytes(out)
        if not (0xE0 <= marker <= 0xEF and marker not in _KEEP_APP) and marker != 0xFE:
            out += data[at:end]
        at = end
    return None
