"""A fake Matrix homeserver (aiohttp) speaking the client-server API's real wire format, for tests and benchmarks:
/sync with its long poll, tokens and limited timelines, /send with transaction ids, redactions, joins and
invites, /messages, whoami and login, and the content repository (upload, authenticated download, config).

The bot under test points matrix-nio at it with ``platforms.matrix.homeserver`` (``fake.url``). Tests set rooms
up server-side, make users act and read what the bot did:

    fake = FakeMatrix(); await fake.start()
    room = fake.dm(ALICE)                                            # a room of the bot and Alice, both joined
    event = fake.user_message(room, ALICE, "hi")                     # what Alice sends
    await fake.wait_sent(lambda sent: any(m.text == "echo: hi" for m in sent))

A sync token is ``s<n>``: the position after the n-th event of the server's one stream. ``handed_out`` and
``confirmed_at`` record (``time.monotonic()``) when a /sync answer first carried an event to the bot, and when
the bot first asked for a /sync from a position past it, so tests can hold the bot to an acknowledgement
deadline. ``sent`` holds the bot's messages as they stand (edits applied); its reactions and redactions are in
``bot_reactions`` and ``redacted``.

Faults on demand: ``flood(room, seconds)`` answers every send into that room with 429 ``M_LIMIT_EXCEEDED`` and
its ``retry_after_ms`` until the window ends; ``fail(endpoint, kind, times)`` with kind "429", "500" or "drop"
(endpoint: "send", "sync", "upload", ...); ``file_delay`` slows every download.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.base import PlatformFake
from tests.fakes.loop_thread import ServedInThread
from tests.fakes.matrix_keys import KeyServer

SERVER = "fake.test"
BOT = f"@herald:{SERVER}"
BOT_NAME = "Herald"
BOT_DEVICE = "HERALDDEV"
EVENT_MAX = 65_536  # bytes of an event as the homeserver stores it


def event_size(event: dict[str, Any]) -> int:
    return len(json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode())


@dataclass
class Sent:
    """One of the bot's messages, as it stands now (its latest edit's content)."""

    event_id: str
    room_id: str
    content: dict[str, Any]
    monotonic: float
    edits: int = 0
    txn: str | None = None
    first: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return str(self.content.get("body") or "")

    @property
    def html(self) -> str | None:
        return self.content.get("formatted_body")

    @property
    def thread(self) -> str | None:
        rel = self.first.get("m.relates_to") or {}
        return rel.get("event_id") if rel.get("rel_type") == "m.thread" else None

    @property
    def reply_to(self) -> str | None:
        rel = self.first.get("m.relates_to") or {}
        reply = rel.get("m.in_reply_to") or {}
        return None if rel.get("is_falling_back") else reply.get("event_id")

    @property
    def buttons(self) -> list[dict[str, Any]]:
        return list(self.content.get("org.herald.buttons") or [])


@dataclass
class Room:
    room_id: str
    members: dict[str, str] = field(default_factory=dict)  # user -> join | invite | leave
    state: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    timeline: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    joined_at: dict[str, int] = field(default_factory=dict)  # user -> position of their latest join

    def counts(self) -> dict[str, int]:
        values = list(self.members.values())
        return {"m.joined_member_count": values.count("join"), "m.invited_member_count": values.count("invite")}


@dataclass
class Fault:
    endpoint: str
    kind: str
    times: int
    retry_after_ms: int = 1000


class FakeMatrix(KeyServer, PlatformFake[Sent]):
    runner_options = {**PlatformFake.runner_options, "handler_cancellation": True}  # long polls

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        PlatformFake.__init__(self, host, port)
        KeyServer.__init__(self)
        self.users: dict[str, dict[str, Any]] = {BOT: {"password": "bot-password", "displayname": BOT_NAME}}
        self.bot_token = f"syt_aGVyYWxk_{secrets.token_urlsafe(15)}_fake"
        self.tokens: dict[str, tuple[str, str]] = {self.bot_token: (BOT, BOT_DEVICE)}
        self.rooms: dict[str, Room] = {}
        self.events: dict[str, tuple[str, int, dict[str, Any]]] = {}  # event id -> (room, position, event)
        self.position = 0
        self._cond = asyncio.Condition()
        self.handed_out: dict[str, float] = {}
        self.confirmed_at: dict[str, float] = {}
        self.sync_calls: list[dict[str, Any]] = []  # the bot's /sync requests' parameters
        self.txns: dict[tuple[str, str], str] = {}
        self.by_id: dict[str, Sent] = {}
        self.bot_reactions: dict[str, tuple[str, str]] = {}  # reaction event -> (target, key), standing now
        self.redacted: set[str] = set()
        self.media: dict[str, tuple[str, bytes]] = {}
        self.upload_limit = 50 * 1024 * 1024
        self.file_delay = 0.0
        self.faults: list[Fault] = []
        self.floods: dict[str, float] = {}
        self.left: list[str] = []  # rooms the bot left (invites declined)
        self.read_back: list[str] = []  # rooms whose /messages the bot paged through
        self.on_send: Callable[[Sent], None] | None = None
        self._closing = False
        self._ids = itertools.count(1)

    # ---- lifecycle -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """What goes into ``platforms.matrix.homeserver``."""
        return self.root

    def routes(self) -> list[web.AbstractRouteDef]:
        c = "/_matrix/client/{version:v3|r0|v1}"
        media = "/_matrix/client/v1/media"
        return [
            web.get("/_matrix/client/versions", self._versions), web.get(f"{c}/sync", self._sync),
            web.get(f"{c}/account/whoami", self._whoami), web.post(f"{c}/login", self._login),
            web.post(f"{c}/logout", self._logout), web.get(f"{c}/profile/{{user}}/displayname", self._displayname),
            web.put(f"{c}/rooms/{{room}}/send/{{type}}/{{txn}}", self._send),
            web.put(f"{c}/rooms/{{room}}/redact/{{event}}/{{txn}}", self._redact),
            web.post(f"{c}/join/{{room}}", self._join), web.post(f"{c}/rooms/{{room}}/join", self._join),
            web.post(f"{c}/rooms/{{room}}/leave", self._leave), web.get(f"{c}/rooms/{{room}}/messages", self._messages),
            web.get(f"{c}/rooms/{{room}}/event/{{event}}", self._get_event),
            web.get(f"{c}/rooms/{{room}}/joined_members", self._joined_members),
            web.post("/_matrix/media/v3/upload", self._upload), web.get(f"{media}/config", self._media_config),
            web.get(f"{media}/download/{{server}}/{{media}}", self._download),
            web.get(f"{media}/download/{{server}}/{{media}}/{{name}}", self._download), *self.key_routes(c),
        ]

    async def start(self) -> str:
        self._closing = False
        await self.serve()
        return self.url

    async def stop(self) -> None:
        self._closing = True
        await self._notify()
        await self.close()

    async def _notify(self) -> None:
        async with self._cond:
            self._cond.notify_all()

    def _wake(self) -> None:
        try:
            asyncio.get_running_loop().create_task(self._notify())
        except RuntimeError:
            pass
        self._changed.set()

    # ---- the stream ------------------------------------------------------------------------------

    def _event(self, room_id: str, sender: str, event_type: str, content: dict[str, Any], *,
               state_key: str | None = None, txn: str | None = None) -> dict[str, Any]:
        self.position += 1
        event: dict[str, Any] = {"type": event_type, "event_id": f"${next(self._ids):06d}{secrets.token_urlsafe(12)}",
                                 "sender": sender, "origin_server_ts": int(time.time() * 1000), "content": content,
                                 "unsigned": {"age": 0}}
        if state_key is not None:
            event["state_key"] = state_key
            self.rooms[room_id].state[(event_type, state_key)] = event
        if txn is not None:
            event["unsigned"]["transaction_id"] = txn
        self.rooms[room_id].timeline.append((self.position, event))
        self.events[event["event_id"]] = (room_id, self.position, event)
        self._wake()
        return event

    def _member(self, room_id: str, user: str, membership: str, by: str | None = None, **extra: Any) -> None:
        room = self.rooms[room_id]
        room.members[user] = membership
        content = {"membership": membership, **extra}
        if membership == "join":
            content["displayname"] = self.users.get(user, {}).get("displayname") or user[1:].partition(":")[0]
        self._event(room_id, by or user, "m.room.member", content, state_key=user)
        if membership == "join":
            room.joined_at[user] = self.position

    # ---- what users do ---------------------------------------------------------------------------

    def user(self, user_id: str, displayname: str | None = None) -> str:
        self.users.setdefault(user_id, {"password": secrets.token_hex(8), "displayname": displayname})
        return user_id

    def token_for(self, user_id: str, device: str = "DEV") -> str:
        token = f"syt_{secrets.token_urlsafe(15)}_fake"
        self.tokens[token] = (self.user(user_id), device)
        return token

    def room(self, members: list[str], *, name: str | None = None, encrypted: bool = False) -> str:
        """A room its members have joined (the first made it), as if long ago."""
        room_id = f"!{secrets.token_urlsafe(9)}:{SERVER}"
        self.rooms[room_id] = Room(room_id)
        creator = self.user(members[0])
        self._event(room_id, creator, "m.room.create", {"creator": creator, "room_version": "10"}, state_key="")
        for member in members:
            self._member(room_id, self.user(member), "join")
        if name:
            self._event(room_id, creator, "m.room.name", {"name": name}, state_key="")
        if encrypted:
            self._event(room_id, creator, "m.room.encryption", {"algorithm": "m.megolm.v1.aes-sha2"}, state_key="")
        return room_id

    def dm(self, user: str) -> str:
        return self.room([user, BOT])

    def invite(self, inviter: str, *, direct: bool = True, members: list[str] | None = None,
               room_id: str | None = None) -> str:
        """``inviter`` makes a room (or takes ``room_id``) and invites the bot (a DM with ``direct``)."""
        room_id = room_id or self.room([inviter, *(members or [])])
        self._member(room_id, BOT, "invite", by=inviter, is_direct=direct)
        return room_id

    def user_message(self, room_id: str, sender: str, body: str, *, thread: str | None = None,
                     reply_to: str | None = None, mention: bool = False, msgtype: str = "m.text",
                     **content: Any) -> dict[str, Any]:
        """What ``sender`` sends; ``mention``: a pill for the bot first (as Element makes one)."""
        payload: dict[str, Any] = {"msgtype": msgtype, "body": body, **content}
        if mention:
            payload["body"] = f"{BOT_NAME}: {body}"
            payload["format"] = "org.matrix.custom.html"
            payload["formatted_body"] = f'<a href="https://matrix.to/#/{BOT}">{BOT_NAME}</a>: {body}'
            payload["m.mentions"] = {"user_ids": [BOT]}
        if thread:
            payload["m.relates_to"] = {"rel_type": "m.thread", "event_id": thread, "is_falling_back": reply_to is None,
                                       "m.in_reply_to": {"event_id": reply_to or thread}}
        elif reply_to:
            payload["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
        return self._event(room_id, sender, "m.room.message", payload)

    def user_edit(self, room_id: str, sender: str, target: str, body: str) -> dict[str, Any]:
        """``sender`` edits their event ``target`` to read ``body`` (an ``m.replace``, with the fallback body
        clients put in for those that do not know edits)."""
        return self._event(room_id, sender, "m.room.message", {
            "msgtype": "m.text", "body": f"* {body}", "m.new_content": {"msgtype": "m.text", "body": body},
            "m.relates_to": {"rel_type": "m.replace", "event_id": target}})

    def react(self, room_id: str, sender: str, target: str, key: str) -> dict[str, Any]:
        content = {"m.relates_to": {"rel_type": "m.annotation", "event_id": target, "key": key}}
        return self._event(room_id, sender, "m.reaction", content)

    def encrypted_message(self, room_id: str, sender: str) -> dict[str, Any]:
        content = {"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "AwgAEnB...", "sender_key": "x" * 43,
                   "device_id": "ALICEDEV", "session_id": "s" * 43}
        return self._event(room_id, sender, "m.room.encrypted", content)

    def add_media(self, content: bytes, content_type: str = "application/octet-stream") -> str:
        media_id = secrets.token_urlsafe(12)
        self.media[media_id] = (content_type, content)
        return f"mxc://{SERVER}/{media_id}"

    def file_message(self, room_id: str, sender: str, name: str, data: bytes, caption: str = "",
                     msgtype: str = "m.file", mime: str = "text/plain") -> dict[str, Any]:
        mxc = self.add_media(data, mime)
        return self.user_message(room_id, sender, caption or name, msgtype=msgtype, filename=name, url=mxc,
                                 info={"mimetype": mime, "size": len(data)})

    # ---- faults ----------------------------------------------------------------------------------

    def fail(self, endpoint: str, kind: str, times: int = 1, retry_after_ms: int = 1000) -> None:
        self.faults.append(Fault(endpoint, kind, times, retry_after_ms))

    def flood(self, room_id: str, seconds: float) -> None:
        self.floods[room_id] = time.monotonic() + seconds

    def _fault(self, request: web.Request, endpoint: str, room: str | None = None) -> web.StreamResponse | None:
        for fault in self.faults:
            if fault.endpoint == endpoint and fault.times > 0:
                fault.times -= 1
                return self._serve_fault(request, fault.kind, fault.retry_after_ms)
        until = self.floods.get(room or "")
        if endpoint == "send" and until is not None:
            left = until - time.monotonic()
            if left > 0:
                return self._serve_fault(request, "429", max(1, int(left * 1000)))
            del self.floods[room or ""]
        return None

    @staticmethod
    def _serve_fault(request: web.Request, kind: str, retry_after_ms: int) -> web.StreamResponse:
        if kind == "drop":
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        if kind == "429":
            return web.json_response({"errcode": "M_LIMIT_EXCEEDED", "error": "Too Many Requests",
                                      "retry_after_ms": retry_after_ms}, status=429)
        return web.json_response({"errcode": "M_UNKNOWN", "error": "Internal server error"}, status=500)

    # ---- what the bot did ------------------------------------------------------------------------

    def sent_to(self, room_id: str) -> list[Sent]:
        return [m for m in self.sent if m.room_id == room_id]

    def texts(self, room_id: str | None = None) -> list[str]:
        return [m.text for m in self.sent if room_id is None or m.room_id == room_id]

    def joined(self, room_id: str, user: str = BOT) -> bool:
        return self.rooms[room_id].members.get(user) == "join"

    # ---- helpers ---------------------------------------------------------------------------------

    @staticmethod
    def _err(errcode: str, error: str, status: int) -> web.Response:
        return web.json_response({"errcode": errcode, "error": error}, status=status)

    def _who(self, request: web.Request) -> tuple[str, str, str] | None:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        found = self.tokens.get(token)
        return (found[0], found[1], token) if found else None

    def _auth(self, request: web.Request) -> tuple[str, str, str]:
        who = self._who(request)
        if who is None:
            raise web.HTTPUnauthorized(text=json.dumps({"errcode": "M_UNKNOWN_TOKEN", "error": "Invalid access token"}),
                                       content_type="application/json")
        return who

    def _room(self, request: web.Request, user: str) -> Room:
        room = self.rooms.get(request.match_info["room"])
        if room is None or room.members.get(user) != "join":
            raise web.HTTPForbidden(text=json.dumps({"errcode": "M_FORBIDDEN", "error": "not in the room"}),
                                    content_type="application/json")
        return room

    # ---- /sync -----------------------------------------------------------------------------------

    async def _versions(self, request: web.Request) -> web.Response:
        return web.json_response({"versions": ["v1.1", "v1.5", "v1.11"], "unstable_features": {}})

    async def _sync(self, request: web.Request) -> web.StreamResponse:
        user, device, _token = self._auth(request)
        if (fault := self._fault(request, "sync")) is not None:
            return fault
        q = request.query
        since = int(q["since"][1:]) if q.get("since", "").startswith("s") else None
        sync_filter = json.loads(q.get("filter") or "{}")
        timeline = (sync_filter.get("room") or {}).get("timeline") or {}
        limit = int(timeline.get("limit") or 10)
        hidden = frozenset(timeline.get("not_senders") or ())
        full_state = q.get("full_state") == "true"
        if user == BOT:
            self.sync_calls.append({"since": since, "full_state": full_state, "timeout": q.get("timeout"),
                                    "at": time.monotonic()})
            if since is not None:
                now = time.monotonic()
                for event_id in [e for e in self.handed_out if e not in self.confirmed_at]:
                    if self.events[event_id][1] <= since:
                        self.confirmed_at[event_id] = now
        deadline = time.monotonic() + int(q.get("timeout") or 0) / 1000
        while True:
            body, handed = self._sync_body(user, since, limit, full_state, hidden)
            left = deadline - time.monotonic()
            if handed or full_state or since is None or left <= 0 or self._closing or self.waiting_for(user, device):
                break
            async with self._cond:
                try:
                    await asyncio.wait_for(self._cond.wait(), left)
                except TimeoutError:
                    pass
        if user == BOT:
            now = time.monotonic()
            for event_id in handed:
                self.handed_out.setdefault(event_id, now)
        return web.json_response({**body, **self.device_part(user, device, since)})

    def _sync_body(self, user: str, since: int | None, limit: int, full_state: bool, hidden: frozenset[str]
                   ) -> tuple[dict[str, Any], list[str]]:
        join: dict[str, Any] = {}
        invite: dict[str, Any] = {}
        handed: list[str] = []
        for room in self.rooms.values():
            membership = room.members.get(user)
            if membership == "invite":
                event = room.state[("m.room.member", user)]
                if since is None or self.events[event["event_id"]][1] > since:
                    stripped = [{k: e[k] for k in ("type", "state_key", "sender", "content")}
                                for key, e in room.state.items() if key[0] in ("m.room.create", "m.room.name")]
                    invite[room.room_id] = {"invite_state": {"events": [*stripped, {
                        k: event[k] for k in ("type", "state_key", "sender", "content")}]}}
                    handed.append(event["event_id"])
                continue
            if membership != "join":
                continue
            new = [(p, e) for p, e in room.timeline if (since is None or p > since) and e["sender"] not in hidden]
            newly_joined = since is not None and room.joined_at.get(user, 0) > since
            if not new and not full_state and not newly_joined:
                continue
            shown = new[-limit:]
            entry: dict[str, Any] = {
                "timeline": {"events": [e for _, e in shown], "limited": len(new) > len(shown),
                             "prev_batch": f"s{shown[0][0] - 1}" if shown else f"s{self.position}"},
                "state": {"events": []}, "ephemeral": {"events": []}, "account_data": {"events": []},
                "summary": room.counts(), "unread_notifications": {"notification_count": 0, "highlight_count": 0}}
            if since is None or full_state or newly_joined:
                first = shown[0][0] if shown else self.position + 1
                entry["state"]["events"] = [e for e in room.state.values() if self.events[e["event_id"]][1] < first]
            join[room.room_id] = entry
            handed += [e["event_id"] for _, e in shown]
        body = {"next_batch": f"s{self.position}", "rooms": {"join": join, "invite": invite, "leave": {}},
                "presence": {"events": []}, "account_data": {"events": []}}
        return body, handed

    async def _messages(self, request: web.Request) -> web.Response:
        user, _device, _token = self._auth(request)
        room = self._room(request, user)
        self.read_back.append(room.room_id)
        q = request.query
        start = int(q.get("from", f"s{self.position}")[1:])
        stop = int(q["to"][1:]) if q.get("to", "").startswith("s") else 0
        limit = int(q.get("limit") or 10)
        chunk = [(p, e) for p, e in reversed(room.timeline) if stop < p <= start][:limit]
        body: dict[str, Any] = {"start": f"s{start}", "chunk": [e for _, e in chunk]}
        if chunk:
            body["end"] = f"s{chunk[-1][0] - 1}"
        return web.json_response(body)

    # ---- accounts ----------------------------------------------------------------------------------

    async def _whoami(self, request: web.Request) -> web.Response:
        user, device, _token = self._auth(request)
        return web.json_response({"user_id": user, "device_id": device, "is_guest": False})

    async def _login(self, request: web.Request) -> web.Response:
        body = await request.json()
        ident = body.get("identifier") or {}
        user = ident.get("user") or body.get("user") or ""
        if not user.startswith("@"):
            user = f"@{user}:{SERVER}"
        if body.get("type") != "m.login.password" or self.users.get(user, {}).get("password") != body.get("password"):
            return self._err("M_FORBIDDEN", "Invalid username or password", 403)
        device = body.get("device_id") or secrets.token_hex(5).upper()
        token = f"syt_{secrets.token_urlsafe(15)}_fake"
        self.tokens[token] = (user, device)
        return web.json_response({"user_id": user, "access_token": token, "device_id": device,
                                  "home_server": SERVER})

    async def _logout(self, request: web.Request) -> web.Response:
        _user, _device, token = self._auth(request)
        self.tokens.pop(token, None)
        return web.json_response({})

    async def _displayname(self, request: web.Request) -> web.Response:
        found = self.users.get(request.match_info["user"])
        if found is None:
            return self._err("M_NOT_FOUND", "Profile not found", 404)
        return web.json_response({"displayname": found.get("displayname")} if found.get("displayname") else {})

    # ---- rooms -----------------------------------------------------------------------------------

    async def _send(self, request: web.Request) -> web.StreamResponse:
        user, _device, token = self._auth(request)
        room = self._room(request, user)
        txn, event_type = request.match_info["txn"], request.match_info["type"]
        if (token, txn) in self.txns:  # the same transaction again: the event it made, nothing new
            return web.json_response({"event_id": self.txns[(token, txn)]})
        if (fault := self._fault(request, "send", room.room_id)) is not None:
            return fault
        content = await request.json()
        if event_size({"type": event_type, "content": content, "room_id": room.room_id, "sender": user}) > EVENT_MAX:
            return self._err("M_TOO_LARGE", "event too large", 413)
        event = self._event(room.room_id, user, event_type, content, txn=txn)
        self.txns[(token, txn)] = event["event_id"]
        if user == BOT:
            self._bot_event(room.room_id, event, txn)
        return web.json_response({"event_id": event["event_id"]})

    def _bot_event(self, room_id: str, event: dict[str, Any], txn: str) -> None:
        content = event["content"]
        rel = content.get("m.relates_to") or {}
        if event["type"] == "m.reaction":
            self.bot_reactions[event["event_id"]] = (rel.get("event_id"), rel.get("key"))
        elif event["type"] == "m.room.message" and rel.get("rel_type") == "m.replace":
            target = self.by_id.get(rel.get("event_id"))
            if target is not None:
                target.content = dict(content.get("m.new_content") or {})
                target.edits += 1
        elif event["type"] == "m.room.message":
            sent = Sent(event["event_id"], room_id, dict(content), time.monotonic(), txn=txn, first=dict(content))
            self.sent.append(sent)
            self.by_id[sent.event_id] = sent
            if self.on_send is not None:
                self.on_send(sent)
        self._changed.set()

    async def _redact(self, request: web.Request) -> web.Response:
        user, _device, token = self._auth(request)
        room = self._room(request, user)
        target, txn = request.match_info["event"], request.match_info["txn"]
        if (token, txn) in self.txns:
            return web.json_response({"event_id": self.txns[(token, txn)]})
        event = self._event(room.room_id, user, "m.room.redaction", {"redacts": target})
        event["redacts"] = target
        self.txns[(token, txn)] = event["event_id"]
        self.redacted.add(target)
        self.bot_reactions.pop(target, None)
        return web.json_response({"event_id": event["event_id"]})

    async def _join(self, request: web.Request) -> web.Response:
        user, _device, _token = self._auth(request)
        room = self.rooms.get(request.match_info["room"])
        if room is None or room.members.get(user) not in ("invite", "join"):
            return self._err("M_FORBIDDEN", "You are not invited to this room.", 403)
        if room.members.get(user) != "join":
            self._member(room.room_id, user, "join")
        return web.json_response({"room_id": room.room_id})

    async def _leave(self, request: web.Request) -> web.Response:
        user, _device, _token = self._auth(request)
        room = self.rooms.get(request.match_info["room"])
        if room is None:
            return self._err("M_NOT_FOUND", "Unknown room", 404)
        self._member(room.room_id, user, "leave")
        if user == BOT:
            self.left.append(room.room_id)
        return web.json_response({})

    async def _get_event(self, request: web.Request) -> web.Response:
        user, _device, _token = self._auth(request)
        room = self._room(request, user)
        found = self.events.get(request.match_info["event"])
        if found is None or found[0] != room.room_id:
            return self._err("M_NOT_FOUND", "Event not found", 404)
        event = {**found[2], "room_id": room.room_id}
        replies = [e for _, e in room.timeline if (e["content"].get("m.relates_to") or {}).get("rel_type") == "m.thread"
                   and e["content"]["m.relates_to"].get("event_id") == event["event_id"]]
        if replies:  # the bundled aggregation a thread's root comes with
            event["unsigned"] = {**event["unsigned"], "m.relations": {"m.thread": {
                "count": len(replies), "latest_event": replies[-1],
                "current_user_participated": any(e["sender"] == user for e in replies)}}}
        return web.json_response(event)

    async def _joined_members(self, request: web.Request) -> web.Response:
        user, _device, _token = self._auth(request)
        room = self._room(request, user)
        return web.json_response({"joined": {u: {"display_name": self.users.get(u, {}).get("displayname")}
                                             for u, m in room.members.items() if m == "join"}})

    # ---- the content repository --------------------------------------------------------------------

    async def _upload(self, request: web.Request) -> web.StreamResponse:
        self._auth(request)
        if (fault := self._fault(request, "upload")) is not None:
            return fault
        data = await request.read()
        if len(data) > self.upload_limit:
            return self._err("M_TOO_LARGE", "Cannot upload files larger than the limit", 413)
        return web.json_response({"content_uri": self.add_media(data, request.content_type)})

    async def _media_config(self, request: web.Request) -> web.Response:
        self._auth(request)
        return web.json_response({"m.upload.size": self.upload_limit})

    async def _download(self, request: web.Request) -> web.StreamResponse:
        self._auth(request)  # authenticated media: a download without the token is refused
        await asyncio.sleep(self.file_delay)
        found = self.media.get(request.match_info["media"]) if request.match_info["server"] == SERVER else None
        if found is None:
            return self._err("M_NOT_FOUND", "Not found", 404)
        return web.Response(body=found[1], content_type=found[0])


class FakeMatrixThread(ServedInThread):
    """A FakeMatrix served from a background thread with its own loop (benchmarks, ``herald run`` tests)."""

    thread_name = "fake-matrix"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(FakeMatrix(**kwargs))
