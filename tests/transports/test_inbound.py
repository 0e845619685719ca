"""The one inbound policy of every transport: request rate and abuse, on a fake clock."""

from __future__ import annotations

import pytest

from protocols.messages import Action, Interrupt, Received
from transports.inbound import InboundGuard, InboundLimits


class _Clock:
    t = 50.0

    def __call__(self) -> float:
        return self.t


def test_requests_over_the_per_second_limit_are_refused_until_the_second_passes() -> None:
    clock = _Clock()
    guard = InboundGuard(InboundLimits(max_requests_per_s=2, abuse_errors_per_10s=50), now=clock)
    assert [guard.over_rate(Interrupt(id=i)) for i in range(3)] == [False, False, True]
    clock.t += 1.0
    assert guard.over_rate(Interrupt(id=9)) is False


def test_actions_and_acks_are_never_refused_here() -> None:
    guard = InboundGuard(InboundLimits(max_requests_per_s=1, abuse_errors_per_10s=50), now=_Clock())
    assert not any(guard.over_rate(m) for m in [Action(seq=i, ts=0.0, keys=()) for i in range(100)])
    assert not any(guard.over_rate(Received(idx=i)) for i in range(100))


def test_errors_beyond_the_limit_within_ten_seconds_make_the_connection_abusive() -> None:
    clock = _Clock()
    guard = InboundGuard(InboundLimits(max_requests_per_s=50, abuse_errors_per_10s=3), now=clock)
    assert [guard.error() for _ in range(3)] == [False, False, False]
    clock.t += 10.5  # the first three fell out of the window
    assert [guard.error() for _ in range(4)] == [False, False, False, True]


@pytest.mark.parametrize(("rate", "abuse", "named"), [(0, 5, "max_requests_per_s"), (5, 0, "abuse_errors_per_10s")])
def test_a_limit_below_one_names_the_option(rate: int, abuse: int, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        InboundLimits(max_requests_per_s=rate, abuse_errors_per_10s=abuse)
