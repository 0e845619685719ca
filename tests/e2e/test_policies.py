"""`--policy`: the admission policies of sessiond.admission plugged into the live daemon, and
`--record`: the run's traffic written as a recorded trace."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import httpx
import pytest

from sessiond.traces.format import load_trace
from tests.conftest import daemon_process, off_loop, running_daemon
from tests.e2e._util import collect, collect_frames, new_client, session_client


@pytest.mark.slow
async def test_duty_policy_is_fed_each_tick_and_publishes_each_sessions_duty() -> None:
    async with off_loop(running_daemon(policy="duty")) as d, httpx.AsyncClient(base_url=d.url) as http:
        client = await new_client(d.url, "world")
        await collect_frames(client, 16)
        sid = client.session.session_id
        deadline = time.monotonic() + 5
        while True:  # scheduler ticks (twice a second) feed the tracker from the session states
            cap = (await http.get("/v1/capacity")).json()["admission"]
            if cap["demanding"] or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        assert (cap["policy"], cap["scheduling"], cap["sessions"], cap["demanding"]) == ("duty", "deadline", 1, 1)
        assert cap["predicted_load"] > 0 and cap["cost_model"]
        assert cap["per_session"][sid]["demanding"] is True and cap["per_session"][sid]["measured"] > 0
        status = await http.get(f"/v1/sessions/{sid}", headers={"Authorization": f"Bearer {client.session.token}"})
        duty = status.json()["admission"]
        assert (duty["prior"], duty["demanding"]) == (cap["per_session"][sid]["prior"], True)
        assert 0 < duty["duty"] <= 1 and duty["measured"] > 0
        metrics = (await http.get("/metrics")).text
        assert f'sessiond_session_duty{{mode="world",session="{sid}"}}' in metrics
        assert "sessiond_admission_predicted_load" in metrics
        await client.close_session()
        await client.aclose()


async def test_fifo_policy_schedules_in_request_order_and_streams() -> None:
    async with off_loop(running_daemon(policy="fifo")) as d, httpx.AsyncClient(base_url=d.url) as http:
        cap = (await http.get("/v1/capacity")).json()["admission"]
        assert (cap["policy"], cap["scheduling"]) == ("fifo", "fifo")
        client = await new_client(d.url, "director")
        await client.direct("a road", seconds=1)
        msgs = await collect(client, lambda m: any(getattr(x, "T", "") == "segment_end" for x in m))
        assert sum(getattr(m, "T", "") == "frame" for m in msgs) == 16
        await client.close_session()
        await client.aclose()


def test_one_per_gpu_holds_a_second_create_open_until_the_first_session_closes() -> None:
    with running_daemon(policy="one-per-gpu", admission_wait_s=20.0) as d:
        first = httpx.post(f"{d.url}/v1/sessions", json={"mode": "director"}).json()
        answer: dict[str, httpx.Response] = {}
        waiter = threading.Thread(target=lambda: answer.setdefault(
            "r", httpx.post(f"{d.url}/v1/sessions", json={"mode": "director"}, timeout=30)))
        started = time.monotonic()
        waiter.start()
        time.sleep(0.5)
        assert "r" not in answer  # held open in the wait list
        assert httpx.get(f"{d.url}/v1/capacity").json()["admission"]["waiting"] == 1
        httpx.delete(f"{d.url}/v1/sessions/{first['session_id']}",
                     headers={"Authorization": f"Bearer {first['token']}"})
        waiter.join(20)
        assert answer["r"].status_code == 201 and 0.5 <= time.monotonic() - started < 20


def test_one_per_gpu_answers_503_with_retry_after_once_the_wait_is_over() -> None:
    with running_daemon(policy="one-per-gpu", admission_wait_s=0.3) as d:
        assert httpx.post(f"{d.url}/v1/sessions", json={"mode": "director"}).status_code == 201
        started = time.monotonic()
        refused = httpx.post(f"{d.url}/v1/sessions", json={"mode": "director"})
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "capacity"
        assert refused.headers["retry-after"] == "30" and time.monotonic() - started >= 0.3
        assert httpx.get(f"{d.url}/v1/capacity").json()["admission"]["waiting"] == 0


@pytest.mark.slow
async def test_serve_with_record_writes_the_runs_traffic_as_a_recorded_trace_at_shutdown(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    async with off_loop(daemon_process("--record", str(out), log=tmp_path / "daemon.log")) as (url, _):
        async with session_client(url, "director", prompt="a mill", seed=4) as client:
            await client.direct("the mill turns", seconds=1)
            await collect_frames(client, 4)
            await client.interrupt()
        world = await new_client(url, "world")
        await world.send_action(["w"])
        await collect_frames(world, 4)
        await world.aclose()  # left open: the daemon's shutdown ends it
    trace = load_trace(out)  # the daemon stopped (SIGTERM) and wrote it on its way out
    assert (trace.header.source, trace.header.name) == ("recorded", "run")
    events = [(e.s, e.ev) for e in trace.events]
    assert events[:4] == [("s1", "create"), ("s1", "direct"), ("s1", "interrupt"), ("s1", "close")]
    assert events[4:6] == [("s2", "create"), ("s2", "action")]
    first, direct = trace.events[0], trace.events[1]
    assert (first.fields["mode"], direct.fields["prompt"], direct.fields["seconds"]) == ("director", "the mill turns", 1)
    assert trace.events[4].fields["mode"] == "world" and trace.events[5].fields["keys"] == ["w"]
    assert [e.t for e in trace.events] == sorted(e.t for e in trace.events)
