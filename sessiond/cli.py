"""`sessiond` command line. Each subcommand lives in its own module, registered below, with
`add_parser(subparsers, name)` and `run(args) -> int`; those modules import heavy things lazily.

serve, bench and api-key are the daemon's own; gateway, fleet-up and drain run a fleet of daemons (package
fleet); replay, replay-compare, trace-gen and trace-export are the
load-test tooling (package loadtest), which the daemon's runtime never imports."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Protocol

from loadtest.replay import compare_cli, replay_cli
from loadtest.trace_tools import trace_export_cli, trace_gen_cli
from sessiond.commands import api_key as api_key_cli
from sessiond.commands import bench as bench_cli
from sessiond.commands import drain as drain_cli
from sessiond.commands import fleet_up
from sessiond.commands import gateway as gateway_cli
from sessiond.commands import serve as serve_cli

__all__ = ["SUBCOMMANDS", "Subcommand", "build_parser", "main"]


class Subcommand(Protocol):
    def add_parser(self, sub: Any, name: str) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


SUBCOMMANDS: dict[str, Subcommand] = {
    "serve": serve_cli,
    "bench": bench_cli,
    "api-key": api_key_cli,
    "gateway": gateway_cli,
    "fleet-up": fleet_up,
    "drain": drain_cli,
    "replay": replay_cli,
    "replay-compare": compare_cli,
    "trace-gen": trace_gen_cli,
    "trace-export": trace_export_cli,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sessiond",
        description="Interactive session service for streaming world models and vibe directing.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in SUBCOMMANDS.items():
        command.add_parser(sub, name)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(SUBCOMMANDS[args.command].run(args))


if __name__ == "__main__":
    sys.exit(main())
