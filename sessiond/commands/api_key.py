"""`sessiond api-key add --file FILE --name NAME --max-sessions N`: a new API key for
`sessiond serve --api-keys FILE`. The file gets the key's SHA-256 and limit; the key itself is
printed once, here, and stored nowhere."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, name: str) -> None:
    command = sub.add_parser(name, help="manage the API keys of `serve --api-keys`",
                             description="Manage API keys for session creation (sessiond serve --api-keys FILE).")
    actions = command.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="add a key and print it once",
                             description="Add a key to FILE (created if absent, mode 0600) and print it once; "
                             "FILE keeps only its SHA-256.")
    add.add_argument("--file", required=True, help="the keys file (JSON lines) that serve --api-keys reads")
    add.add_argument("--name", required=True, help="a name for the key (unique in FILE; shown in logs and errors)")
    add.add_argument("--max-sessions", type=int, default=1,
                     help="most sessions this key may hold at once (default 1)")


def run(args: argparse.Namespace) -> int:
    from sessiond.api_keys import add_key
    from sessiond.errors import ServeConfigError

    try:
        key = add_key(args.file, args.name, args.max_sessions)
    except ServeConfigError as exc:
        print(f"sessiond api-key add: {exc}")
        return 2
    print(key)
    return 0
