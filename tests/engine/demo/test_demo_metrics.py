"""The evaluation's frame metrics measure what they claim on frames with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from engine.demo.metrics import direction_correct, frame_motion, phase_shift, psnr, sharpness, ssim


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


def test_frame_motion_reports_the_camera_motion_per_pair() -> None:
    f0 = _texture(1)
    frames = np.stack([f0, _camera(f0, 0, 3), _camera(f0, 2, 3)])
    assert frame_motion(frames).tolist() == [[0, 3], [2, 0]]
    assert frame_motion(frames[:1]).shape == (0, 2)  # one frame: no pairs


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
