"""WebRTC through the live daemon on loopback only (`webrtc_hosts=127.0.0.1`): the offer is
answered, video frames decode, `frames` metadata arrives on `control`, actions reach the frames."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from aiortc import RTCConfiguration, RTCPeerConnection, RTCSessionDescription

from protocols.codec import decode
from protocols.messages import Action, Direct, FramesInfo, Received, SegmentEnd
from protocols.timeline import pts_for
from tests.conftest import off_loop, running_daemon
from tests.transports._client import LoopbackClient
from transports.webrtc import PeerScope, peer_scope


async def _create(http: httpx.AsyncClient, url: str, mode: str) -> tuple[dict[str, Any], dict[str, str]]:
    """A new session of `mode`: its create response and the header that authorizes it."""
    body: dict[str, Any] = (await http.post(f"{url}/v1/sessions", json={"mode": mode})).json()
    return body, {"Authorization": f"Bearer {body['token']}"}


@pytest.mark.slow
async def test_a_world_session_streams_over_webrtc_and_takes_actions() -> None:
    async with off_loop(running_daemon(webrtc_hosts=("127.0.0.1",))) as d, \
            httpx.AsyncClient(timeout=30) as http:
        body, auth = await _create(http, d.url, "world")
        client = LoopbackClient()
        try:
            answer = await http.post(body["webrtc_url"], json={"sdp": await client.offer(), "type": "offer"},
                                     headers=auth)
            assert answer.status_code == 200 and answer.json()["type"] == "answer"
            await client.accept(answer.json()["sdp"], "answer")
            first = await client.next_message(FramesInfo, 20)
            # the first chunk's metadata is held until `control` opens, never lost to the race
            assert (first.idx, first.pts, first.n, first.segment) == (0, 0, 5, 0)
            frame = await asyncio.wait_for(client.frames.get(), 20)
            assert (frame.width, frame.height) == (32, 32)
            await asyncio.wait_for(client.control_open.wait(), 10)
            client.send(Action(seq=7, ts=0.0, keys=("w",)), channel="control")
            while (info := await client.next_message(FramesInfo, 20)).action_seq < 7:
                assert info.pts == pts_for(info.idx, 16)
            assert info.action_seq == 7
            status = (await http.get(f"{d.url}/v1/sessions/{body['session_id']}", headers=auth)).json()
            assert status["state"] == "active" and status["frames_sent"] >= info.idx
        finally:
            await client.close()
            await http.delete(f"{d.url}/v1/sessions/{body['session_id']}", headers=auth)


async def test_frames_metadata_sent_before_control_opens_is_held_not_lost() -> None:
    """The client opens `control` only after video already plays: the first chunk's `frames`
    message went out before the channel existed, and still arrives first."""
    async with off_loop(running_daemon(webrtc_hosts=("127.0.0.1",))) as d:
        pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        pc.addTransceiver("video", direction="recvonly")
        pc.createDataChannel("actions", ordered=False, maxRetransmits=0)  # the SCTP association
        video: asyncio.Queue[Any] = asyncio.Queue()
        pc.on("track", lambda track: video.put_nowait(track))
        messages: asyncio.Queue[Any] = asyncio.Queue()
        async with httpx.AsyncClient(timeout=30) as http:
            body, auth = await _create(http, d.url, "world")
            try:
                offer = await pc.createOffer()
                with peer_scope(PeerScope(host_addresses=("127.0.0.1",), zero_rtp_origin=False)):
                    await pc.setLocalDescription(offer)
                answer = (await http.post(body["webrtc_url"], json={"sdp": pc.localDescription.sdp, "type": "offer"},
                                          headers=auth)).json()
                await pc.setRemoteDescription(RTCSessionDescription(sdp=answer["sdp"], type=answer["type"]))
                track = await asyncio.wait_for(video.get(), 20)
                await asyncio.wait_for(track.recv(), 20)  # a frame of the first chunk decoded
                control = pc.createDataChannel("control")
                control.on("message", lambda data: messages.put_nowait(decode(data, expect="server")))
                first = await asyncio.wait_for(messages.get(), 20)
                assert isinstance(first, FramesInfo)
                assert (first.idx, first.pts, first.n) == (0, 0, 5)
            finally:
                await pc.close()
                await http.delete(f"{d.url}/v1/sessions/{body['session_id']}", headers=auth)


@pytest.mark.slow
async def test_a_director_segment_over_webrtc_with_a_window_runs_to_its_end() -> None:
    """The client acks each chunk when its `frames` message arrives, before the paced frames have
    all gone out; a window smaller than two chunks must still open (it used to stall the segment
    after its first chunk, until the next `direct`)."""
    async with off_loop(running_daemon(webrtc_hosts=("127.0.0.1",), window_s=0.5)) as d, \
            httpx.AsyncClient(timeout=30) as http:
        body, auth = await _create(http, d.url, "director")
        client = LoopbackClient()
        try:
            answer = await http.post(body["webrtc_url"], json={"sdp": await client.offer(), "type": "offer"},
                                     headers=auth)
            await client.accept(answer.json()["sdp"], "answer")
            await asyncio.wait_for(client.control_open.wait(), 20)
            client.send(Received(idx=-1))  # the window applies from the start
            client.send(Direct(id=1, prompt="a lighthouse at dusk", seconds=1.5))
            announced = []
            while True:
                msg = await asyncio.wait_for(client.messages.get(), 20)
                if isinstance(msg, FramesInfo):
                    announced.append((msg.idx, msg.n))
                    client.send(Received(idx=msg.idx + msg.n - 1))
                if isinstance(msg, SegmentEnd):
                    break
            assert (msg.segment, msg.re, msg.status, msg.frames) == (1, 1, "done", 24)
            assert announced == [(0, 5), (5, 8), (13, 8), (21, 3)]
        finally:
            await client.close()
            await http.delete(f"{d.url}/v1/sessions/{body['session_id']}", headers=auth)
