"""Co-play over WebRTC end to end: a real daemon (uvicorn, tiny engine, loopback ICE), the owner on
a raw WebSocket and two co-players as real aiortc peers. Each player decodes the session's video
(one encode for both), its `frames` messages carry its OWN newest applied seq, the owner's requests
are forbidden to it, it hears `presence`; with the owner gone the co-players play on (new frames,
their new actions applied); a new peer of a seat takes it over and revoking an invite closes its
peer. A world with only a spectator connected generates nothing."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from protocols.client import SessionClient
from protocols.messages import Action, Direct, Error, Frame, FramesInfo, Pause, Presence, Welcome
from protocols.timeline import pts_for
from sessiond.session.lifecycle import SessionState
from tests.conftest import off_loop, running_daemon, tiny_engine
from tests.e2e._raw import RawConn
from tests.e2e.test_coplay import RecordingEngine
from tests.transports._client import LoopbackClient


async def _wait_for(predicate: Any, timeout_s: float = 20.0) -> None:
    end = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < end, "condition not reached in time"
        await asyncio.sleep(0.02)


async def _post(http: httpx.AsyncClient, url: str, token: str, body: Any) -> httpx.Response:
    return await http.post(url, json=body, headers={"Authorization": f"Bearer {token}"})


class Player(LoopbackClient):
    """A co-player's aiortc peer that keeps every message it read (`seen`), whatever was waited for."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Any] = []

    async def until(self, kind: type, done: Any = None, timeout_s: float = 20.0) -> Any:
        """The first message of `kind` from now on that satisfies `done` (the test fails after `timeout_s`)."""
        async def run() -> Any:
            while True:
                msg = await self.messages.get()
                self.seen.append(msg)
                if isinstance(msg, kind) and (done is None or done(msg)):
                    return msg

        try:
            return await asyncio.wait_for(run(), timeout_s)
        except TimeoutError:
            last = [m for m in self.seen if isinstance(m, kind)][-3:]
            raise AssertionError(f"no such {kind.__name__} within {timeout_s} s; the last: {last}") from None


async def _join(http: httpx.AsyncClient, webrtc_url: str, token: str) -> Player:
    """A co-player's aiortc peer, answered and with both its data channels open."""
    peer = Player()
    answer = await _post(http, webrtc_url, token, {"sdp": await peer.offer(), "type": "offer"})
    assert answer.status_code == 200, answer.text
    await peer.accept(answer.json()["sdp"], "answer")
    await peer.channels_open(20)
    return peer


