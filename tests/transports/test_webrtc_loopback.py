"""WebRTC gateway <-> aiortc client on 127.0.0.1 only (local-only mode on both sides)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from protocols.messages import Action, FramesInfo, Interrupt, Ping, Pong
from protocols.timeline import pts_for
from tests.transports._client import LOOPBACK, LoopbackClient
from tests.transports._session import FakePort, make_chunk
from transports.webrtc import WebRTCConfig, WebRTCGateway

FPS = 16


@dataclass
class Connected:
    port: FakePort
    client: LoopbackClient
    gateway: WebRTCGateway


@pytest.fixture
async def connected() -> AsyncIterator[Connected]:
    """A gateway and a loopback client with a live peer connection and both data channels open."""
    port = FakePort(fps=FPS)
    gateway = WebRTCGateway(WebRTCConfig(host_addresses=LOOPBACK))
    client = LoopbackClient()
    try:
        sdp, type_ = await gateway.answer(port, await client.offer(), "offer")
        await client.accept(sdp, type_)
        await client.channels_open(10)
        yield Connected(port, client, gateway)
    finally:
        await client.close()
        await gateway.shutdown()


async def test_answer_offers_only_the_configured_host_address(connected: Connected) -> None:
    client = connected.client
    answer = client.pc.remoteDescription.sdp
    candidates = [line.split()[4] for line in answer.splitlines() if line.startswith("a=candidate:")]
    assert candidates and set(candidates) == {"127.0.0.1"}


async def test_frames_decode_and_rtp_timestamps_are_the_session_pts(connected: Connected) -> None:
    port, client = connected.port, connected.client
    port.outputs.put_nowait(make_chunk(0, 4, FPS, port.width, port.height, segment=3, action_seq=5))
    port.outputs.put_nowait(make_chunk(4, 4, FPS, port.width, port.height, segment=3, action_seq=6))
    port.outputs.put_nowait(make_chunk(8, 1, FPS, port.width, port.height, segment=3, action_seq=6))
    # the receiver's jitter buffer releases a frame when the next one's first packet arrives
    decoded = [await asyncio.wait_for(client.frames.get(), 10) for _ in range(8)]
    assert [(f.width, f.height) for f in decoded] == [(port.width, port.height)] * 8
    assert [f.pts for f in decoded] == [pts_for(i, FPS) for i in range(8)]  # relative to the first
    assert client.rtp_timestamps[:9] == [pts_for(i, FPS) for i in range(9)]
    assert [f.idx for f in port.sent] == list(range(9))


async def test_a_frames_message_describes_each_chunk(connected: Connected) -> None:
    port, client = connected.port, connected.client
    port.outputs.put_nowait(make_chunk(0, 3, FPS, port.width, port.height, segment=1, action_seq=9))
    port.outputs.put_nowait(make_chunk(3, 3, FPS, port.width, port.height, segment=1, action_seq=9,
                                       disc_first=True))
    first = await client.next_message(FramesInfo)
    second = await client.next_message(FramesInfo)
    assert first == FramesInfo(idx=0, n=3, pts=0, segment=1, action_seq=9, disc=False)
    assert second == FramesInfo(idx=3, n=3, pts=pts_for(3, FPS), segment=1, action_seq=9, disc=True)


async def test_frames_of_an_old_generation_never_reach_the_wire(connected: Connected) -> None:
    port, client, gateway = connected.port, connected.client, connected.gateway
    port.gen = 1
    port.outputs.put_nowait(make_chunk(0, 2, FPS, port.width, port.height, generation=0))
    port.outputs.put_nowait(make_chunk(0, 2, FPS, port.width, port.height, generation=1, disc_first=True))
    assert await client.next_message(FramesInfo) == FramesInfo(idx=0, n=2, pts=0, segment=0, action_seq=-1,
                                                               disc=True)
    await asyncio.wait_for(client.frames.get(), 10)
    assert [(f.idx, f.generation) for f in port.sent] == [(0, 1), (1, 1)]
    peer = gateway.peer(port.session_id)
    assert peer is not None and peer.stream.stale_dropped == 2


async def test_client_messages_from_both_channels_reach_the_session_and_its_replies_come_back(
        connected: Connected) -> None:
    port, client = connected.port, connected.client
    client.send(Ping(id=4, ts=123.5))  # answered by the session, as on a WebSocket
    client.send(Interrupt(id=5))
    client.send(Action(seq=1, ts=1.0, keys=("w",)), channel="actions")
    for _ in range(100):
        if len(port.submitted) == 3:
            break
        await asyncio.sleep(0.02)
    assert sorted(port.submitted, key=lambda m: m.T) == [Action(seq=1, ts=1.0, keys=("w",)), Interrupt(id=5),
                                                         Ping(id=4, ts=123.5)]
    port.outputs.put_nowait(Pong(re=4, ts=123.5))
    assert await client.next_message(Pong) == Pong(re=4, ts=123.5)


async def test_a_picture_loss_report_makes_the_next_frame_a_key_frame(connected: Connected) -> None:
    port, client, gateway = connected.port, connected.client, connected.gateway
    peer = gateway.peer(port.session_id)
    assert peer is not None
    port.outputs.put_nowait(make_chunk(0, 3, FPS, port.width, port.height))
    await asyncio.wait_for(client.frames.get(), 10)
    await asyncio.wait_for(client.frames.get(), 10)
    receiver = client.pc.getTransceivers()[0].receiver
    sender_ssrc = peer.pc.getTransceivers()[0].sender._ssrc
    await receiver._send_rtcp_pli(sender_ssrc)  # what a decoder that lost packets sends
    for _ in range(200):
        if peer.stream.keyframe_requests:
            break
        await asyncio.sleep(0.01)
    assert peer.stream.keyframe_requests == 1
    port.outputs.put_nowait(make_chunk(3, 2, FPS, port.width, port.height))
    after = [await asyncio.wait_for(client.frames.get(), 10) for _ in range(2)]  # idx 2 (sent before), 3
    assert [f.key_frame for f in after] == [False, True]
