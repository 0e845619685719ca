"""A video frame handed to the decoder once its last packet is in, for the loopback aiortc
clients (`watch`, `play`).

aiortc's receiver (1.16) reassembles a frame only when a packet of the NEXT frame arrives: each
frame reaches its decoder one frame interval late (62 ms at 16 frames/s), and a key frame that
ends a chunk waits for the next chunk (measured on an idle box: a viewer connected at 36-49 ms
decoded its first frame at 109-285 ms). A browser's receiver decodes a frame when the RTP packet
with the marker bit (the last of the access unit, RFC 6184) is in; the benchmark clients stand
for browsers, so theirs does too. Frames without a marker still go out as aiortc does it."""

from __future__ import annotations

from typing import Any

from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.rtp import RtpPacket

__all__ = ["MarkerJitterBuffer", "use_marker_jitter"]


class MarkerJitterBuffer(JitterBuffer):
    """aiortc's jitter buffer, but a frame whose packets are all in, up to one with the marker
    bit, is released at once."""

    def _remove_frame(self, sequence_number: int) -> JitterFrame | None:
        packets: list[RtpPacket] = []
        for count in range(self.capacity):
            packet = self._packets[(self._origin + count) % self.capacity]  # type: ignore[operator]
            if packet is None or (packets and packet.timestamp != packets[0].timestamp):
                break  # a gap, or the next frame began without a marker: aiortc's own rule decides
            packets.append(packet)
            if packet.marker:
                self.remove(count + 1)
                return JitterFrame(data=b"".join(p._data for p in packets),  # type: ignore[attr-defined]
                                   timestamp=packets[0].timestamp)
        return super()._remove_frame(sequence_number)


def use_marker_jitter(transceiver: Any) -> None:
    """Give a video transceiver's receiver the marker-aware buffer (before any packet arrives)."""
    receiver = transceiver.receiver
    old = receiver._RTCRtpReceiver__jitter_buffer
    receiver._RTCRtpReceiver__jitter_buffer = MarkerJitterBuffer(old.capacity, is_video=True)
