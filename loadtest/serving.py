"""`python -m loadtest.serving`: the serving table. For each concurrency level N, N sessions of one
mode against a real daemon (`sessiond serve --policy kv`, its own process, admission by memory only
so that the sweep measures the engine and not the admission): world players sending their action
streams, or directors asking for segments back to back. Per level: frames/s generated in all, time
to first frame p50/p95, real-time factor (wall time over media time: a director's segment from its
`direct` to its last frame over the segment's length; a world session's frames from first to last
over the media time they carry; mean and p95), deadline-miss rate and engine seconds per media
second (the daemon's step time over the media it generated). Each figure is the mean over several
daemon starts, their spread beside it.

Writes DIR/serving.json, DIR/serving.md and DIR/serving.png; `--help` lists the knobs."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from fleet.local import provenance
from loadtest.replay.daemon_process import DaemonSpec, served, until_idle
from loadtest.replay.percentiles import percentile
from loadtest.replay.report import build_report
from loadtest.replay.runner import ReplayOutcome, run_replay
from loadtest.serving_report import FIGURES, format_serving, write_serving_plot
from loadtest.trace_tools.generator import DirectorParams, GameParams, director_trace, game_trace
from sessiond.traces.format import Trace

__all__ = ["ServingConfig", "compare_strategies", "level_figures", "level_trace", "main", "run_serving"]

_STEP_SUM = re.compile(r'^sessiond_step_seconds_sum\{phase="([a-z_]+)"\} (\S+)$', re.MULTILINE)
_WORLD_SETTLE_S = 1.0
_FRAMES = re.compile(r"^sessiond_frames_generated_total (\S+)$", re.MULTILINE)


@dataclass(frozen=True)
class ServingConfig:
    model: str = "demo"
    device: str = "cpu"
    mode: str = "world"  # world | director
    levels: tuple[int, ...] = (1, 2, 4, 8, 16)
    starts: int = 2  # daemon starts; each serves every level once
    seconds: float = 20.0  # world: seconds of play per level
    segments: int = 2  # director: segments each session asks for back to back
    segment_s: float = 5.0
    max_batch: int = 8
    cpu_threads: int | None = None
    serve_extra: tuple[str, ...] = ()
    strategy: str | None = None  # the daemon's --strategy file; None: the default strategy


def level_trace(cfg: ServingConfig, sessions: int, seed: int) -> Trace:
    """The load of one level: players pressing keys without pause, or directors whose next direction
    follows their last segment (replayed saturating: every session starts at once, think time dropped)."""
    if cfg.mode == "world":
        return game_trace(GameParams(sessions=sessions, duration_s=cfg.seconds, burst_s_mean=1e6, idle_s_mean=0.3,
                                     menu_pause_prob=0.0, interrupt_per_min=0.0, flush_per_min=0.0,
                                     reconnect_prob=0.0, start_spread_s=0.0, seed=seed), f"serving-world-{sessions}")
    duration = cfg.segments * (cfg.segment_s + 0.5) + 1.0  # exactly `segments` directions of 0.5 s think each
    return director_trace(DirectorParams(sessions=sessions, duration_s=duration, segment_s=cfg.segment_s,
                                         think_s_mean=0.01, think_s_min=0.5, first_direct_s=0.1, interrupt_prob=0.0,
                                         cut_prob=0.0, start_spread_s=0.0, seed=seed), f"serving-director-{sessions}")


def _engine_counters(url: str) -> tuple[float, float]:
    """(engine step seconds summed over phases, frames generated) from the daemon's /metrics."""
    text = httpx.get(f"{url}/metrics", timeout=10.0).text
    seconds = sum(float(v) for _, v in _STEP_SUM.findall(text))
    frames = _FRAMES.search(text)
    return seconds, float(frames.group(1)) if frames else 0.0


