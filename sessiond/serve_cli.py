"""`sessiond serve`."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, name: str) -> None:
    serve = sub.add_parser(
        name,
        help="run the daemon",
        description="Run the session daemon. Defaults: 127.0.0.1:8000, the embedded demo model, "
        "CPU unless CUDA is present, in-memory store. Open http://HOST:PORT/ for the web client.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port to bind (default 8000)")
    serve.add_argument("--model", default=None, help="model config name: demo (default), tiny, wan-1.3b")
    serve.add_argument("--device", default=None, help="cpu or cuda[:N] (default: cuda if present, else cpu)")
    serve.add_argument("--redis-url", default=None, help="use a Redis store, e.g. redis://127.0.0.1:6379/0")
    serve.add_argument("--config", default=None, help="a JSON config file; flags override it")


def run(args: argparse.Namespace) -> int:
    from sessiond.server import serve

    return serve(args)
