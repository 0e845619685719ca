"""Every bad input of docs/protocol.md's error list gets its code, and the session goes on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import msgpack
import pytest
from websockets.asyncio.client import connect

from protocols.client import SessionClient
from protocols.codec import decode, encode
from protocols.messages import Error, Frame, Hello, Interrupt, Ping, Welcome
from tests.conftest import off_loop, running_daemon
from tests.e2e._bad_inputs import MALFORMED
from tests.e2e._raw import RawConn
from tests.e2e._util import collect_frames


async def _world(url: str) -> SessionClient:
    client = SessionClient(timeout_s=20.0)
    await client.create(url, "world")
    return client


@pytest.fixture
async def world(daemon) -> AsyncIterator[SessionClient]:
    """A world session on the shared daemon, created but not connected; closed afterwards."""
    client = await _world(daemon.url)
    try:
        yield client
    finally:
        await client.close_session()
        await client.aclose()


@pytest.fixture
async def conn(world: SessionClient) -> AsyncIterator[RawConn]:
    """A bare connection to the `world` session, past its hello."""
    raw = await RawConn.open(world.session.ws_url, world.session.token)
    try:
        yield raw
    finally:
        await raw.close()


async def _error_after(conn: RawConn, data: bytes | str | object) -> Error:
    if isinstance(data, bytes | str):
        await conn.send_raw(data)
    else:
        await conn.send(data)
    error: Error = await conn.next_of(Error)
    return error




@pytest.mark.parametrize(("data", "code"), MALFORMED)
async def test_a_malformed_message_gets_its_code_and_the_session_goes_on(conn: RawConn, data: object,
                                                                         code: str) -> None:
    err = await _error_after(conn, data)
    assert (err.code, err.fatal) == (code, False)
    assert await conn.alive()
    frames = [m for m in conn.messages if isinstance(m, Frame)]
    frames += [await conn.next_of(Frame) for _ in range(3)]
    assert [f.idx for f in frames] == list(range(len(frames)))  # the stream never broke


async def test_a_failed_request_error_names_the_request_id(conn: RawConn) -> None:
    err = await _error_after(conn, msgpack.packb({"t": "direct", "id": 41, "prompt": 3}))
    assert (err.code, err.re) == ("invalid_field", 41) and "prompt" in err.message


async def test_unsupported_version_closes_the_connection_but_not_the_session(world: SessionClient) -> None:
    conn = await RawConn.open(world.session.ws_url, world.session.token, hello=False)
    err = await _error_after(conn, Hello(v=2))
    assert (err.code, err.fatal) == ("unsupported_version", True)
    assert await conn.closed_with() == 4400
    assert (await world.status()).state in ("idle", "active")
    await world.connect()  # the session survives
    assert len(await collect_frames(world, 2)) == 2


async def test_a_message_before_hello_is_an_error_and_hello_still_works(world: SessionClient) -> None:
    conn = await RawConn.open(world.session.ws_url, world.session.token, hello=False)
    try:
        err = await _error_after(conn, Interrupt(id=1))
        assert (err.code, err.fatal) == ("invalid_field", False)
        await conn.send(Hello(v=1))
        assert await conn.alive()
    finally:
        await conn.close()


async def test_wrong_token_and_unknown_session_close_with_4401_and_4404(world: SessionClient) -> None:
    conn = await RawConn.open(world.session.ws_url, "not-the-token", hello=False)
    err = await conn.next_of(Error)
    assert (err.code, err.fatal) == ("unauthorized", True)
    assert await conn.closed_with() == 4401
    other = world.session.ws_url.replace(world.session.session_id, "s_0000000000000000")
    conn = await RawConn.open(other, world.session.token, hello=False)
    err = await conn.next_of(Error)
    assert (err.code, await conn.closed_with()) == ("not_found", 4404)
    conn = await RawConn.open(world.session.ws_url, world.session.token, hello=False, query="media=gif")
    err = await conn.next_of(Error)
    assert err.code == "invalid_field" and "media" in err.message


async def test_an_action_flood_is_coalesced_latest_wins_and_counted(daemon, world: SessionClient) -> None:
    await world.connect()
    coalesced = daemon.daemon.metrics.actions_coalesced
    before = coalesced._value.get()
    for _ in range(1000):  # ~4x the 240/s limit in one burst
        last = await world.send_action(["d"], mouse=(0.5, 0.0))
    await world.ping()
    frames = []
    while not frames or frames[-1].action_seq < last.seq:
        frames += await collect_frames(world, 1)
    assert coalesced._value.get() - before >= 1000 - 240
    assert frames[-1].action_seq == last.seq  # the newest state won


async def test_repeated_bad_messages_are_fatal_to_the_connection_only() -> None:
    async with off_loop(running_daemon(abuse_errors_per_10s=5)) as d:
        client = await _world(d.url)
        conn = await RawConn.open(client.session.ws_url, client.session.token)
        try:
            for _ in range(6):
                await conn.send_raw(b"\xc1")
            codes = []
            while True:
                err = await conn.next_of(Error)
                codes.append(err.code)
                if err.fatal:
                    break
            assert codes == ["bad_message"] * 5 + ["rate_limited"]
            assert await conn.closed_with() == 1008
            await client.connect()
            assert len(await collect_frames(client, 2)) == 2  # the session goes on
        finally:
            await client.close_session()
            await client.aclose()


def test_creating_over_capacity_is_503_with_retry_after() -> None:
    with running_daemon(max_sessions=1, policy="kv") as d:  # the KV pool policy's max_sessions
        first = httpx.post(f"{d.url}/v1/sessions", json={"mode": "world"})
        assert first.status_code == 201
        second = httpx.post(f"{d.url}/v1/sessions", json={"mode": "director"})
        assert second.status_code == 503
        body = second.json()["error"]
        assert (body["code"], body["retry_after_s"], body["reason"]) == ("capacity", 5.0, "max_sessions")
        assert second.headers["retry-after"] == "5"
        sid, token = first.json()["session_id"], first.json()["token"]
        gone = httpx.delete(f"{d.url}/v1/sessions/{sid}", headers={"Authorization": f"Bearer {token}"})
        assert gone.status_code == 204
        assert httpx.post(f"{d.url}/v1/sessions", json={"mode": "director"}).status_code == 201


def test_the_duty_policy_refuses_creates_over_max_sessions_until_one_closes() -> None:
    with running_daemon(max_sessions=1, policy="duty") as d:
        first = httpx.post(f"{d.url}/v1/sessions", json={"mode": "director"})
        assert first.status_code == 201
        second = httpx.post(f"{d.url}/v1/sessions", json={"mode": "director"})
        assert second.status_code == 503
        assert second.json()["error"] == {"code": "capacity", "retry_after_s": 30.0, "reason": "max_sessions",
                                          "message": "1 sessions are open (max_sessions); raise --max-sessions or "
                                                     "close one"}
        assert second.headers["retry-after"] == "30"
        assert httpx.get(f"{d.url}/v1/capacity").json()["admission"]["max_sessions"] == 1
        sid, token = first.json()["session_id"], first.json()["token"]
        gone = httpx.delete(f"{d.url}/v1/sessions/{sid}", headers={"Authorization": f"Bearer {token}"})
        assert gone.status_code == 204
        third = httpx.post(f"{d.url}/v1/sessions", json={"mode": "director"})
        assert third.status_code == 201
        sid, token = third.json()["session_id"], third.json()["token"]
        httpx.delete(f"{d.url}/v1/sessions/{sid}", headers={"Authorization": f"Bearer {token}"})


async def test_the_token_may_come_in_the_query_string_as_browsers_send_it(world: SessionClient) -> None:
    url = f"{world.session.ws_url}?media=raw&token={world.session.token}"
    async with connect(url, compression=None, proxy=None, max_size=2**20) as ws:
        await ws.send(encode(Hello(v=1, client="browser")))
        assert isinstance(decode(await ws.recv(decode=False), expect="server"), Welcome)


async def test_a_request_flood_is_rate_limited_and_the_session_goes_on(conn: RawConn) -> None:
    for i in range(60):  # 50 requests per second are allowed
        await conn.send(Ping(id=i, ts=0.0))
    limited = await conn.next_of(Error)
    assert (limited.code, limited.fatal, limited.re) == ("rate_limited", False, 50)
    await asyncio.sleep(1.1)
    assert await conn.alive()
