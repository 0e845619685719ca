"""`sessiond replay TRACE --url URL [--speed X] [--saturate] [--out report.json] [--plots DIR]`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from loadtest.replay.objective_flags import add_objective_flags

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, name: str) -> None:
    p = sub.add_parser(name, help="replay a load trace against a running daemon",
                       description="Drive one concurrent client per trace session (docs/traces.md), measure what "
                       "each user saw, print a table, write the JSON report and PNG plots.")
    p.add_argument("trace", help="trace file (.jsonl)")
    p.add_argument("--url", default="http://127.0.0.1:8000", help="the daemon (default http://127.0.0.1:8000)")
    p.add_argument("--speed", type=float, default=1.0, help="trace time runs this much faster (default 1)")
    p.add_argument("--saturate", action="store_true",
                   help="saturating mode: all sessions at once, director think time dropped (default: paced)")
    p.add_argument("--transport", choices=("ws-raw", "ws-fmp4"), default=None,
                   help="override every session's transport (default: the trace's, ws-raw if absent)")
    p.add_argument("--out", default=None, help="write the JSON report here")
    p.add_argument("--plots", default=None, metavar="DIR", help="write PNG plots into DIR")
    p.add_argument("--policy", default=None, help="label the report with this policy (default: the daemon's)")
    add_objective_flags(p)
    p.add_argument("--segment-s", type=float, default=5.0,
                   help="the daemon's default segment length, for `direct` without seconds (default 5)")


def run(args: argparse.Namespace) -> int:
    from loadtest.replay.objective_flags import objectives_from
    from loadtest.replay.plots import write_plots
    from loadtest.replay.report import build_report, format_table
    from loadtest.replay.runner import run_replay
    from sessiond.admission.errors import AdmissionConfigError
    from sessiond.traces.errors import TraceError
    from sessiond.traces.format import load_trace

    try:
        trace = load_trace(args.trace)
        objectives = objectives_from(args)
    except OSError as exc:
        print(f"replay: cannot read {args.trace}: {exc.strerror}", file=sys.stderr)
        return 2
    except (TraceError, AdmissionConfigError) as exc:
        print(f"replay: {args.trace}: {exc}", file=sys.stderr)
        return 2
    if args.speed <= 0:
        print(f"replay: --speed must be > 0, got {args.speed}", file=sys.stderr)
        return 2
    outcome = asyncio.run(run_replay(trace, args.url, speed=args.speed,
                                     mode="saturating" if args.saturate else "paced", objectives=objectives,
                                     transport=args.transport, default_segment_s=args.segment_s))
    report = build_report(outcome, policy=args.policy)
    print(format_table(report))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=1)
        print(f"report: {args.out}")
    if args.plots:
        for path in write_plots(outcome, report, args.plots):
            print(f"plot: {path}")
    return 0
