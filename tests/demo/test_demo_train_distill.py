"""Distilling the served sampler into a 2-step unguided one (``--objective distill``) at a tiny scale
on CPU: the samplers each side, zero loss where student and teacher sample alike, the student (not
the teacher) moves and its loss falls, an exact resume, and the CLI's checks."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from demo._rollout_critics import DistillParams
from demo._train_distill import distill_step, student_config, teacher_config
from demo._train_rollout import RolloutParams, RolloutState
from demo.autoencoder import DemoEncoder
from demo.config import CONFIG
from demo.data import Episodes
from demo.errors import DemoError
from demo.train_rollout import build_parser, run
from engine.sampling import Schedule
from tests.demo.test_demo_train_rollout import (
    CPU,
    _model,
    cli_one_step,
    rejected_code,
    same_weights,
    step_with,
    straight_and_resumed,
    tiny_batch,
)


@pytest.fixture(scope="module")
def batch() -> tuple[Episodes, DemoEncoder]:
    return tiny_batch(4)


def _params(**distill: object) -> RolloutParams:
    return RolloutParams(batch=2, lr=3e-3, warmup_steps=1, weight_decay=0.0, ema_decay=0.5, objective="distill",
                         distill=DistillParams(**distill))  # type: ignore[arg-type]


def _step(state: RolloutState, batch: tuple[Episodes, DemoEncoder], params: RolloutParams) -> float:
    return step_with(distill_step, state, batch, params)


def test_the_student_samples_two_unguided_steps_and_the_teacher_as_the_guided_sampler_it_replaces() -> None:
    distill = DistillParams()
    student, teacher = student_config(CONFIG, distill), teacher_config(CONFIG, distill)
    assert Schedule.from_config(student).sigmas == (1.0, 0.5)
    assert (student.action_guidance, student.action_guidance_steps) == (1.0, 0)
    assert teacher.denoise_timesteps == CONFIG.denoise_timesteps == (1000.0, 667.0, 333.0)
    assert (teacher.action_guidance, teacher.action_guidance_steps) == (3.0, 1)
    # the shipped weights carry that guidance in one pass (--student-timesteps 1000,667,333): they are
    # served unguided, at the teacher's steps
    assert (CONFIG.action_guidance, CONFIG.action_guidance_steps) == (1.0, 0)
    one_pass = student_config(CONFIG, DistillParams(student_timesteps=(1000.0, 667.0, 333.0)))
    assert one_pass.denoise_timesteps == teacher.denoise_timesteps


def test_where_the_teacher_samples_as_the_student_does_the_loss_is_zero_and_nothing_moves(
        batch: tuple[Episodes, DemoEncoder]) -> None:
    params = _params(teacher_guidance=1.0)  # the same weights, unguided: every target is the student's own flow
    state = RolloutState.start(*_model(), params, CPU)
    assert state.objective == "distill" and state.teacher is not None and state.critics is None
    start = copy.deepcopy(state.dit)
    assert _step(state, batch, params) == 0.0
    assert same_weights(state.dit, start) and state.step == 1


def test_a_distill_step_moves_the_student_not_the_teacher_and_the_loss_falls(
        batch: tuple[Episodes, DemoEncoder]) -> None:
    params = _params()
    state = RolloutState.start(*_model(), params, CPU)
    assert state.teacher is not None
    teacher = copy.deepcopy(state.teacher.real)
    state.dit.init_random(11)  # a student far from its teacher, so that the fall is the loss's, not noise's
    start = copy.deepcopy(state.dit)
    assert not any(p.requires_grad for p in state.teacher.real.parameters())
    losses = [_step(state, batch, params) for _ in range(8)]
    assert losses[0] > 0 and all(loss == loss for loss in losses)  # finite, not nan
    assert losses[-1] < 0.7 * losses[0], losses
    assert not same_weights(state.dit, start) and same_weights(state.teacher.real, teacher)
    assert state.step == 8 and state.losses == losses


def test_the_anchor_weight_adds_the_unguided_term(batch: tuple[Episodes, DemoEncoder]) -> None:
    without, with_anchor = _params(anchor_weight=0.0), _params(anchor_weight=2.0)
    plain = _step(RolloutState.start(*_model(), without, CPU), batch, without)
    anchored = _step(RolloutState.start(*_model(), with_anchor, CPU), batch, with_anchor)
    assert plain > 0 and anchored != plain
    unguided = _params(teacher_guidance=1.0, anchor_weight=2.0)  # the anchor is the student's own flow too
    assert _step(RolloutState.start(*_model(), unguided, CPU), batch, unguided) == 0.0


def _only_term(batch: tuple[Episodes, DemoEncoder], **term: float) -> float:
    """The loss of one step with the teacher unguided and no anchor, where the distill term is exactly 0
    and what is left is ``term``; the step must move the student (the term's gradient reaches it)."""
    params = _params(teacher_guidance=1.0, anchor_weight=0.0, **term)
    state = RolloutState.start(*_model(), params, CPU)
    start = copy.deepcopy(state.dit)
    loss = _step(state, batch, params)
    assert loss > 0 and not same_weights(state.dit, start)
    return loss


def test_the_regress_weight_adds_the_true_world_term_on_the_student_s_context(
        batch: tuple[Episodes, DemoEncoder]) -> None:
    loss = _only_term(batch, regress_weight=2.0)
    none = _params(teacher_guidance=1.0, anchor_weight=0.0, regress_weight=0.0)
    assert _step(RolloutState.start(*_model(), none, CPU), batch, none) == 0.0
    assert _only_term(batch, regress_weight=4.0) == pytest.approx(2 * loss, rel=1e-5)  # the same draws, twice the weight


def test_the_detail_weight_adds_the_spectrum_term_on_the_student_s_served_chunk(
        batch: tuple[Episodes, DemoEncoder]) -> None:
    loss = _only_term(batch, detail_weight=1.0)  # its gradient reaches the student through the last pass
    assert _only_term(batch, detail_weight=2.0) == pytest.approx(2 * loss, rel=1e-5)
    assert _only_term(batch, detail_weight=1.0, detail_hide_centre=2) != pytest.approx(loss, rel=1e-3)


def test_a_saved_distill_state_resumes_the_very_step(batch: tuple[Episodes, DemoEncoder]) -> None:
    params = _params()
    straight, resumed = straight_and_resumed(params, lambda state: _step(state, batch, params))
    assert resumed.step == 2 and resumed.teacher is not None and straight.teacher is not None
    assert same_weights(resumed.teacher.real, straight.teacher.real)
    assert _step(resumed, batch, params) == _step(straight, batch, params)
    assert same_weights(resumed.ema_dit, straight.ema_dit) and same_weights(resumed.dit, straight.dit)


@pytest.mark.parametrize(("flags", "code"), [(["--student-timesteps", "500,1000"], "bad_timesteps"),
                                             (["--student-timesteps", "1000,x"], "bad_timesteps"),
                                             (["--student-timesteps", "1200"], "bad_timesteps"),
                                             (["--anchor-weight", "-1"], "bad_anchor_weight"),
                                             (["--teacher-guidance", "0"], "bad_guidance"),
                                             (["--regress-weight", "-1"], "bad_regress_weight"),
                                             (["--ema-decay", "1"], "bad_ema_decay")])
def test_the_cli_rejects_bad_distill_settings(tmp_path: object, flags: list[str], code: str) -> None:
    assert rejected_code(tmp_path, "distill", flags) == code


def test_the_cli_trains_a_distilled_student_from_the_shipped_weights(tmp_path: object) -> None:
    out = tmp_path / "distill"  # type: ignore[operator]
    paths = cli_one_step(out, "distill")
    state = torch.load(paths["state"], map_location="cpu", weights_only=True)
    assert state["objective"] == "distill" and state["step"] == 1 and state["teacher"] is not None
    assert paths["weights"] == out / "demo.safetensors" and paths["weights"].is_file()
    meta = json.loads(paths["meta"].read_text())
    assert meta["rollout"]["params"]["objective"] == "distill"
    assert meta["rollout"]["params"]["distill"]["student_timesteps"] == [1000.0, 500.0]
    assert meta["rollout"]["params"]["distill"]["detail_weight"] == 0.0


def test_the_cli_passes_the_detail_term_to_the_distill_objective(tmp_path: object) -> None:
    out = tmp_path / "distill_detail"  # type: ignore[operator]
    paths = cli_one_step(out, "distill", ["--detail-weight", "1.5", "--detail-hide-centre", "6",
                                          "--teacher-guidance", "1"])
    distill = json.loads(paths["meta"].read_text())["rollout"]["params"]["distill"]
    assert (distill["detail_weight"], distill["detail_hide_centre"], distill["teacher_guidance"]) == (1.5, 6, 1.0)


def test_a_run_continues_only_under_the_settings_it_was_started_with(tmp_path: object) -> None:
    """Continuing a run with flags left out would train on under the defaults (horizon 24, no detail
    term, the teacher guided): refused, naming what changed; the same flags continue it."""
    first, second = tmp_path / "first", tmp_path / "second"  # type: ignore[operator]
    flags = ["--detail-weight", "1", "--teacher-guidance", "1"]
    cli_one_step(first, "distill", flags)
    tiny = ["--device", "cpu", "--steps", "1", "--batch", "1", "--pool", "1", "--min-horizon", "1", "--max-horizon", "1"]
    with pytest.raises(DemoError) as caught:
        run(build_parser().parse_args(["--resume", str(first), "--out", str(second), *tiny, "--teacher-guidance", "1"]))
    assert caught.value.code == "settings_changed"
    assert "distill.detail_weight: 1.0 -> 0.0" in str(caught.value) and "--new-settings" in str(caught.value)
    assert not (second / "demo.safetensors").exists()
    paths = run(build_parser().parse_args(["--resume", str(first), "--out", str(second), *tiny, *flags]))
    assert torch.load(paths["state"], map_location="cpu", weights_only=True)["step"] == 2
