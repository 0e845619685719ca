"""A viewer in a process of its own, for tests that make it vanish without a goodbye (SIGKILL,
SIGSTOP): `python -m tests.e2e._viewer ws|webrtc CREATE_RESPONSE_JSON`. It prints `streaming`
once a frame arrived, then keeps reading until it is killed."""

from __future__ import annotations

import asyncio
import json
import sys

import httpx

from protocols.client import SessionClient
from protocols.http import CreateSessionResponse
from protocols.messages import Frame
from tests.transports._client import LoopbackClient


async def _ws(session: CreateSessionResponse, base_url: str) -> None:
    client = SessionClient(timeout_s=20.0)
    client.attach(base_url, session)
    await client.connect()
    said = False
    async for msg in client.messages():
        if isinstance(msg, Frame) and not said:
            print("streaming", flush=True)
            said = True


async def _webrtc(session: CreateSessionResponse) -> None:
    client = LoopbackClient()
    async with httpx.AsyncClient(timeout=30) as http:
        answer = (await http.post(session.webrtc_url, json={"sdp": await client.offer(), "type": "offer"},
                                  headers={"Authorization": f"Bearer {session.token}"})).json()
    await client.accept(answer["sdp"], answer["type"])
    await asyncio.wait_for(client.frames.get(), 30)
    print("streaming", flush=True)
    while True:
        await client.frames.get()


def main() -> None:
    kind, raw, base_url = sys.argv[1], sys.argv[2], sys.argv[3]
    session = CreateSessionResponse.from_json(json.loads(raw))
    asyncio.run(_ws(session, base_url) if kind == "ws" else _webrtc(session))


if __name__ == "__main__":
    main()
