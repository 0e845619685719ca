"""How often a demanding session finds too many others demanding with it."""

from __future__ import annotations

import pytest

from sessiond.admission.burst import demand_distribution, overload_probability, worst_overload


def test_the_number_demanding_at_once_is_poisson_binomial() -> None:
    assert demand_distribution([0.5, 0.5]) == [0.25, 0.5, 0.25]
    assert demand_distribution([1.0, 0.0, 0.25]) == [0.0, 0.75, 0.25, 0.0]
    assert demand_distribution([]) == [1.0]


def test_overload_counts_groups_including_the_session_itself() -> None:
    # groups of 3 or more overload; two others at 0.5: both demanding with it 25% of the time
    assert overload_probability([0.5, 0.5], lambda group: group >= 3) == 0.25
    assert overload_probability([0.5, 0.5], lambda group: group >= 2) == 0.75


def test_the_worst_session_is_the_one_furthest_over_its_tolerance() -> None:
    duties = [1.0, 0.3, 0.3]
    index, p, tolerance = worst_overload(duties, [0.01, 0.05, 0.05], lambda group: group >= 3)
    assert index == 0  # the world session: both directors at once 9% of the time, tolerance 1%
    assert p == pytest.approx(0.09)
    assert tolerance == 0.01


def test_no_sessions_no_overload() -> None:
    assert worst_overload([], [], lambda group: True) == (-1, 0.0, 1.0)
