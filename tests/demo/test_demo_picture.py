"""The demo model's frame check for served streams (demo.picture): a true world frame passes, a
frame without the avatar or one collapsed into stripes does not."""

from __future__ import annotations

import numpy as np
import torch

from demo.actions import frame_actions, random_play
from demo.picture import PATTERN_BOUND, check_frame
from demo.world import World, WorldParams

_NO_AVATAR = WorldParams(avatar_radius=0.0, avatar_outline=0.0, facing_radius=0.0)


def _frames(params: WorldParams | None = None) -> np.ndarray:
    actions = frame_actions(random_play(1, 8, torch.Generator().manual_seed(3)))
    world = World(900_123, "meadow") if params is None else World(900_123, "meadow", params)
    return world.rollout(actions)


def test_true_world_frames_pass() -> None:
    for frame in _frames():
        sample = check_frame(frame)
        assert sample.avatar is True
        assert sample.doubled is False
        assert sample.pattern < PATTERN_BOUND
        assert sample.bound == PATTERN_BOUND == 40.0


def test_a_frame_without_the_avatar_is_seen_as_such() -> None:
    assert [check_frame(f).avatar for f in _frames(_NO_AVATAR)] == [False] * 8


def test_a_second_avatar_beside_the_first_is_seen() -> None:
    yy, xx = np.mgrid[0:128, 0:128]
    disc = (yy - 64) ** 2 + (xx - 64) ** 2 <= 6.5 ** 2
    frames = _frames()
    frames[:, np.roll(disc, -13, axis=1)] = frames[:, disc]  # the avatar copied 13 px to its left
    assert [(check_frame(f).avatar, check_frame(f).doubled) for f in frames] == [(True, True)] * 8


def test_stripes_score_far_over_the_bound() -> None:
    x = np.arange(128)
    stripes = ((np.sin(2 * np.pi * 12 * x / 128) > 0) * 200 + 30).astype(np.uint8)
    frame = np.repeat(np.repeat(stripes[None, :, None], 128, axis=0), 3, axis=2)
    assert check_frame(frame).pattern > 10 * PATTERN_BOUND
