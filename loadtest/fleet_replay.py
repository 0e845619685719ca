"""`python -m loadtest.fleet_replay TRACE --out DIR`: the fleet replay benchmark. In one run on this
host, a private fleet (redis-server, `sessiond serve --fleet` workers, a `sessiond gateway`) first
serves the trace with one worker, then with `--workers` workers (the others started after the
first replay), each replay through the gateway. The figure is sessions within objective: the
fleet should serve at least `--target` x workers x what one worker served.

Writes DIR/single.json and DIR/fleet.json (the replay reports), DIR/summary.json (both counts,
the ratio, provenance) and DIR/within_objective.png, plus each replay's own plots."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from fleet.local import local_fleet, provenance
from loadtest.replay.plots import write_plots
from loadtest.replay.report import build_report, format_table
from loadtest.replay.runner import run_replay
from sessiond.admission.decision import Objectives
from sessiond.traces.format import Trace, load_trace

__all__ = ["main", "ratio_of"]

DEFAULT_SERVE = ("--model", "tiny", "--device", "cpu", "--cpu-threads", "1", "--policy", "kv", "--max-sessions", "4")


def ratio_of(single_within: int, fleet_within: int, workers: int) -> float | None:
    """Fleet sessions within objective over `workers` x one worker's (None when one worker served none)."""
    return fleet_within / (workers * single_within) if single_within else None


async def _replay(trace: Trace, url: str, out: Path, name: str, speed: float) -> dict[str, Any]:
    outcome = await run_replay(trace, url, speed=speed, mode="paced", objectives=Objectives())
    report = build_report(outcome)
    print(f"--- {name}\n{format_table(report)}", flush=True)
    (out / f"{name}.json").write_text(json.dumps(report, indent=1) + "\n")
    write_plots(outcome, report, out / name)
    return report


async def _idle(url: str, timeout_s: float = 60.0) -> None:
    """Until the fleet holds no session (the replay's sessions closed or timed out)."""
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(timeout=5) as http:
        while time.monotonic() < deadline:
            body = (await http.get(f"{url}/v1/capacity")).json()
            if body["totals"]["sessions"] == 0:
                return
            await asyncio.sleep(0.5)
    raise RuntimeError(f"the fleet still holds sessions {timeout_s:.0f} s after the replay")


async def _run(args: argparse.Namespace, trace: Trace, serve: list[str], out: Path) -> dict[str, Any]:
    with local_fleet(out / "logs") as fleet:
        fleet.start_worker("bench/cpu-0", *serve)
        url = fleet.start_gateway()
        await asyncio.to_thread(fleet.wait_ready)
        single = await _replay(trace, url, out, "single", args.speed)
        await _idle(url)
        for i in range(1, args.workers):
            fleet.start_worker(f"bench/cpu-{i}", *serve)
        await asyncio.to_thread(fleet.wait_ready)
        peaks: dict[str, int] = {}
        sampler = asyncio.create_task(_peak_sessions(url, peaks))
        try:
            many = await _replay(trace, url, out, "fleet", args.speed)
        finally:
            sampler.cancel()
    s_within, f_within = single["sessions"]["within_objective"], many["sessions"]["within_objective"]
    ratio = ratio_of(s_within, f_within, args.workers)
    return {"provenance": provenance("python -m loadtest.fleet_replay " + " ".join(args.argv)), "trace": args.trace, "serve_args": serve, "workers": args.workers,
            "single": {k: single["sessions"][k] for k in ("total", "admitted", "rejected", "within_objective")},
            "fleet": {k: many["sessions"][k] for k in ("total", "admitted", "rejected", "within_objective")},
            "fleet_peak_sessions_per_worker": peaks,
            "ratio_to_workers_x_single": ratio, "target": args.target,
            "met": ratio is not None and ratio >= args.target}


async def _peak_sessions(url: str, peaks: dict[str, int]) -> None:
    """The most sessions each worker held at once, from the gateway's capacity view every second."""
    async with httpx.AsyncClient(timeout=5) as http:
        while True:
            try:
                for w in (await http.get(f"{url}/v1/capacity")).json()["workers"]:
                    peaks[w["worker"]] = max(peaks.get(w["worker"], 0), int(w["sessions"]))
            except (httpx.HTTPError, ValueError, KeyError):
                pass
            await asyncio.sleep(1.0)


def _plot(summary: dict[str, Any], path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    n = summary["workers"]
    single, many = summary["single"]["within_objective"], summary["fleet"]["within_objective"]
    bars = ax.bar(["1 worker", f"{n} workers (gateway)"], [single, many], color=["#888", "#3a7"])
    ax.axhline(summary["target"] * n * single, color="#c33", linestyle="--",
               label=f"target: {summary['target']:.0%} of {n} x one worker")
    ax.bar_label(bars)
    ax.set_ylabel("sessions within objective")
    ax.set_title(f"{Path(summary['trace']).name}: fleet replay")
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="python -m loadtest.fleet_replay", description=__doc__.split("\n\n")[0])
    p.add_argument("trace", help="the trace (e.g. from `sessiond trace-gen mixed --sessions 24 --duration 60`)")
    p.add_argument("--out", required=True, help="directory for the reports, the plot and the logs")
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--speed", type=float, default=1.0)
    p.add_argument("--target", type=float, default=0.9, help="the fleet's share of workers x one worker's count")
    p.epilog = f"Options after `--` go to every worker's `sessiond serve` (default: {' '.join(DEFAULT_SERVE)})."
    cut = argv.index("--") if "--" in argv else len(argv)
    args = p.parse_args(argv[:cut])
    args.argv = argv
    serve = argv[cut + 1:] or list(DEFAULT_SERVE)
    if args.workers < 2:
        p.error(f"--workers must be at least 2 (the fleet is compared with one worker), got {args.workers}")
    trace = load_trace(args.trace)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = asyncio.run(_run(args, trace, serve, out))
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    _plot(summary, out / "within_objective.png")
    r = summary["ratio_to_workers_x_single"]
    print(f"within objective: one worker {summary['single']['within_objective']}, {args.workers} workers "
          f"{summary['fleet']['within_objective']}; ratio to {args.workers} x one worker: "
          f"{'n/a' if r is None else f'{r:.2f}'} (target {args.target}): {'met' if summary['met'] else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
