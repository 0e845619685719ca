"""Running the app under uvicorn (`sessiond serve`)."""

from __future__ import annotations

import logging
import socket
from typing import Any

import uvicorn

from sessiond.api.app import create_app
from sessiond.api.ws_protocol import LettingGoProtocol
from sessiond.config import ServeConfig, config_from_args
from sessiond.logs import configure_logging, redact_server_logs

__all__ = ["KEEP_ALIVE_S", "config_from_args", "serve", "uvicorn_config"]

logger = logging.getLogger(__name__)

# on SIGTERM, how long uvicorn waits for open connections (a viewer that never closes its WebSocket,
# a proxy's idle one) before it cancels them and runs the app's shutdown: a stop must not hang
GRACEFUL_SHUTDOWN_S = 10
# how long an idle keep-alive HTTP connection stays open: well above the 5 s after which common
# client pools (httpx's default; SessionClient's is 2 s) drop an idle connection, so a client never
# reuses one the server is closing at that moment (seen in CI: a DELETE after 5 s idle failed with
# ReadError when both sides used 5 s)
KEEP_ALIVE_S = 30


def uvicorn_config(app: Any, config: ServeConfig, **overrides: Any) -> uvicorn.Config:
    """The server's settings; also redacts tokens on the server's loggers (their lines carry URLs)."""
    redact_server_logs()
    max_ws = max(1 << 20, 4 * config.max_message_bytes)
    # ws: uvicorn's WebSocket protocol, except that a peer that reads nothing is let go (ws_protocol.py)
    return uvicorn.Config(app, host=config.host, port=config.port, ws=LettingGoProtocol, ws_per_message_deflate=False,
                          ws_max_size=max_ws, log_config=None, lifespan="on",
                          ws_ping_interval=config.viewer_ping_s, ws_ping_timeout=config.viewer_ping_s,
                          access_log=False, timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
                          timeout_keep_alive=KEEP_ALIVE_S, **overrides)  # access lines would carry ?token= query strings


def serve(config: ServeConfig, sockets: list[socket.socket]) -> int:
    """Serve on `sockets` (bound by `sessiond.api.listen` before the app starts) until SIGTERM/SIGINT."""
    configure_logging(config.log_json, config.log_level)
    logger.info("starting sessiond on http://%s:%d (model %s, store %s)", config.host, config.port, config.model,
                "redis" if config.redis_url else "memory")
    server = uvicorn.Server(uvicorn_config(create_app(config), config))
    server.run(sockets=sockets)
    return 0
