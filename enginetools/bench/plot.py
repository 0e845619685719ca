"""A small PNG of frames/s against batch size per workload (matplotlib, imported only here)."""

from __future__ import annotations

from pathlib import Path

from engine.errors import ConfigError

__all__ = ["plot_fps"]

FIGSIZE = (6.4, 4.0)
DPI = 110


def plot_fps(workloads: dict[str, dict[int, dict[str, object]]], title: str, path: str | Path) -> None:
    """Aggregate (solid) and per-session (dashed) frames/s vs batch, one colour per workload."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot as plt
    except ImportError as exc:
        raise ConfigError(
            "plot_unavailable", f"--plot needs matplotlib installed ({exc}); drop --plot"
        ) from exc
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
    for name, all_runs in workloads.items():
        runs = {b: run for b, run in all_runs.items() if "error" not in run}
        batches = sorted(runs)
        aggregate = [float(runs[b]["fps_aggregate"]) for b in batches]  # type: ignore[arg-type]
        per_session = [float(runs[b]["fps_per_session_mean"]) for b in batches]  # type: ignore[arg-type]
        (line,) = ax.plot(batches, aggregate, marker="o", label=f"{name}: aggregate")
        ax.plot(
            batches,
            per_session,
            marker="x",
            linestyle="--",
            color=line.get_color(),
            label=f"{name}: per session",
        )
    ax.set_xlabel("sessions batched")
    ax.set_ylabel("frames/s")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(str(path))
    plt.close(fig)
