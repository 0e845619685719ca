"""Start the daemon N times and print each start's admission verdict:
``python -m loadtest.start_verdicts [--starts 10] [--model demo] [--json FILE] [-- SERVE ARGS...]``.

Each start is ``sessiond serve --model MODEL`` with the daemon's defaults (what ``bash
scripts/serve.sh`` runs) on a free loopback port; once ready, its ``/v1/capacity`` is read and the
daemon stopped. One line per start: the verdict (``serves``: sessions of each mode this start
serves within objective), the world cost rate at batch 1 the verdict planned with, the profile's
spread (its lower and upper quartiles), what its samples measured (``cpu``: the engine thread's CPU
time, ``wall``) and how much other load stretched them (wall / CPU time, 1.00: a core to itself),
how long the start took, and the machine's 1-minute load
average when it was read (``os.getloadavg``: the box may be shared). Last, how many distinct
verdicts the starts gave: the target is one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from loadtest.browser_play import serve

__all__ = ["main", "one_start"]


def one_start(model: str, serve_args: list[str], log: Path) -> dict[str, Any]:
    """Start the daemon, read its verdict, stop it."""
    began = time.monotonic()
    with serve(model, serve_args, log) as url:
        ready_s = time.monotonic() - began
        cap = httpx.get(f"{url}/v1/capacity", timeout=30.0).json()
    admission = cap.get("admission") or {}
    cost = admission.get("cost_model") or {}
    rates = cost.get("cost_rate") or {}
    return {"serves": cap.get("serves"), "world_cost_rate_b1": rates.get("1"),
            "profile_clock": cost.get("profile_clock"), "profile_contention": cost.get("profile_contention"),
            "world_cost_spread": cap.get("world_cost_spread"), "budget": cap.get("budget"),
            "ready_s": round(ready_s, 1), "load_1min": round(os.getloadavg()[0], 2), "statement": cap.get("statement")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadtest.start_verdicts", description=__doc__.split("\n\n")[0])
    p.add_argument("--starts", type=int, default=10, help="how many starts (default 10)")
    p.add_argument("--model", default="demo", help="the model each start serves (default demo)")
    p.add_argument("--json", type=Path, default=None, help="also write every start's figures here")
    p.add_argument("serve_args", nargs="*", help="more `sessiond serve` arguments (after --)")
    args = p.parse_args(argv)
    if args.starts < 1:
        print("error: --starts must be at least 1", file=sys.stderr)
        return 2
    starts = []
    with tempfile.TemporaryDirectory(prefix="start-verdicts-") as folder:
        for i in range(args.starts):
            start = one_start(args.model, args.serve_args, Path(folder) / f"daemon-{i}.log")
            starts.append(start)
            spread = start["world_cost_spread"] or [float("nan")] * 2
            rate = start["world_cost_rate_b1"]
            print(f"start {i + 1:2d}: serves {json.dumps(start['serves'])}  world cost {rate:.3f} "
                  f"(quartiles {spread[0]:.3f}-{spread[1]:.3f}, budget {start['budget']}; {start['profile_clock']} "
                  f"time, wall/CPU {start['profile_contention'] or float('nan'):.2f})  "
                  f"ready in {start['ready_s']} s  load {start['load_1min']}", flush=True)
    verdicts = {json.dumps(s["serves"], sort_keys=True) for s in starts}
    print(f"{len(verdicts)} distinct verdict(s) in {len(starts)} starts: {', '.join(sorted(verdicts))}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"model": args.model, "serve_args": args.serve_args, "starts": starts,
                                         "distinct_verdicts": len(verdicts),
                                         "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
