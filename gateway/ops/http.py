"""The daemon's http app: health, readiness, metrics, the icon, and adapters' routes (their pages and APIs).

Everything under ``/api/`` needs an adapter's word that the request is its owner's (``authorizes``: the bearer
token of a platform that declares ``guards_api``); without such an adapter enabled, the API is closed."""

from __future__ import annotations

import time
from collections.abc import Mapping
from importlib import resources
from typing import Any, Protocol

import structlog
from aiohttp import web

from gateway.config import Config
from gateway.kernel.faults import WAIT_WHILE_UNAVAILABLE, Unavailable
from gateway.platforms import PLATFORMS
from gateway.platforms.base import PlatformAdapter

log = structlog.get_logger("herald.http")


def _json_error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


# The statuses that say the caller sent something we will not take (malformed, too big, the wrong type):
# each is one ``bad_request`` fault. 401/404/405 are not counted: they are about who asks, and where.
BAD_REQUEST_STATUSES = frozenset({400, 411, 413, 415, 422})


def door_of(request: web.Request) -> str:
    """The route a request came in by, as declared (``/api/v1/chats/{chat_id}/messages``): plain text for a
    fault's ``door`` field, never the caller's own path."""
    info = getattr(request, "match_info", None)
    route = getattr(info, "route", None)
    resource = getattr(route, "resource", None)
    return resource.canonical if resource is not None else "unrouted"


def errors_middleware(faults: Any) -> Any:
    @web.middleware
    async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
        """Bad input gets a clear 4xx, a bug gets a short 500 — never a stack trace over the wire."""
        reading = WAIT_WHILE_UNAVAILABLE.set(False) if request.method in ("GET", "HEAD") else None
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            if exc.status in BAD_REQUEST_STATUSES:
                faults.record("bad_request", door=door_of(request), status=exc.status)
            if exc.content_type != "application/json" and exc.status >= 400:
                return _json_error(exc.status, exc.reason)
            raise
        except Unavailable as exc:
            # Nothing was taken: say so plainly, and when to try again (the reason is fixed text, never an
            # error's).
            text = (f"Herald cannot answer this right now ({exc.reason}); try again in a moment" if reading else
                    f"Herald cannot take this right now ({exc.reason}); nothing was stored: send it again in a moment")
            return web.json_response({"error": text}, status=503, headers={"Retry-After": "5"})
        except Exception:
            log.exception("http_handler_failed", path=request.path)
            return _json_error(500, "internal error")
        finally:
            if reading is not None:
                WAIT_WHILE_UNAVAILABLE.reset(reading)
        if response.status in BAD_REQUEST_STATUSES:  # a handler that answered its 4xx rather than raising it
            faults.record("bad_request", door=door_of(request), status=response.status)
        return response

    return middleware


class HttpHost(Protocol):
    """What the http app shows: the adapters and the daemon's figures."""

    cfg: Config
    adapters: Mapping[str, PlatformAdapter]
    lanes: Any  # .running(), .waiting()
    warnings: list[str]  # start-up warnings (the sandbox's)
    started_at: float

    def readiness(self) -> tuple[bool, dict[str, Any]]: ...

    def loop_lag_quantiles(self) -> tuple[float, float, float]: ...

    @property
    def metrics(self) -> Any: ...  # gateway.kernel.metrics.Metrics

    @property
    def faults(self) -> Any: ...  # gateway.kernel.faults.Faults


class HttpServer:
    def __init__(self, runner: HttpHost, extra_routes: list[web.RouteDef] | None = None) -> None:
        self.runner = runner
        self._extra_routes = list(extra_routes or [])  # the dashboard's
        self.port = runner.cfg.http.port
        self._runner: web.AppRunner | None = None
        self.app = self._build()

    def _build(self) -> web.Application:
        app = web.Application(middlewares=[self._auth_middleware, errors_middleware(self.runner.faults)],
                              client_max_size=2 * 1024**2)
        app.add_routes([
            # Browsers ask for /favicon.ico on every load whatever the page links; both get the same icon.
            web.get("/favicon.svg", self._favicon),
            web.get("/favicon.ico", self._favicon),
            web.get("/healthz", self._healthz),
            web.get("/readyz", self._readyz),
            web.get("/metrics", self._metrics),
            web.get("/api/v1/status", self._status),  # behind the bearer token, like all of /api/
        ])
        app.add_routes(self._extra_routes)
        for adapter in self.runner.adapters.values():
            app.add_routes(adapter.http_routes())
        for name, declared in PLATFORMS.items():
            if declared.page and name not in self.runner.adapters:  # its address says why nothing is there
                app.add_routes([web.get(declared.page, _disabled(declared.label, name))])
        return app

    @web.middleware
    async def _auth_middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        adapters = self.runner.adapters.values()
        if request.path.startswith("/api/") and not any(adapter.authorizes(request) for adapter in adapters):
            return web.json_response({"error": "missing or wrong bearer token"}, status=401,
                                     headers={"WWW-Authenticate": "Bearer"})
        return await handler(request)

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.runner.cfg.http.host, self.runner.cfg.http.port, reuse_address=True)
        await site.start()
        sockets = site._server.sockets if site._server else []  # type: ignore[union-attr]
        if sockets:
            self.port = sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _favicon(self, request: web.Request) -> web.Response:
        icon = resources.files("gateway.ops").joinpath("static/favicon.svg").read_bytes()
        return web.Response(body=icon, content_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _readyz(self, request: web.Request) -> web.Response:
        # Unauthenticated: adapter states and error classes only, never exception text.
        # Lasting faults (database unavailable, disk full, ...) with their fixed reasons, and the recent
        # faults per class: what an operator needs first, without the log.
        ready, adapters = self.runner.readiness()
        faults = self.runner.faults
        return web.json_response({"ready": ready, "adapters": adapters, "warnings": self.runner.warnings,
                                  "conditions": faults.conditions(), "recent_faults": faults.recent()},
                                 status=200 if ready else 503)

    async def _status(self, request: web.Request) -> web.Response:
        # Authenticated (the /api/ middleware): adds each adapter's redacted last_error.
        ready, adapters = self.runner.readiness(detail=True)
        return web.json_response({"ready": ready, "adapters": adapters,
                                  "uptime_seconds": round(time.time() - self.runner.started_at, 1)})

    async def _metrics(self, request: web.Request) -> web.Response:
        from gateway.kernel.metrics import CONTENT_TYPE

        return web.Response(body=self.runner.metrics.render(), headers={"Content-Type": CONTENT_TYPE})


def _disabled(label: str, name: str) -> Any:
    async def page(request: web.Request) -> web.Response:
        return web.Response(status=404, text=f"The {label} is disabled (platforms.{name}.enabled).")

    return page
