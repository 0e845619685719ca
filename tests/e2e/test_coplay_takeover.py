"""Two connections on one invite seat, end to end (a real daemon: uvicorn, tiny engine; raw WebSocket
clients): the newest connection takes the seat. The older one is told at once (a fatal `conflict`,
then close 4409) and receives nothing after it; the new one is welcomed with where the seat's seq
stands (`last_seq`), so its first action steers; what the older one held is let go at the next
chunk. The owner and the other player play on untouched: the owner's frames keep their idx and its
own action_seq, the other player's frames keep its own."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from engine.api import FrameAction
from protocols.client import SessionClient
from protocols.messages import Action, Error, Frame, Hello, Presence, Welcome
from tests.conftest import off_loop, running_daemon, tiny_engine
from tests.e2e._raw import RawConn
from tests.e2e.test_coplay import RecordingEngine, _frames_until, _invite, _until_engine


async def _open(ws_url: str, token: str) -> tuple[RawConn, Welcome]:
    conn = await RawConn.open(ws_url, token, hello=False)
    await conn.send(Hello(v=1))
    welcome = await conn.next()
    assert isinstance(welcome, Welcome)
    return conn, welcome


async def _rest_of(conn: RawConn, timeout_s: float = 10.0) -> tuple[list[Any], int | None]:
    """Every message `conn` gets until the server closes it, and the close code."""
    out: list[Any] = []
    try:
        while True:
            out.append(await conn.next(timeout_s))
    except ConnectionClosed as exc:
        return out, exc.rcvd.code if exc.rcvd is not None else None


@pytest.mark.asyncio
async def test_a_second_connection_on_a_seat_takes_it_over_and_the_first_is_told_at_once() -> None:
    engine = RecordingEngine(tiny_engine())
    async with off_loop(running_daemon(engine)) as d, httpx.AsyncClient(timeout=10.0) as http:
        owner = SessionClient(auto_received=True, timeout_s=20.0)
        created = await owner.create(d.url, "world", players=3)
        sid, token = created.session_id, created.token
        seat1, seat2 = [(await _invite(http, d.url, sid, token, label=name)).json() for name in ("ana", "bo")]
        await owner.connect()
        owner_frames: list[Frame] = []

        async def pump() -> None:
            async for msg in owner.messages():
                if isinstance(msg, Frame):
                    owner_frames.append(msg)

        reader = asyncio.create_task(pump())
        first, _ = await _open(created.ws_url, seat1["token"])
        other, _ = await _open(created.ws_url, seat2["token"])
        second: RawConn | None = None
        try:
            for _ in range(3):
                last = await owner.send_action(["w"])
            o = last.seq  # the owner's own newest seq (unchanged from here on)
            await other.send(Action(seq=7, ts=1.0, keys=("d",)))
            await first.send(Action(seq=40, ts=1.0, keys=("a",)))  # the first tab, well into its sequence
            held = FrameAction(keys=("w", "a", "d"))
            chunk = await _until_engine(engine, sid, held, 0)
            await _frames_until(first, lambda f: f.players == (o, 40, 7))

            # the same invite opened again (a reloaded tab, another device): it takes the seat at once
            opened_at = time.monotonic()
            second, welcome = await _open(created.ws_url, seat1["token"])
            assert (welcome.session["role"], welcome.session["player"], welcome.session["last_seq"]) == (
                "player", 1, 40)
            told, code = await _rest_of(first)
            told_s = time.monotonic() - opened_at
            errors = [m for m in told if isinstance(m, Error)]
            assert [(e.code, e.fatal) for e in errors] == [("conflict", True)]
            assert "player 1 connected again elsewhere" in errors[0].message
            assert code == 4409
            assert told_s < 5.0, f"the replaced connection heard it after {told_s:.1f} s"
            after = told[told.index(errors[0]) + 1:]
            assert not any(isinstance(m, Frame) for m in after)  # it receives nothing more

            # what the first tab held is let go at the next chunk; the new tab's first action steers
            released = FrameAction(keys=("w", "d"))
            chunk = await _until_engine(engine, sid, released, chunk + 1)
            await second.send(Action(seq=41, ts=2.0, keys=("s",)))
            await _until_engine(engine, sid, FrameAction(keys=("w", "s", "d")), chunk + 1)
            mine = (await _frames_until(second, lambda f: f.players == (o, 41, 7)))[-1]
            assert mine.action_seq == 41

            # the owner and the other player: untouched
            seen = await _frames_until(other, lambda f: f.idx >= mine.idx)
            frames = [m for m in [*other.messages, *seen] if isinstance(m, Frame) and m.players is not None
                      and m.players[2] == 7]
            assert frames and all(f.action_seq == 7 for f in frames)  # its own seq, throughout
            presence = [m for m in other.messages if isinstance(m, Presence)][-1]
            assert [(p["player"], p["connected"]) for p in presence.players] == [(0, True), (1, True), (2, True)]
            await asyncio.wait_for(_until(lambda: bool(owner_frames) and owner_frames[-1].idx >= mine.idx), 20)
            idx = [f.idx for f in owner_frames]
            assert idx == list(range(idx[0], idx[0] + len(idx)))  # no frame of the owner's skipped
            assert {f.action_seq for f in owner_frames if f.players is not None and f.players[2] == 7} == {o}
            status = (await http.get(f"{d.url}/v1/sessions/{sid}", headers={"Authorization": f"Bearer {token}"})).json()
            assert (status["state"], status["players"]) == ("active", 3)  # the owner and the two seats
        finally:
            reader.cancel()
            for conn in (first, other, second):
                if conn is not None:
                    await conn.close()
            await owner.close_session()
            await owner.aclose()


async def _until(done: Any) -> None:
    while not done():
        await asyncio.sleep(0.02)
