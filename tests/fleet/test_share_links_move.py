"""A share link made through the gateway outlives the session's move, end to end on loopback: two
`sessiond serve --fleet` workers (tiny model, CPU), a direct `sessiond gateway` and a `--proxy` one
over a real redis-server and Dynamo file discovery. Links and invites name the gateway's pages;
a spectator that follows the link as the watch page does (the page's origin asks where the session
is, then connects there) gets frames; the worker holding the session drains (SIGTERM), and a new
spectator with the SAME link reaches the session on the other worker, through either gateway."""

from __future__ import annotations

import asyncio
import dataclasses
import signal
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from protocols.client import SessionClient
from protocols.http import CreateSessionResponse
from protocols.messages import Frame
from tests.conftest import RedisServer

from ._fleet import WORKER_TIMEOUT_S, Fleet, bindings, live_workers, until
from .conftest import Processes, append_only_redis

pytestmark = [pytest.mark.slow, pytest.mark.redis]

KEYS = ["m1/cpu-0", "m1/cpu-1"]


@pytest.fixture
def fleet(processes: Processes, discovery_env: dict[str, str]) -> Iterator[Fleet]:
    server: RedisServer
    with append_only_redis() as server:
        yield Fleet(processes, server.url, discovery_env["DYN_FILE_KV"])


async def _frames(client: SessionClient, count: int) -> list[int]:
    """The idx of the next `count` frames the client receives."""
    got: list[int] = []
    async for msg in client.messages():
        if isinstance(msg, Frame):
            got.append(msg.idx)
            if len(got) == count:
                break
    return got


async def _watch(link: str, session: CreateSessionResponse) -> tuple[SessionClient, list[int]]:
    """What the watch page does with a share link: only its origin, session and token; it asks
    `GET /v1/sessions/{sid}` there where the session is now and connects to the URLs it names."""
    parts = urlsplit(link)
    query = parse_qs(parts.query)
    (sid,), (token,) = query["session"], query["token"]
    viewer = SessionClient(timeout_s=15, auto_received=True)
    viewer.attach(f"{parts.scheme}://{parts.netloc}",
                  dataclasses.replace(session, session_id=sid, token=token, ws_url="", webrtc_url=""))
    welcome = await viewer.reconnect(within_s=30)
    assert (welcome.session["role"], welcome.session["session_id"]) == ("viewer", sid)
    return viewer, await asyncio.wait_for(_frames(viewer, 3), 30)


async def _owner_plays(owner: SessionClient, seen: list[int]) -> None:
    """The owner reads (and acknowledges) every frame, following `moved` by itself."""
    async for msg in owner.messages():
        if isinstance(msg, Frame):
            seen.append(msg.idx)


