"""A fake Slack (aiohttp) speaking the real wire formats, for tests and benchmarks: the Web API, Socket Mode's
websocket, the Events API's signed POSTs, response_url and file downloads.

The bot under test points slack_sdk at it with ``platforms.slack.api_base_url`` (``fake.api_url``). Tests
make users act and read what the bot did:

    fake = FakeSlack(); await fake.start()
    body = fake.message("D0ALICE", "U0ALICE", "hi")                  # an event_callback body
    await fake.deliver_socket("events_api", body)                    # Socket Mode: an envelope
    status = await fake.post_event(url, body)                        # HTTP mode: a signed POST
    await fake.wait_sent(lambda sent: any(m.text == "echo: hi" for m in sent))

Socket Mode: ``apps.connections.open`` (app token) hands out ``ws://.../link``; a connection gets ``hello``;
each envelope's ack (``{"envelope_id": ...}``) is recorded in ``acked_at`` against ``handed_out``
(``time.monotonic()``), so tests can hold the bot to Slack's 3 s. ``disconnect()`` sends Slack's
``disconnect`` message (the client must reconnect), ``drop()`` closes the sockets without a word.

Faults on demand: ``fail(method, kind, channel=..., times=...)`` with kind "429" (HTTP 429 + Retry-After),
"500", "drop" (connection closed before anything was done), "reset" (the call is carried out — a message
posted — and then the connection is reset instead of answered) or any Slack error code ("channel_not_found",
"invalid_blocks" ...);
``flood(channel, seconds)`` makes every post to that channel answer 429 until the window ends;
``delays[method] = seconds`` makes a method slow, ``file_delay`` every file download.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import secrets
import socket
import struct
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import ClientSession, WSMsgType, web

from tests.fakes.base import PlatformFake
from tests.fakes.loop_thread import ServedInThread
from tests.fakes.slack_files import SlackFiles

TEAM = "T0HERALD"
BOT_USER = "U0HERALDBOT"
BOT_ID = "B0HERALD"
APP_ID = "A0HERALD"
SECTION_MAX = 3000  # a section block's text
TEXT_MAX = 40_000  # chat.postMessage's text


def reset(request: web.Request) -> None:
    """Abort the request's connection with a TCP reset (no answer, no orderly close)."""
    transport = request.transport
    assert transport is not None
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@dataclass
class SlackMessage:
    ts: str
    channel: str
    text: str
    user: str = BOT_USER
    thread_ts: str | None = None
    blocks: list[dict[str, Any]] = field(default_factory=list)
    ephemeral_to: str | None = None  # shown only to this user (chat.postEphemeral, response_url)
    edits: int = 0
    monotonic: float = 0.0
    files: list[dict[str, Any]] = field(default_factory=list)

    @property
    def buttons(self) -> list[dict[str, Any]]:
        return [e for b in self.blocks if b.get("type") == "actions" for e in b.get("elements", [])
                if e.get("type") == "button"]

    def as_event_message(self) -> dict[str, Any]:
        msg: dict[str, Any] = {"type": "message", "ts": self.ts, "text": self.text, "user": self.user}
        if self.user == BOT_USER:
            msg["bot_id"] = BOT_ID
        if self.thread_ts:
            msg["thread_ts"] = self.thread_ts
        if self.blocks:
            msg["blocks"] = self.blocks
        return msg


@dataclass
class Fault:
    method: str
    kind: str
    channel: str | None
    times: int
    retry_after: int = 1


