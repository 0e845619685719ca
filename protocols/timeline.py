"""The session timeline: 90 kHz pts on one constant-frame-rate clock (docs/protocol.md, Time).

The one owner of the pts rule in Python: the server's output, the transports' encoders and
containers, and the replayer's meter all take their clock from here. The browser client
mirrors `pts_for` in web/timeline.js; tests/protocols/pts_golden.json holds the values both
must produce.
"""

from __future__ import annotations

import fractions

__all__ = ["PTS_HZ", "TIME_BASE", "frame_ticks", "pts_for", "pts_seconds"]

PTS_HZ = 90000
TIME_BASE = fractions.Fraction(1, PTS_HZ)  # seconds per tick, as PyAV and aiortc take it


def pts_for(n: int, fps: int) -> int:
    """pts of the n-th frame ever sent (n from 0) on a session running at `fps`.

    round(n * 90000 / fps) in exact integer arithmetic, halves rounded up (as JavaScript's
    Math.round does), so every implementation agrees for any n and fps."""
    if n < 0:
        raise ValueError(f"frame number must be >= 0, got {n}")
    if fps <= 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    return (2 * n * PTS_HZ + fps) // (2 * fps)


def frame_ticks(n: int, fps: int) -> int:
    """How long the n-th frame lasts, in ticks: from its pts to the next frame's. Rounding makes
    neighbouring frames differ by a tick where 90000 / fps is not whole (2812 or 2813 at 32 fps)."""
    return pts_for(n + 1, fps) - pts_for(n, fps)


def pts_seconds(pts: int) -> float:
    """A pts (or a difference of two) in seconds."""
    return pts / PTS_HZ
