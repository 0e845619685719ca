"""Running the app under uvicorn (`sessiond serve`)."""

from __future__ import annotations

import argparse
import logging
from typing import Any

import uvicorn

from sessiond.api.app import create_app
from sessiond.config import ServeConfig
from sessiond.logs import configure_logging, redact_server_logs

__all__ = ["config_from_args", "serve", "uvicorn_config"]

logger = logging.getLogger(__name__)

# on SIGTERM, how long uvicorn waits for open connections (a viewer that never closes its WebSocket,
# a proxy's idle one) before it cancels them and runs the app's shutdown: a stop must not hang
GRACEFUL_SHUTDOWN_S = 10

_FLAG_OPTIONS = ("host", "port", "model", "device", "redis_url", "log_json", "log_level", "idle_offload_s", "idle_close_s",
                 "lead_chunks", "record", "policy", "max_sessions", "max_batch", "kv_budget_bytes",
                 "webrtc_hosts", "cors_origins", "web_dir", "api_keys", "cpu_threads", "admission_wait_s", "calibration_budget_s",
                 "admission_margin", "objective_world_miss_rate", "objective_world_a2p_p95_ms",
                 "objective_director_start_delay_p95_s", "objective_director_risk")


def config_from_args(args: argparse.Namespace) -> ServeConfig:
    """Defaults < --config JSON < flags given on the command line."""
    given: dict[str, Any] = {}
    for name in _FLAG_OPTIONS:
        value = getattr(args, name, None)
        if value is not None and value is not False:
            given[name] = value
    if getattr(args, "config", None):
        return ServeConfig.from_json_file(args.config, given)
    return ServeConfig.from_mapping(given)


def uvicorn_config(app: Any, config: ServeConfig, **overrides: Any) -> uvicorn.Config:
    """The server's settings; also redacts tokens on the server's loggers (their lines carry URLs)."""
    redact_server_logs()
    max_ws = max(1 << 20, 4 * config.max_message_bytes)
    return uvicorn.Config(app, host=config.host, port=config.port, ws_per_message_deflate=False,
                          ws_max_size=max_ws, log_config=None, lifespan="on",
                          ws_ping_interval=config.viewer_ping_s, ws_ping_timeout=config.viewer_ping_s,
                          access_log=False, timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S, **overrides)  # access lines would carry ?token= query strings


def serve(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    configure_logging(config.log_json, config.log_level)
    logger.info("starting sessiond on http://%s:%d (model %s, store %s)", config.host, config.port, config.model,
                "redis" if config.redis_url else "memory")
    server = uvicorn.Server(uvicorn_config(create_app(config), config))
    server.run()
    return 0
