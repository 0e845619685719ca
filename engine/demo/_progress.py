"""Progress of a training stage: a step or time budget, progress lines with ETA, loss history."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Budget", "LossLog", "save_loss_plot", "stage_profile"]


@dataclass
class Budget:
    """Stop after ``steps`` steps if given, else after ``seconds`` of wall time."""

    name: str
    seconds: float
    steps: int | None = None
    log_every: int = 50
    started: float = field(default_factory=time.monotonic)
    step: int = 0

    def fraction(self) -> float:
        """Progress in [0, 1], used for learning-rate schedules."""
        if self.steps is not None:
            return min(1.0, self.step / max(1, self.steps))
        return min(1.0, (time.monotonic() - self.started) / max(1e-9, self.seconds))

    def done(self) -> bool:
        if self.steps is not None:
            return self.step >= self.steps
        return time.monotonic() - self.started >= self.seconds

    def tick(self, loss: float, extra: str = "") -> None:
        self.step += 1
        if self.step % self.log_every == 0 or self.step == 1 or self.done():
            elapsed = time.monotonic() - self.started
            frac = self.fraction()
            eta = elapsed * (1 - frac) / frac if frac > 0 else float("nan")
            print(f"[{self.name}] step {self.step} loss {loss:.5f} {extra} "
                  f"elapsed {elapsed:.0f}s eta {eta:.0f}s ({100 * frac:.0f}%)", flush=True)


@dataclass
class LossLog:
    """Loss per step of each named series."""

    series: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, value: float) -> None:
        self.series.setdefault(name, []).append(value)


def _smooth(values: list[float], window: int) -> list[float]:
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= window:
            acc -= values[i - window]
        out.append(acc / min(i + 1, window))
    return out


def save_loss_plot(log: LossLog, path: Path) -> None:
    """One panel per series, raw and smoothed, log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(log.series)
    fig, axes = plt.subplots(1, max(1, len(names)), figsize=(5 * max(1, len(names)), 3.6), squeeze=False)
    for ax, name in zip(axes[0], names, strict=False):
        values = log.series[name]
        ax.plot(values, alpha=0.3, linewidth=0.8, label="per step")
        ax.plot(_smooth(values, 50), linewidth=1.5, label="mean of 50")
        ax.set_yscale("log")
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


@contextmanager
def stage_profile(path: Path, prefix: str = "dit.") -> Iterator[None]:
    """Profile the enclosed run; write per training stage (``record_function`` labels starting with
    ``prefix``) host and device milliseconds, then the top operators by device time, to ``path``."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as prof:
        yield
    events = prof.key_averages()

    def device_ms(e: object) -> float:
        return float(getattr(e, "device_time_total", getattr(e, "cuda_time_total", 0.0))) / 1000.0

    lines = [f"{'stage':<20} {'calls':>6} {'host ms':>10} {'device ms':>10}"]
    for e in sorted((e for e in events if e.key.startswith(prefix)), key=lambda e: e.key):
        lines.append(f"{e.key:<20} {e.count:>6} {e.cpu_time_total / 1000.0:>10.1f} {device_ms(e):>10.1f}")
    sort = "device_time_total" if torch.cuda.is_available() else "cpu_time_total"
    text = "\n".join(lines) + "\n\n" + events.table(sort_by=sort, row_limit=25) + "\n"
    path.write_text(text)
    print(text, flush=True)
