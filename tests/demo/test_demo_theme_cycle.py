"""The theme-cycle evaluation: its script goes through the six themes in turn, each for the same
whole number of chunks, twice, never the same theme twice in a row; a short run on the shipped
weights reports the avatar per theme segment and per minute, the targets, and draws its filmstrip."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise
from pathlib import Path

import pytest

from demo._eval_parts import Worlds
from demo.autoencoder import ae_config_for
from demo.config import CONFIG, DEFAULT_WEIGHTS
from demo.eval import _demo_engine
from demo.export import ENCODER_FILE, load_encoder
from demo.script import scripted_play, theme_cycle_play
from demo.theme_cycle import THEME_CYCLE_TARGETS, ThemeCycleParams, theme_cycle
from demo.themes import THEME_NAMES
from demo.world import WorldParams


def test_the_cycle_shows_every_theme_twice_for_ten_seconds_each() -> None:
    script = theme_cycle_play(29)
    assert len(script.prompts) == 12 * 40 and len(script.actions) == 12 * 40 * 4  # 12 x 10 s at 16 frames/s
    assert script.changes == [40 * i for i in range(1, 12)]
    order = [script.theme_of_chunk(k) for k in [0, *script.changes]]
    assert Counter(order) == {t: 2 for t in THEME_NAMES}
    assert sorted(order[:6]) == sorted(THEME_NAMES) == sorted(order[6:])
    assert all(a != b for a, b in pairwise(order))
    for lo in [0, *script.changes]:  # one prompt held through each segment
        assert len(set(script.prompts[lo:lo + 40])) == 1


def test_the_cycle_is_the_same_for_the_same_seed_and_plays_the_long_play_s_keys() -> None:
    a, b = theme_cycle_play(29), theme_cycle_play(29)
    assert a.prompts == b.prompts and a.actions == b.actions
    assert theme_cycle_play(30).prompts != a.prompts
    assert a.actions == scripted_play(120.0, 29).actions


def test_shorter_segments_and_one_pass() -> None:
    script = theme_cycle_play(5, seconds_per_theme=1.0, passes=1)
    assert script.changes == [4, 8, 12, 16, 20] and len(script.prompts) == 24
    assert sorted(script.theme_of_chunk(k) for k in [0, *script.changes]) == sorted(THEME_NAMES)


@pytest.mark.slow
def test_a_short_cycle_reports_the_avatar_per_segment_and_draws_its_filmstrip(tmp_path: Path) -> None:
    engine = _demo_engine(CONFIG, "cpu", DEFAULT_WEIGHTS)
    encoder = load_encoder(DEFAULT_WEIGHTS.parent / ENCODER_FILE, ae_config_for(CONFIG))
    params = ThemeCycleParams(seconds_per_theme=2.0, passes=1, strip_every_seconds=1.0)
    report = theme_cycle(engine, encoder, Worlds(WorldParams()), params, tmp_path)
    assert set(report["targets"]) == set(THEME_CYCLE_TARGETS)  # type: ignore[arg-type]
    assert report["seconds"] == 12.0
    assert sorted(report["order"]) == sorted(THEME_NAMES)  # type: ignore[arg-type]
    segments = report["segments"]
    assert [s["theme"] for s in segments] == report["order"]  # type: ignore[union-attr,index]
    assert [s["from_s"] for s in segments] == [0.0, 1.5, 3.5, 5.5, 7.5, 9.5]  # type: ignore[union-attr,index]
    assert report["avatar"]["truth_share"] == 1.0  # type: ignore[index]
    assert report["avatar"]["truth_several_share"] == 0.0  # type: ignore[index]
    assert len(report["avatar_by_minute"]) == 1  # type: ignore[arg-type]
    assert report["targets"]["avatar_visible_share"]["measured"] == report["avatar"]["model_share"]  # type: ignore[index]
    assert [p.name for p in tmp_path.iterdir()] == ["theme_cycle_filmstrip.png"]
    assert engine.kv_stats().per_session == {}
