"""The simulator's plots (matplotlib, Agg): placement latency, directory load, worker load spread,
and sessions streaming through the failures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fleet.sim.run import SimResult

__all__ = ["write_plots"]


def write_plots(result: SimResult, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[str] = []

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        written.append(name)

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.hist([1e3 * s for s in result.placement_modelled_s], bins=60, color="tab:blue", alpha=0.8, label="modelled")
    ax.hist([1e3 * s for s in result.placement_wall_s], bins=60, color="tab:orange", alpha=0.8, label="placement code")
    ax.set(xlabel="ms per create", ylabel="creates", title="placement latency")
    ax.legend()
    save(fig, "placement_latency.png")

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(range(len(result.ops_per_s)), result.ops_per_s, color="tab:green")
    ax.set(xlabel="simulated s", ylabel="directory commands / s", title="Redis operations per second")
    save(fig, "redis_ops.png")

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.hist(result.loads_at_ramp_end, bins=50, color="tab:purple")
    ax.axvline(1.0, color="red", linestyle="--", label="one GPU")
    ax.set(xlabel="actual GPU load (GPU s per s)", ylabel="workers", title="load per worker at the end of the ramp")
    ax.legend()
    save(fig, "worker_load.png")

    fig, ax = plt.subplots(figsize=(8, 4))
    t = [p["t"] for p in result.timeline]
    ax.plot(t, [p["sessions"] for p in result.timeline], label="sessions")
    ax.plot(t, [p["within"] for p in result.timeline], label="streaming within objective")
    ax2 = ax.twinx()
    ax2.plot(t, [p["out"] for p in result.timeline], color="tab:red", label="out after a failure")
    ax2.set_ylabel("sessions out", color="tab:red")
    ax.set(xlabel="simulated s", ylabel="sessions", title="sessions through a worker and a rack failure")
    ax.legend(loc="upper left")
    save(fig, "failover.png")
    plt.close("all")
    return written
