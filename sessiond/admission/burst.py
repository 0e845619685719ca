"""Bursts: the chance that, when a session wants generation, too many others want it too.

Each session demands generation at a random instant with probability equal to its duty
(independently). The number of others demanding then follows a Poisson-binomial distribution.
With k sessions demanding together the GPU must do ``k x cost_rate(k)`` GPU seconds per second;
above the budget every one of them falls behind real time. A session alone over the budget is an
engine limit, not a burst, and does not count here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["demand_distribution", "overload_probability", "worst_overload"]


def demand_distribution(duties: Sequence[float]) -> list[float]:
    """P(exactly k of these sessions demand at once), k = 0..len(duties)."""
    dist = [1.0]
    for p in duties:
        p = min(1.0, max(0.0, p))
        nxt = [0.0] * (len(dist) + 1)
        for k, mass in enumerate(dist):
            nxt[k] += mass * (1.0 - p)
            nxt[k + 1] += mass * p
        dist = nxt
    return dist


def overload_probability(others: Sequence[float], overloaded: Callable[[int], bool]) -> float:
    """P(a demanding session finds itself in an overloaded group): sum over the others demanding
    with it, k of them, of P(k) where a group of k + 1 is overloaded."""
    return sum(mass for k, mass in enumerate(demand_distribution(others)) if overloaded(k + 1))


def worst_overload(duties: Sequence[float], tolerances: Sequence[float], overloaded: Callable[[int], bool]
                   ) -> tuple[int, float, float]:
    """(index, probability, tolerance) of the session whose overload probability most exceeds its
    tolerance (the largest probability / tolerance); (-1, 0.0, 1.0) with no sessions."""
    worst = (-1, 0.0, 1.0)
    cache: dict[tuple[float, ...], float] = {}
    for i, tolerance in enumerate(tolerances):
        others = tuple(sorted(d for j, d in enumerate(duties) if j != i))
        if others not in cache:
            cache[others] = overload_probability(others, overloaded)
        p = cache[others]
        if worst[0] < 0 or p / max(tolerance, 1e-12) > worst[1] / max(worst[2], 1e-12):
            worst = (i, p, tolerance)
    return worst
