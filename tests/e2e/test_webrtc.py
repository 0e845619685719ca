"""WebRTC through the live daemon on loopback only (`webrtc_hosts=127.0.0.1`): the offer is
answered, video frames decode, `frames` metadata arrives on `control`, actions reach the frames."""

from __future__ import annotations

import asyncio

import httpx

from protocols.messages import Action, FramesInfo
from protocols.timeline import pts_for
from tests.conftest import running_daemon
from tests.transports._client import LoopbackClient


def test_a_world_session_streams_over_webrtc_and_takes_actions() -> None:
    async def run(url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            body = (await http.post(f"{url}/v1/sessions", json={"mode": "world"})).json()
            auth = {"Authorization": f"Bearer {body['token']}"}
            client = LoopbackClient()
            try:
                answer = await http.post(body["webrtc_url"], json={"sdp": await client.offer(), "type": "offer"},
                                         headers=auth)
                assert answer.status_code == 200 and answer.json()["type"] == "answer"
                await client.accept(answer.json()["sdp"], "answer")
                first = await client.next_message(FramesInfo, 20)
                assert first.pts == pts_for(first.idx, 16) and first.n > 0
                frame = await asyncio.wait_for(client.frames.get(), 20)
                assert (frame.width, frame.height) == (32, 32)
                await asyncio.wait_for(client.control_open.wait(), 10)
                client.send(Action(seq=7, ts=0.0, keys=("w",)), channel="control")
                while (info := await client.next_message(FramesInfo, 20)).action_seq < 7:
                    assert info.pts == pts_for(info.idx, 16)
                assert info.action_seq == 7
                status = (await http.get(f"{url}/v1/sessions/{body['session_id']}", headers=auth)).json()
                assert status["state"] == "active" and status["frames_sent"] >= info.idx
            finally:
                await client.close()
                await http.delete(f"{url}/v1/sessions/{body['session_id']}", headers=auth)

    with running_daemon(webrtc_hosts=("127.0.0.1",)) as d:
        asyncio.run(run(d.url))
