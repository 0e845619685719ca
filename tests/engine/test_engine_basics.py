"""The Engine's public contract on the tiny config: shapes, phases, errors per session."""

from __future__ import annotations

import numpy as np
import pytest

from demo.registration import catalog_with_demo
from engine.api import FrameAction, Phase, StepItem, StepPlan
from engine.errors import ActionError, ConfigError, SessionStateError
from tests.engine._helpers import W, make_engine, run_chunk


def test_info_describes_the_tiny_model() -> None:
    engine = make_engine()
    info = engine.info
    assert (info.name, info.width, info.height, info.fps) == ("tiny", 32, 32, 16)
    assert (info.frames_per_chunk, info.latent_frames_per_chunk, info.denoise_steps) == (8, 2, 4)
    # sink 1 + window 2 slabs of 2 layers x K,V x 8 tokens x 2 heads x 16 dims x 4 bytes
    assert info.kv_bytes_per_session == 3 * 2 * 2 * 8 * 2 * 16 * 4
    assert (info.device, info.dtype) == ("cpu", "float32")


def test_a_chunk_goes_through_four_denoise_steps_a_decode_and_a_cache_pass() -> None:
    engine = make_engine()
    assert engine.open_session("s", seed=1, prompt="a meadow")
    assert engine.next_phase("s") is None
    assert engine.begin_chunk("s", [W]) == 0
    phases = []
    while (phase := engine.next_phase("s")) is not None:
        phases.append(phase)
        engine.step(StepPlan((StepItem("s", phase),)))
    assert phases == [Phase.DENOISE] * 4 + [Phase.DECODE, Phase.CACHE]
    assert engine.next_phase("s") is None


def test_first_chunk_decodes_to_fewer_frames_than_steady_chunks() -> None:
    engine = make_engine()
    engine.open_session("s", seed=1, prompt="p")
    first, second = run_chunk(engine, "s"), run_chunk(engine, "s")
    assert (first.chunk_index, first.frames.shape, first.frames.dtype) == (0, (5, 32, 32, 3), np.uint8)
    assert (second.chunk_index, second.frames.shape) == (1, (8, 32, 32, 3))


def test_step_reports_seconds_and_batch_size_per_phase() -> None:
    engine = make_engine()
    for sid in ("a", "b"):
        engine.open_session(sid, seed=1, prompt="p")
        engine.begin_chunk(sid, [W])
    result = engine.step(StepPlan((StepItem("a", Phase.DENOISE), StepItem("b", Phase.DENOISE))))
    assert [r.error for r in result.results] == [None, None]
    assert result.batch_sizes == {"denoise": 2}
    assert result.seconds["denoise"] > 0


def test_a_bad_item_fails_only_its_own_session() -> None:
    engine = make_engine()
    engine.open_session("good", seed=1, prompt="p")
    engine.open_session("idle", seed=1, prompt="p")
    engine.begin_chunk("good", [W])
    plan = StepPlan((StepItem("idle", Phase.DENOISE), StepItem("good", Phase.DENOISE), StepItem("nope", Phase.DENOISE)))
    results = engine.step(plan).results
    assert results[1].error is None and results[1].chunk_index == 0
    assert results[0].error is not None and "[no_chunk]" in results[0].error
    assert results[2].error is not None and "[unknown_session]" in results[2].error


def test_asking_for_the_wrong_phase_is_an_item_error() -> None:
    engine = make_engine()
    engine.open_session("s", seed=1, prompt="p")
    engine.begin_chunk("s", [W])
    result = engine.step(StepPlan((StepItem("s", Phase.CACHE),))).results[0]
    assert result.error is not None and "[wrong_phase]" in result.error
    assert engine.next_phase("s") is Phase.DENOISE


def test_unknown_model_names_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as info:
        make_engine(model="wan-14b", catalog=catalog_with_demo())
    assert info.value.code == "unknown_model"
    assert "demo, demo-fine, tiny, wan-1.3b" in info.value.message


def test_out_of_range_action_key_is_a_clear_error() -> None:
    engine = make_engine()
    engine.open_session("s", seed=1, prompt="p")
    with pytest.raises(ActionError) as info:
        engine.begin_chunk("s", [FrameAction(keys=("w", "f13"))])
    assert info.value.code == "bad_action_key"
    assert "['f13']" in info.value.message
    assert engine.next_phase("s") is None


@pytest.mark.parametrize(
    ("action", "code"),
    [
        (FrameAction(buttons=4), "bad_action_buttons"),
        (FrameAction(axes=(0.5, 0.5, 0.5)), "bad_action_axes"),
        (FrameAction(axes=(1.5,)), "bad_action_axes"),
        (FrameAction(mouse=(float("nan"), 0.0)), "bad_action_mouse"),
    ],
)
def test_actions_outside_the_action_space_are_rejected(action: FrameAction, code: str) -> None:
    engine = make_engine()
    engine.open_session("s", seed=1, prompt="p")
    with pytest.raises(ActionError) as info:
        engine.begin_chunk("s", [action])
    assert info.value.code == code


def test_wrong_number_of_actions_is_rejected() -> None:
    engine = make_engine()
    engine.open_session("s", seed=1, prompt="p")
    with pytest.raises(ActionError) as info:
        engine.begin_chunk("s", [W, W, W])
    assert info.value.code == "bad_action_count"


def test_opening_a_session_twice_is_an_error() -> None:
    engine = make_engine()
    engine.open_session("s", seed=1, prompt="p")
    with pytest.raises(SessionStateError) as info:
        engine.open_session("s", seed=2, prompt="p")
    assert info.value.code == "session_exists"


def test_open_session_returns_false_when_the_pool_is_full() -> None:
    engine = make_engine(kv_budget_bytes=2 * make_engine().info.kv_bytes_per_session)
    assert engine.open_session("a", seed=1, prompt="p")
    assert engine.open_session("b", seed=1, prompt="p")
    assert not engine.open_session("c", seed=1, prompt="p")
    engine.close_session("a")
    assert engine.open_session("c", seed=1, prompt="p")


def test_warmup_leaves_no_session_and_no_slab_behind() -> None:
    engine = make_engine()
    engine.warmup()
    stats = engine.kv_stats()
    assert engine.ready
    assert (stats.slabs_in_use, stats.per_session) == (0, {})


def test_the_caller_sets_the_largest_batch_it_will_step() -> None:
    from engine.engine import Engine

    assert Engine.create(model="tiny", device="cpu", max_batch=5).config.max_batch == 5
    assert Engine.create(model="tiny", device="cpu").config.max_batch == 3  # the tiny config's own
    with pytest.raises(ConfigError) as err:
        Engine.create(model="tiny", device="cpu", max_batch=0)
    assert err.value.code == "bad_max_batch"
