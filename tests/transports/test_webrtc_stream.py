"""The session stream on its own: one encode per frame for every viewer, paced by pts."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from protocols.messages import Ack, FramesInfo
from protocols.timeline import pts_for
from tests.transports._session import FakePort, make_chunk
from transports.webrtc.stream import SessionStream, Viewer, ViewerTrack

FPS = 16


async def _drain(track: ViewerTrack, n: int) -> list[Any]:
    return [await asyncio.wait_for(track.recv(), 10) for _ in range(n)]


async def test_two_viewers_get_the_same_encoded_packets() -> None:
    port = FakePort(fps=FPS)
    with ThreadPoolExecutor(1) as executor:
        stream = SessionStream(port, executor)
        inbox: list[list[Any]] = [[], []]
        tracks = [ViewerTrack(), ViewerTrack()]
        for track, box in zip(tracks, inbox, strict=True):
            stream.add_viewer(Viewer(track, box.append))
        stream.start()
        port.outputs.put_nowait(make_chunk(0, 3, FPS, port.width, port.height))
        port.outputs.put_nowait(Ack(re=1))
        first, second = await asyncio.gather(_drain(tracks[0], 3), _drain(tracks[1], 3))
        assert [p.pts for p in first] == [pts_for(i, FPS) for i in range(3)]
        assert all(a is b for a, b in zip(first, second, strict=True))  # encoded once
        assert first[0].is_keyframe and not first[1].is_keyframe
        await asyncio.sleep(0.05)
        assert inbox[0] == inbox[1] == [FramesInfo(idx=0, n=3, pts=0, segment=0, action_seq=-1), Ack(re=1)]
        await stream.close()


async def test_frames_leave_at_their_media_time_not_in_a_burst() -> None:
    port = FakePort(fps=FPS)
    with ThreadPoolExecutor(1) as executor:
        stream = SessionStream(port, executor)
        track = ViewerTrack()
        stream.add_viewer(Viewer(track, lambda message: None))
        stream.start()
        # the clock anchors when the first frame is taken, so no earlier than now: frame i may not
        # leave before now + its slot (measured from frame 0's own send time instead, a slow first
        # encode on a loaded machine made frame 1 look early)
        put_at = time.monotonic()
        port.outputs.put_nowait(make_chunk(0, 4, FPS, port.width, port.height))
        await _drain(track, 4)
        offsets = [t - put_at for t in port.sent_at]
        slots = [pts_for(i, FPS) / 90000 for i in range(4)]  # 0, 62.5, 125, 187.5 ms
        assert all(o >= s - 0.002 for o, s in zip(offsets, slots, strict=True))  # never ahead of its slot
        await stream.close()


async def test_after_a_slow_chunk_frames_leave_evenly_paced_not_in_a_burst() -> None:
    port = FakePort(fps=FPS)
    with ThreadPoolExecutor(1) as executor:
        stream = SessionStream(port, executor)  # the default: re-anchor a quarter interval late
        track = ViewerTrack(max_queued=32)
        stream.add_viewer(Viewer(track, lambda message: None))
        stream.start()
        drained = asyncio.ensure_future(_drain(track, 12))  # reading starts the stream
        port.outputs.put_nowait(make_chunk(0, 4, FPS, port.width, port.height))
        while not port.sent_at:  # the clock anchors on frame 0 as it leaves
            await asyncio.sleep(0.001)
        anchor = port.sent_at[0]
        await asyncio.sleep(anchor + 0.29 - time.monotonic())  # the next chunk is due at 0.25 s: 40 ms late
        port.outputs.put_nowait(make_chunk(4, 4, FPS, port.width, port.height))
        port.outputs.put_nowait(make_chunk(8, 4, FPS, port.width, port.height))  # then one on time
        packets = await asyncio.wait_for(drained, 20)
        await stream.close()
    assert [p.pts for p in packets] == [pts_for(i, FPS) for i in range(12)]
    assert [f.idx for f in port.sent] == list(range(12))
    gaps = [b - a for a, b in zip(port.sent_at, port.sent_at[1:], strict=False)]
    interval = 1 / FPS
    # frame 4 leaves when it arrives (late), 5-11 one interval apart from it: nothing closer than
    # an interval minus the quarter interval a frame may be late without re-anchoring (and the
    # timer's slack); before, frame 5 kept its old slot and left 22 ms after frame 4
    assert min(gaps) >= interval - interval / 4 - 0.004, [round(g, 4) for g in gaps]
    assert port.sent_at[4] - anchor >= 0.29
    assert stream.clock_resets == 1


async def test_a_new_segment_and_a_disc_start_with_key_frames() -> None:
    port = FakePort(fps=FPS)
    with ThreadPoolExecutor(1) as executor:
        stream = SessionStream(port, executor, late_reset_s=10.0)
        track = ViewerTrack()
        stream.add_viewer(Viewer(track, lambda message: None))
        stream.start()
        port.outputs.put_nowait(make_chunk(0, 2, FPS, port.width, port.height, segment=0))
        port.outputs.put_nowait(make_chunk(2, 2, FPS, port.width, port.height, segment=1))
        port.outputs.put_nowait(make_chunk(4, 2, FPS, port.width, port.height, segment=1, disc_first=True))
        packets = await _drain(track, 6)
        assert [p.is_keyframe for p in packets] == [True, False, True, False, True, False]
        await stream.close()


def test_a_viewer_that_does_not_read_is_bounded_and_resumes_at_a_key_frame() -> None:
    track = ViewerTrack(max_queued=2)
    assert track.push("a") and track.push("b")  # type: ignore[arg-type]
    assert track.push("c") is False  # type: ignore[arg-type]
    assert track.dropped == 2
