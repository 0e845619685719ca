"""Distribution matching on the model's own rollouts (``--objective dmd``) at a tiny scale on CPU:
finite losses, which networks move, a zero direction when the fake score equals the real one, an
exact resume, and the CLI's check of ``--objective``."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from demo._rollout_critics import DmdParams
from demo._train_dmd import DmdLosses, dmd_gradient, dmd_step
from demo._train_rollout import RolloutParams, RolloutState
from demo.autoencoder import DemoEncoder
from demo.data import Episodes
from demo.errors import DemoError
from tests.demo.test_demo_train_rollout import (
    CPU,
    _model,
    rejected_code,
    same_weights,
    step_with,
    straight_and_resumed,
    tiny_batch,
)


@pytest.fixture(scope="module")
def batch() -> tuple[Episodes, DemoEncoder]:
    return tiny_batch(4)


def _params(**dmd: object) -> RolloutParams:
    return RolloutParams(batch=2, lr=3e-3, warmup_steps=1, weight_decay=0.0, objective="dmd",
                         dmd=DmdParams(**dmd))  # type: ignore[arg-type]


def _step(state: RolloutState, batch: tuple[Episodes, DemoEncoder], params: RolloutParams) -> DmdLosses:
    return step_with(dmd_step, state, batch, params)


def test_a_dmd_step_moves_the_generator_and_the_fake_score_but_not_the_real_one(
        batch: tuple[Episodes, DemoEncoder]) -> None:
    # R guided on the actions, F not: they differ from the first step (with the config's guidance, none
    # since the served model carries it in its weights, R = F at the start and the generator's loss is 0)
    params = _params(real_guidance=3.0)
    state = RolloutState.start(*_model(), params, CPU)
    assert state.critics is not None and state.objective == "dmd"
    start = copy.deepcopy(state.dit)
    assert same_weights(state.critics.real, start) and same_weights(state.critics.fake, start)
    assert not any(p.requires_grad for p in state.critics.real.parameters())
    losses = _step(state, batch, params)
    assert math.isfinite(losses.generator) and math.isfinite(losses.fake) and losses.generator > 0 and losses.fake > 0
    assert not same_weights(state.dit, start)
    assert not same_weights(state.critics.fake, start)
    assert same_weights(state.critics.real, start)
    assert state.step == 1 and state.losses == [losses.generator] and state.critics.losses == [losses.fake]


def test_the_direction_is_zero_where_the_fake_score_equals_the_real_one() -> None:
    gen = torch.Generator().manual_seed(0)
    x0, real, fake = (torch.randn(2, 8, 4, 4, 4, generator=gen) for _ in range(3))
    assert torch.equal(dmd_gradient(x0, real, real.clone()), torch.zeros_like(x0))
    norm = (x0 - real).abs().mean(dim=(1, 2, 3, 4), keepdim=True)
    assert torch.allclose(dmd_gradient(x0, real, fake), (fake - real) / norm)
    zero = torch.zeros_like(x0)  # x0 at the real estimate: the normaliser's floor 1e-3
    assert torch.allclose(dmd_gradient(zero, zero, zero + 0.5), torch.full_like(x0, 500.0), rtol=1e-6, atol=0)


def test_with_the_fake_score_untrained_and_the_real_one_unguided_the_generator_stays(
        batch: tuple[Episodes, DemoEncoder]) -> None:
    params = _params(fake_steps=0, real_guidance=1.0)
    state = RolloutState.start(*_model(), params, CPU)
    start, text = copy.deepcopy(state.dit), copy.deepcopy(state.text)
    losses = _step(state, batch, params)
    assert losses.generator == 0.0 and math.isnan(losses.fake) and state.critics and state.critics.losses == []
    assert same_weights(state.dit, start)
    assert all(torch.equal(p, q) for p, q in zip(state.text.parameters(), text.parameters(), strict=True))
    guided = _params(fake_steps=0, real_guidance=3.0)  # R guided on the actions differs from F unguided: G moves
    state = RolloutState.start(*_model(), guided, CPU)
    assert _step(state, batch, guided).generator > 0 and not same_weights(state.dit, start)


def test_the_regress_weight_adds_the_true_world_term(batch: tuple[Episodes, DemoEncoder]) -> None:
    plain, mixed = _params(fake_steps=0, real_guidance=1.0), _params(fake_steps=0, real_guidance=1.0,
                                                                    regress_weight=0.5)
    assert _step(RolloutState.start(*_model(), plain, CPU), batch, plain).generator == 0.0
    assert _step(RolloutState.start(*_model(), mixed, CPU), batch, mixed).generator > 0.0


def test_a_saved_dmd_state_resumes_the_very_step(batch: tuple[Episodes, DemoEncoder]) -> None:
    params = _params(fake_steps=2)
    straight, resumed = straight_and_resumed(params, lambda state: _step(state, batch, params))
    assert resumed.step == 2 and resumed.critics and straight.critics
    assert len(resumed.critics.optimizer.state) == len(straight.critics.optimizer.state) > 0
    assert _step(resumed, batch, params) == _step(straight, batch, params)
    for a, b in ((resumed.ema_dit, straight.ema_dit), (resumed.critics.fake, straight.critics.fake),
                 (resumed.critics.real, straight.critics.real)):
        assert same_weights(a, b)


@pytest.mark.parametrize(("one", "other"), [("regress", "dmd"), ("regress", "distill"), ("dmd", "distill"),
                                             ("regress", "adversarial"), ("distill", "adversarial")])
def test_a_state_resumes_only_under_its_own_objective(one: str, other: str) -> None:
    a = RolloutState.start(*_model(), RolloutParams(objective=one), CPU)
    b = RolloutState.start(*_model(), RolloutParams(objective=other), CPU)
    assert (a.objective, b.objective) == (one, other)
    with pytest.raises(DemoError) as caught:
        b.load_state_dict(a.state_dict())
    assert caught.value.code == "objective_mismatch" and f"--objective {one}" in str(caught.value)
    with pytest.raises(DemoError) as caught:
        a.load_state_dict(b.state_dict())
    assert caught.value.code == "objective_mismatch"


@pytest.mark.parametrize(("flags", "code"), [(["--objective", "sft"], "bad_objective"),
                                             (["--fake-steps", "-1"], "bad_fake_steps"),
                                             (["--fake-lr", "0"], "bad_lr"),
                                             (["--real-guidance", "0"], "bad_guidance"),
                                             (["--regress-weight", "-0.5"], "bad_regress_weight"),
                                             (["--schedule-minutes", "0"], "bad_schedule_minutes")])
def test_the_cli_rejects_bad_dmd_settings(tmp_path: object, flags: list[str], code: str) -> None:
    assert rejected_code(tmp_path, "dmd", flags) == code
