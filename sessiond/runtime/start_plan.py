"""A new director segment's start delay from the scheduler's plan for every open session
(`sessiond.admission.edf_plan`): what the open sessions still owe, read from their state, served
by deadline on the cost model's step times stretched to the load budget (`1 - margin`: the margin
absorbs what the model does not see)."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sessiond.admission.edf_plan import Periodic, PlanChunk, SegmentAsk, start_delay
from sessiond.session.lifecycle import SessionState
from sessiond.session.session import Session

__all__ = ["PlanInputs", "plan_segment_start", "plan_workload"]

logger = logging.getLogger(__name__)

_IDLE_STATES = (SessionState.OFFLOADED, SessionState.CLOSED, SessionState.FAILED)


@dataclass(frozen=True)
class PlanInputs:
    """The figures the plan runs on: `step_s(b)`, wall seconds of a step of b chunks as planned;
    the scheduler's settings."""

    step_s: Callable[[int], float]
    max_batch: int
    frames_per_chunk: int
    fps: int
    lead_in_frames: int  # frames a decoder stream's first chunk yields fewer than the others (Wan: 3)
    director_lead_s: float
    jitter_s: float
    max_delay_s: float


def plan_workload(sessions: Mapping[str, Session], exclude: str, now: float, inputs: PlanInputs
                  ) -> tuple[list[PlanChunk], list[Periodic]]:
    """(what directors still owe, playing world sessions) for every open session but `exclude`
    (whose chunk in progress, if any, the engine finishes before its new segment's first). A
    chunk in progress is owed whole (the scheduler makes a chunk in phase steps, deadline first
    at every step, so a chunk begun is planned as if nothing of it were made yet: on the safe side).
    A world session whose buffer is dry (it just attached, came back, or starved) has its next
    chunk due now and the ones after it due from that chunk's arrival, as its viewer's clock follows
    the arrival (`Periodic.restart_s`: a step of one at least)."""
    cm = inputs.frames_per_chunk / inputs.fps
    committed: list[PlanChunk] = []
    periodic: list[Periodic] = []
    for sid, session in sessions.items():
        if sid == exclude and session.job is not None:
            # its own chunk in progress (of the segment this direction replaces) is finished first
            committed.append(PlanChunk(f"{sid}/leftover", now, now))
        if sid == exclude or session.state in _IDLE_STATES or not session.steering:  # co-players alone play too
            continue
        f = inputs.frames_per_chunk
        if session.mode == "world":
            if session.paused:
                continue
            due = session.clock.dry_at(session.out.total)
            restart = inputs.step_s(1) if due <= now else 0.0
            periodic.append(Periodic(sid, max(now, due), cm, session.world_lead_s(), restart))
            continue
        seg = session.segment
        if seg is None or seg.complete:
            continue
        made = seg.frames_generated
        short = inputs.lead_in_frames if session.fresh_stream else 0  # its next chunk starts a stream
        for k in range(math.ceil((max(0, seg.frames_target - made) + short) / f)):
            deadline = seg.started_at + seg.delay_s + (made + max(0, k * f - short)) / inputs.fps
            committed.append(PlanChunk(sid, deadline - inputs.director_lead_s, deadline, inputs.jitter_s))
    return committed, periodic


def plan_segment_start(sessions: Mapping[str, Session], session_id: str, now: float, segment_s: float,
                       lead_in_s: float, inputs: PlanInputs) -> float:
    """Seconds from a `direct` of `session_id` until its segment may start playing so that it and
    every open session keep their deadlines in the scheduler's plan; `inputs.max_delay_s` when the
    plan cannot promise that sooner (the direction waits)."""
    committed, periodic = plan_workload(sessions, session_id, now, inputs)
    cm = inputs.frames_per_chunk / inputs.fps
    ask = SegmentAsk(now=now, segment_s=segment_s, chunk_media_s=cm, lead_in_s=lead_in_s, jitter_s=inputs.jitter_s,
                     lead_s=inputs.director_lead_s)
    delay = start_delay(session_id, ask, committed, start=now, step_s=inputs.step_s,
                        max_batch=inputs.max_batch, max_delay_s=inputs.max_delay_s, periodic=periodic)
    if delay is None or delay > 2.0:
        owed: dict[str, list[str]] = {}
        for c in committed:
            owed.setdefault(c.owner, []).append(f"{c.release - now:+.2f}/{c.deadline - now:+.2f}")
        worlds = [f"{p.first_deadline - now:+.3f}/{p.lead_s:.3f}/{p.restart_s:.3f}" for p in periodic]
        logger.info("plan: %s waits %s s for a %.2f s segment (lead-in %.2f s); owed (release/deadline from now): %s; "
                    "world sessions (first due from now/lead/restart, s): %s; step_s 1..%d: %s", session_id,
                    "max" if delay is None else f"{delay:.2f}", segment_s, lead_in_s, owed, worlds, inputs.max_batch,
                    [round(inputs.step_s(b), 3) for b in range(1, inputs.max_batch + 1)])
    return inputs.max_delay_s if delay is None else delay
