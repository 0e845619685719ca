"""A spectator that reads nothing: a bare socket with a 4 KiB receive buffer that completes the
WebSocket handshake and `hello`, reads up to its `welcome`, and never reads again (so the
server's sends back up into its socket buffers and stop completing)."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import struct
import time
from typing import Any
from urllib.parse import urlsplit

from protocols.codec import decode, encode
from protocols.messages import Hello, Welcome

__all__ = ["SilentSpectator"]


class SilentSpectator:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.local_port: int = sock.getsockname()[1]
        self.stopped_reading = 0.0  # monotonic time of its last read (the welcome)

    @classmethod
    async def open(cls, ws_url: str, token: str, media: str) -> SilentSpectator:
        loop = asyncio.get_running_loop()
        url = urlsplit(ws_url)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window stays small
        sock.setblocking(False)
        await loop.sock_connect(sock, (url.hostname, url.port))
        key = base64.b64encode(os.urandom(16)).decode()
        request = (f"GET {url.path}?media={media} HTTP/1.1\r\nHost: {url.netloc}\r\nUpgrade: websocket\r\n"
                   f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                   f"Authorization: Bearer {token}\r\n\r\n")
        await loop.sock_sendall(sock, request.encode())
        conn = cls(sock)
        head = await conn._read_until(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101"), head[:200]
        await loop.sock_sendall(sock, _masked_binary(encode(Hello(v=1))))
        welcome = decode(await conn._read_message(), max_bytes=2**22, expect="server", max_prompt_chars=2**20)
        assert isinstance(welcome, Welcome) and welcome.session["role"] == "viewer", welcome
        conn.stopped_reading = time.monotonic()
        return conn  # from here on nothing is read

    async def _recv(self, n: int) -> bytes:
        data = await asyncio.get_running_loop().sock_recv(self.sock, n)
        if not data:
            raise ConnectionError("closed before the welcome")
        return data

    async def _read_until(self, marker: bytes) -> bytes:
        """Byte by byte, so nothing past the marker is consumed."""
        out = b""
        while not out.endswith(marker):
            out += await self._recv(1)
        return out

    async def _read_exactly(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            out += await self._recv(n - len(out))
        return out

    async def _read_message(self) -> bytes:
        b0, b1 = await self._read_exactly(2)
        assert b0 & 0x0F == 0x2 and b1 & 0x80 == 0, (b0, b1)  # a binary frame, unmasked (from a server)
        size = b1 & 0x7F
        if size == 126:
            size = struct.unpack("!H", await self._read_exactly(2))[0]
        elif size == 127:
            size = struct.unpack("!Q", await self._read_exactly(8))[0]
        return await self._read_exactly(size)

    async def reaches_end(self, timeout_s: float = 20.0) -> bool:
        """Reads what is left until the server's end of the connection (EOF or reset)."""
        loop = asyncio.get_running_loop()

        async def drain() -> None:
            while await loop.sock_recv(self.sock, 1 << 16):
                pass

        try:
            await asyncio.wait_for(drain(), timeout_s)
        except (ConnectionResetError, BrokenPipeError):
            pass
        return True

    def close(self) -> None:
        self.sock.close()


def _masked_binary(payload: bytes) -> bytes:
    mask = os.urandom(4)
    size = len(payload)
    head: Any = bytes([0x82, 0x80 | size]) if size < 126 else bytes([0x82, 0x80 | 126]) + struct.pack("!H", size)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
