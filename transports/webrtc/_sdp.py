"""Checks on a client's SDP offer before aiortc sees it, each failure a coded ProtocolError."""

from __future__ import annotations

import ipaddress

from aiortc import sdp as aiortc_sdp

from protocols.errors import ErrorCode, ProtocolError

__all__ = ["MAX_SDP_BYTES", "check_offer", "keep_candidates"]

MAX_SDP_BYTES = 64 * 1024


def check_offer(sdp: object, type_: object) -> aiortc_sdp.SessionDescription:
    """The parsed offer; raises invalid_field (not an offer, unparsable, no video m-line that
    can receive) or too_large."""
    if type_ != "offer":
        raise ProtocolError(ErrorCode.INVALID_FIELD, f"type must be 'offer', got {type_!r}", field="type")
    if not isinstance(sdp, str) or not sdp.strip():
        raise ProtocolError(ErrorCode.INVALID_FIELD, "sdp must be a non-empty SDP offer string", field="sdp")
    if len(sdp.encode()) > MAX_SDP_BYTES:
        raise ProtocolError(ErrorCode.TOO_LARGE, f"sdp is larger than {MAX_SDP_BYTES} bytes", field="sdp")
    if not sdp.startswith("v=0"):
        raise ProtocolError(ErrorCode.INVALID_FIELD, "sdp is not an SDP document (must start with v=0)", field="sdp")
    try:
        parsed = aiortc_sdp.SessionDescription.parse(sdp)
    except Exception as exc:  # aiortc's parser fails with asserts, StopIteration, ...: all mean bad SDP
        raise ProtocolError(ErrorCode.INVALID_FIELD, f"sdp does not parse: {exc!r}"[:300], field="sdp") from None
    videos = [m for m in parsed.media if m.kind == "video"]
    if not videos:
        raise ProtocolError(
            ErrorCode.INVALID_FIELD, "the offer has no video m-line; add a recvonly video transceiver", field="sdp"
        )
    if not any(m.direction in ("recvonly", "sendrecv", None) for m in videos):
        raise ProtocolError(
            ErrorCode.INVALID_FIELD, "the offer's video m-line must be recvonly or sendrecv", field="sdp"
        )
    if not any(c.mimeType.lower() == "video/h264" for m in videos for c in m.rtp.codecs):
        raise ProtocolError(ErrorCode.INVALID_FIELD, "the offer's video must allow H264", field="sdp")
    return parsed


def _candidate_address(line: str) -> str | None:
    # a=candidate:<foundation> <component> <transport> <priority> <address> <port> typ ...
    parts = line.split()
    return parts[4] if len(parts) > 5 else None


def keep_candidates(sdp: str, allowed: tuple[str, ...]) -> str:
    """The offer without remote candidates outside `allowed` (local-only mode: no check is
    ever sent to another address, nor an mDNS lookup made for a .local name)."""
    normalised = {str(ipaddress.ip_address(a)) for a in allowed}
    kept = []
    for line in sdp.splitlines():
        if line.startswith("a=candidate:"):
            address = _candidate_address(line)
            try:
                ok = address is not None and str(ipaddress.ip_address(address)) in normalised
            except ValueError:
                ok = False
            if not ok:
                continue
        kept.append(line)
    return "\r\n".join(kept) + "\r\n"
