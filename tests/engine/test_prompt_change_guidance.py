"""Guidance on a prompt change (config prompt_change_guidance): the first chunks begun under a new
prompt take flow(old) + g * (flow(new) - flow(old)) on their first steps, the old prompt's pass
batched beside; every other chunk, and every session whose prompt stays, is untouched."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.api import FrameAction, StepItem, StepPlan
from engine.config import tiny_config
from engine.engine import Engine
from engine.errors import ConfigError
from tests.engine._helpers import make_variant, run_chunk, run_chunks

W = [FrameAction(keys=("w",))]
VALLEY, SNOW = "a green valley", "a snowy winter day"


def _guided(name: str = "tiny+prompt-guidance", **overrides: object) -> Engine:
    settings: dict[str, object] = dict(prompt_change_guidance=2.5, prompt_change_guidance_chunks=2,
                                       prompt_change_guidance_steps=1)
    settings.update(overrides)
    return make_variant(name, **settings)


def _plain() -> Engine:
    return make_variant("tiny+no-prompt-guidance")


def _open(*engines: Engine, sid: str = "s") -> None:
    for engine in engines:
        assert engine.open_session(sid, seed=5, prompt=VALLEY)


def _counting(engine: Engine) -> list[int]:
    """The batch of every DiT denoise pass of `engine` from now on."""
    calls: list[int] = []
    forward = engine.runner.forward

    def counting(latents, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(latents.shape[0])
        return forward(latents, *args, **kwargs)

    engine.runner.forward = counting  # type: ignore[method-assign]
    return calls


def test_it_is_off_by_default() -> None:
    config = tiny_config()
    assert (config.prompt_change_guidance, config.prompt_change_guidance_chunks,
            config.prompt_change_guidance_steps) == (1.0, 4, 1)


def test_a_session_whose_prompt_stays_is_untouched_bit_for_bit() -> None:
    guided, plain = _guided(), _plain()
    _open(guided, plain)
    calls = _counting(guided)
    for a, b in zip(run_chunks(guided, "s", 4, W), run_chunks(plain, "s", 4, W), strict=True):
        assert a.chunk_index == b.chunk_index and np.array_equal(a.frames, b.frames)
    assert calls == [1] * (4 * guided.parts.schedule.steps)


def test_the_first_chunks_under_a_new_prompt_know_the_old_one_and_the_next_do_not() -> None:
    guided = _guided()
    _open(guided)
    run_chunks(guided, "s", 2, W)
    guided.set_prompt("s", SNOW)
    olds = []
    for _ in range(3):
        guided.begin_chunk("s", W)
        work = guided.session("s").work
        assert work is not None
        olds.append(None if work.old_context is None else work.old_context.clone())
        while (phase := guided.next_phase("s")) is not None:
            assert guided.step(StepPlan((StepItem("s", phase),))).results[0].error is None
    assert olds[0] is not None and olds[1] is not None and olds[2] is None  # chunks 2 and 3 of 2 guided
    assert torch.equal(olds[0], guided.embed_prompt(VALLEY))
    assert torch.equal(olds[1], guided.embed_prompt(VALLEY))


def test_as_many_chunks_are_guided_as_configured_however_few_records_the_engine_keeps() -> None:
    guided = _guided("tiny+pg-4", prompt_change_guidance_chunks=4)
    _open(guided)
    run_chunks(guided, "s", 3, W)
    guided.set_prompt("s", SNOW)
    calls = _counting(guided)
    run_chunks(guided, "s", 6, W)
    steps = guided.parts.schedule.steps
    assert calls == ([2] + [1] * (steps - 1)) * 4 + [1] * (2 * steps)
    assert 2 not in guided.session("s").records  # the chunk before the change is long forgotten


def test_a_rollback_to_the_change_with_the_old_prompt_set_back_forgets_it() -> None:
    guided = _guided()
    _open(guided)
    run_chunks(guided, "s", 2, W)
    guided.mark_delivered("s", 1)  # the viewer saw chunks 0 and 1: a rollback returns to chunk 2
    guided.set_prompt("s", SNOW)
    guided.begin_chunk("s", W)  # chunk 2, the first under the new prompt: guided
    assert guided.session("s").prompt_changed == (2, VALLEY)
    assert guided.rollback("s") == 2
    guided.set_prompt("s", VALLEY)
    work_index = guided.begin_chunk("s", W)
    work = guided.session("s").work
    assert work_index == 2 and work is not None and work.old_context is None
    assert guided.session("s").prompt_changed is None


def test_a_guided_chunk_runs_its_first_step_with_the_old_prompt_beside_and_later_steps_alone() -> None:
    guided = _guided()
    _open(guided)
    run_chunks(guided, "s", 2, W)
    guided.set_prompt("s", SNOW)
    calls = _counting(guided)
    run_chunk(guided, "s", W)
    steps = guided.parts.schedule.steps
    assert calls == [2] + [1] * (steps - 1)


def test_the_guided_flow_is_the_old_prompts_plus_g_times_the_difference() -> None:
    guided = _guided()
    _open(guided)
    run_chunks(guided, "s", 2, W)
    guided.set_prompt("s", SNOW)
    guided.begin_chunk("s", W)
    state = guided.session("s")
    work, runner = state.work, guided.runner
    assert work is not None and work.old_context is not None
    slabs = [state.handle.context_slabs(work.index)]
    t = [runner.schedule.timestep(0)]
    x = work.x[None]
    got = runner._flow(x, t, [work], work.context[None], slabs)
    new = runner.forward(x, t, [work], work.context[None], slabs, None)
    old_work = type(work)(work.index, work.x, work.actions, work.old_context, work.prompt, work.steps,
                          cross=work.old_cross)
    old = runner.forward(x, t, [old_work], work.old_context[None], slabs, None)
    torch.testing.assert_close(got, old + 2.5 * (new - old), rtol=1e-5, atol=1e-5)
    assert float((got - new).abs().max()) > 1e-5  # the random tiny model's prompts differ a little: it moves


def test_the_chunks_under_the_new_prompt_change_and_once_past_the_guided_ones_it_costs_nothing() -> None:
    guided, plain = _guided(), _plain()
    _open(guided, plain)
    for engine in (guided, plain):
        run_chunks(engine, "s", 2, W)
        engine.set_prompt("s", SNOW)
    first = run_chunk(guided, "s", W), run_chunk(plain, "s", W)
    assert first[0].chunk_index == first[1].chunk_index == 2
    latents = [engine.session("s").records[2].latents for engine in (guided, plain)]
    assert not torch.equal(*latents)  # (the random tiny model's prompts move its latents too little for its frames)
    calls = _counting(guided)
    run_chunks(guided, "s", 3, W)
    assert calls == [2] + [1] * (3 * guided.parts.schedule.steps - 1)  # chunk 3 guided, 4 and 5 not


def test_a_guided_session_gets_the_same_result_batched_with_one_whose_prompt_stays() -> None:
    together, alone = _guided("tiny+pg-together"), _guided("tiny+pg-alone")
    for engine in (together, alone):
        for sid in ("a", "b"):
            assert engine.open_session(sid, seed=3 + len(sid) + ord(sid), prompt=VALLEY)
            run_chunks(engine, sid, 2, W)
        engine.set_prompt("a", SNOW)
        for sid in ("a", "b"):
            engine.begin_chunk(sid, W)
    together.step(StepPlan((StepItem("a", together.next_phase("a")), StepItem("b", together.next_phase("b")))))  # type: ignore[arg-type]
    for sid in ("a", "b"):
        phase = alone.next_phase(sid)
        assert phase is not None
        alone.step(StepPlan((StepItem(sid, phase),)))
    for sid in ("a", "b"):
        got, want = together.session(sid).work, alone.session(sid).work
        assert got is not None and want is not None and got.step == want.step == 1
        assert float((got.x - want.x).abs().max()) <= 1e-5


def test_a_session_restored_from_a_snapshot_is_guided_as_it_would_have_been() -> None:
    guided = _guided()
    _open(guided)
    run_chunks(guided, "s", 2, W)
    guided.set_prompt("s", SNOW)
    run_chunk(guided, "s", W)  # chunk 2: the first under the new prompt
    data = guided.snapshot("s")
    went_on = run_chunk(guided, "s", W)  # chunk 3: the second, guided
    twin = _guided()
    assert twin.open_from_snapshot("t", data, seed=5, prompt=SNOW)
    again = run_chunk(twin, "t", W)
    assert again.chunk_index == went_on.chunk_index == 3
    assert np.abs(again.frames.astype(int) - went_on.frames.astype(int)).max() <= 1


def test_kv_from_last_pass_is_not_taken_by_a_guided_step() -> None:
    lasting = _guided("tiny+pg-kv-last-3", kv_from_last_pass=True,
                      prompt_change_guidance_steps=len(_plain().config.denoise_timesteps))
    _open(lasting)
    run_chunks(lasting, "s", 2, W)
    lasting.set_prompt("s", SNOW)
    lasting.begin_chunk("s", W)
    writes = []
    last_pass_writes = lasting.runner._last_pass_writes

    def recording(states, works):  # type: ignore[no-untyped-def]
        writes.append(last_pass_writes(states, works))
        return writes[-1]

    lasting.runner._last_pass_writes = recording  # type: ignore[method-assign]
    while (phase := lasting.next_phase("s")) is not None:
        assert lasting.step(StepPlan((StepItem("s", phase),))).results[0].error is None
    assert writes and all(w is None for w in writes)  # every step guided: the cache pass writes the K/V
    assert lasting.session("s").records[2].prompt == SNOW


@pytest.mark.parametrize(("field", "value", "says"), [
    ("prompt_change_guidance", 0.0, "prompt_change_guidance must be > 0 (1 = none), got 0.0"),
    ("prompt_change_guidance_chunks", -1, "prompt_change_guidance_chunks must be >= 0, got -1"),
    ("prompt_change_guidance_steps", 9, "prompt_change_guidance_steps must lie in [0, "),
])
def test_a_bad_setting_is_refused_with_what_to_change(field: str, value: object, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        _guided(f"tiny+bad-{field}", **{field: value})
    assert err.value.code == "bad_config"
    assert says in str(err.value)


def test_with_the_recontext_on_too_the_first_chunks_are_still_guided_from_the_old_prompt() -> None:
    both = _guided("tiny+pg-recontext", recontext_on_prompt_change=True)
    _open(both)
    run_chunks(both, "s", 3, W)
    both.set_prompt("s", SNOW)
    both.begin_chunk("s", W)  # the recontext gives the window's records the new prompt first
    state = both.session("s")
    assert state.records[2].prompt == SNOW
    assert state.prompt_changed == (3, VALLEY)
    assert state.work is not None and state.work.old_context is not None
    assert torch.equal(state.work.old_context, both.embed_prompt(VALLEY))
