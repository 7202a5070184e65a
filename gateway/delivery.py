"""Outbound: markdown -> the platform's dialect, chunked to its limits, sent in order per chat.

Rate limits make only the affected chat wait (an ``asyncio.sleep`` in that chat's lane), transient errors
are retried with backoff, permanent ones are recorded and reported. Every chunk is recorded in the outbox,
and chunks already sent for an inbox message are skipped, so a restart mid-delivery never repeats one.
"""

from __future__ import annotations

import asyncio
import random
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from gateway.logs import redact
from gateway.platforms.base import (
    Capabilities,
    FormattingError,
    OutboundMessage,
    PermanentError,
    PlatformAdapter,
    RateLimited,
    TransientError,
)

if TYPE_CHECKING:
    from gateway.db import Store

log = structlog.get_logger("herald.delivery")

_FENCE = re.compile(r"^(\s*)(```|~~~)")


def text_length(text: str, unit: str) -> int:
    if unit == "utf16":
        return len(text.encode("utf-16-le")) // 2
    return len(text)


def _cut(text: str, limit: int, unit: str) -> int:
    """The largest prefix length (in characters) whose measured length fits ``limit``."""
    if unit != "utf16":
        return min(limit, len(text))
    units = 0
    for i, ch in enumerate(text):
        units += 2 if ord(ch) > 0xFFFF else 1
        if units > limit:
            return i
    return len(text)


def chunk_markdown(text: str, limit: int, unit: str = "chars") -> list[str]:
    """Split ``text`` into pieces that fit ``limit`` without breaking code blocks.

    Splits prefer paragraph, then line, then word boundaries. A code block cut in two is closed at the end
    of one piece and reopened (same fence and language) at the start of the next, so each piece renders.
    """
    if text_length(text, unit) <= limit:
        return [text]
    # Room for a reopened fence header and a closing fence in every piece.
    reserve = 16
    budget = max(limit - reserve, 32)
    pieces: list[str] = []
    open_fence: str | None = None  # e.g. "```python"
    rest = text
    while rest:
        prefix = (open_fence + "\n") if open_fence else ""
        room = budget - text_length(prefix, unit)
        if text_length(rest, unit) <= room:
            piece_body, rest = rest, ""
        else:
            cut = _cut(rest, room, unit)
            window = rest[:cut]
            split = window.rfind("\n\n")
            if split < cut // 2:
                split = window.rfind("\n")
            if split < cut // 2:
                split = window.rfind(" ")
            if split <= 0:
                split = cut
            piece_body, rest = rest[:split], rest[split:]
            if rest.startswith("\n"):
                rest = rest.lstrip("\n")
        # Track fences inside this piece to know whether it ends inside a code block.
        fence = open_fence
        for line in piece_body.split("\n"):
            m = _FENCE.match(line)
            if m:
                fence = None if fence else line.strip()
        piece = prefix + piece_body
        if fence:
            piece = piece.rstrip("\n") + "\n" + fence[:3]
        pieces.append(piece)
        open_fence = fence
    return [p for p in pieces if p.strip()]


_MD_STRIP = [
    (re.compile(r"```[^\n]*\n"), ""),
    (re.compile(r"```"), ""),
    (re.compile(r"\*\*(.+?)\*\*", re.S), r"\1"),
    (re.compile(r"__(.+?)__", re.S), r"\1"),
    (re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])"), r"\1"),
    (re.compile(r"`([^`\n]+)`"), r"\1"),
    (re.compile(r"^#{1,6}\s+", re.M), ""),
    (re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)"), r"\1 (\2)"),
]


def to_plain(text: str) -> str:
    for pattern, repl in _MD_STRIP:
        text = pattern.sub(repl, text)
    return text


def render(text: str, caps: Capabilities) -> str:
    """Markdown -> the platform dialect. Dialects whose adapters land later register a renderer here."""
    renderer = RENDERERS.get(caps.dialect)
    return renderer(text) if renderer else text


RENDERERS: dict[str, callable] = {"plain": to_plain}  # type: ignore[valid-type]


@dataclass
class DeliveryReport:
    message_ids: list[str] = field(default_factory=list)
    failed: bool = False
    error: str | None = None


