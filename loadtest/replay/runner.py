"""Replay a trace against a daemon: one concurrent client per trace session, plus a sampler of
the load over time (sessions live, and the daemon's own predicted load from /v1/capacity)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from loadtest.replay.meter import SessionMeter, SessionResult
from loadtest.replay.schedule import session_steps
from loadtest.replay.session_runner import SessionRunner
from sessiond.admission.decision import Objectives
from sessiond.traces.format import Trace

__all__ = ["ReplayOutcome", "run_replay"]


@dataclass
class ReplayOutcome:
    trace: Trace
    url: str
    speed: float
    mode: str
    objectives: Objectives
    started_at: str
    duration_s: float
    results: list[SessionResult]
    errors: dict[str, dict[str, int]]  # session key -> server error code -> count
    timeline: dict[str, list[Any]] = field(default_factory=dict)  # t, active, predicted_load
    capacity: dict[str, Any] | None = None  # the daemon's last /v1/capacity answer


def _predicted_load(body: Any) -> float | None:
    if not isinstance(body, dict):
        return None
    for source in (body, body.get("admission"), body.get("load")):
        if isinstance(source, dict) and isinstance(source.get("predicted_load"), int | float):
            return float(source["predicted_load"])
    return None


async def _sample(url: str, runners: list[SessionRunner], origin: float, sample_s: float,
                  timeline: dict[str, list[Any]], last: dict[str, Any]) -> None:
    async with httpx.AsyncClient(timeout=2.0) as http:
        while True:
            body: Any = None
            try:
                response = await http.get(f"{url.rstrip('/')}/v1/capacity")
                if response.status_code == 200:
                    body = response.json()
                    last["capacity"] = body
            except (httpx.HTTPError, ValueError):
                body = None
            active = sum(1 for r in runners if r.meter.result.status == "admitted"
                         and r.meter.result.ended_at_s is None)
            timeline["t"].append(round(time.monotonic() - origin, 3))
            timeline["active"].append(active)
            timeline["predicted_load"].append(_predicted_load(body))
            await asyncio.sleep(sample_s)


async def run_replay(trace: Trace, url: str, *, speed: float = 1.0, mode: str = "paced",
                     objectives: Objectives | None = None, transport: str | None = None,
                     default_segment_s: float = 5.0, sample_s: float = 0.5, timeout_s: float = 30.0) -> ReplayOutcome:
    objectives = objectives or Objectives()
    started_at = datetime.now(tz=UTC).isoformat(timespec="seconds")
    origin = time.monotonic()
    runners = []
    for key in trace.sessions():
        events = trace.events_of(key)
        meter = SessionMeter(key, str(events[0].fields.get("mode", "world")), objectives,
                             default_segment_s=default_segment_s, origin=origin)
        runners.append(SessionRunner(session_steps(trace, key, speed=speed, mode=mode), meter, url, origin=origin,
                                     transport=transport, timeout_s=timeout_s))
    timeline: dict[str, list[Any]] = {"t": [], "active": [], "predicted_load": []}
    last: dict[str, Any] = {}
    sampler = asyncio.create_task(_sample(url, runners, origin, sample_s, timeline, last), name="replay-sampler")
    try:
        await asyncio.gather(*(r.run() for r in runners))
    finally:
        sampler.cancel()
        await asyncio.gather(sampler, return_exceptions=True)
    return ReplayOutcome(trace=trace, url=url, speed=speed, mode=mode, objectives=objectives, started_at=started_at,
                         duration_s=round(time.monotonic() - origin, 3), results=[r.meter.result for r in runners],
                         errors={r.meter.result.key: r.errors for r in runners if r.errors}, timeline=timeline,
                         capacity=last.get("capacity"))
