"""The numbers of the long-play evaluation, from frames already generated (no engine here)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from demo.image_stats import (
    avatar_count,
    avatar_visible,
    colour_histogram,
    histogram_distance,
    self_variation_bound,
    spectral_peak,
    texture_histogram,
)
from demo.metrics import ThemeClassifier, direction_correct, frame_motion
from demo.script import PlayScript

__all__ = [
    "against",
    "distribution_report",
    "image_report",
    "probe_accuracy",
    "seconds_of",
    "spectral_by_second",
    "spectral_report",
    "theme_report",
]


def probe_accuracy(frames: np.ndarray, direction: tuple[int, int]) -> float:
    """Share of consecutive frame pairs whose camera motion is within 45 degrees of ``direction``."""
    return float(direction_correct(frame_motion(frames), direction).mean())


def seconds_of(frames: np.ndarray, fps: int) -> list[np.ndarray]:
    return [frames[s:s + fps] for s in range(0, len(frames) - fps + 1, fps)]


def distribution_report(model_hists: list[np.ndarray], truth_hists: list[np.ndarray],
                        themes: list[str]) -> dict[str, object]:
    """Per second: the model's histogram distance to the truth's same second, against the bound
    stated from the truth's own seconds (``self_variation_bound``)."""
    bound = self_variation_bound(truth_hists, themes)
    distances = [histogram_distance(m, t) for m, t in zip(model_hists, truth_hists, strict=True)]
    return {
        "bound": bound,
        "distance_by_second": [round(d, 4) for d in distances],
        "median_distance": float(np.median(distances)),
        "worst_distance": float(max(distances)),
        "within_bound_share": float(np.mean(np.asarray(distances) <= bound)),
    }


def spectral_by_second(seconds: list[np.ndarray]) -> list[float]:
    """The median ``spectral_peak`` of each second's frames."""
    return [float(np.median([spectral_peak(f) for f in second])) for second in seconds]


def spectral_report(model: list[np.ndarray], truth: list[np.ndarray], bound: float | None = None) -> dict[str, object]:
    """Per second, the median spectral peak of its frames; the bound is the truth's largest second
    unless given (the long play gives the largest second of the truth seen through the autoencoder)."""
    m, t = spectral_by_second(model), spectral_by_second(truth)
    bound = max(t) if bound is None else bound
    first = max(1, min(5, len(m)))
    return {
        "bound": bound,
        "truth_worst": max(t),
        "model_by_second": [round(v, 2) for v in m],
        "truth_by_second": [round(v, 2) for v in t],
        "model_worst": max(m),
        "within_bound_share": float(np.mean(np.asarray(m) <= bound)),
        # the rise of the strongest peak over the first seconds' level (a black-box check of a player's minute)
        "model_worst_over_first_seconds": max(m) / max(float(np.mean(m[:first])), 1e-12),
        "truth_worst_over_first_seconds": max(t) / max(float(np.mean(t[:first])), 1e-12),
    }


def image_report(model: np.ndarray, truth: np.ndarray, frame_themes: list[str], fps: int,
                 spectral_bound: float | None = None) -> dict[str, dict[str, Any]]:
    """Avatar, colour, texture and periodic-collapse statistics of the generated frames."""
    m_sec, t_sec = seconds_of(model, fps), seconds_of(truth, fps)
    themes = [frame_themes[(i + 1) * fps - 1] for i in range(len(t_sec))]
    model_seen, truth_seen = avatar_visible(model), avatar_visible(truth)
    per_second_seen = [float(avatar_visible(s).mean()) for s in m_sec]
    model_discs, truth_discs = avatar_count(model), avatar_count(truth)
    several_by_second = [float((d >= 2).mean()) for d in seconds_of(model_discs, fps)]
    return {
        "avatar": {
            "model_share": float(model_seen.mean()),
            "truth_share": float(truth_seen.mean()),  # the detector's check: ~1.0
            "model_by_second": [round(v, 3) for v in per_second_seen],
            "model_seconds_all_visible": int(sum(v == 1.0 for v in per_second_seen)),
            "first_missing_second": next((i for i, v in enumerate(per_second_seen) if v < 1.0), None),
            # frames showing two or more avatar-like discs (a doubled avatar; the centre test alone
            # cannot see it): the truth's share is the counter's false finds, ~0
            "model_several_share": float((model_discs >= 2).mean()),
            "truth_several_share": float((truth_discs >= 2).mean()),
            "model_seconds_with_several": int(sum(v > 0 for v in several_by_second)),
            "seconds": len(m_sec),
        },
        "colour": distribution_report([colour_histogram(s) for s in m_sec], [colour_histogram(s) for s in t_sec],
                                      themes),
        "texture": distribution_report([texture_histogram(s) for s in m_sec], [texture_histogram(s) for s in t_sec],
                                       themes),
        "spectral": spectral_report(m_sec, t_sec, spectral_bound),
    }


def theme_report(model: np.ndarray, classifier: ThemeClassifier, script: PlayScript, context_chunks: int,
                 theme_chunks: int, fpc: int) -> dict[str, Any]:
    """Classifier accuracy over the ``theme_chunks`` chunks after each prompt change, and overall; for
    each change, the themes its missed frames were read as (``misread_as``: theme -> frames)."""
    predicted = classifier.predict(model)
    wanted = [script.theme_of_chunk(k) for k in range(context_chunks, len(script.prompts)) for _ in range(fpc)]
    hits = np.array([p == w for p, w in zip(predicted, wanted, strict=True)])
    after: list[float] = []
    by_change = []
    for change in script.changes:
        if change < context_chunks:
            continue
        lo = (change - context_chunks) * fpc
        part = hits[lo:lo + theme_chunks * fpc]
        after.extend(part.tolist())
        misread = Counter(read for read, hit in zip(predicted[lo:lo + theme_chunks * fpc], part, strict=True)
                          if not hit)
        by_change.append({"chunk": change, "theme": script.theme_of_chunk(change), "accuracy": float(part.mean()),
                          "misread_as": dict(sorted(misread.items()))})
    return {
        "after_change": float(np.mean(after)) if after else float("nan"),
        "by_change": by_change,
        "all_frames": float(hits.mean()),
    }


def against(targets: dict[str, float], measured: dict[str, float]) -> dict[str, dict[str, Any]]:
    """Each measured number beside its target (all targets are lower bounds) and whether it is met."""
    return {name: {"target": targets[name], "measured": value, "met": value >= targets[name]}
            for name, value in measured.items()}
