"""The audience: a member's bounded queue (overflow skips to the next place it may start, counted
exactly), revoke ends only that grant's members, and the shared packer packs once for all."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from protocols.codec import decode
from protocols.messages import Error, Frame
from sessiond.grants import Access, Role
from sessiond.metrics import Metrics
from sessiond.session.audience import GOP_CACHE_FRAMES, Audience, Member
from transports.fanout import Packed, SharedPacker
from transports.fmp4 import Fmp4Packer
from transports.interface import OutFrame
from transports.raw import RawPacker


def viewer(grant: str = "g_1") -> Access:
    return Access(Role.VIEWER, grant)


def packed(idx: int, key: bool = True) -> Packed:
    return Packed(b"x" * 10, idx, 1, key)


def test_a_raw_member_that_lags_drops_its_queue_and_goes_on_at_the_next_frame() -> None:
    m = Member(viewer(), "raw", max_frames=4)
    for i in range(4):
        assert m.offer(packed(i)) == (False, 0)
    assert m.offer(packed(4)) == (False, 4)  # frames 0-3 skipped, 4 queued
    assert [m.take().idx for _ in range(1)] == [4]
    assert (m.frames_skipped, m.queued_frames) == (4, 0)


def test_an_fmp4_member_waits_for_a_key_fragment_after_it_lagged() -> None:
    m = Member(viewer(), "fmp4", max_frames=4)
    assert m.offer(packed(0, key=False)) == (True, 0)  # before its first key fragment: asks, not counted as skipped
    assert m.offer(packed(1, key=True)) == (False, 0)
    for i in range(2, 5):
        m.offer(packed(i, key=False))
    assert m.offer(packed(5, key=False)) == (True, 5)  # overflow: 1-4 dropped and 5 too; asks for a key
    assert m.offer(packed(6, key=False)) == (True, 1)  # still asking: the packer's throttle may have eaten a request
    assert m.offer(packed(7, key=True)) == (False, 0)
    assert [m.take().idx] == [7] and m.frames_skipped == 6


def test_messages_are_kept_through_an_overflow_and_a_member_that_never_reads_ends() -> None:
    m = Member(viewer(), "raw", max_frames=2, max_messages=3)
    m.offer(Packed(b"m", -1, 0, True))
    for i in range(3):
        m.offer(packed(i))
    assert [q.idx for q in m.queue] == [-1, 2]
    m.offer(Packed(b"m", -1, 0, True))
    m.offer(Packed(b"m", -1, 0, True))
    m.offer(Packed(b"m", -1, 0, True))
    assert (m.end_reason, m.connection.ending) == ("stalled", True)


def test_revoke_ends_only_the_members_of_that_grant() -> None:
    audience = Audience("s_1", Metrics())

    async def run() -> None:
        shared = SharedPacker(RawPacker(), None, audience.deliver_to("raw"))
        a, b = Member(viewer("g_a"), "raw"), Member(viewer("g_b"), "raw")
        audience.join(a, shared)
        audience.join(b, shared)
        assert audience.revoke("g_a") == 1
        err = await a.next()
        assert isinstance(err, Error) and (err.code, err.fatal) == ("unauthorized", True)
        assert await a.next() is None and not b.connection.ending
        audience.leave(a)
        audience.leave(b)
        assert audience.packers == {}

    asyncio.run(run())


def test_the_shared_packer_packs_each_frame_once_for_every_member() -> None:
    metrics = Metrics()
    audience = Audience("s_1", metrics)

    async def run() -> None:
        shared = SharedPacker(RawPacker(), None, audience.deliver_to("raw"))
        members = [Member(viewer(), "raw") for _ in range(3)]
        for m in members:
            audience.join(m, shared)
        rgb = np.zeros((4, 4, 3), np.uint8)
        for i in range(5):
            audience.frame(OutFrame(pts=i * 5625, idx=i, segment=0, action_seq=-1, disc=False, generation=0, rgb=rgb))
        got = [[await m.next() for _ in range(5)] for m in members]
        assert shared.frames_packed == 5
        assert all(got[k][i] is got[0][i] for k in range(3) for i in range(5))  # the same bytes, shared
        frames = [decode(p.data, max_bytes=1 << 20, expect="server") for p in got[0]]
        assert [(f.idx, f.pts) for f in frames if isinstance(f, Frame)] == [(i, i * 5625) for i in range(5)]
        assert metrics.spectators._value.get() == 3
        for m in members:
            audience.leave(m)
        assert metrics.spectators._value.get() == 0

    asyncio.run(run())


@pytest.mark.parametrize("grant", ["g_a"])
def test_counts_by_grant(grant: str) -> None:
    audience = Audience("s_1", Metrics())
    audience.members += [Member(viewer(grant), "raw"), Member(viewer(grant), "fmp4"), Member(viewer("g_b"), "raw")]
    assert audience.counts() == {grant: 2, "g_b": 1}


def test_an_fmp4_joiner_gets_a_key_fragment_even_when_its_request_was_throttled() -> None:
    """Two fmp4 spectators join within the key-frame throttle, the second when the newest key
    fragment is too far back to start at (GOP_CACHE_FRAMES): its join request is throttled away
    after the first's key fragment went out; it keeps asking until it gets one."""
    from transports.fmp4 import Fmp4Packer

    audience = Audience("s_1", Metrics())

    async def run() -> None:
        shared = SharedPacker(Fmp4Packer(32, 32, 16), None, audience.deliver_to("fmp4"), keyframe_interval_s=0.5)
        first, second = Member(viewer(), "fmp4"), Member(viewer(), "fmp4")
        audience.join(first, shared)
        rgb = np.zeros((32, 32, 3), np.uint8)

        def frame(i: int) -> OutFrame:
            return OutFrame(pts=i * 5625, idx=i, segment=0, action_seq=-1, disc=False, generation=0, rgb=rgb)

        last = GOP_CACHE_FRAMES + 1
        for i in range(last + 1):  # a key fragment, then more frames than a joiner may start behind
            audience.frame(frame(i))
            assert (await first.next()).idx == i
        audience.join(second, shared)  # its request is throttled (0.5 s): no key fragment on its account
        audience.frame(frame(last + 1))
        assert (await first.next()).idx == last + 1
        await asyncio.sleep(0)
        assert second.queued_frames == 0 and second.need_key
        shared._last_key_request -= 1.0  # the throttle interval passes
        audience.frame(frame(last + 2))  # not a key fragment: the waiting member asks again, now granted
        assert (await first.next()).idx == last + 2
        audience.frame(frame(last + 3))
        got = await second.next()
        assert (got.idx, got.key) == (last + 3, True)
        audience.leave(first)
        audience.leave(second)

    asyncio.run(run())


