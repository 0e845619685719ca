"""A session nobody is attached to any more (a browser that crashed says nothing) gives its place to a
newcomer the admission would otherwise refuse, once it has been idle `reclaim_after_s` (offloaded or
not); one with its owner attached, or idle for less, keeps it."""

from __future__ import annotations

import asyncio
import time

import httpx

from tests.conftest import off_loop, running_daemon
from tests.e2e._util import collect_frames, new_client


def _reclaimed(url: str) -> float:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith("sessiond_sessions_reclaimed_total "):
            return float(line.split()[1])
    raise AssertionError("no sessiond_sessions_reclaimed_total in /metrics")


async def _state(url: str, sid: str, token: str) -> tuple[int, str | None]:
    response = await asyncio.to_thread(httpx.get, f"{url}/v1/sessions/{sid}",
                                       headers={"Authorization": f"Bearer {token}"})
    return response.status_code, response.json().get("state") if response.status_code == 200 else None


async def _create(url: str) -> httpx.Response:
    return await asyncio.to_thread(httpx.post, f"{url}/v1/sessions", json={"mode": "world"})


async def test_an_abandoned_session_is_closed_for_a_newcomer_and_an_attached_one_is_not() -> None:
    async with off_loop(running_daemon(max_sessions=1, reclaim_after_s=3.0, idle_offload_s=0.5)) as d:
        first = await new_client(d.url, "world")
        sid, token = first.session.session_id, first.session.token  # type: ignore[union-attr]
        try:
            await collect_frames(first, 4)
            attached = await _create(d.url)  # its owner is attached: it keeps its place
            assert (attached.status_code, attached.json()["error"]["reason"]) == (503, "max_sessions")
            await first.disconnect()  # as a crashed browser: no DELETE
            began = time.monotonic()
            states = [await _state(d.url, sid, token)]
            while states[-1] != (200, "offloaded") and time.monotonic() - began < 10:
                await asyncio.sleep(0.05)  # idle, then offloaded after idle_offload_s: still idle since it went idle
                states.append(await _state(d.url, sid, token))
            early = await _create(d.url)  # idle, but for less than reclaim_after_s
            early_s = time.monotonic() - began
            await asyncio.sleep(max(0.0, 3.3 - early_s))
            late = await _create(d.url)
            gone = await _state(d.url, sid, token)
            count = await asyncio.to_thread(_reclaimed, d.url)
        finally:
            await first.aclose()
    assert (200, "idle") in states and states[-1] == (200, "offloaded")
    assert early_s < 2.5 and (early.status_code, early.json()["error"]["reason"]) == (503, "max_sessions")
    assert late.status_code == 201, late.text
    assert late.json()["session_id"] != sid and gone == (404, None)
    assert count == 1.0
