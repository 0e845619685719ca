"""Percentiles over all samples; a statistic with no samples is None (JSON null), never 0."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

__all__ = ["percentile", "summarize"]


def percentile(samples: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between closest ranks
    (NumPy's default method); None for no samples."""
    if not samples:
        return None
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be in [0, 100], got {q}")
    ordered = sorted(samples)
    rank = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(rank), math.ceil(rank)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


def summarize(samples: Iterable[float], keys: Sequence[str] = ("p50", "p95", "max"), digits: int = 3
              ) -> dict[str, float | None]:
    """{"p50": .., "p95": .., "max": ..} (any of p50, p90, p95, p99, max, min, mean), rounded."""
    values = list(samples)
    out: dict[str, float | None] = {}
    for key in keys:
        if not values:
            out[key] = None
        elif key == "max":
            out[key] = round(max(values), digits)
        elif key == "min":
            out[key] = round(min(values), digits)
        elif key == "mean":
            out[key] = round(sum(values) / len(values), digits)
        else:
            value = percentile(values, float(key[1:]))
            out[key] = None if value is None else round(value, digits)
    return out
