"""When each trace event is sent: paced (trace time / speed) or saturating.

Paced: every event at its trace time divided by ``speed``.
Saturating: every session starts at once; a director's `direct` goes out as soon as its previous
segment has ended (think time dropped); every other event keeps its gap to the event before it
(divided by ``speed``), so world sessions keep their real-time action streams.
"""

from __future__ import annotations

from dataclasses import dataclass

from sessiond.traces.format import Trace, TraceEvent

__all__ = ["MODES", "Step", "session_steps"]

MODES = ("paced", "saturating")


@dataclass(frozen=True)
class Step:
    event: TraceEvent
    at_s: float | None  # paced: seconds from the replay start
    gap_s: float | None  # saturating: seconds after the previous event of this session was sent
    after_segment: bool = False  # saturating: first wait for the previous segment to end


def session_steps(trace: Trace, session: str, *, speed: float = 1.0, mode: str = "paced") -> list[Step]:
    if speed <= 0:
        raise ValueError(f"speed must be > 0, got {speed}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    events = trace.events_of(session)
    if mode == "paced":
        return [Step(e, e.t / speed, None) for e in events]
    steps: list[Step] = []
    director = bool(events) and events[0].fields.get("mode") == "director"
    directed = False
    for prev, e in zip([None, *events[:-1]], events, strict=True):
        if prev is None:
            steps.append(Step(e, None, 0.0))
        elif director and e.ev == "direct":
            steps.append(Step(e, None, 0.0, after_segment=directed))
        else:
            steps.append(Step(e, None, (e.t - prev.t) / speed))
        directed = directed or e.ev == "direct"
    return steps
