"""`sessiond bench`: the engine benchmark (enginetools.bench) under the daemon's command line."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, name: str) -> None:
    from enginetools.bench.args import add_arguments

    bench = sub.add_parser(
        name,
        help="benchmark the engine (phase times, frames/s, first frames, memory, TFLOP/s)",
        description="Drive the engine through its public step API for each batch size and report "
        "denoise/cache/decode times (p50/p95), frames/s aggregate and per session, time to first "
        "frames, peak memory, KV bytes per session and achieved TFLOP/s. Same as python -m enginetools.bench.",
    )
    add_arguments(bench)


def run(args: argparse.Namespace) -> int:
    from enginetools.bench.run import run_bench

    return run_bench(args, sys.argv[2:])
