"""The adversarial objective (``--objective adversarial``) at a tiny scale on CPU: the critic's shape,
its hinge loss, the generator's term that leaves the critic alone, a step that moves both, a critic
that learns to tell the world's chunks from a random generator's, the regress term's weight, an
exact resume, and the CLI's checks."""

from __future__ import annotations

import copy
import dataclasses
import json
import math

import pytest
import torch

from demo import _train_adversarial
from demo._rollout_cache import RolloutCache
from demo._rollout_critics import AdversarialParams, LatentCritic
from demo._train_adversarial import (
    PEAK_RATIO,
    AdversarialLosses,
    adversarial_step,
    critic_loss,
    detail_energy,
    detail_loss,
    generator_term,
    latent_spectrum,
)
from demo._train_rollout import RolloutParams, RolloutState
from demo.autoencoder import DemoEncoder
from demo.config import CONFIG
from demo.data import Episodes
from tests.demo.test_demo_train_rollout import (
    CPU,
    TINY,
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


def _params(lr: float = 3e-3, **adversarial: object) -> RolloutParams:
    return RolloutParams(batch=2, lr=lr, warmup_steps=1, weight_decay=0.0, ema_decay=0.5, objective="adversarial",
                         adversarial=AdversarialParams(**adversarial))  # type: ignore[arg-type]


def _step(state: RolloutState, batch: tuple[Episodes, DemoEncoder], params: RolloutParams) -> AdversarialLosses:
    return step_with(adversarial_step, state, batch, params)


def _critic_weights(state: RolloutState) -> list[torch.Tensor]:
    assert state.adversary is not None
    return [p.detach().clone() for p in state.adversary.critic.parameters()]


def test_the_critic_gives_one_logit_per_patch_of_four_by_four_latent_cells() -> None:
    demo = LatentCritic(CONFIG, width=8)
    latents = torch.randn(3, CONFIG.in_dim, CONFIG.latent_frames_per_chunk, CONFIG.latent_height, CONFIG.latent_width)
    actions = torch.zeros(3, CONFIG.latent_frames_per_chunk, CONFIG.action_features)
    assert (CONFIG.latent_height, CONFIG.latent_width) == (16, 16)
    assert demo(latents, actions).shape == (3, 16)  # 4 x 4 patches of a 16 x 16 latent frame
    tiny = LatentCritic(TINY, width=8)
    assert tiny(torch.randn(2, TINY.in_dim, 4, 4, 4), torch.zeros(2, 4, TINY.action_features)).shape == (2, 1)


def test_the_critic_reads_the_actions_beside_the_latents() -> None:
    critic = LatentCritic(TINY, width=8).eval()
    latents = torch.randn(1, TINY.in_dim, 4, 4, 4)
    still, held = torch.zeros(1, 4, TINY.action_features), torch.zeros(1, 4, TINY.action_features)
    held[..., 0] = 1.0  # the first key held through the chunk
    assert not torch.equal(critic(latents, still), critic(latents, held))


def test_the_hinge_loss_is_zero_only_where_the_critic_tells_them_apart_by_a_margin() -> None:
    class Fixed(LatentCritic):
        def forward(self, latents: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
            return latents.mean(dim=(1, 2, 3, 4))[:, None]  # the chunk's mean latent as its one logit

    critic, actions = Fixed(TINY, width=8), torch.zeros(2, 4, TINY.action_features)
    true, made = torch.full((2, TINY.in_dim, 4, 4, 4), 1.5), torch.full((2, TINY.in_dim, 4, 4, 4), -2.0)
    assert float(critic_loss(critic, true, made, actions)) == 0.0  # real >= 1 and fake <= -1
    assert float(critic_loss(critic, made, true, actions)) == pytest.approx(3.0 + 2.5)  # each side wrong
    assert float(critic_loss(critic, made * 0, made * 0, actions)) == 2.0  # cannot tell: 1 + 1


def test_the_generator_s_term_pushes_its_chunk_and_leaves_the_critic_untouched() -> None:
    critic = LatentCritic(TINY, width=8)
    made = torch.randn(2, TINY.in_dim, 4, 4, 4, requires_grad=True)
    term = generator_term(critic, made, torch.zeros(2, 4, TINY.action_features))
    term.backward()
    assert made.grad is not None and float(made.grad.abs().sum()) > 0
    assert all(p.grad is None for p in critic.parameters())
    assert all(p.requires_grad for p in critic.parameters())  # trainable again for its own loss


def test_an_adversarial_step_moves_the_generator_and_the_critic(batch: tuple[Episodes, DemoEncoder]) -> None:
    params = _params()
    state = RolloutState.start(*_model(), params, CPU)
    assert state.objective == "adversarial" and state.adversary is not None and state.critics is None
    start, critic = copy.deepcopy(state.dit), _critic_weights(state)
    losses = _step(state, batch, params)
    assert math.isfinite(losses.generator) and 0.0 < losses.critic <= 4.0
    assert not same_weights(state.dit, start)
    assert not all(torch.equal(a, b) for a, b in zip(_critic_weights(state), critic, strict=True))
    assert state.step == 1 and state.losses == [losses.generator] and state.adversary.losses == [losses.critic]


def test_the_critic_learns_to_tell_the_world_from_a_random_generator(batch: tuple[Episodes, DemoEncoder]) -> None:
    params = _params(lr=1e-9, weight=0.0, critic_lr=3e-3)  # the generator all but still, the critic learning
    state = RolloutState.start(*_model(), params, CPU)
    losses = [_step(state, batch, params).critic for _ in range(12)]
    assert losses[-1] < 0.5 * losses[0], losses


def test_the_regress_weight_scales_the_true_world_term(batch: tuple[Episodes, DemoEncoder]) -> None:
    once, twice = _params(weight=0.0, regress_weight=1.0), _params(weight=0.0, regress_weight=2.0)
    a = _step(RolloutState.start(*_model(), once, CPU), batch, once).generator
    b = _step(RolloutState.start(*_model(), twice, CPU), batch, twice).generator
    assert a > 0 and b == pytest.approx(2 * a, rel=1e-5)  # the same draws: only the weight differs


def test_a_fresh_adversarial_step_samples_every_chunk_from_an_empty_cache_on(
        batch: tuple[Episodes, DemoEncoder], monkeypatch: pytest.MonkeyPatch) -> None:
    """Four-chunk episodes, a window of two: from nothing (``fresh_share`` 1) the generator samples all
    four chunks, the first reading no cached chunk; on true context the last two."""
    read: list[int] = []
    sample = _train_adversarial.sample_chunk

    def counted(cache: RolloutCache, *args: object) -> tuple[torch.Tensor, torch.Tensor]:
        read.append(len(cache.chunks))
        return sample(cache, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(_train_adversarial, "sample_chunk", counted)
    for share, expected in ((1.0, [0, 1, 2, 2]), (0.0, [2, 2])):
        read.clear()
        params = dataclasses.replace(_params(), fresh_share=share)
        losses = _step(RolloutState.start(*_model(), params, CPU), batch, params)
        assert read == expected and math.isfinite(losses.generator)


def test_the_detail_energy_is_the_rms_of_neighbouring_cells_differences_per_channel() -> None:
    stripes = torch.zeros(2, 3, 4, 4, 4)
    stripes[:, 0, :, :, 1::2] = 2.0  # channel 0: columns 0 2 0 2, every horizontal step differs by 2
    stripes[:, 1] = 5.0  # channel 1 flat; channel 2 zero
    energy = detail_energy(stripes)
    assert energy.tolist() == pytest.approx([math.sqrt((4.0 + 0.0) / 2), 0.0, 0.0])


def test_the_spectrum_puts_a_cosine_s_power_at_its_frequency() -> None:
    wave = torch.zeros(1, 1, 1, 4, 8)
    wave[0, 0, 0] = torch.cos(2 * math.pi * 2 * torch.arange(8) / 8)  # two periods across, constant down
    power = latent_spectrum(wave)
    assert power.shape == (1, 4, 5)
    assert float(power[0, 0, 2]) == pytest.approx(8.0)  # (4 * 8) / 4 with the orthonormal transform
    assert float(power.sum()) == pytest.approx(8.0)  # nothing anywhere else


def _world_like(gen: torch.Generator) -> torch.Tensor:
    return torch.randn(8, TINY.in_dim, 4, 8, 8, generator=gen)


def test_the_detail_loss_is_zero_at_the_world_s_spectrum_and_its_gradient_sharpens_a_blur() -> None:
    gen = torch.Generator().manual_seed(0)
    true = _world_like(gen)
    assert float(detail_loss(true.clone(), true)) == 0.0
    blurred = ((true + true.roll(1, dims=-1) + true.roll(1, dims=-2)) / 3).requires_grad_(True)
    loss = detail_loss(blurred, true)
    loss.backward()
    assert float(loss.detach()) > 0 and blurred.grad is not None
    with torch.no_grad():
        stepped = blurred - 0.5 * blurred.grad / blurred.grad.abs().max()
    assert float(detail_loss(stepped, true)) < float(loss.detach())
    assert bool((detail_energy(stepped) > detail_energy(blurred.detach())).all())


def test_a_grid_costs_more_than_the_same_power_spread_as_noise() -> None:
    gen = torch.Generator().manual_seed(1)
    true = _world_like(gen)
    grid = torch.zeros_like(true)
    grid[..., 0::2, 0::2] = 1.0  # a regular lattice of bright cells, period 2 each way
    grid = grid - grid.mean()
    spread = torch.randn(true.shape, generator=gen)
    spread = spread * grid.norm() / spread.norm()  # the same power over every frequency
    with_grid, with_noise = detail_loss(true + grid, true), detail_loss(true + spread, true)
    peaks = latent_spectrum(true + grid).log() - latent_spectrum(true).log()
    assert float(peaks.max()) > math.log(PEAK_RATIO)  # the lattice's frequencies stand out
    assert float(with_grid) > 3 * float(with_noise) > 0


def test_with_the_centre_hidden_the_detail_term_reads_the_ground_only() -> None:
    gen = torch.Generator().manual_seed(2)
    true = _world_like(gen)  # 8 x 8 cells
    blob = torch.zeros_like(true)
    blob[..., 3:5, 3:5] = 5.0  # a bright thing in the centre 2 x 2 cells: the avatar's place
    assert float(detail_loss(true + blob, true, hide_centre=2)) == pytest.approx(0.0, abs=1e-9)
    assert float(detail_loss(true + blob, true)) > 0.01  # seen when nothing is hidden
    beside = blob.roll(3, dims=-1)  # the same thing 3 cells to the side
    assert float(detail_loss(true + beside, true, hide_centre=2)) > 0.01


def test_with_only_the_detail_term_the_generator_moves(batch: tuple[Episodes, DemoEncoder]) -> None:
    params = _params(weight=0.0, regress_weight=0.0, detail_weight=1.0)
    state = RolloutState.start(*_model(), params, CPU)
    start = copy.deepcopy(state.dit)
    losses = _step(state, batch, params)
    assert losses.generator > 0 and not same_weights(state.dit, start)


def test_a_saved_adversarial_state_resumes_the_very_step(batch: tuple[Episodes, DemoEncoder]) -> None:
    params = _params()
    straight, resumed = straight_and_resumed(params, lambda state: _step(state, batch, params))
    assert resumed.step == 2 and resumed.adversary is not None and straight.adversary is not None
    assert resumed.adversary.losses == straight.adversary.losses and len(resumed.adversary.losses) == 2
    assert _step(resumed, batch, params) == _step(straight, batch, params)
    assert same_weights(resumed.ema_dit, straight.ema_dit) and same_weights(resumed.dit, straight.dit)
    assert all(torch.equal(a, b) for a, b in zip(_critic_weights(resumed), _critic_weights(straight), strict=True))


@pytest.mark.parametrize(("flags", "code"), [(["--adversarial-weight", "-1"], "bad_adversarial_weight"),
                                             (["--adversarial-weight", "0", "--regress-weight", "0"],
                                              "bad_adversarial_weight"),
                                             (["--adversarial-weight", "0", "--regress-weight", "0",
                                               "--detail-weight", "0"], "bad_adversarial_weight"),
                                             (["--detail-weight", "-0.1"], "bad_detail_weight"),
                                             (["--detail-hide-centre", "13"], "bad_detail_hide_centre"),
                                             (["--detail-hide-centre", "-1"], "bad_detail_hide_centre"),
                                             (["--critic-lr", "0"], "bad_lr"),
                                             (["--regress-weight", "-1"], "bad_regress_weight")])
def test_the_cli_rejects_bad_adversarial_settings(tmp_path: object, flags: list[str], code: str) -> None:
    assert rejected_code(tmp_path, "adversarial", flags) == code


def test_the_cli_trains_against_a_critic_from_the_shipped_weights(tmp_path: object) -> None:
    out = tmp_path / "adversarial"  # type: ignore[operator]
    paths = cli_one_step(out, "adversarial", ["--adversarial-weight", "0.3"])
    state = torch.load(paths["state"], map_location="cpu", weights_only=True)
    assert state["objective"] == "adversarial" and state["step"] == 1 and state["adversary"] is not None
    assert len(state["adversary"]["losses"]) == 1
    meta = json.loads(paths["meta"].read_text())
    assert meta["rollout"]["params"]["objective"] == "adversarial"
    assert meta["rollout"]["params"]["adversarial"] == {"weight": 0.3, "regress_weight": 1.0, "critic_lr": None,
                                                        "detail_weight": 0.0, "detail_hide_centre": 0,
                                                        "width": 96}
    assert meta["rollout"]["final_critic_loss"] == state["adversary"]["losses"][0]
