"""Progress of a training stage: a step or time budget, progress lines with ETA, loss history."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.profiler import record_function

__all__ = ["Budget", "LossLog", "StageClock", "save_loss_plot"]


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


class StageClock:
    """Seconds spent in each named stage of a training loop. On CUDA it records events on the
    current stream (no synchronisation inside the loop) and reads them once at the end; on the
    CPU it takes wall time. Each stage is also a ``record_function`` range for external profilers."""

    def __init__(self, device: torch.device, prefix: str) -> None:
        self.device, self.prefix = device, prefix
        self._events: dict[str, list[tuple[torch.cuda.Event, torch.cuda.Event]]] = {}
        self._seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        with record_function(f"{self.prefix}.{name}"):
            if self.device.type == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                yield
                end.record()
                self._events.setdefault(name, []).append((start, end))
            else:
                began = time.perf_counter()
                yield
                self._seconds[name] = self._seconds.get(name, 0.0) + time.perf_counter() - began

    def seconds(self) -> dict[str, float]:
        """Total seconds per stage so far, in the order the stages first ran."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            for name, pairs in self._events.items():
                self._seconds[name] = self._seconds.get(name, 0.0) + sum(a.elapsed_time(b) for a, b in pairs) / 1000.0
            self._events.clear()
        return dict(self._seconds)

    def summary(self) -> str:
        times = self.seconds()
        total = sum(times.values()) or 1.0
        return ", ".join(f"{name} {t:.1f}s ({100 * t / total:.0f}%)" for name, t in times.items())
