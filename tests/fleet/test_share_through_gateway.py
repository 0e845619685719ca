"""Share links through a fleet gateway: `POST/GET /v1/sessions/{sid}/viewers`, the revoke and the
co-play invites reach the worker the directory binds the session to (a real daemon under uvicorn on
loopback, the gateway's app with an in-memory directory); a new link comes back naming the
gateway's pages (which the gateway serves), and its media URLs name the worker (direct mode) or the
gateway (proxy mode). That a link outlives a move is tests/fleet/test_share_links_move.py."""

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
            token = link.json()["token"]
            assert link.json()["watch_url"] == f"{gw}/watch.html?session={sid}&token={token}"
            assert (link.json()["ws_url"], link.json()["webrtc_url"]) == (created["ws_url"], created["webrtc_url"])
            page = await http.get(link.json()["watch_url"])
            assert page.status_code == 200 and '<script type="module" src="watch.js">' in page.text
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


async def _gateway_sees(directory: MemoryDirectory, daemon: RunningDaemon) -> None:
    await directory.publish(WorkerCapacity(worker="h1/cpu-0", instance_id=1, base_url=daemon.url,
                                           headroom={"world": 1.0}, cost={"world": 0.1}, kv_free_sessions=8,
                                           sessions=0, published_at=time.time()))


async def test_proxy_mode_links_and_invites_name_the_gateway(daemon: RunningDaemon) -> None:
    directory = MemoryDirectory(time.monotonic, ttl_s=600)
    await _gateway_sees(directory, daemon)
    proxied = create_gateway_app(GatewayConfig(redis_url="redis://unused", sweep_s=0, proxy=True), calls=_NoCalls(),
                                 directory=directory)
    direct = create_gateway_app(GatewayConfig(redis_url="redis://unused", sweep_s=0), calls=_NoCalls(),
                                directory=directory)
    async with httpx.AsyncClient(timeout=10) as http:
        created = (await http.post(f"{daemon.url}/v1/sessions", json={"mode": "world", "players": 3})).json()
        sid = created["session_id"]
        owner = {"Authorization": f"Bearer {created['token']}"}
        await directory.bind(sid, "h1/cpu-0", "world")
        try:
            async with serving(proxied) as gw, serving(direct) as gd:
                host = gw.split("//")[1]
                link = (await http.post(f"{gw}/v1/sessions/{sid}/viewers", json={}, headers=owner)).json()
                assert {k: link[k] for k in ("watch_url", "ws_url", "webrtc_url")} == {
                    "watch_url": f"{gw}/watch.html?session={sid}&token={link['token']}",
                    "ws_url": f"ws://{host}/v1/sessions/{sid}/ws", "webrtc_url": f"{gw}/v1/sessions/{sid}/webrtc"}
                invite = await http.post(f"{gw}/v1/sessions/{sid}/players", json={"label": "p1"}, headers=owner)
                assert invite.status_code == 201, invite.text
                made = invite.json()
                assert (made["player"], made["play_url"], made["ws_url"], made["webrtc_url"]) == (
                    1, f"{gw}/world.html?session={sid}&token={made['token']}", f"ws://{host}/v1/sessions/{sid}/ws",
                    f"{gw}/v1/sessions/{sid}/webrtc")
                second = (await http.post(f"{gd}/v1/sessions/{sid}/players", json={}, headers=owner)).json()
                assert (second["player"], second["play_url"], second["ws_url"]) == (
                    2, f"{gd}/world.html?session={sid}&token={second['token']}", created["ws_url"])
                full = await http.post(f"{gd}/v1/sessions/{sid}/players", json={}, headers=owner)
                assert (full.status_code, full.json()["error"]["code"]) == (409, "conflict")  # passed on as it was
                # the token of a link made through the gateway works on the worker (the link's one secret)
                said = await http.get(f"{daemon.url}/v1/sessions/{sid}",
                                      headers={"Authorization": f"Bearer {link['token']}"})
                assert (said.status_code, said.json()["session_id"]) == (200, sid)
        finally:
            await http.delete(f"{daemon.url}/v1/sessions/{sid}", headers=owner)
