"""A loopback WebRTC client's half of the offer/answer (the benchmark's viewers and players,
`watch` and `play`): its offer with 127.0.0.1 host candidates only, POSTed with the token to a
session's `webrtc_url`, the answer set on the peer."""

from __future__ import annotations

import httpx
from aiortc import RTCPeerConnection, RTCSessionDescription

from transports.webrtc._hooks import PeerScope, peer_scope

__all__ = ["offer_and_answer"]


async def offer_and_answer(pc: RTCPeerConnection, webrtc_url: str, token: str, timeout_s: float) -> str | None:
    """Negotiate `pc` (its transceivers and channels already added) with the server; None when
    done, else the server's refusal (its body, cut to 200 characters)."""
    offer = await pc.createOffer()
    with peer_scope(PeerScope(host_addresses=("127.0.0.1",), zero_rtp_origin=False)):
        await pc.setLocalDescription(offer)
    async with httpx.AsyncClient(timeout=timeout_s, trust_env=False) as http:
        r = await http.post(webrtc_url, json={"sdp": pc.localDescription.sdp, "type": "offer"},
                            headers={"Authorization": f"Bearer {token}"})
    if r.status_code != 200:
        return r.text[:200]
    answer = r.json()
    await pc.setRemoteDescription(RTCSessionDescription(sdp=answer["sdp"], type=answer["type"]))
    return None
