"""`sessiond drain`: tell one fleet worker to drain (stop admitting, move its sessions, leave). The
command itself is `fleet.drain_cli`."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, name: str) -> None:
    from fleet.drain_cli import add_arguments

    drain = sub.add_parser(
        name,
        help="drain one fleet worker",
        description="Tell a fleet worker (by its key) to drain, as SIGTERM on its host does: it stops admitting, "
        "moves each session to another worker, tells its viewers where to reconnect (`moved`), then exits.",
    )
    add_arguments(drain)


def run(args: argparse.Namespace) -> int:
    from fleet.drain_cli import run as run_drain

    return run_drain(args)
