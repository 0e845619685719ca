"""The theme-cycle evaluation: ``python -m demo.eval --weights W --theme-cycle [--figures DIR]``.

A player who clicks through the theme examples: one session plays the long play's vigorous keys
(``demo.script``) while the prompt moves to another theme every ``seconds_per_theme`` (10 s), all
six in a seeded order, twice (two minutes), after two chunks of the true world as context (or,
``from_nothing``, from nothing as a served session starts); the true world plays the same.
Reported: the avatar (visible at the centre, and frames with a second one) over the whole play,
per minute and per theme segment -- the target is the avatar visible in >= 0.99 of the frames --,
the theme classifier's accuracy over the chunks after each change, and the long play's colour,
texture and periodic-collapse statistics.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from demo._eval_parts import EvalParams, Worlds, fit_classifier
from demo._long_play_stats import against, image_report, theme_report
from demo.autoencoder import DemoEncoder
from demo.image_stats import avatar_count, avatar_visible
from demo.long_play import LongPlayParams, play_script, through_autoencoder
from demo.script import theme_cycle_play
from engine.engine import Engine

__all__ = ["THEME_CYCLE_TARGETS", "ThemeCycleParams", "theme_cycle"]

THEME_CYCLE_TARGETS = {
    "avatar_visible_share": 0.99,  # >= : frames in which the avatar is there, over the whole cycle
    "theme_accuracy_after_change": 0.90,  # >= : the new theme shown in the chunks after each change
}


@dataclass(frozen=True)
class ThemeCycleParams:
    seconds_per_theme: float = 10.0
    passes: int = 2  # all six themes this many times
    world_seed: int = 906_000  # evaluation seeds, apart from the long play's
    script_seed: int = 29
    context_chunks: int = 2
    theme_chunks: int = 4  # chunks after a change whose frames must show the new theme
    strip_every_seconds: float = 5.0
    from_nothing: bool = False  # start as a served session does (``demo.long_play.play_script``)


def theme_cycle(engine: Engine, encoder: DemoEncoder, worlds: Worlds, p: ThemeCycleParams,
                figures: Path | None = None) -> dict[str, object]:
    """Run the theme cycle; the report holds every number and ``targets`` compares.
    ``figures``: a directory for ``theme_cycle_filmstrip.png``."""
    started = time.monotonic()
    cfg = engine.config
    fpc, fps = cfg.latent_frames_per_chunk, cfg.fps
    script = theme_cycle_play(p.script_seed, fps, fpc, p.seconds_per_theme, p.passes)
    seconds = len(script.actions) / fps
    play_params = LongPlayParams(seconds=seconds, world_seed=p.world_seed, script_seed=p.script_seed,
                                 context_chunks=p.context_chunks, theme_chunks=p.theme_chunks,
                                 from_nothing=p.from_nothing)
    classifier = fit_classifier(EvalParams(), worlds)[0]
    with torch.inference_mode():
        play = play_script(engine, encoder, worlds, script, play_params)
    frame_themes = [script.theme_of_chunk(k) for k in range(p.context_chunks, len(script.prompts)) for _ in range(fpc)]
    spectral_bound = through_autoencoder(engine, encoder, play.truth)[1]
    images = image_report(play.model, play.truth, frame_themes, fps, spectral_bound)
    themes = theme_report(play.model, classifier, script, p.context_chunks, p.theme_chunks, fpc)
    seen, discs = avatar_visible(play.model), avatar_count(play.model)
    starts = [0] + [(c - p.context_chunks) * fpc for c in script.changes] + [len(play.model)]
    segments = [{"theme": frame_themes[lo], "from_s": round(lo / fps, 2),
                 "avatar_visible_share": float(seen[lo:hi].mean()),
                 "several_avatars_share": float((discs[lo:hi] >= 2).mean())}
                for lo, hi in itertools.pairwise(starts) if hi > lo]
    minute = 60 * fps
    measured = {"avatar_visible_share": float(seen.mean()), "theme_accuracy_after_change": themes["after_change"]}
    report: dict[str, object] = {
        "params": asdict(p),
        "seconds": seconds,
        "sampling_seconds_per_chunk": play.seconds_per_chunk,
        "threads": torch.get_num_threads(),
        "order": [script.theme_of_chunk(k) for k in [0, *script.changes]],
        "avatar_by_minute": [float(seen[i:i + minute].mean()) for i in range(0, len(seen), minute)],
        "segments": segments,
        **images,
        "theme": themes,
        "targets": against(THEME_CYCLE_TARGETS, measured),
    }
    if figures is not None:
        from demo._long_play_figures import save_filmstrip

        save_filmstrip(play.truth, play.model, p.strip_every_seconds, fps, figures / "theme_cycle_filmstrip.png",
                       title="theme cycle")
    report["eval_seconds"] = round(time.monotonic() - started, 1)
    return report
