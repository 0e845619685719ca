"""A world session's lead: how long before its first frame plays a chunk is begun.

The lead is a chunk's whole budget (wait for the engine, generate, decode, hand over), and the
player meets it in every key press: a chunk's actions are sampled when it begins, so on the World
page action-to-photon is the lead plus the transport's ~60 ms. A fixed lead must cover the slowest
machine and load it may run on; this one follows what the session's own chunks measured:

    lead = min(ceiling, max(floor, headroom x the largest need of the last `window` chunks + pad + extra))

A chunk's *need* is the seconds from its start-by (deadline - lead) to its frames arriving: the
wait behind other sessions' chunks, the engine's time and the hand-over, everything that decides
whether the frames come in time. The ceiling is the configured lead (`--lead-chunks`, else the
model's advice): never more than before. The measured lead holds only while the session has the
engine to itself: beside other sessions a chunk waits behind steps whose size changes with every
segment a director starts, which the needs measured before cannot foresee, and the start plan of a
new segment (`sessiond.runtime.start_plan`) must be able to move a world chunk earlier; there the
lead is the ceiling (replayed at the engine issue's target costs, world sessions at a measured
~0.3 s lead beside directors made the plan advise those directors start delays of 8-16 s). Until
`min_samples` chunks were measured the lead is the ceiling. A miss (frames after their deadline)
adds half a chunk to `extra` (up to the ceiling), which halves after every `calm_chunks` chunks
without a miss: one slow moment costs latency for a while, not a stream of stalls.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

__all__ = ["WorldLead"]


@dataclass
class WorldLead:
    ceiling_s: float  # the configured lead in seconds: the most this lead ever is
    chunk_s: float  # media seconds per chunk
    adaptive: bool = True  # False: always the ceiling (`--fixed-lead`)
    window: int = 64  # chunks whose needs are kept (16 s of the demo's 250 ms chunks)
    min_samples: int = 8
    headroom: float = 1.1  # x the largest need
    pad_s: float = 0.03  # + this (the transport's encode and the clock's wake-up)
    floor_frac: float = 0.25  # the lead is at least this share of a chunk
    calm_chunks: int = 128
    misses: int = 0
    _needs: deque[float] = field(default_factory=deque, repr=False)
    _need_max: float = 0.0  # the largest of `_needs`, kept as they change (the scheduler asks often)
    _extra_s: float = 0.0
    _calm: int = 0

    def __post_init__(self) -> None:
        if self.ceiling_s <= 0 or self.chunk_s <= 0:
            raise ValueError(f"lead and chunk must be positive seconds, got {self.ceiling_s}, {self.chunk_s}")
        self._needs = deque(maxlen=self.window)

    def lead_s(self, cap_s: float | None = None, *, shared: bool = False) -> float:
        """Seconds before a chunk's deadline to begin it; `cap_s` (admission cut this session's
        lead) lowers the ceiling; `shared` (other sessions are open beside it): the ceiling."""
        ceiling = self.ceiling_s if cap_s is None else min(self.ceiling_s, cap_s)
        if shared or not self.adaptive or len(self._needs) < self.min_samples:
            return ceiling
        wanted = self.headroom * self._need_max + self.pad_s + self._extra_s
        return min(ceiling, max(self.floor_frac * self.chunk_s, wanted))

    def observe(self, need_s: float, missed: bool) -> None:
        """One chunk's need (seconds from its start-by until its frames arrived) and whether its
        frames came after their deadline."""
        self._needs.append(max(0.0, need_s))
        self._need_max = max(self._needs)
        if missed:
            self.misses += 1
            self._extra_s = min(self.ceiling_s, self._extra_s + 0.5 * self.chunk_s)
            self._calm = 0
            return
        self._calm += 1
        if self._calm >= self.calm_chunks and self._extra_s > 0:
            self._extra_s = self._extra_s / 2 if self._extra_s > 0.01 else 0.0
            self._calm = 0

    def snapshot(self) -> dict[str, float | int | None]:
        """For the session's stats: the lead now, the largest need measured, the misses counted."""
        return {"lead_ms": round(1000 * self.lead_s(), 1),
                "need_max_ms": round(1000 * self._need_max, 1) if self._needs else None,
                "misses": self.misses}
