"""A bare WebSocket client for feeding the daemon malformed input the protocols client would
never send."""

from __future__ import annotations

import asyncio
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from protocols.codec import decode, encode
from protocols.messages import Hello, Ping, Pong, Welcome

__all__ = ["RawConn"]


class RawConn:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.messages: list[Any] = []

    @classmethod
    async def open(cls, ws_url: str, token: str, *, hello: bool = True, query: str = "media=raw") -> RawConn:
        ws = await connect(f"{ws_url}?{query}", additional_headers={"Authorization": f"Bearer {token}"},
                           compression=None, max_size=2**22, proxy=None, close_timeout=1)
        conn = cls(ws)
        if hello:
            await conn.send(Hello(v=1))
            assert isinstance(await conn.next(), Welcome)
        return conn

    async def send(self, msg: Any) -> None:
        await self.ws.send(encode(msg))

    async def send_raw(self, data: bytes | str) -> None:
        await self.ws.send(data)

    async def next(self, timeout_s: float = 10.0) -> Any:
        msg = decode(await asyncio.wait_for(self.ws.recv(decode=False), timeout_s), max_bytes=2**22,
                     expect="server", max_prompt_chars=2**20)
        self.messages.append(msg)
        return msg

    async def next_of(self, kind: type, timeout_s: float = 10.0) -> Any:
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout_s
        while True:
            msg = await self.next(max(0.01, end - loop.time()))
            if isinstance(msg, kind):
                return msg

    async def alive(self, ping_id: int = 9999) -> bool:
        """The connection and session still answer: a ping gets its pong."""
        await self.send(Ping(id=ping_id, ts=1.0))
        while True:
            pong = await self.next_of(Pong)
            if pong.re == ping_id:  # earlier pings' replies are skipped
                return True

    async def closed_with(self, timeout_s: float = 10.0) -> int | None:
        """Read until the server closes; the close code."""
        try:
            while True:
                await asyncio.wait_for(self.ws.recv(decode=False), timeout_s)
        except ConnectionClosed as exc:
            return exc.rcvd.code if exc.rcvd is not None else None

    async def close(self) -> None:
        await self.ws.close()