class Delivery:
    def __init__(self, store: Store, max_attempts: int = 6, base_delay: float = 1.0, max_delay: float = 60.0) -> None:
        self.store = store
        self.max_attempts = max_attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    def _lock(self, platform: str, chat_id: str) -> asyncio.Lock:
        key = (platform, chat_id)
        lock = self._locks.get(key)
        if lock is None:
            if len(self._locks) > 10_000:
                for k in [k for k, v in self._locks.items() if not v.locked()]:
                    del self._locks[k]
            lock = self._locks[key] = asyncio.Lock()
        return lock

    async def deliver(self, adapter: PlatformAdapter, chat_id: str, out: OutboundMessage,
                      inbox_id: int | None = None, resume: bool = False, finish_inbox: bool = False) -> DeliveryReport:
        """Send ``out``; ``resume`` skips chunks the outbox already has as sent for ``inbox_id``.

        With ``finish_inbox`` the inbox row becomes done (or failed) in the same commit as the last chunk.
        """
        caps = adapter.capabilities
        rendered = render(out.text, caps)
        chunks = chunk_markdown(rendered, caps.max_message_length, caps.length_unit) or [" "]
        already = await self.store.outbox_sent_chunks(inbox_id) if inbox_id is not None and resume else set()
        finish = finish_inbox and inbox_id is not None
        report = DeliveryReport()
        async with self._lock(adapter.name, chat_id):
            last = len(chunks) - 1
            for index, chunk in enumerate(chunks):
                if index in already:
                    continue
                piece = OutboundMessage(
                    text=chunk, buttons=out.buttons if index == last else [],
                    reply_to=out.reply_to if index == 0 else None, thread_id=out.thread_id,
                )
                try:
                    mid = await self._send_one(adapter, chat_id, chunk, piece, out.text if len(chunks) == 1 else None)
                except PermanentError as exc:
                    # Stored and shown (outbox, cron run rows, CLIs): an SDK error can quote a URL with the token.
                    report.failed, report.error = True, redact(str(exc))
                    await self.store.outbox_record(inbox_id, adapter.name, chat_id, index, None, "failed", report.error,
                                                   finish_inbox="failed" if finish else None)
                    log.warning("delivery_failed", platform=adapter.name, chat_id=chat_id, chunk=index, error=str(exc))
                    return report
                report.message_ids.append(mid)
                await self.store.outbox_record(inbox_id, adapter.name, chat_id, index, mid, "sent",
                                               finish_inbox="done" if finish and index == last else None)
            if finish and last in already:
                await self.store.inbox_set(inbox_id, "done")  # type: ignore[arg-type]
        return report

    async def _send_one(self, adapter: PlatformAdapter, chat_id: str, chunk: str, piece: OutboundMessage,
                        original: str | None) -> str:
        attempt = 0
        plain = False
        while True:
            attempt += 1
            try:
                return await adapter.send(chat_id, chunk, piece)
            except FormattingError:
                if plain:
                    raise PermanentError("the platform rejected the message even as plain text") from None
                # Same words, no formatting: never truncated, never dropped.
                plain = True
                chunk = to_plain(original) if original is not None else to_plain(chunk)
                piece = OutboundMessage(text=chunk, buttons=piece.buttons, reply_to=piece.reply_to,
                                        thread_id=piece.thread_id)
                attempt -= 1
            except RateLimited as exc:
                if attempt >= self.max_attempts * 2:
                    raise PermanentError(f"still rate limited after {attempt} attempts") from exc
                log.info("rate_limited", platform=adapter.name, chat_id=chat_id, retry_after=exc.retry_after)
                await asyncio.sleep(max(exc.retry_after, 0.05))
            except TransientError as exc:
                if attempt >= self.max_attempts:
                    raise PermanentError(f"gave up after {attempt} attempts: {exc}") from exc
                delay = min(self.max_delay, self.base_delay * 2 ** (attempt - 1)) * (0.5 + random.random() / 2)
                log.info("send_retry", platform=adapter.name, chat_id=chat_id, attempt=attempt, delay=round(delay, 2),
                         error=str(exc))
                await asyncio.sleep(delay)