async def test_a_share_link_through_the_gateway_survives_a_drain(fleet: Fleet) -> None:
    for key in KEYS:
        fleet.start_worker(key, "--max-sessions", "2")
    gw, gwp = fleet.start_gateway(), fleet.start_gateway("--proxy")
    await until(lambda: _sees(gw), WORKER_TIMEOUT_S, f"gateway {gw} seeing {KEYS}")
    await until(lambda: _sees(gwp), WORKER_TIMEOUT_S, f"gateway {gwp} seeing {KEYS}")
    owner = SessionClient(timeout_s=15, auto_received=True)
    viewers: list[SessionClient] = []
    playing: asyncio.Task[None] | None = None
    async with httpx.AsyncClient(timeout=20) as http:
        try:
            created = await owner.create(gw, "world", players=2)
            sid = created.session_id
            auth = {"authorization": f"Bearer {created.token}"}
            await owner.connect("raw")
            seen: list[int] = []
            playing = asyncio.create_task(_owner_plays(owner, seen))
            first = fleet.key_of(created.ws_url)
            other = next(k for k in KEYS if k != first)

            # the links name the gateway's pages; media: the worker (direct) or the gateway (proxy)
            link = (await http.post(f"{gw}/v1/sessions/{sid}/viewers", json={"label": "l"}, headers=auth)).json()
            assert (link["watch_url"], link["ws_url"], link["webrtc_url"]) == (
                f"{gw}/watch.html?session={sid}&token={link['token']}",
                f"ws://127.0.0.1:{fleet.ports[first]}/v1/sessions/{sid}/ws",
                f"http://127.0.0.1:{fleet.ports[first]}/v1/sessions/{sid}/webrtc")
            proxied = (await http.post(f"{gwp}/v1/sessions/{sid}/viewers", json={}, headers=auth)).json()
            host = gwp.split("//")[1]
            assert (proxied["watch_url"], proxied["ws_url"], proxied["webrtc_url"]) == (
                f"{gwp}/watch.html?session={sid}&token={proxied['token']}", f"ws://{host}/v1/sessions/{sid}/ws",
                f"{gwp}/v1/sessions/{sid}/webrtc")
            invite = (await http.post(f"{gw}/v1/sessions/{sid}/players", json={}, headers=auth)).json()
            assert (invite["player"], invite["play_url"]) == (1, f"{gw}/world.html?session={sid}&token={invite['token']}")
            page = await http.get(link["watch_url"])
            assert page.status_code == 200 and 'src="watch.js"' in page.text  # the gateway serves the page

            # a spectator with each link gets frames (the proxied one through its ws_url as given)
            viewer, frames = await _watch(link["watch_url"], created)
            viewers.append(viewer)
            assert viewer.session is not None and viewer.session.ws_url == link["ws_url"]
            assert frames == list(range(frames[0], frames[0] + 3))
            through = SessionClient(timeout_s=15, auto_received=True)
            viewers.append(through)
            through.attach(gwp, dataclasses.replace(created, token=proxied["token"], ws_url=proxied["ws_url"]))
            assert (await through.connect("raw")).session["role"] == "viewer"
            got = await asyncio.wait_for(_frames(through, 3), 30)
            assert got == list(range(got[0], got[0] + 3))
            for v in viewers:
                await v.aclose()
            viewers.clear()

            # the worker drains: the session goes to the other one, the owner follows `moved`
            before = seen[-1]
            fleet.workers[first].send_signal(signal.SIGTERM)
            assert await fleet.exit_status(first, 60) == 0
            moved = (await bindings(fleet.redis_url, [sid]))[sid]
            assert moved is not None and (moved.worker, moved.epoch) == (other, 2)
            await until(lambda: _past(seen, before + 3), 30, "the owner's frames from the new worker")

            # the SAME links: the watch link now leads to the new worker, the proxied ws_url through the gateway
            viewer, frames = await _watch(link["watch_url"], created)
            viewers.append(viewer)
            assert viewer.session is not None
            assert viewer.session.ws_url == f"ws://127.0.0.1:{fleet.ports[other]}/v1/sessions/{sid}/ws"
            assert frames[0] > before and frames == list(range(frames[0], frames[0] + 3))
            again = SessionClient(timeout_s=15, auto_received=True)
            viewers.append(again)
            again.attach(gwp, dataclasses.replace(created, token=proxied["token"], ws_url=proxied["ws_url"]))
            assert (await again.connect("raw")).session["role"] == "viewer"
            got = await asyncio.wait_for(_frames(again, 3), 30)
            assert got[0] > before and got == list(range(got[0], got[0] + 3))
            listed = (await http.get(f"{gw}/v1/sessions/{sid}/viewers", headers=auth)).json()["viewers"]
            assert sorted((v["label"], v["connected"]) for v in listed) == [("", 1), ("l", 1)]
        finally:
            if playing is not None:
                playing.cancel()
                await asyncio.gather(playing, return_exceptions=True)
            for v in viewers:
                await v.aclose()
            await owner.aclose()


async def _past(seen: list[int], idx: int) -> bool:
    return bool(seen) and seen[-1] >= idx


async def _sees(gw: str) -> bool:
    return await live_workers(gw) == sorted(KEYS)
