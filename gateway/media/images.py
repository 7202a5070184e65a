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

from gateway.media.sniff import HEAD, BadMedia, sniff

CACHE_BYTES = 24 * 1024 * 1024
_FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WEBP", "image/bmp": "BMP"}


class ImagePrep:
    def __init__(self, max_px: int = 2048, max_megapixels: float = 50.0, cache_bytes: int = CACHE_BYTES) -> None:
        self.max_px = max_px
        self.max_pixels = int(max_megapixels * 1_000_000)
        self._cache: OrderedDict[tuple[str, int, int], str] = OrderedDict()
        self._cached = 0
        self._cache_bytes = cache_bytes
        self._lock = threading.Lock()  # worker threads of several turns share it

    def check(self, path: str) -> tuple[int, int]:
        """The image's size in pixels, reading only its header; ``BadMedia`` when it is no image or too large."""
        with self._open(path) as img:
            return img.size

    def data_url(self, path: str) -> str:
        """The image as a ``data:`` URL the model takes: upright, downscaled, re-encoded, without metadata.
        ``FileNotFoundError`` when it is gone, ``BadMedia`` when it cannot be used."""
        st = os.stat(path)
        key = (path, st.st_mtime_ns, st.st_size)
        with self._lock:
            url = self._cache.get(key)
            if url is not None:
                self._cache.move_to_end(key)
                return url
        mime, data = self.encode(path)
        url = f"data:{mime};base64,{base64.b64encode(data).decode()}"
        with self._lock:
            if len(url) <= self._cache_bytes // 4 and key not in self._cache:
                self._cache[key] = url
                self._cached += len(url)
                while self._cached > self._cache_bytes:
                    _, old = self._cache.popitem(last=False)
                    self._cached -= len(old)
        return url

    def encode(self, path: str) -> tuple[str, bytes]:
        from PIL import Image, ImageOps

        with self._open(path) as img:
            try:
                if img.format == "JPEG":
                    img.draft("RGB", (self.max_px, self.max_px))  # decode at a fraction of the size when it can
                upright = ImageOps.exif_transpose(img)
                upright.thumbnail((self.max_px, self.max_px), Image.Resampling.LANCZOS)
                alpha = upright.mode in ("RGBA", "LA", "PA") or (upright.mode == "P" and "transparency" in upright.info)
                out = io.BytesIO()
                if alpha:
                    upright.convert("RGBA").save(out, "PNG", optimize=True)  # no info dict: no metadata
                    return "image/png", out.getvalue()
                upright.convert("RGB").save(out, "JPEG", quality=85)
                return "image/jpeg", out.getvalue()
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
