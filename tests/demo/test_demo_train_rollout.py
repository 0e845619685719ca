"""Training on the model's own rollouts, at a tiny scale on CPU: the rollout's KV cache computes what
the full-sequence forward computes, the loss on a fixed batch is finite and falls, and a saved
state resumes to the very step an uninterrupted run takes."""

from __future__ import annotations

import io
import itertools
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import pytest
import torch

from demo import _train_rollout
from demo._rollout_cache import RolloutCache
from demo._train_rollout import (
    RolloutParams,
    RolloutState,
    average_decay,
    horizon_at,
    rollout_step,
    true_chunks,
)
from demo.actions import action_batch
from demo.autoencoder import AEConfig, DemoEncoder
from demo.config import CONFIG
from demo.data import Episodes, EpisodeSource, SourceParams
from demo.errors import DemoError
from demo.script import scripted_play
from demo.train_rollout import build_parser, run, schedule_fraction
from demo.world import WorldParams
from engine.attention import AttentionBackend
from engine.config import ModelConfig
from engine.model import CausalDiT
from engine.text import HashTextEncoder

# 32x32 frames, 4x4 latents of 8 channels, patch 2: 4 tokens per frame, 16 per chunk
TINY = CONFIG.with_overrides(name="demo-rollout-test", dim=32, num_heads=2, num_layers=2, ffn_dim=64,
                             latent_height=4, latent_width=4, text_dim=16, extra={})
WORLD = WorldParams(width=32, height=32, map_size=64)
CPU = torch.device("cpu")
T = TypeVar("T")


def _model(config: ModelConfig = TINY) -> tuple[CausalDiT, HashTextEncoder]:
    dit, text = CausalDiT(config), HashTextEncoder(config)
    dit.init_random(3)
    text.init_random()
    return dit, text


def same_weights(a: CausalDiT, b: CausalDiT) -> bool:
    return all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def step_with(step: Callable[..., T], state: RolloutState, batch: tuple[Episodes, DemoEncoder],
              params: RolloutParams) -> T:
    """One training step of the tiny model on `batch`, with the same seeded generators every time."""
    episodes, encoder = batch
    gen, noise = torch.Generator().manual_seed(5), torch.Generator().manual_seed(6)
    return step(state, episodes, encoder, TINY, AttentionBackend.create("sdpa", CPU), params, 0.5, gen, noise)


def rejected_code(tmp_path: object, objective: str, flags: list[str]) -> str:
    """The error code `python -m demo.train_rollout` stops with, from the shipped weights on a CPU
    under `--objective objective` and `flags`."""
    args = build_parser().parse_args(["--resume", "engine/weights", "--out", str(tmp_path), "--device", "cpu",
                                      "--objective", objective, *flags])
    with pytest.raises(DemoError) as caught:
        run(args)
    return caught.value.code


def cli_one_step(out: Path, objective: str, flags: Sequence[str] = ()) -> dict[str, Path]:
    """One step of `python -m demo.train_rollout` from the shipped weights on a CPU at batch 1,
    horizon 1, under `--objective objective` and `flags`; the files it wrote."""
    return run(build_parser().parse_args(["--resume", "engine/weights", "--out", str(out), "--device", "cpu",
                                          "--objective", objective, *flags, "--steps", "1", "--batch", "1",
                                          "--pool", "1", "--min-horizon", "1", "--max-horizon", "1"]))


def straight_and_resumed(params: RolloutParams, advance: Callable[[RolloutState], object],
                         steps: int = 2) -> tuple[RolloutState, RolloutState]:
    """A tiny state advanced `steps` steps, and one started from other weights (fresh optimizers
    and networks) that then loaded the first's saved state."""
    straight = RolloutState.start(*_model(), params, CPU)
    for _ in range(steps):
        advance(straight)
    buffer = io.BytesIO()
    torch.save(straight.state_dict(), buffer)
    dit, text = _model()
    dit.init_random(9)
    resumed = RolloutState.start(dit, text, params, CPU)
    resumed.load_state_dict(torch.load(io.BytesIO(buffer.getvalue()), weights_only=True))
    return straight, resumed


def tiny_batch(chunks: int) -> tuple[Episodes, DemoEncoder]:
    """Two scripted episodes of `chunks` chunks from a one-terrain pool, and an untrained encoder."""
    encoder = DemoEncoder(AEConfig(latent_channels=8, downsample=8)).eval()
    script = action_batch(scripted_play(30, seed=2).actions)
    source = EpisodeSource(WORLD, CPU, seed=1, params=SourceParams(pool_size=1, scripted_probability=0.5),
                           script=script)
    return source.sample(2, chunks * TINY.latent_frames_per_chunk, TINY.latent_frames_per_chunk), encoder


