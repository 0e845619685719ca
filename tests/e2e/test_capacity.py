"""Capacity end to end (tiny engine): the objectives published in /v1/capacity, an honest refusal
of a session that can never fit, and a live replay of directors generated slower than real time
whose players, honouring `segment_start.start_after_ms`, never stall."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from typing import Any

import httpx
import pytest

from engine.api import StepPlan, StepResult
from loadtest.replay.report import build_report
from loadtest.replay.runner import run_replay
from sessiond.admission.decision import Objectives
from sessiond.config import ServeConfig
from sessiond.traces import Trace, TraceEvent, TraceHeader
from tests.conftest import off_loop, running_daemon, tiny_engine


def test_capacity_publishes_the_objectives_and_a_session_that_can_never_fit_gets_no_retry_after() -> None:
    # an action-to-photon objective of 50 ms: no world session can meet it (a chunk alone is 0.5 s)
    with running_daemon(objective_world_a2p_p95_ms=50.0, objective_director_start_delay_p95_s=2.0) as d:
        cap = httpx.get(f"{d.url}/v1/capacity").json()
        refused = httpx.post(f"{d.url}/v1/sessions", json={"mode": "world"})
        director = httpx.post(f"{d.url}/v1/sessions", json={"mode": "director"})
    objectives = cap["objectives"]
    assert objectives["world"]["action_to_photon_p95_ms"]["max"] == 50.0
    assert objectives["world"]["deadline_miss_rate"]["max"] == 0.01
    assert objectives["director"]["start_delay_p95_s"] == {
        "max": 2.0, "says": "playback of a segment may start within 2 s of its direction (p95)"}
    assert objectives["director"]["stalls"]["max"] == 0
    assert cap["admission"]["serves"]["world"] == 0 and cap["admission"]["serves"]["director"] >= 1
    assert refused.status_code == 503 and "retry-after" not in refused.headers
    body = refused.json()["error"]
    assert (body["code"], body["reason"]) == ("capacity", "never") and "retry_after_s" not in body
    assert body["message"].startswith("this server cannot serve one world session within objective (an input "
                                      "would show after ")
    assert body["message"].endswith("the objective is 0.05 s); waiting will not help")
    assert director.status_code == 201


class _SlowEngine:
    """The real tiny engine, each engine call made `per_call_s` x its batch slower (and measured
    so: the cost model sees the slow engine), so that a director is generated slower than real time."""

    def __init__(self, engine: Any, per_call_s: float) -> None:
        self._engine = engine
        self._per_call_s = per_call_s

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def step(self, plan: StepPlan) -> StepResult:
        result: StepResult = self._engine.step(plan)
        extra = {phase: self._per_call_s * result.batch_sizes.get(phase, 1) for phase in result.seconds}
        time.sleep(sum(extra.values()))
        return dataclasses.replace(result, seconds={p: s + extra[p] for p, s in result.seconds.items()})


def _one_director(segments: int, seconds: float) -> Trace:
    events = [TraceEvent(0.0, "d", "create", {"mode": "director", "prompt": "boats at dawn"})]
    events += [TraceEvent(0.5 + 4.0 * i, "d", "direct", {"prompt": "boats at dawn", "seconds": seconds})
               for i in range(segments)]
    events.append(TraceEvent(0.5 + 4.0 * segments, "d", "close", {}))
    return Trace(TraceHeader("one-slow-director", "synthesized"), tuple(events))


@pytest.mark.slow  # a live replay of a 10 s trace
async def test_a_director_generated_slower_than_real_time_plays_without_a_stall_after_the_advice() -> None:
    engine = tiny_engine()
    steps = engine.info.denoise_steps + 2  # engine calls per chunk: denoise steps, cache, decode
    chunk_media_s = engine.info.frames_per_chunk / engine.info.fps
    slow = _SlowEngine(engine, 1.15 * chunk_media_s / steps)  # ~1.2 s of engine time per media second
    # a 3 s start-delay objective: a director may be generated at 0.68x real time and still fit; the
    # engine is slowed by sleeping, which only a wall-time profile sees (one that counts the engine
    # thread's CPU time is chosen for one torch thread: two here)
    async with off_loop(running_daemon(slow, max_batch=1, cpu_threads=2,
                                       objective_director_start_delay_p95_s=3.0)) as d:
        outcome = await run_replay(_one_director(3, 2.0), d.url, objectives=Objectives(director_start_delay_p95_s=3.0))
    report = build_report(outcome)
    session = report["per_session"][0]
    assert session["status"] == "admitted" and session["segments"]["done"] == 3
    # a 2 s segment's last chunk is ready ~2.4 s after its direct but plays ~0.5 + 1.5 s after it
    # when started at the first frame: a player starting then would stall; this one waited (the
    # first segment of the stream a chunk longer: its first chunk yields fewer frames)
    assert report["stalls"] == {"count": 0, "seconds": 0.0}
    assert report["start_delay_ms"]["p50"] > report["ttff_ms"]["p50"] + 200
    assert report["start_delay_ms"]["p95"] <= 3000
    assert report["sessions"]["within_objective"] == 1


def test_capacity_opens_with_what_this_start_serves_and_what_it_would_admit_now() -> None:
    with running_daemon(max_sessions=4) as d:
        fresh = httpx.get(f"{d.url}/v1/capacity").json()
        created = httpx.post(f"{d.url}/v1/sessions", json={"mode": "world"})
        one_open = httpx.get(f"{d.url}/v1/capacity").json()
    assert list(fresh)[:6] == ["serves", "serves_now", "cannot", "world_cost_spread", "budget", "statement"]
    assert (fresh["serves"], fresh["serves_now"], fresh["cannot"]) == (
        {"world": 4, "director": 4}, {"world": 4, "director": 4}, {})
    low, high = fresh["world_cost_spread"]
    assert 0 < low <= high
    assert fresh["statement"] == (f"This start serves World for 4 sessions and Director for 4 sessions (a World "
                                  f"session costs {low:.2f}-{high:.2f} s of engine time per media second here, "
                                  "budget 0.85).")
    assert created.status_code == 201
    assert (one_open["serves"], one_open["serves_now"]) == ({"world": 4, "director": 4}, {"world": 3, "director": 3})


def test_a_mode_this_start_cannot_serve_is_said_with_the_flag_and_its_refusal_is_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="sessiond.session.lifecycle")
    caplog.set_level(logging.INFO, logger="sessiond.runtime.daemon")
    with running_daemon(objective_world_a2p_p95_ms=50.0) as d:
        cap = httpx.get(f"{d.url}/v1/capacity").json()
        refused = httpx.post(f"{d.url}/v1/sessions", json={"mode": "world"})
    assert (cap["serves"]["world"], cap["serves_now"]["world"]) == (0, 0)
    assert cap["serves_now"]["director"] >= 1
    why = cap["cannot"]["world"]
    assert why.startswith("an input would show after ") and why.endswith(" s, the objective is 0.05 s")
    said_why = (f" It cannot serve a World session within objective on this machine ({why}); "
                "to look anyway, start it with --policy kv.")
    cores = os.cpu_count() or 1
    threads = ServeConfig().engine_threads("cpu")  # the CPU engine's default
    assert threads is not None
    if threads < cores:  # and where the engine has fewer threads than the machine has cores, how to give it more
        said_why += (f" The engine runs on {threads} of this machine's {cores} cores (the rest encode and send "
                     f"frames): --cpu-threads {cores} gives it more, at the cost of the streams' share.")
    assert cap["statement"].endswith(said_why)
    said = [r.getMessage() for r in caplog.records if r.name == "sessiond.runtime.daemon"]
    assert said[-1] == cap["statement"]  # the start-up line after "engine ready"
    assert refused.status_code == 503
    lines = [r for r in caplog.records if getattr(r, "event", None) == "refused"]
    assert len(lines) == 1
    line = lines[0]
    assert (line.mode, line.kind, line.reason, line.retry_after_s, line.budget) == (  # type: ignore[attr-defined]
        "world", "create", "never", None, 0.85)
    assert line.detail == repr(refused.json()["error"]["message"])  # type: ignore[attr-defined]


def test_two_starts_on_one_machine_share_their_history_and_say_how_the_verdict_was_settled(tmp_path) -> None:
    history = tmp_path / "starts.jsonl"
    caps = []
    for _ in range(2):
        with running_daemon(start_history=str(history)) as d:
            caps.append(httpx.get(f"{d.url}/v1/capacity").json())
    records = [json.loads(line) for line in history.read_text().splitlines()]
    assert len(records) == 2 and records[0]["fingerprint"] == records[1]["fingerprint"]
    assert [c["start_verdict"]["starts_on_record"] for c in caps] == [1, 2]
    for cap, record in zip(caps, records, strict=True):
        verdict = cap["start_verdict"]
        assert verdict["history"] == str(history)
        # what it says, what admission reports and what it recorded are one verdict
        assert verdict["serves"] == cap["serves"] == cap["admission"]["serves"] == record["serves"]
        assert set(verdict["readings"]) == {"world", "director"} and len(verdict["readings"]["world"]) == 3
        assert verdict["spread"] == 0.05  # fewer than three starts on record: the floor
        assert set(record["costs"]) >= {"1"} and record["world_cost_b1"] == record["costs"]["1"]


def test_a_start_without_history_decides_from_its_own_profile() -> None:
    with running_daemon() as d:  # the tests run with SESSIOND_START_HISTORY=off; a config says None
        verdict = httpx.get(f"{d.url}/v1/capacity").json()["start_verdict"]
    assert verdict["history"] is None and verdict["starts_on_record"] == 1