class FakeSlack(SlackFiles, PlatformFake[SlackMessage]):
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host, port)
        self.bot_token = f"xoxb-{secrets.token_hex(8)}"
        self.app_token = f"xapp-{secrets.token_hex(8)}"
        self.signing_secret = secrets.token_hex(16)
        self._ts = itertools.count(1)
        # self.sent (PlatformFake's): the bot's messages, ephemeral ones included
        self.by_ts: dict[tuple[str, str], SlackMessage] = {}
        self.history: dict[tuple[str, str], list[SlackMessage]] = {}  # (channel, thread root) -> messages
        self.reactions: set[tuple[str, str, str]] = set()  # (channel, ts, name) standing now
        self.reaction_log: list[tuple[str, str, str, str, float]] = []  # (add|remove, channel, ts, name, when)
        self.channels: dict[str, dict[str, Any]] = {}
        self.users: dict[str, dict[str, Any]] = {}
        self.files: dict[str, tuple[str, bytes]] = {}
        self.file_delay = 0.0  # seconds a file download takes
        self.delays: dict[str, float] = {}  # Web API method -> seconds it takes to answer
        self.calls: list[str] = []
        self.faults: list[Fault] = []
        self.floods: dict[str, float] = {}
        self.responses: dict[str, dict[str, Any]] = {}  # response_url id -> {channel, user, thread_ts}
        self.sockets: list[web.WebSocketResponse] = []
        self.connections_opened = 0
        self.hello_sent = 0
        self.handed_out: dict[str, float] = {}  # envelope_id -> sent
        self.acked_at: dict[str, float] = {}  # envelope_id -> its ack
        self.ack_payloads: dict[str, Any] = {}
        self.on_send: Callable[[SlackMessage], None] | None = None
        self._connected = asyncio.Event()
        self.http: ClientSession | None = None
        self._files_init()

    # ---- lifecycle -------------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        """What goes into ``platforms.slack.api_base_url`` (slack_sdk appends the method name)."""
        return f"{self.root}/api/"

    def routes(self) -> list[web.AbstractRouteDef]:
        return [web.post("/api/{method}", self._api), web.get("/api/{method}", self._api),
                web.get("/link", self._link), web.get("/files/{file_id}/{name}", self._file),
                web.post("/response/{rid}", self._response_url), *self.upload_routes()]

    async def start(self) -> str:
        await self.serve()
        self.http = ClientSession()
        return self.api_url

    async def stop(self) -> None:
        await self.drop()
        if self.http is not None:
            await self.http.close()
        await self.close()

    # ---- what users do ---------------------------------------------------------------------------

    def next_ts(self) -> str:
        return f"1700000000.{next(self._ts):06d}"

    def channel_type(self, channel: str) -> str:
        info = self.channels.get(channel)
        if info is not None:
            return info["type"]
        return "im" if channel.startswith("D") else "channel"

    def add_channel(self, channel: str, kind: str = "channel") -> None:
        """kind: im | mpim | channel | group (a private channel)."""
        self.channels[channel] = {"type": kind}

    def add_file(self, content: bytes, name: str = "notes.txt") -> dict[str, Any]:
        file_id = f"F{secrets.token_hex(5).upper()}"
        self.files[file_id] = (name, content)
        return {"id": file_id, "name": name, "size": len(content), "mimetype": "text/plain",
                "url_private_download": f"{self.root}/files/{file_id}/{name}"}

    def _envelope_body(self, event: dict[str, Any]) -> dict[str, Any]:
        return {"token": "verification-token", "team_id": TEAM, "api_app_id": APP_ID, "event": event,
                "type": "event_callback", "event_id": f"Ev{secrets.token_hex(6).upper()}",
                "event_time": int(time.time()), "is_ext_shared_channel": False,
                "authorizations": [{"enterprise_id": None, "team_id": TEAM, "user_id": BOT_USER, "is_bot": True}]}

    def message(self, channel: str, user: str, text: str, *, thread_ts: str | None = None,
                files: list[dict[str, Any]] | None = None, kind: str = "message") -> dict[str, Any]:
        """A user's message as an event_callback body (``kind`` "app_mention" for the mention event)."""
        ts = self.next_ts()
        record = SlackMessage(ts, channel, text, user=user, thread_ts=thread_ts, monotonic=time.monotonic(),
                              files=files or [])
        self.history.setdefault((channel, thread_ts or ts), []).append(record)
        event: dict[str, Any] = {"type": kind, "channel": channel, "user": user, "text": text, "ts": ts,
                                 "event_ts": ts, "team": TEAM,
                                 "user_profile": {"display_name": f"{user.lower()[2:]}", "real_name": user}}
        if kind == "message":
            event["channel_type"] = self.channel_type(channel)
        if thread_ts:
            event["thread_ts"] = thread_ts
        if files:
            event["files"], event["subtype"] = files, "file_share"
        return self._envelope_body(event)

    def edit(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        """The author edits the message of ``body`` (as ``message`` returned it) to ``text``: a ``message_changed``
        event, as Slack sends it (hidden, the message as it reads now with its ``edited`` ts)."""
        old = body["event"]
        ts = self.next_ts()
        now = {k: v for k, v in old.items() if k not in ("channel", "channel_type", "event_ts", "subtype", "files")}
        now.update(text=text, edited={"user": old["user"], "ts": ts})
        event: dict[str, Any] = {"type": "message", "subtype": "message_changed", "hidden": True,
                                 "channel": old["channel"], "channel_type": self.channel_type(old["channel"]),
                                 "message": now, "previous_message": {k: v for k, v in old.items()
                                                                      if k not in ("channel", "channel_type")},
                                 "ts": ts, "event_ts": ts}
        return self._envelope_body(event)

    def block_actions(self, user: str, message: SlackMessage, value: str) -> dict[str, Any]:
        """A press on the button of ``message`` whose value is ``value``."""
        button = next(b for b in message.buttons if b.get("value") == value)
        rid = secrets.token_hex(6)
        self.responses[rid] = {"channel": message.channel, "user": user, "thread_ts": message.thread_ts}
        container = {"type": "message", "message_ts": message.ts, "channel_id": message.channel,
                     "is_ephemeral": False}
        if message.thread_ts:
            container["thread_ts"] = message.thread_ts
        return {"type": "block_actions", "user": {"id": user, "username": user.lower(), "name": user.lower(),
                                                  "team_id": TEAM},
                "api_app_id": APP_ID, "token": "verification-token", "container": container,
                "trigger_id": secrets.token_hex(8), "team": {"id": TEAM, "domain": "herald"},
                "channel": {"id": message.channel, "name": message.channel.lower()},
                "message": message.as_event_message(), "response_url": f"{self.root}/response/{rid}",
                "actions": [{"action_id": button["action_id"], "block_id": "b", "value": value, "type": "button",
                             "text": button["text"], "action_ts": str(time.time())}]}

    def slash_command(self, channel: str, user: str, text: str, command: str = "/herald") -> dict[str, str]:
        rid = secrets.token_hex(6)
        self.responses[rid] = {"channel": channel, "user": user, "thread_ts": None}
        name = "directmessage" if self.channel_type(channel) == "im" else channel.lower()
        return {"token": "verification-token", "team_id": TEAM, "team_domain": "herald", "channel_id": channel,
                "channel_name": name, "user_id": user, "user_name": user.lower(), "command": command, "text": text,
                "api_app_id": APP_ID, "is_enterprise_install": "false",
                "response_url": f"{self.root}/response/{rid}", "trigger_id": secrets.token_hex(8)}

    # ---- delivering: Socket Mode -------------------------------------------------------------------

    async def wait_connected(self, timeout: float = 10.0) -> None:
        await asyncio.wait_for(self._connected.wait(), timeout)

    async def deliver_socket(self, kind: str, payload: dict[str, Any], retry_attempt: int = 0) -> str:
        """Send an envelope (events_api | interactive | slash_commands) on the newest connection."""
        await self.wait_connected()
        envelope_id = secrets.token_hex(8)
        envelope = {"envelope_id": envelope_id, "type": kind, "payload": payload,
                    "accepts_response_payload": kind != "events_api", "retry_attempt": retry_attempt,
                    "retry_reason": "timeout" if retry_attempt else ""}
        self.handed_out[envelope_id] = time.monotonic()
        await self.sockets[-1].send_str(json.dumps(envelope))
        return envelope_id

    async def disconnect(self, reason: str = "refresh_requested") -> None:
        """Slack's notice that this connection is going away: the client should open a new one."""
        for ws in list(self.sockets):
            await ws.send_str(json.dumps({"type": "disconnect", "reason": reason,
                                          "debug_info": {"host": "fake"}}))

    async def drop(self) -> None:
        """Every connection closed at once (a network loss, a Slack restart)."""
        self._connected.clear()
        for ws in list(self.sockets):
            await ws.close()
        self.sockets.clear()

    async def _link(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self.sockets.append(ws)
        await ws.send_str(json.dumps({"type": "hello", "num_connections": len(self.sockets),
                                      "connection_info": {"app_id": APP_ID}, "debug_info": {"host": "fake"}}))
        self.hello_sent += 1
        self._connected.set()
        try:
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                data = json.loads(msg.data)
                if "envelope_id" in data:
                    self.acked_at.setdefault(data["envelope_id"], time.monotonic())
                    self.ack_payloads[data["envelope_id"]] = data.get("payload")
                    self._changed.set()
        finally:
            if ws in self.sockets:
                self.sockets.remove(ws)
            if not self.sockets:
                self._connected.clear()
        return ws

    # ---- delivering: the Events API over HTTP ------------------------------------------------------

    def sign(self, body: str, timestamp: int | None = None, secret: str | None = None) -> dict[str, str]:
        ts = str(int(time.time()) if timestamp is None else timestamp)
        base = f"v0:{ts}:{body}".encode()
        digest = hmac.new((secret or self.signing_secret).encode(), base, hashlib.sha256).hexdigest()
        return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}

    async def post(self, url: str, kind: str, payload: dict[str, Any], *, retry_num: int | None = None,
                   timestamp: int | None = None, secret: str | None = None) -> tuple[int, str, float]:
        """POST as Slack does: events as JSON, interactivity as ``payload=<json>``, slash commands as a form.

        Returns (status, body, seconds to the answer)."""
        if kind == "events_api":
            body, ctype = json.dumps(payload), "application/json"
        elif kind == "interactive":
            body, ctype = urllib.parse.urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded"
        else:
            body, ctype = urllib.parse.urlencode(payload), "application/x-www-form-urlencoded"
        headers = {"Content-Type": ctype, **self.sign(body, timestamp, secret)}
        if retry_num:
            headers.update({"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": "http_timeout"})
        assert self.http is not None
        started = time.monotonic()
        async with self.http.post(url, data=body.encode(), headers=headers) as resp:
            text = await resp.text()
            return resp.status, text, time.monotonic() - started

    # ---- faults ----------------------------------------------------------------------------------

    def fail(self, method: str, kind: str, channel: str | None = None, times: int = 1, retry_after: int = 1) -> None:
        self.faults.append(Fault(method, kind, channel, times, retry_after))

    def flood(self, channel: str, seconds: float) -> None:
        self.floods[channel] = time.monotonic() + seconds

    def _fault_for(self, method: str, channel: Any) -> Fault | None:
        for fault in self.faults:
            if fault.method == method and fault.channel in (None, channel) and fault.times > 0:
                fault.times -= 1
                return fault
        return None

    # ---- what the bot did ------------------------------------------------------------------------

    def sent_to(self, channel: str) -> list[SlackMessage]:
        return [m for m in self.sent if m.channel == channel]

    def texts(self, channel: str | None = None) -> list[str]:
        return [m.text for m in self.sent if channel is None or m.channel == channel]

    # ---- the Web API -----------------------------------------------------------------------------

    @staticmethod
    def _ok(**result: Any) -> web.Response:
        return web.json_response({"ok": True, **result})

    @staticmethod
    def _err(error: str, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
        return web.json_response({"ok": False, "error": error}, status=status, headers=headers)

    async def _params(self, request: web.Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query)
        if request.can_read_body:
            if request.content_type == "application/json":
                params.update(await request.json() or {})
            else:
                for key, value in (await request.post()).items():
                    params[key] = json.loads(value) if key in ("blocks", "attachments") and isinstance(value, str) \
                        else value
        return params

    async def _api(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        expected = self.app_token if method == "apps.connections.open" else self.bot_token
        if token != expected:
            return self._err("invalid_auth" if token else "not_authed")
        p = await self._params(request)
        self.calls.append(method)
        if self.delays.get(method):
            await asyncio.sleep(self.delays[method])
        channel = p.get("channel")
        fault = self._fault_for(method, channel)
        if fault is None and method in ("chat.postMessage", "chat.update") and channel in self.floods:
            left = self.floods[channel] - time.monotonic()
            if left > 0:
                fault = Fault(method, "429", channel, 1, max(1, round(left)))
            else:
                del self.floods[channel]
        if fault is not None:
            if fault.kind == "reset":
                handler = getattr(self, "_m_" + method.replace(".", "_"), None)
                if handler is not None:
                    await handler(p)
                reset(request)
                return web.Response()
            if fault.kind == "drop":
                assert request.transport is not None
                request.transport.close()
                return web.Response()
            if fault.kind == "429":
                return self._err("ratelimited", 429, {"Retry-After": str(fault.retry_after)})
            if fault.kind == "500":
                return web.Response(status=500, text="internal error")
            return self._err(fault.kind)
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return self._err("unknown_method")
        return await handler(p)

    async def _m_auth_test(self, p: dict[str, Any]) -> web.Response:
        return self._ok(url="https://herald.slack.com/", team="Herald", user="herald", team_id=TEAM,
                        user_id=BOT_USER, bot_id=BOT_ID, is_enterprise_install=False)

    async def _m_apps_connections_open(self, p: dict[str, Any]) -> web.Response:
        self.connections_opened += 1
        return self._ok(url=f"ws://{self.host}:{self.port}/link?ticket={secrets.token_hex(4)}")

    def _check_blocks(self, blocks: Any) -> str | None:
        if not isinstance(blocks, list):
            return "invalid_blocks_format"
        for block in blocks:
            if block.get("type") == "section":
                text = (block.get("text") or {}).get("text", "")
                if not text or len(text) > SECTION_MAX:
                    return "invalid_blocks"
            elif block.get("type") == "actions":
                elements = block.get("elements") or []
                ids = [e.get("action_id") for e in elements]
                if not 1 <= len(elements) <= 25 or len(set(ids)) != len(ids):
                    return "invalid_blocks"
                for e in elements:
                    label = (e.get("text") or {}).get("text", "")
                    if not label or len(label) > 75 or len(e.get("value", "")) > 2000 or \
                            e.get("style") not in (None, "primary", "danger"):
                        return "invalid_blocks"
            else:
                return "invalid_blocks"
        return None

    def _check(self, p: dict[str, Any]) -> str | None:
        text = p.get("text")
        blocks = p.get("blocks")
        if blocks is not None:
            problem = self._check_blocks(blocks)
            if problem:
                return problem
        if not blocks and (not isinstance(text, str) or not text.strip()):
            return "no_text"
        if isinstance(text, str) and len(text) > TEXT_MAX:
            return "msg_too_long"
        return None

    def _record(self, msg: SlackMessage) -> None:
        self.sent.append(msg)
        self.by_ts[(msg.channel, msg.ts)] = msg
        if msg.ephemeral_to is None:
            self.history.setdefault((msg.channel, msg.thread_ts or msg.ts), []).append(msg)
        if self.on_send is not None:
            self.on_send(msg)
        self._changed.set()

    async def _m_chat_postMessage(self, p: dict[str, Any]) -> web.Response:
        channel = p.get("channel")
        if not channel or channel.startswith("C0MISSING"):
            return self._err("channel_not_found")
        problem = self._check(p)
        if problem:
            return self._err(problem)
        msg = SlackMessage(self.next_ts(), channel, p.get("text") or "", thread_ts=p.get("thread_ts") or None,
                           blocks=p.get("blocks") or [], monotonic=time.monotonic())
        self._record(msg)
        return self._ok(channel=channel, ts=msg.ts, message=msg.as_event_message())

    async def _m_chat_postEphemeral(self, p: dict[str, Any]) -> web.Response:
        problem = self._check(p)
        if problem:
            return self._err(problem)
        if not p.get("user"):
            return self._err("user_not_in_channel")
        msg = SlackMessage(self.next_ts(), p["channel"], p.get("text") or "", thread_ts=p.get("thread_ts") or None,
                           blocks=p.get("blocks") or [], ephemeral_to=p["user"], monotonic=time.monotonic())
        self._record(msg)
        return self._ok(message_ts=msg.ts)

    async def _m_chat_update(self, p: dict[str, Any]) -> web.Response:
        msg = self.by_ts.get((p.get("channel", ""), p.get("ts", "")))
        if msg is None or msg.ephemeral_to:
            return self._err("message_not_found")
        problem = self._check(p)
        if problem:
            return self._err(problem)
        if "text" in p:
            msg.text = p["text"]
        if "blocks" in p:
            msg.blocks = p["blocks"] or []
        msg.edits += 1
        self._changed.set()
        return self._ok(channel=msg.channel, ts=msg.ts, text=msg.text)

    async def _m_reactions_add(self, p: dict[str, Any]) -> web.Response:
        key = (p.get("channel", ""), p.get("timestamp", ""), p.get("name", ""))
        if key in self.reactions:
            return self._err("already_reacted")
        self.reactions.add(key)
        self.reaction_log.append(("add", *key, time.monotonic()))
        self._changed.set()
        return self._ok()

    async def _m_reactions_remove(self, p: dict[str, Any]) -> web.Response:
        key = (p.get("channel", ""), p.get("timestamp", ""), p.get("name", ""))
        if key not in self.reactions:
            return self._err("no_reaction")
        self.reactions.discard(key)
        self.reaction_log.append(("remove", *key, time.monotonic()))
        self._changed.set()
        return self._ok()

    async def _m_conversations_info(self, p: dict[str, Any]) -> web.Response:
        channel = p.get("channel", "")
        kind = self.channel_type(channel)
        return self._ok(channel={"id": channel, "is_im": kind == "im", "is_mpim": kind == "mpim",
                                 "is_channel": kind == "channel", "is_group": kind == "group",
                                 "is_private": kind != "channel"})

    async def _m_conversations_replies(self, p: dict[str, Any]) -> web.Response:
        thread = self.history.get((p.get("channel", ""), p.get("ts", "")))
        if thread is None:
            return self._err("thread_not_found")
        return self._ok(messages=[m.as_event_message() for m in thread], has_more=False)

    async def _m_users_info(self, p: dict[str, Any]) -> web.Response:
        user = p.get("user", "")
        info = self.users.get(user) or {"id": user, "name": user.lower(), "real_name": user,
                                        "profile": {"display_name": user.lower()[2:]}}
        return self._ok(user=info)

    async def _file(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {self.bot_token}":
            return web.Response(status=302, headers={"Location": "/login"})  # what Slack does without a token
        entry = self.files.get(request.match_info["file_id"])
        await asyncio.sleep(self.file_delay)
        if entry is None:
            return web.Response(status=404)
        return web.Response(body=entry[1], content_type="application/octet-stream")

    async def _response_url(self, request: web.Request) -> web.Response:
        target = self.responses.get(request.match_info["rid"])
        if target is None:
            return web.Response(status=404, text="expired_url")
        p = await request.json()
        ephemeral = p.get("response_type", "ephemeral") == "ephemeral"
        msg = SlackMessage(self.next_ts(), target["channel"], p.get("text") or "", thread_ts=target["thread_ts"],
                           blocks=p.get("blocks") or [], ephemeral_to=target["user"] if ephemeral else None,
                           monotonic=time.monotonic())
        self._record(msg)
        return web.Response(text="ok")


class FakeSlackThread(ServedInThread):
    """A FakeSlack served from a background thread with its own loop (benchmarks, ``herald run`` tests).

    ``call(fn, *args)`` runs ``fn(fake, *args)`` on the fake's loop; a coroutine it returns is awaited there.
    """

    thread_name = "fake-slack"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(FakeSlack(**kwargs))
