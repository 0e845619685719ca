"""`sessiond` command line. Each subcommand lives in its own module, registered below, with
`add_parser(subparsers)` and `run(args) -> int`; those modules import heavy things lazily."""

from __future__ import annotations

import argparse
import importlib
import sys

__all__ = ["SUBCOMMANDS", "build_parser", "main"]

# subcommand name -> module providing add_parser(subparsers) and run(args)
SUBCOMMANDS: dict[str, str] = {
    "serve": "sessiond.serve_cli",
    "bench": "sessiond.bench_cli",
    "replay": "sessiond.replay.cli",
    "replay-compare": "sessiond.replay.compare_cli",
    "trace-gen": "sessiond.traces.cli",
    "trace-export": "sessiond.traces.cli",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sessiond",
        description="Interactive session service for streaming world models and vibe directing.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module in SUBCOMMANDS.items():
        importlib.import_module(module).add_parser(sub, name)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run = importlib.import_module(SUBCOMMANDS[args.command]).run
    return int(run(args))


if __name__ == "__main__":
    sys.exit(main())
