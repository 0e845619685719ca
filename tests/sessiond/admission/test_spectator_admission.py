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
    assert adm.describe(3) == {"spectators": 3, "serves": 10, "cpu_cores": 1.0, "shared_cores": 0.0, "each_cores": 0.1,
                               "each_source": "prior", "each_measured_cores": None, "each_prior_cores": 0.1,
                               "each_floor_cores": 0.0015, "sends_measured": 0}


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


def test_the_cost_each_is_the_prior_until_enough_sends_are_measured_then_cpu_per_spectator_second() -> None:
    clock = Clock()
    adm = SpectatorAdmission(SpectatorBudget(cpu_cores=1.0, each=0.1, connects_per_s=1000, window_s=5.0,
                                             each_floor=0.001, min_sends=8), clock)
    a, b = adm.send_meter(), adm.send_meter()  # two spectator connections
    for _ in range(3):  # second 100: both sent to, 3 sends of 1/64 s each
        a(0.015625)
        b(0.015625)
    clock.t = 100.5  # the current second is not over: nothing measured yet
    assert (adm.send_cost().source, adm.send_cost().sends, adm.serves()) == ("prior", 0, 10)
    clock.t = 101.0
    for _ in range(4):  # second 101: only `a` sent to
        a(0.03125)
    clock.t = 101.2
    cost = adm.send_cost()  # 6 sends done: under min_sends
    assert (cost.source, cost.each, cost.measured, cost.sends) == ("prior", 0.1, None, 6)
    clock.t = 102.0
    cost = adm.send_cost()  # 10 sends, 0.09375 + 0.125 CPU s over 3 spectator-seconds
    assert (cost.source, cost.measured, cost.sends) == ("measured", 0.21875 / 3, 10)
    assert cost.each == 0.21875 / 3 and adm.serves() == 13  # floor(1 / 0.0729...)
    described = adm.describe(2)
    assert (described["each_source"], described["each_cores"], described["each_measured_cores"],
            described["sends_measured"]) == ("measured", 0.072917, 0.072917, 10)
    clock.t = 105.2
    for _ in range(4):  # second 105: `a` again, sends that cost nothing measurable
        a(0.0)
    clock.t = 106.5  # second 100 left the window: 101 and 105 are in it, 1 spectator-second each
    cost = adm.send_cost()
    assert (cost.source, cost.measured, cost.each, cost.sends) == ("measured", 0.0625, 0.0625, 8)
    clock.t = 200.0
    for _ in range(8):
        b(0.0)
    clock.t = 201.0
    cost = adm.send_cost()
    assert (cost.source, cost.measured, cost.each) == ("measured", 0.0, 0.001)
    assert adm.serves() == 1000


def test_a_measured_cost_each_and_the_shared_packing_bound_admission_together() -> None:
    clock = Clock()
    adm = SpectatorAdmission(SpectatorBudget(cpu_cores=1.0, each=0.5, connects_per_s=1000, window_s=5.0,
                                             each_floor=0.01, min_sends=1), clock)
    assert adm.serves() == 2  # the prior: 0.5 cores each
    meter = adm.send_meter()
    meter(0.25)  # one spectator, one send, 0.25 s of CPU in second 100
    adm.record_pack(1.0)  # 0.2 cores of shared packing over the window
    clock.t = 101.0
    assert adm.serves() == 3  # (1 - 0.2) / 0.25
    adm.admit("s_1", 2)
    with pytest.raises(Refused) as refused:
        adm.admit("s_1", 3)
    assert refused.value.message.startswith("this machine serves 3 spectators in all")
