"""Slack inbound: an Events API message becomes an ``InboundMessage``, a block_actions payload a
``ButtonPress``, ``/herald sub args`` a native command.

Which messages are for the bot: every DM; in channels a mention (``<@bot>``), a known ``!command``, and
anything in a thread the bot is already in (it was mentioned there, or posted there: remembered here, and
after a restart found with conversations.replies); with ``require_mention: false`` everything. A DM is one
session; a thread is a session, and with ``reply_in_thread`` a channel message starts one (its own ts is
the thread). The platform message id is ``<channel>/<ts>``, the same for an event's retries, for its Socket
Mode redelivery and for the ``message`` and ``app_mention`` events of one mention, so the inbox keeps one.
Files people who may talk to the agent share are downloaded with the bot token; a stranger's never are.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import structlog

from gateway.platforms.base import (
    ButtonPress,
    ChatType,
    CommandCall,
    Gateway,
    InboundMessage,
    Source,
    parse_text_command,
)
from gateway.platforms.slack.mrkdwn import unescape

if TYPE_CHECKING:
    from gateway.platforms.slack.config import SlackConfig

log = structlog.get_logger("herald.slack")

_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
# Message subtypes a person's words arrive with; the rest (joins, edits, deletions, bots) are not for us.
_TAKEN_SUBTYPES = frozenset({None, "file_share", "thread_broadcast", "me_message"})
_CHAT_TYPES: dict[str, ChatType] = {"im": "dm", "mpim": "group", "channel": "channel", "group": "channel"}
LOOKUP_TIMEOUT = 2.0  # an API lookup before an event's ack: well inside Slack's 3 s
NOT_IN_THREAD_TTL = 60.0  # a "the bot is not in this thread" answer is asked again after this


def _write(target: Path, data: bytes) -> None:
    partial = target.with_name(target.name + ".part")
    partial.write_bytes(data)
    os.replace(partial, target)  # never a half-written file under the final name


class SlackInbound:
    def __init__(self, name: str, cfg: SlackConfig, gateway: Gateway, media_dir: Path,
                 client: Callable[[], Any], session: Callable[[], Any], file_hosts: frozenset[str]) -> None:
        self.name = name
        self.cfg = cfg
        self.gateway = gateway
        self.media_dir = media_dir
        self._client = client
        self._session = session
        self._file_hosts = file_hosts
        self.bot_user = ""
        self.bot_id = ""
        self.token = ""
        self.command_names: frozenset[str] = frozenset()
        self._types: dict[str, ChatType] = {}
        self._names: OrderedDict[str, str | None] = OrderedDict()
        self._threads: OrderedDict[tuple[str, str], float] = OrderedDict()  # -> 0 (in it) or when "not" expires

    # ---- threads the bot is in -------------------------------------------------------------------

    def joined(self, channel: str, thread_ts: str) -> None:
        key = (channel, thread_ts)
        self._threads[key] = 0.0
        self._threads.move_to_end(key)
        while len(self._threads) > 20_000:
            self._threads.popitem(last=False)

    async def in_thread(self, channel: str, thread_ts: str) -> bool:
        known = self._threads.get((channel, thread_ts))
        if known == 0.0:
            return True
        if known is not None and known > time.monotonic():
            return False
        try:
            resp = await asyncio.wait_for(self._client().conversations_replies(channel=channel, ts=thread_ts,
                                                                               limit=200), LOOKUP_TIMEOUT)
            found = any(m.get("user") == self.bot_user or (self.bot_id and m.get("bot_id") == self.bot_id)
                        for m in resp.get("messages") or [])
        except Exception as exc:
            # A follow-up missed now can still mention the bot; an ack held up past 3 s makes Slack retry.
            log.warning("slack_thread_lookup_failed", error=f"{type(exc).__name__}: {exc}")
            return False
        if found:
            self.joined(channel, thread_ts)
        else:
            self._threads[(channel, thread_ts)] = time.monotonic() + NOT_IN_THREAD_TTL
        return found

    # ---- chat types and names --------------------------------------------------------------------

    async def chat_type(self, channel: str, declared: str | None = None) -> ChatType:
        if declared in _CHAT_TYPES:
            self._types[channel] = _CHAT_TYPES[declared]
        known = self._types.get(channel)
        if known is not None:
            return known
        if channel.startswith("D"):
            return "dm"
        kind: ChatType = "channel"
        try:
            info = (await asyncio.wait_for(self._client().conversations_info(channel=channel), LOOKUP_TIMEOUT)
                    )["channel"]
            kind = "dm" if info.get("is_im") else "group" if info.get("is_mpim") else "channel"
        except Exception as exc:
            log.info("slack_channel_lookup_failed", channel=channel, error=f"{type(exc).__name__}: {exc}")
            return kind  # not remembered: asked again next time
        self._types[channel] = kind
        return kind

    async def user_name(self, user: str, profile: dict[str, Any] | None = None) -> str | None:
        name = (profile or {}).get("display_name") or (profile or {}).get("real_name")
        if name:
            self._remember_name(user, name)
            return str(name)
        if user in self._names:
            return self._names[user]
        try:
            info = (await asyncio.wait_for(self._client().users_info(user=user), LOOKUP_TIMEOUT))["user"]
            name = (info.get("profile") or {}).get("display_name") or info.get("real_name") or info.get("name")
        except Exception as exc:
            log.info("slack_user_lookup_failed", error=f"{type(exc).__name__}: {exc}")
            name = None
        self._remember_name(user, name or None)
        return name or None

    def _remember_name(self, user: str, name: str | None) -> None:
        self._names[user] = name
        self._names.move_to_end(user)
        while len(self._names) > 10_000:
            self._names.popitem(last=False)

    # ---- messages --------------------------------------------------------------------------------

    async def message(self, body: dict[str, Any]) -> InboundMessage | None:
        event = body.get("event") or {}
        if event.get("bot_id") or event.get("subtype") not in _TAKEN_SUBTYPES or event.get("hidden"):
            return None
        user, channel, ts = event.get("user"), event.get("channel"), event.get("ts")
        if not user or not channel or not ts or user == self.bot_user:
            return None
        thread_ts = event.get("thread_ts")
        if thread_ts == ts:
            thread_ts = None  # the thread's first message is a channel message
        chat_type = await self.chat_type(channel, event.get("channel_type"))
        raw = event.get("text") or ""
        mention = f"<@{self.bot_user}>"
        mentioned = event.get("type") == "app_mention" or mention in raw
        text = unescape(self._strip_mention(raw, mention)).strip()
        parsed = parse_text_command(text, prefix="!")
        command = parsed[0] if parsed is not None else None
        if chat_type == "dm":
            thread = thread_ts
        else:
            addressed = (mentioned or not self.cfg.require_mention
                         or (command is not None and command.name in self.command_names)
                         or (thread_ts is not None and await self.in_thread(channel, thread_ts)))
            if not addressed:
                return None
            thread = thread_ts or (ts if self.cfg.reply_in_thread else None)
        source = Source(platform=self.name, chat_id=channel, user_id=user, chat_type=chat_type, thread_id=thread,
                        user_name=await self.user_name(user, event.get("user_profile")),
                        scope=body.get("team_id") or event.get("team"))
        attachments: list[str] = []
        notes = await self._files(event.get("files") or [], source, ts, attachments)
        if notes:
            text = "\n".join([text, *notes]) if text else "\n".join(notes)
        if not text.strip() and not attachments:
            return None
        return InboundMessage(source=source, text=text, platform_message_id=f"{channel}/{ts}",
                              attachments=attachments, received_at=time.time(), command=command)

    @staticmethod
    def _strip_mention(text: str, mention: str) -> str:
        """A leading ``<@bot>`` is dropped; one elsewhere reads as @herald."""
        stripped = text.lstrip()
        if stripped.startswith(mention):
            stripped = stripped[len(mention):].lstrip(" ,:")
        return stripped.replace(mention, "@herald")

    async def _files(self, files: list[dict[str, Any]], source: Source, ts: str, attachments: list[str]
                     ) -> list[str]:
        notes: list[str] = []
        if not files:
            return notes
        if not self.gateway.may_talk(source):
            return [f"[file: {f.get('name') or 'file'}]" for f in files]  # a stranger's: never downloaded
        cap = int(self.cfg.max_file_mb * 1024 * 1024)
        for index, f in enumerate(files):
            name = str(f.get("name") or f.get("title") or "file")
            size = int(f.get("size") or 0)
            url = f.get("url_private_download") or f.get("url_private")
            if size > cap:
                notes.append(f"[The user shared {name} ({size / 1048576:.1f} MB), bigger than the "
                             f"{self.cfg.max_file_mb:g} MB limit; it was not downloaded.]")
                continue
            if not url or urlsplit(url).hostname not in self._file_hosts:
                notes.append(f"[The user shared {name}, which could not be downloaded.]")
                continue
            safe = _SAFE_NAME.sub("_", name)[-80:] or "file"
            target = self.media_dir / f"slack-{_SAFE_NAME.sub('_', source.chat_id)}-{ts}-{index}-{safe}"
            try:
                await self._download(url, target, cap)
            except Exception as exc:
                log.warning("slack_file_failed", error=f"{type(exc).__name__}: {exc}")
                notes.append(f"[The user shared {name}, which could not be downloaded ({type(exc).__name__}).]")
                continue
            attachments.append(str(target))
            notes.append(f"[The user shared a file: {name}]")
        return notes

    async def _download(self, url: str, target: Path, cap: int) -> None:
        import aiohttp

        os.makedirs(self.media_dir, exist_ok=True)
        headers = {"Authorization": f"Bearer {self.token}"}
        # No redirects: without a valid token Slack answers with a redirect to its login page, and the
        # token must not follow a redirect anywhere else.
        async with self._session().get(url, headers=headers, allow_redirects=False,
                                       timeout=aiohttp.ClientTimeout(total=120)) as resp:
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status}")
            body = bytearray()
            async for chunk in resp.content.iter_chunked(65536):
                body += chunk
                if len(body) > cap:  # the size Slack declared may be wrong: the cap holds whatever it said
                    raise RuntimeError("bigger than the size limit")
        await asyncio.to_thread(_write, target, bytes(body))

    # ---- commands and presses --------------------------------------------------------------------

    async def command(self, payload: dict[str, Any]) -> InboundMessage:
        """``/herald sub args`` -> the native command ``sub`` (``/herald`` alone: help)."""
        words = (payload.get("text") or "").strip()
        name, _, args = words.partition(" ")
        name = name.lstrip("/!").lower() or "help"
        channel, user = payload.get("channel_id") or "", payload.get("user_id") or ""
        label = payload.get("channel_name") or ""
        declared = "im" if label == "directmessage" else "mpim" if label.startswith("mpdm-") else None
        source = Source(platform=self.name, chat_id=channel, user_id=user,
                        chat_type=await self.chat_type(channel, declared),
                        user_name=payload.get("user_name") or None, scope=payload.get("team_id"))
        return InboundMessage(source=source, text=f"/{name} {args}".strip(),
                              platform_message_id=f"command/{payload.get('trigger_id') or time.time_ns()}",
                              received_at=time.time(), command=CommandCall(name, args.strip(), native=True),
                              reply_handle={"response_url": payload.get("response_url"), "user": user})

    async def press(self, payload: dict[str, Any]) -> ButtonPress | None:
        actions = payload.get("actions") or []
        user = (payload.get("user") or {}).get("id")
        container = payload.get("container") or {}
        channel = (payload.get("channel") or {}).get("id") or container.get("channel_id")
        if not actions or not user or not channel:
            return None
        message = payload.get("message") or {}
        ts = message.get("ts") or container.get("message_ts")
        thread = message.get("thread_ts") or container.get("thread_ts")
        if thread == ts:
            thread = None
        source = Source(platform=self.name, chat_id=channel, user_id=user, chat_type=await self.chat_type(channel),
                        thread_id=thread,
                        # The display name seen on their messages (as the prompt's "Denied by" shows it), else
                        # the username the payload carries.
                        user_name=self._names.get(user) or (payload.get("user") or {}).get("name"),
                        scope=(payload.get("team") or {}).get("id"))
        handle = {"response_url": payload.get("response_url"), "user": user}
        return ButtonPress(source=source, button_id=str(actions[0].get("value") or ""), message_id=ts,
                           reply_handle=handle)
