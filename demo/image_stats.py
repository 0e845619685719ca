"""Image statistics for long play: is the avatar there, do colours and texture stay those of the
world, has the picture collapsed into a periodic grid or stripes.

All take uint8 RGB frames (..., H, W, 3) as numpy arrays. Distances between two sets of frames
are total-variation distances between pooled, normalised histograms (0: the same distribution,
1: disjoint). The bounds they are held to come from the true world's own variation
(``self_variation_bound``), never from a fixed number.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "AVATAR_RED",
    "AvatarShape",
    "avatar_count",
    "avatar_map",
    "avatar_visible",
    "colour_histogram",
    "histogram_distance",
    "self_variation_bound",
    "spectral_peak",
    "texture_histogram",
]

AVATAR_RED = (242.0, 77.0, 51.0)  # the avatar's body colour (demo/world.py render), 0..255


@dataclass(frozen=True)
class AvatarShape:
    """Where and how the detector looks for the avatar: a red disc centred on the frame, ringed by a
    darker outline. Radii in pixels (the world draws a body of 4.5 px, an outline to 5.7 px).
    Calibrated on the true world and on its frames through the demo autoencoder (which blurs the
    outline into bright ground): see tests/demo/test_demo_image_stats.py."""

    core_radius: float = 3.5  # inside the body
    ring: tuple[float, float] = (4.6, 6.2)  # the outline
    outside: tuple[float, float] = (7.5, 10.0)  # the ground around it
    colour_tolerance: float = 90.0  # RGB distance (0..255) from AVATAR_RED that still counts as red
    core_share: float = 0.45  # share of core pixels that must be red (the white nose covers up to ~30%)
    darker: float = 20.0  # grey levels the outline must sit under the red, or under the ground around it
    ring_red_share: float = 0.4  # ... in the latter case with at most this share of red in the outline
    # counting discs over the whole frame (avatar_count): the outline's test held by each quarter of it,
    # with this multiple of ``darker`` (autumn's crowns are shaded on one side only), and discs this
    # many px apart counted apart. Measured (2026-12-07) on 300 autumn places drawn without the avatar:
    # no false find, 1 through the demo autoencoder (18 at 1.0); on 96 frames of each theme through
    # the autoencoder one disc in 94-100% of frames, except desert (66 of 96 one, 28 none, 2 two: its
    # small red rocks, blurred)
    scan_all_round: float = 1.25
    scan_separation: float = 9.0


def _rings(h: int, w: int) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w]
    return np.sqrt((yy - h // 2) ** 2 + (xx - w // 2) ** 2)  # type: ignore[no-any-return]


def avatar_visible(frames: np.ndarray, shape: AvatarShape | None = None) -> np.ndarray:
    """(N,) bool per frame: the avatar is at the centre. Its core must be red (at least ``core_share``
    of it within ``colour_tolerance`` of the avatar's red) and ringed by an outline that is darker
    than that red, or -- where the outline is blurred into bright ground -- darker than the ground
    around it and itself not red. A red tree crown (autumn) fails both: its rim is as red and as
    bright as its middle."""
    s = shape or AvatarShape()
    f = frames.reshape(-1, *frames.shape[-3:])
    h, w, reach = f.shape[1], f.shape[2], int(np.ceil(s.outside[1]))
    f = f[:, h // 2 - reach:h // 2 + reach + 1, w // 2 - reach:w // 2 + reach + 1].astype(np.float64)  # the centre
    dist = _rings(f.shape[1], f.shape[2])
    core, ring = dist <= s.core_radius, (dist >= s.ring[0]) & (dist <= s.ring[1])
    outside = (dist >= s.outside[0]) & (dist <= s.outside[1])
    red = np.linalg.norm(f - np.array(AVATAR_RED), axis=-1) <= s.colour_tolerance  # (N, H, W)
    grey = f @ np.array([0.299, 0.587, 0.114])
    core_red = red[:, core]
    red_grey = np.where(core_red, grey[:, core], 0.0).sum(axis=1) / np.maximum(core_red.sum(axis=1), 1)
    ring_grey = grey[:, ring].mean(axis=1)
    under_red = ring_grey <= red_grey - s.darker
    under_ground = (ring_grey <= grey[:, outside].mean(axis=1) - s.darker) & (red[:, ring].mean(axis=1) <= s.ring_red_share)
    return (core_red.mean(axis=1) >= s.core_share) & (under_red | under_ground)  # type: ignore[no-any-return]


def _correlate_valid(maps: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """(N, H, W) maps correlated with a (k, k) kernel over the positions where it fits whole:
    (N, H - k + 1, W - k + 1), entry [i, j] the sum over the kernel placed with its corner at (i, j)."""
    h, w = maps.shape[1:]
    k = kernel.shape[0]
    flipped = np.zeros((h, w))
    flipped[:k, :k] = kernel[::-1, ::-1]
    full = np.fft.irfft2(np.fft.rfft2(maps) * np.fft.rfft2(flipped)[None], s=(h, w))
    return full[:, k - 1:, k - 1:]  # type: ignore[no-any-return]


def avatar_map(frames: np.ndarray, shape: AvatarShape | None = None, all_round: float = 0.0) -> np.ndarray:
    """(N, H, W) bool: the avatar test of ``avatar_visible`` with the pattern centred on every pixel
    instead of the frame's centre (False where the pattern does not fit inside the frame). At the
    centre, with ``all_round`` 0, it is ``avatar_visible`` itself; ``all_round`` > 0 asks the outline's
    test of each quarter of the outline as well, with ``all_round`` times ``darker``. The sums come
    by FFT correlation; counts of red pixels are whole numbers and are rounded back to them."""
    s = shape or AvatarShape()
    f = frames.reshape(-1, *frames.shape[-3:]).astype(np.float64)
    n, h, w = f.shape[:3]
    reach = int(np.ceil(s.outside[1]))
    dist = _rings(2 * reach + 1, 2 * reach + 1)
    core = (dist <= s.core_radius).astype(np.float64)
    ring = ((dist >= s.ring[0]) & (dist <= s.ring[1])).astype(np.float64)
    outside = ((dist >= s.outside[0]) & (dist <= s.outside[1])).astype(np.float64)
    yy, xx = np.mgrid[-reach:reach + 1, -reach:reach + 1]
    angle = np.arctan2(yy, xx)
    sides = [(angle >= a) & (angle < a + np.pi / 2) for a in (-np.pi, -np.pi / 2, 0.0, np.pi / 2)]
    quarters = [(ring * side, outside * side) for side in sides]
    out = np.zeros((n, h, w), dtype=bool)
    for start in range(0, n, 64):  # bounded memory: 64 frames of float64 maps at a time
        part = f[start:start + 64]
        red = (np.linalg.norm(part - np.array(AVATAR_RED), axis=-1) <= s.colour_tolerance).astype(np.float64)
        grey = part @ np.array([0.299, 0.587, 0.114])
        core_red = np.rint(_correlate_valid(red, core))
        red_grey = _correlate_valid(red * grey, core) / np.maximum(core_red, 1)
        ring_grey = _correlate_valid(grey, ring) / ring.sum()
        outside_grey = _correlate_valid(grey, outside) / outside.sum()
        ring_red = np.rint(_correlate_valid(red, ring)) / ring.sum()
        under_red = ring_grey <= red_grey - s.darker
        under_ground = (ring_grey <= outside_grey - s.darker) & (ring_red <= s.ring_red_share)
        found = (core_red / core.sum() >= s.core_share) & (under_red | under_ground)
        if all_round:  # the outline's test held by every quarter of it: a crown's shadow darkens one side
            for quarter, beyond in quarters:
                q_grey = _correlate_valid(grey, quarter) / quarter.sum()
                q_ground = _correlate_valid(grey, beyond) / beyond.sum()
                q_red = np.rint(_correlate_valid(red, quarter)) / quarter.sum()
                found &= ((q_grey <= red_grey - s.darker * all_round)
                          | ((q_grey <= q_ground - s.darker * all_round) & (q_red <= s.ring_red_share)))
        out[start:start + 64, reach:h - reach, reach:w - reach] = found
    return out


def avatar_count(frames: np.ndarray, shape: AvatarShape | None = None) -> np.ndarray:
    """(N,) int per frame: how many avatar-like discs it shows -- the centre's and any other, the
    doubled avatar a drifting model draws beside or instead of the true one. Scans with
    ``avatar_map`` under the all-round outline test (``AvatarShape.scan_all_round``); the test fires
    at a few neighbouring pixels around one disc, so positions closer than ``scan_separation`` to a
    disc's first-found position count as that disc (two touching avatars sit 11-12 px apart)."""
    s = shape or AvatarShape()
    found = avatar_map(frames, s, all_round=s.scan_all_round)
    counts = np.zeros(len(found), dtype=np.int64)
    for i in np.nonzero(found.any(axis=(1, 2)))[0]:
        discs: list[tuple[int, int]] = []
        for y, x in np.argwhere(found[i]).tolist():
            if all((y - dy) ** 2 + (x - dx) ** 2 >= s.scan_separation ** 2 for dy, dx in discs):
                discs.append((y, x))
        counts[i] = len(discs)
    return counts


def colour_histogram(frames: np.ndarray, bins: int = 8) -> np.ndarray:
    """Joint RGB histogram (bins^3,) of all pixels of ``frames``, normalised to sum 1."""
    q = (frames.reshape(-1, 3).astype(np.int64) * bins) // 256
    index = (q[:, 0] * bins + q[:, 1]) * bins + q[:, 2]
    counts = np.bincount(index, minlength=bins**3).astype(np.float64)
    return counts / counts.sum()  # type: ignore[no-any-return]


_PATCH = 8  # px: the texture statistics' patch
_STD_EDGES = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 11.0, 15.0, 20.0, 27.0, 36.0, 48.0, np.inf])
_ORIENTATIONS = 8


