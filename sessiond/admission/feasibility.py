"""Whether a group of sessions generating at the same moment can all meet their objectives, and
the start delay a director's player needs. Pure arithmetic on a cost model's figures.

A director segment of media length L generated at r media seconds per wall second (chunks of
cm media seconds) plays without a stall when playback starts d after generation starts, with

    d(r) = max(cm / r, cm + L (1/r - 1)) + jitter

(the first chunk must be there when playback starts; when r < 1 the last chunk is the tightest:
it is ready at L/r and plays at d + L - cm). Inverting it, a director meets a start-delay
objective D when it is generated at least at ``required_rate = max(cm / (D - jitter),
L / (L + D - jitter - cm))`` media seconds per wall second; a world session must be generated at
1 (real time). Under earliest-deadline-first scheduling a group of w world sessions and m
directors, each costing c GPU seconds per media second at the batch they share, is feasible when

    (w + m x required_rate) x c <= budget       (budget = 1 - margin)

EDF meets every deadline of a set whose demand fits the processor, so this is also the test of
the schedule: the deadlines are the frames' playback times.

A segment that starts a stream (a session's first, the first after a cut) generates a lead-in chunk
before its own frames, so it needs the faster ``required_rate(..., lead_in_s=cm)``. Where the
group fits at the plain rate but not with every member starting a stream, whether it is served
depends on how many of its directors are starting one: with each demanding director's segment a
stream start with probability `lead_share`, `GroupModel.served_share` is the chance that it is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["GroupModel", "director_rate", "first_segments_risk", "joint_demand", "required_rate", "start_delay",
           "worst_group_risk"]


def _binomial_cdf(n: int, p: float, k: int) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return sum(math.comb(n, i) * p**i * (1.0 - p) ** (n - i) for i in range(k + 1))


def start_delay(segment_s: float, chunk_media_s: float, rate: float, jitter_s: float = 0.0,
                lead_in_s: float = 0.0) -> float:
    """Seconds from the start of generation until playback may start without a stall, for a
    segment generated at `rate` media seconds per wall second (inf when rate <= 0).
    `lead_in_s`: media generated before the segment's own (a stream's first chunk that yields
    fewer frames): every chunk is ready that much later, lead_in_s / rate."""
    if rate <= 0:
        return math.inf
    first = min(chunk_media_s, segment_s)
    return max(first / rate, first + segment_s * (1.0 / rate - 1.0)) + lead_in_s / rate + jitter_s


def required_rate(segment_s: float, chunk_media_s: float, delay_s: float, jitter_s: float = 0.0,
                  lead_in_s: float = 0.0) -> float:
    """The slowest generation rate (media s per wall s) whose start delay (`start_delay`, with
    `lead_in_s` of media generated first) stays within `delay_s`."""
    room = delay_s - jitter_s
    first = min(chunk_media_s, segment_s)
    if room <= 0 or segment_s + room - first <= 0:
        return math.inf
    return max((first + lead_in_s) / room, (segment_s + lead_in_s) / (segment_s + room - first))


def director_rate(world: int, directors: int, cost_rate: float, capacity: float = 1.0) -> float:
    """The rate one of `directors` directors gets under EDF when `world` world sessions take their
    real-time share first and the directors share the rest equally (media s per wall s)."""
    if directors <= 0:
        raise ValueError("director_rate needs at least one director")
    left = capacity - world * cost_rate
    return math.inf if cost_rate <= 0 else max(0.0, left) / (directors * cost_rate)


@dataclass(frozen=True)
class GroupModel:
    """What decides whether a group is feasible: the per-session cost at the batch a group of k
    shares (`cost_rate(k)`), the budget, the directors' required rate, and the world
    action-to-photon bound (an action waits up to one chunk, then the chunk is generated)."""

    cost_rate: Callable[[int], float]
    chunk_seconds: Callable[[int], float]  # GPU seconds of one step of a group of k (the chunk's wall time)
    chunk_media_s: float
    budget: float
    director_rate: float
    action_to_photon_s: float
    director_rate_lead: float | None = None  # a segment that starts a stream (with its lead-in)
    lead_share: float = 0.0  # the chance that a demanding director's segment starts a stream
    # a world chunk is begun at most this long before it is due while others are open (the lead's ceiling)
    world_lead_s: float = math.inf
    # seconds of a step of b chunks as the scheduler's plan times it (the profile stretched to the budget);
    # None: steps are not checked against the world lead
    step_s: Callable[[int], float] | None = None

    def need(self, world: int, directors: int) -> float:
        """GPU seconds per wall second the group needs to stay within objective."""
        k = world + directors
        return 0.0 if k == 0 else (world + directors * self.director_rate) * self.cost_rate(k)

    def input_to_frame_s(self, group: int) -> float:
        """Seconds from a world player's input to the frame that shows it in a group of `group`: a
        chunk of media, then the steps until every session of the group has its next chunk."""
        return self.chunk_media_s + self.chunk_seconds(group)

    def feasible(self, world: int, directors: int) -> bool:
        k = world + directors
        if k == 0:
            return True
        if self.need(world, directors) > self.budget + 1e-12:
            return False
        if world == 0:
            return True
        return (self.input_to_frame_s(k) <= self.action_to_photon_s + 1e-12
                and not self.world_blocked(world, directors))

    def world_blocked(self, world: int, directors: int) -> bool:
        """Whether a world session's chunk, begun its lead (`world_lead_s`) before it is due, can miss
        it behind a step of the others already under way (a step is not preempted: the chunk was not
        ready when it began) and then a step of its own with the other world sessions' chunks:
        ``step(k - 1) + step(w) > lead``, with directors in the group. A director's chunks are ready
        long before they play (`director_lead_s`), so the engine is making one whenever no world chunk
        is ready; world sessions alone have chunks ready only their lead ahead, and fall into step
        with each other (the scheduler batches chunks due together), which the rates already test
        (``w c(w) <= budget`` is a step of all of them within a chunk's media). The rates of `need`
        are met on average, chunk by chunk they are not: the demo on a 2-core AMD box, 0.25 s chunks,
        a world lead of one chunk and steps of 0.137 s as planned, served a world player and a
        director at 0.95 of the budget by rates while the plan found no start for the director's
        segments (a director's chunk beside each world chunk takes 0.274 s per 0.25 s)."""
        k = world + directors
        if self.step_s is None or world == 0 or directors == 0:
            return False
        return self.step_s(k - 1) + self.step_s(world) > self.world_lead_s + 1e-12

    def served_share(self, world: int, directors: int, starting: int = 0) -> float:
        """The chance that the group is served within objective: 0 when it is not `feasible`, else
        the chance that no more of its directors are starting a stream (each with probability
        `lead_share`, needing `director_rate_lead`) than the budget leaves room for. `starting` of
        the directors start a stream for certain (first segments of directors who opened
        together); the rest each with probability `lead_share`."""
        if not self.feasible(world, directors):
            return 0.0
        lead = self.director_rate_lead
        if directors == 0 or lead is None or lead <= self.director_rate:
            return 1.0
        starting = max(0, min(starting, directors))
        extra = (lead - self.director_rate) * self.cost_rate(world + directors)
        room = self.budget - self.need(world, directors) - starting * extra
        if room < -1e-12:
            return 0.0
        rest = directors - starting
        if rest == 0 or self.lead_share <= 0.0:
            return 1.0
        most = min(rest, math.floor((room + 1e-12) / extra)) if extra > 0 else rest
        return _binomial_cdf(rest, min(1.0, self.lead_share), most)

    def alone(self, mode: str) -> tuple[bool, float]:
        """(feasible, need) of one session of `mode` alone on the engine."""
        world, directors = (1, 0) if mode == "world" else (0, 1)
        return self.feasible(world, directors), self.need(world, directors)


def joint_demand(others: Sequence[tuple[str, float]]) -> dict[tuple[int, int], float]:
    """P(exactly w world sessions and m directors of `others` demand at once), each (mode, duty)
    demanding independently with probability its duty (a two-type Poisson-binomial)."""
    dist: dict[tuple[int, int], float] = {(0, 0): 1.0}
    for mode, duty in others:
        p = min(1.0, max(0.0, duty))
        nxt: dict[tuple[int, int], float] = {}
        for (w, m), mass in dist.items():
            on = (w + 1, m) if mode == "world" else (w, m + 1)
            nxt[(w, m)] = nxt.get((w, m), 0.0) + mass * (1.0 - p)
            nxt[on] = nxt.get(on, 0.0) + mass * p
        dist = nxt
    return dist


def first_segments_risk(mode: str, together: int, others: Sequence[tuple[str, float]],
                        served: Callable[[int, int, int], float]) -> float:
    """The chance that a newcomer of `mode` and `together` directors whose first segments are due
    with its own (they opened within the same window: an arrival burst) are not served when they
    demand at once, the `others` (mode, duty) demanding independently beside them.
    `served(w, m, starting)`: the chance a group of w world sessions and m directors, `starting` of
    whom certainly start a stream, is served (`GroupModel.served_share`)."""
    own_w, own_m = (1, 0) if mode == "world" else (0, 1)
    starting = together + own_m
    return sum(mass * (1.0 - served(w + own_w, m + starting, starting))
               for (w, m), mass in joint_demand(others).items())


def worst_group_risk(sessions: Sequence[tuple[str, float, float]], feasible: Callable[[int, int], bool | float]
                     ) -> tuple[int, float, float]:
    """For sessions (mode, duty, tolerance): the one whose chance of finding itself, when it
    demands, in an infeasible group most exceeds its tolerance, as (index, probability,
    tolerance); (-1, 0.0, 1.0) with none. `feasible(w, m)`: whether a group is served, or the
    chance that it is (`GroupModel.served_share`). A session alone is never counted (whether one
    fits alone is decided before admission)."""
    worst = (-1, 0.0, 1.0)
    cache: dict[tuple[str, tuple[tuple[str, float], ...]], float] = {}
    for i, (mode, _, tolerance) in enumerate(sessions):
        others = tuple(sorted((m, d) for j, (m, d, _) in enumerate(sessions) if j != i))
        key = (mode, others)
        if key not in cache:
            own = (1, 0) if mode == "world" else (0, 1)
            cache[key] = sum(mass * (1.0 - float(feasible(w + own[0], m + own[1])))
                             for (w, m), mass in joint_demand(others).items() if w + m > 0)
        p = cache[key]
        if worst[0] < 0 or p / max(tolerance, 1e-12) > worst[1] / max(worst[2], 1e-12):
            worst = (i, p, tolerance)
    return worst