@pytest.fixture(scope="module")
def batch() -> tuple[Episodes, DemoEncoder]:
    return tiny_batch(5)


def test_the_rollout_cache_reads_the_window_as_the_full_sequence_forward_does() -> None:
    config = TINY.with_overrides(cache_context_noise=0.0)
    dit, _ = _model(config)
    attend = AttentionBackend.create("sdpa", CPU)
    gen = torch.Generator().manual_seed(0)
    fpc = config.latent_frames_per_chunk
    latents = torch.randn(2, config.in_dim, 4 * fpc, 4, 4, generator=gen)
    actions = torch.randn(2, 4 * fpc, config.action_features, generator=gen)
    context = torch.randn(2, config.text_len, config.dim, generator=gen)
    sigma = torch.tensor([0.7, 0.3])
    t = torch.zeros(2, 4 * fpc)
    t[:, 3 * fpc:] = sigma[:, None].repeat_interleave(fpc, 1) * config.num_train_timesteps
    with torch.no_grad():
        full = dit.forward_full(latents, t, actions, context, dit.new_rope(CPU), attend)[:, :, 3 * fpc:]
        cache = RolloutCache(dit, config, attend, dit.new_rope(CPU))
        for k in range(3):  # chunk 0 drops out of chunk 3's window of two, as in the mask
            part = slice(k * fpc, (k + 1) * fpc)
            cache.write(latents[:, :, part], actions[:, part], context, gen)
        mine = cache.flow(latents[:, :, 3 * fpc:], sigma, actions[:, 3 * fpc:], context)
    assert torch.allclose(mine, full, atol=1e-4)
    assert len(cache.chunks) == 2 and cache.next_chunk == 3


def test_generation_writes_each_new_chunk_into_the_cache(batch: tuple[Episodes, DemoEncoder]) -> None:
    dit, _ = _model()
    cache = RolloutCache(dit, TINY, AttentionBackend.create("sdpa", CPU), dit.new_rope(CPU))
    gen = torch.Generator().manual_seed(0)
    actions = torch.zeros(2, TINY.latent_frames_per_chunk, TINY.action_features)
    context = torch.zeros(2, TINY.text_len, TINY.dim)
    out = [cache.generate(actions, context, gen) for _ in range(3)]
    assert out[0].shape == (2, 8, 4, 4, 4)
    assert all(torch.isfinite(o).all() for o in out)
    assert cache.next_chunk == 3 and len(cache.chunks) == 2 and len(cache.chunks[0]) == TINY.num_layers


def _step(state: RolloutState, batch: tuple[Episodes, DemoEncoder], params: RolloutParams) -> float:
    episodes, encoder = batch
    attend = AttentionBackend.create("sdpa", CPU)
    gen, noise = torch.Generator().manual_seed(5), torch.Generator().manual_seed(6)  # the same draws every step
    return rollout_step(state, episodes, encoder, TINY, attend, params, 0.5, gen, noise)


def test_the_loss_on_a_fixed_batch_is_finite_and_falls(batch: tuple[Episodes, DemoEncoder]) -> None:
    params = RolloutParams(batch=2, lr=3e-3, warmup_steps=1)
    state = RolloutState.start(*_model(), params, CPU)
    losses = [_step(state, batch, params) for _ in range(6)]
    assert all(torch.isfinite(torch.tensor(losses)))
    assert all(b < a for a, b in itertools.pairwise(losses))
    assert losses[-1] < 0.9 * losses[0]
    assert state.step == 6 and state.losses == losses


def test_a_saved_state_resumes_the_step_and_the_optimizer(batch: tuple[Episodes, DemoEncoder]) -> None:
    params = RolloutParams(batch=2, lr=3e-3, warmup_steps=1)
    straight = RolloutState.start(*_model(), params, CPU)
    for _ in range(2):
        _step(straight, batch, params)
    buffer = io.BytesIO()
    torch.save(straight.state_dict(), buffer)
    resumed = RolloutState.start(*_model(), params, CPU)  # other weights, a fresh optimizer
    resumed.load_state_dict(torch.load(io.BytesIO(buffer.getvalue()), weights_only=True))
    assert resumed.step == 2
    moments = [s["exp_avg"] for s in resumed.optimizer.state.values()]
    assert len(moments) == len(list(straight.optimizer.state.values())) and all(m.abs().sum() > 0 for m in moments)
    assert _step(resumed, batch, params) == _step(straight, batch, params)
    for a, b in zip(resumed.ema_dit.parameters(), straight.ema_dit.parameters(), strict=True):
        assert torch.equal(a, b)


