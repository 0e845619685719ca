"""Helpers for end-to-end tests: drive the protocols client against a live daemon."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from protocols.client import SessionClient
from protocols.messages import Frame
from protocols.timeline import pts_for

__all__ = ["assert_timeline", "collect", "collect_for", "collect_frames", "new_client", "session_client"]


async def new_client(url: str, mode: str = "world", **kw: Any) -> SessionClient:
    client = SessionClient(timeout_s=20.0)
    await client.create(url, mode, **kw)
    await client.connect()
    return client


@contextlib.asynccontextmanager
async def session_client(url: str, mode: str = "world", **kw: Any) -> AsyncIterator[SessionClient]:
    """A created and connected session whose client closes the session and itself on the way out."""
    client = await new_client(url, mode, **kw)
    try:
        yield client
    finally:
        await client.close_session()
        await client.aclose()


async def collect(client: SessionClient, until: Callable[[list[Any]], bool], timeout_s: float = 20.0) -> list[Any]:
    """Every message of the connection until `until(messages)` holds (or fails on timeout)."""
    out: list[Any] = []

    async def run() -> None:
        async for msg in client.messages():
            out.append(msg)
            if until(out):
                return

    await asyncio.wait_for(run(), timeout_s)
    return out


async def collect_for(client: SessionClient, seconds: float) -> list[Any]:
    """Whatever arrives within `seconds`."""
    out: list[Any] = []

    async def run() -> None:
        async for msg in client.messages():
            out.append(msg)

    try:
        await asyncio.wait_for(run(), seconds)
    except TimeoutError:
        pass
    return out


async def collect_frames(client: SessionClient, n: int, timeout_s: float = 20.0) -> list[Frame]:
    msgs = await collect(client, lambda m: sum(isinstance(x, Frame) for x in m) >= n, timeout_s)
    return [m for m in msgs if isinstance(m, Frame)]


def assert_timeline(frames: list[Frame], fps: int, first_idx: int = 0) -> None:
    """idx consecutive from first_idx; pts = pts_for(idx)."""
    assert [f.idx for f in frames] == list(range(first_idx, first_idx + len(frames)))
    assert [f.pts for f in frames] == [pts_for(f.idx, fps) for f in frames]


def now() -> float:
    return time.monotonic()
