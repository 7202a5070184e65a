"""Outbound: the adapter renders markdown into its dialect, delivery chunks it and sends in order per chat.

Rate limits make only the affected chat wait (an ``asyncio.sleep`` in that chat's lane), transient errors
are retried with backoff, permanent ones are recorded and reported. A reply's chunks go through the outbox:
each is written ``sending`` before the send and ``sent`` (with every id the platform gave it) after, so a
restart mid-delivery skips what was sent and knows which chunk may or may not be out. Such a chunk is sent
again with the same idempotency key — a platform that de-duplicates with it shows it once; elsewhere the
user is told first that it may repeat.

A streamed reply (gateway/outbound/streaming/) opens its messages here too (``open_stream``: outbox ``sending`` ->
``streamed`` with the message's id); the final delivery edits each streamed message into the chunk of its
index instead of sending it, so the reply is shown once whether or not a restart came in between.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from gateway.kernel.chunking import chunk_text, to_plain
from gateway.kernel.logs import redact
from gateway.kernel.metrics import NULL_METRICS, Metrics
from gateway.outbound.pacing import ChatPacer
from gateway.platforms.base import (
    NO_FAULTS,
    Attachment,
    FaultSink,
    FormattingError,
    MaybeSent,
    OutboundMessage,
    PermanentError,
    PlatformAdapter,
    RateLimited,
    Source,
    TransientError,
)
from gateway.storage.inbox import NotExpected
from gateway.storage.store import Store

log = structlog.get_logger("herald.delivery")

MAYBE_REPEATED = ("↻ Herald restarted while sending my answer; the next part may repeat one you already "
                  "have.")
# Before a message is sent again after its connection broke once it may have been out (``MaybeSent``).
RESENDING = "↻ The connection broke while I was sending the next message; I'm sending it again, so it may show twice."
# However short the platform's retry_after, a chunk is not sent more often than this while rate limited.
_MAX_RATE_ATTEMPTS = 1000
# What a streamed message the final reply does not need (it came out shorter than the stream) is edited to.
UNUSED_STREAM_TEXT = "⋯"
# The outbox chunk index of a reply's first file: far past any text chunk or stream message of the reply.
FILE_INDEX = 10_000


@dataclass
class DeliveryReport:
    message_ids: list[str] = field(default_factory=list)
    failed: bool = False
    error: str | None = None


def chunk_key(row: Mapping[str, Any] | None, inbox_id: int | None, index: int) -> str:
    """The idempotency key of a reply's chunk: drawn at random when the chunk is first begun and stored on its
    outbox row, the same when that chunk is resent. Not derived from the inbox id, which SQLite reuses once
    the newest rows are deleted: a new answer would carry a key the platform has already seen, and be
    swallowed as a repeat. A row an older Herald began without one was sent with ``herald-<inbox>-<chunk>``."""
    if row is None:
        return f"herald-{uuid.uuid4().hex}"
    return row.get("idempotency_key") or f"herald-{inbox_id}-{index}"


class Delivery:
    def __init__(self, store: Store, metrics: Metrics | None = None, *, max_outage: float = 600.0,
                 base_delay: float = 1.0, max_delay: float = 60.0, owner: str | None = None,
                 faults: FaultSink = NO_FAULTS, max_rate_wait: float = 900.0) -> None:
        self.store = store
        # A chunk waits out a platform's rate limits for this long in all before it is given up: bounded by time,
        # not by a count, so a minute of 429s with retry_after 1 (a busy group) loses nothing.
        self.max_rate_wait = max_rate_wait
        # Each 429, transient failure and permanent refusal a platform serves is counted there (/readyz, metrics).
        self.faults = faults
        # This instance: the answer to an inbox row is sent only while the row is its own (another instance
        # that took the row over after this one stalled past its lease sends it instead).
        self.owner = owner
        self.metrics = metrics or NULL_METRICS
        # Likewise a platform that is down (5xx, resets, timeouts): retried with backoff for this long in all.
        # Six attempts (~30 s) lost every reply of a platform outage longer than that.
        self.max_outage = max_outage
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self.pacer = ChatPacer()
        # Messages sent per chat: a streamed reply that sees this move knows something was posted below it.
        self._posted: dict[tuple[str, str], int] = {}

    def _lock(self, platform: str, chat_id: str) -> asyncio.Lock:
        key = (platform, chat_id)
        lock = self._locks.get(key)
        if lock is None:
            if len(self._locks) > 10_000:
                for k in [k for k, v in self._locks.items() if not v.locked()]:
                    del self._locks[k]
            lock = self._locks[key] = asyncio.Lock()
        return lock

    def posted(self, platform: str, chat_id: str) -> int:
        return self._posted.get((platform, chat_id), 0)

    def _count_post(self, platform: str, chat_id: str) -> None:
        if len(self._posted) > 10_000:
            self._posted.clear()  # a stream that then sees its chat "changed" only starts a new message
        key = (platform, chat_id)
        self._posted[key] = self._posted.get(key, 0) + 1

    async def deliver(self, adapter: PlatformAdapter, chat_id: str, out: OutboundMessage,
                      inbox_id: int | None = None, resume: bool = False, finish_inbox: bool = False,
                      edit_interval: float = 0.0, *, ref: str | None = None,
                      guard: Callable[[Any], bool] | None = None) -> DeliveryReport:
        """Send ``out``. With ``inbox_id`` it is the answer to that message (with ``ref``, a delivery of its own
        that must not repeat either): chunks go through the outbox and ``resume`` carries on from what it
        records (a streamed message is edited into its chunk, at most once per ``edit_interval`` in the
        chat). Each chunk is begun only while this instance owns the delivery (the inbox row, or what
        ``guard`` checks); ``NotExpected`` when another instance took it over.

        With ``finish_inbox`` the inbox row becomes done (or failed) in the same commit as the last chunk.
        """
        caps = adapter.capabilities
        if out.attachments and not out.text.strip():
            chunks: list[str] = []  # files alone (a voice note): no empty message before them
        else:
            chunks = (chunk_text(adapter.render(out.text), caps.max_message_length, adapter.measure, caps.dialect)
                      or [" "])
        durable = inbox_id is not None or ref is not None
        if guard is None and inbox_id is not None and self.owner is not None:
            guard = self.store.inbox.owner_guard(inbox_id, self.owner)
        state = await self.store.outbox.chunks(inbox_id, ref) if durable and resume else {}
        finish = finish_inbox and durable
        report = DeliveryReport()
        async with self._lock(adapter.name, chat_id):
            last = len(chunks) - 1
            # The inbox row is finished with the reply's last item: its last file, or else its last chunk.
            end = last if not out.attachments else -1
            for index, chunk in enumerate(chunks):
                row = state.get(index)
                if row is not None and row["status"] == "sealed":
                    row = None  # a streamed message left where it was: this chunk is sent anew
                if row is not None and row["status"] == "sent":
                    if finish and index == end:
                        await self.store.inbox.mark(inbox_id, "done", expected="replied")  # type: ignore[arg-type]
                    continue
                # The last chunk names the files that follow it (a platform that cannot post them after the
                # text, the API, links them from it).
                piece = OutboundMessage(
                    text=chunk, buttons=out.buttons if index == last else [],
                    reply_to=out.reply_to if index == 0 else None, thread_id=out.thread_id,
                    reply_handle=out.reply_handle, ephemeral=out.ephemeral,
                    attachments=list(out.attachments) if index == last else [],
                )
                reuse = row["id"] if row is not None else None
                if row is not None and row["status"] == "streamed" and row.get("platform_message_id"):
                    ids = await self._finish_streamed(adapter, chat_id, chunk, piece, row, edit_interval)
                    if ids is not None:
                        report.message_ids.extend(ids)
                        await self._record(row["id"], inbox_id, adapter.name, chat_id, index, ids, "sent", None,
                                           "done" if finish and index == end else None)
                        continue
                    row = None  # the message is gone: the chunk goes out as a new one, under a new key
                key = chunk_key(row, inbox_id, index) if durable else uuid.uuid4().hex
                row_id = None
                if durable:
                    if row is not None and row["status"] == "sending" and not caps.idempotent_send:
                        await self._notice(adapter, chat_id, out)
                    row_id = await self.store.outbox.begin(
                        inbox_id, adapter.name, chat_id, index, key=key, ref=ref, guard=guard, row_id=reuse)
                    if row_id is None:
                        raise NotExpected(f"the delivery of {ref or f'inbox row {inbox_id}'} was taken over by "
                                          "another instance")
                try:
                    ids = await self._send_one(adapter, chat_id, chunk, piece, key)
                    if (row is not None and row["status"] == "sending" and caps.idempotent_send
                            and caps.edits and ids):
                        # The platform may have handed back the message a stream opened under this key before
                        # the restart, still showing the reply half-written: it gets the chunk's text.
                        await self._send_one(adapter, chat_id, chunk, piece, key, edit_id=ids[0])
                except PermanentError as exc:
                    # Stored and shown (outbox, cron run rows, CLIs): an SDK error can quote a URL with the token.
                    report.failed, report.error = True, redact(str(exc))
                    await self._record(row_id, inbox_id, adapter.name, chat_id, index, [], "failed", report.error,
                                       "failed" if finish else None)
                    log.warning("delivery_failed", platform=adapter.name, chat_id=chat_id, chunk=index, error=str(exc))
                    self.metrics.delivered(adapter.name, False)
                    return report
                report.message_ids.extend(ids)
                await self._record(row_id, inbox_id, adapter.name, chat_id, index, ids, "sent", None,
                                   "done" if finish and index == end else None)
            if out.attachments:
                sender = _Files(self, adapter, chat_id, out, state, inbox_id, ref, guard, finish, durable, report)
                await sender.send()
            for index, row in sorted(state.items()):
                if index > last and row["status"] == "streamed":
                    await self._unused_stream(adapter, chat_id, row, out)
        self.metrics.delivered(adapter.name, True)
        return report

    async def _finish_streamed(self, adapter: PlatformAdapter, chat_id: str, chunk: str, piece: OutboundMessage,
                               row: Mapping[str, Any], interval: float) -> list[str] | None:
        """Edit a streamed message into its final chunk: its id, or None when it can no longer be edited
        (deleted meanwhile) and the chunk must be sent instead."""
        message_id = str(row["platform_message_id"]).split(" ")[0]
        await self.pacer.wait(adapter.name, chat_id, interval)
        try:
            await self._send_one(adapter, chat_id, chunk, piece, "", edit_id=message_id)
        except PermanentError as exc:
            log.info("stream_edit_failed", platform=adapter.name, chat_id=chat_id, error=redact(str(exc)))
            return None
        finally:
            self.pacer.done(adapter.name, chat_id)
        return [message_id]

    async def _unused_stream(self, adapter: PlatformAdapter, chat_id: str, row: Mapping[str, Any],
                             out: OutboundMessage) -> None:
        message_id = str(row["platform_message_id"]).split(" ")[0]
        try:
            await self._send_one(adapter, chat_id, adapter.render(UNUSED_STREAM_TEXT),
                                 OutboundMessage(UNUSED_STREAM_TEXT, thread_id=out.thread_id), "", edit_id=message_id)
        except PermanentError:
            pass
        await self.store.outbox.finish(row["id"], "sealed", [message_id], None, None, None)

    async def open_stream(self, adapter: PlatformAdapter, chat_id: str, text: str, piece: OutboundMessage,
                          inbox_id: int, index: int) -> tuple[int, str, int]:
        """A streamed reply's message ``index``: recorded ``sending`` before it goes out and ``streamed`` with its
        id after. Returns (outbox row, message id, the chat's post count after it). Raises ``DeliveryError``."""
        key = chunk_key(None, inbox_id, index)
        guard = self.store.inbox.owner_guard(inbox_id, self.owner) if self.owner is not None else None
        async with self._lock(adapter.name, chat_id):
            row_id = await self.store.outbox.begin(inbox_id, adapter.name, chat_id, index, key=key, guard=guard)
            if row_id is None:  # another instance took the message over: the reply is its to show
                raise PermanentError("the message was taken over by another instance")
            try:
                ids = await self._send_one(adapter, chat_id, text, piece, key, retry=False, count=False)
            except BaseException:
                self.pacer.done(adapter.name, chat_id)  # the next attempt waits its turn
                # Sealed, not failed: the final chunk must not reuse this key (an idempotent platform would
                # hand back whatever the attempt left, half-written).
                await asyncio.shield(self.store.outbox.finish(row_id, "sealed", [], "stream message not sent",
                                                              None, None))
                raise
            if not ids:
                await self.store.outbox.finish(row_id, "sealed", [], "no message id", None, None)
                raise PermanentError("the platform gave the message no id")
            await self.store.outbox.finish(row_id, "streamed", ids[:1], None, None, None)
            self.pacer.done(adapter.name, chat_id)
            return row_id, ids[0], self.posted(adapter.name, chat_id)

    async def seal_stream(self, row_id: int, message_id: str) -> None:
        """A streamed message stays as it is and is no longer a chunk of the reply."""
        await self.store.outbox.finish(row_id, "sealed", [message_id], None, None, None)

    async def _record(self, row_id: int | None, inbox_id: int | None, platform: str, chat_id: str, index: int,
                      ids: list[str], status: str, error: str | None, finish_inbox: str | None) -> None:
        if row_id is not None:
            await self.store.outbox.finish(row_id, status, ids, error, inbox_id, finish_inbox)
        else:
            await self.store.outbox.record(inbox_id, platform, chat_id, index, " ".join(ids) or None, status, error)

    async def _notice(self, adapter: PlatformAdapter, chat_id: str, out: OutboundMessage,
                      text: str = MAYBE_REPEATED) -> None:
        try:
            text = adapter.render(text)
            await self._send_one(adapter, chat_id, text, OutboundMessage(text, thread_id=out.thread_id),
                                 uuid.uuid4().hex, announce=False)
        except Exception as exc:
            log.warning("delivery_notice_failed", platform=adapter.name, chat_id=chat_id, error=str(exc))

    async def _send_one(self, adapter: PlatformAdapter, chat_id: str, chunk: str, piece: OutboundMessage,
                        key: str, *, edit_id: str | None = None, retry: bool = True, count: bool = True,
                        announce: bool = True, files: list[Attachment] | None = None) -> list[str]:
        """Send ``chunk`` (or, with ``edit_id``, put it into that message), retried as errors allow; with
        ``retry`` False a rate limit or a transient error is raised at once. ``count``: the message is
        counted as posted in the chat (a stream's own messages are not: two replies streaming in one chat
        must not keep starting new messages below each other).

        Every retry is decided here (adapters' SDKs retry nothing themselves). A send whose connection broke
        after it may have reached the platform (``MaybeSent``) is sent again quietly only while the platform
        knows it by its key; otherwise the chat is told first that it may show twice: never an unannounced
        double. ``announce`` False (that notice itself): such a send is not repeated at all."""
        attempt = 0
        plain = False
        rate_waited = outage_waited = 0.0
        # Since when a copy may be out that no announcement covers yet, and how long the platform knows it again.
        doubt_since: float | None = None
        recognised_for = 0.0
        while True:
            attempt += 1
            try:
                if edit_id is not None:
                    await adapter.edit(chat_id, edit_id, chunk, piece.buttons, thread_id=piece.thread_id)
                    return [edit_id]
                if doubt_since is not None and not (adapter.capabilities.idempotent_send
                                                    or time.monotonic() - doubt_since < recognised_for):
                    if not announce:
                        raise PermanentError("the connection broke after sending, so it may have arrived: not sent "
                                             "again")
                    await self._notice(adapter, chat_id, piece, RESENDING)
                    doubt_since = None
                try:
                    if files:
                        ids = (await adapter.send_file(chat_id, files[0], piece, idempotency_key=key)
                               if len(files) == 1 else
                               await adapter.send_album(chat_id, files, piece, idempotency_key=key))
                    else:
                        ids = await adapter.send(chat_id, chunk, piece, idempotency_key=key)
                except PermanentError:
                    self.faults.record("platform_rejected", platform=adapter.name)
                    raise
                if count:
                    self._count_post(adapter.name, chat_id)
                return list(ids)
            except FormattingError:
                if plain:
                    raise PermanentError("the platform rejected the message even as plain text") from None
                # Same words, no formatting: never truncated, never dropped.
                plain = True
                if files:
                    files = [dataclasses.replace(f, caption=to_plain(f.caption) if f.caption else None) for f in files]
                chunk = to_plain(chunk)
                piece = OutboundMessage(text=chunk, buttons=piece.buttons, reply_to=piece.reply_to,
                                        thread_id=piece.thread_id, reply_handle=piece.reply_handle,
                                        ephemeral=piece.ephemeral)
                attempt -= 1
            except RateLimited as exc:
                self.faults.record("platform_rate_limited", platform=adapter.name, retry_after=exc.retry_after)
                self.pacer.backoff(adapter.name, chat_id, exc.retry_after)
                if not retry:
                    raise
                wait = max(exc.retry_after, 0.05)
                if rate_waited + wait > self.max_rate_wait or attempt >= _MAX_RATE_ATTEMPTS:
                    raise PermanentError(f"still rate limited after {attempt} attempts "
                                         f"({round(rate_waited)} s)") from exc
                rate_waited += wait
                log.info("rate_limited", platform=adapter.name, chat_id=chat_id, retry_after=exc.retry_after)
                await asyncio.sleep(wait)
            except TransientError as exc:
                self.faults.record("platform_unavailable", platform=adapter.name, attempt=attempt)
                if not retry:
                    raise
                if isinstance(exc, MaybeSent) and edit_id is None:
                    if doubt_since is None:
                        doubt_since, recognised_for = time.monotonic(), exc.recognised_for
                    log.warning("send_maybe_arrived", platform=adapter.name, chat_id=chat_id, error=str(exc))
                delay = min(self.max_delay, self.base_delay * 2 ** min(attempt - 1, 30)) * (0.5 + random.random() / 2)
                if outage_waited + delay > self.max_outage:
                    raise PermanentError(f"gave up after {attempt} attempts ({round(outage_waited)} s): {exc}") from exc
                outage_waited += delay
                log.info("send_retry", platform=adapter.name, chat_id=chat_id, attempt=attempt, delay=round(delay, 2),
                         error=str(exc))
                await asyncio.sleep(delay)


def size_text(size: float) -> str:
    for unit in ("bytes", "KB", "MB"):
        if size < 1024 or unit == "MB":
            return f"{size:.0f} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} MB"  # pragma: no cover


def too_big_text(att: Attachment, size: int, limit: int) -> str:
    if limit <= 0:
        return f"📎 {att.filename} ({size_text(size)}) cannot be sent: files cannot be sent here."
    return (f"📎 {att.filename} is {size_text(size)}, more than this chat takes ({size_text(limit)}), so it was not "
            "sent.")


class _Files:
    """A reply's files after its text, each its own outbox row (``FILE_INDEX + n``): begun ``sending`` before the
    upload and ``sent`` with the ids after, so a restart uploads only what is not out (announcing a possible
    repeat where the platform cannot de-duplicate). A file over the chat's limit, or gone, is replaced by a line
    saying so, sent and recorded in its place. Consecutive new images go as one album where the platform has
    them (one call, one row per image)."""

    def __init__(self, delivery: Delivery, adapter: PlatformAdapter, chat_id: str, out: OutboundMessage,
                 state: dict[int, Any], inbox_id: int | None, ref: str | None, guard: Any, finish: bool,
                 durable: bool, report: DeliveryReport) -> None:
        self.d, self.adapter, self.chat_id, self.out = delivery, adapter, chat_id, out
        self.state, self.inbox_id, self.ref, self.guard = state, inbox_id, ref, guard
        self.finish, self.durable, self.report = finish, durable, report
        self.files = list(out.attachments)
        self._limit: int | None = None

    async def limit(self) -> int:
        if self._limit is None:
            try:
                self._limit = await self.adapter.file_limit(self.chat_id)
            except Exception as exc:
                log.warning("file_limit_unknown", platform=self.adapter.name, error=redact(str(exc)))
                self._limit = 0
        return self._limit

    async def send(self) -> None:
        n = 0
        while n < len(self.files):
            group = await self._album(n)
            await self._send(n, group)
            n += len(group)

    async def _album(self, start: int) -> list[Attachment]:
        """The images from ``start`` on that go out together: none of them begun before, each within the limit."""
        size = self.adapter.capabilities.album
        group: list[Attachment] = []
        for n in range(start, min(len(self.files), start + size) if size >= 2 else start):
            att = self.files[n]
            if att.kind != "image" or FILE_INDEX + n in self.state or not _fits(att.path, await self.limit()):
                break
            group.append(att)
        return group if len(group) >= 2 else [self.files[start]]

    async def _send(self, start: int, group: list[Attachment]) -> None:
        d, adapter = self.d, self.adapter
        indexes = [FILE_INDEX + start + n for n in range(len(group))]
        rows = [self.state.get(i) for i in indexes]
        if all(r is not None and r["status"] == "sent" for r in rows):
            if self.finish and indexes[-1] == FILE_INDEX + len(self.files) - 1:
                await d.store.inbox.mark(self.inbox_id, "done", expected="replied")
            return
        keys = [chunk_key(r, self.inbox_id, i) if self.durable else uuid.uuid4().hex for r, i in zip(rows, indexes,
                                                                                                 strict=True)]
        row_ids: list[int | None] = [None] * len(group)
        if self.durable:
            resent = any(r is not None and r["status"] == "sending" for r in rows)
            if resent and not adapter.capabilities.idempotent_send:
                await d._notice(adapter, self.chat_id, self.out)
            for n, (r, i) in enumerate(zip(rows, indexes, strict=True)):
                row_ids[n] = await d.store.outbox.begin(self.inbox_id, adapter.name, self.chat_id, i, key=keys[n],
                                                        ref=self.ref, guard=self.guard,
                                                        row_id=r["id"] if r is not None else None)
                if row_ids[n] is None:
                    raise NotExpected(f"the delivery of {self.ref or f'inbox row {self.inbox_id}'} was taken over "
                                      "by another instance")
        last = indexes[-1] == FILE_INDEX + len(self.files) - 1
        piece = OutboundMessage(text=group[0].caption or "", thread_id=self.out.thread_id)
        try:
            per_file = await self._upload(group, piece, keys[0])
        except PermanentError as exc:
            error = redact(str(exc))
            for n, i in enumerate(indexes):
                await d._record(row_ids[n], self.inbox_id, adapter.name, self.chat_id, i, [], "failed", error,
                                "done" if self.finish and last and n == len(indexes) - 1 else None)
            log.warning("file_not_delivered", platform=adapter.name, chat_id=self.chat_id, error=str(exc))
            names = ", ".join(a.filename for a in group)
            await d._notice(adapter, self.chat_id, self.out, f"📎 {names} could not be sent: {error}")
            return
        for n, i in enumerate(indexes):
            ids = per_file[n] if n < len(per_file) else []
            self.report.message_ids.extend(ids)
            await d._record(row_ids[n], self.inbox_id, adapter.name, self.chat_id, i, ids, "sent", None,
                            "done" if self.finish and last and n == len(indexes) - 1 else None)

    async def _upload(self, group: list[Attachment], piece: OutboundMessage, key: str) -> list[list[str]]:
        """Ids per file: the upload's, or those of the line sent in its place."""
        d, adapter, att = self.d, self.adapter, group[0]
        if len(group) > 1:
            ids = await d._send_one(adapter, self.chat_id, "", piece, key, files=group)
            return [[i] for i in ids]
        try:
            size = os.stat(att.path).st_size
        except OSError:
            size = None
        if size is None or size > await self.limit():
            text = (f"📎 {att.filename} is no longer there, so it was not sent." if size is None
                    else too_big_text(att, size, await self.limit()))
            rendered = adapter.render(text)
            return [await d._send_one(adapter, self.chat_id, rendered, OutboundMessage(rendered,
                                      thread_id=self.out.thread_id), key)]
        return [await d._send_one(adapter, self.chat_id, "", piece, key, files=[att])]


def _fits(path: str, limit: int) -> bool:
    try:
        return os.stat(path).st_size <= limit
    except OSError:
        return False


class Notices:
    """Short gateway notices into a chat (not model replies), through delivery; failures are logged only."""

    def __init__(self, delivery: Delivery, adapters: Mapping[str, PlatformAdapter]) -> None:
        self.delivery = delivery
        self.adapters = adapters

    async def notify(self, source: Source, text: str) -> None:
        adapter = self.adapters.get(source.platform)
        if adapter is None:
            log.warning("notice_dropped", platform=source.platform, reason="platform not enabled")
            return
        try:
            await self.delivery.deliver(adapter, source.chat_id, OutboundMessage(text, thread_id=source.thread_id))
        except Exception as exc:
            log.warning("notice_failed", platform=adapter.name, chat_id=source.chat_id, error=str(exc))
