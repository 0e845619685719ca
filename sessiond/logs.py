"""Logging setup (plain or one JSON object per line) and lifecycle event lines.

Lifecycle lines carry the session id and state, never a token."""

from __future__ import annotations

import json
import logging
import re
import time
from typing import Any

__all__ = ["QUIET_LOGGERS", "JsonFormatter", "RedactTokens", "configure_logging", "log_event", "redact_server_logs"]

logger = logging.getLogger("sessiond.session.lifecycle")

_STD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


_SECRET = re.compile(r"(token=|[Bb]earer\s+)[^&\s\"']+")

# loggers of the web server and its WebSocket library: their lines carry request URLs (?token=...)
SERVER_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi", "websockets.server",
                  "websockets.protocol")

# libraries that log routine steps at info (aiortc and aioice ~12 lines per WebRTC connection: ICE
# checks, state changes): at warning unless a --log-level is given
QUIET_LOGGERS = ("aiortc", "aioice", "av")


class RedactTokens(logging.Filter):
    """Last line of defence: a token that reaches a log line anyway (a URL with ?token=, an
    Authorization header) is replaced before the line is written."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if _SECRET.search(message):
            record.msg, record.args = _SECRET.sub(r"\1<redacted>", message), None
        return True


def redact_server_logs() -> None:
    """Put `RedactTokens` on the web server's own loggers, so their lines are redacted before any
    handler sees them, whoever configured the handlers (idempotent)."""
    for name in SERVER_LOGGERS:
        server_logger = logging.getLogger(name)
        if not any(isinstance(f, RedactTokens) for f in server_logger.filters):
            server_logger.addFilter(RedactTokens())


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": round(record.created, 6),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure_logging(json_lines: bool, level: str | None = None) -> None:
    """One handler on the root logger. `level` (debug, info, warning) applies to every logger; None
    keeps the daemon's own lines at info and the `QUIET_LOGGERS` at warning."""
    handler = logging.StreamHandler()
    if json_lines:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactTokens())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper() if level is not None else logging.INFO)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(level.upper() if level is not None else logging.WARNING)


def log_event(event: str, session_id: str, **fields: Any) -> None:
    """One line per session lifecycle event: `event` (created, attached, detached, active, idle,
    offloaded, restored, closed, failed, resumed, ...), the session id and a few plain fields."""
    extra = {"event": event, "session_id": session_id, "at": time.time(), **fields}
    logger.info("%s %s %s", event, session_id,
                " ".join(f"{k}={v}" for k, v in fields.items()), extra=extra)
