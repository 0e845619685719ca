"""Levers timed in alternating rounds (base, lever, base, lever, ...): per lever and workload the
median over the rounds and their spread, and a lever table where a gain counts only when it
exceeds the spread of both sides (two runs of three chunks once differed by 20%)."""

from __future__ import annotations

import statistics

from enginetools.bench.levers import Lever

__all__ = ["aggregate", "lever_table"]

Summary = dict[str, object]


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


def _numbers(runs: list[Summary], key: str) -> list[float]:
    return [float(v) for run in runs if isinstance(v := run.get(key), int | float)]


def _phase_p50s(runs: list[Summary]) -> dict[str, float]:
    """Median over rounds of each phase's p50 in ms."""
    phases: dict[str, list[float]] = {}
    for run in runs:
        for name, phase in run.get("phases", {}).items():  # type: ignore[attr-defined]
            if "p50_ms" in phase:
                phases.setdefault(name, []).append(float(phase["p50_ms"]))
    return {name: _median(values) for name, values in sorted(phases.items())}


def aggregate(rounds: list[dict[str, dict[str, Summary]]]) -> dict[str, dict[str, Summary]]:
    """rounds[r][lever][workload] = one round's run summary -> per lever and workload: the median
    GPU s per media s with its per-round values, min, max and spread (max - min), the medians of
    frames/s, first frames and phase p50s, and the last round's full summary."""
    out: dict[str, dict[str, Summary]] = {}
    for per_round in rounds:
        for lever in per_round:
            out.setdefault(lever, {})
    for lever, per_workload in out.items():
        keys = list(dict.fromkeys(k for per_round in rounds for k in per_round.get(lever, {})))
        for key in keys:
            runs = [per_round[lever][key] for per_round in rounds if key in per_round.get(lever, {})]
            cost = _numbers(runs, "gpu_s_per_media_s")
            ttff = _numbers(runs, "ttff_ms")
            fps = _numbers(runs, "fps_aggregate")
            per_workload[key] = {
                "rounds": len(runs),
                "gpu_s_per_media_s": _median(cost) if cost else None,
                "gpu_s_per_media_s_rounds": cost,
                "min": min(cost) if cost else None,
                "max": max(cost) if cost else None,
                "spread": (max(cost) - min(cost)) if cost else None,
                "fps_aggregate": _median(fps) if fps else None,
                "ttff_ms": _median(ttff) if ttff else None,
                "ttff_ms_rounds": ttff,
                "phases_p50_ms": _phase_p50s(runs),
                "chunks_per_session": runs[-1].get("chunks_per_session"),
                "batch": runs[-1].get("batch"),
                "workload": runs[-1].get("workload"),
                "last_round": runs[-1],
            }
    return out


def lever_table(levers: dict[str, dict[str, Summary]]) -> list[dict[str, object]]:
    """Each lever against the one it adds its last part to (its parent; "base" for a single part)
    when that was measured too: gain = parent's median - its median, in GPU s per media s and in %;
    it counts when the gain exceeds the larger of the two spreads."""
    rows: list[dict[str, object]] = []
    for name, per_workload in levers.items():
        if name == "base":
            continue
        try:
            parent = Lever.parse(name).parent
        except ValueError:  # a named stack (stacked_all, stacked_chosen): against base
            parent = "base"
        if parent not in levers:
            parent = "base"
        if parent not in levers or parent == name:
            continue
        for key, run in per_workload.items():
            ref = levers[parent].get(key)
            if ref is None or run["gpu_s_per_media_s"] is None or ref["gpu_s_per_media_s"] is None:
                continue
            base_cost, cost = float(ref["gpu_s_per_media_s"]), float(run["gpu_s_per_media_s"])  # type: ignore[arg-type]
            spread = max(float(ref["spread"] or 0.0), float(run["spread"] or 0.0))  # type: ignore[arg-type]
            gain = base_cost - cost
            rows.append({"lever": name, "against": parent, "workload": key, "median": cost, "against_median": base_cost,
                         "gain": gain, "gain_pct": 100.0 * gain / base_cost, "spread": spread, "counts": gain > spread})
    return rows
