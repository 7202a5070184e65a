"""A fake Discord (aiohttp): the REST API under ``/api/v10`` and the gateway websocket, in the real wire format.

discord.py talks to it for real: the adapter's ``api_base_url`` is ``fake.api_url`` and its ``gateway_url``
``fake.gateway_url``. The gateway speaks HELLO / IDENTIFY / READY / GUILD_CREATE, heartbeats, RESUME (events
sent while a session was cut off are replayed; a cleanly closed session is gone, as on Discord), INVALID_SESSION,
and zlib-stream compression when asked. Tests act as users and read what the bot did:

    fake = FakeDiscord(); await fake.start()
    fake.user_message(fake.dm(ALICE), ALICE, "hi")                      # a DM
    fake.user_message(CHANNEL, BOB, "hi", mention=True)                # "@Herald hi" in a server channel
    fake.press(sent_message_id, ALICE, "ap:123:o")                      # a button press (INTERACTION_CREATE)
    fake.slash(channel, ALICE, "status")                                # an application command
    await fake.wait_sent(lambda sent: any(m.content == "echo: hi" for m in sent))

Faults: ``fail(method, path_part, status, times, retry_after)`` answers matching requests with 429 (Discord's
body and headers: discord.py retries those itself), 403 Missing Permissions, 404 Unknown Channel or 500;
``delay(method, path_part, seconds)`` answers them late, ``file_delay`` every attachment download;
``drop_gateway()`` cuts every websocket without a close frame (the client resumes). Every user event is a
message in the channel's history too, so what was posted while no session was connected can be read back.
Interactions must be answered within 3 s, once, as on Discord; ``dispatched_at`` and ``callbacks`` record when.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from tests.fakes.base import PlatformFake
from tests.fakes.discord_files import FILES, DiscordFiles, attachments_of, read_body
from tests.fakes.discord_gateway import APP_ID, BOT_ID, GUILD, FakeGateway, Session
from tests.fakes.loop_thread import ServedInThread

EPOCH_MS = 1_420_070_400_000
CHANNEL = 700_000_000_000_000_101  # #general
THREAD = 700_000_000_000_000_201  # a thread of #general
ROLE_HELPERS = 700_000_000_000_000_301
BOT_ROLE = 700_000_000_000_000_302  # the bot's own managed role ("@Herald" as a role mention)
BOT_NAME = "Herald"
INTENT_GUILDS, INTENT_GUILD_MESSAGES, INTENT_DMS, INTENT_MESSAGE_CONTENT = 1 << 0, 1 << 9, 1 << 12, 1 << 15
EPHEMERAL = 1 << 6
_COMMAND_NAME = re.compile(r"^[-_a-z0-9]{1,32}$")


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # Exactly "application/json", as Discord sends it: discord.py decodes a body only with that content type
    # (aiohttp's json_response would add "; charset=utf-8").
    return web.Response(body=json.dumps(data).encode(), status=status, headers=headers,
                        content_type="application/json")


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat()


@dataclass
class Sent:
    """A message the bot made (a channel message, or an interaction's response or follow-up)."""

    id: int
    channel_id: int
    content: str
    components: list[dict[str, Any]] = field(default_factory=list)
    reply_to: int | None = None
    flags: int = 0
    interaction: int | None = None  # made through this interaction's webhook
    monotonic: float = 0.0
    edits: int = 0
    nonce: str | None = None
    files: list[tuple[str, bytes]] = field(default_factory=list)  # uploaded with it: (file name, bytes)

    @property
    def buttons(self) -> list[dict[str, Any]]:
        return [c for row in self.components for c in row.get("components", []) if c.get("type") == 2]

    @property
    def ephemeral(self) -> bool:
        return bool(self.flags & EPHEMERAL)


@dataclass
class Interaction:
    id: int
    token: str
    type: int
    channel_id: int
    user_id: int
    payload: dict[str, Any]
    dispatched: float = 0.0
    callback: dict[str, Any] | None = None
    callback_at: float | None = None
    original: Sent | None = None
    followups: list[Sent] = field(default_factory=list)


@dataclass
class Fault:
    method: str
    path_part: str
    status: int
    times: int
    retry_after: float = 1.0


class FakeDiscord(DiscordFiles, PlatformFake[Sent], FakeGateway):
    client_max_size = 64 * 1024**2

    def __init__(self, host: str = "127.0.0.1", port: int = 0, heartbeat_ms: int = 41_250) -> None:
        super().__init__(host, port)
        bot_b64 = base64.urlsafe_b64encode(str(BOT_ID).encode()).decode().rstrip("=")
        self.token = f"{bot_b64}.{secrets.token_urlsafe(4)}.{secrets.token_urlsafe(27)}"
        self.heartbeat_ms = heartbeat_ms
        self._ids = itertools.count(1)
        self.users: dict[int, dict[str, Any]] = {BOT_ID: self._user(BOT_ID, BOT_NAME, bot=True)}
        self.channels: dict[int, dict[str, Any]] = {}
        self.history: dict[int, list[dict[str, Any]]] = {}
        self.member_roles: dict[int, list[int]] = {}  # user -> roles in GUILD
        self.forbidden: set[int] = set()  # channels where the bot may not post
        self.by_id: dict[int, Sent] = {}
        self.interactions: dict[int, Interaction] = {}
        self.sessions: dict[str, Session] = {}
        self.identified: list[dict[str, Any]] = []  # IDENTIFY payloads
        self.resumes: list[dict[str, Any]] = []  # RESUME payloads
        self.heartbeats = 0
        self.typing: list[tuple[int, float]] = []
        self.commands: dict[str, list[dict[str, Any]]] = {}  # "global" or a guild id -> registered commands
        self.dispatched_at: dict[int, float] = {}  # message or interaction id -> when the gateway sent it
        self.requests: list[tuple[str, str]] = []
        self.faults: list[Fault] = []
        self.files: dict[str, bytes] = {}
        self.file_delay = 0.0  # seconds an attachment download takes
        self.delays: list[tuple[str, str, float]] = []  # (method, path part, seconds): slow REST answers
        self.refusing_until = 0.0
        self.on_send: Callable[[Sent], None] | None = None  # called with every message the bot makes
        self._files_init()
        self._add_guild()

    # ---- lifecycle -------------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        return f"{self.root}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://{self.host}:{self.port}/gateway"

    def routes(self) -> list[web.AbstractRouteDef]:
        return [web.get("/gateway", self._gateway), web.get("/attachments/{name}", self._attachment),
                web.route("*", "/api/v10/{path:.+}", self._api)]

    async def start(self) -> str:
        await self.serve()
        return self.api_url

    async def stop(self) -> None:
        for session in self.sessions.values():
            if session.ws is not None:
                await session.ws.close()
        await self.close()

    # ---- the world: users, the server, its channels -------------------------------------------------

    def snowflake(self, at: float | None = None) -> int:
        ms = int((time.time() if at is None else at) * 1000)
        return ((ms - EPOCH_MS) << 22) | (next(self._ids) & 0x3FFFFF)

    @staticmethod
    def _user(user_id: int, name: str | None = None, bot: bool = False) -> dict[str, Any]:
        name = name or f"user{user_id % 10_000}"
        user = {"id": str(user_id), "username": name, "global_name": name, "discriminator": "0", "avatar": None}
        if bot:
            user["bot"] = True
        return user

    def user(self, user_id: int, bot: bool = False) -> dict[str, Any]:
        if user_id not in self.users:
            self.users[user_id] = self._user(user_id, bot=bot)
        return self.users[user_id]

    def _add_guild(self) -> None:
        base = {"guild_id": str(GUILD), "position": 0, "permission_overwrites": [], "nsfw": False}
        self.channels[CHANNEL] = {**base, "id": str(CHANNEL), "type": 0, "name": "general", "topic": None,
                                  "last_message_id": None, "rate_limit_per_user": 0}
        self.add_thread(THREAD, CHANNEL)

    def add_channel(self, channel_id: int, name: str) -> int:
        self.channels[channel_id] = {**self.channels[CHANNEL], "id": str(channel_id), "name": name}
        return channel_id

    def add_thread(self, thread_id: int, parent: int, name: str = "a thread") -> int:
        self.channels[thread_id] = {
            "id": str(thread_id), "type": 11, "guild_id": str(GUILD), "parent_id": str(parent), "name": name,
            "owner_id": str(BOT_ID), "last_message_id": None, "rate_limit_per_user": 0, "message_count": 0,
            "member_count": 2, "thread_metadata": {"archived": False, "auto_archive_duration": 1440,
                                                  "archive_timestamp": iso(time.time()), "locked": False}}
        return thread_id

    def dm(self, user_id: int, channel_id: int | None = None) -> int:
        """The DM channel between the bot and ``user_id`` (made on first use, with ``channel_id`` if given)."""
        for channel in self.channels.values():
            if channel["type"] == 1 and channel["recipients"][0]["id"] == str(user_id):
                return int(channel["id"])
        channel_id = channel_id or self.snowflake()
        self.channels[channel_id] = {"id": str(channel_id), "type": 1, "last_message_id": None,
                                     "recipients": [self.user(user_id)]}
        return channel_id

    def guild_payload(self) -> dict[str, Any]:
        role = {"permissions": "0", "position": 0, "color": 0, "hoist": False, "managed": False,
                "mentionable": False, "flags": 0, "icon": None, "unicode_emoji": None}
        roles = [{**role, "id": str(GUILD), "name": "@everyone"},
                 {**role, "id": str(ROLE_HELPERS), "name": "helpers", "position": 1},
                 {**role, "id": str(BOT_ROLE), "name": BOT_NAME, "position": 2, "managed": True,
                  "tags": {"bot_id": str(BOT_ID)}}]
        channels = [c for c in self.channels.values() if c.get("guild_id") == str(GUILD)]
        return {
            "id": str(GUILD), "name": "Herald test server", "icon": None, "owner_id": str(10**17), "roles": roles,
            "emojis": [], "stickers": [], "features": [], "member_count": 3, "large": False, "unavailable": False,
            "joined_at": iso(time.time()), "channels": [c for c in channels if c["type"] != 11],
            "threads": [c for c in channels if c["type"] == 11], "presences": [], "voice_states": [],
            "members": [self.member(BOT_ID)], "premium_tier": self.premium_tier, "mfa_level": 0,
            "verification_level": 0,
            "explicit_content_filter": 0, "default_message_notifications": 0, "system_channel_flags": 0,
            "preferred_locale": "en-US", "nsfw_level": 0, "stage_instances": [], "guild_scheduled_events": [],
        }

    def member(self, user_id: int) -> dict[str, Any]:
        roles = [BOT_ROLE] if user_id == BOT_ID else self.member_roles.get(user_id, [])
        return {"user": self.user(user_id), "roles": [str(r) for r in roles], "joined_at": iso(time.time()),
                "deaf": False, "mute": False, "flags": 0, "nick": None}

    # ---- what users do ---------------------------------------------------------------------------

    def _message(self, channel_id: int, author: dict[str, Any], content: str, *, mentions: list[int] = (),
                 reply_to: int | None = None, attachments: list[dict[str, Any]] = (), at: float | None = None,
                 flags: int = 0, components: list[dict[str, Any]] = ()) -> dict[str, Any]:
        channel = self.channels[channel_id]
        msg_id = self.snowflake(at)
        msg: dict[str, Any] = {
            "id": str(msg_id), "channel_id": str(channel_id), "type": 19 if reply_to else 0, "content": content,
            "author": author, "timestamp": iso(at or time.time()), "edited_timestamp": None, "tts": False,
            "mention_everyone": False, "mentions": [self.user(u) for u in mentions], "mention_roles": [],
            "attachments": list(attachments), "embeds": [], "pinned": False, "flags": flags,
            "components": list(components),
        }
        if reply_to is not None:
            msg["message_reference"] = {"type": 0, "message_id": str(reply_to), "channel_id": str(channel_id)}
            original = next((m for m in self.history.get(channel_id, []) if m["id"] == str(reply_to)), None)
            if original is not None:
                msg["referenced_message"] = original
        if "guild_id" in channel:
            msg["guild_id"] = channel["guild_id"]
        self.history.setdefault(channel_id, []).append(msg)
        return msg

    def user_message(self, channel_id: int, user_id: int, content: str = "hi", *, mention: bool = False,
                     role_mention: bool = False, reply_to: int | None = None, attachments: list[dict[str, Any]] = (),
                     bot: bool = False, at: float | None = None) -> dict[str, Any]:
        """A user (or another bot) posts; dispatched as MESSAGE_CREATE to every connected session.

        ``mention``: "@Herald ..." (the bot's user); ``role_mention``: "@Herald ..." picked as the bot's role.
        """
        mentions = [BOT_ID] if mention else []
        if mention:
            content = f"<@{BOT_ID}> {content}"
        if role_mention:
            content = f"<@&{BOT_ROLE}> {content}"
        if reply_to is not None and reply_to in self.by_id:
            mentions = [BOT_ID]  # a reply pings its author by default
        msg = self._message(channel_id, self.user(user_id, bot=bot), content, mentions=mentions, reply_to=reply_to,
                            attachments=attachments, at=at)
        if role_mention:
            msg["mention_roles"] = [str(BOT_ROLE)]
        self._dispatch_message(msg)
        return msg

    def user_edit(self, msg: dict[str, Any], content: str) -> dict[str, Any]:
        """The author edits ``msg`` (as ``user_message`` returned it; a mention is kept) to ``content``; dispatched
        as MESSAGE_UPDATE, as Discord sends it (the whole message, with its ``edited_timestamp``)."""
        mention = f"<@{BOT_ID}> " if msg["content"].startswith(f"<@{BOT_ID}>") else ""
        msg.update(content=mention + content, edited_timestamp=iso(time.time()))
        event = dict(msg)
        if "guild_id" in msg:
            event["member"] = {k: v for k, v in self.member(int(msg["author"]["id"])).items() if k != "user"}
        self.dispatch("MESSAGE_UPDATE", event)
        return event

    def _dispatch_message(self, msg: dict[str, Any]) -> None:
        event = dict(msg)
        if "guild_id" in msg:
            event["member"] = {k: v for k, v in self.member(int(msg["author"]["id"])).items() if k != "user"}
        self.dispatched_at.setdefault(int(msg["id"]), time.monotonic())
        self.dispatch("MESSAGE_CREATE", event)

    def attachment(self, name: str, content: bytes, size: int | None = None) -> dict[str, Any]:
        """An attachment for ``user_message(attachments=[...])``, served by this fake."""
        key = f"{secrets.token_hex(4)}-{name}"
        self.files[key] = content
        return {"id": str(self.snowflake()), "filename": name, "size": len(content) if size is None else size,
                "url": f"{self.root}/attachments/{key}", "proxy_url": f"{self.root}/attachments/{key}",
                "content_type": "application/octet-stream"}

    def _interaction(self, kind: int, channel_id: int, user_id: int, data: dict[str, Any],
                     message: dict[str, Any] | None = None) -> Interaction:
        channel = self.channels[channel_id]
        interaction_id = self.snowflake()
        token = "aW50ZXJhY3Rpb24" + secrets.token_urlsafe(40)
        payload: dict[str, Any] = {
            "id": str(interaction_id), "application_id": str(APP_ID), "type": kind, "data": data, "token": token,
            "version": 1, "channel_id": str(channel_id), "channel": {k: v for k, v in channel.items()
                                                                   if k != "recipients"},
            "app_permissions": "2248473465835073", "locale": "en-US", "entitlements": [],
            "authorizing_integration_owners": {"0": str(GUILD)} if "guild_id" in channel else {"1": str(user_id)},
            "context": 0 if "guild_id" in channel else 1, "attachment_size_limit": 10 * 1024 * 1024,
        }
        if "guild_id" in channel:
            payload["guild_id"] = channel["guild_id"]
            payload["guild"] = {"id": channel["guild_id"], "locale": "en-US", "features": []}
            payload["member"] = {**self.member(user_id), "permissions": "2248473465835073"}
        else:
            payload["user"] = self.user(user_id)
        if message is not None:
            payload["message"] = message
        record = Interaction(interaction_id, token, kind, channel_id, user_id, payload)
        self.interactions[interaction_id] = record
        record.dispatched = time.monotonic()
        self.dispatched_at[interaction_id] = record.dispatched
        self.dispatch("INTERACTION_CREATE", payload)
        return record

    def press(self, message_id: int, user_id: int, custom_id: str) -> Interaction:
        """A button of the bot's message ``message_id`` is pressed."""
        sent = self.by_id[message_id]
        message = next((m for m in self.history.get(sent.channel_id, []) if m["id"] == str(message_id)), None)
        if message is None:  # an ephemeral follow-up is not in the channel's history
            message = self._message_payload(sent)
        return self._interaction(3, sent.channel_id, user_id, {"custom_id": custom_id, "component_type": 2},
                                 message)

    def slash(self, channel_id: int, user_id: int, name: str, args: str = "") -> Interaction:
        """An application command (``/name args``) is run in ``channel_id``."""
        data: dict[str, Any] = {"id": str(self.snowflake()), "name": name, "type": 1}
        if args:
            data["options"] = [{"name": "args", "type": 3, "value": args}]
        return self._interaction(2, channel_id, user_id, data)

    # ---- REST ------------------------------------------------------------------------------------

    def fail(self, method: str, path_part: str, status: int, times: int = 1, retry_after: float = 1.0) -> None:
        self.faults.append(Fault(method, path_part, status, times, retry_after))

    def delay(self, method: str, path_part: str, seconds: float) -> None:
        """Requests matching ``method`` and ``path_part`` are answered ``seconds`` late."""
        self.delays.append((method, path_part, seconds))

    @staticmethod
    def error(status: int, code: int, message: str) -> web.Response:
        return _json({"message": message, "code": code}, status=status)

    def _fault(self, method: str, path: str) -> web.Response | None:
        for fault in self.faults:
            if fault.times > 0 and fault.method == method and fault.path_part in path:
                fault.times -= 1
                if fault.status == 429:
                    headers = {"Via": "1.1 google", "Retry-After": str(fault.retry_after),
                               "X-RateLimit-Scope": "user", "X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "0",
                               "X-RateLimit-Reset-After": str(fault.retry_after), "X-RateLimit-Bucket": "fake"}
                    return _json({"message": "You are being rate limited.",
                                              "retry_after": fault.retry_after, "global": False},
                                             status=429, headers=headers)
                if fault.status == 403:
                    return self.error(403, 50013, "Missing Permissions")
                if fault.status == 404:
                    return self.error(404, 10003, "Unknown Channel")
                return self.error(500, 0, "500: Internal Server Error")
        return None

    async def _api(self, request: web.Request) -> web.StreamResponse:
        path, method = request.match_info["path"], request.method
        self.requests.append((method, path))
        webhook = path.startswith(("webhooks/", "interactions/"))
        if not webhook and request.headers.get("Authorization") != f"Bot {self.token}":
            return self.error(401, 0, "401: Unauthorized")
        for slow_method, part, seconds in self.delays:
            if slow_method == method and part in path:
                await asyncio.sleep(seconds)
        fault = self._fault(method, path)
        if fault is not None:
            return fault
        body = await read_body(request) if request.can_read_body else {}
        for pattern, handler in self._routes:
            match = re.fullmatch(pattern, f"{method} {path}")
            if match:
                return await handler(self, request, body, *match.groups())
        return self.error(404, 0, f"404: Not Found ({method} {path})")

    async def _me(self, _r: web.Request, _b: Any) -> web.Response:
        return _json({**self.users[BOT_ID], "verified": True, "mfa_enabled": False, "flags": 0})

    async def _app(self, _r: web.Request, _b: Any) -> web.Response:
        return _json({
            "id": str(APP_ID), "name": BOT_NAME, "icon": None, "description": "", "bot_public": True,
            "bot_require_code_grant": False, "owner": self._user(10**17, "owner"), "verify_key": "0" * 64,
            "flags": 0, "team": None, "summary": "", "rpc_origins": [], "interactions_endpoint_url": None})

    async def _gateway_bot(self, _r: web.Request, _b: Any) -> web.Response:
        return _json({"url": self.gateway_url, "shards": 1, "session_start_limit": {
            "total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}})

    async def _put_commands(self, _r: web.Request, body: Any, _app: str, guild: str | None = None) -> web.Response:
        for command in body:
            if not _COMMAND_NAME.fullmatch(command.get("name", "")) or not 1 <= len(command.get("description",
                                                                                              "")) <= 100:
                return self.error(400, 50035, f"Invalid Form Body: {command!r}")
        self.commands[guild or "global"] = body
        return _json([{**c, "id": str(self.snowflake()), "application_id": str(APP_ID)} for c in body])

    def _check_message(self, body: dict[str, Any]) -> web.Response | None:
        content = body.get("content") or ""
        if len(content) > 2000:  # Discord counts characters
            return self.error(400, 50035, "Invalid Form Body: content: Must be 2000 or fewer in length.")
        if not content.strip() and not body.get("components") and not body.get(FILES):
            return self.error(400, 50006, "Cannot send an empty message")
        rows = body.get("components") or []
        if len(rows) > 5:
            return self.error(400, 50035, "Invalid Form Body: components: at most 5 rows")
        for row in rows:
            buttons = row.get("components", [])
            if row.get("type") != 1 or not 1 <= len(buttons) <= 5:
                return self.error(400, 50035, "Invalid Form Body: an action row holds 1 to 5 components")
            for b in buttons:
                if (b.get("type") != 2 or b.get("style") not in (1, 2, 3, 4) or not b.get("label")
                        or len(b["label"]) > 80 or not 1 <= len(b.get("custom_id") or "") <= 100):
                    return self.error(400, 50035, f"Invalid Form Body: bad button {b!r}")
        return None

    def _record(self, channel_id: int, body: dict[str, Any], interaction: int | None = None) -> Sent:
        ref = (body.get("message_reference") or {}).get("message_id")
        sent = Sent(0, channel_id, body.get("content") or "", body.get("components") or [],
                    int(ref) if ref else None, int(body.get("flags") or 0), interaction, time.monotonic(),
                    nonce=body.get("nonce"), files=list(body.get(FILES) or []))
        if not sent.ephemeral:
            msg = self._message(channel_id, self.users[BOT_ID], sent.content, reply_to=sent.reply_to,
                                flags=sent.flags, components=sent.components)
            sent.id = int(msg["id"])
            self._dispatch_message(msg)  # the bot sees its own messages, as on Discord
        else:
            sent.id = self.snowflake()
        self.sent.append(sent)
        self.by_id[sent.id] = sent
        if self.on_send is not None:
            self.on_send(sent)
        self._changed.set()
        return sent

    def _message_payload(self, sent: Sent) -> dict[str, Any]:
        channel = self.channels[sent.channel_id]
        out = {"id": str(sent.id), "channel_id": str(sent.channel_id), "type": 0, "content": sent.content,
               "author": self.users[BOT_ID], "timestamp": iso(time.time()), "edited_timestamp": None, "tts": False,
               "mention_everyone": False, "mentions": [], "mention_roles": [], "attachments": [], "embeds": [],
               "pinned": False, "flags": sent.flags, "components": sent.components}
        if "guild_id" in channel:
            out["guild_id"] = channel["guild_id"]
        if sent.nonce:
            out["nonce"] = sent.nonce
        out["attachments"] = attachments_of(sent)
        return out

    async def _post_message(self, _r: web.Request, body: Any, channel: str) -> web.Response:
        channel_id = int(channel)
        if channel_id not in self.channels:
            return self.error(404, 10003, "Unknown Channel")
        if channel_id in self.forbidden:
            return self.error(403, 50013, "Missing Permissions")
        problem = self._check_message(body)
        if problem is not None:
            return problem
        if body.get("enforce_nonce") and body.get("nonce"):
            for sent in self.sent:
                if sent.channel_id == channel_id and sent.nonce == body["nonce"]:
                    return _json(self._message_payload(sent))  # the one it made before
        made = self._record(channel_id, body)
        if made.files:
            await self.uploaded()
        return _json(self._message_payload(made))

    async def _edit_message(self, _r: web.Request, body: Any, channel: str, message: str) -> web.Response:
        sent = self.by_id.get(int(message))
        if sent is None or sent.channel_id != int(channel):
            return self.error(404, 10008, "Unknown Message")
        return self._apply_edit(sent, body)

    def _apply_edit(self, sent: Sent, body: dict[str, Any]) -> web.Response:
        if "content" in body:
            sent.content = body["content"] or ""
        if "components" in body:
            sent.components = body["components"] or []
        problem = self._check_message({"content": sent.content, "components": sent.components})
        if problem is not None:
            return problem
        sent.edits += 1
        for msg in self.history.get(sent.channel_id, []):
            if msg["id"] == str(sent.id):
                msg["content"], msg["components"] = sent.content, sent.components
        self._changed.set()
        return _json(self._message_payload(sent))

    async def _typing(self, _r: web.Request, _b: Any, channel: str) -> web.Response:
        self.typing.append((int(channel), time.monotonic()))
        return web.Response(status=204)

    async def _get_channel(self, _r: web.Request, _b: Any, channel: str) -> web.Response:
        found = self.channels.get(int(channel))
        return _json(found) if found else self.error(404, 10003, "Unknown Channel")

    async def _history(self, request: web.Request, _b: Any, channel: str) -> web.Response:
        if int(channel) not in self.channels:
            return self.error(404, 10003, "Unknown Channel")
        msgs = sorted(self.history.get(int(channel), []), key=lambda m: int(m["id"]))
        limit = min(int(request.query.get("limit", 50)), 100)
        if "after" in request.query:
            after = int(request.query["after"])
            page = [m for m in msgs if int(m["id"]) > after][:limit]
        else:
            before = int(request.query.get("before", 1 << 63))
            page = [m for m in msgs if int(m["id"]) < before][-limit:]
        return _json(list(reversed(page)))  # newest first, as Discord answers

    async def _get_member(self, _r: web.Request, _b: Any, guild: str, user: str) -> web.Response:
        return _json(self.member(int(user)))

    async def _callback(self, request: web.Request, body: Any, interaction: str, token: str) -> web.Response:
        record = self.interactions.get(int(interaction))
        if record is None or record.token != token or time.monotonic() - record.dispatched > 3.0:
            return self.error(404, 10062, "Unknown interaction")
        if record.callback is not None:
            return self.error(400, 40060, "Interaction has already been acknowledged.")
        record.callback, record.callback_at = body, time.monotonic()
        kind, data = body.get("type"), body.get("data") or {}
        if kind == 4:
            record.original = self._record(record.channel_id, data, record.id)
        elif kind == 5:  # "Herald is thinking…", replaced when the original response is edited
            record.original = self._record(record.channel_id, {"content": "…", "flags": data.get("flags", 0)},
                                           record.id)
            record.original.edits = -1  # the placeholder's replacement is its first state, not an edit
        self._changed.set()
        answer = {"interaction": {"id": interaction, "type": record.type, "response_message_loading": kind == 5,
                                  "response_message_ephemeral": bool(data.get("flags", 0) & EPHEMERAL)}}
        if record.original is not None:
            answer["resource"] = {"type": kind, "message": self._message_payload(record.original)}
        else:
            answer["resource"] = {"type": kind}
        return _json(answer)

    def _webhook_interaction(self, app: str, token: str) -> Interaction | None:
        if app != str(APP_ID):
            return None
        return next((i for i in self.interactions.values() if i.token == token and i.callback is not None), None)

    async def _edit_original(self, _r: web.Request, body: Any, app: str, token: str) -> web.Response:
        record = self._webhook_interaction(app, token)
        if record is None or record.original is None:
            return self.error(404, 10015, "Unknown Webhook")
        return self._apply_edit(record.original, body)

    async def _followup(self, _r: web.Request, body: Any, app: str, token: str) -> web.Response:
        record = self._webhook_interaction(app, token)
        if record is None:
            return self.error(404, 10015, "Unknown Webhook")
        problem = self._check_message(body)
        if problem is not None:
            return problem
        sent = self._record(record.channel_id, body, record.id)
        record.followups.append(sent)
        return _json(self._message_payload(sent))

    async def _attachment(self, request: web.Request) -> web.Response:
        content = self.files.get(request.match_info["name"])
        await asyncio.sleep(self.file_delay)
        return web.Response(body=content) if content is not None else web.Response(status=404)

    _routes: list[tuple[str, Callable[..., Any]]] = [
        (r"GET users/@me", _me),
        (r"GET oauth2/applications/@me", _app),
        (r"GET gateway/bot", _gateway_bot),
        (r"PUT applications/(\d+)/commands", _put_commands),
        (r"PUT applications/(\d+)/guilds/(\d+)/commands", _put_commands),
        (r"POST channels/(\d+)/messages", _post_message),
        (r"PATCH channels/(\d+)/messages/(\d+)", _edit_message),
        (r"POST channels/(\d+)/typing", _typing),
        (r"GET channels/(\d+)", _get_channel),
        (r"GET channels/(\d+)/messages", _history),
        (r"GET guilds/(\d+)/members/(\d+)", _get_member),
        (r"GET guilds/(\d+)", DiscordFiles._get_guild),
        (r"POST interactions/(\d+)/([^/]+)/callback", _callback),
        (r"PATCH webhooks/(\d+)/([^/]+)/messages/@original", _edit_original),
        (r"POST webhooks/(\d+)/([^/]+)", _followup),
    ]

    # ---- what the bot did ------------------------------------------------------------------------

    def sent_in(self, channel_id: int) -> list[Sent]:
        return [m for m in self.sent if m.channel_id == channel_id]

    @staticmethod
    def shown(message: Sent) -> str:
        return message.content[:80]


class FakeDiscordThread(ServedInThread):
    """A FakeDiscord served from a thread with its own loop (benchmarks, ``herald run`` tests).

    ``call(fn, *args)`` runs ``fn(fake, *args)`` on the fake's loop and returns its result.
    """

    thread_name = "fake-discord"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(FakeDiscord(**kwargs))
