"""Spectators' admission: the CPU bound (measured shared packing + a cost each) says in words how
many the machine serves; the per-session connect bucket refuses a flood with rate_limited."""

from __future__ import annotations

import pytest

from protocols.errors import ErrorCode, ProtocolError, Refused
from sessiond.admission.audience import SpectatorAdmission, SpectatorBudget


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_cpu_bound_counts_the_measured_shared_packing_and_a_cost_each() -> None:
    clock = Clock()
    adm = SpectatorAdmission(SpectatorBudget(cpu_cores=1.0, each=0.1, connects_per_s=1000, window_s=5.0), clock)
    assert adm.serves() == 10
    adm.record_pack(1.0)  # 1 CPU second in the last 5 s: 0.2 cores
    assert (adm.shared_cores(), adm.serves()) == (0.2, 8)
    adm.admit("s_1", 7)
    with pytest.raises(Refused) as refused:
        adm.admit("s_1", 8)
    assert (refused.value.code, refused.value.reason) == (ErrorCode.CAPACITY, "spectators")
    assert refused.value.message.startswith("this machine serves 8 spectators in all")
    clock.t += 5.1  # the packing measured falls out of the window
    assert adm.serves() == 10
    assert adm.describe(3) == {"spectators": 3, "serves": 10, "cpu_cores": 1.0, "shared_cores": 0.0, "each_cores": 0.1}


def test_connects_per_session_are_a_token_bucket() -> None:
    clock = Clock()
    adm = SpectatorAdmission(SpectatorBudget(cpu_cores=100.0, each=0.001, connects_per_s=5), clock)
    for _ in range(10):  # a burst of twice the rate
        adm.admit("s_1", 0)
    with pytest.raises(ProtocolError) as limited:
        adm.admit("s_1", 0)
    assert limited.value.code == ErrorCode.RATE_LIMITED
    adm.admit("s_2", 0)  # another session's bucket is its own
    clock.t += 0.2  # one more token
    adm.admit("s_1", 0)
    with pytest.raises(ProtocolError):
        adm.admit("s_1", 0)
