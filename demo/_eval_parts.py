"""The measurements of ``demo.eval``, one function per question asked of the model."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import numpy as np
import torch

from demo.actions import frame_actions, random_play
from demo.autoencoder import DemoEncoder
from demo.metrics import (
    MOTION_RADIUS,
    ThemeClassifier,
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
from demo.rollout import ContextChunk, encode_frames, open_with_context, run_chunks
from demo.terrain import Terrain
from demo.themes import THEME_NAMES
from demo.world import World, WorldParams
from engine.api import FrameAction
from engine.engine import Engine

__all__ = [
    "DIRECTIONS",
    "EvalParams",
    "Worlds",
    "autoencoder_quality",
    "fit_classifier",
    "long_rollouts",
    "motion_and_fidelity",
    "roundtrip",
    "sample_sheet",
    "streaming_speed",
    "theme_switches",
]

# name -> (keys held, camera direction (dy, dx))
DIRECTIONS: dict[str, tuple[tuple[str, ...], tuple[float, float]]] = {
    "up": (("w",), (-1, 0)), "down": (("s",), (1, 0)), "left": (("a",), (0, -1)), "right": (("d",), (0, 1)),
    "up-left": (("arrowup", "arrowleft"), (-1, -1)), "up-right": (("arrowup", "arrowright"), (-1, 1)),
    "down-left": (("arrowdown", "arrowleft"), (1, -1)), "down-right": (("arrowdown", "arrowright"), (1, 1)),
}


@dataclass(frozen=True)
class EvalParams:
    seed_base: int = 900_000  # far from the training seeds
    context_chunks: int = 2
    direction_chunks: int = 16  # 64 frames
    directions: tuple[str, ...] = tuple(DIRECTIONS)
    fidelity_chunks: int = 4  # PSNR/SSIM reported for this many chunks after the context
    theme_chunks: int = 4  # chunks generated after a prompt change
    theme_pairs: int = 30  # (from, to) pairs, all 30 ordered pairs of 6 themes by default
    long_sessions: int = 2
    drift_seconds: float = 30.0
    collapse_seconds: float = 60.0
    window_seconds: float = 5.0
    speed_chunks: int = 16
    max_sessions: int = 8  # sessions open at once (the engine's KV pool is sized for 16 on CPU)
    classifier_seeds: int = 3
    classifier_frames: int = 32


class Worlds:
    """Builds ground-truth worlds, making each seed's map once."""

    def __init__(self, params: WorldParams) -> None:
        self.params = params
        self._maps: dict[int, Terrain] = {}

    def make(self, seed: int, prompt: str) -> World:
        if seed not in self._maps:
            self._maps[seed] = World(seed, prompt, self.params).terrain
        return World(seed, prompt, self.params, terrain=self._maps[seed])


def _play(seed: int, frames: int) -> list[FrameAction]:
    return frame_actions(random_play(1, frames, torch.Generator().manual_seed(seed)))


def _chunks(frames: np.ndarray, actions: list[FrameAction], prompts: list[str], n: int) -> list[ContextChunk]:
    f = len(frames) // len(prompts)
    return [ContextChunk(frames[i * f:(i + 1) * f], actions[i * f:(i + 1) * f], prompts[i]) for i in range(n)]


def fit_classifier(p: EvalParams, worlds: Worlds) -> tuple[ThemeClassifier, float]:
    """A nearest-centroid theme classifier on ground-truth frames, and its accuracy on held-out seeds."""
    fit: dict[str, list[np.ndarray]] = {name: [] for name in THEME_NAMES}
    test: dict[str, list[np.ndarray]] = {name: [] for name in THEME_NAMES}
    for k in range(p.classifier_seeds + 1):
        seed = p.seed_base + 50_000 + k
        actions = _play(seed, p.classifier_frames)
        for name in THEME_NAMES:
            w = worlds.make(seed, name)
            (test if k == p.classifier_seeds else fit)[name].append(w.rollout(actions))
    classifier = ThemeClassifier.fit({n: np.concatenate(v) for n, v in fit.items()})
    hits = [np.mean([pred == n for pred in classifier.predict(np.concatenate(v))]) for n, v in test.items()]
    return classifier, float(np.mean(hits))


_DIRECTION_KINDS = ("model", "ground_truth", "autoencoder", "chunk_span", "model_phase", "autoencoder_phase")


def roundtrip(engine: Engine, encoder: DemoEncoder, frames: np.ndarray) -> np.ndarray:
    """``frames`` through the encoder and the engine's decoder (what a perfect DiT would show)."""
    z = encode_frames(encoder, frames)
    with torch.no_grad():
        recon, _ = engine.parts.decoder.decode(z[None].to(engine.device, engine.parts.dtype), [None])
    return recon[0].cpu().numpy()  # type: ignore[no-any-return]


