"""The session timeline: 90 kHz pts on one constant-frame-rate clock (PROTOCOL.md, Time)."""

from __future__ import annotations

__all__ = ["PTS_HZ", "pts_for"]

PTS_HZ = 90000


def pts_for(n: int, fps: int) -> int:
    """pts of the n-th frame ever sent (n from 0) on a session running at `fps`.

    round(n * 90000 / fps) in exact integer arithmetic, halves rounded up (as JavaScript's
    Math.round does), so every implementation agrees for any n and fps."""
    if n < 0:
        raise ValueError(f"frame number must be >= 0, got {n}")
    if fps <= 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    return (2 * n * PTS_HZ + fps) // (2 * fps)
