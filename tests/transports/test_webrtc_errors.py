"""Bad input to the WebRTC gateway: each a coded ProtocolError or a bounded, logged drop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
import pytest_asyncio
from aiortc import RTCConfiguration, RTCPeerConnection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocols.errors import ErrorCode, ProtocolError
from protocols.messages import Action, Error, Interrupt
from tests.transports._client import LOOPBACK, LoopbackClient
from tests.transports._session import FakePort
from transports.inbound import InboundLimits
from transports.webrtc import PeerScope, WebRTCConfig, WebRTCGateway, peer_scope


async def _answer_error(sdp: object, type_: object = "offer") -> ProtocolError:
    gateway = WebRTCGateway(WebRTCConfig(host_addresses=LOOPBACK))
    try:
        with pytest.raises(ProtocolError) as info:
            await gateway.answer(FakePort(), sdp, type_)  # type: ignore[arg-type]
        assert gateway.peer("s-test") is None
        return info.value
    finally:
        await gateway.shutdown()


async def _client_offer() -> str:
    client = LoopbackClient()
    sdp = await client.offer()
    await client.close()
    return sdp


async def _offer_without_video() -> str:
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    pc.createDataChannel("control")
    with peer_scope(PeerScope(host_addresses=LOOPBACK, zero_rtp_origin=False)):
        await pc.setLocalDescription(await pc.createOffer())
    sdp = pc.localDescription.sdp
    await pc.close()
    return sdp


async def _garbage() -> str:
    return "hello, I am not SDP"


async def _truncated_offer() -> str:
    sdp = await _client_offer()
    return sdp[: len(sdp) // 3]


async def _oversized() -> str:
    return "v=0\r\n" + "a=x\r\n" * 20000


BAD_OFFERS = [
    pytest.param(_garbage, "offer", ErrorCode.INVALID_FIELD, "sdp", "must start with v=0", id="garbage-sdp"),
    pytest.param(_truncated_offer, "offer", ErrorCode.INVALID_FIELD, "sdp", "cannot be answered", id="truncated-sdp"),
    pytest.param(_client_offer, "answer", ErrorCode.INVALID_FIELD, "type", "type must be 'offer'",
                 id="an-answer-instead-of-an-offer"),
    pytest.param(_offer_without_video, "offer", ErrorCode.INVALID_FIELD, "sdp", "no video", id="offer-without-video"),
    pytest.param(_oversized, "offer", ErrorCode.TOO_LARGE, "sdp", "larger than 65536 bytes", id="oversized-offer"),
]


@pytest.mark.parametrize(("make_sdp", "type_", "code", "field", "says"), BAD_OFFERS)
async def test_a_bad_offer_is_refused_with_its_code_and_field(make_sdp: Callable[[], Awaitable[str]], type_: str,
                                                              code: ErrorCode, field: str, says: str) -> None:
    error = await _answer_error(await make_sdp(), type_)
    assert (error.code, error.field) == (code, field)
    assert says in error.message


async def test_a_second_offer_while_a_peer_is_live_is_conflict() -> None:
    port = FakePort()
    gateway = WebRTCGateway(WebRTCConfig(host_addresses=LOOPBACK))
    first, second = LoopbackClient(), LoopbackClient()
    try:
        await first.accept(*await gateway.answer(port, await first.offer(), "offer"))
        with pytest.raises(ProtocolError) as info:
            await gateway.answer(FakePort(), await second.offer(), "offer")
        assert info.value.code == ErrorCode.CONFLICT
    finally:
        await first.close()
        await second.close()
        await gateway.shutdown()


async def test_an_action_flood_reaches_the_session_in_order_and_nothing_waits_in_the_peer() -> None:
    port = FakePort()
    gateway = WebRTCGateway(WebRTCConfig(host_addresses=LOOPBACK))
    client = LoopbackClient()
    try:
        await client.accept(*await gateway.answer(port, await client.offer(), "offer"))
        await asyncio.wait_for(client.control_open.wait(), 10)
        for seq in range(500):
            client.send(Action(seq=seq, ts=float(seq), keys=("w",)), channel="control")
        client.send(Interrupt(id=1))  # ordered after the flood on the same channel
        for _ in range(500):
            if Interrupt(id=1) in port.submitted:
                break
            await asyncio.sleep(0.01)
        # each one handed to the session at once (its action timeline merges and rate-limits them)
        assert [m.seq for m in port.submitted if isinstance(m, Action)] == list(range(500))
        assert port.submitted[-1] == Interrupt(id=1)
    finally:
        await client.close()
        await gateway.shutdown()


async def test_requests_over_the_rate_are_refused_and_an_abusive_peer_is_closed() -> None:
    port = FakePort()
    limits = InboundLimits(max_requests_per_s=2, abuse_errors_per_10s=3)
    gateway = WebRTCGateway(WebRTCConfig(host_addresses=LOOPBACK, inbound=limits))
    client = LoopbackClient()
    try:
        await client.accept(*await gateway.answer(port, await client.offer(), "offer"))
        await asyncio.wait_for(client.control_open.wait(), 10)
        for request_id in (1, 2, 3):
            client.send(Interrupt(id=request_id))
        refused = await client.next_message(Error)
        assert (refused.code, refused.fatal, refused.re) == ("rate_limited", False, 3)
        for _ in range(3):
            client.control.send(b"\xc1 not msgpack")
        errors = [await client.next_message(Error) for _ in range(3)]
        assert [(e.code, e.fatal) for e in errors] == [
            ("bad_message", False), ("bad_message", False), ("rate_limited", True)]
        for _ in range(500):
            if gateway.peer(port.session_id) is None:
                break
            await asyncio.sleep(0.01)
        assert gateway.peer(port.session_id) is None and port.submitted == [Interrupt(id=1), Interrupt(id=2)]
    finally:
        await client.close()
        await gateway.shutdown()


async def test_a_malformed_message_gets_a_coded_error_and_the_peer_lives_on() -> None:
    port = FakePort()
    gateway = WebRTCGateway(WebRTCConfig(host_addresses=LOOPBACK))
    client = LoopbackClient()
    try:
        await client.accept(*await gateway.answer(port, await client.offer(), "offer"))
        await client.channels_open(10)
        client.control.send(b"\xc1 not msgpack")
        error = await client.next_message(Error)
        assert (error.code, error.fatal) == ("bad_message", False)
        client.send(Interrupt(id=2), channel="actions")
        error = await client.next_message(Error)
        assert error.code == "unknown_type"
        client.send(Interrupt(id=3))
        for _ in range(100):
            if port.submitted:
                break
            await asyncio.sleep(0.01)
        assert port.submitted == [Interrupt(id=3)]
    finally:
        await client.close()
        await gateway.shutdown()


async def test_an_offer_missing_any_one_line_is_answered_or_refused_with_a_code() -> None:
    offer = await _client_offer()
    lines = offer.splitlines()
    outcomes = []
    for i in range(1, len(lines)):  # keep v=0
        mutated = "\r\n".join(lines[:i] + lines[i + 1:]) + "\r\n"
        gateway = WebRTCGateway(WebRTCConfig(host_addresses=LOOPBACK))
        try:
            await gateway.answer(FakePort(session_id=f"s{i}"), mutated, "offer")
            outcomes.append("answered")
        except ProtocolError as exc:
            outcomes.append(exc.code.value)
        finally:
            await gateway.shutdown()
    assert set(outcomes) <= {"answered", "invalid_field"}
    assert "invalid_field" in outcomes and "answered" in outcomes


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def valid_offer() -> str:
    """One real offer for the whole module (hypothesis wants no per-example fixture)."""
    return await _client_offer()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
async def test_a_corrupted_offer_never_escapes_as_anything_but_a_coded_error(valid_offer: str,
                                                                            data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(valid_offer) - 1))
    end = data.draw(st.integers(start, min(len(valid_offer), start + 40)))
    junk = data.draw(st.text(max_size=20))
    mutated = valid_offer[:start] + junk + valid_offer[end:]
    gateway = WebRTCGateway(WebRTCConfig(host_addresses=LOOPBACK))
    try:
        await gateway.answer(FakePort(), mutated, "offer")
        outcome = "answered"
    except ProtocolError as exc:
        outcome = exc.code.value
    finally:
        await gateway.shutdown()
    assert outcome in {"answered", "invalid_field"}
