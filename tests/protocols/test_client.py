"""The asyncio client against a stand-in server on loopback: create, connect, requests
matched by id, frames with their metadata, and every failure as a coded ClientError."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from protocols._client_support import error_from_close, error_from_response, ws_url_for
from protocols.client import ClientError, SessionClient
from protocols.http import CreateSessionRequest
from protocols.messages import Ack, Frame, Hello, Pause, Pong, SegmentEnd, SegmentStart, ServerMessage
from tests.protocols.fake_server import FakeState, serving


@pytest.fixture
def state() -> FakeState:
    """What the stand-in server saw and how it behaves (a test may parametrize its own)."""
    return FakeState()


@pytest.fixture
async def url(state: FakeState) -> AsyncIterator[str]:
    """The stand-in server under uvicorn on this test's event loop."""
    async with serving(state) as base_url:
        yield base_url


@pytest.fixture
async def client(url: str) -> AsyncIterator[SessionClient]:
    """A client, closed before the server stops."""
    async with SessionClient() as session_client:
        yield session_client


async def take(client: SessionClient, count: int) -> list[ServerMessage]:
    out: list[ServerMessage] = []
    async for msg in client.messages():
        out.append(msg)
        if len(out) == count:
            break
    return out


async def test_create_posts_the_body_and_returns_the_session(
        client: SessionClient, url: str, state: FakeState) -> None:
    session = await client.create(url, "director", prompt="a harbour", seed=3, fps=30)
    assert (session.session_id, session.mode, session.width, session.height, session.fps) == (
        "s-1",
        "director",
        2,
        1,
        30,
    )
    assert state.created == [CreateSessionRequest("director", prompt="a harbour", seed=3, fps=30)]


@pytest.mark.parametrize("state", [FakeState(full=True)], ids=["full"])
async def test_create_over_capacity_raises_capacity_with_retry_after(
        client: SessionClient, url: str, state: FakeState) -> None:
    with pytest.raises(ClientError) as info:
        await client.create(url, "world")
    assert (info.value.code, info.value.status, info.value.retry_after_s) == ("capacity", 503, 2.5)


async def test_create_with_an_invalid_field_raises_the_servers_code_and_field(
        client: SessionClient, url: str) -> None:
    with pytest.raises(ClientError) as info:
        await client.create(url, "game")
    assert (info.value.code, info.value.status, info.value.field) == ("invalid_field", 400, "mode")


async def test_connect_says_hello_and_returns_the_welcome(
        client: SessionClient, url: str, state: FakeState) -> None:
    await client.create(url, "world")
    welcome = await client.connect()
    assert (welcome.v, welcome.session["session_id"], welcome.limits.window_frames) == (1, "s-1", 30)
    assert "token" not in welcome.session
    assert state.hellos == [Hello(v=1, client="protocols.client")]


async def test_connect_with_a_wrong_token_raises_unauthorized(client: SessionClient, url: str) -> None:
    await client.create(url, "world")
    with pytest.raises(ClientError) as info:
        await client.connect(token="wrong")
    assert (info.value.code, info.value.message) == ("unauthorized", "wrong or missing token")


async def test_connect_with_an_unknown_media_mode_is_an_invalid_field(
        client: SessionClient, url: str) -> None:
    await client.create(url, "world")
    with pytest.raises(ClientError) as info:
        await client.connect(media="h265")
    assert (info.value.code, info.value.field) == ("invalid_field", "media")


async def test_actions_carry_increasing_seq_and_ts_and_frames_say_which_action_they_saw(
        client: SessionClient, url: str, state: FakeState) -> None:
    await client.create(url, "world")
    await client.connect()
    sent = [await client.send_action(["w"], mouse=(1.5, 0.0)) for _ in range(3)]
    frames = await take(client, 3)
    assert [a.seq for a in sent] == [0, 1, 2]
    assert sent[0].ts < sent[1].ts < sent[2].ts
    assert state.actions == sent
    assert [(f.idx, f.pts, f.action_seq, f.disc) for f in frames if isinstance(f, Frame)] == [
        (0, 0, 0, True),
        (1, 3000, 1, False),
        (2, 6000, 2, False),
    ]


async def test_seq_keeps_increasing_across_a_reconnect(client: SessionClient, url: str) -> None:
    await client.create(url, "world")
    await client.connect()
    await client.send_action([])
    await take(client, 1)
    await client.disconnect()
    await client.connect()
    assert (await client.send_action(["a"])).seq == 1


async def test_requests_are_answered_by_the_reply_with_their_id(client: SessionClient, url: str) -> None:
    await client.create(url, "world")
    await client.connect()
    pong = await client.ping()
    ack = await client.interrupt()
    assert isinstance(pong, Pong) and pong.re == 1
    assert ack == Ack(re=2, pts=0)
    assert [msg.T for msg in await take(client, 2)] == ["pong", "ack"]  # replies are yielded too


async def test_an_error_reply_raises_its_code(client: SessionClient, url: str) -> None:
    await client.create(url, "world")
    await client.connect()
    with pytest.raises(ClientError) as info:
        await client.flush()
    assert (info.value.code, info.value.message) == ("conflict", "nothing to flush")


