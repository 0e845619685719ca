"""Share links through a fleet gateway: `POST/GET /v1/sessions/{sid}/viewers` and the revoke reach
the worker the directory binds the session to (a real daemon under uvicorn on loopback, the
gateway's app with an in-memory directory), and come back as the worker answered them."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from fleet.gateway import GatewayConfig, create_gateway_app
from fleet.messages import WorkerCapacity
from fleet.sim.memdir import MemoryDirectory
from tests.conftest import RunningDaemon, serving

pytestmark = pytest.mark.asyncio


class _NoCalls:
    async def call(self, worker: WorkerCapacity, request: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError(f"share links go over HTTP, not control calls; got {request}")


async def test_share_links_reach_the_bound_worker(daemon: RunningDaemon) -> None:
    directory = MemoryDirectory(time.monotonic, ttl_s=600)
    await directory.publish(WorkerCapacity(worker="h1/cpu-0", instance_id=1, base_url=daemon.url,
                                           headroom={"world": 1.0}, cost={"world": 0.1}, kv_free_sessions=8,
                                           sessions=0, published_at=time.time()))
    app = create_gateway_app(GatewayConfig(redis_url="redis://unused", sweep_s=0), calls=_NoCalls(),
                             directory=directory)
    async with httpx.AsyncClient(timeout=10) as http:
        created = (await http.post(f"{daemon.url}/v1/sessions", json={"mode": "world"})).json()
        sid = created["session_id"]
        owner = {"Authorization": f"Bearer {created['token']}"}
        await directory.bind(sid, "h1/cpu-0", "world")
        async with serving(app) as gw:
            link = await http.post(f"{gw}/v1/sessions/{sid}/viewers", json={"label": "via gateway"}, headers=owner)
            assert link.status_code == 201, link.text
            assert link.json()["ws_url"] == created["ws_url"]  # the worker's URLs
            listed = await http.get(f"{gw}/v1/sessions/{sid}/viewers", headers=owner)
            assert [v["label"] for v in listed.json()["viewers"]] == ["via gateway"]
            viewer = {"Authorization": f"Bearer {link.json()['token']}"}
            denied = await http.post(f"{gw}/v1/sessions/{sid}/viewers", json={}, headers=viewer)
            assert (denied.status_code, denied.json()["error"]["code"]) == (403, "forbidden")
            gone = await http.delete(f"{gw}/v1/sessions/{sid}/viewers/{link.json()['grant_id']}", headers=owner)
            assert gone.status_code == 204
            unknown = await http.get(f"{gw}/v1/sessions/s_0000000000000000/viewers", headers=owner)
            assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "not_found")
        await http.delete(f"{daemon.url}/v1/sessions/{sid}", headers=owner)
