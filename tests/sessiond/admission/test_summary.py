"""What the start says a person can have: the statement's sentences, exactly."""

from __future__ import annotations

from sessiond.admission.summary import AdmissionSummary

_WHY = "needs 1.44 s of engine time per media second, has 0.85"


def _nothing(cpu: tuple[int, int] | None) -> AdmissionSummary:
    return AdmissionSummary(serves={"world": 0, "director": 0}, serves_now={"world": 0, "director": 0},
                            cannot={"world": _WHY}, spread=(1.44, 1.48), budget=0.85, cpu=cpu)


def test_a_cpu_engine_on_fewer_threads_than_cores_is_told_how_to_give_it_more() -> None:
    assert _nothing((1, 2)).statement == (
        "This start serves no session (a World session costs 1.44-1.48 s of engine time per media second here, "
        f"budget 0.85). It cannot serve a World session within objective on this machine ({_WHY}); to look anyway, "
        "start it with --policy kv. The engine runs on 1 of this machine's 2 cores (the rest encode and send "
        "frames): --cpu-threads 2 gives it more, at the cost of the streams' share.")


def test_no_thread_hint_where_the_engine_has_every_core_or_is_not_on_a_cpu_or_every_mode_fits() -> None:
    plain = ("This start serves no session (a World session costs 1.44-1.48 s of engine time per media second "
             f"here, budget 0.85). It cannot serve a World session within objective on this machine ({_WHY}); "
             "to look anyway, start it with --policy kv.")
    assert _nothing((2, 2)).statement == plain
    assert _nothing(None).statement == plain
    fits = AdmissionSummary(serves={"world": 1, "director": 2}, serves_now={"world": 1, "director": 2},
                            spread=(0.5, 0.52), budget=0.85, cpu=(1, 2))
    assert fits.statement == ("This start serves World for 1 session and Director for 2 sessions (a World session "
                              "costs 0.50-0.52 s of engine time per media second here, budget 0.85).")