def texture_histogram(frames: np.ndarray) -> np.ndarray:
    """Patch texture of ``frames``, normalised: the histogram of the grey standard deviation of every
    8x8 patch (how much detail, log-spaced bins: blur moves it left, noise right), followed by the
    histogram of gradient orientation weighted by gradient magnitude (8 bins over 180 degrees:
    stripes pile it into one bin). Each half sums to 0.5."""
    g = frames.reshape(-1, *frames.shape[-3:]).astype(np.float64) @ np.array([0.299, 0.587, 0.114])
    n, h, w = g.shape
    patches = g[:, : h - h % _PATCH, : w - w % _PATCH].reshape(n, h // _PATCH, _PATCH, w // _PATCH, _PATCH)
    std = patches.std(axis=(2, 4)).ravel()
    std_hist = np.histogram(std, bins=_STD_EDGES)[0].astype(np.float64)
    gy, gx = g[:, 2:, 1:-1] - g[:, :-2, 1:-1], g[:, 1:-1, 2:] - g[:, 1:-1, :-2]
    magnitude = np.hypot(gy, gx).ravel()
    angle = (np.arctan2(gy, gx).ravel() % np.pi) / np.pi  # [0, 1)
    orient = np.bincount(np.minimum((angle * _ORIENTATIONS).astype(np.int64), _ORIENTATIONS - 1),
                         weights=magnitude, minlength=_ORIENTATIONS)
    return np.concatenate([0.5 * std_hist / max(std_hist.sum(), 1e-12),  # type: ignore[no-any-return]
                           0.5 * orient / max(orient.sum(), 1e-12)])


def histogram_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Total variation between two normalised histograms: half the L1 distance, in [0, 1]."""
    return float(0.5 * np.abs(a - b).sum())


def spectral_peak(frame: np.ndarray, min_cycles: int = 4, max_cycles: int = 28) -> float:
    """How strongly single spatial frequencies stand out of a frame: the largest ratio of the power of
    one frequency of its windowed grey spectrum to the median power of all frequencies of the same
    radius, over radii of ``min_cycles`` to ``max_cycles`` whole cycles per frame (periods of 4.6 to
    32 px on 128 px). Dividing by the ring's median takes out the falling 1/f slope of natural
    images: a natural scene scores by how much any one frequency beats its neighbours of equal
    scale (10-30 here), a periodic grid or stripes far higher (hundreds to tens of thousands). The
    broad layout of land and water lies below the band; above it lies the demo decoder's own fine
    pattern (half its 8 px latent cell, 32 cycles), which would otherwise score every decoded frame
    in the hundreds."""
    g = frame.astype(np.float64) @ np.array([0.299, 0.587, 0.114])
    g = g - g.mean()
    h, w = g.shape
    power = np.abs(np.fft.fft2(g * np.outer(np.hanning(h), np.hanning(w)))) ** 2
    fy, fx = np.fft.fftfreq(h) * h, np.fft.fftfreq(w) * w
    radius = np.rint(np.hypot(fy[:, None], fx[None, :])).astype(np.int64)
    best = 0.0
    for r in range(min_cycles, min(max_cycles, min(h, w) // 2) + 1):
        ring = power[radius == r]
        best = max(best, float(ring.max() / max(float(np.median(ring)), 1e-12)))
    return best


def self_variation_bound(per_second: list[np.ndarray], themes: list[str], max_gap: int = 10,
                         quantile: float = 0.95) -> float:
    """The bound a model's per-second distance to the truth is held to: the ``quantile`` of the true
    world's distances between its own seconds s and s' with 1 <= |s - s'| <= ``max_gap`` under the
    same theme. Seconds apart, the view shows other ground of the same world; a model that makes up
    plausible ground of its own should sit no further from the truth than that."""
    values = [histogram_distance(per_second[i], per_second[j])
              for i in range(len(per_second)) for j in range(i + 1, min(len(per_second), i + max_gap + 1))
              if themes[i] == themes[j]]
    if not values:
        raise ValueError("need at least two seconds under one theme to state a bound")
    return float(np.quantile(values, quantile))
