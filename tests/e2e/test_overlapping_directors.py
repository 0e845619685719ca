"""Three directors whose segments overlap, on a CPU engine of known cost: the start delay each is
advised comes from the scheduler's plan for all of them (EDF, chunk by chunk), so it stays within
what the costs allow, and no player honouring it stalls."""

from __future__ import annotations

import httpx
import pytest

from loadtest.replay.report import build_report
from loadtest.replay.runner import run_replay
from sessiond.admission.decision import Objectives
from sessiond.traces import Trace, TraceEvent, TraceHeader
from tests.conftest import off_loop, running_daemon, tiny_engine
from tests.e2e.test_capacity import _SlowEngine

_SEGMENT_S = 4.0
_DIRECTS = {"a": (0.5, 6.0), "b": (0.8, 6.3), "c": (1.1, 6.6)}  # two overlapping rounds


def _three_directors() -> Trace:
    events = [TraceEvent(0.0, key, "create", {"mode": "director", "prompt": f"scene {key}"}) for key in _DIRECTS]
    events += [TraceEvent(t, key, "direct", {"prompt": f"scene {key}", "seconds": _SEGMENT_S})
               for key, times in _DIRECTS.items() for t in times]
    events += [TraceEvent(11.5, key, "close", {}) for key in _DIRECTS]
    return Trace(TraceHeader("three-overlapping-directors", "synthesized"),
                 tuple(sorted(events, key=lambda e: e.t)))


@pytest.mark.slow  # a live replay of a 12 s trace
async def test_three_overlapping_directors_are_advised_waits_the_costs_allow_and_never_stall() -> None:
    engine = tiny_engine()
    calls = engine.info.denoise_steps + 2  # engine calls per chunk: denoise steps, cache, decode
    slow = _SlowEngine(engine, 0.1 / calls)  # ~0.1 s of engine time per 0.5 s chunk, 0.2 per media second
    async with off_loop(running_daemon(slow, max_batch=1, cpu_threads=2)) as d:
        async with httpx.AsyncClient() as http:
            cap = (await http.get(f"{d.url}/v1/capacity")).json()["admission"]
        outcome = await run_replay(_three_directors(), d.url, objectives=Objectives())
    report = build_report(outcome)
    # the bound, from the profiled costs: a step of one chunk planned at p = chunk / budget; a
    # director's first frames wait at most for a chunk in progress, then (deadline first) the
    # lead-in and first chunk of each of the three directors, then the playout allowance
    p = cap["cost_model"]["chunk_seconds"]["1"] / cap["load_budget"]
    bound_ms = 1000.0 * (1 + 2 * len(_DIRECTS)) * p + cap["objectives"]["playout_ms"]
    assert [s["status"] for s in report["per_session"]] == ["admitted"] * 3
    assert [s["segments"]["done"] for s in report["per_session"]] == [2, 2, 2]
    assert report["stalls"] == {"count": 0, "seconds": 0.0}
    assert report["start_delay_ms"]["max"] <= bound_ms, (report["start_delay_ms"], bound_ms)
    assert report["sessions"]["within_objective"] == 3
