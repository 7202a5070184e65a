"""The files a message came with, as the contract hands them about: a ``file_ref`` in ``InboundMessage.pending``,
fetched after the acknowledgement (``PlatformAdapter.download``), saved within a size cap. Imported through
gateway/platforms/base.py, like the rest of the contract."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any


def file_ref(name: str, kind: str = "file", size: int | None = None, **platform: Any) -> dict[str, Any]:
    """One entry of ``InboundMessage.pending["files"]``: what the gateway says about the file (its name, what
    it is, its declared size) and whatever the adapter needs to fetch it (a URL, a file id)."""
    return {"name": name, "kind": kind, "size": size, **platform}


class FileUnavailable(Exception):
    """A file that cannot be had; ``str()`` says why in words a user understands ("bigger than the 20 MB
    limit")."""


class TooBig(FileUnavailable):
    def __init__(self, cap_mb: float) -> None:
        super().__init__(f"bigger than the {cap_mb:g} MB limit")


async def save_stream(chunks: Any, target: Path, cap: int, cap_mb: float) -> None:
    """Write an async iterator of byte chunks to ``target``, refusing (``TooBig``) as soon as it passes ``cap``
    bytes — whatever size the platform declared — and never leaving a partial file under the final name."""
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > cap:
            raise TooBig(cap_mb)
    await asyncio.to_thread(_write, target, bytes(body))


def _write(target: Path, data: bytes) -> None:
    partial = target.with_name(target.name + ".part")
    try:
        partial.write_bytes(data)
        os.replace(partial, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
