"""The evaluation's frame metrics measure what they claim on frames with known answers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from demo.metrics import (
    MOTION_RADIUS,
    block_shift,
    direction_correct,
    frame_motion,
    motion_ratios,
    phase_shift,
    psnr,
    sharpness,
    ssim,
    still_fraction,
)


def _texture(seed: int = 0, size: int = 128) -> np.ndarray:
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (size // 4, size // 4, 3))
    return np.kron(small, np.ones((4, 4, 1))).astype(np.uint8)  # blocks: a structured, non-periodic picture


def _camera(frame: np.ndarray, dy: int, dx: int) -> np.ndarray:
    """The view after the camera moved by (dy, dx): the content moves the other way."""
    return np.roll(frame, shift=(-dy, -dx), axis=(0, 1))


@pytest.mark.parametrize(("dy", "dx"), [(0, 4), (-3, 0), (5, -2), (0, 0)])
def test_phase_correlation_finds_the_exact_integer_shift(dy: int, dx: int) -> None:
    before = _texture()
    assert phase_shift(before, _camera(before, dy, dx)) == (-dy, -dx)


@pytest.mark.parametrize(("dy", "dx"), [(0, 4), (-3, 0), (5, -2), (0, 0), (-6, 6)])
def test_block_matching_finds_the_exact_integer_shift(dy: int, dx: int) -> None:
    before = _texture()
    assert block_shift(before, _camera(before, dy, dx)) == (-dy, -dx)


def _smooth(seed: int = 0, size: int = 128) -> np.ndarray:
    """A smooth picture (bilinear from a 16x16 random grid), like a small decoder's output."""
    small = torch.from_numpy(np.random.default_rng(seed).uniform(40, 215, (1, 3, 16, 16)))
    return F.interpolate(small, size=(size, size), mode="bilinear", align_corners=False)[0].permute(1, 2, 0).numpy()


def test_a_faint_static_pattern_hides_motion_from_phase_correlation_not_from_block_matching() -> None:
    grid = np.zeros((128, 128, 3))
    grid[::8] = 6.0  # a decoder's fixed pattern: 6 grey levels every 8 px, in the same place every frame
    grid[:, ::8] = 6.0
    picture = _smooth()
    for dy, dx in [(0, 3), (-2, 0), (2, 2)]:
        before = (picture + grid).astype(np.uint8)
        after = (_camera(picture, dy, dx) + grid).astype(np.uint8)
        assert block_shift(before, after) == (-dy, -dx)
        assert phase_shift(before, after) == (0, 0)  # the whitened spectrum locks onto the grid


def test_a_flat_picture_shows_no_motion() -> None:
    flat = np.full((64, 64, 3), 90, dtype=np.uint8)  # every shift fits equally: ties go to (0, 0)
    assert block_shift(flat, flat.copy()) == (0, 0)


def test_block_matching_looks_no_further_than_its_radius() -> None:
    before = _texture(2)
    far = MOTION_RADIUS + 2
    assert block_shift(before, _camera(before, 0, far), radius=far) == (0, -far)
    assert block_shift(before, _camera(before, 0, far)) != (0, -far)


@pytest.mark.parametrize("estimator", [block_shift, phase_shift])
def test_frame_motion_reports_the_camera_motion_per_pair(estimator: object) -> None:
    f0 = _texture(1)
    frames = np.stack([f0, _camera(f0, 0, 3), _camera(f0, 2, 3)])
    assert frame_motion(frames, estimator).tolist() == [[0, 3], [2, 0]]  # type: ignore[arg-type]
    assert frame_motion(frames[:1], estimator).shape == (0, 2)  # type: ignore[arg-type]  # one frame: no pairs


def test_direction_needs_a_pixel_of_motion_within_45_degrees() -> None:
    motion = np.array([[0, 4], [0, 0], [3, 3], [4, -1], [-1, 4], [0, -4]])
    assert direction_correct(motion, (0, 1)).tolist() == [True, False, True, False, True, False]
    assert direction_correct(np.zeros((0, 2)), (1, 0)).shape == (0,)


def test_psnr_ssim_and_sharpness_on_known_pictures() -> None:
    a = _texture(2)
    assert psnr(a, a) == float("inf")
    off_by_one = np.clip(a.astype(int) + 1, 0, 255).astype(np.uint8)
    mse = float(np.mean((off_by_one.astype(float) - a) ** 2))
    assert psnr(a, off_by_one) == pytest.approx(10 * np.log10(255.0**2 / mse))
    assert ssim(a, a) == pytest.approx(1.0, abs=1e-6)
    flat = np.full_like(a, 128)
    assert sharpness(flat) == pytest.approx(0.0, abs=1e-9) and sharpness(a) > 10.0


def test_motion_ratio_is_the_models_change_over_the_truths_per_span() -> None:
    truth = np.stack([_camera(_texture(3), 0, 2 * i) for i in range(9)])  # 8 pairs, all moving
    frozen = np.repeat(truth[:1], 9, axis=0)
    half = truth.copy()
    half[5:] = truth[4]  # moves for 4 pairs, then stands still
    assert motion_ratios(truth, truth, 4) == [1.0, 1.0]
    assert motion_ratios(frozen, truth, 4) == [0.0, 0.0]
    assert motion_ratios(half, truth, 4) == [1.0, 0.0]
    assert still_fraction(motion_ratios(half, truth, 4)) == 0.5
    assert still_fraction([0.3, 0.24, 1.2, 0.25]) == 0.25  # under 0.25 only