def _mean(values: Sequence[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.fmean(got) if got else None


def level_figures(outcome: ReplayOutcome, cfg: ServingConfig, fps: int, engine_s: float, frames_generated: float
                  ) -> dict[str, Any]:
    """The figures of one level from one replay and the daemon's counters over it."""
    report = build_report(outcome)
    admitted = [r for r in outcome.results if r.status == "admitted"]
    rtf: list[float] = []
    if cfg.mode == "director":
        rtf = [ms / (cfg.segment_s * 1000.0) for r in admitted for ms in r.segment_ms]
    else:
        for r in admitted:  # from 1 s after the first frame on: the lead arrives at once by design
            times = [t for t in r.frame_times_s if t >= r.frame_times_s[0] + _WORLD_SETTLE_S] if r.frame_times_s else []
            if len(times) > fps:
                rtf.append((times[-1] - times[0]) / ((len(times) - 1) / fps))
    received = sum(r.frames_received for r in outcome.results)
    media_s = frames_generated / fps if fps else 0.0
    return {"sessions": len(outcome.results), "admitted": len(admitted),
            "frames_per_s": received / outcome.duration_s if outcome.duration_s > 0 else None,
            "ttff_p50_ms": report["ttff_ms"]["p50"], "ttff_p95_ms": report["ttff_ms"]["p95"],
            "rtf_mean": _mean(rtf), "rtf_p95": percentile(rtf, 95),
            "miss_rate": report["frames"]["miss_rate"],
            "engine_s_per_media_s": engine_s / media_s if media_s > 0 else None,
            "stalls": report["stalls"]["count"], "duration_s": outcome.duration_s}


def _spec(cfg: ServingConfig) -> DaemonSpec:
    strategy_flags = ("--strategy", cfg.strategy) if cfg.strategy is not None else ()
    return DaemonSpec(model=cfg.model, device=cfg.device, policy="kv", max_batch=cfg.max_batch,
                      cpu_threads=cfg.cpu_threads,
                      extra=("--max-sessions", str(max(cfg.levels)), *strategy_flags, *cfg.serve_extra))


def _one_start(cfg: ServingConfig, start: int, log: Path | None, say: Callable[[str], None]
               ) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None]:
    """One daemon start serving every level once: the figures per level, and the strategy as the
    daemon reported it (/v1/capacity)."""
    replay_mode = "paced" if cfg.mode == "world" else "saturating"
    with served(_spec(cfg), log) as daemon:
        fps = int(daemon.capacity["engine"]["fps"])
        placement = daemon.capacity.get("strategy")
        named = f", strategy {placement['name']}" if placement else ""
        say(f"start {start + 1}/{cfg.starts}: {cfg.model} on {cfg.device}{named}, ready after "
            f"{daemon.ready_after_s:.1f} s")
        levels: dict[str, dict[str, Any]] = {}
        for n in cfg.levels:
            before = _engine_counters(daemon.url)
            outcome = asyncio.run(run_replay(level_trace(cfg, n, seed=1000 * start + n), daemon.url,
                                             mode=replay_mode))
            after = _engine_counters(daemon.url)
            figures = level_figures(outcome, cfg, fps, after[0] - before[0], after[1] - before[1])
            levels[str(n)] = figures
            say(f"  {cfg.mode} x{n}: " + ", ".join(f"{k} {_fmt(figures[k])}" for k in FIGURES))
            if not asyncio.run(until_idle(daemon.url)):
                raise RuntimeError(f"the daemon at {daemon.url} still holds sessions 60 s after a level")
    return levels, placement


def _result(cfg: ServingConfig, per_start: list[dict[str, dict[str, Any]]], placement: dict[str, Any] | None,
            out: Path | None, say: Callable[[str], None]) -> dict[str, Any]:
    table = {str(n): _combine([s[str(n)] for s in per_start]) for n in cfg.levels}
    result = {"provenance": provenance("python -m loadtest.serving " + " ".join(sys.argv[1:])),
              "config": {**cfg.__dict__, "levels": list(cfg.levels)},
              "daemon": {"policy": "kv", "max_sessions": max(cfg.levels), "starts": len(per_start)},
              "strategy": placement, "levels": table, "per_start": per_start}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "serving.json").write_text(json.dumps(result, indent=1) + "\n")
        (out / "serving.md").write_text(format_serving(result) + "\n")
        write_serving_plot(result, out / "serving.png")
    say(format_serving(result))
    return result


def run_serving(cfg: ServingConfig, out: Path | None = None, say: Callable[[str], None] = print) -> dict[str, Any]:
    per_start: list[dict[str, dict[str, Any]]] = []
    placement: dict[str, Any] | None = None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    for start in range(cfg.starts):
        levels, placement = _one_start(cfg, start, out / f"daemon-{start + 1}.log" if out is not None else None, say)
        per_start.append(levels)
    return _result(cfg, per_start, placement, out, say)


