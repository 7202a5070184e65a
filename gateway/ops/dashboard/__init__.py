"""The operator's dashboard at ``/dashboard``, on the daemon's own http app: charts of the last hour and day
(messages per minute, turn latency, token cost per day, cron runs, faults per class: panels.py), adapters,
sessions (with reset), pending approvals (Approve / Deny), cron jobs with their run history ("ran" apart from
"delivered"), recent delivery failures, messages parked because their turns kept taking the daemon down, and the
audit view of the agent in the conversation (its questions, messages to other chats, pages read and searches;
messages steered into turns, edits).

The pages themselves (``/dashboard``, ``/dashboard/cron/{id}``) are one static shell that needs no token; what
they show comes from ``/api/v1/dashboard/…``, behind the owner's bearer token like all of ``/api/``
(gateway/ops/http.py: the web chat's, or whichever platform declares ``guards_api``), rendered to HTML here
(gateway/ops/dashboard/views.py). A server-sent event stream pushes a view again whenever its HTML changed
(checked every second while someone watches), so the page stays live without reloading and keeps its scroll
position.

A decision taken here goes through ``ApprovalBroker.decide_as_operator``: the same path as a button in the
chat, audited with the operator as decider, the chat's prompt edited the same way. A reset is the chat's
/new: the running turn stopped, its approvals denied, a fresh session.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any, Protocol

import structlog
from aiohttp import web

from gateway.kernel.faults import Unavailable
from gateway.kernel.untrusted import read_object
from gateway.ops.dashboard import panels, stats, views
from gateway.ops.dashboard.data import Overview, SessionRow, is_session_key, job_and_runs, overview_rows, parse_key
from gateway.platforms import PLATFORMS
from gateway.platforms.base import PlatformAdapter, Source
from gateway.storage.audit import recent_events

log = structlog.get_logger("herald.dashboard")

TICK = 1.0  # how often a watched view is rendered again to see whether it changed
CHARTS_EVERY = 5.0  # the charts' figures are read again at most this often (a day of rows, aggregated)
KEEPALIVE = 15.0


class Lanes(Protocol):
    def busy(self, key: str) -> tuple[float, str] | None: ...

    def queued(self, key: str) -> list[str]: ...

    def stop_turn(self, key: str) -> bool: ...

    def running(self) -> int: ...

    def waiting(self) -> int: ...


class Approvals(Protocol):
    pending: Mapping[str, Any]

    async def decide_as_operator(self, approval_id: str, choice: str) -> str: ...

    async def deny_session(self, session_key: str, via: str) -> int: ...


class Sessions(Protocol):
    async def reset(self, key: str, platform: str, reason: str = "new") -> dict[str, Any]: ...


class Notifier(Protocol):
    async def notify(self, source: Source, text: str) -> None: ...


class Dashboard:
    def __init__(self, readiness: Callable[..., tuple[bool, dict[str, Any]]], adapters: Mapping[str, PlatformAdapter],
                 lanes: Lanes, sessions: Sessions, approvals: Approvals, read: Callable[[Any], Any],
                 notifier: Notifier, stopping: Callable[[], bool], peers: Any = None, faults: Any = None,
                 prices: Mapping[str, Any] | None = None) -> None:
        self.readiness = readiness
        self.faults = faults  # gateway/kernel/faults.py's ledger: the faults per class chart
        self.prices = dict(prices or {})  # model.prices: the cost chart
        # The other instances of the database (gateway/cluster/bus.py): a reset reaches the one running the session.
        self.peers = peers
        self.adapters = adapters
        self.lanes = lanes
        self.sessions = sessions
        self.approvals = approvals
        self.read = read  # Store.run_read
        self.notifier = notifier
        self.stopping = stopping
        self._rendered: dict[str, tuple[float, str]] = {}  # view -> (when, html): shared by every watcher
        self._charts: tuple[float, str] | None = None  # (when, html)
        self._figures = stats.FigureCache()
        self._reading = asyncio.Lock()  # one read of the figures at a time: they share what they keep

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/dashboard", self._page),
            web.get("/dashboard/cron/{job_id}", self._page),
            web.get("/dashboard/static/{name}", self._static),
            web.get("/api/v1/dashboard/view", self._view),
            web.get("/api/v1/dashboard/events", self._events),
            web.post("/api/v1/dashboard/approvals/{approval_id}", self._decide),
            web.post("/api/v1/dashboard/sessions/reset", self._reset),
        ]

    # ---- rendering ----------------------------------------------------------------------------------

    async def render(self, view: str) -> str:
        cached = self._rendered.get(view)
        if cached is not None and time.monotonic() - cached[0] < TICK * 0.8:
            return cached[1]
        if view.startswith("cron/"):
            job, runs = await self.read(job_and_runs(view.removeprefix("cron/")))
            html = views.job_page(job, runs)
        else:
            html = views.overview(await self.overview(), await self.charts())
        self._rendered[view] = (time.monotonic(), html)
        return html

    async def charts(self) -> str:
        async with self._reading:
            if self._charts is not None and time.monotonic() - self._charts[0] < CHARTS_EVERY:
                return self._charts[1]
            now = time.time()
            traffic, costs, runs = await self.read(self._figures.read(now, self.prices))
            faults_hour = self.faults.per_class(3600) if self.faults is not None else {}
            faults_day = self.faults.per_class(86_400) if self.faults is not None else {}
            html = panels.charts_section(stats.Figures(now, traffic, costs, runs, faults_hour, faults_day))
            self._charts = (time.monotonic(), html)
            return html

    async def overview(self) -> Overview:
        _, adapters = self.readiness(detail=True)
        rows, jobs, failures, parked = await self.read(overview_rows)
        now = time.time()
        sessions = []
        for row in rows:
            platform, chat, thread, user = parse_key(row["key"])
            busy = self.lanes.busy(row["key"])
            sessions.append(SessionRow(row["key"], platform, chat, thread, user, row["updated_at"],
                                       len(self.lanes.queued(row["key"])),
                                       now - busy[0] if busy else None, busy[1] if busy else None))
        approvals = [{"id": r.id, "platform": r.source.platform, "chat_id": r.source.chat_id,
                      "requested_by": r.source.user_name or r.source.user_id, "command": r.display,
                      "reason": r.reason, "created_at": r.created_at, "scheduled": r.scheduled}
                     for r in list(self.approvals.pending.values())]
        events = await self.read(recent_events)
        return Overview(adapters, sessions, approvals, jobs, failures, parked, self.lanes.running(),
                        self.lanes.waiting(), events)

    # ---- handlers -----------------------------------------------------------------------------------

    def _guarded(self) -> None:
        """The page needs an enabled platform whose token guards the API: without one nobody could open it."""
        guards = [(name, declared.label) for name, declared in PLATFORMS.items() if declared.guards_api]
        if not any(name in self.adapters for name, _ in guards):
            needed = " or ".join(f"the {label}'s token: enable platforms.{name}" for name, label in guards)
            raise web.HTTPNotFound(text=f"The dashboard needs {needed or 'a platform that guards the API'}.")

    async def _page(self, request: web.Request) -> web.Response:
        self._guarded()
        page = resources.files("gateway.ops").joinpath("static/dashboard.html").read_text()
        return web.Response(text=page, content_type="text/html", headers={
            "Cache-Control": "no-store",
            "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
        })

    async def _static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        types = {"dashboard.js": "application/javascript", "dashboard.css": "text/css"}
        if name not in types:
            raise web.HTTPNotFound()
        body = resources.files("gateway.ops").joinpath(f"static/{name}").read_text()
        return web.Response(text=body, content_type=types[name], headers={"Cache-Control": "no-cache"})

    @staticmethod
    def _view_name(request: web.Request) -> str:
        view = request.query.get("view", "overview")
        if view != "overview" and not (view.startswith("cron/") and 5 < len(view) <= 64):
            raise web.HTTPBadRequest(text=json.dumps({"error": "view is overview or cron/<job id>"}),
                                     content_type="application/json")
        return view

    async def _view(self, request: web.Request) -> web.Response:
        html = await self.render(self._view_name(request))
        return web.json_response({"html": html})

    async def _events(self, request: web.Request) -> web.StreamResponse:
        view = self._view_name(request)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store",
                                           "X-Accel-Buffering": "no"})
        await resp.prepare(request)
        last, quiet_since = "", time.monotonic()
        try:
            while not self.stopping():
                try:
                    html = await self.render(view)
                except Unavailable:  # the database is down: the page keeps what it shows until it is back
                    html = None
                digest = last if html is None else hashlib.sha256(html.encode()).hexdigest()
                if digest != last:
                    await resp.write(f"event: view\ndata: {json.dumps({'html': html})}\n\n".encode())
                    last, quiet_since = digest, time.monotonic()
                elif time.monotonic() - quiet_since > KEEPALIVE:
                    await resp.write(b": keepalive\n\n")
                    quiet_since = time.monotonic()
                await asyncio.sleep(TICK)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return resp

    async def _decide(self, request: web.Request) -> web.Response:
        body = await _json(request)
        choice = body.get("choice")
        if choice not in ("o", "d"):
            raise web.HTTPBadRequest(text=json.dumps({"error": "choice is o (approve once) or d (deny)"}),
                                     content_type="application/json")
        notice = await self.approvals.decide_as_operator(request.match_info["approval_id"], choice)
        self._rendered.clear()
        return web.json_response({"notice": notice})

    async def _reset(self, request: web.Request) -> web.Response:
        key = (await _json(request)).get("key")
        if not isinstance(key, str) or not is_session_key(key):
            raise web.HTTPBadRequest(text=json.dumps({"error": "key: the session's key"}),
                                     content_type="application/json")
        platform, chat, thread, user = parse_key(key)
        stopped = self.lanes.stop_turn(key)
        denied = await self.approvals.deny_session(key, "new")
        await self.sessions.reset(key, platform, reason="operator")
        if self.peers is not None and self.peers.enabled:
            # The session's turns may run in another instance: it stops them and drops what it cached.
            await self.peers.broadcast("session-reset", key)
        log.info("session_reset", session_key=key, via="dashboard", stopped=stopped, approvals_denied=denied)
        chat_type = key.split(":")[2 if key.split(":")[1].startswith("s") else 1]
        source = Source(platform, chat, user or "", chat_type if chat_type in ("dm", "group", "channel") else "dm",
                        thread_id=thread)
        await self.notifier.notify(source, "🆕 The operator started a fresh conversation"
                                           + (" (the running turn was stopped)." if stopped else "."))
        self._rendered.clear()
        return web.json_response({"notice": "Started a fresh conversation."
                                            + (" The running turn was stopped." if stopped else "")})


async def _json(request: web.Request) -> dict[str, Any]:
    return await read_object(request)