async def test_an_unanswered_request_times_out(client: SessionClient, url: str) -> None:
    await client.create(url, "world")
    await client.connect()
    with pytest.raises(ClientError) as info:
        await client.request(Pause(id=client.next_id()), timeout_s=0.1)
    assert info.value.code == "timeout"


async def test_a_direction_streams_its_segment_with_metadata(client: SessionClient, url: str) -> None:
    await client.create(url, "director")
    await client.connect()
    direct_id = await client.direct("a lighthouse", seconds=0.1)
    start, *frames, end = await take(client, 5)
    assert start == SegmentStart(segment=1, pts=0, re=direct_id)
    assert [type(f) for f in frames] == [Frame, Frame, Frame]
    assert [
        (f.idx, f.pts, f.segment, f.action_seq, f.w, f.h, len(f.data))
        for f in frames
        if isinstance(f, Frame)
    ] == [(0, 0, 1, -1, 2, 1, 6), (1, 3000, 1, -1, 2, 1, 6), (2, 6000, 1, -1, 2, 1, 6)]
    assert end == SegmentEnd(segment=1, pts=9000, frames=3, status="done", re=direct_id)


async def test_auto_received_acknowledges_each_frame_as_it_is_handed_out(url: str, state: FakeState) -> None:
    async with SessionClient(auto_received=True) as client:
        await client.create(url, "director")
        await client.connect()
        await client.direct("a lighthouse")
        await take(client, 5)
        await client.ping()  # the server handles messages in order: every ack is in by now
        assert state.received == [0, 1, 2]


async def test_frames_acknowledged_after_the_server_closed_end_the_messages_cleanly(
        client: SessionClient, url: str, state: FakeState) -> None:
    await client.create(url, "director")
    await client.connect()
    await client.direct("then close")  # three frames, then a clean close (as a drained server's `moved`)
    for _ in range(100):
        if client._conn is not None and client._conn.closed:
            break
        await asyncio.sleep(0.02)
    seen = []
    async for msg in client.messages():  # each acknowledged as it is taken: all after the close
        assert isinstance(msg, Frame)
        await client.received(msg.idx)
        seen.append(msg.idx)
    assert (seen, state.received) == ([0, 1, 2], [])


async def test_status_and_close_session_use_the_token(
        client: SessionClient, url: str, state: FakeState) -> None:
    await client.create(url, "world")
    status = await client.status()
    await client.close_session()
    assert (status.session_id, status.state, status.created_at) == ("s-1", "active", 1764420000.5)
    assert state.deleted == ["s-1"]


async def test_a_server_sending_garbage_ends_the_messages_with_bad_message(
        client: SessionClient, url: str) -> None:
    await client.create(url, "director")
    await client.connect()
    await client.direct("garbage")
    with pytest.raises(ClientError) as info:
        await take(client, 1)
    assert info.value.code == "bad_message"


async def test_disconnect_ends_the_messages_and_fails_pending_requests_cleanly(
        client: SessionClient, url: str) -> None:
    await client.create(url, "world")
    await client.connect()
    consumer = asyncio.create_task(take(client, 1))
    pending = asyncio.create_task(client.request(Pause(id=client.next_id())))
    await asyncio.sleep(0.05)
    await client.disconnect()
    with pytest.raises(ClientError) as info:
        await pending
    assert info.value.code == "disconnected"
    assert await consumer == []


async def test_sending_without_a_connection_says_to_connect_first(client: SessionClient, url: str) -> None:
    await client.create(url, "world")
    with pytest.raises(ClientError) as info:
        await client.send_action(["w"])
    assert (info.value.code, info.value.message) == (
        "disconnected",
        "not connected: call connect() first",
    )


async def test_calls_before_create_say_to_create_first(client: SessionClient) -> None:
    with pytest.raises(ClientError) as info:
        await client.status()
    assert info.value.code == "not_found"
    assert "create() or attach()" in info.value.message


async def test_a_refused_connection_is_a_disconnected_error(client: SessionClient) -> None:
    with pytest.raises(ClientError) as info:
        await client.create("http://127.0.0.1:9", "world")  # the discard port: nothing listens
    assert info.value.code == "disconnected"


def test_the_ws_url_comes_from_the_create_response_relative_or_absolute() -> None:
    assert ws_url_for("http://h:8000", "/v1/sessions/s/ws", "raw") == "ws://h:8000/v1/sessions/s/ws?media=raw"
    assert ws_url_for("https://h", "wss://edge/ws?x=1", "fmp4") == "wss://edge/ws?x=1&media=fmp4"


def test_an_http_failure_without_an_error_body_is_coded_from_its_status() -> None:
    err = error_from_response(503, b"<html>busy</html>", {"retry-after": "4"})
    assert (err.code, err.status, err.retry_after_s) == ("capacity", 503, 4.0)


def test_close_codes_4000_plus_status_name_the_error() -> None:
    assert (error_from_close(4401, "").code, error_from_close(4404, "gone").code) == (
        "unauthorized",
        "not_found",
    )
    assert error_from_close(1006, "").code == "disconnected"
