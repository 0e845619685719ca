"""`--policy`: the admission policies of sessiond.admission plugged into the live daemon, and
`--record`: the run's traffic written as a recorded trace."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx

from tests.conftest import running_daemon
from tests.e2e._util import collect_frames, new_client


def test_duty_policy_is_calibrated_at_start_and_fed_by_the_sessions() -> None:
    async def stream(url: str) -> None:
        client = await new_client(url, "world")
        await collect_frames(client, 16)
        cap = httpx.get(f"{url}/v1/capacity").json()["admission"]
        assert (cap["policy"], cap["sessions"], cap["demanding"]) == ("duty", 1, 1)
        assert cap["predicted_load"] > 0 and cap["cost_model"]
        metrics = httpx.get(f"{url}/metrics").text
        assert f'sessiond_session_duty{{mode="world",session="{client.session.session_id}"}}' in metrics
        await client.close_session()
        await client.aclose()

    with running_daemon(policy="duty") as d:
        asyncio.run(stream(d.url))


def test_one_per_gpu_refuses_a_second_session_until_the_first_closes() -> None:
    with running_daemon(policy="one-per-gpu") as d:
        first = httpx.post(f"{d.url}/v1/sessions", json={"mode": "director"}).json()
        refused = httpx.post(f"{d.url}/v1/sessions", json={"mode": "director"})
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "capacity"
        assert "retry-after" in refused.headers
        httpx.delete(f"{d.url}/v1/sessions/{first['session_id']}",
                     headers={"Authorization": f"Bearer {first['token']}"})
        assert httpx.post(f"{d.url}/v1/sessions", json={"mode": "director"}).status_code == 201


def test_record_writes_this_runs_traffic_as_a_recorded_trace(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"

    async def traffic(url: str) -> None:
        client = await new_client(url, "director", prompt="a mill", seed=4)
        await client.direct("the mill turns", seconds=1)
        await collect_frames(client, 4)
        await client.interrupt()
        await client.close_session()
        await client.aclose()

    with running_daemon(record=str(out)) as d:
        asyncio.run(traffic(d.url))
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[0]["format"] == "sessiond-trace" and lines[0]["source"] == "recorded"
    events = [(e["s"], e["ev"]) for e in lines[1:]]
    assert events == [("s1", "create"), ("s1", "direct"), ("s1", "interrupt"), ("s1", "close")]
    assert lines[1]["mode"] == "director" and lines[2]["prompt"] == "the mill turns"