def compare_strategies(cfg: ServingConfig, strategies: Sequence[str], out: Path | None = None,
                       say: Callable[[str], None] = print) -> dict[str, dict[str, Any]]:
    """The sweep under each strategy file, their daemon starts interleaved (start 1 of each, then
    start 2 of each, ...) so that a shared machine's drift falls on every strategy alike; one
    result per strategy (in OUT/<file stem>/) and OUT/compare.md, the tables one under the other."""
    per_start: dict[str, list[dict[str, dict[str, Any]]]] = {s: [] for s in strategies}
    placements: dict[str, dict[str, Any] | None] = dict.fromkeys(strategies)
    for start in range(cfg.starts):
        for strategy in strategies:
            folder = out / Path(strategy).stem if out is not None else None
            if folder is not None:
                folder.mkdir(parents=True, exist_ok=True)
            one = replace(cfg, strategy=strategy)
            levels, placements[strategy] = _one_start(one, start, folder / f"daemon-{start + 1}.log"
                                                      if folder is not None else None, say)
            per_start[strategy].append(levels)
    results = {s: _result(replace(cfg, strategy=s), per_start[s], placements[s],
                          out / Path(s).stem if out is not None else None, lambda _: None) for s in strategies}
    text = "\n\n".join(format_serving(r) for r in results.values())
    if out is not None:
        (out / "compare.md").write_text("Daemon starts interleaved across the strategies (start 1 of each in turn, "
                                        "then start 2, ...).\n\n" + text + "\n")
    say(text)
    return results


def _combine(starts: list[dict[str, Any]]) -> dict[str, Any]:
    """Per figure the mean over the daemon starts and its spread (max - min)."""
    out: dict[str, Any] = {}
    for key in (*FIGURES, "admitted", "stalls"):
        values = [s[key] for s in starts if s.get(key) is not None]
        out[key] = statistics.fmean(values) if values else None
        out[f"{key}_spread"] = (max(values) - min(values)) if len(values) > 1 else None
    return out


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.3g}" if isinstance(value, float) else str(value)


def _levels(text: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(x) for x in text.split(",") if x)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--levels takes whole numbers separated by commas, got {text!r}") from None
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError(f"--levels takes whole numbers >= 1, got {text!r}")
    return levels


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadtest.serving", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="demo", help="model config (default demo; wan-1.3b-world-preview on the H200)")
    p.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    p.add_argument("--mode", choices=("world", "director"), default="world", help="the sessions' mode")
    p.add_argument("--levels", type=_levels, default=(1, 2, 4, 8, 16), help="concurrency levels (default 1,2,4,8,16)")
    p.add_argument("--starts", type=int, default=2, help="daemon starts to average over (default 2)")
    p.add_argument("--seconds", type=float, default=20.0, help="world: seconds of play per level (default 20)")
    p.add_argument("--segments", type=int, default=2, help="director: segments per session (default 2)")
    p.add_argument("--segment-s", type=float, default=5.0, help="director: media seconds per segment (default 5)")
    p.add_argument("--max-batch", type=int, default=8, help="the daemon's --max-batch (default 8)")
    p.add_argument("--cpu-threads", type=int, default=None, help="the daemon's --cpu-threads")
    p.add_argument("--serve-arg", action="append", default=[], metavar="FLAG",
                   help="a further `sessiond serve` flag, e.g. --serve-arg=--lead-chunks=1 (repeatable)")
    p.add_argument("--strategy", action="append", default=[], metavar="FILE",
                   help="the daemon's execution strategy (sessiond serve --strategy; examples in strategies/); "
                        "repeat it to compare strategies, their daemon starts interleaved (OUT/<file stem>/ each, "
                        "OUT/compare.md)")
    p.add_argument("--out", default=None, metavar="DIR", help="write serving.json, serving.md and serving.png")
    args = p.parse_args(argv)
    if args.starts < 1 or args.seconds <= 0 or args.segments < 1 or args.segment_s <= 0:
        print("serving: --starts and --segments must be >= 1, --seconds and --segment-s > 0", file=sys.stderr)
        return 2
    cfg = ServingConfig(model=args.model, device=args.device, mode=args.mode, levels=args.levels, starts=args.starts,
                        seconds=args.seconds, segments=args.segments, segment_s=args.segment_s,
                        max_batch=args.max_batch, cpu_threads=args.cpu_threads, serve_extra=tuple(args.serve_arg),
                        strategy=args.strategy[0] if len(args.strategy) == 1 else None)
    out = Path(args.out) if args.out else None
    try:
        if len(args.strategy) > 1:
            compare_strategies(cfg, args.strategy, out)
        else:
            run_serving(cfg, out)
    except RuntimeError as exc:
        print(f"serving: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
