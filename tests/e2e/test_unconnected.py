"""Nothing a stray client can hold (issue 26, item 4): a created session no client connects within
`unconnected_close_s` is released, admission gets its capacity back, and it is counted."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tests.conftest import off_loop, running_daemon
from tests.e2e._util import collect_frames, session_client


def _counter(url: str) -> float:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith("sessiond_sessions_unconnected_closed_total "):
            return float(line.split()[1])
    raise AssertionError("no sessiond_sessions_unconnected_closed_total in /metrics")


@pytest.mark.slow  # waits out a 1.5 s bound twice
async def test_an_unconnected_session_is_released_within_its_bound_and_a_connected_one_is_kept() -> None:
    async with off_loop(running_daemon(unconnected_close_s=1.5, max_sessions=2)) as d:
        fresh = (await asyncio.to_thread(httpx.get, f"{d.url}/v1/capacity")).json()["serves_now"]
        created = await asyncio.to_thread(httpx.post, f"{d.url}/v1/sessions", json={"mode": "world"})
        began = time.monotonic()
        sid, token = created.json()["session_id"], created.json()["token"]
        holding = (await asyncio.to_thread(httpx.get, f"{d.url}/v1/capacity")).json()["serves_now"]
        async with session_client(d.url, "world") as client:
            await collect_frames(client, 4)
            while True:
                status = await asyncio.to_thread(httpx.get, f"{d.url}/v1/sessions/{sid}",
                                                 headers={"Authorization": f"Bearer {token}"})
                if status.status_code == 404 or time.monotonic() - began > 10.0:
                    break
                await asyncio.sleep(0.05)
            released_after = time.monotonic() - began
            await asyncio.sleep(1.0)  # the connected session outlives the bound
            kept = (await asyncio.to_thread(httpx.get, f"{d.url}/v1/capacity")).json()
            count = await asyncio.to_thread(_counter, d.url)
    assert (fresh, holding) == ({"world": 2, "director": 2}, {"world": 1, "director": 1})
    assert status.status_code == 404
    # never before its bound (the client's clock starts after the create returned); the bound itself
    # is asserted with an injected clock in tests/sessiond/runtime/test_unconnected.py (a wall-clock
    # upper bound here failed at 2.4 s on a loaded box)
    assert released_after >= 1.5 - 0.1
    assert (kept["sessions"]["total"], kept["serves_now"]) == (1, {"world": 1, "director": 1})
    assert count == 1.0