def test_the_horizon_grows_from_the_minimum_to_the_maximum_by_half_the_budget() -> None:
    params = RolloutParams(min_horizon=4, max_horizon=24)
    assert [horizon_at(params, f) for f in (0.0, 0.25, 0.5, 0.9)] == [4, 14, 24, 24]


def test_a_run_over_several_calls_spreads_its_schedule_over_the_planned_minutes() -> None:
    # one call alone: its own budget is the whole schedule
    assert schedule_fraction(0.0, 270.0, 540.0, None) == 0.5
    # the second of two 9-minute calls planned as 18 minutes: half-way at its start, not back at 0.5 of 9
    assert schedule_fraction(540.0, 0.0, 540.0, 1080.0) == 0.5
    assert schedule_fraction(540.0, 270.0, 540.0, 1080.0) == 0.75
    assert schedule_fraction(540.0, 900.0, 540.0, 1080.0) == 1.0  # past the plan: the schedule's end
    params = RolloutParams(min_horizon=4, max_horizon=24)
    assert horizon_at(params, schedule_fraction(0.0, 270.0, 540.0, 1080.0)) == 14  # still growing in call one


def test_scripted_episodes_hold_the_scripts_directions(batch: tuple[Episodes, DemoEncoder]) -> None:
    script = action_batch(scripted_play(30, seed=2).actions)
    source = EpisodeSource(WORLD, CPU, seed=1, params=SourceParams(pool_size=1, scripted_probability=1.0,
                                                                   from_rest_probability=0.0), script=script)
    episodes = source.sample(3, 40, 4)
    for row in range(3):  # every episode is a stretch of the script
        keys = episodes.actions.keys[row]
        found = [s for s in range(script.keys.shape[1] - 46 + 1)
                 if torch.equal(script.keys[0, s + 6:s + 46], keys)]
        assert found, row


def test_the_weight_average_ramps_up_so_a_short_run_writes_what_it_learned() -> None:
    """The written (averaged) weights of a run of a few hundred steps follow its last tens of steps:
    the decay is at most (1 + step) / (10 + step) and at most the configured one."""
    assert [average_decay(0.995, s) for s in (0, 8, 90)] == [0.1, 0.5, 0.91]
    assert average_decay(0.995, 152) == 153 / 162  # where a fixed 0.995 kept 47% of the start weights
    assert average_decay(0.995, 5000) == 0.995 and average_decay(0.5, 100) == 0.5
    kept = 1.0
    for step in range(152):
        kept *= average_decay(0.995, step)
    assert kept < 1e-3 < 0.995 ** 152


def test_a_share_of_steps_starts_from_nothing_as_a_served_session_does() -> None:
    """``fresh_share``: that share of steps caches no true chunk; without it nothing is drawn, so a run
    without fresh starts draws its sigmas and noise as before."""
    gen = torch.Generator().manual_seed(4)
    before = gen.get_state()
    assert [true_chunks(RolloutParams(), 2, gen) for _ in range(5)] == [2] * 5
    assert torch.equal(gen.get_state(), before)
    assert [true_chunks(RolloutParams(fresh_share=1.0), 2, gen) for _ in range(5)] == [0] * 5
    draws = [true_chunks(RolloutParams(fresh_share=0.25), 2, torch.Generator().manual_seed(s)) for s in range(400)]
    assert set(draws) == {0, 2} and draws.count(0) == FRESH_OF_400


FRESH_OF_400 = 102  # of seeds 0..399 at share 0.25: torch.rand of each seed's first draw below 0.25


@pytest.mark.parametrize(("share", "trained_chunks"), [(0.0, 3), (1.0, 5)])
def test_a_fresh_step_makes_and_trains_every_chunk_from_the_first(
        batch: tuple[Episodes, DemoEncoder], monkeypatch: pytest.MonkeyPatch, share: float,
        trained_chunks: int) -> None:
    """Five-chunk episodes, a window of two: on true context three chunks are trained, from nothing all
    five, the first with an empty cache."""
    read: list[int] = []
    regress = _train_rollout.regress_loss

    def counted(state: RolloutState, cache: RolloutCache, *args: object) -> torch.Tensor:
        read.append(len(cache.chunks))
        return regress(state, cache, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(_train_rollout, "regress_loss", counted)
    params = RolloutParams(batch=2, fresh_share=share)
    loss = _step(RolloutState.start(*_model(), params, CPU), batch, params)
    assert TINY.window_chunks == 2 and len(read) == trained_chunks and math.isfinite(loss)
    assert read == ([2, 2, 2] if share == 0.0 else [0, 1, 2, 2, 2])  # cached chunks each one reads


def test_the_cli_rejects_a_fresh_share_outside_zero_to_one(tmp_path: object) -> None:
    assert rejected_code(tmp_path, "regress", ["--fresh-share", "1.5"]) == "bad_fresh_share"
