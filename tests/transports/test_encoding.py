"""The shared H.264 encoder hands out the packet it made, stamped once at the codec boundary:
the session pts on the 90 kHz time base; its Annex B bytes are the same access unit."""

from __future__ import annotations

import numpy as np

from protocols.timeline import TIME_BASE, pts_for
from transports.encoding import EncoderSettings, H264Encoder, split_annexb


def test_each_encoded_frame_is_one_packet_with_the_session_pts_on_the_90_khz_clock() -> None:
    encoder = H264Encoder(EncoderSettings(32, 32, 16))
    rng = np.random.default_rng(3)
    frames = [encoder.encode(rng.integers(0, 255, (32, 32, 3), np.uint8), pts_for(i, 16)) for i in range(3)]
    assert [(f.packet.pts, f.packet.dts, f.pts) for f in frames] == [(0, 0, 0), (5625, 5625, 5625),
                                                                    (11250, 11250, 11250)]
    assert all(f.packet.time_base == TIME_BASE for f in frames)
    assert [f.keyframe for f in frames] == [True, False, False]
    assert frames[0].data == bytes(frames[0].packet)
    assert [u[0] & 0x1F for u in split_annexb(frames[0].data)][-1] == 5  # an IDR slice ends the key frame
