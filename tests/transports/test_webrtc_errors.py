"""Bad input to the WebRTC gateway: each a coded ProtocolError or a bounded, logged drop."""

from __future__ import annotations

import asyncio

import pytest
from aiortc import RTCConfiguration, RTCPeerConnection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocols.errors import ErrorCode, ProtocolError
from protocols.messages import Action, Error, Interrupt
from tests.transports._client import LOOPBACK, LoopbackClient
from tests.transports._session import FakePort
from transports.inbound import InboundLimits
from transports.webrtc import PeerScope, WebRTCConfig, WebRTCGateway, peer_scope


def _answer_error(sdp: object, type_: object = "offer") -> ProtocolError:
    async def run() -> ProtocolError:
        gateway = WebRTCGateway(WebRTCConfig(host_addresses=LOOPBACK))
        try:
            with pytest.raises(ProtocolError) as info:
                await gateway.answer(FakePort(), sdp, type_)  # type: ignore[arg-type]
            assert gateway.peer("s-test") is None
            return info.value
        finally:
            await gateway.shutdown()

    return asyncio.run(run())


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


def test_garbage_sdp_is_invalid_field() -> None:
    error = _answer_error("hello, I am not SDP")
    assert (error.code, error.field) == (ErrorCode.INVALID_FIELD, "sdp")


def test_truncated_sdp_is_invalid_field() -> None:
    sdp = asyncio.run(_client_offer())
    error = _answer_error(sdp[: len(sdp) // 3])
    assert (error.code, error.field) == (ErrorCode.INVALID_FIELD, "sdp")


def test_an_answer_instead_of_an_offer_is_invalid_field() -> None:
    error = _answer_error(asyncio.run(_client_offer()), "answer")
    assert (error.code, error.field) == (ErrorCode.INVALID_FIELD, "type")


def test_an_offer_without_video_is_invalid_field() -> None:
    error = _answer_error(asyncio.run(_offer_without_video()))
    assert (error.code, error.field) == (ErrorCode.INVALID_FIELD, "sdp")
    assert "no video" in error.message


def test_an_oversized_offer_is_too_large() -> None:
    error = _answer_error("v=0\r\n" + "a=x\r\n" * 20000)
    assert error.code == ErrorCode.TOO_LARGE


def test_a_second_offer_while_a_peer_is_live_is_conflict() -> None:
    async def run() -> None:
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

    asyncio.run(run())


def test_an_action_flood_reaches_the_session_in_order_and_nothing_waits_in_the_peer() -> None:
    async def run() -> None:
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

    asyncio.run(run())


def test_requests_over_the_rate_are_refused_and_an_abusive_peer_is_closed() -> None:
    async def run() -> None:
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

    asyncio.run(run())


def test_a_malformed_message_gets_a_coded_error_and_the_peer_lives_on() -> None:
    async def run() -> None:
        port = FakePort()
        gateway = WebRTCGateway(WebRTCConfig(host_addresses=LOOPBACK))
        client = LoopbackClient()
        try:
            await client.accept(*await gateway.answer(port, await client.offer(), "offer"))
            await asyncio.wait_for(client.control_open.wait(), 10)
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

    asyncio.run(run())


def test_an_offer_missing_any_one_line_is_answered_or_refused_with_a_code() -> None:
    async def run() -> list[str]:
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
        return outcomes

    outcomes = asyncio.run(run())
    assert set(outcomes) <= {"answered", "invalid_field"}
    assert "invalid_field" in outcomes and "answered" in outcomes


_OFFER: list[str] = []


def _valid_offer() -> str:
    if not _OFFER:
        _OFFER.append(asyncio.run(_client_offer()))
    return _OFFER[0]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_corrupted_offer_never_escapes_as_anything_but_a_coded_error(data: st.DataObject) -> None:
    offer = _valid_offer()
    start = data.draw(st.integers(0, len(offer) - 1))
    end = data.draw(st.integers(start, min(len(offer), start + 40)))
    junk = data.draw(st.text(max_size=20))
    mutated = offer[:start] + junk + offer[end:]

    async def run() -> str:
        gateway = WebRTCGateway(WebRTCConfig(host_addresses=LOOPBACK))
        try:
            await gateway.answer(FakePort(), mutated, "offer")
            return "answered"
        except ProtocolError as exc:
            return exc.code.value
        finally:
            await gateway.shutdown()

    assert asyncio.run(run()) in {"answered", "invalid_field"}