@pytest.mark.slow
async def test_two_webrtc_players_and_the_owner_each_see_their_own_action_seq_and_play_on_without_the_owner(
) -> None:
    engine = RecordingEngine(tiny_engine())
    async with off_loop(running_daemon(engine, webrtc_hosts=("127.0.0.1",))) as running, \
            httpx.AsyncClient(timeout=30) as http:
        owner = SessionClient(auto_received=True, timeout_s=20.0)
        created = await owner.create(running.url, "world", players=3)
        sid, token = created.session_id, created.token
        invites = [(await _post(http, f"{running.url}/v1/sessions/{sid}/players", token, {"label": name})).json()
                   for name in ("ana", "bo")]
        assert [i["player"] for i in invites] == [1, 2]
        await owner.connect()
        owner_frames: list[Frame] = []

        async def keep_reading() -> None:
            async for msg in owner.messages():
                if isinstance(msg, Frame):
                    owner_frames.append(msg)

        reader = asyncio.create_task(keep_reading())
        peers: list[Player] = []
        try:
            for invite in invites:
                peers.append(await _join(http, invite["webrtc_url"], invite["token"]))
            p1, p2 = peers
            for seat, peer in enumerate(peers, start=1):  # a co-player's first message: its welcome
                welcome = await peer.until(Welcome)
                assert (welcome.session["role"], welcome.session["player"], welcome.session["session_id"]) == (
                    "player", seat, sid)
                assert peer.seen[0] is welcome
            gateway = running.daemon.webrtc_gateway()
            assert gateway._audience[sid].viewers == 2  # one encode for both co-players
            for _ in range(10):  # the owner's seq runs ahead of the players': each is its own
                last = await owner.send_action(["w"])
            assert last.seq == 9
            p1.send(Action(seq=3, ts=1.0, keys=("a",)), channel="actions")
            p2.send(Action(seq=1, ts=1.0, keys=("d",)), channel="control")
            everyone = (9, 3, 1)
            i1 = await p1.until(FramesInfo, lambda f: f.players == everyone)
            i2 = await p2.until(FramesInfo, lambda f: f.players == everyone)
            assert (i1.action_seq, i2.action_seq) == (3, 1)
            await _wait_for(lambda: len(owner_frames) > max(i1.idx, i2.idx))
            for info in (i1, i2):  # the owner's frames: same idx and pts
                assert (info.pts, owner_frames[info.idx].players) == (pts_for(info.idx, created.fps), everyone)
                assert owner_frames[info.idx].action_seq == 9
            frame = await asyncio.wait_for(p1.frames.get(), 20)
            assert (frame.width, frame.height) == (32, 32)
            presence = [m for m in p1.seen if isinstance(m, Presence)][-1]
            if len(presence.players) < 3 or not all(p["connected"] for p in presence.players):
                presence = await p1.until(Presence, lambda m: len(m.players) == 3)
            assert [(p["player"], p["label"]) for p in presence.players] == [(0, "owner"), (1, "ana"), (2, "bo")]

            # the owner's requests are not a co-player's: forbidden, not fatal
            p1.send(Direct(id=5, prompt="a storm"))
            p2.send(Pause(id=6))
            for peer, re in ((p1, 5), (p2, 6)):
                refusal = await peer.until(Error)
                assert (refusal.code, refusal.re, refusal.fatal) == ("forbidden", re, False)
            status = (await http.get(f"{running.url}/v1/sessions/{sid}",
                                     headers={"Authorization": f"Bearer {token}"})).json()
            assert (status["players"], status["spectators"]) == (3, 0)

            # the owner leaves (its session stays): the co-players play on, alone
            reader.cancel()
            await owner.aclose()
            session = running.daemon.sessions[sid]
            await _wait_for(lambda: session.connection is None)
            gone = await p1.until(FramesInfo, lambda f: f.idx > (owner_frames[-1].idx if owner_frames else 0) + 10)
            p1.send(Action(seq=4, ts=2.0, keys=("s",)), channel="actions")
            p2.send(Action(seq=2, ts=2.0, keys=(), axes=(0.5,)), channel="actions")
            after = await p1.until(FramesInfo, lambda f: f.players is not None and f.players[1:] == (4, 2))
            assert (after.action_seq, after.players, after.idx > gone.idx) == (4, (9, 4, 2), True)
            assert (await p2.until(FramesInfo, lambda f: f.idx >= after.idx)).action_seq == 2
            assert session.state == SessionState.ACTIVE
            assert engine.begun[sid][-1].keys == ("s",)  # the players' merged action, the owner's let go
            status = (await http.get(f"{running.url}/v1/sessions/{sid}",
                                     headers={"Authorization": f"Bearer {token}"})).json()
            assert status["players"] == 2

            # a new peer of seat 1 takes it over; revoking seat 2's invite closes its peer
            again = await _join(http, invites[0]["webrtc_url"], invites[0]["token"])
            peers.append(again)
            replaced = await p1.until(Error)
            assert (replaced.code, replaced.fatal) == ("conflict", True)
            r = await http.delete(f"{running.url}/v1/sessions/{sid}/players/{invites[1]['grant_id']}",
                                  headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 204
            ended = await p2.until(Error)
            assert (ended.code, ended.fatal, "revoked" in ended.message) == ("unauthorized", True, True)
            info = await again.until(FramesInfo, lambda f: f.players is not None)
            assert info.action_seq == info.players[1] == 4  # the seat's seqs go on where they were
            await _wait_for(lambda: session.audience.players() == 1)
            status = (await http.get(f"{running.url}/v1/sessions/{sid}",
                                     headers={"Authorization": f"Bearer {token}"})).json()
            assert status["players"] == 1
        finally:
            reader.cancel()
            for peer in peers:
                await peer.close()
            await http.delete(f"{running.url}/v1/sessions/{sid}", headers={"Authorization": f"Bearer {token}"})
            await owner.aclose()


@pytest.mark.slow
async def test_a_spectator_alone_makes_no_frames_and_a_co_player_alone_does() -> None:
    engine = RecordingEngine(tiny_engine())
    async with off_loop(running_daemon(engine, webrtc_hosts=("127.0.0.1",))) as running, \
            httpx.AsyncClient(timeout=30) as http:
        owner = SessionClient(timeout_s=20.0)
        created = await owner.create(running.url, "world", players=2)
        sid, token = created.session_id, created.token
        share = (await _post(http, f"{running.url}/v1/sessions/{sid}/viewers", token, {})).json()
        invite = (await _post(http, f"{running.url}/v1/sessions/{sid}/players", token, {})).json()
        viewer = await RawConn.open(created.ws_url, share["token"])
        session = running.daemon.sessions[sid]
        peer: Player | None = None
        try:
            await viewer.next_of(Presence)
            await _wait_for(lambda: len(session.audience) == 1)
            assert (session.steering, session.demand(time.monotonic())) == (False, None)
            await asyncio.sleep(1.0)  # a chunk of the tiny engine takes milliseconds: none is begun
            assert (len(engine.begun.get(sid, [])), session.out.sent) == (0, 0)
            assert session.state in (SessionState.CREATED, SessionState.IDLE)

            peer = await _join(http, invite["webrtc_url"], invite["token"])
            first = await peer.until(FramesInfo)
            assert (first.idx, first.pts, first.action_seq, first.players) == (0, 0, -1, (-1, -1))
            peer.send(Action(seq=1, ts=1.0, keys=("w",)), channel="actions")
            applied = await peer.until(FramesInfo, lambda f: f.action_seq == 1)
            seen = await viewer.next_of(Frame)  # the spectator watches what the co-player plays
            assert seen.pts == pts_for(seen.idx, created.fps)
            assert session.state == SessionState.ACTIVE and applied.players == (-1, 1)

            # the co-player leaves: generation stops, the spectator alone keeps nothing going
            await peer.close()
            peer = None
            await _wait_for(lambda: session.state == SessionState.IDLE)
            begun = len(engine.begun[sid])
            await asyncio.sleep(1.0)
            assert len(engine.begun[sid]) == begun and not session.steering
        finally:
            if peer is not None:
                await peer.close()
            await viewer.ws.close()
            await http.delete(f"{running.url}/v1/sessions/{sid}", headers={"Authorization": f"Bearer {token}"})
            await owner.aclose()


@pytest.mark.slow
async def test_a_new_peer_of_a_seat_takes_over_the_streams_only_viewer_and_plays() -> None:
    """The seat's peer is the shared WebRTC stream's one viewer: its leaving must not close the
    stream under the new peer that replaces it (that peer used to connect to a dead stream and wait
    without a word)."""
    async with off_loop(running_daemon(tiny_engine(), webrtc_hosts=("127.0.0.1",))) as running, \
            httpx.AsyncClient(timeout=30) as http:
        owner = SessionClient(auto_received=True, timeout_s=20.0)
        created = await owner.create(running.url, "world", players=2)
        sid, token = created.session_id, created.token
        invite = (await _post(http, f"{running.url}/v1/sessions/{sid}/players", token, {})).json()
        await owner.connect()

        async def keep_reading() -> None:
            async for _ in owner.messages():
                pass

        reader = asyncio.create_task(keep_reading())
        peers: list[Player] = []
        try:
            first = await _join(http, invite["webrtc_url"], invite["token"])
            peers.append(first)
            first.send(Action(seq=5, ts=1.0, keys=("a",)))
            await first.until(FramesInfo, lambda f: f.action_seq == 5)
            gateway = running.daemon.webrtc_gateway()
            assert gateway._audience[sid].viewers == 1

            again = await _join(http, invite["webrtc_url"], invite["token"])
            peers.append(again)
            told = await first.until(Error)
            assert (told.code, told.fatal) == ("conflict", True)
            welcome = await again.until(Welcome)
            assert (welcome.session["player"], welcome.session["last_seq"]) == (1, 5)
            await again.until(FramesInfo)
            frame = await asyncio.wait_for(again.frames.get(), 20)  # its video plays: the stream lives on
            assert (frame.width, frame.height) == (32, 32)
            again.send(Action(seq=6, ts=2.0, keys=("d",)))
            applied = await again.until(FramesInfo, lambda f: f.action_seq == 6)
            assert applied.players == (-1, 6)
            session = running.daemon.sessions[sid]
            await _wait_for(lambda: session.audience.players() == 1 and gateway._audience[sid].viewers == 1)
        finally:
            reader.cancel()
            for peer in peers:
                await peer.close()
            await http.delete(f"{running.url}/v1/sessions/{sid}", headers={"Authorization": f"Bearer {token}"})
            await owner.aclose()
