"""The media parts a turn uses, built once by the runner from ``media.*``, ``transcription.*`` and ``tts.*``."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import structlog

from gateway.config import Config
from gateway.kernel.attached import split_files
from gateway.media.audio import AudioFailed, Speaker, Transcriber
from gateway.media.content import MediaContent
from gateway.media.images import ImagePrep
from gateway.media.inbound import MediaInbound
from gateway.media.outgoing import FilesOut, attachment_of
from gateway.media.sniff import HEAD
from gateway.platforms.base import NO_FAULTS, Attachment, FaultSink

log = structlog.get_logger("herald.media")


class Media:
    def __init__(self, cfg: Config, inbound_dir: Path, own_dir: Path, faults: FaultSink = NO_FAULTS) -> None:
        """``inbound_dir``: where adapters save what people send (the agent's workspace when sandboxed);
        ``own_dir``: the daemon's media folder, out of the agent's reach (copies of what it sends)."""
        self.cfg = cfg
        self.inbound_dir = inbound_dir
        self.out_dir = own_dir / "out"
        self.images = ImagePrep(cfg.media.max_image_px, cfg.media.max_image_megapixels)
        self.content = MediaContent(self.images, [str(inbound_dir), str(self.out_dir)])
        self.inbound = MediaInbound(self.images, Transcriber(cfg.transcription, cfg.model, faults), faults)
        self.speaker = Speaker(cfg.tts, cfg.model, faults)
        self.max_send = int(cfg.media.max_send_mb * 1024 * 1024)

    def files_out(self, session_id: str) -> FilesOut:
        return FilesOut(self.out_dir, session_id, self.max_send)

    async def voice_note(self, text: str, session_id: str, inbox_id: int | None) -> Attachment | None:
        """The answer spoken, as a voice note (made once: a delivery resumed after a restart finds it)."""
        target = self.out_dir / f"voice-{session_id}-{inbox_id if inbox_id is not None else 'x'}.ogg"
        if not target.exists():
            try:
                await self.speaker.speak(text, target)
            except AudioFailed as exc:
                log.warning("voice_note_failed", reason=str(exc))
                return None
        return Attachment(path=str(target), filename="answer.ogg", mime="audio/ogg", kind="voice")


def attachments_in(text: str) -> tuple[str, list[Attachment]]:
    """A stored result whose block names files (a cron job's answer): the text, and the files as attachments."""
    body, paths = split_files(text)
    found: list[Attachment] = []
    for path in paths:
        try:
            with open(path, "rb") as f:
                head = f.read(HEAD)
        except OSError:
            head = b""
        name = os.path.basename(path)
        if name.startswith("out-") and name.count("-") >= 7:  # out-<session uuid>-<hex>-<name>
            name = name.split("-", 7)[7]
        found.append(attachment_of(path, name, None, head))
    return body, found


async def attachments_in_async(text: str) -> tuple[str, list[Attachment]]:
    return await asyncio.to_thread(attachments_in, text)
