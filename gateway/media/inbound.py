"""A message's files checked before its turn, in the lane after the adapter's downloads (after the platform's
ack): each is what its bytes say. An image that is not one (a "photo.png" that is HTML), one past the pixel
limit, an empty or damaged voice note is refused with one line to the user and left out of the turn; voice
notes and audio files are transcribed (the transcript becomes the message's text, marked as such, and the
audio stays attached), and a transcription that fails is told in one line while the turn goes on with the
file's path.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field

import structlog

from gateway.media.audio import AudioFailed, Transcriber
from gateway.media.images import ImagePrep
from gateway.media.sniff import BadMedia, Sniffed, check_audio, sniff_file
from gateway.platforms.base import NO_FAULTS, FaultSink, InboundMessage

log = structlog.get_logger("herald.media")

# What a file's name claims (never what it is: the bytes say that): a claim the bytes deny is refused.
IMAGE_NAMES = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp")
AUDIO_NAMES = (".ogg", ".oga", ".opus", ".mp3", ".m4a", ".wav", ".flac", ".weba")
ECHO_MAX = 300


@dataclass
class Checked:
    problems: list[str] = field(default_factory=list)  # "name: why", told to the user in one line
    transcripts: list[str] = field(default_factory=list)  # for transcription.echo
    failed_transcriptions: list[str] = field(default_factory=list)  # "name: why"


class MediaInbound:
    def __init__(self, images: ImagePrep, transcriber: Transcriber, faults: FaultSink = NO_FAULTS) -> None:
        self.images = images
        self.transcriber = transcriber
        self.faults = faults

    async def check(self, msg: InboundMessage) -> Checked:
        out = Checked()
        if not msg.attachments:
            return out
        kept: list[str] = []
        notes: list[str] = []
        heard: list[str] = []
        for path in msg.attachments:
            name = msg.names.get(path) or os.path.basename(path)
            lower = name.lower()
            try:
                found = await asyncio.to_thread(sniff_file, path)
                if found.image or lower.endswith(IMAGE_NAMES):
                    await asyncio.to_thread(self.images.check, path)
                elif found.kind == "audio" or lower.endswith(AUDIO_NAMES) or os.stat(path).st_size == 0:
                    found = await asyncio.to_thread(check_audio, path)
                    text = await self._transcribe(path, name, found, out, notes)
                    if text:
                        heard.append(f"[Transcribed from the voice note {name}:] {text}")
                        out.transcripts.append(text)
            except BadMedia as exc:
                self.faults.record("bad_media")
                log.info("media_refused", file=name, reason=str(exc))
                notes.append(f"[The user sent {name}, which was refused: {exc}.]")
                out.problems.append(f"{name}: {exc}")
                continue
            except OSError:
                pass  # gone or unreadable: the turn names the path, the agent finds out
            kept.append(path)
        msg.attachments = kept
        extra = [*heard, *notes]
        if extra:
            msg.text = "\n".join([msg.text, *extra]) if msg.text.strip() else "\n".join(extra)
        return out

    async def _transcribe(self, path: str, name: str, found: Sniffed, out: Checked, notes: list[str]) -> str | None:
        if not self.transcriber.enabled:
            return None
        try:
            return await self.transcriber.transcribe(path, found.mime) or None
        except AudioFailed as exc:
            log.info("transcription_failed", file=name, reason=str(exc))
            notes.append(f"[{name} could not be transcribed: {exc}. It is attached as a file.]")
            out.failed_transcriptions.append(f"{name}: {exc}")
            return None


def echo_line(transcripts: list[str]) -> str:
    """The transcripts shown back in one line (``transcription.echo``)."""
    said = " / ".join(transcripts)
    if len(said) > ECHO_MAX:
        said = said[: ECHO_MAX - 1] + "…"
    return f"🎤 “{said}”"
