"""The ASGI application: routes, static files, the guard and response headers."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from stepscope.dashboard import _api, _compare, _controls, _metrics
from stepscope.dashboard._data import Source
from stepscope.dashboard._hosts import served_names
from stepscope.dashboard._openapi import document
from stepscope.dashboard._security import (
    ASGIApp,
    Guard,
    Message,
    Receive,
    Scope,
    Send,
    header_pairs,
)
from stepscope.store import Store, open_store
from stepscope.webcharts import STATIC_DIR as CHARTS_DIR

STATIC_DIR = Path(str(resources.files("stepscope.dashboard").joinpath("static")))
HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
    (b"content-security-policy",
     b"default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
     b"img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
     b"form-action 'none'"),
]  # fmt: skip


class SecureHeaders:
    """Adds :data:`HEADERS` to every response (a header already set wins)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                given = header_pairs(message)
                have = {k.lower() for k, _ in given}
                message["headers"] = [*given, *(h for h in HEADERS if h[0] not in have)]
            await send(message)

        await self.app(scope, receive, wrapped)


def index(request: Request) -> Response:
    return FileResponse(STATIC_DIR / "index.html", media_type="text/html; charset=utf-8")


def no_icon(request: Request) -> Response:
    return Response(status_code=204)


def openapi(request: Request) -> Response:
    return JSONResponse(document())


def routes() -> list[Route | Mount]:
    jobs = "/api/jobs/{job}"
    return [
        Route("/", index),
        Route("/openapi.json", openapi),
        Route("/favicon.ico", no_icon),
        Route("/metrics", _metrics.metrics),
        Route("/api/jobs", _api.list_jobs),
        Route("/api/compare", _compare.compare_jobs),
        Route(jobs, _api.job_detail),
        Route(f"{jobs}/system", _api.job_system),
        Route(f"{jobs}/steps", _api.job_steps),
        Route(f"{jobs}/rules", _api.job_rules),
        Route(f"{jobs}/kernels", _api.job_kernels),
        Route(f"{jobs}/report.html", _api.job_report),
        Route(f"{jobs}/artifacts/{{path:path}}", _api.job_artifact),
        Route(f"{jobs}/control/{{name}}", _api.control_status),
        Route(f"{jobs}/interval", _api.control_endpoint(_controls.interval), methods=["POST"]),
        Route(f"{jobs}/profile", _api.control_endpoint(_controls.profile), methods=["POST"]),
        Route(f"{jobs}/stop", _api.control_endpoint(_controls.stop), methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
        Mount("/charts", StaticFiles(directory=CHARTS_DIR), name="charts"),
    ]


def create_app(
    root: str | Store,
    host: str = "127.0.0.1",
    token: str = "",
    extra_hosts: tuple[str, ...] = (),
    follow_links: bool = False,
) -> Guard:
    """The dashboard over the job folders under ``root``, guarded for a server on ``host``.

    ``token`` is required (every POST needs it; beyond loopback every request);
    ``extra_hosts`` are more names the ``Host`` header may carry (e.g. a DNS name
    that points at a non-loopback ``host``); bound to all interfaces (``0.0.0.0``),
    the machine's names and addresses are in too (:func:`._hosts.served_names`). Job
    folders that resolve outside ``root`` are refused unless ``follow_links``. Raises
    ValueError for a refused binding.
    """
    store = root if isinstance(root, Store) else open_store(root)
    app = Starlette(routes=routes())
    app.state.source = Source(store, follow_links=follow_links)
    app.state.token = token
    return Guard(SecureHeaders(app), host, token, served_names(host, extra_hosts))
