"""Slack's files out, through the external upload flow (the old files.upload is retired): files.getUploadURLExternal
names the file and its length and gives an upload URL, the bytes are POSTed there, and
files.completeUploadExternal shares the file into the channel (in the thread, with the caption as its
comment). Slack has no idempotency key: a file resent after a crash is announced by delivery first."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.platforms.base import Attachment, OutboundMessage, PermanentError, TransientError
from gateway.platforms.slack.transport import map_error

UPLOAD_LIMIT = 1024 * 1024 * 1024  # Slack takes files up to 1 GB


class SlackFiles:
    def __init__(self, client: Callable[[], Any], session: Callable[[], Any], render: Callable[[str], str]) -> None:
        self._client = client
        self._session = session
        self._render = render

    async def send(self, chat_id: str, att: Attachment, message: OutboundMessage) -> list[str]:
        client = self._client()
        if client is None:
            raise TransientError("slack is not connected right now")
        data = await asyncio.to_thread(Path(att.path).read_bytes)
        try:
            ticket = await client.files_getUploadURLExternal(filename=att.filename, length=len(data))
            await self._upload(str(ticket["upload_url"]), att, data)
            kwargs: dict[str, Any] = {"files": [{"id": ticket["file_id"], "title": att.filename}],
                                      "channel_id": chat_id}
            if message.thread_id:
                kwargs["thread_ts"] = message.thread_id
            if att.caption:
                kwargs["initial_comment"] = self._render(att.caption)
            done = await client.files_completeUploadExternal(**kwargs)
        except (PermanentError, TransientError):
            raise
        except Exception as exc:
            raise map_error(exc) from exc
        files = done.get("files") or [{"id": ticket["file_id"]}]
        return [str(f.get("id")) for f in files if isinstance(f, dict)]

    async def _upload(self, url: str, att: Attachment, data: bytes) -> None:
        import aiohttp

        session = self._session()
        form = aiohttp.FormData()
        form.add_field("file", data, filename=att.filename, content_type=att.mime)
        try:
            async with session.post(url, data=form) as resp:
                if resp.status >= 500:
                    raise TransientError(f"the upload answered {resp.status}")
                if resp.status != 200:
                    raise PermanentError(f"the upload was refused ({resp.status})")
        except aiohttp.ClientError as exc:
            raise TransientError(f"the upload failed: {type(exc).__name__}") from exc
