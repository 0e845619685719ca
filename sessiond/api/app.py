"""`create_app(config, engine=None)`: the Starlette app — routes, static web client and a
lifespan that starts and stops the daemon. No work happens at import."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import BaseRoute, Mount, Route

from engine.api import EngineProtocol
from httpapi import mount
from httpapi.static import WebFiles
from sessiond.admission.decision import AdmissionPolicy
from sessiond.api.routes_http import HANDLERS, metrics
from sessiond.api.routes_ws import session_socket
from sessiond.config import ServeConfig
from sessiond.runtime.daemon import Daemon
from sessiond.store import Store

__all__ = ["create_app", "web_dir"]


def web_dir(config: ServeConfig) -> Path:
    return Path(config.web_dir) if config.web_dir else Path(__file__).resolve().parents[2] / "web"


def create_app(config: ServeConfig, engine: EngineProtocol | None = None, *, store: Store | None = None,
               admission: AdmissionPolicy | None = None) -> Starlette:
    daemon = Daemon(config, engine=engine, store=store, admission=admission)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await daemon.start()
        try:
            yield
        finally:
            await daemon.stop()

    routes: list[BaseRoute] = mount({**HANDLERS, "ws": session_socket})  # the public surface, as a gateway's
    routes.append(Route("/metrics", metrics, methods=["GET"]))  # the daemon's own: Prometheus
    static = web_dir(config)
    routes.append(Mount("/", app=WebFiles(static), name="web"))
    middleware = [Middleware(
        CORSMiddleware, allow_origins=list(config.cors_origins), allow_methods=["GET", "POST", "DELETE"],
        allow_headers=["Authorization", "Content-Type", "X-API-Key"], max_age=600,
    )] if config.cors_origins else []  # bearer tokens, no cookies: no credentials mode
    app = Starlette(routes=routes, lifespan=lifespan, middleware=middleware)
    app.state.daemon = daemon
    return app
