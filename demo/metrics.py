"""Frame metrics for evaluating the demo model against its world: PSNR, SSIM, motion (by block
matching, and by phase correlation for comparison), a nearest-centroid theme classifier,
sharpness and collapse statistics.

Why block matching is the motion estimate: phase correlation whitens the spectrum, so on
decoded frames (smooth, with faint static decoder patterns) the static patterns outweigh the
moving content and it reports "no motion". Measured on the demo autoencoder's reconstructions
of the TRUE frames of the eight direction rollouts: phase correlation 0.38 direction accuracy,
block matching 1.00 (both 1.00 on the true frames themselves).

All take uint8 RGB frames (..., H, W, 3) as numpy arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

__all__ = [
    "MOTION_RADIUS",
    "STILL_RATIO",
    "MotionEstimator",
    "ThemeClassifier",
    "block_shift",
    "direction_correct",
    "frame_motion",
    "motion_ratios",
    "phase_shift",
    "psnr",
    "sharpness",
    "ssim",
    "still_fraction",
    "theme_features",
]

_AVATAR_HALF = 8  # the avatar sits in the centre 16x16 px; motion estimates ignore it
MOTION_RADIUS = 6  # px: the largest per-axis shift block matching considers (the world pans <= 5 px a frame)

MotionEstimator = Callable[[np.ndarray, np.ndarray], tuple[int, int]]


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    """Peak signal-to-noise ratio in dB over all pixels of two uint8 arrays of one shape."""
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0 else 10.0 * float(np.log10(255.0**2 / mse))


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """Mean SSIM (11x11 Gaussian window, sigma 1.5) over frames and channels."""
    x = torch.from_numpy(a.reshape(-1, *a.shape[-3:])).permute(0, 3, 1, 2).float() / 255.0
    y = torch.from_numpy(b.reshape(-1, *b.shape[-3:])).permute(0, 3, 1, 2).float() / 255.0
    coords = torch.arange(11, dtype=torch.float32) - 5
    g = torch.exp(-(coords**2) / (2 * 1.5**2))
    g = g / g.sum()
    window = (g[:, None] * g[None, :]).expand(3, 1, 11, 11).contiguous()

    def blur(t: torch.Tensor) -> torch.Tensor:
        return F.conv2d(t, window, groups=3)

    mx, my = blur(x), blur(y)
    vx, vy, cxy = blur(x * x) - mx * mx, blur(y * y) - my * my, blur(x * y) - mx * my
    c1, c2 = 0.01**2, 0.03**2
    s = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
    return float(s.mean())


def _luma(frames: np.ndarray) -> np.ndarray:
    """(..., H, W, 3) uint8 -> (..., H, W) float64 grey (Rec. 601 weights)."""
    return frames.astype(np.float64) @ np.array([0.299, 0.587, 0.114])  # type: ignore[no-any-return]


def _avatar(h: int, w: int) -> tuple[slice, slice]:
    """Rows and columns of the avatar at the centre of an h x w frame (motion estimates ignore it)."""
    return (slice(h // 2 - _AVATAR_HALF, h // 2 + _AVATAR_HALF), slice(w // 2 - _AVATAR_HALF, w // 2 + _AVATAR_HALF))


def _grey(frame: np.ndarray) -> np.ndarray:
    g = _luma(frame)
    g[_avatar(*g.shape)] = g.mean()
    return g - g.mean()


def phase_shift(before: np.ndarray, after: np.ndarray) -> tuple[int, int]:
    """Integer (dy, dx) with after[y, x] ~ before[y - dy, x - dx]: how far the content moved."""
    a, b = _grey(before), _grey(after)
    h, w = a.shape
    window = np.outer(np.hanning(h), np.hanning(w))
    fa, fb = np.fft.fft2(a * window), np.fft.fft2(b * window)
    cross = fb * np.conj(fa)
    corr = np.fft.ifft2(cross / (np.abs(cross) + 1e-9)).real
    dy, dx = np.unravel_index(int(np.argmax(corr)), corr.shape)
    return (int(dy) - h if dy > h // 2 else int(dy)), (int(dx) - w if dx > w // 2 else int(dx))


def _candidate_shifts(radius: int) -> list[tuple[int, int]]:
    """Every (dy, dx) within ``radius`` per axis, nearest to (0, 0) first (ties go to less motion)."""
    shifts = [(dy, dx) for dy in range(-radius, radius + 1) for dx in range(-radius, radius + 1)]
    return sorted(shifts, key=lambda s: (s[0] ** 2 + s[1] ** 2, s))


def block_shift(before: np.ndarray, after: np.ndarray, radius: int = MOTION_RADIUS) -> tuple[int, int]:
    """Integer (dy, dx) with after[y, x] ~ before[y - dy, x - dx], |dy|, |dx| <= ``radius``: the shift
    with the least mean squared grey difference over the frame less a ``radius`` border and the
    avatar. Exact ties (flat pictures) go to the smallest shift, so they never count as motion."""
    a, b = _luma(before), _luma(after)
    h, w = a.shape
    r = radius
    target = b[r:h - r, r:w - r]
    keep = np.ones((h, w), dtype=bool)
    keep[_avatar(h, w)] = False
    keep = keep[r:h - r, r:w - r]
    best, best_err = (0, 0), np.inf
    for dy, dx in _candidate_shifts(radius):
        moved = a[r - dy:h - r - dy, r - dx:w - r - dx]
        err = float(np.mean((moved - target)[keep] ** 2))
        if err < best_err - 1e-9:
            best, best_err = (dy, dx), err
    return best


def frame_motion(frames: np.ndarray, estimator: MotionEstimator = block_shift) -> np.ndarray:
    """(T-1, 2) camera motion (dy, dx) per consecutive pair: the opposite of the content shift."""
    shifts = [[-s for s in estimator(frames[i], frames[i + 1])] for i in range(len(frames) - 1)]
    return np.array(shifts, dtype=np.int64).reshape(-1, 2)


def direction_correct(motion: np.ndarray, direction: tuple[float, float], min_pixels: float = 1.0) -> np.ndarray:
    """Per row of (N, 2) motions: moved at least ``min_pixels`` and within 45 degrees of ``direction``."""
    d = np.asarray(direction, dtype=np.float64)
    d = d / np.linalg.norm(d)
    length = np.linalg.norm(motion, axis=1)
    cos = (motion @ d) / np.maximum(length, 1e-9)
    return (length >= min_pixels) & (cos > np.cos(np.pi / 4) - 1e-9)


STILL_RATIO = 0.25  # a second is still when the model's picture changes < this x the ground truth's


def motion_ratios(frames: np.ndarray, truth: np.ndarray, per: int) -> list[float]:
    """Per span of ``per`` frame pairs (a second at the frame rate): the model's mean absolute
    inter-frame change over the ground truth's (1: as lively as the world; 0: a frozen picture)."""
    change = np.abs(np.diff(frames.astype(np.float64), axis=0)).mean(axis=(1, 2, 3))
    truth_change = np.abs(np.diff(truth.astype(np.float64), axis=0)).mean(axis=(1, 2, 3))
    return [float(change[s:s + per].mean() / max(truth_change[s:s + per].mean(), 1e-9))
            for s in range(0, len(change), per)]


