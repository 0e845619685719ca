"""A session's picture watch (sessiond.session.picture): the served model's check of one frame per
second of media turns into `picture` messages to the viewer, one per change of verdict, with
hysteresis (two bad of the last three to degrade, three good in a row to recover)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import numpy as np

from engine.api import ChunkFrames
from protocols.messages import Picture
from sessiond.session.connection import Connection
from sessiond.session.picture import PictureMonitor
from tests.sessiond._factory import make_env, make_session


@dataclass(frozen=True)
class S:
    avatar: bool
    pattern: float
    bound: float = 40.0
    doubled: bool = False


GOOD, NO_AVATAR, PATTERN, DOUBLED = S(True, 20.0), S(False, 20.0), S(True, 900.0), S(True, 20.0, doubled=True)


def test_the_monitor_samples_one_frame_per_second_of_media() -> None:
    m = PictureMonitor(fps=16)
    assert m.due(8) is True  # the first chunk is sampled
    m.observe(GOOD)
    assert [m.due(8) for _ in range(4)] == [False, True, False, False]  # 16 frames later (one pending)
    m.observe(GOOD)
    assert m.due(8) is True


def test_two_bad_of_three_degrade_and_three_good_recover() -> None:
    m = PictureMonitor(fps=16)
    assert m.observe(GOOD) is None
    assert m.observe(PATTERN) is None  # one bad sample is not a verdict
    v = m.observe(NO_AVATAR)
    assert v is not None and v.ok is False and m.episodes == 1
    assert v.why == ("the avatar is gone from the centre; the picture has collapsed into a repeating pattern "
                     "(score 900, the world's own at most 40)")
    assert (v.avatar, v.pattern, v.bound) == (0.667, 900.0, 40.0)
    assert [m.observe(GOOD), m.observe(GOOD)] == [None, None]
    back = m.observe(GOOD)
    assert back is not None and back.ok is True and back.why is None and m.episodes == 1


def test_a_doubled_avatar_degrades_the_picture_and_says_so() -> None:
    m = PictureMonitor(fps=16)
    assert m.observe(DOUBLED) is None
    v = m.observe(DOUBLED)
    assert v is not None and v.ok is False
    assert v.why == "a second avatar has appeared"
    assert (v.avatar, v.pattern) == (1.0, 20.0)


def _push_chunk(session, index: int, n: int = 8) -> None:
    job = session.begin_job(0.0, 1.0)
    session.on_frames(job, ChunkFrames(index, np.zeros((n, 4, 4, 3), np.uint8)))
    session.on_job_done(job)


def test_a_session_tells_its_viewer_when_the_picture_degrades_and_recovers() -> None:
    samples = iter([GOOD, PATTERN, PATTERN, GOOD, GOOD, GOOD])
    checked: list[int] = []

    async def check(frame: np.ndarray) -> S:
        checked.append(int(frame.shape[0]))
        return next(samples)

    async def play() -> list[Picture]:
        env = make_env(check_picture=check)
        session = make_session(env=env)
        session.attach(Connection("raw"))
        for i in range(12):  # 12 chunks of 8 frames at 16 frames/s: 6 seconds, 6 samples
            _push_chunk(session, i)
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        out = []
        while session.out.control:
            item = session.out.control.popleft()
            if isinstance(item, Picture):
                out.append(item)
        assert env.metrics.picture_degraded._value.get() == 1
        return out

    pictures = asyncio.run(play())
    assert checked == [4] * 6
    assert [p.ok for p in pictures] == [False, True]
    assert pictures[0].pattern == 900.0 and pictures[0].why is not None and "repeating pattern" in pictures[0].why


def test_a_viewer_that_arrives_while_degraded_hears_it_at_once() -> None:
    async def check(frame: np.ndarray) -> S:
        return NO_AVATAR

    async def play() -> list[Picture]:
        session = make_session(env=make_env(check_picture=check))
        session.attach(Connection("raw"))
        for i in range(4):
            _push_chunk(session, i)
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        session.attach(Connection("raw"))  # a reconnect: the control queue starts afresh
        return [m for m in session.out.control if isinstance(m, Picture)]

    pictures = asyncio.run(play())
    assert len(pictures) == 1 and pictures[0].ok is False
    assert pictures[0].why == "the avatar is gone from the centre"


def test_without_a_check_nothing_is_sampled() -> None:
    session = make_session()
    assert session.picture is None
