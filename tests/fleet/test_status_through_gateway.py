"""The gateway's session status carries the worker's `spectators` and `players` counts, end to end
on loopback: a `sessiond serve --fleet` worker (tiny model, CPU) and a direct `sessiond gateway` over
a real redis-server and Dynamo file discovery. With the owner, one spectator and one co-player
connected, `GET /v1/sessions/{sid}` through the gateway says 1 spectator and 2 players, exactly what
the worker's own status says; the spectator gone, 0."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from protocols.client import SessionClient
from tests.conftest import RedisServer

from ._fleet import WORKER_TIMEOUT_S, Fleet, live_workers, until
from .conftest import Processes, append_only_redis

pytestmark = [pytest.mark.slow, pytest.mark.redis]

KEY = "s1/cpu-0"


@pytest.fixture
def fleet(processes: Processes, discovery_env: dict[str, str]) -> Iterator[Fleet]:
    server: RedisServer
    with append_only_redis() as server:
        yield Fleet(processes, server.url, discovery_env["DYN_FILE_KV"])


async def _counts(http: httpx.AsyncClient, url: str, sid: str, token: str) -> tuple[int, int]:
    response = await http.get(f"{url}/v1/sessions/{sid}", headers={"authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body["spectators"], body["players"]


async def test_the_gateway_status_counts_spectators_and_players_as_the_worker_does(fleet: Fleet) -> None:
    fleet.start_worker(KEY, "--max-sessions", "2")
    gw = fleet.start_gateway()

    async def sees() -> bool:
        return await live_workers(gw) == [KEY]

    await until(sees, WORKER_TIMEOUT_S, f"gateway {gw} seeing {KEY}")
    worker = f"http://127.0.0.1:{fleet.ports[KEY]}"
    owner = SessionClient(timeout_s=15, auto_received=True)
    others: list[SessionClient] = []
    async with httpx.AsyncClient(timeout=20) as http:
        try:
            created = await owner.create(gw, "world", players=2)
            sid, token = created.session_id, created.token
            auth = {"authorization": f"Bearer {token}"}
            assert await _counts(http, gw, sid, token) == (0, 0)  # nobody connected yet
            await owner.connect("raw")
            link = (await http.post(f"{gw}/v1/sessions/{sid}/viewers", json={}, headers=auth)).json()
            invite = (await http.post(f"{gw}/v1/sessions/{sid}/players", json={}, headers=auth)).json()
            spectator = SessionClient(timeout_s=15, auto_received=True)
            player = SessionClient(timeout_s=15, auto_received=True)
            others += [spectator, player]
            for client, grant in ((spectator, link), (player, invite)):
                client.attach(gw, dataclasses.replace(created, token=grant["token"]))
            assert (await spectator.connect("raw")).session["role"] == "viewer"
            assert (await player.connect("raw")).session["role"] == "player"

            # the owner and the co-player steer, one watches: any live token reads it, gateway and worker alike
            for url in (gw, worker):
                for who in (token, link["token"], invite["token"]):
                    assert await _counts(http, url, sid, who) == (1, 2), (url, who)

            await spectator.aclose()

            async def watched_by_none() -> bool:
                return await _counts(http, gw, sid, token) == (0, 2)

            await until(watched_by_none, 30, "the gateway's status counting no spectator")
            assert await _counts(http, worker, sid, token) == (0, 2)
        finally:
            for client in others:
                await client.aclose()
            await owner.aclose()