def autoencoder_quality(encoder: DemoEncoder, engine: Engine, p: EvalParams, worlds: Worlds) -> dict[str, float]:
    """Reconstruction through the encoder and the engine's decoder: the ceiling for model PSNR."""
    seed = p.seed_base + 60_000
    frames = np.concatenate([worlds.make(seed, n).rollout(_play(seed, 8)) for n in THEME_NAMES])
    recon_np = roundtrip(engine, encoder, frames)
    return {"psnr_db": psnr(recon_np, frames), "ssim": ssim(recon_np, frames)}


def motion_and_fidelity(engine: Engine, encoder: DemoEncoder, p: EvalParams, worlds: Worlds) -> dict[str, object]:
    """Stand still for the ground-truth context, then hold each direction for 64 frames: direction-of-
    motion accuracy (model and ground truth) and PSNR/SSIM of the first chunks. Starting at rest
    means the motion has to come from the actions, not from momentum seen in the context."""
    fpc = engine.config.latent_frames_per_chunk
    gt: dict[str, np.ndarray] = {}
    model: dict[str, list[np.ndarray]] = {}
    for i, name in enumerate(p.directions):
        seed, prompt = p.seed_base + i, THEME_NAMES[i % len(THEME_NAMES)]
        actions = [FrameAction()] * (p.context_chunks * fpc) + [FrameAction(keys=DIRECTIONS[name][0])] * (
            p.direction_chunks * fpc)
        gt[name] = worlds.make(seed, prompt).rollout(actions)
        context = _chunks(gt[name][: p.context_chunks * fpc], actions, [prompt] * p.context_chunks, p.context_chunks)
        open_with_context(engine, f"dir-{name}", encoder, context, seed, prompt)
        model[name] = []
    for _ in range(p.direction_chunks):
        out = run_chunks(engine, {f"dir-{n}": [FrameAction(keys=DIRECTIONS[n][0])] * fpc for n in p.directions})
        for name in p.directions:
            model[name].append(out[f"dir-{name}"])
    fidelity = {"psnr_db": [], "ssim": []}  # type: ignore[var-annotated]
    accuracy: dict[str, dict[str, float]] = {kind: {} for kind in _DIRECTION_KINDS}

    def hits(motion: np.ndarray, name: str) -> float:
        return float(direction_correct(motion, DIRECTIONS[name][1]).mean())

    def travelled(motion: np.ndarray) -> float:
        return float(np.linalg.norm(motion, axis=1).sum())

    speed: dict[str, float] = {}
    span = functools.partial(block_shift, radius=MOTION_RADIUS * fpc)
    for name in p.directions:
        engine.close_session(f"dir-{name}")
        frames = np.concatenate(model[name])
        truth = gt[name][p.context_chunks * fpc:]
        recon = roundtrip(engine, encoder, truth)
        moved, true_moved = frame_motion(frames), frame_motion(truth)
        accuracy["model"][name] = hits(moved, name)
        accuracy["ground_truth"][name] = hits(true_moved, name)
        speed[name] = travelled(moved) / max(travelled(true_moved), 1e-9)
        accuracy["autoencoder"][name] = hits(frame_motion(recon), name)
        accuracy["chunk_span"][name] = hits(frame_motion(frames[::fpc], span), name)
        accuracy["model_phase"][name] = hits(frame_motion(frames, phase_shift), name)
        accuracy["autoencoder_phase"][name] = hits(frame_motion(recon, phase_shift), name)
        fidelity["psnr_db"].append([psnr(model[name][k], truth[k * fpc:(k + 1) * fpc])
                                    for k in range(min(p.fidelity_chunks, p.direction_chunks))])
        fidelity["ssim"].append([ssim(model[name][k], truth[k * fpc:(k + 1) * fpc])
                                 for k in range(min(p.fidelity_chunks, p.direction_chunks))])

    def mean(kind: str) -> float:
        return float(np.mean(list(accuracy[kind].values())))

    return {
        # motion by block matching (see demo.metrics for why not phase correlation)
        "direction_accuracy": mean("model"),
        "direction_accuracy_by_direction": accuracy["model"],
        "ground_truth_direction_accuracy": mean("ground_truth"),
        # how far the view travelled against the ground truth's travel (1 = true speed)
        "speed_ratio": float(np.mean(list(speed.values()))),
        "speed_ratio_by_direction": speed,
        # the ceiling the autoencoder leaves: the true frames encoded and decoded
        "autoencoder_direction_accuracy": mean("autoencoder"),
        # secondary: the same test on the motion between frames one chunk (fpc frames) apart, which
        # counts a model that moves the right way in jerks (some frames still, some jumping)
        "direction_accuracy_per_chunk_span": mean("chunk_span"),
        # the estimate of earlier reports, kept for comparison: phase correlation
        "direction_accuracy_phase_correlation": mean("model_phase"),
        "autoencoder_direction_accuracy_phase_correlation": mean("autoencoder_phase"),
        "frames_per_rollout": p.direction_chunks * fpc,
        "psnr_db_by_chunk": [float(v) for v in np.mean(fidelity["psnr_db"], axis=0)],
        "ssim_by_chunk": [float(v) for v in np.mean(fidelity["ssim"], axis=0)],
    }


