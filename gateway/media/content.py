"""What the model is sent of a user message that came with files. The history stores the text and the block
naming each file's path (gateway/kernel/attached.py), never the bytes; each turn reads the images again, as
image parts for a model that takes them (``model.vision``), and for any other model the paths stay with a
one-line note. A file that is gone is said to be gone. Only files in the media folders are read: the block's
paths are the gateway's, but its text is stored with the person's words.

Runs in the turn's worker thread (Pillow's work never holds the event loop).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any

from gateway.kernel.attached import split_files
from gateway.media.images import ImagePrep
from gateway.media.sniff import BadMedia, sniff_file

log = logging.getLogger(__name__)

# Images sent in one request at most (the newest): an old photo further up is named, not sent again.
MAX_IMAGES = 8
BLIND_NOTE = ("[The attached image{s} above {are} saved at the path{s} shown; this model cannot see images, "
              "so describe what you need from them or read them with a tool.]")


class MediaContent:
    def __init__(self, images: ImagePrep, roots: Iterable[str]) -> None:
        self.images = images
        self.roots = [os.path.realpath(r) for r in roots]

    def _ours(self, path: str) -> bool:
        real = os.path.realpath(path)
        return any(real.startswith(root + os.sep) for root in self.roots)

    def for_model(self, content: Any, vision: bool, budget: list[int] | None = None, earlier: bool = False) -> Any:
        """One user message's stored content as the model should get it (a string, or text and image parts);
        ``earlier``: a message of the history, whose images go again smaller (``images.HISTORY_PX``)."""
        if not isinstance(content, str):
            return content
        _text, paths = split_files(content)
        if not paths:
            return content
        budget = budget if budget is not None else [MAX_IMAGES]
        notes: list[str] = []
        parts: list[dict[str, Any]] = []
        blind = 0
        for path in paths:
            if not self._ours(path):
                continue
            if not os.path.exists(path):
                notes.append(f"[{path} is no longer on this machine.]")
                continue
            try:
                if not sniff_file(path).image:
                    continue
            except OSError:
                continue
            if not vision:
                blind += 1
                continue
            if budget[0] <= 0:
                notes.append(f"[{path}: an image shown in an earlier turn, not sent again.]")
                continue
            try:
                parts.append({"type": "image_url", "image_url": {"url": self.images.data_url(path, earlier)}})
                budget[0] -= 1
            except BadMedia as exc:
                notes.append(f"[{path} could not be shown: {exc}.]")
            except OSError:
                notes.append(f"[{path} is no longer on this machine.]")
        if blind:
            s = "s" if blind > 1 else ""
            notes.append(BLIND_NOTE.format(s=s, are="are" if blind > 1 else "is"))
        text = "\n".join([content, *notes]) if notes else content
        if not parts:
            return text
        return [{"type": "text", "text": text}, *parts]

    def history_for_model(self, history: list[dict[str, Any]], vision: bool,
                          budget: list[int] | None = None) -> list[dict[str, Any]]:
        """The history with each user message's files read again, newest first within ``MAX_IMAGES``."""
        budget = budget if budget is not None else [MAX_IMAGES]
        out = list(history)
        for n in range(len(out) - 1, -1, -1):
            msg = out[n]
            if msg.get("role") == "user" and isinstance(msg.get("content"), str) and "\n- /" in msg["content"]:
                content = self.for_model(msg["content"], vision, budget, earlier=True)
                if content is not msg["content"]:
                    out[n] = {**msg, "content": content}
        return out
