"""The scheduler's plan for every admitted session, and a new segment's start delay from it.

The step scheduler serves ready chunks earliest deadline first across sessions, chunk by chunk
(sessiond/runtime/scheduler.py), so a director's segment never waits behind another's whole
segment: it waits only behind chunks whose playback comes before its own. This module replays
that schedule ahead of time on the cost model's figures: every chunk the open sessions still owe
(a director's rest of its segment, a playing world session's chunks over the horizon), each with
the moment the scheduler may begin it (`release`) and the moment it must be ready (`deadline`),
served in deadline order and batched as the scheduler batches (a step in flight finishes first).

A new segment of L media seconds in chunks of cm, asked for at `now`, whose playback starts
`now + d`, has chunk k ready by `now + d - jitter + max(0, k x cm - lead)` (`lead`: the media a
stream's first chunk yields fewer than the others, a causal decoder's: Wan's first chunk decodes to
9 frames, its others to 12, so every chunk after the first plays 3 frames sooner). Its start delay is the least
d such that, in that schedule, every one of its chunks is ready in time and no chunk of another
session that was on time without it becomes late: the earliest start that keeps every admitted
session within its deadlines. `None` when no d up to `max_delay_s` keeps them: the direction must
then wait longer than the plan can promise.

Making d larger moves the new segment's deadlines later, but whether it keeps everyone is not
monotone in d beside playing world sessions: their chunks come every period, and the segment's
chunks batch with them (a step of two within the period) only at some phases of its start against
theirs. Near the edge the starts that keep everyone are windows a few hundredths of a second wide,
one per period, and a bisection over d lands anywhere among them, or finds none (the direction then
waited the 60 s maximum where a start 1.2 s away kept everyone). And while a segment plays within
`lead_s`, all its chunks are released at once and made early, in steps that may leave another
director's chunks late: a short window of starts soon may be followed by seconds that keep no one (a
scene built from a rehearsal's log: 1.64-1.79 s kept, then nothing until 11.04 s). So beside world
sessions the search first looks at the next two seconds (four periods at least) in order, every two
phase steps (50 ms at least); then per phase: for each of `phases` phases of the period, the least
number of whole periods of delay that keeps everyone, by a bisection over whole periods (at a fixed
phase a later start is taken to be no worse: only what is owed before it changes), up to the last
chunk owed and the segment's own lead (past that, only an overload whose backlog the plan plays out:
there a bisection as before). The start found is refined to `resolution_s`, and a window narrower
than two phase steps is taken at its middle, so a step a little longer or shorter than planned does
not move the start out of it. Without world sessions a bisection.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Periodic", "PlanChunk", "SegmentAsk", "joins_batch", "late_chunks", "segment_chunks", "start_delay"]

_EPS = 1e-9
_NEAR_S = 2.0  # beside world sessions, the first seconds of starts are looked at in order,
_NEAR_GRID_S = 0.05  # every two phase steps, at least this far apart


@dataclass(frozen=True)
class PlanChunk:
    """One chunk in the plan: `owner` (a session id), when the scheduler may begin it (`release`),
    its scheduling deadline (`deadline`: its first frame's playback time, the scheduler's key) and
    how long before that it must be ready (`slack`: a director's playout allowance)."""

    owner: str
    release: float
    deadline: float
    slack: float = 0.0

    @property
    def ready_by(self) -> float:
        return self.deadline - self.slack


@dataclass(frozen=True)
class Periodic:
    """A playing world session: a chunk every `period_s`, the first due (its buffer runs dry) at
    `first_deadline`, each begun at most `lead_s` before it is due. `restart_s`: a session whose
    buffer is dry (it just attached, or starved) plays its next chunk when it arrives, the
    viewer's clock following it, so the chunks after the first are due `period_s` apart from that
    arrival, at least `restart_s` (a chunk's least making time) after `first_deadline`."""

    owner: str
    first_deadline: float
    period_s: float
    lead_s: float
    restart_s: float = 0.0

    def count_until(self, horizon: float) -> int:
        """How many chunks `until(horizon)` lists."""
        return max(0, math.ceil((horizon - self.first_deadline - self.restart_s) / self.period_s)) + 1

    def until(self, horizon: float) -> list[PlanChunk]:
        due = [self.first_deadline + (self.restart_s if k else 0.0) + k * self.period_s
               for k in range(self.count_until(horizon))]
        return [PlanChunk(self.owner, d - self.lead_s, d) for d in due]


@dataclass(frozen=True)
class SegmentAsk:
    """A new segment: `segment_s` media seconds in chunks of `chunk_media_s`, asked for at `now`;
    ready `jitter_s` before each chunk plays. `lead_in_s`: the media its first chunk yields fewer
    than `chunk_media_s` (a segment that starts a decoder stream; 0 otherwise): the chunks after the
    first play that much sooner, and one more chunk may be needed."""

    now: float
    segment_s: float
    chunk_media_s: float
    lead_in_s: float = 0.0
    jitter_s: float = 0.0
    lead_s: float = math.inf  # a chunk is begun at most this long before it plays (director_lead_s)

    @property
    def chunks(self) -> int:
        return max(1, math.ceil((self.segment_s + self.lead_in_s) / self.chunk_media_s - _EPS))

    @property
    def due_at_start(self) -> int:
        """Chunks that must be ready when playback starts: the first, and any whose frames the
        first one's shortfall pulls to the start (a whole chunk of lead-in: two)."""
        return 1 + math.floor(self.lead_in_s / self.chunk_media_s + _EPS)


def segment_chunks(owner: str, ask: SegmentAsk, delay_s: float) -> list[PlanChunk]:
    """The new segment's chunks when its playback starts `delay_s` after `ask.now` (all released at once)."""
    start = ask.now + delay_s
    deadlines = [start + max(0.0, k * ask.chunk_media_s - ask.lead_in_s) for k in range(ask.chunks)]
    return [PlanChunk(owner, max(ask.now, d - ask.lead_s), d, ask.jitter_s) for d in deadlines]


def joins_batch(t: float, single_s: float, more_s: float, earliest_by: float, candidate_by: float, *,
                now_s: float | None = None, next_by: float = math.inf) -> bool:
    """Whether the next ready chunk (due by `candidate_by`) joins a step begun at `t`, where a step
    of one more chunk is worth it (`more_s`: its seconds; `now_s`: the step's without it, default
    `single_s`: one chunk's): while the earliest (due by `earliest_by`) can still be met, only if the
    bigger step still meets it and makes no chunk late that is due before the candidate and would be
    on time without it (`next_by`: the earliest due of the chunks that follow this step, the batch's
    owners' next ones and the ready ones left out: a step bigger by a chunk due in ten seconds must
    not push a session's next chunk, due in one, past its time); once the earliest is lost, only if
    the candidate is lost as well (an on-time chunk would make the lost one later still, and its
    owner's next chunks late behind it). The scheduler's rule (`runtime.scheduler`) and the plan's
    (`late_chunks`), one definition."""
    if t + single_s > earliest_by:
        return t + single_s > candidate_by
    if t + more_s > earliest_by:
        return False
    before = single_s if now_s is None else now_s
    # served after this step, one chunk at least: on time if the candidate waits, late if it joins
    return not (next_by < candidate_by and t + before + single_s <= next_by < t + more_s + single_s)


def late_chunks(chunks: Sequence[PlanChunk], start: float, step_s: Callable[[int], float],
                max_batch: int = 1) -> list[PlanChunk]:
    """The chunks ready after `ready_by` when one engine serves them from `start` as the scheduler
    does: each step takes the released chunks with the earliest deadlines, at most one per session
    (a session's chunks are made in turn) and at most `max_batch`, adding the (b+1)-th only when
    `step_s(b+1) < step_s(b) + step_s(1)` and `joins_batch` says so (the scheduler's rule; the
    chunks that follow the step: the batch's owners' next ones and the ready ones left out);
    `step_s(b)`: seconds of a step of b chunks."""
    queues: dict[str, list[PlanChunk]] = {}
    for chunk in sorted(chunks, key=lambda c: c.deadline):
        queues.setdefault(chunk.owner, []).append(chunk)
    heads = {owner: 0 for owner in queues}
    late: list[PlanChunk] = []
    t = start
    while heads:
        ready = sorted((queues[o][i] for o, i in heads.items() if queues[o][i].release <= t + _EPS),
                       key=lambda c: c.deadline)
        if not ready:
            t = min(queues[o][i].release for o, i in heads.items())
            continue
        size, single = 1, step_s(1)
        while size < min(max_batch, len(ready)):
            now_s, more_s = step_s(size), step_s(size + 1)
            if more_s >= now_s + single:
                break
            after = [queues[c.owner][heads[c.owner] + 1] for c in ready[:size + 1]
                     if heads[c.owner] + 1 < len(queues[c.owner])]
            next_by = min((c.ready_by for c in [*after, *ready[size + 1:]] if c.release <= t + more_s + _EPS),
                          default=math.inf)
            if not joins_batch(t, single, more_s, ready[0].ready_by, ready[size].ready_by, now_s=now_s,
                               next_by=next_by):
                break
            size += 1
        t += step_s(size)
        for chunk in ready[:size]:
            if t > chunk.ready_by + _EPS:
                late.append(chunk)
            heads[chunk.owner] += 1
            if heads[chunk.owner] >= len(queues[chunk.owner]):
                del heads[chunk.owner]
    return late


def start_delay(owner: str, ask: SegmentAsk, committed: Sequence[PlanChunk], *, start: float,
                step_s: Callable[[int], float], max_batch: int, max_delay_s: float,
                periodic: Sequence[Periodic] = (), resolution_s: float = 0.005, phases: int = 16) -> float | None:
    """The least start delay (seconds after `ask.now`, to `resolution_s`) at which the new segment's
    chunks, and every other chunk that is on time without it (`committed`: what directors still owe;
    `periodic`: playing world sessions, over the new segment's span), are all ready in time; None
    when even `max_delay_s` does not do. `start`: when the engine is free (after the step in
    flight); `step_s(b)`: the planned seconds of a step of b chunks. Beside world sessions the
    search looks at the next seconds in order, then per phase of their period (`phases` of it; the
    module's docstring says why)."""

    without: dict[tuple[int, ...], tuple[list[PlanChunk], set[int]]] = {}  # the others, and those late anyway

    def keeps(delay: float) -> bool:
        horizon = ask.now + delay + ask.segment_s + ask.chunk_media_s
        counts = tuple(p.count_until(horizon) for p in periodic)
        if counts not in without:  # the same for every delay whose span holds as many world chunks
            others = [*committed, *(c for p in periodic for c in p.until(horizon))]
            without[counts] = others, {id(c) for c in late_chunks(others, start, step_s, max_batch)}
        others, already = without[counts]
        late = late_chunks([*others, *segment_chunks(owner, ask, delay)], start, step_s, max_batch)
        return all(c.owner != owner and id(c) in already for c in late)

    # the chunks due at its start cannot be ready before the engine is free and has made them
    lo = max(0.0, start + step_s(1) * ask.due_at_start - ask.now + ask.jitter_s)
    if keeps(lo):
        return lo
    if lo >= max_delay_s:
        return None
    if not periodic:
        return _edge(keeps, lo, max_delay_s, resolution_s) if keeps(max_delay_s) else None
    period = min(p.period_s for p in periodic)
    # by phase up to the last chunk owed (the world sessions' first ones too) and the segment's own
    # lead, and two periods more; past that only where the sessions owe more than the engine makes
    # (an overload whose backlog the plan plays out): there, as without world sessions
    owed = max([*(c.deadline for c in committed), *(p.first_deadline + p.restart_s for p in periodic)])
    lead = ask.lead_s if math.isfinite(ask.lead_s) else max_delay_s
    settled = max(lo, owed - ask.now) + lead + 2 * period
    found = _by_phase(keeps, lo, min(max_delay_s, settled), period, phases, resolution_s)
    if found is not None or settled >= max_delay_s:
        return found
    return _edge(keeps, settled, max_delay_s, resolution_s) if keeps(max_delay_s) else None


def _edge(keeps: Callable[[float], bool], off: float, on: float, resolution_s: float) -> float:
    """The boundary between `off` (not kept) and `on` (kept), on either side of it, to
    `resolution_s`: a kept delay."""
    while abs(on - off) > resolution_s:
        mid = (off + on) / 2.0
        if keeps(mid):
            on = mid
        else:
            off = mid
    return on


def _by_phase(keeps: Callable[[float], bool], lo: float, far: float, period: float, phases: int,
              resolution_s: float) -> float | None:
    """The least kept delay up to `far` beside world sessions of `period` (lo itself is not kept).
    First the next `near_s` (two seconds, four periods at least) every two phase steps (step =
    period / phases; 50 ms at least), in order: while the segment's chunks are all released at once
    a window there may be followed by seconds that keep no one. Then, for each phase lo + i x step,
    the least kept lo + i x step + k x period, k by a bisection over whole periods (kept at a fixed
    phase taken to grow with k), only below the best so far. Then the best's window: its left edge
    to `resolution_s`, or its middle where it is narrower than two steps."""
    step = period / phases
    near_s = max(_NEAR_S, 4 * period)
    grid = max(2 * step, _NEAR_GRID_S)
    best: float | None = None
    below = lo  # a delay that does not keep, just before `best`
    j = 1
    while lo + grid * j <= min(far, lo + near_s) + _EPS:
        if keeps(lo + grid * j):
            best, below = lo + grid * j, lo + grid * (j - 1)
            break
        j += 1
    for i in range(phases if best is None else 0):
        first = lo + i * step
        top = math.floor((far - first) / period + _EPS)  # whole periods up to far
        if best is not None:
            top = min(top, math.ceil((best - first) / period - _EPS) - 1)  # only starts before the best
        if top < 0 or not keeps(first + top * period):
            continue
        least_below, least = -1 if i else 0, top  # k = least_below is not kept (for phase 0: lo itself)
        while least - least_below > 1:
            mid = (least_below + least) // 2
            if keeps(first + mid * period):
                least = mid
            else:
                least_below = mid
        best = first + least * period
        below = max(lo, best - step)
    if best is None:
        return None
    left = _edge(keeps, below, best, resolution_s)
    probe = left + 2 * step  # the window's right edge, if it is narrower than two steps
    if keeps(probe):
        return left  # a wide window: its earliest start
    middle = (left + _edge(keeps, probe, best, resolution_s)) / 2.0
    return middle if keeps(middle) else left
