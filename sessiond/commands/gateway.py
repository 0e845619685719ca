"""`sessiond gateway`: one public API (the daemon's HTTP API and web pages) in front of a fleet of
workers (`sessiond serve --fleet`). The gateway itself is `fleet.gateway`."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, name: str) -> None:
    from fleet.gateway_cli import add_arguments

    gateway = sub.add_parser(
        name,
        help="run a fleet gateway",
        description="Serve the daemon's public HTTP API and web pages in front of fleet workers: creates are "
        "placed on the worker with the most headroom whose admission accepts them, status and delete go to "
        "the session's worker, and the sessions of a worker that dies are re-placed. Stateless: run two.",
    )
    add_arguments(gateway)


def run(args: argparse.Namespace) -> int:
    from sessiond.api.listen import bind_listeners
    from sessiond.errors import ServeConfigError

    try:  # bound before the runtime, Redis or the sweeper start: a taken port ends this at once
        sockets = bind_listeners(args.host, args.port)
    except ServeConfigError as exc:
        print(f"sessiond gateway: {exc}", flush=True)
        return 2
    from fleet.gateway_cli import run as run_gateway

    return run_gateway(args, sockets)
