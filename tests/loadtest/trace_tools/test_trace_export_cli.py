"""`sessiond trace-export`: the daemon's Redis event log becomes a recorded trace file."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from loadtest.trace_tools import trace_export_cli
from sessiond.store.base import StoredEvent
from sessiond.store.redis_store import RedisStore
from sessiond.traces import load_trace

T0 = 1_764_400_000.0


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    trace_export_cli.add_parser(sub, "trace-export")
    return parser.parse_args(list(argv))


async def test_the_redis_event_log_exports_as_a_recorded_trace(redis_server: Any, tmp_path: Path) -> None:
    store = RedisStore(redis_server.url, prefix="exp")
    await store.append_events([
        StoredEvent(T0, "s_a", "create", {"mode": "director", "prompt": "p", "seed": 3}),
        StoredEvent(T0 + 0.5, "s_a", "attach", {"media": "raw"}),
        StoredEvent(T0 + 1.0, "s_a", "direct", {"id": 1, "prompt": "go", "seconds": 5.0}),
        StoredEvent(T0 + 4.0, "s_a", "close", {"reason": "deleted"}),
    ])
    await store.close()
    out = tmp_path / "rec.jsonl"
    # the command runs its own event loop, as from a shell: a worker thread stands in for the shell
    code = await asyncio.to_thread(trace_export_cli.run, _parse("trace-export", "--redis-url", redis_server.url,
                                                                "--prefix", "exp", "--name", "lab", "--out", str(out)))
    assert code == 0
    trace = load_trace(out)
    assert (trace.header.name, trace.header.source) == ("lab", "recorded")
    assert [(e.t, e.ev) for e in trace.events] == [(0.0, "create"), (1.0, "direct"), (4.0, "close")]


def test_an_unreachable_redis_is_a_clear_error_not_a_crash(free_port: int, tmp_path: Path, capsys: Any) -> None:
    code = trace_export_cli.run(_parse("trace-export", "--redis-url", f"redis://127.0.0.1:{free_port}/0",
                                 "--out", str(tmp_path / "x.jsonl")))
    assert code == 1
    assert "unreachable" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()
