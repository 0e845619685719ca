"""The long-play evaluation end to end on the shipped weights, at a few seconds of play: every number
of its targets is reported, the detector finds the avatar in every true frame, the probes cover the
8 directions twice, and the filmstrip and the direction table are drawn."""

from __future__ import annotations

from pathlib import Path

import pytest

from demo._eval_parts import Worlds
from demo.autoencoder import ae_config_for
from demo.config import CONFIG, DEFAULT_WEIGHTS
from demo.eval import _demo_engine
from demo.export import ENCODER_FILE, load_encoder
from demo.long_play import LONG_PLAY_TARGETS, LongPlayParams, long_play
from demo.script import HELD_DIRECTIONS
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
