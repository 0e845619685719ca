"""Spectators through a real daemon (tiny engine, uvicorn on loopback): share links, the shared
raw and fMP4 streams with the owner's idx and pts, mid-stream joins, a slow spectator, revoke and
expiry, what a spectator may not send, a flood of connects."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import socket
import time
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from protocols.client import SessionClient
from protocols.messages import (
    Action,
    Direct,
    Error,
    Flush,
    Frame,
    Hello,
    Init,
    Interrupt,
    Media,
    Pause,
    Resume,
    Welcome,
)
from protocols.timeline import pts_for
from tests.conftest import RunningDaemon, off_loop, running_daemon, tiny_engine
from tests.e2e._raw import RawConn
from tests.e2e._util import collect

pytestmark = pytest.mark.asyncio


async def share(url: str, sid: str, token: str, **body: Any) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=10.0) as http:
        r = await http.post(f"{url}/v1/sessions/{sid}/viewers", json=body,
                            headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


async def spectator(url: str, owner: SessionClient, viewer_token: str, media: str = "raw") -> SessionClient:
    client = SessionClient(timeout_s=20.0)
    assert owner.session is not None
    client.attach(url, dataclasses.replace(owner.session, token=viewer_token))
    welcome = await client.connect(media=media)
    assert welcome.session["role"] == "viewer"
    return client


def digest(frame: Frame) -> str:
    return hashlib.sha256(frame.data).hexdigest()[:16]


def live_session(running: RunningDaemon, sid: str) -> Any:
    return running.daemon.sessions[sid]


async def wait_for(predicate: Any, timeout_s: float = 20.0) -> None:
    end = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < end, "condition not reached in time"
        await asyncio.sleep(0.02)


async def test_share_link_answer_and_owner_only(daemon: RunningDaemon) -> None:
    owner = SessionClient(timeout_s=20.0)
    created = await owner.create(daemon.url, "world")
    try:
        link = await share(daemon.url, created.session_id, created.token, ttl_s=120, label="class")
        sid = created.session_id
        assert link["role"] == "viewer" and link["grant_id"].startswith("g_") and link["token"] != created.token
        assert link["watch_url"] == f"{daemon.url}/watch.html?session={sid}&token={link['token']}"
        assert link["ws_url"] == created.ws_url and link["webrtc_url"] == created.webrtc_url
        assert 119 < link["expires_at"] - time.time() <= 120
        async with httpx.AsyncClient(timeout=10.0) as http:
            viewer = {"Authorization": f"Bearer {link['token']}"}
            base = f"{daemon.url}/v1/sessions/{sid}"
            status = await http.get(base, headers=viewer)  # a viewer may read the status
            assert status.status_code == 200
            assert (status.json()["spectators"], status.json()["players"]) == (0, 0)
            for method, path in (("POST", "/viewers"), ("GET", "/viewers"), ("DELETE", ""),
                                 ("DELETE", f"/viewers/{link['grant_id']}")):
                r = await http.request(method, base + path, headers=viewer, json={} if method == "POST" else None)
                assert (r.status_code, r.json()["error"]["code"]) == (403, "forbidden"), (method, path)
            for body, field in (({"ttl_s": 0}, "ttl_s"), ({"ttl_s": 8 * 86400}, "ttl_s"), ({"ttl_s": "1"}, "ttl_s"),
                                ({"label": 5}, "label"), ({"when": 1}, "when")):
                r = await http.post(base + "/viewers", json=body, headers={"Authorization": f"Bearer {created.token}"})
                assert (r.status_code, r.json()["error"]["code"], r.json()["error"].get("field")) == \
                    (400, "invalid_field", field), body
            listed = (await http.get(base + "/viewers", headers={"Authorization": f"Bearer {created.token}"})).json()
            assert [(v["grant_id"], v["label"], v["revoked"], v["connected"]) for v in listed["viewers"]] == \
                [(link["grant_id"], "class", False, 0)]
            missing = await http.delete(base + "/viewers/g_000000000000",
                                        headers={"Authorization": f"Bearer {created.token}"})
            assert (missing.status_code, missing.json()["error"]["code"]) == (404, "not_found")
    finally:
        await owner.close_session()
        await owner.aclose()


async def test_raw_and_fmp4_spectators_get_the_owners_frames_with_its_idx_and_pts(daemon: RunningDaemon) -> None:
    owner = SessionClient(timeout_s=20.0)
    created = await owner.create(daemon.url, "world")
    link = await share(daemon.url, created.session_id, created.token)
    raw = await spectator(daemon.url, owner, link["token"], "raw")
    fmp4 = await spectator(daemon.url, owner, link["token"], "fmp4")
    try:
        welcome = await owner.connect()
        assert welcome.session["role"] == "owner"
        n = 48
        owner_msgs = await collect(owner, lambda m: sum(isinstance(x, Frame) for x in m) >= n)
        owned = [m for m in owner_msgs if isinstance(m, Frame)][:n]
        seen_raw = [m for m in await collect(raw, lambda m: sum(isinstance(x, Frame) for x in m) >= n)
                    if isinstance(m, Frame)][:n]
        seen_fmp4 = await collect(fmp4, lambda m: sum(x.n for x in m if isinstance(x, Media)) >= n)
        fps = created.fps
        assert [(f.idx, f.pts) for f in owned] == [(i, pts_for(i, fps)) for i in range(n)]
        assert [(f.idx, f.pts, f.action_seq, f.disc, digest(f)) for f in seen_raw] == \
            [(f.idx, f.pts, f.action_seq, f.disc, digest(f)) for f in owned]
        assert isinstance(seen_fmp4[0], Init)
        media = [m for m in seen_fmp4 if isinstance(m, Media)]
        covered = [i for m in media for i in range(m.idx, m.idx + m.n)]
        assert covered[:n] == list(range(n))
        assert all(m.pts == pts_for(m.idx, fps) and m.dur == pts_for(m.idx + m.n, fps) - m.pts for m in media)
        async with httpx.AsyncClient(timeout=10.0) as http:
            status = (await http.get(f"{daemon.url}/v1/sessions/{created.session_id}",
                                     headers={"Authorization": f"Bearer {link['token']}"})).json()
        assert (status["spectators"], status["players"]) == (2, 1)
    finally:
        await raw.aclose()
        await fmp4.aclose()
        await owner.close_session()
        await owner.aclose()


async def test_a_mid_stream_joiner_starts_at_the_owners_current_frame(daemon: RunningDaemon) -> None:
    owner = SessionClient(timeout_s=20.0)
    created = await owner.create(daemon.url, "world")
    sid = created.session_id
    link = await share(daemon.url, sid, created.token)
    try:
        await owner.connect()
        owner_frames: list[Frame] = []

        async def keep_reading() -> None:
            async for msg in owner.messages():
                if isinstance(msg, Frame):
                    owner_frames.append(msg)

        reader = asyncio.create_task(keep_reading())
        await wait_for(lambda: len(owner_frames) >= 24)
        raw = await spectator(daemon.url, owner, link["token"], "raw")
        fmp4 = await spectator(daemon.url, owner, link["token"], "fmp4")
        members = {m.media: m for m in live_session(daemon, sid).audience.members}
        got_raw = [m for m in await collect(raw, lambda m: sum(isinstance(x, Frame) for x in m) >= 16)
                   if isinstance(m, Frame)]
        got_fmp4 = [m for m in await collect(fmp4, lambda m: any(isinstance(x, Media) for x in m)) if
                    isinstance(m, Init | Media)]
        # at once, the newest frame the owner had got when it joined; then every later one
        assert got_raw[0].idx == members["raw"].join_idx - 1 >= 0
        assert [f.idx for f in got_raw] == list(range(got_raw[0].idx, got_raw[0].idx + len(got_raw)))
        await wait_for(lambda: len(owner_frames) > got_raw[-1].idx)
        by_idx = {f.idx: f for f in owner_frames}
        assert all(digest(f) == digest(by_idx[f.idx]) and f.pts == by_idx[f.idx].pts for f in got_raw)
        assert isinstance(got_fmp4[0], Init) and isinstance(got_fmp4[1], Media)
        # the first fmp4 spectator: a new encoder whose first key fragment is that newest frame, at once
        assert got_fmp4[1].idx == members["fmp4"].join_idx - 1 >= 0
        assert members["fmp4"].frames_sent >= got_fmp4[1].n
        reader.cancel()
        await raw.aclose()
        await fmp4.aclose()
    finally:
        await owner.close_session()
        await owner.aclose()


async def test_a_spectator_never_gets_a_frame_the_owner_did_not(daemon: RunningDaemon) -> None:
    """The owner interrupts again and again (every unsent frame of the old generation is dropped):
    what the spectator got is exactly a run of what the owner got."""
    owner = SessionClient(timeout_s=20.0)
    created = await owner.create(daemon.url, "world")
    link = await share(daemon.url, created.session_id, created.token)
    raw = await spectator(daemon.url, owner, link["token"], "raw")
    try:
        await owner.connect()
        owned: list[Frame] = []
        for _ in range(6):
            msgs = await collect(owner, lambda m: sum(isinstance(x, Frame) for x in m) >= 5)
            owned += [m for m in msgs if isinstance(m, Frame)]
            await owner.send(Interrupt(id=owner.next_id()))
            await owner.send(Action(seq=owner.next_id(), ts=owner.now_ms(), keys=("w",)))
            await owner.send(Resume(id=owner.next_id()))
        msgs = await collect(owner, lambda m: sum(isinstance(x, Frame) for x in m) >= 8)
        owned += [m for m in msgs if isinstance(m, Frame)]
        last = owned[-1].idx
        watched = [m for m in await collect(raw, lambda m: any(isinstance(x, Frame) and x.idx >= last for x in m))
                   if isinstance(m, Frame)]
        by_idx = {f.idx: (f.pts, f.disc, digest(f)) for f in owned}
        assert [f.idx for f in owned] == list(range(len(owned)))  # the owner's timeline, unbroken
        assert [(f.idx, f.pts, f.disc, digest(f)) for f in watched] == \
            [(f.idx, *by_idx[f.idx]) for f in watched if f.idx in by_idx]
        assert [f.idx for f in watched] == list(range(len(watched)))
    finally:
        await raw.aclose()
        await owner.close_session()
        await owner.aclose()


async def test_what_a_spectator_may_not_send_is_forbidden_and_it_stays(daemon: RunningDaemon) -> None:
    owner = SessionClient(timeout_s=20.0)
    created = await owner.create(daemon.url, "world")
    link = await share(daemon.url, created.session_id, created.token)
    conn = await RawConn.open(created.ws_url, link["token"])
    try:
        for i, msg in enumerate((Action(seq=1, ts=1.0, keys=("w",)), Direct(id=2, prompt="a cat"), Interrupt(id=3),
                                 Flush(id=4), Pause(id=5), Resume(id=6))):
            await conn.send(msg)
            err = await conn.next_of(Error)
            assert (err.code, err.fatal) == ("forbidden", False), (i, err)
            assert err.re == (None if i == 0 else i + 1)
        assert await conn.alive()
        assert live_session(daemon, created.session_id).actions.last_seq == -1  # nothing reached the session
    finally:
        await conn.close()
        await owner.close_session()
        await owner.aclose()


async def test_revoke_closes_its_spectators_at_once_and_the_token_stays_refused(daemon: RunningDaemon) -> None:
    owner = SessionClient(timeout_s=20.0)
    created = await owner.create(daemon.url, "world")
    sid = created.session_id
    link = await share(daemon.url, sid, created.token)
    other = await share(daemon.url, sid, created.token)
    watching = await RawConn.open(created.ws_url, link["token"])
    staying = await RawConn.open(created.ws_url, other["token"])
    try:
        async with httpx.AsyncClient(timeout=10.0) as http:
            r = await http.delete(f"{daemon.url}/v1/sessions/{sid}/viewers/{link['grant_id']}",
                                  headers={"Authorization": f"Bearer {created.token}"})
            assert r.status_code == 204
            err = await watching.next_of(Error)
            assert (err.code, err.fatal) == ("unauthorized", True) and "revoked" in err.message
            assert await watching.closed_with() == 4401
            assert await staying.alive()
            listed = (await http.get(f"{daemon.url}/v1/sessions/{sid}/viewers",
                                     headers={"Authorization": f"Bearer {created.token}"})).json()["viewers"]
            assert [(v["grant_id"], v["revoked"], v["connected"]) for v in listed] == \
                [(link["grant_id"], True, 0), (other["grant_id"], False, 1)]
        again = await RawConn.open(created.ws_url, link["token"], hello=False)
        err = await again.next_of(Error)
        assert (err.code, "revoked" in err.message) == ("unauthorized", True)
        assert await again.closed_with() == 4401
    finally:
        await staying.close()
        await owner.close_session()
        await owner.aclose()


async def test_an_expired_link_is_refused_saying_so(daemon: RunningDaemon) -> None:
    owner = SessionClient(timeout_s=20.0)
    created = await owner.create(daemon.url, "world")
    link = await share(daemon.url, created.session_id, created.token, ttl_s=0.2)
    try:
        await wait_for(lambda: time.time() > link["expires_at"])
        conn = await RawConn.open(created.ws_url, link["token"], hello=False)
        err = await conn.next_of(Error)
        assert (err.code, err.fatal, "expired" in err.message) == ("unauthorized", True, True)
        assert await conn.closed_with() == 4401
        async with httpx.AsyncClient(timeout=10.0) as http:
            r = await http.get(f"{daemon.url}/v1/sessions/{created.session_id}",
                               headers={"Authorization": f"Bearer {link['token']}"})
        assert (r.status_code, r.json()["error"]["code"]) == (401, "unauthorized")
    finally:
        await owner.close_session()
        await owner.aclose()


async def test_a_hundred_connects_in_a_second_are_rate_limited_and_the_owner_plays_on() -> None:
    async with off_loop(running_daemon(tiny_engine("private"), spectator_connects_per_s=20)) as running:
        owner = SessionClient(timeout_s=20.0)
        created = await owner.create(running.url, "world")
        link = await share(running.url, created.session_id, created.token)
        await owner.connect()
        owner_frames: list[Frame] = []

        async def keep_reading() -> None:
            async for msg in owner.messages():
                if isinstance(msg, Frame):
                    owner_frames.append(msg)

        reader = asyncio.create_task(keep_reading())
        started = time.monotonic()

        async def one() -> tuple[str, Any]:
            conn = await RawConn.open(created.ws_url, link["token"], hello=False)
            with contextlib.suppress(ConnectionClosed):  # a refused one is closed before its hello
                await conn.send(Hello(v=1))
            first = await conn.next()
            if isinstance(first, Welcome):
                return "welcome", conn
            assert isinstance(first, Error)
            return first.code, (conn, await conn.closed_with())

        results = await asyncio.gather(*(one() for _ in range(100)))
        elapsed = time.monotonic() - started
        admitted = [c for kind, c in results if kind == "welcome"]
        refused = [c for kind, c in results if kind != "welcome"]
        assert {kind for kind, _ in results} <= {"welcome", "rate_limited"}
        assert 40 <= len(admitted) <= 40 + int(20 * elapsed) + 1  # a burst of 40, then 20 a second
        assert all(code == 4429 for _, code in refused) and len(refused) == 100 - len(admitted)
        before = len(owner_frames)
        await wait_for(lambda: len(owner_frames) >= before + 16)
        assert [f.idx for f in owner_frames] == list(range(len(owner_frames)))
        reader.cancel()
        for conn in admitted:
            await conn.close()
        await owner.close_session()
        await owner.aclose()


async def test_a_spectator_that_reads_nothing_never_holds_back_the_owner_or_the_others() -> None:
    """One spectator reads nothing (a 4 KiB receive buffer, a one-message client queue); the owner's
    and another spectator's timelines run on unbroken, and the silent one is closed by the daemon
    (the WebSocket ping rule, here 1 s; the stall bound and the skip counts: tests/transports,
    tests/sessiond/session/test_audience.py)."""
    async with off_loop(running_daemon(tiny_engine("private"), viewer_ping_s=1.0)) as running:
        owner = SessionClient(timeout_s=20.0)
        created = await owner.create(running.url, "world")
        sid = created.session_id
        link = await share(running.url, sid, created.token)
        slow = await slow_reader(created.ws_url, link["token"])  # reads nothing from here on
        fast = await spectator(running.url, owner, link["token"], "raw")
        await owner.connect()
        owner_frames: list[Frame] = []
        fast_frames: list[Frame] = []

        async def keep_reading(client: SessionClient, into: list[Frame]) -> None:
            async for msg in client.messages():
                if isinstance(msg, Frame):
                    into.append(msg)

        readers = [asyncio.create_task(keep_reading(owner, owner_frames)),
                   asyncio.create_task(keep_reading(fast, fast_frames))]
        await wait_for(lambda: len(live_session(running, sid).audience) == 2 and len(owner_frames) > 0)
        await wait_for(lambda: len(live_session(running, sid).audience) == 1, 30.0)  # the silent one is gone
        assert live_session(running, sid).audience.members[0].frames_skipped == 0
        n = len(owner_frames)
        await wait_for(lambda: len(owner_frames) >= n + 16 and len(fast_frames) >= n + 16)
        assert [f.idx for f in owner_frames] == list(range(len(owner_frames)))  # never a gap
        assert [f.idx for f in fast_frames] == list(range(len(fast_frames)))  # the other skipped nothing
        for task in readers:
            task.cancel()
        await fast.aclose()
        await slow.ws.close()
        await owner.close_session()
        await owner.aclose()


async def slow_reader(ws_url: str, token: str) -> RawConn:
    """A spectator with a 4 KiB receive buffer and a one-message client queue."""
    from websockets.asyncio.client import connect

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    port = int(ws_url.split(":")[2].split("/")[0])
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    ws = await connect(f"{ws_url}?media=raw", sock=sock, additional_headers={"Authorization": f"Bearer {token}"},
                       compression=None, max_size=2**22, max_queue=1, proxy=None, close_timeout=1)
    conn = RawConn(ws)
    await conn.send(Hello(v=1))
    assert isinstance(await conn.next(), Welcome)
    return conn


async def test_spectators_follow_a_hand_off_with_moved_like_the_owner() -> None:
    """The drain path of a fleet worker (`runtime.handoff`: freeze, snapshot, then `moved` to the
    viewers): the owner and every spectator get the same `moved` and their connections end."""
    from protocols.messages import Moved
    from sessiond.runtime.handoff import hand_off, let_go

    async with off_loop(running_daemon(tiny_engine("private"))) as running:
        owner = SessionClient(timeout_s=20.0)
        created = await owner.create(running.url, "world")
        sid = created.session_id
        link = await share(running.url, sid, created.token)
        raw = await RawConn.open(created.ws_url, link["token"])
        fmp4 = await RawConn.open(created.ws_url, link["token"], query="media=fmp4")
        owner_conn = await RawConn.open(created.ws_url, created.token)
        await owner_conn.next_of(Frame)
        await raw.next_of(Frame)
        await fmp4.next_of(Media)
        daemon = running.daemon
        loop = daemon._scheduler_task.get_loop()
        moved = Moved(ws_url="ws://127.0.0.1:1/v1/sessions/x/ws", webrtc_url="http://127.0.0.1:1/v1/sessions/x/webrtc")

        async def move() -> bool:
            assert await hand_off(daemon, [sid]) == [sid]
            return let_go(daemon, sid, moved)

        assert await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(move(), loop))
        for conn in (owner_conn, raw, fmp4):
            assert await conn.next_of(Moved) == moved
            assert await conn.closed_with() == 1000
        await owner.aclose()


async def test_webrtc_spectators_share_one_encode_of_the_owners_frames_and_may_not_steer() -> None:
    """Two real aiortc peers on one share link while the owner plays over a WebSocket: both decode
    video whose RTP timestamps are the owner's pts, their `frames` messages name the owner's idx,
    one stream encodes for both, an action is forbidden, and revoking closes both."""
    from protocols.messages import FramesInfo
    from tests.transports._client import LoopbackClient

    async with off_loop(running_daemon(tiny_engine("private"), webrtc_hosts=("127.0.0.1",))) as running, \
            httpx.AsyncClient(timeout=30) as http:
        owner = SessionClient(timeout_s=20.0)
        created = await owner.create(running.url, "world")
        sid = created.session_id
        link = await share(running.url, sid, created.token)
        await owner.connect()
        owner_frames: list[Frame] = []

        async def keep_reading() -> None:
            async for msg in owner.messages():
                if isinstance(msg, Frame):
                    owner_frames.append(msg)

        reader = asyncio.create_task(keep_reading())
        await wait_for(lambda: len(owner_frames) >= 8)
        peers = [LoopbackClient(), LoopbackClient()]
        try:
            for peer in peers:
                answer = await http.post(created.webrtc_url, json={"sdp": await peer.offer(), "type": "offer"},
                                         headers={"Authorization": f"Bearer {link['token']}"})
                assert answer.status_code == 200, answer.text
                await peer.accept(answer.json()["sdp"], "answer")
            for peer in peers:
                info = await peer.next_message(FramesInfo, 20)
                frame = await asyncio.wait_for(peer.frames.get(), 20)
                assert (frame.width, frame.height) == (32, 32)
                await wait_for(lambda info=info: len(owner_frames) > info.idx)
                assert info.pts == owner_frames[info.idx].pts == pts_for(info.idx, created.fps)
                assert peer.rtp_timestamps[0] % pts_for(1, created.fps) == 0
            gateway = running.daemon.webrtc_gateway()
            assert len(gateway._audience) == 1 and gateway._audience[sid].viewers == 2  # one encode for both
            await peers[0].channels_open(10)
            peers[0].send(Action(seq=1, ts=0.0, keys=("w",)), channel="actions")
            err = await peers[0].next_message(Error, 10)
            assert (err.code, err.fatal) == ("forbidden", False)
            status = (await http.get(f"{running.url}/v1/sessions/{sid}",
                                     headers={"Authorization": f"Bearer {created.token}"})).json()
            assert (status["spectators"], status["players"]) == (2, 1)
            r = await http.delete(f"{running.url}/v1/sessions/{sid}/viewers/{link['grant_id']}",
                                  headers={"Authorization": f"Bearer {created.token}"})
            assert r.status_code == 204
            for peer in peers:
                err = await peer.next_message(Error, 10)
                assert (err.code, err.fatal, "revoked" in err.message) == ("unauthorized", True, True)
            await wait_for(lambda: len(live_session(running, sid).audience) == 0 and not gateway._audience)
            assert [f.idx for f in owner_frames] == list(range(len(owner_frames)))
        finally:
            for peer in peers:
                await peer.close()
            reader.cancel()
            await owner.close_session()
            await owner.aclose()


async def test_past_the_spectators_cpu_bound_a_connect_is_refused_in_words() -> None:
    async with off_loop(running_daemon(tiny_engine("private"), spectator_cpu_cores=0.004,
                                       spectator_cpu_each=0.005)) as running:
        owner = SessionClient(timeout_s=20.0)
        created = await owner.create(running.url, "world")
        link = await share(running.url, created.session_id, created.token)
        conn = await RawConn.open(created.ws_url, link["token"], hello=False)
        err = await conn.next_of(Error)
        assert (err.code, err.fatal) == ("capacity", True)
        assert err.message.startswith("this machine serves 0 spectators in all")
        assert await conn.closed_with() == 4503
        metrics = running.daemon.metrics
        assert metrics.spectators_refused.labels(reason="capacity")._value.get() == 1
        async with httpx.AsyncClient(timeout=10.0) as http:
            offer = await http.post(created.webrtc_url, json={"sdp": "v=0", "type": "offer"},
                                    headers={"Authorization": f"Bearer {link['token']}"})
            assert (offer.status_code, offer.json()["error"]["code"]) == (503, "capacity")
            capacity = (await http.get(f"{running.url}/v1/capacity")).json()["spectators"]
        assert (capacity["spectators"], capacity["serves"]) == (0, 0)
        await owner.close_session()
        await owner.aclose()


async def test_a_director_sessions_spectators_get_the_segments_as_the_owner_directs_them(daemon: RunningDaemon) -> None:
    from protocols.messages import SegmentEnd, SegmentStart

    owner = SessionClient(timeout_s=20.0)
    created = await owner.create(daemon.url, "director")
    link = await share(daemon.url, created.session_id, created.token)
    watcher = await spectator(daemon.url, owner, link["token"], "raw")
    try:
        await owner.connect()
        await owner.direct("a quiet street", seconds=1)
        mine = await collect(owner, lambda m: any(isinstance(x, SegmentEnd) for x in m))
        seen = await collect(watcher, lambda m: any(isinstance(x, SegmentEnd) for x in m))

        def story(msgs: list[Any]) -> list[Any]:
            return [(type(m).__name__, m.segment, m.pts, getattr(m, "idx", None)) for m in msgs
                    if isinstance(m, SegmentStart | SegmentEnd | Frame)]

        assert story(seen) == story(mine)
        assert [type(m).__name__ for m in seen if isinstance(m, SegmentStart | SegmentEnd | Frame)] == \
            ["SegmentStart"] + ["Frame"] * 16 + ["SegmentEnd"]
    finally:
        await watcher.aclose()
        await owner.close_session()
        await owner.aclose()


async def test_when_the_owner_deletes_the_session_its_spectators_hear_it_and_close(daemon: RunningDaemon) -> None:
    owner = SessionClient(timeout_s=20.0)
    created = await owner.create(daemon.url, "world")
    link = await share(daemon.url, created.session_id, created.token)
    conn = await RawConn.open(created.ws_url, link["token"])
    await owner.close_session()
    err = await conn.next_of(Error)
    assert (err.code, err.fatal) == ("not_found", True)
    assert await conn.closed_with() == 4404
    await owner.aclose()


async def test_the_webrtc_watcher_marks_its_way_to_the_first_frame() -> None:
    """`transports.webrtc.watch` (the spectator benchmark's aiortc viewer) through a real daemon:
    it decodes the session's video and reports, in seconds after its offer began, the offer made,
    the answer back, the track, ICE/DTLS connected and the first frame, in that order of cause;
    a refused token reports the refusal with the two marks it reached."""
    from transports.webrtc.watch import watch

    async with off_loop(running_daemon(tiny_engine("private"), webrtc_hosts=("127.0.0.1",))) as running:
        owner = SessionClient(timeout_s=20.0)
        created = await owner.create(running.url, "world")
        link = await share(running.url, created.session_id, created.token)
        await owner.connect()
        frames: list[Frame] = []

        async def keep_reading() -> None:
            async for msg in owner.messages():
                if isinstance(msg, Frame):
                    frames.append(msg)

        reader = asyncio.create_task(keep_reading())
        try:
            await wait_for(lambda: len(frames) >= 4)
            now = time.monotonic()
            report = await watch(created.webrtc_url, link["token"], now + 0.5, now + 3.0)
            assert "error" not in report, report
            marks = report["marks_s"]
            assert set(marks) == {"offer", "answer", "track", "connected", "frame"}
            assert 0 < marks["offer"] <= marks["answer"] <= marks["track"] <= marks["frame"]
            assert marks["connected"] <= marks["frame"]
            assert marks["frame"] == round(report["first_frame_s"], 4)
            assert report["frames"] > 0 and report["fps"] > 0

            refused = await watch(created.webrtc_url, "not-a-token", now, time.monotonic() + 2.0)
            assert set(refused["marks_s"]) == {"offer", "answer"}
            assert '"code":"unauthorized"' in refused["error"].replace(" ", ""), refused["error"]
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            await owner.aclose()
