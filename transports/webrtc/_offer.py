"""A loopback WebRTC client's half of the offer/answer (the benchmark's viewers and players,
`watch` and `play`): its offer with 127.0.0.1 host candidates only, POSTed with the token to a
session's `webrtc_url`, the answer set on the peer."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from aiortc import RTCPeerConnection, RTCSessionDescription

from transports.webrtc._hooks import PeerScope, peer_scope

__all__ = ["http_client", "offer_and_answer"]


def http_client(url: str, timeout_s: float) -> httpx.AsyncClient:
    """The client that POSTs the offer. A plain-http URL uses no TLS, so none is set up: building
    httpx's default TLS context reads and parses its CA bundle (36-69 ms on an idle 2-core box,
    several times that when fifty viewers connect at once). Make it before the viewer starts
    connecting, as a browser's network stack exists before its page connects."""
    return httpx.AsyncClient(timeout=timeout_s, trust_env=False, verify=not url.startswith("http://"))


async def offer_and_answer(pc: RTCPeerConnection, webrtc_url: str, token: str, timeout_s: float, *,
                           http: httpx.AsyncClient | None = None,
                           mark: Callable[[str], None] = lambda name: None) -> str | None:
    """Negotiate `pc` (its transceivers and channels already added) with the server; None when
    done, else the server's refusal (its body, cut to 200 characters). `http`: a client made
    beforehand (`http_client`; closed by its owner), else one is made here. `mark` hears "offer"
    once the local offer is set and "answer" once the server's reply is back."""
    offer = await pc.createOffer()
    with peer_scope(PeerScope(host_addresses=("127.0.0.1",), zero_rtp_origin=False)):
        await pc.setLocalDescription(offer)
    mark("offer")
    if http is None:
        async with http_client(webrtc_url, timeout_s) as own:
            r = await _post(own, pc, webrtc_url, token)
    else:
        r = await _post(http, pc, webrtc_url, token)
    mark("answer")
    if r.status_code != 200:
        return r.text[:200]
    answer = r.json()
    await pc.setRemoteDescription(RTCSessionDescription(sdp=answer["sdp"], type=answer["type"]))
    return None


async def _post(http: httpx.AsyncClient, pc: RTCPeerConnection, url: str, token: str) -> httpx.Response:
    return await http.post(url, json={"sdp": pc.localDescription.sdp, "type": "offer"},
                           headers={"Authorization": f"Bearer {token}"})
