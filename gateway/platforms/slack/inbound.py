"""Slack inbound: an Events API message becomes an ``InboundMessage``, a block_actions payload a
``ButtonPress``, ``/herald sub args`` a native command.

Which messages are for the bot: every DM; in channels a mention (``<@bot>``), a known ``!command``, and
anything in a thread the bot is already in (it was mentioned there, or posted there: remembered here, and
after a restart found with conversations.replies); with ``require_mention: false`` everything. A DM is one
session; a thread is a session, and with ``reply_in_thread`` a channel message starts one (its own ts is
the thread). The platform message id is ``<channel>/<ts>``, the same for an event's retries, for its Socket
Mode redelivery and for the ``message`` and ``app_mention`` events of one mention, so the inbox keeps one. A
``message_changed`` event is an edit of that message (``edit_of``), named by the edit's ts.

Everything here runs before the event's ack, so its API lookups (the channel's type, whether the bot is in
a thread, the sender's name) share one deadline (``LOOKUP_BUDGET``) well inside Slack's 3 s. A thread
follow-up whose lookup did not answer in time (a 429, a timeout) is taken as *maybe* for the bot: stored,
acknowledged, and asked again patiently after the ack (``thread_check``, honouring Retry-After) before it
reaches the agent; a thread the bot is not in drops it then. Files are only listed here (``pending``) and
downloaded with the bot token after the ack, before the turn (``download``), so only for accepted senders.
"""

from __future__ import annotations

import asyncio
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
    FileUnavailable,
    Gateway,
    InboundMessage,
    PermanentError,
    Source,
    TooBig,
    file_ref,
    parse_text_command,
    save_stream,
)
from gateway.platforms.slack.mrkdwn import unescape
from gateway.platforms.slack.transport import map_error, retry_after

if TYPE_CHECKING:
    from gateway.platforms.slack.config import SlackConfig

log = structlog.get_logger("herald.slack")

# Message subtypes a person's words arrive with; the rest (joins, edits, deletions, bots) are not for us.
_TAKEN_SUBTYPES = frozenset({None, "file_share", "thread_broadcast", "me_message"})
_CHAT_TYPES: dict[str, ChatType] = {"im": "dm", "mpim": "group", "channel": "channel", "group": "channel"}
LOOKUP_BUDGET = 1.5  # all of an event's API lookups before its ack, together: well inside Slack's 3 s
NOT_IN_THREAD_TTL = 60.0  # a "the bot is not in this thread" answer is asked again after this
# After the ack, whether the bot is in a thread is asked until Slack answers, within this long: Retry-After
# is honoured between attempts.
THREAD_CHECK_FOR = 120.0
DOWNLOAD_TIMEOUT = 120.0


