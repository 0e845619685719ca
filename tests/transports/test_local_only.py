"""Local-only mode's scoped hooks: effective inside `peer_scope`, transparent outside."""

from __future__ import annotations

from typing import Any

import aioice.ice

from transports.webrtc import PeerScope, peer_scope
from transports.webrtc._hooks import install
from transports.webrtc._sdp import keep_candidates

LOCAL = PeerScope(host_addresses=("127.0.0.1",), zero_rtp_origin=False)


class _Receiver:
    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    def request_received(self, message: Any, addr: tuple[str, int], protocol: Any) -> None:
        self.seen.append(addr)

    def data_received(self, data: bytes, component: int) -> None:
        self.seen.append(("data", component))


def _binding_request() -> bytes:
    from aioice import stun

    return bytes(stun.Message(message_method=stun.Method.BINDING, message_class=stun.Class.REQUEST))


def _protocol() -> tuple[aioice.ice.StunProtocol, _Receiver]:
    receiver = _Receiver()
    return aioice.ice.StunProtocol(receiver), receiver  # type: ignore[arg-type]


def test_host_addresses_are_exactly_the_configured_ones_inside_the_scope() -> None:
    install()
    with peer_scope(LOCAL):
        assert aioice.ice.get_host_addresses(use_ipv4=True, use_ipv6=True) == ["127.0.0.1"]
        assert aioice.ice.get_host_addresses(use_ipv4=False, use_ipv6=True) == []
    assert "127.0.0.1" not in aioice.ice.get_host_addresses(use_ipv4=True, use_ipv6=False)  # aioice's own


async def test_datagrams_from_other_addresses_never_reach_ice_inside_the_scope() -> None:
    install()
    protocol, receiver = _protocol()
    with peer_scope(LOCAL):
        protocol.datagram_received(_binding_request(), ("192.0.2.77", 5000))
        protocol.datagram_received(_binding_request(), ("127.0.0.1", 5001))
    assert receiver.seen == [("127.0.0.1", 5001)]


async def test_outside_the_scope_datagrams_pass_as_before() -> None:
    install()
    protocol, receiver = _protocol()
    protocol.datagram_received(_binding_request(), ("192.0.2.77", 5000))
    assert receiver.seen == [("192.0.2.77", 5000)]


def test_offer_candidates_outside_the_allowed_addresses_are_removed() -> None:
    offer = "\r\n".join([
        "v=0",
        "m=video 9 UDP/TLS/RTP/SAVPF 96",
        "a=candidate:1 1 udp 2113937151 127.0.0.1 40000 typ host",
        "a=candidate:2 1 udp 2113937151 192.0.2.2 40001 typ host",
        "a=candidate:3 1 udp 2113937151 3114661d-5454-48e1-ad81-d54bb2b8a472.local 40002 typ host",
        "a=mid:0",
    ]) + "\r\n"
    kept = keep_candidates(offer, ("127.0.0.1",))
    assert [line for line in kept.splitlines() if line.startswith("a=candidate")] == [
        "a=candidate:1 1 udp 2113937151 127.0.0.1 40000 typ host"
    ]
    assert kept.splitlines()[-1] == "a=mid:0"
