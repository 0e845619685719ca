"""Two scoped adjustments to aioice/aiortc, active only inside `peer_scope(...)`.

1. Host candidates restricted to given addresses (our documented local-only mode). aioice
   gathers host candidates from every interface EXCEPT loopback, so on a loopback-only network
   it gathers nothing, and on a real one a local test would leak onto the LAN. Inside the
   scope, `aioice.ice.get_host_addresses` returns exactly the configured addresses, and
   datagrams from any other source address are dropped before ICE sees them (a browser pairs
   its other interface addresses with our 127.0.0.1 candidate and would otherwise win
   nomination with them; the gateway also strips such candidates from the offer).
2. RTP timestamps equal to the session pts. aiortc adds a random origin to every RTP
   timestamp; inside the scope the origin is 0, so the 90 kHz pts we stamp on each encoded
   frame is the RTP timestamp on the wire (docs/protocol.md: "the video track's RTP timestamps are
   these pts"); browsers read it back (requestVideoFrameCallback's rtpTimestamp).

Mechanism: `install()` wraps the two module-level functions ONCE per process (idempotent);
the wrappers consult a ContextVar and otherwise behave exactly like the originals, so code
outside a scope (another library, another peer without the option) is unaffected. aiortc
gathers candidates inside `setLocalDescription` and starts its RTP sender from a task created
there; asyncio tasks copy the context they were created in, so wrapping `setLocalDescription`
in the scope covers both. Tests assert the effects (only 127.0.0.1 candidates; RTP
timestamp == pts), so an aiortc change that breaks this is caught.
"""

from __future__ import annotations

import contextlib
import contextvars
import ipaddress
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import aioice.ice
import aiortc.rtcrtpsender

__all__ = ["PeerScope", "install", "peer_scope", "validate_addresses"]


@dataclass(frozen=True)
class PeerScope:
    host_addresses: tuple[str, ...] | None  # None: aioice's own enumeration
    zero_rtp_origin: bool


_SCOPE: contextvars.ContextVar[PeerScope | None] = contextvars.ContextVar("sessiond_webrtc_scope", default=None)
_MARK = "_sessiond_scoped"


def validate_addresses(addresses: tuple[str, ...]) -> tuple[str, ...]:
    """Normalised IP literals; raises ValueError naming a bad entry."""
    out = []
    for a in addresses:
        try:
            out.append(str(ipaddress.ip_address(a)))
        except ValueError:
            raise ValueError(f"webrtc host address {a!r} is not an IP address (e.g. 127.0.0.1)") from None
    if not out:
        raise ValueError("webrtc host addresses: give at least one address, or None for all interfaces")
    return tuple(out)


def _wrap_host_addresses(original: Callable[[bool, bool], list[str]]) -> Callable[[bool, bool], list[str]]:
    def get_host_addresses(use_ipv4: bool, use_ipv6: bool) -> list[str]:
        scope = _SCOPE.get()
        if scope is None or scope.host_addresses is None:
            return original(use_ipv4, use_ipv6)
        return [
            a for a in scope.host_addresses
            if (use_ipv4 and ipaddress.ip_address(a).version == 4)
            or (use_ipv6 and ipaddress.ip_address(a).version == 6)
        ]

    setattr(get_host_addresses, _MARK, True)
    return get_host_addresses


def _wrap_random32(original: Callable[[], int]) -> Callable[[], int]:
    def random32() -> int:
        scope = _SCOPE.get()
        if scope is not None and scope.zero_rtp_origin:
            return 0
        return original()

    setattr(random32, _MARK, True)
    return random32


def _wrap_datagram_received(original: Callable[..., None]) -> Callable[..., None]:
    def datagram_received(self: Any, data: bytes | str, addr: tuple[Any, ...]) -> None:
        scope = _SCOPE.get()
        if scope is not None and scope.host_addresses is not None and addr[0] not in scope.host_addresses:
            return  # local-only mode: nothing from another address reaches ICE
        original(self, data, addr)

    setattr(datagram_received, _MARK, True)
    return datagram_received


def install() -> None:
    """Wrap aioice's host enumeration and inbound datagrams, and aiortc's RTP sender origin
    (once per process). aioice's sockets are created while gathering, inside the scope, and
    asyncio runs their read callbacks in a copy of that context, so the filter follows them."""
    if not getattr(aioice.ice.get_host_addresses, _MARK, False):
        aioice.ice.get_host_addresses = _wrap_host_addresses(aioice.ice.get_host_addresses)  # type: ignore[assignment]
    if not getattr(aioice.ice.StunProtocol.datagram_received, _MARK, False):
        aioice.ice.StunProtocol.datagram_received = _wrap_datagram_received(  # type: ignore[method-assign]
            aioice.ice.StunProtocol.datagram_received
        )
    if not getattr(aiortc.rtcrtpsender.random32, _MARK, False):
        aiortc.rtcrtpsender.random32 = _wrap_random32(aiortc.rtcrtpsender.random32)  # type: ignore[attr-defined]


@contextlib.contextmanager
def peer_scope(scope: PeerScope) -> Iterator[None]:
    """Wrap `await pc.setLocalDescription(...)` in this (after adding tracks/transceivers)."""
    install()
    token = _SCOPE.set(scope)
    try:
        yield
    finally:
        _SCOPE.reset(token)