class Deadline:
    """The time left of an event's lookup budget, shared by its lookups."""

    def __init__(self, seconds: float) -> None:
        self.until = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.until - time.monotonic())


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

    def known_in_thread(self, channel: str, thread_ts: str) -> bool | None:
        known = self._threads.get((channel, thread_ts))
        if known == 0.0:
            return True
        if known is not None and known > time.monotonic():
            return False
        return None

    async def in_thread(self, channel: str, thread_ts: str, timeout: float) -> bool | None:
        """Whether the bot is in the thread; None when Slack did not say within ``timeout`` (a 429, a timeout)."""
        return (await self._ask_thread(channel, thread_ts, timeout))[0]

    async def _ask_thread(self, channel: str, thread_ts: str, timeout: float
                          ) -> tuple[bool | None, BaseException | None]:
        known = self.known_in_thread(channel, thread_ts)
        if known is not None:
            return known, None
        if timeout <= 0:
            return None, None
        try:
            resp = await asyncio.wait_for(self._client().conversations_replies(channel=channel, ts=thread_ts,
                                                                               limit=200), timeout)
        except Exception as exc:
            log.info("slack_thread_lookup_failed", error=f"{type(exc).__name__}: {exc}")
            if not isinstance(map_error(exc), PermanentError):
                return None, exc  # a rate limit, a timeout, Slack's trouble: ask again later
            found = False  # thread_not_found, no access: not a thread the bot is in
        else:
            found = any(m.get("user") == self.bot_user or (self.bot_id and m.get("bot_id") == self.bot_id)
                        for m in resp.get("messages") or [])
        if found:
            self.joined(channel, thread_ts)
        else:
            self._threads[(channel, thread_ts)] = time.monotonic() + NOT_IN_THREAD_TTL
        return found, None

    async def thread_check(self, channel: str, thread_ts: str) -> bool | None:
        """After the ack: whether the bot is in the thread, asked until Slack answers (Retry-After honoured)
        for up to THREAD_CHECK_FOR; None if it never did."""
        give_up = time.monotonic() + THREAD_CHECK_FOR
        delay = 1.0
        while True:
            found, error = await self._ask_thread(channel, thread_ts, 10.0)
            if found is not None:
                return found
            wait = retry_after(error) if error is not None else None
            wait = delay if wait is None else max(wait, 0.1)
            if time.monotonic() + wait > give_up:
                log.warning("slack_thread_lookup_gave_up", channel=channel, thread_ts=thread_ts)
                return None
            await asyncio.sleep(wait)
            delay = min(delay * 2, 30.0)

    # ---- chat types and names --------------------------------------------------------------------

    async def chat_type(self, channel: str, declared: str | None = None, timeout: float = LOOKUP_BUDGET
                        ) -> ChatType:
        if declared in _CHAT_TYPES:
            self._types[channel] = _CHAT_TYPES[declared]
        known = self._types.get(channel)
        if known is not None:
            return known
        if channel.startswith("D"):
            return "dm"
        kind: ChatType = "channel"
        try:
            if timeout <= 0:
                raise TimeoutError("no time left before the ack")
            info = (await asyncio.wait_for(self._client().conversations_info(channel=channel), timeout))["channel"]
            kind = "dm" if info.get("is_im") else "group" if info.get("is_mpim") else "channel"
        except Exception as exc:
            log.info("slack_channel_lookup_failed", channel=channel, error=f"{type(exc).__name__}: {exc}")
            return kind  # not remembered: asked again next time
        self._types[channel] = kind
        return kind

    async def user_name(self, user: str, profile: dict[str, Any] | None = None, timeout: float = LOOKUP_BUDGET
                        ) -> str | None:
        name = (profile or {}).get("display_name") or (profile or {}).get("real_name")
        if name:
            self._remember_name(user, name)
            return str(name)
        if user in self._names:
            return self._names[user]
        if timeout <= 0:
            return None  # the name is a nicety: not asked when the ack's time is spent (asked next time)
        try:
            info = (await asyncio.wait_for(self._client().users_info(user=user), timeout))["user"]
            name = (info.get("profile") or {}).get("display_name") or info.get("real_name") or info.get("name")
        except Exception as exc:
            log.info("slack_user_lookup_failed", error=f"{type(exc).__name__}: {exc}")
            return None  # not remembered: asked again next time
        self._remember_name(user, name or None)
        return name or None

    def _remember_name(self, user: str, name: str | None) -> None:
        self._names[user] = name
        self._names.move_to_end(user)
        while len(self._names) > 10_000:
            self._names.popitem(last=False)

    # ---- messages --------------------------------------------------------------------------------

    async def message(self, body: dict[str, Any], deadline: Deadline | None = None) -> InboundMessage | None:
        deadline = deadline or Deadline(LOOKUP_BUDGET)
        event = body.get("event") or {}
        if event.get("subtype") == "message_changed":
            return await self._edited(body, deadline)
        if event.get("bot_id") or event.get("subtype") not in _TAKEN_SUBTYPES or event.get("hidden"):
            return None
        user, channel, ts = event.get("user"), event.get("channel"), event.get("ts")
        if not user or not channel or not ts or user == self.bot_user:
            return None
        thread_ts = event.get("thread_ts")
        if thread_ts == ts:
            thread_ts = None  # the thread's first message is a channel message
        chat_type = await self.chat_type(channel, event.get("channel_type"), deadline.left())
        raw = event.get("text") or ""
        mention = f"<@{self.bot_user}>"
        mentioned = event.get("type") == "app_mention" or mention in raw
        text = unescape(self._strip_mention(raw, mention)).strip()
        parsed = parse_text_command(text, prefix="!")
        command = parsed[0] if parsed is not None else None
        pending: dict[str, Any] = {}
        if chat_type == "dm":
            thread = thread_ts
        else:
            addressed = (mentioned or not self.cfg.require_mention
                         or (command is not None and command.name in self.command_names))
            if not addressed and thread_ts is not None:
                found = await self.in_thread(channel, thread_ts, deadline.left())
                if found is None:
                    # Slack did not say in time: stored and acknowledged as maybe for the bot, asked again
                    # patiently before it reaches the agent (``thread_check``).
                    pending["thread"] = thread_ts
                addressed = found is not False
            if not addressed:
                return None
            thread = thread_ts or (ts if self.cfg.reply_in_thread else None)
        source = Source(platform=self.name, chat_id=channel, user_id=user, chat_type=chat_type, thread_id=thread,
                        user_name=await self.user_name(user, event.get("user_profile"), deadline.left()),
                        scope=body.get("team_id") or event.get("team"))
        files = [file_ref(str(f.get("name") or f.get("title") or "file"), size=int(f.get("size") or 0),
                          url=f.get("url_private_download") or f.get("url_private"))
                 for f in event.get("files") or [] if isinstance(f, dict)]
        if files:
            pending["files"] = files
        if not text.strip() and not files:
            return None
        return InboundMessage(source=source, text=text, platform_message_id=f"{channel}/{ts}",
                              received_at=time.time(), command=command, pending=pending or None)

    async def _edited(self, body: dict[str, Any], deadline: Deadline) -> InboundMessage | None:
        """A ``message_changed`` event: the message as it reads now, taken like a message (the same rules on who
        and where), as an edit of ``<channel>/<ts>`` named by the edit's ts. Its files were fetched already."""
        event = body.get("event") or {}
        inner = event.get("message") or {}
        edited = (inner.get("edited") or {}).get("ts")
        if not edited:  # a link unfurled, a file shared later: Slack changed it, the person did not
            return None
        again = {k: v for k, v in inner.items() if k not in ("files", "subtype", "edited")}
        again.update(type="message", channel=event.get("channel"), channel_type=event.get("channel_type"))
        msg = await self.message({**body, "event": again}, deadline)
        if msg is None:
            return None
        pending = {k: v for k, v in (msg.pending or {}).items() if k != "files"}
        msg.edit_of, msg.platform_message_id = msg.platform_message_id, f"{msg.platform_message_id}@{edited}"
        msg.command, msg.pending = None, pending or None
        return msg

    @staticmethod
    def _strip_mention(text: str, mention: str) -> str:
        """A leading ``<@bot>`` is dropped; one elsewhere reads as @herald."""
        stripped = text.lstrip()
        if stripped.startswith(mention):
            stripped = stripped[len(mention):].lstrip(" ,:")
        return stripped.replace(mention, "@herald")

    async def download(self, ref: dict[str, Any], target: Path) -> None:
        """One shared file, fetched with the bot token into ``target`` (after the ack, before the turn)."""
        import aiohttp

        cap = int(self.cfg.max_file_mb * 1024 * 1024)
        if int(ref.get("size") or 0) > cap:
            raise TooBig(self.cfg.max_file_mb)
        url = ref.get("url")
        if not url or urlsplit(url).hostname not in self._file_hosts:
            raise FileUnavailable("Slack gave no link to download it from")
        headers = {"Authorization": f"Bearer {self.token}"}
        # No redirects: without a valid token Slack answers with a redirect to its login page, and the
        # token must not follow a redirect anywhere else.
        async with self._session().get(url, headers=headers, allow_redirects=False,
                                       timeout=aiohttp.ClientTimeout(total=DOWNLOAD_TIMEOUT)) as resp:
            if resp.status != 200:
                raise FileUnavailable(f"Slack answered HTTP {resp.status}")
            # The size Slack declared may be wrong: the cap holds whatever it said.
            await save_stream(resp.content.iter_chunked(65536), target, cap, self.cfg.max_file_mb)

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
                        chat_type=await self.chat_type(channel, declared, LOOKUP_BUDGET),
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
        source = Source(platform=self.name, chat_id=channel, user_id=user,
                        chat_type=await self.chat_type(channel, timeout=LOOKUP_BUDGET),
                        thread_id=thread,
                        # The display name seen on their messages (as the prompt's "Denied by" shows it), else
                        # the username the payload carries.
                        user_name=self._names.get(user) or (payload.get("user") or {}).get("name"),
                        scope=(payload.get("team") or {}).get("id"))
        handle = {"response_url": payload.get("response_url"), "user": user}
        return ButtonPress(source=source, button_id=str(actions[0].get("value") or ""), message_id=ts,
                           reply_handle=handle)
