"""Admission that a session cannot poison (issue 26, item 1): a world session is played on an engine
that runs slower while it plays (as beside a browser on the same cores), then closed; the
daemon's verdict (`admission.serves`) and its cost model come back to the start-up profile's."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import httpx
import pytest

from engine.api import StepPlan, StepResult
from tests.conftest import off_loop, running_daemon, tiny_engine
from tests.e2e._util import collect_frames, session_client


class _SlowedEngine:
    """The real tiny engine; while `extra_s` > 0 every step takes (and reports) that much longer."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self.extra_s = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def step(self, plan: StepPlan) -> StepResult:
        result: StepResult = self._engine.step(plan)
        if self.extra_s <= 0:
            return result
        time.sleep(self.extra_s)
        return dataclasses.replace(result, seconds={p: s + self.extra_s for p, s in result.seconds.items()})


def _verdict(url: str) -> tuple[dict[str, int], dict[str, float]]:
    admission = httpx.get(f"{url}/v1/capacity").json()["admission"]
    return admission["serves"], admission["cost_model"]["cost_rate"]


@dataclasses.dataclass
class _Seen:
    startup: tuple[dict[str, int], dict[str, float]]
    playing: tuple[dict[str, int], dict[str, float]]
    contexts: set[int]
    back_after_s: float
    back: tuple[dict[str, int], dict[str, float]]


@pytest.mark.slow  # plays 7.5 s of a world session
async def test_after_a_session_closes_the_verdict_is_the_start_up_one_within_2_s() -> None:
    engine = _SlowedEngine(tiny_engine())
    async with off_loop(running_daemon(engine)) as d:
        startup = await asyncio.to_thread(_verdict, d.url)
        engine.extra_s = 0.004  # each step slower while the session plays, and measured so
        async with session_client(d.url, "world") as client:
            frames = await collect_frames(client, 120, timeout_s=60.0)  # 7.5 s of media: chunk index > 16
            playing = await asyncio.to_thread(_verdict, d.url)
            items = (await asyncio.to_thread(httpx.get, f"{d.url}/v1/capacity")).json()
            contexts = {i["context"] for i in items["admission"]["cost_model"]["items"]}
            engine.extra_s = 0.0
        closed = time.monotonic()
        while True:
            back = await asyncio.to_thread(_verdict, d.url)
            if back == startup or time.monotonic() - closed > 5.0:
                break
            await asyncio.sleep(0.05)
        seen = _Seen(startup, playing, contexts, time.monotonic() - closed, back)
    assert frames[-1].idx >= 119
    assert seen.contexts == {0, 1, 2}  # chunk indices past the window (1 sink + 2) are filed under 2
    assert seen.playing[1]["1"] > seen.startup[1]["1"]  # the slow steps moved the model while playing
    assert seen.back == seen.startup  # the same serves and the same cost rates, exactly
    assert seen.back_after_s <= 2.0
