"""Faults: an engine exception ends only its session; Redis down leaves sessions running and
makes creation a clear 503 until it is back."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from engine.api import StepPlan, StepResult
from protocols.client import SessionClient
from protocols.messages import Error
from tests.conftest import RedisServer, off_loop, running_daemon, tiny_engine
from tests.e2e._util import assert_timeline, collect, collect_frames


class _FaultyEngine:
    """The real tiny engine, except that sessions opened with a prompt starting "explode-begin"
    fail when a chunk begins and "explode-step" ones make every batched step they are in raise
    (a fault injected inside this test only)."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self._bad: dict[str, str] = {}

    def open_session(self, session_id: str, *, seed: int, prompt: str) -> bool:
        if prompt.startswith("explode"):
            self._bad[session_id] = prompt
        return bool(self._engine.open_session(session_id, seed=seed, prompt=prompt))

    def begin_chunk(self, session_id: str, actions: list[Any]) -> int:
        if self._bad.get(session_id) == "explode-begin":
            raise RuntimeError("injected fault in begin_chunk")
        return int(self._engine.begin_chunk(session_id, actions))

    def step(self, plan: StepPlan) -> StepResult:
        if any(self._bad.get(item.session_id) == "explode-step" for item in plan.items):
            raise RuntimeError("injected fault in step")
        result: StepResult = self._engine.step(plan)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


@pytest.mark.slow
async def test_an_engine_fault_ends_only_its_session() -> None:
    async with off_loop(running_daemon(_FaultyEngine(tiny_engine()))) as d:
        healthy = SessionClient(timeout_s=20.0)
        await healthy.create(d.url, "world")
        await healthy.connect()
        doomed = []
        for prompt in ("explode-begin", "explode-step"):
            c = SessionClient(timeout_s=20.0)
            await c.create(d.url, "world", prompt=prompt)
            await c.connect()
            doomed.append(c)
        try:
            for c in doomed:
                msgs = await collect(c, lambda m: any(isinstance(x, Error) for x in m))
                err = msgs[-1]
                assert (err.code, err.fatal) == ("engine_fault", True)
                assert (await c.status()).state == "failed"
            frames = await collect_frames(healthy, 40)
            assert_timeline(frames, 16)
            assert (await healthy.status()).state == "active"
        finally:
            await healthy.close_session()
            await healthy.aclose()
            for c in doomed:
                await c.close_session()
                await c.aclose()
        assert d.daemon.metrics.engine_faults._value.get() == 2


@pytest.mark.slow
async def test_redis_down_keeps_sessions_running_and_create_is_503_until_it_is_back(
        redis_server: RedisServer) -> None:
    async with off_loop(running_daemon(redis_url=redis_server.url)) as d, \
            httpx.AsyncClient(base_url=d.url, timeout=10) as http, SessionClient(timeout_s=20.0) as client:
        await client.create(d.url, "world")
        await client.connect()
        before = await collect_frames(client, 8)
        await asyncio.to_thread(redis_server.kill)
        refused = await http.post("/v1/sessions", json={"mode": "world"})
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "store_unavailable"
        assert refused.headers["retry-after"] == "2"
        during = await collect_frames(client, 24)  # the live session does not notice
        assert_timeline(before + during, 16)
        await asyncio.to_thread(redis_server.start)
        deadline = time.monotonic() + 10
        while (created := await http.post("/v1/sessions", json={"mode": "world"})).status_code != 201 \
                and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert created.status_code == 201
        after = await collect_frames(client, 8)
        assert_timeline(before + during + after, 16)
        await client.close_session()
