"""PNG plots of a replay: latency CDFs, sessions and load over time, admissions over time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from loadtest.replay.runner import ReplayOutcome

__all__ = ["PLOT_FILES", "write_plots"]

PLOT_FILES = ("latency_cdf.png", "load.png", "admissions.png")


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=100)
    return path


def _latency(outcome: ReplayOutcome, title: str) -> Figure:
    fig = Figure(figsize=(8, 5), layout="constrained")
    ax = fig.add_subplot()
    series = {
        "time to first frame": [x for r in outcome.results for x in r.ttff_ms],
        "segment": [x for r in outcome.results for x in r.segment_ms],
        "action to photon": [x for r in outcome.results for x in r.action_to_photon_ms],
        "interrupt to ack": [x for r in outcome.results for x in r.interrupt_ms],
    }
    drawn = 0
    for label, samples in series.items():
        if not samples:
            continue
        xs = sorted(max(x, 0.01) for x in samples)
        ys = [(i + 1) / len(xs) for i in range(len(xs))]
        ax.step(xs, ys, where="post", label=f"{label} (n={len(xs)})")
        drawn += 1
    if drawn:
        ax.set_xscale("log")
        ax.legend(loc="lower right")
    else:
        ax.text(0.5, 0.5, "no latency samples", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("ms")
    ax.set_ylabel("fraction of samples")
    ax.set_title(f"{title}: latency CDFs")
    ax.grid(True, which="both", alpha=0.3)
    return fig


def _load(outcome: ReplayOutcome, report: dict[str, Any], title: str) -> Figure:
    fig = Figure(figsize=(8, 5), layout="constrained")
    ax = fig.add_subplot()
    tl = outcome.timeline
    ax.step(tl.get("t", []), tl.get("active", []), where="post", label="sessions live", color="tab:blue")
    fps = report["timeline"]["frames_per_s"]
    ax.plot(fps["t"], [v / 10.0 for v in fps["fps"]], label="frames received per s / 10", color="tab:green",
            alpha=0.7)
    ax.set_xlabel("seconds since replay start")
    ax.set_ylabel("sessions  |  frames/s / 10")
    loads = [(t, v) for t, v in zip(tl.get("t", []), tl.get("predicted_load", []), strict=False) if v is not None]
    if loads:
        twin = ax.twinx()
        twin.plot([t for t, _ in loads], [v for _, v in loads], color="tab:red", label="predicted load (daemon)")
        twin.set_ylabel("predicted GPU load")
        twin.legend(loc="upper right")
    ax.legend(loc="upper left")
    ax.set_title(f"{title}: sessions and load over time")
    ax.grid(True, alpha=0.3)
    return fig


def _admissions(outcome: ReplayOutcome, title: str) -> Figure:
    fig = Figure(figsize=(8, 4), layout="constrained")
    ax = fig.add_subplot()
    for status, color in (("admitted", "tab:green"), ("rejected", "tab:red"), ("failed", "tab:gray")):
        times = sorted(r.admitted_at_s if r.admitted_at_s is not None else (r.ended_at_s or 0.0)
                       for r in outcome.results if r.status == status)  # failed: when it failed
        if times:
            ax.step([0.0, *times], list(range(len(times) + 1)), where="post", color=color,
                    label=f"{status} ({len(times)})")
    ax.set_xlabel("seconds since replay start")
    ax.set_ylabel("sessions (cumulative)")
    ax.set_title(f"{title}: admissions")
    ax.grid(True, alpha=0.3)
    if outcome.results:
        ax.legend(loc="upper left")
    return fig


def write_plots(outcome: ReplayOutcome, report: dict[str, Any], directory: str | Path) -> list[Path]:
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    title = f"{report['trace']} ({report.get('policy') or 'policy ?'})"
    return [_save(_latency(outcome, title), folder / PLOT_FILES[0]),
            _save(_load(outcome, report, title), folder / PLOT_FILES[1]),
            _save(_admissions(outcome, title), folder / PLOT_FILES[2])]
