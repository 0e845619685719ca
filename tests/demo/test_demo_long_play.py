"""The long-play evaluation end to end on the shipped weights, at a few seconds of play: every number
of its targets is reported, the detector finds the avatar in every true frame, the probes cover the
8 directions twice, and the filmstrip and the direction table are drawn."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from demo._eval_parts import Worlds
from demo.autoencoder import ae_config_for
from demo.config import CONFIG, DEFAULT_WEIGHTS
from demo.eval import _demo_engine
from demo.export import ENCODER_FILE, load_encoder
from demo.long_play import LONG_PLAY_TARGETS, LongPlayParams, long_play, play_script
from demo.rollout import run_chunks
from demo.script import HELD_DIRECTIONS, scripted_play
from demo.world import WorldParams

pytestmark = pytest.mark.slow  # ~40 s of CPU rollouts


def test_a_short_long_play_reports_every_target_and_draws_its_pictures(tmp_path: Path) -> None:
    engine = _demo_engine(CONFIG, "cpu", DEFAULT_WEIGHTS)
    encoder = load_encoder(DEFAULT_WEIGHTS.parent / ENCODER_FILE, ae_config_for(CONFIG))
    params = LongPlayParams(seconds=8, probe_after_seconds=3, probe_hold_chunks=2, strip_every_seconds=2)
    report = long_play(engine, encoder, Worlds(WorldParams()), params, tmp_path)
    assert set(report["targets"]) == set(LONG_PLAY_TARGETS)  # type: ignore[arg-type]
    assert report["avatar"]["truth_share"] == 1.0  # type: ignore[index]
    assert report["avatar"]["seconds"] == 7  # type: ignore[index]  # 8 s less the 2 context chunks: 7 whole seconds
    for where in ("from_rest", "after_play"):
        assert set(report["direction"][where]) == set(HELD_DIRECTIONS)  # type: ignore[index]
        assert all(v["ground_truth"] == 1.0 for v in report["direction"][where].values())  # type: ignore[index]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["long_play_directions.png", "long_play_filmstrip.png"]
    assert engine.kv_stats().per_session == {}  # every session it opened is closed


def test_a_play_from_nothing_is_a_served_session_s_from_its_third_chunk() -> None:
    """``from_nothing``: the play's session opens on its seed and prompt alone, as the daemon opens a
    player's, and makes its first two chunks itself; the scored frames are that session's from the
    third chunk on, as many as a play on true context scores, and not the same frames."""
    engine = _demo_engine(CONFIG, "cpu", DEFAULT_WEIGHTS)
    encoder = load_encoder(DEFAULT_WEIGHTS.parent / ENCODER_FILE, ae_config_for(CONFIG))
    fpc = CONFIG.latent_frames_per_chunk
    script = scripted_play(2, seed=3, fps=CONFIG.fps, frames_per_chunk=fpc)  # 8 chunks
    worlds = Worlds(WorldParams())
    nothing = play_script(engine, encoder, worlds, script, LongPlayParams(seconds=2, from_nothing=True))
    on_truth = play_script(engine, encoder, worlds, script, LongPlayParams(seconds=2))
    assert engine.open_session("served", seed=LongPlayParams.world_seed, prompt=script.prompts[0])
    served = []
    for k, prompt in enumerate(script.prompts):
        engine.set_prompt("served", prompt)
        served.append(run_chunks(engine, {"served": script.actions[k * fpc:(k + 1) * fpc]})["served"])
    engine.close_session("served")
    assert len(script.prompts) == 8 and nothing.model.shape == on_truth.model.shape == (6 * fpc, *served[0].shape[1:])
    assert np.array_equal(nothing.model, np.concatenate(served[2:]))
    assert not np.array_equal(nothing.model[:fpc], on_truth.model[:fpc])
    assert np.array_equal(nothing.truth, on_truth.truth)  # the true world plays the same either way


def test_the_targets_are_the_ones_a_five_minute_play_is_held_to() -> None:
    assert LONG_PLAY_TARGETS == {"avatar_visible_share": 0.99, "colour_within_bound_share": 0.90,
                                 "texture_within_bound_share": 0.80, "spectral_within_bound_share": 0.99,
                                 "worst_direction_from_rest": 0.90, "worst_direction_after_play": 0.90,
                                 "theme_accuracy_after_change": 0.90}
