"""The long-play evaluation: ``python -m demo.eval --weights W --long-play [--seconds 300]``.

One session plays a scripted, seeded stretch of vigorous play (``demo.script``) through the
real Engine, sampled exactly as the daemon serves the model, after two chunks of the true world as
context; the same actions (and prompt changes) drive the true procedural world. Then 16 probe
sessions hold each of the 8 directions: 8 from rest (true context standing still) and 8 forked from
the long session after ``probe_after_seconds`` of its own play. Reported against the targets:

- avatar: share of generated frames in which ``image_stats.avatar_visible`` finds it (the detector
  is checked on the true frames of the same play, where it must find it in ~100%); beside it, the
  share of frames showing two or more avatar-like discs (``image_stats.avatar_count``: a doubled
  avatar, which the centre test does not see), no target, the truth's share its false finds;
- colour and texture: per second, the distance of the model's pooled histogram to the true world's
  same second, against the bound ``self_variation_bound`` states from the true world's own seconds;
- periodic collapse: per second, the median ``spectral_peak`` of the model's frames against the
  largest per-second value of the true world over the same play;
- direction: per direction, the share of frame pairs of the hold whose motion (block matching) is
  within 45 degrees of the held keys' direction, from rest and after the long play; the worst;
- themes: classifier accuracy over the chunks right after every prompt change, and overall.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from demo._eval_parts import EvalParams, Worlds, fit_classifier, roundtrip
from demo._long_play_stats import (
    against,
    image_report,
    probe_accuracy,
    seconds_of,
    spectral_by_second,
    theme_report,
)
from demo.autoencoder import DemoEncoder
from demo.errors import DemoError
from demo.metrics import ThemeClassifier
from demo.rollout import ContextChunk, open_with_context, run_chunks
from demo.script import HELD_DIRECTIONS, PlayScript, scripted_play
from demo.themes import THEME_NAMES
from demo.world import World
from engine.api import FrameAction
from engine.engine import Engine

__all__ = ["LONG_PLAY_TARGETS", "LongPlayParams", "long_play", "play_script", "through_autoencoder"]

# what the demo model must do over minutes of play; each measured number is compared in the report
LONG_PLAY_TARGETS = {
    "avatar_visible_share": 0.99,  # >= : frames in which the avatar is there
    "colour_within_bound_share": 0.90,  # >= : seconds whose colour distance is within the world's own bound
    # >= : the same for patch texture; 0.80, as the autoencoder alone reaches 0.886 (the world's frames
    # through it, MODEL_CARD.md), so 0.90 would ask the model to beat its own decoder
    "texture_within_bound_share": 0.80,
    "spectral_within_bound_share": 0.99,  # >= : seconds without a stronger periodic peak than the world ever has
    "worst_direction_from_rest": 0.90,  # >= : the worst of the 8 directions
    "worst_direction_after_play": 0.90,  # >= : the same after probe_after_seconds of play
    "theme_accuracy_after_change": 0.90,  # >=
}


@dataclass(frozen=True)
class LongPlayParams:
    seconds: float = 300.0
    world_seed: int = 905_000  # evaluation seeds sit far above the training ones
    script_seed: int = 17
    context_chunks: int = 2
    probe_after_seconds: float = 60.0  # the second set of direction probes forks off the play here
    probe_rest_chunks: int = 2  # a probe brakes for one chunk and rests for the next ...
    probe_hold_chunks: int = 16  # ... then holds its direction this long (64 frames)
    theme_chunks: int = 4  # chunks after a prompt change whose frames must show the new theme
    strip_every_seconds: float = 10.0
    from_nothing: bool = False  # start as a served session does (``play_script``)


def _probe_actions(name: str, p: LongPlayParams, fpc: int) -> list[FrameAction]:
    rest = [FrameAction(keys=("space",))] * fpc + [FrameAction()] * (fpc * (p.probe_rest_chunks - 1))
    return rest + [FrameAction(keys=HELD_DIRECTIONS[name][0])] * (fpc * p.probe_hold_chunks)


@dataclass
class _Play:
    """The long play's frames: true world, model, and what the model's probes fork from."""

    truth: np.ndarray  # (T, H, W, 3) generated part only
    model: np.ndarray
    fork: bytes  # engine snapshot at the probe point (empty without one)
    fork_world: World | None  # the true world at the same point
    seconds_per_chunk: float


def play_script(engine: Engine, encoder: DemoEncoder, worlds: Worlds, script: PlayScript, p: LongPlayParams,
                fork_chunk: int | None = None) -> _Play:
    """One session plays ``script`` after ``p.context_chunks`` true chunks, and the true world plays
    the same; with ``fork_chunk``, the engine's snapshot and the world at that chunk.

    ``p.from_nothing``: the session starts as a served one does, from nothing but its seed and
    prompt, and makes the first ``p.context_chunks`` chunks itself; they are not returned, so both
    starts are scored on the same frames. Its world is then its own, not the true world's place:
    the avatar, the collapse test, the directions and the themes read as before, the colour and
    texture distances compare it with another place of the same theme."""
    fpc = engine.config.latent_frames_per_chunk
    world = worlds.make(p.world_seed, script.prompts[0])
    truth = []
    fork_world = None
    for k, prompt in enumerate(script.prompts):
        world.set_prompt(prompt)
        if k == fork_chunk:
            fork_world = worlds.make(p.world_seed, prompt)
            fork_world.state = world.state
        truth.append(world.rollout(script.actions[k * fpc:(k + 1) * fpc]))
    if p.from_nothing:
        if not engine.open_session("play", seed=p.world_seed, prompt=script.prompts[0]):
            raise DemoError("kv_full", "the engine's KV pool has no room for the play's session")
    else:
        context = [ContextChunk(truth[k], script.actions[k * fpc:(k + 1) * fpc], script.prompts[k])
                   for k in range(p.context_chunks)]
        open_with_context(engine, "play", encoder, context, p.world_seed, script.prompts[p.context_chunks])
    model, fork = [], b""
    started = time.perf_counter()
    for k in range(0 if p.from_nothing else p.context_chunks, len(script.prompts)):
        if k == fork_chunk:
            fork = engine.snapshot("play")
        if k == p.context_chunks:
            started = time.perf_counter()  # the timing covers the scored chunks of either start
        engine.set_prompt("play", script.prompts[k])
        frames = run_chunks(engine, {"play": script.actions[k * fpc:(k + 1) * fpc]})["play"]
        if k >= p.context_chunks:
            model.append(frames)
        if k >= p.context_chunks and (k - p.context_chunks + 1) % 64 == 0:
            print(f"[long-play] {(k + 1) * fpc / engine.config.fps:.0f} s of {p.seconds:.0f} s played", flush=True)
    seconds = time.perf_counter() - started
    engine.close_session("play")
    assert fork_chunk is None or (fork_world is not None and fork), "the fork point lies inside the play"
    return _Play(np.concatenate(truth[p.context_chunks:]), np.concatenate(model), fork, fork_world,
                 seconds / len(model))


def _probes(engine: Engine, encoder: DemoEncoder, worlds: Worlds, play: _Play, script: PlayScript,
            p: LongPlayParams, fork_chunk: int) -> dict[str, dict[str, dict[str, float]]]:
    """Hold each direction from rest and after the play: direction accuracy of model and truth."""
    fpc = engine.config.latent_frames_per_chunk
    truths: dict[str, np.ndarray] = {}
    for i, name in enumerate(HELD_DIRECTIONS):
        seed, prompt = p.world_seed + 100 + i, THEME_NAMES[i % len(THEME_NAMES)]
        actions = [FrameAction()] * (p.context_chunks * fpc) + _probe_actions(name, p, fpc)
        frames = worlds.make(seed, prompt).rollout(actions)
        context = [ContextChunk(frames[k * fpc:(k + 1) * fpc], actions[k * fpc:(k + 1) * fpc], prompt)
                   for k in range(p.context_chunks)]
        open_with_context(engine, f"rest-{name}", encoder, context, seed, prompt)
        truths[f"rest-{name}"] = frames[p.context_chunks * fpc:]
        after = worlds.make(p.world_seed, script.prompts[fork_chunk])
        assert play.fork_world is not None
        after.state = play.fork_world.state
        truths[f"after-{name}"] = after.rollout(_probe_actions(name, p, fpc))
        engine.open_from_snapshot(f"after-{name}", play.fork, seed=p.world_seed + 200 + i,
                                  prompt=script.prompts[fork_chunk])
    out: dict[str, list[np.ndarray]] = {sid: [] for sid in truths}
    for k in range(p.probe_rest_chunks + p.probe_hold_chunks):
        plan = {sid: _probe_actions(sid.split("-", 1)[1], p, fpc)[k * fpc:(k + 1) * fpc] for sid in truths}
        for sid, frames in run_chunks(engine, plan).items():
            out[sid].append(frames)
    for sid in truths:
        engine.close_session(sid)
    hold = p.probe_rest_chunks * fpc
    report: dict[str, dict[str, dict[str, float]]] = {"from_rest": {}, "after_play": {}}
    for sid, truth in truths.items():
        where, name = sid.split("-", 1)
        direction = HELD_DIRECTIONS[name][2]
        # the frame before the hold starts the first pair: the motion of the hold's first frame counts
        report["from_rest" if where == "rest" else "after_play"][name] = {
            "model": probe_accuracy(np.concatenate(out[sid])[hold - 1:], direction),
            "ground_truth": probe_accuracy(truth[hold - 1:], direction),
        }
    return report


def through_autoencoder(engine: Engine, encoder: DemoEncoder, truth: np.ndarray) -> tuple[np.ndarray, float]:
    """The true frames through the autoencoder (what a perfect DiT would show), and the periodic
    collapse bound: the largest second of either. The decoder adds faint periodic patterns of its
    own (its 8 px latent cell), so the model is held to the true world seen through it."""
    fps = engine.config.fps
    recon = np.concatenate([roundtrip(engine, encoder, truth[i:i + 64]) for i in range(0, len(truth), 64)])
    return recon, max(spectral_by_second(seconds_of(recon, fps)) + spectral_by_second(seconds_of(truth, fps)))


def long_play(engine: Engine, encoder: DemoEncoder, worlds: Worlds, p: LongPlayParams,
              figures: Path | None = None) -> dict[str, object]:
    """Run the long play and its probes; returns the report (every number; ``targets`` compares).
    ``figures``: a directory for the filmstrip and the per-direction table (PNG)."""
    started = time.monotonic()
    cfg = engine.config
    fpc, fps = cfg.latent_frames_per_chunk, cfg.fps
    script = scripted_play(p.seconds, p.script_seed, fps, fpc)
    fork_chunk = p.context_chunks + round(p.probe_after_seconds * fps / fpc)
    if fork_chunk >= len(script.prompts):
        raise ValueError(f"--seconds {p.seconds} is too short for probes after {p.probe_after_seconds} s of play")
    classifier: ThemeClassifier = fit_classifier(EvalParams(), worlds)[0]
    with torch.inference_mode():
        play = play_script(engine, encoder, worlds, script, p, fork_chunk)
        probes = _probes(engine, encoder, worlds, play, script, p, fork_chunk)
    frame_themes = [script.theme_of_chunk(k) for k in range(p.context_chunks, len(script.prompts)) for _ in range(fpc)]
    # the same statistics of the true frames through the autoencoder: what a perfect DiT would score.
    # The decoder adds faint periodic patterns of its own (its 8 px latent cell), so the spectral test
    # holds the model to the true world seen through it: the largest second of either
    recon, spectral_bound = through_autoencoder(engine, encoder, play.truth)
    ceiling = image_report(recon, play.truth, frame_themes, fps)
    images = image_report(play.model, play.truth, frame_themes, fps, spectral_bound)
    themes = theme_report(play.model, classifier, script, p.context_chunks, p.theme_chunks, fpc)

    def worst(where: str) -> tuple[str, float]:
        name = min(probes[where], key=lambda n: probes[where][n]["model"])
        return name, probes[where][name]["model"]

    measured: dict[str, float] = {
        "avatar_visible_share": images["avatar"]["model_share"],
        "colour_within_bound_share": images["colour"]["within_bound_share"],
        "texture_within_bound_share": images["texture"]["within_bound_share"],
        "spectral_within_bound_share": images["spectral"]["within_bound_share"],
        "worst_direction_from_rest": worst("from_rest")[1],
        "worst_direction_after_play": worst("after_play")[1],
        "theme_accuracy_after_change": themes["after_change"],
    }
    report: dict[str, object] = {
        "params": asdict(p),
        "sampling_seconds_per_chunk": play.seconds_per_chunk,
        "engine_frames_per_second": fpc / play.seconds_per_chunk,
        "threads": torch.get_num_threads(),
        "script": {"segments": len(script.segments), "prompt_changes": len(script.changes),
                   "kinds": {k: sum(s.kind == k for s in script.segments) for k in
                             ("hold", "run", "brake", "rest", "mouse")}},
        **images,
        "autoencoder_ceiling": {
            "avatar_visible_share": ceiling["avatar"]["model_share"],
            "avatar_several_share": ceiling["avatar"]["model_several_share"],
            "colour_within_bound_share": ceiling["colour"]["within_bound_share"],
            "texture_within_bound_share": ceiling["texture"]["within_bound_share"],
            "spectral_worst": ceiling["spectral"]["model_worst"],
            "colour_median_distance": ceiling["colour"]["median_distance"],
            "texture_median_distance": ceiling["texture"]["median_distance"],
        },
        "direction": {**probes, "worst_from_rest": worst("from_rest"), "worst_after_play": worst("after_play")},
        "theme": themes,
        "targets": against(LONG_PLAY_TARGETS, measured),
    }
    if figures is not None:
        from demo._long_play_figures import save_direction_table, save_filmstrip

        save_filmstrip(play.truth, play.model, p.strip_every_seconds, fps, figures / "long_play_filmstrip.png")
        save_direction_table(probes, figures / "long_play_directions.png")
    report["eval_seconds"] = round(time.monotonic() - started, 1)
    return report