def test_a_raw_joiner_starts_at_once_with_the_newest_frame_the_owner_got() -> None:
    audience = Audience("s_1", Metrics())
    rgb = np.zeros((4, 4, 3), np.uint8)

    def out(i: int) -> OutFrame:
        return OutFrame(pts=i * 5625, idx=i, segment=0, action_seq=-1, disc=False, generation=0, rgb=rgb)

    def idx_in(item: Packed) -> int:
        frame = decode(item.data, max_bytes=1 << 20, expect="server")
        assert isinstance(frame, Frame)
        return frame.idx

    async def run() -> None:
        for i in range(3):  # the owner got frames 0-2 before anyone watched
            audience.frame(out(i))
        first = Member(viewer(), "raw")
        audience.join(first, SharedPacker(RawPacker(), None, audience.deliver_to("raw")))
        assert idx_in(await first.next()) == 2  # the packer, started for it, packed the newest frame first
        second = Member(viewer(), "raw")
        audience.join(second, SharedPacker(RawPacker(), None, audience.deliver_to("raw")))
        assert [idx_in(p) for p in second.queue] == [2]  # queued at once: that same packing, not packed again
        audience.frame(out(3))
        assert (idx_in(await first.next()), idx_in(await second.next()), idx_in(await second.next())) == (3, 2, 3)
        shared = audience.packer("raw")
        assert shared is not None and shared.frames_packed == 2
        for m in (first, second):
            audience.leave(m)
        assert audience.packer("raw") is None
        third = Member(viewer(), "raw")  # a packer started again packs the newest frame anew
        audience.join(third, SharedPacker(RawPacker(), None, audience.deliver_to("raw")))
        assert idx_in(await third.next()) == 3

    asyncio.run(run())


def test_an_fmp4_joiner_starts_at_once_at_the_newest_key_fragment_while_it_is_recent() -> None:
    audience = Audience("s_1", Metrics())
    deliver = audience.deliver_to("fmp4")

    def fragment(idx: int, key: bool) -> Packed:
        return Packed(f"{idx}{'k' if key else 'p'}".encode(), idx, 4, key)

    async def run() -> None:
        shared = SharedPacker(Fmp4Packer(64, 48, 16), None, deliver, keyframe_interval_s=0.0)
        first = Member(viewer(), "fmp4")
        audience.join(first, shared)
        assert shared.keyframe_requests == 1  # the first joiner: a key fragment is asked for
        key, after, marker = fragment(0, True), fragment(4, False), Packed(b"m", -1, 0, True)
        for item in (key, after, marker):
            deliver(item)
        second = Member(viewer(), "fmp4")
        audience.join(second, shared)
        assert list(second.queue) == [key, after, marker]  # at once, the same bytes, from the key fragment
        assert shared.keyframe_requests == 1  # and no key fragment forced for it
        for idx in range(8, 8 + 5 * 4, 4):  # 5 more fragments: 28 frames since the key, past the bound
            deliver(fragment(idx, False))
        third = Member(viewer(), "fmp4")
        audience.join(third, shared)
        assert list(third.queue) == [] and shared.keyframe_requests == 2  # too far back: it waits for a key

    asyncio.run(run())


def test_the_first_fmp4_and_webrtc_joiners_start_with_the_newest_frame_as_a_key_frame() -> None:
    audience = Audience("s_1", Metrics())
    rgb = np.zeros((32, 32, 3), np.uint8)
    for i in range(3):  # the owner got frames 0-2 before anyone watched
        audience.frame(OutFrame(pts=i * 5625, idx=i, segment=0, action_seq=-1, disc=False, generation=0, rgb=rgb))

    async def run() -> None:
        fmp4 = Member(viewer(), "fmp4")
        audience.join(fmp4, SharedPacker(Fmp4Packer(32, 32, 16), None, audience.deliver_to("fmp4")))
        got = await fmp4.next()
        assert isinstance(got, Packed) and (got.idx, got.frames, got.key) == (2, 1, True)
        feed = audience.join_rtc(Member(viewer(), "webrtc"), max_frames=30)
        assert [f.idx for f in feed.items] == [2]  # the shared encode's first frame, a key frame by nature
        again = audience.join_rtc(Member(viewer(), "webrtc"), max_frames=30)
        assert again is feed and [f.idx for f in feed.items] == [2]  # a later viewer: no frame twice

    asyncio.run(run())