def theme_switches(engine: Engine, encoder: DemoEncoder, classifier: ThemeClassifier, p: EvalParams,
                   worlds: Worlds) -> dict[str, object]:
    """Ground-truth context in theme A, then the prompt changes to B: how often the model's frames
    are classified as B, per chunk after the change. Pairs run in groups of ``max_sessions``."""
    fpc = engine.config.latent_frames_per_chunk
    pairs = [(a, b) for a in THEME_NAMES for b in THEME_NAMES if a != b][: p.theme_pairs]
    hits = np.zeros((len(pairs), p.theme_chunks))
    for first in range(0, len(pairs), p.max_sessions):
        group = range(first, min(len(pairs), first + p.max_sessions))
        plays = {}
        for i in group:
            a, b = pairs[i]
            seed = p.seed_base + 1_000 + i % len(THEME_NAMES)
            plays[i] = _play(seed + 10 * i, (p.context_chunks + p.theme_chunks) * fpc)
            frames = worlds.make(seed, a).rollout(plays[i][: p.context_chunks * fpc])
            context = _chunks(frames, plays[i], [a] * p.context_chunks, p.context_chunks)
            open_with_context(engine, f"theme-{i}", encoder, context, seed, b)
        for k in range(p.theme_chunks):
            start = (p.context_chunks + k) * fpc
            out = run_chunks(engine, {f"theme-{i}": plays[i][start:start + fpc] for i in group})
            for i in group:
                hits[i, k] = np.mean([pred == pairs[i][1] for pred in classifier.predict(out[f"theme-{i}"])])
        for i in group:
            engine.close_session(f"theme-{i}")
    return {"theme_accuracy": float(hits.mean()), "theme_accuracy_by_chunk": [float(v) for v in hits.mean(axis=0)],
            "pairs": len(pairs)}


def long_rollouts(engine: Engine, encoder: DemoEncoder, classifier: ThemeClassifier, p: EvalParams,
                  worlds: Worlds, strip: list[np.ndarray] | None = None) -> dict[str, object]:
    """Random play for ``collapse_seconds`` after ground-truth context: drift per window over the first
    ``drift_seconds`` and collapse statistics (spatial std, inter-frame change) over all of it.
    ``strip``: if given, receives per session a ground-truth row and a model row, one frame per
    ``window_seconds`` (uint8 (H, n * W, 3) each), for a picture of the whole minute."""
    fpc, fps = engine.config.latent_frames_per_chunk, engine.config.fps
    chunks = round(p.collapse_seconds * fps / fpc)
    themes = [THEME_NAMES[(3 * i) % len(THEME_NAMES)] for i in range(p.long_sessions)]
    plays, gts, out = [], [], {i: [] for i in range(p.long_sessions)}  # type: ignore[var-annotated]
    for i, theme in enumerate(themes):
        seed = p.seed_base + 2_000 + i
        plays.append(_play(seed, (p.context_chunks + chunks) * fpc))
        gts.append(worlds.make(seed, theme).rollout(plays[i]))
        context = _chunks(gts[i][: p.context_chunks * fpc], plays[i], [theme] * p.context_chunks, p.context_chunks)
        open_with_context(engine, f"long-{i}", encoder, context, seed, theme)
    for k in range(chunks):
        start = (p.context_chunks + k) * fpc
        res = run_chunks(engine, {f"long-{i}": plays[i][start:start + fpc] for i in range(p.long_sessions)})
        for i in range(p.long_sessions):
            out[i].append(res[f"long-{i}"])
    window = int(p.window_seconds * fps)
    drift: dict[str, list[float]] = {"psnr_db": [], "sharpness_ratio": [], "theme_accuracy": [], "mean_colour_l1": []}
    std_min: list[float] = []
    ratios: list[float] = []  # per second of each session: model inter-frame change / ground truth's
    for i, theme in enumerate(themes):
        engine.close_session(f"long-{i}")
        frames, truth = np.concatenate(out[i]), gts[i][p.context_chunks * fpc:]
        if strip is not None:
            picks = range(window - 1, len(frames), window)
            strip.extend(np.concatenate([source[j] for j in picks], axis=1) for source in (truth, frames))
        for w0 in range(0, int(p.drift_seconds * fps), window):
            f, t = frames[w0:w0 + window], truth[w0:w0 + window]
            drift["psnr_db"].append(psnr(f, t))
            drift["sharpness_ratio"].append(sharpness(f) / max(sharpness(t), 1e-9))
            drift["theme_accuracy"].append(float(np.mean([x == theme for x in classifier.predict(f)])))
            drift["mean_colour_l1"].append(float(np.abs(f.reshape(-1, 3).mean(0) - t.reshape(-1, 3).mean(0)).sum()))
        per_window_std = [float(frames[w0:w0 + fps].std(axis=(1, 2, 3)).min()) for w0 in range(0, len(frames), fps)]
        std_min.append(min(per_window_std))
        ratios.extend(motion_ratios(frames, truth, fps))
    n_windows = len(drift["psnr_db"]) // p.long_sessions
    by_window = {k: [float(np.mean(v[j::n_windows])) for j in range(n_windows)] for k, v in drift.items()}
    return {
        "drift_window_seconds": p.window_seconds,
        "drift_by_window": by_window,
        "collapse_seconds": p.collapse_seconds,
        "min_frame_std_per_second": float(min(std_min)),
        "min_motion_ratio_per_second": float(min(ratios)),
        "median_motion_ratio_per_second": float(np.median(ratios)),
        # seconds in which the picture changed less than a quarter as much as the ground truth's
        "still_seconds_fraction": still_fraction(ratios),
    }


