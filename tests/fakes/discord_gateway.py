"""The gateway half of the fake Discord (tests/fakes/discord_api.py): the websocket discord.py keeps open.

HELLO with a heartbeat interval; IDENTIFY (token checked) -> READY and a GUILD_CREATE; heartbeats acknowledged;
RESUME replays what a session missed while its connection was cut, then RESUMED; a session closed cleanly
(1000/1001) is gone, as on Discord, and a RESUME of it gets INVALID_SESSION. Frames are zlib-stream
compressed when the client asks (``compress=zlib-stream``), as discord.py does.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

BOT_ID = 900_000_000_000_000_001
APP_ID = BOT_ID  # a bot's application has the bot user's id
GUILD = 700_000_000_000_000_001


@dataclass
class Session:
    id: str
    seq: int = 0
    ws: web.WebSocketResponse | None = None
    compress: Any = None  # zlib compressobj of the connection (zlib-stream)
    buffer: list[dict[str, Any]] = field(default_factory=list)  # dispatched events, for RESUME
    alive: bool = True



class FakeGateway:
    """The gateway's state and protocol; FakeDiscord supplies the world (users, the server) it reports."""

    sessions: dict[str, Session]
    identified: list[dict[str, Any]]
    resumes: list[dict[str, Any]]
    heartbeats: int
    heartbeat_ms: int
    refusing_until: float
    token: str
    users: dict[int, dict[str, Any]]
    _changed: asyncio.Event

    @property
    def gateway_url(self) -> str:
        raise NotImplementedError

    def guild_payload(self) -> dict[str, Any]:
        raise NotImplementedError

    # ---- the gateway -----------------------------------------------------------------------------

    def dispatch(self, event: str, data: dict[str, Any]) -> None:
        for session in self.sessions.values():
            if not session.alive:
                continue
            session.seq += 1
            frame = {"op": 0, "t": event, "s": session.seq, "d": data}
            session.buffer.append(frame)
            del session.buffer[:-1000]
            if session.ws is not None:
                asyncio.get_running_loop().create_task(self._send(session, frame))
        self._changed.set()

    async def _send(self, session: Session, frame: dict[str, Any]) -> None:
        ws = session.ws
        if ws is None or ws.closed:
            return
        data = json.dumps(frame)
        try:
            if session.compress is not None:
                packed = session.compress.compress(data.encode()) + session.compress.flush(zlib.Z_SYNC_FLUSH)
                await ws.send_bytes(packed)
            else:
                await ws.send_str(data)
        except (ConnectionError, RuntimeError):
            pass  # the connection went; a RESUME replays the frame from the buffer

    async def drop_gateway(self, refuse_for: float = 0.0) -> None:
        """Every gateway connection is cut without a close frame (the sessions stay resumable), and new ones are
        refused for ``refuse_for`` seconds (a network outage rather than a blip)."""
        self.refusing_until = time.monotonic() + refuse_for
        for session in self.sessions.values():
            ws, session.ws = session.ws, None
            if ws is not None and ws._req is not None and ws._req.transport is not None:
                ws._req.transport.abort()

    def connected(self) -> int:
        return sum(1 for s in self.sessions.values() if s.ws is not None and s.alive)

    async def _gateway(self, request: web.Request) -> web.StreamResponse:
        if time.monotonic() < self.refusing_until:
            return web.Response(status=503, text="gateway unavailable")
        ws = web.WebSocketResponse(autoping=True, max_msg_size=0)
        await ws.prepare(request)
        compress = zlib.compressobj() if request.query.get("compress") == "zlib-stream" else None
        conn = Session("pending", compress=compress, ws=ws, alive=False)
        await self._send(conn, {"op": 10, "s": None, "t": None, "d": {"heartbeat_interval": self.heartbeat_ms}})
        session: Session | None = None
        try:
            async for frame in ws:
                if frame.type != WSMsgType.TEXT:
                    continue
                payload = json.loads(frame.data)
                op, d = payload.get("op"), payload.get("d")
                if op == 1:
                    self.heartbeats += 1
                    await self._send(session or conn, {"op": 11, "s": None, "t": None, "d": None})
                elif op == 2:
                    session = await self._identify(ws, compress, d)
                    if session is None:
                        break
                elif op == 6:
                    session = await self._resume(ws, conn, compress, d)
        finally:
            if session is not None and session.ws is ws:
                session.ws = None
                if ws.close_code in (1000, 1001):  # a clean close ends the session, as on Discord
                    session.alive = False
        return ws

    async def _identify(self, ws: web.WebSocketResponse, compress: Any, d: dict[str, Any]) -> Session | None:
        self.identified.append(d)
        if d.get("token") != self.token:
            await ws.close(code=4004, message=b"Authentication failed.")
            return None
        session = Session(secrets.token_hex(16), ws=ws, compress=compress)
        self.sessions[session.id] = session
        session.intents = d.get("intents", 0)  # type: ignore[attr-defined]
        ready = {"v": 10, "user": {**self.users[BOT_ID], "verified": True, "mfa_enabled": False, "flags": 0},
                 "guilds": [{"id": str(GUILD), "unavailable": True}], "session_id": session.id,
                 "resume_gateway_url": self.gateway_url, "application": {"id": str(APP_ID), "flags": 0},
                 "private_channels": [], "relationships": [], "presences": [], "guild_join_requests": []}
        self.dispatch_to(session, "READY", ready)
        self.dispatch_to(session, "GUILD_CREATE", self.guild_payload())
        return session

    def dispatch_to(self, session: Session, event: str, data: dict[str, Any]) -> None:
        session.seq += 1
        frame = {"op": 0, "t": event, "s": session.seq, "d": data}
        session.buffer.append(frame)
        asyncio.get_running_loop().create_task(self._send(session, frame))

    async def _resume(self, ws: web.WebSocketResponse, conn: Session, compress: Any, d: dict[str, Any]
                      ) -> Session | None:
        self.resumes.append(d)
        session = self.sessions.get(d.get("session_id", ""))
        if session is None or not session.alive or d.get("token") != self.token:
            await self._send(conn, {"op": 9, "s": None, "t": None, "d": False})
            return None
        session.ws, session.compress = ws, compress
        for frame in [f for f in session.buffer if f["s"] > (d.get("seq") or 0)]:
            await self._send(session, frame)
        self.dispatch_to(session, "RESUMED", {})
        return session
