"""Idle keep-alive HTTP connections: the daemon keeps one open well past the 5 s after which common
client pools drop theirs, and SessionClient drops its own sooner, so a client never sends a
request on a connection the server is closing at that moment (CI saw a DELETE after 5 s idle fail
with ReadError when both sides used 5 s)."""

from __future__ import annotations

import asyncio
import time

import pytest

from protocols.client import CLIENT_KEEPALIVE_S, SessionClient
from sessiond.api.server import KEEP_ALIVE_S, uvicorn_config
from sessiond.config import ServeConfig
from tests.conftest import off_loop, running_daemon, tiny_engine


def test_the_server_outlasts_client_pools_and_session_client_lets_go_first() -> None:
    assert uvicorn_config(object(), ServeConfig()).timeout_keep_alive == KEEP_ALIVE_S == 30
    assert CLIENT_KEEPALIVE_S == 2.0 < 5.0 < KEEP_ALIVE_S  # 5 s: httpx's and uvicorn's default


async def _get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str) -> bytes:
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n".encode())
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5.0)
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    await asyncio.wait_for(reader.readexactly(length), 5.0)
    return head.split(b"\r\n")[0]


@pytest.mark.slow
@pytest.mark.asyncio
async def test_an_idle_connection_still_answers_after_six_seconds() -> None:
    async with off_loop(running_daemon(tiny_engine())) as running:
        port = int(running.url.rsplit(":", 1)[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            assert await _get(reader, writer, "/healthz") == b"HTTP/1.1 200 OK"
            await asyncio.sleep(6.0)  # uvicorn's default would have closed it after 5 s
            assert await _get(reader, writer, "/healthz") == b"HTTP/1.1 200 OK"
        finally:
            writer.close()
        client = SessionClient(timeout_s=10.0)
        created = await client.create(running.url, "world")
        began = time.monotonic()
        await asyncio.sleep(5.5)
        await client.close_session()  # on a new connection: the pooled one was let go after 2 s
        assert time.monotonic() - began < 10.0
        await client.aclose()
        assert created.session_id not in running.daemon.sessions