def streaming_speed(engine: Engine, p: EvalParams) -> dict[str, float]:
    """One session streaming on this engine's device: frames per second over ``speed_chunks`` chunks."""
    fpc = engine.config.latent_frames_per_chunk
    engine.open_session("speed", seed=1, prompt="meadow")
    actions = [FrameAction(keys=("d",))] * fpc
    for _ in range(2):
        run_chunks(engine, {"speed": actions})
    started = time.perf_counter()
    for _ in range(p.speed_chunks):
        run_chunks(engine, {"speed": actions})
    seconds = time.perf_counter() - started
    engine.close_session("speed")
    return {"frames_per_second": p.speed_chunks * fpc / seconds, "ms_per_chunk": 1000 * seconds / p.speed_chunks,
            "threads": float(torch.get_num_threads())}


def sample_sheet(engine: Engine, encoder: DemoEncoder, p: EvalParams, worlds: Worlds, chunks: int = 12) -> np.ndarray:
    """A picture to look at: per theme, ground truth (upper row) and model (lower row), one frame per
    chunk, random play, the prompt switching to the next theme halfway. uint8 (rows*H, chunks*W, 3)."""
    fpc = engine.config.latent_frames_per_chunk
    rows = []
    sessions: dict[int, tuple[list[FrameAction], list[np.ndarray], str, list[np.ndarray]]] = {}
    for i, theme in enumerate(THEME_NAMES):
        seed = p.seed_base + 3_000 + i
        after = THEME_NAMES[(i + 1) % len(THEME_NAMES)]
        play = _play(seed, (p.context_chunks + chunks) * fpc)
        world = worlds.make(seed, theme)
        truth = []
        for k in range(p.context_chunks + chunks):
            if k == p.context_chunks + chunks // 2:
                world.set_prompt(after)
            truth.append(world.rollout(play[k * fpc:(k + 1) * fpc]))
        context = _chunks(np.concatenate(truth[: p.context_chunks]), play, [theme] * p.context_chunks,
                          p.context_chunks)
        open_with_context(engine, f"sheet-{i}", encoder, context, seed, theme)
        sessions[i] = (play, truth, after, [])
    for k in range(chunks):
        start = (p.context_chunks + k) * fpc
        if k == chunks // 2:
            for i, (_, _, after, _) in sessions.items():
                engine.set_prompt(f"sheet-{i}", after)
        out = run_chunks(engine, {f"sheet-{i}": s[0][start:start + fpc] for i, s in sessions.items()})
        for i, s in sessions.items():
            s[3].append(out[f"sheet-{i}"][-1])
    for i, (_, truth, _, model) in sessions.items():
        engine.close_session(f"sheet-{i}")
        rows.append(np.concatenate([t[-1] for t in truth[p.context_chunks:]], axis=1))
        rows.append(np.concatenate(model, axis=1))
    return np.concatenate(rows, axis=0)
