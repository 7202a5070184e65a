"""Images for a vision model: opened only when the bytes say image, refused unopened past the pixel limit (a
decompression bomb), turned upright by their EXIF orientation, downscaled to ``media.max_image_px`` on the long
side and re-encoded (JPEG, or PNG where there is transparency) with no metadata kept: location, camera and
comments never reach the model. The original stays where it is. Prepared images are kept in memory, bounded
in bytes, so a history that shows the same picture turn after turn encodes it once.
"""

from __future__ import annotations

import base64
import io
import os
import threading
import warnings
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gateway.kernel import memory
from gateway.media import jpeg
from gateway.media.sniff import HEAD, BadMedia, sniff

CACHE_BYTES = 8 * 1024 * 1024
# An image from an earlier turn is sent again at most this large, and coarser (the model saw it whole when it
# came): every later request of the conversation carries it, and the cache keeps it.
HISTORY_PX = 512
HISTORY_QUALITY = 70
_FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WEBP", "image/bmp": "BMP"}


class ImagePrep:
    def __init__(self, max_px: int = 2048, max_megapixels: float = 50.0, cache_bytes: int = CACHE_BYTES) -> None:
        self.max_px = max_px
        self.max_pixels = int(max_megapixels * 1_000_000)
        self._cache: OrderedDict[tuple[str, int], str] = OrderedDict()  # (path, mtime) -> the smaller URL
        self._cached = 0
        self._cache_bytes = cache_bytes
        self._lock = threading.Lock()  # worker threads of several turns share it
        # Images are decoded and encoded in a thread of their own, one at a time, whichever turn asks: a decoded
        # photo takes tens of MB, and what a thread allocates stays in its own malloc arena once freed (measured:
        # the Telegram bench's RSS went from ~120 to over 400 MB with the work spread over the turns' threads).
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="images")

    def check(self, path: str) -> tuple[int, int]:
        """The image's size in pixels, reading only its header; ``BadMedia`` when it is no image or too large."""
        with self._open(path) as img:
            return img.size

    def data_url(self, path: str, earlier: bool = False) -> str:
        """The image as a ``data:`` URL the model takes: upright, downscaled, re-encoded, without metadata;
        ``earlier``: for a turn after the one it came with (at most ``HISTORY_PX``, and kept in memory a while).
        ``FileNotFoundError`` when it is gone, ``BadMedia`` when it cannot be used."""
        key = (path, os.stat(path).st_mtime_ns)
        with self._lock:
            url = self._cache.get(key)
            if url is not None and earlier:
                self._cache.move_to_end(key)
                return url
        # One decode gives both: the image for its own turn, and the smaller one later turns send again.
        full, small = self._worker.submit(_trimmed, self._urls, path, not earlier).result()
        with self._lock:
            if key not in self._cache and len(small) <= self._cache_bytes // 4:
                self._cache[key] = small
                self._cached += len(small)
                while self._cached > self._cache_bytes:
                    _, old = self._cache.popitem(last=False)
                    self._cached -= len(old)
        return small if earlier or full is None else full

    def _urls(self, path: str, whole: bool) -> tuple[str | None, str]:
        from PIL import Image, ImageOps

        with self._open(path) as img:
            if whole and img.format == "JPEG" and max(img.size) <= self.max_px and _upright(img):
                # Nothing to turn or shrink: the metadata goes without decoding a pixel (gateway/media/jpeg.py).
                with open(path, "rb") as f:
                    stripped = jpeg.strip(f.read())
                if stripped is not None:
                    img.draft("RGB", (HISTORY_PX, HISTORY_PX))
                    img.thumbnail((HISTORY_PX, HISTORY_PX), Image.Resampling.LANCZOS)
                    return _data_url("image/jpeg", stripped), _data_url(*_encoded(img, HISTORY_PX, HISTORY_QUALITY))
            try:
                if img.format == "JPEG":  # decode at a fraction of the size when that is all that is needed
                    px = self.max_px if whole else min(HISTORY_PX, self.max_px)
                    img.draft("RGB", (px, px))
                img.load()
                ImageOps.exif_transpose(img, in_place=True)  # no copy of a decoded photo: tens of MB
                full = _data_url(*_encoded(img, self.max_px)) if whole else None
                img.thumbnail((HISTORY_PX, HISTORY_PX), Image.Resampling.LANCZOS)
                return full, _data_url(*_encoded(img, HISTORY_PX, HISTORY_QUALITY))
            except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
                raise BadMedia("the image is damaged and cannot be read") from exc

    def encode(self, path: str, px: int | None = None) -> tuple[str, bytes]:
        """The image upright, within ``px`` (``max_px``), re-encoded without metadata: (mime, bytes)."""
        from PIL import Image, ImageOps

        with self._open(path) as img:
            try:
                upright = ImageOps.exif_transpose(img)
                return _encoded(upright, px or self.max_px)
            except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
                raise BadMedia("the image is damaged and cannot be read") from exc

    def _open(self, path: str):  # type: ignore[no-untyped-def]
        from PIL import Image

        with open(path, "rb") as f:
            head = f.read(HEAD)
        found = sniff(head)
        if not found.image:
            raise BadMedia(f"it is not an image (it looks like {found.mime})")
        # Pillow's own bomb check, at our limit: a warning above it becomes an error, and twice over it raises.
        Image.MAX_IMAGE_PIXELS = self.max_pixels
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                img = Image.open(path, formats=[_FORMATS[found.mime]])
        except (Image.DecompressionBombWarning, Image.DecompressionBombError):
            raise BadMedia(f"the image is too large (more than {self.max_pixels / 1e6:g} megapixels)") from None
        except (OSError, SyntaxError, ValueError) as exc:
            raise BadMedia("the image is damaged and cannot be read") from exc
        width, height = img.size
        if width <= 0 or height <= 0 or width * height > self.max_pixels:
            img.close()
            raise BadMedia(f"the image is too large ({width}×{height}, more than {self.max_pixels / 1e6:g} "
                           "megapixels)")
        return img


def _encoded(img: Any, px: int, quality: int = 85) -> tuple[str, bytes]:
    """``img`` within ``px`` on its long side, as JPEG (PNG where it has transparency), with no metadata (no info
    dict, no EXIF is passed to ``save``)."""
    from PIL import Image

    if max(img.size) > px:
        img = img.copy()
        img.thumbnail((px, px), Image.Resampling.LANCZOS)
    alpha = img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info)
    out = io.BytesIO()
    # ``save`` is given no exif, icc_profile or comment: none of the original's metadata is written.
    if alpha:
        (img if img.mode == "RGBA" else img.convert("RGBA")).save(out, "PNG", optimize=True)
        return "image/png", out.getvalue()
    (img if img.mode in ("RGB", "L") else img.convert("RGB")).save(out, "JPEG", quality=quality)
    return "image/jpeg", out.getvalue()


def _data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def _trimmed(fn: Any, *args: Any) -> Any:
    """``fn(*args)``, then the C heap's free pages handed back: a decoded photo's are tens of MB."""
    try:
        return fn(*args)
    finally:
        memory.release()


def _upright(img: Any) -> bool:
    """No EXIF orientation other than "as stored" (reading the header only)."""
    try:
        return img.getexif().get(0x0112, 1) == 1
    except Exception:
        return False