def still_fraction(ratios: list[float]) -> float:
    """Share of the spans whose motion ratio is under ``STILL_RATIO``."""
    return float(np.mean(np.asarray(ratios) < STILL_RATIO))


def sharpness(frames: np.ndarray) -> float:
    """Mean absolute Laplacian of the grey image (0..255 scale): falls when frames blur."""
    g = _luma(frames)
    lap = 4 * g[..., 1:-1, 1:-1] - g[..., :-2, 1:-1] - g[..., 2:, 1:-1] - g[..., 1:-1, :-2] - g[..., 1:-1, 2:]
    return float(np.abs(lap).mean())


def theme_features(frames: np.ndarray) -> np.ndarray:
    """(N, 31) per frame: per-channel mean and std, 8-bin histograms, centre-vs-edge brightness."""
    f = frames.reshape(-1, *frames.shape[-3:]).astype(np.float64) / 255.0
    n, h, w, _ = f.shape
    mean = f.mean(axis=(1, 2))
    std = f.std(axis=(1, 2))
    hist = np.stack([np.stack([np.histogram(f[i, ..., c], bins=8, range=(0, 1))[0] for c in range(3)]).ravel()
                     for i in range(n)]) / (h * w)
    grey = f.mean(axis=3)
    centre = grey[:, h // 4: 3 * h // 4, w // 4: 3 * w // 4].mean(axis=(1, 2))
    edge = (grey.sum(axis=(1, 2)) - centre * (h * w / 4)) / (h * w * 3 / 4)
    return np.concatenate([mean, std, hist, (centre - edge)[:, None]], axis=1)


@dataclass
class ThemeClassifier:
    """Nearest centroid over standardised theme features."""

    names: tuple[str, ...]
    centroids: np.ndarray
    mean: np.ndarray
    scale: np.ndarray

    @classmethod
    def fit(cls, frames_by_theme: dict[str, np.ndarray]) -> ThemeClassifier:
        names = tuple(frames_by_theme)
        feats = {name: theme_features(frames) for name, frames in frames_by_theme.items()}
        everything = np.concatenate(list(feats.values()))
        mean, scale = everything.mean(axis=0), everything.std(axis=0) + 1e-6
        centroids = np.stack([((feats[n] - mean) / scale).mean(axis=0) for n in names])
        return cls(names, centroids, mean, scale)

    def predict(self, frames: np.ndarray) -> list[str]:
        z = (theme_features(frames) - self.mean) / self.scale
        dist = ((z[:, None, :] - self.centroids[None]) ** 2).sum(axis=2)
        return [self.names[i] for i in dist.argmin(axis=1)]
