"""Slack outbound: mrkdwn text (mrkdwn.py) posted with chat.postMessage, buttons as a Block Kit actions block,
edits through chat.update, ephemeral answers through response_url / chat.postEphemeral, and the "working"
reaction while a turn runs.

The dialect is mrkdwn: ``render`` converts, delivery chunks the converted text, and each chunk is at most
``MAX_TEXT`` UTF-16 units, which a section block also holds, so any chunk can carry the buttons. Slack
cannot de-duplicate a resent message (chat.postMessage has no idempotency key).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import structlog

from gateway.kernel.chunking import utf16_len
from gateway.platforms.base import Button, Outbound, OutboundMessage, PermanentError, TransientError
from gateway.platforms.buttons import ButtonIds
from gateway.platforms.errors import may_have_arrived
from gateway.platforms.slack.mrkdwn import to_mrkdwn, unescape
from gateway.platforms.slack.transport import map_error, slack_error

log = structlog.get_logger("herald.slack")

MAX_TEXT = 3000  # a section block's text limit; far under chat.postMessage's 40,000 (Slack advises 4,000)
BUTTON_LABEL_MAX = 75
BUTTON_VALUE_MAX = 2000
ACTIONS_MAX = 25
WORKING = "hourglass_flowing_sand"  # the reaction on the message being worked on
WORKING_DELAY = 0.5  # a turn answered faster than this shows no reaction (and costs no API calls)
# The core calls ``typing`` every few seconds while a turn runs: a reaction not renewed this long after
# the last call belongs to a turn that ended without an answer here (cut short, failed), and goes.
WORKING_LEASE = 6.0


def blocks_for(text: str, buttons: list[Button], value: Callable[[str], str] = lambda button_id: button_id
               ) -> list[dict[str, Any]] | None:
    """The text as a section and the buttons as an actions block (None without buttons: plain text is
    enough). The button's id travels as its value (``value`` makes one that fits); action ids only need to be
    unique in the message."""
    if not buttons:
        return None
    elements = []
    for index, b in enumerate(buttons[:ACTIONS_MAX]):
        element: dict[str, Any] = {"type": "button", "action_id": f"herald-{index}", "value": value(b.id),
                                   "text": {"type": "plain_text", "text": b.label[:BUTTON_LABEL_MAX] or "…",
                                            "emoji": True}}
        if b.style in ("primary", "danger"):
            element["style"] = b.style
        elements.append(element)
    return [{"type": "section", "text": {"type": "mrkdwn", "text": text or "…"}},
            {"type": "actions", "elements": elements}]


class SlackOutbound(Outbound):
    def __init__(self, client: Callable[[], Any], webhook: Callable[[str], Any],
                 on_thread: Callable[[str, str], None]) -> None:
        self._client = client
        self._webhook = webhook
        self._on_thread = on_thread  # the bot posted in (channel, thread_ts): it is in that thread now
        self._texts: OrderedDict[tuple[str, str], str] = OrderedDict()  # (channel, ts) -> text, for edits
        # (channel, thread) -> the user's message to show "working" on, set by inbound as messages arrive
        self.latest: OrderedDict[tuple[str, str | None], str] = OrderedDict()
        self._working: dict[tuple[str, str | None], _Working] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.buttons = ButtonIds(BUTTON_VALUE_MAX)  # a button's value is at most 2000 characters

    def client(self) -> Any:
        client = self._client()
        if client is None:
            raise TransientError("slack is not connected right now")
        return client

    # ---- buttons ---------------------------------------------------------------------------------

    def _blocks(self, text: str, buttons: list[Button]) -> list[dict[str, Any]] | None:
        return blocks_for(text, buttons, self.buttons.encode)

    # ---- formatting ------------------------------------------------------------------------------

    def render(self, markdown: str) -> str:
        return to_mrkdwn(markdown)

    def measure(self, text: str) -> int:
        return utf16_len(text)

    # ---- sending ---------------------------------------------------------------------------------

    async def send(self, chat_id: str, text: str, message: OutboundMessage, *,
                   idempotency_key: str | None = None) -> list[str]:
        text = text if text.strip() else "…"
        if message.reply_to:
            self.done_working(chat_id, message.thread_id)  # the answer is here: the reaction goes
        if message.ephemeral and message.reply_handle:
            return await self._ephemeral(chat_id, text, message)
        kwargs: dict[str, Any] = {"channel": chat_id, "text": text, "unfurl_links": False, "unfurl_media": False}
        if message.thread_id:
            kwargs["thread_ts"] = message.thread_id
        blocks = self._blocks(text, message.buttons)
        if blocks:
            kwargs["blocks"] = blocks
        try:
            resp = await self.client().chat_postMessage(**kwargs)
        except Exception as exc:
            raise map_error(exc) from exc
        ts = str(resp["ts"])
        self._remember(chat_id, ts, text)
        if message.thread_id:
            self._on_thread(chat_id, message.thread_id)
        return [ts]

    async def _ephemeral(self, chat_id: str, text: str, message: OutboundMessage) -> list[str]:
        """Only the addressee sees it: through the command's response_url, else chat.postEphemeral (which
        needs the bot in the channel; a slash command's response_url works anywhere)."""
        handle = message.reply_handle or {}
        blocks = self._blocks(text, message.buttons)
        url = handle.get("response_url")
        if url:
            try:
                resp = await self._webhook(url).send(text=text, blocks=blocks, response_type="ephemeral",
                                                     replace_original=False)
                if resp.status_code == 200:
                    return []
                log.info("slack_response_url_failed", status=resp.status_code, body=str(resp.body)[:200])
            except Exception as exc:
                log.info("slack_response_url_failed", error=f"{type(exc).__name__}: {exc}")
                if may_have_arrived(exc):
                    return []  # it may be showing: chat.postEphemeral could show it a second time
        user = handle.get("user")
        if not user:
            raise PermanentError("no way to answer this privately")
        kwargs: dict[str, Any] = {"channel": chat_id, "user": user, "text": text}
        if message.thread_id:
            kwargs["thread_ts"] = message.thread_id
        if blocks:
            kwargs["blocks"] = blocks
        try:
            resp = await self.client().chat_postEphemeral(**kwargs)
        except Exception as exc:
            raise map_error(exc) from exc
        return []

    def _remember(self, channel: str, ts: str, text: str) -> None:
        self._texts[(channel, ts)] = text
        while len(self._texts) > 2000:
            self._texts.popitem(last=False)

    async def edit(self, chat_id: str, message_id: str, text: str | None, buttons: list[Button] | None = None,
                   *, thread_id: str | None = None) -> None:
        if text is None:
            text = self._texts.get((chat_id, message_id))
            if text is None:
                raise PermanentError("chat.update needs the text, and this message's is no longer known")
        text = text if text.strip() else "…"
        # blocks=[] takes the old buttons off; Slack keeps a message's blocks when none are given.
        blocks = self._blocks(text, buttons or []) or []
        try:
            await self.client().chat_update(channel=chat_id, ts=message_id, text=text, blocks=blocks)
        except Exception as exc:
            raise map_error(exc) from exc
        self._remember(chat_id, message_id, text)

    async def post_ephemeral(self, channel: str, user: str, text: str, thread_ts: str | None) -> bool:
        kwargs: dict[str, Any] = {"channel": channel, "user": user, "text": text}
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
        try:
            await self.client().chat_postEphemeral(**kwargs)
        except Exception as exc:
            log.info("slack_ephemeral_failed", error=slack_error(exc) or f"{type(exc).__name__}: {exc}")
            # Where it may be showing already, no other way (a response_url) is tried: not twice.
            return may_have_arrived(exc)
        return True

    @staticmethod
    def plain(text: str) -> str:
        return unescape(text)

    # ---- the "working" reaction ------------------------------------------------------------------

    def note_message(self, channel: str, thread: str | None, ts: str) -> None:
        """A message taken in (channel, thread): the one a "working" reaction goes on."""
        key = (channel, thread)
        self.latest[key] = ts
        self.latest.move_to_end(key)
        while len(self.latest) > 5000:
            self.latest.popitem(last=False)

    def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        key = (chat_id, thread_id)
        working = self._working.get(key)
        if working is None:
            ts = self.latest.get(key)
            if ts is None:
                return
            working = self._working[key] = _Working(ts)
            self._spawn(self._show(key, working))
        working.until = time.monotonic() + WORKING_LEASE

    async def _show(self, key: tuple[str, str | None], working: _Working) -> None:
        await asyncio.sleep(WORKING_DELAY)
        if self._working.get(key) is not working:
            return  # answered before it showed
        try:
            await self.client().reactions_add(channel=key[0], timestamp=working.ts, name=WORKING)
            working.shown = True
        except Exception as exc:
            # already_reacted (a restart in the middle of a turn) means it shows: fine either way.
            working.shown = slack_error(exc) == "already_reacted"
            log.debug("slack_reaction_failed", error=slack_error(exc) or str(exc))
        if working.shown and self._working.get(key) is not working:
            await self._unreact(key[0], working.ts)  # the answer came while the reaction was on its way
            return
        while self._working.get(key) is working:
            left = working.until - time.monotonic()
            if left <= 0:
                self.done_working(*key)
                return
            await asyncio.sleep(left)

    def done_working(self, chat_id: str, thread_id: str | None) -> None:
        working = self._working.pop((chat_id, thread_id), None)
        if working is not None and working.shown:
            self._spawn(self._unreact(chat_id, working.ts))

    async def _unreact(self, channel: str, ts: str) -> None:
        try:
            await self.client().reactions_remove(channel=channel, timestamp=ts, name=WORKING)
        except Exception as exc:
            log.debug("slack_reaction_failed", error=slack_error(exc) or str(exc))

    def spawn(self, coro: Any) -> None:
        """A background task of the adapter's (cancelled at stop)."""
        self._spawn(coro)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro, name="slack:working")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        self._working.clear()


class _Working:
    __slots__ = ("shown", "ts", "until")

    def __init__(self, ts: str) -> None:
        self.ts = ts
        self.until = 0.0
        self.shown = False
