"""Median wall time of a call after the device has finished it (for start-up choices and probes)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

__all__ = ["median_seconds"]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_seconds(fn: Callable[[], object], device: torch.device, repeats: int = 3, warm: bool = True) -> float:
    """Median seconds of `repeats` calls of `fn`, each timed from a synchronized start to a
    synchronized end; with `warm`, one untimed call first (allocations, algorithm choice)."""
    if warm:
        fn()
    times = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)
