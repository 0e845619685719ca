"""`sessiond trace-export`: the daemon's event log (Redis store) -> a recorded trace file."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, name: str) -> None:
    p = sub.add_parser(name, help="export the Redis event log as a recorded trace",
                       description="Turn the daemon's event log (Redis store) into a trace with "
                       "source \"recorded\" (docs/traces.md).")
    p.add_argument("--redis-url", required=True, help="the daemon's Redis, e.g. redis://127.0.0.1:6379/0")
    p.add_argument("--prefix", default="sessiond", help="the store's key prefix (default sessiond)")
    p.add_argument("--name", default="recorded", help="trace name for the header (default recorded)")
    p.add_argument("--out", required=True, help="trace file to write (.jsonl)")


async def _export(args: argparse.Namespace) -> int:
    from sessiond.errors import StoreUnavailable
    from sessiond.store.redis_store import RedisStore
    from sessiond.traces.format import write_trace
    from sessiond.traces.recorder import trace_from_event_stream

    store = RedisStore(args.redis_url, prefix=args.prefix)
    try:
        trace = await trace_from_event_stream(store.iter_events(), args.name)
    except StoreUnavailable as exc:
        print(f"trace-export: {exc}", file=sys.stderr)
        return 1
    finally:
        await store.close()
    write_trace(trace, args.out)
    print(json.dumps({"out": args.out, "sessions": len(trace.sessions()), "events": len(trace.events),
                      **trace.header.extra}))
    return 0


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_export(args))
