"""Files the agent sends (the ``send_file`` tool): the tool checks the path (the workspace only, symlinks
resolved, ``media.max_send_mb``) and hands the open file here, from its worker thread. It is copied at once
into the daemon's own media folder (out of the agent's reach: a file swapped for a symlink after the check
cannot change what is sent) and becomes an ``Attachment`` of the turn's reply, delivered after its text
through the outbox.

The tool's result, stored with the turn's steps, is the record: ``files_sent`` reads the attachments back from
a turn's messages, so a reply recovered after a restart still carries its files.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path
from typing import Any

from gateway.media.sniff import HEAD, sniff
from gateway.platforms.base import Attachment

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_KINDS = {"image": "image", "audio": "audio", "video": "video"}


def out_name(session_id: str, filename: str) -> str:
    """The copy's name: the session first, so retention finds a deleted session's files by name."""
    return f"out-{session_id}-{uuid.uuid4().hex[:12]}-{_SAFE.sub('_', filename)[-80:] or 'file'}"


def attachment_of(path: str, filename: str, caption: str | None, head: bytes) -> Attachment:
    found = sniff(head[:HEAD])
    kind = "image" if found.image else _KINDS.get(found.kind, "document")
    return Attachment(path=path, filename=filename, mime=found.mime, caption=caption or None,
                      kind=kind)  # type: ignore[arg-type]


class FilesOut:
    """One turn's way to send files (``ToolContext.extras["files_out"]``), used from its worker thread."""

    def __init__(self, folder: Path, session_id: str, max_bytes: int) -> None:
        self.folder = folder
        self.session_id = session_id
        self.max_bytes = max_bytes

    def queue(self, fd: int, filename: str, caption: str | None) -> dict[str, Any]:
        """Copy the open file ``fd`` (already checked by the tool) and describe it for the tool's result."""
        self.folder.mkdir(parents=True, exist_ok=True)
        target = self.folder / out_name(self.session_id, filename)
        copied = 0
        head = b""
        with open(target, "xb") as out:
            os.lseek(fd, 0, os.SEEK_SET)
            while chunk := os.read(fd, 1 << 20):
                if not head:
                    head = chunk[:HEAD]
                copied += len(chunk)
                if copied > self.max_bytes:
                    out.close()
                    target.unlink(missing_ok=True)
                    raise ValueError(f"it grew past the {self.max_bytes / 1048576:g} MB limit while it was copied")
                out.write(chunk)
        att = attachment_of(str(target), filename, caption, head)
        return {"sent": True, "filename": att.filename, "mime": att.mime, "kind": att.kind, "bytes": copied,
                "caption": att.caption, "copy": att.path}


def files_sent(messages: list[dict[str, Any]]) -> list[Attachment]:
    """The files a turn's ``send_file`` calls queued, in order, from its stored messages."""
    calls = {call.get("id"): (call.get("function") or {}).get("name")
             for msg in messages if msg.get("role") == "assistant" for call in msg.get("tool_calls") or ()}
    out: list[Attachment] = []
    for msg in messages:
        if msg.get("role") != "tool" or calls.get(msg.get("tool_call_id")) != "send_file":
            continue
        try:
            result = json.loads(msg.get("content") or "")
        except (TypeError, ValueError):
            continue
        if not isinstance(result, dict) or result.get("sent") is not True or not isinstance(result.get("copy"), str):
            continue
        out.append(Attachment(path=result["copy"], filename=str(result.get("filename") or "file"),
                              mime=str(result.get("mime") or "application/octet-stream"),
                              caption=result.get("caption") or None,
                              kind=result.get("kind") if result.get("kind") in ("image", "audio", "voice", "video")
                              else "document"))
    return out
