"""The serving table's Markdown and plot (see loadtest.serving)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["FIGURES", "format_serving", "write_serving_plot"]

# figure -> column heading
FIGURES = {"frames_per_s": "frames/s (all)", "ttff_p50_ms": "ttff p50 ms", "ttff_p95_ms": "ttff p95 ms",
           "rtf_mean": "RTF mean", "rtf_p95": "RTF p95", "miss_rate": "miss rate",
           "engine_s_per_media_s": "engine s / media s"}


def _cell(mean: Any, spread: Any, key: str) -> str:
    if mean is None:
        return "-"
    digits = 0 if key.endswith("_ms") else 1 if key == "admitted" else 3 if key in ("miss_rate", "engine_s_per_media_s") else 2
    text = f"{mean:.{digits}f}"
    return text if spread is None else f"{text} ±{spread / 2:.{digits}f}"


def format_serving(result: dict[str, Any]) -> str:
    """One row per concurrency level: the mean over daemon starts, ± half their range."""
    cfg = result["config"]
    head = ["sessions", "admitted", *FIGURES.values()]
    lines = [f"{cfg['mode']} sessions, {cfg['model']} on {cfg['device']}, mean of {result['daemon']['starts']} daemon "
             f"starts (± half the range), `sessiond serve --policy kv{_strategy_flag(result)}`{_strategy_note(result)}",
             "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n, row in result["levels"].items():
        cells = [n, _cell(row["admitted"], None, "admitted")]
        cells += [_cell(row[key], row[f"{key}_spread"], key) for key in FIGURES]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _strategy_flag(result: dict[str, Any]) -> str:
    """` --strategy FILE` for a run with a strategy file, else nothing."""
    strategy = result.get("strategy") or {}
    return f" --strategy {strategy['path']}" if strategy.get("path") else ""


def _strategy_note(result: dict[str, Any]) -> str:
    """Where the strategy put the decoder and how many replicas, as the daemon reported it."""
    strategy = result.get("strategy") or {}
    if not strategy.get("path"):
        return ""
    replicas = strategy.get("engine", {}).get("replicas", 1)
    more = f", {replicas} engine replicas" if replicas > 1 else ""
    return f" (strategy {strategy.get('name')}: decoder {strategy.get('decoder', '?')}{more})"


def write_serving_plot(result: dict[str, Any], path: Path) -> Path:
    levels = [int(n) for n in result["levels"]]
    rows = list(result["levels"].values())
    fig = Figure(figsize=(11, 4), layout="constrained")
    panels = (("frames_per_s", "frames/s generated (all sessions)"), ("ttff_p95_ms", "time to first frame p95 (ms)"),
              ("rtf_mean", "real-time factor (mean; >1 slower than real time)"))
    for i, (key, title) in enumerate(panels):
        ax = fig.add_subplot(1, 3, i + 1)
        xs = [n for n, r in zip(levels, rows, strict=True) if r[key] is not None]
        ys = [r[key] for r in rows if r[key] is not None]
        errs = [(r[f"{key}_spread"] or 0.0) / 2 for r in rows if r[key] is not None]
        ax.errorbar(xs, ys, yerr=errs, marker="o", capsize=3)
        if key == "rtf_mean":
            ax.axhline(1.0, color="tab:red", linestyle="--", linewidth=1)
        if len(levels) > 1:  # one level alone has no range to put on a log axis
            ax.set_xscale("log", base=2)
        ax.set_xticks(levels, [str(n) for n in levels])
        ax.set_xlabel("concurrent sessions")
        ax.set_title(title, fontsize=9)
        ax.grid(True, alpha=0.3)
    cfg = result["config"]
    strategy = (result.get("strategy") or {}).get("name", "default")
    fig.suptitle(f"serving: {cfg['mode']}, {cfg['model']} on {cfg['device']}, strategy {strategy}", fontsize=10)
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=100)
    return path
