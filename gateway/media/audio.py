"""The OpenAI-compatible audio endpoints: ``POST /audio/transcriptions`` (a voice note becomes text) and
``POST /audio/speech`` (an answer becomes a voice note). Each call is bounded in time and size; a failure is
``AudioFailed`` with one line for the user (never the server's raw text, which may quote a key), and counted
as a fault (``transcription_failed`` / ``speech_failed``).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import aiohttp
import structlog

from gateway.kernel.configbase import secret
from gateway.platforms.base import NO_FAULTS, FaultSink

log = structlog.get_logger("herald.media")

MAX_SPEECH_BYTES = 25 * 1024 * 1024


class AudioFailed(Exception):
    """``str()``: why, in one line for the user."""


def _endpoint(cfg: Any, model_cfg: Any) -> tuple[str | None, str | None]:
    base = (cfg.base_url or model_cfg.base_url or "").rstrip("/") or None
    return base, secret(cfg.api_key_env or model_cfg.api_key_env)


def _headers(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


async def _failure(resp: aiohttp.ClientResponse) -> AudioFailed:
    if resp.status in (401, 403):
        return AudioFailed(f"the server refused the credentials ({resp.status})")
    if resp.status == 404:
        return AudioFailed("the server has no such endpoint or model (404)")
    if resp.status == 413:
        return AudioFailed("the server said the file is too large (413)")
    if resp.status == 429:
        return AudioFailed("the server is rate limiting us (429)")
    return AudioFailed(f"the server answered {resp.status}")


class Transcriber:
    def __init__(self, cfg: Any, model_cfg: Any, faults: FaultSink = NO_FAULTS) -> None:
        self.cfg = cfg  # gateway.config.TranscriptionConfig
        self.base_url, self._key = _endpoint(cfg, model_cfg)
        self.faults = faults

    @property
    def enabled(self) -> bool:
        return bool(self.cfg.enabled and self.base_url)

    async def transcribe(self, path: str, mime: str) -> str:
        """The text spoken in the audio file at ``path``; ``AudioFailed`` saying why not."""
        try:
            return await self._transcribe(path, mime)
        except AudioFailed:
            self.faults.record("transcription_failed")
            raise

    async def _transcribe(self, path: str, mime: str) -> str:
        if not self.enabled:
            raise AudioFailed("no transcription endpoint is configured")
        size = os.stat(path).st_size
        if size > self.cfg.max_mb * 1024 * 1024:
            raise AudioFailed(f"it is larger than the {self.cfg.max_mb:g} MB transcription limit")
        data = await asyncio.to_thread(Path(path).read_bytes)
        form = aiohttp.FormData()
        form.add_field("file", data, filename=os.path.basename(path), content_type=mime)
        form.add_field("model", self.cfg.model)
        form.add_field("response_format", "json")
        if self.cfg.language:
            form.add_field("language", self.cfg.language)
        timeout = aiohttp.ClientTimeout(total=self.cfg.timeout_seconds)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as http, \
                    http.post(f"{self.base_url}/audio/transcriptions", data=form,
                              headers=_headers(self._key)) as resp:
                if resp.status != 200:
                    raise await _failure(resp)
                body = await resp.json(content_type=None)
        except AudioFailed:
            raise
        except TimeoutError:
            raise AudioFailed(f"the server took longer than {self.cfg.timeout_seconds:g} s") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise AudioFailed(f"the server could not be reached ({type(exc).__name__})") from None
        except ValueError:
            raise AudioFailed("the server's answer was not JSON") from None
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str):
            raise AudioFailed("the server's answer had no text")
        return " ".join(text.split())


class Speaker:
    def __init__(self, cfg: Any, model_cfg: Any, faults: FaultSink = NO_FAULTS) -> None:
        self.cfg = cfg  # gateway.config.SpeechConfig
        self.base_url, self._key = _endpoint(cfg, model_cfg)
        self.faults = faults

    @property
    def enabled(self) -> bool:
        return bool(self.base_url)

    async def speak(self, text: str, target: Path) -> Path:
        """``text`` spoken into an Ogg/Opus file at ``target`` (a voice note on every platform)."""
        try:
            return await self._speak(text, target)
        except AudioFailed:
            self.faults.record("speech_failed")
            raise

    async def _speak(self, text: str, target: Path) -> Path:
        if not self.enabled:
            raise AudioFailed("no speech endpoint is configured")
        body = {"model": self.cfg.model, "voice": self.cfg.voice, "input": text[: self.cfg.max_chars],
                "response_format": "opus"}
        timeout = aiohttp.ClientTimeout(total=self.cfg.timeout_seconds)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as http, \
                    http.post(f"{self.base_url}/audio/speech", json=body, headers=_headers(self._key)) as resp:
                if resp.status != 200:
                    raise await _failure(resp)
                data = bytearray()
                async for chunk in resp.content.iter_chunked(65536):
                    data += chunk
                    if len(data) > MAX_SPEECH_BYTES:
                        raise AudioFailed("the voice note came out larger than 25 MB")
        except AudioFailed:
            raise
        except TimeoutError:
            raise AudioFailed(f"the server took longer than {self.cfg.timeout_seconds:g} s") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise AudioFailed(f"the server could not be reached ({type(exc).__name__})") from None
        if not data:
            raise AudioFailed("the server sent no audio")
        target.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(_write_new, target, bytes(data))
        return target


def _write_new(target: Path, data: bytes) -> None:
    partial = target.with_name(target.name + ".part")
    partial.write_bytes(data)
    os.replace(partial, target)
