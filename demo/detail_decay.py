"""How much spatial detail the model's chunks keep, chunk after chunk of its own context:
``python -m demo.detail_decay --weights DIR [--chunks 12] [--episodes 16] [--json out.json]``.

Episodes of the training mix (half the long-play script's vigorous play, half structured random
play; other seeds than the evaluation's) start from two true chunks; the model then generates
``--chunks`` chunks with the served sampling, each reading its own earlier chunks as context
(``demo._rollout_cache``, whose cache equals the engine's). Per generated chunk it prints the
latent detail of the world's chunk and of the model's (``demo._train_adversarial.detail_energy``:
per latent channel the RMS of neighbouring cells' differences, mean over the channels) and their
ratio. The world keeps its detail; a model whose chunks are a little smoother than their context
loses it chunk after chunk, which the long play's texture statistic sees as plain ground a second
or two into play. Minutes on a CPU where the long play takes a quarter of an hour: a quick look at
a candidate before the full evaluation, not a substitute for it.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from demo._rollout_cache import RolloutCache
from demo._train_adversarial import detail_energy
from demo._train_dit import encode_video
from demo.actions import action_batch
from demo.autoencoder import DemoEncoder, ae_config_for
from demo.conditioning import action_features
from demo.config import MODELS
from demo.data import EpisodeSource, SourceParams
from demo.errors import DemoError, exit_code
from demo.export import load_trained
from demo.script import scripted_play
from demo.world import WorldParams
from engine.attention import AttentionBackend
from engine.config import ModelConfig
from engine.model import CausalDiT
from engine.text import HashTextEncoder

__all__ = ["DetailDecay", "build_parser", "detail_decay", "main"]


@dataclass(frozen=True)
class DetailDecay:
    world: list[float]  # per generated chunk: the world's chunk's detail
    model: list[float]  # the model's chunk's detail
    episodes: int

    @property
    def ratio(self) -> list[float]:
        return [m / w if w > 0 else 0.0 for m, w in zip(self.model, self.world, strict=True)]


def _mean_detail(latents: torch.Tensor) -> float:
    return float(detail_energy(latents).mean())


@torch.no_grad()
def detail_decay(dit: CausalDiT, text: HashTextEncoder, encoder: DemoEncoder, config: ModelConfig,
                 world: WorldParams, chunks: int, episodes: int, seed: int = 7) -> DetailDecay:
    """The world's and the model's latent detail per generated chunk, over ``episodes`` episodes
    drawn with ``seed`` (deterministic on a CPU)."""
    device = torch.device("cpu")
    fpc, window = config.latent_frames_per_chunk, config.window_chunks
    script = action_batch(scripted_play(900.0, seed + 1, config.fps, fpc).actions)
    source = EpisodeSource(world, device, seed=seed, params=SourceParams(pool_size=max(1, min(episodes, 8)),
                                                                         scripted_probability=0.5), script=script)
    sample = source.sample(episodes, (window + chunks) * fpc, fpc)
    clean = encode_video(encoder, sample.frames)
    actions = action_features(sample.actions, config)
    noise = torch.Generator().manual_seed(seed + 1)
    cache = RolloutCache(dit.eval(), config, AttentionBackend.create("sdpa", device), dit.new_rope(device))
    table = {p: dit.embed_text(text.encode([p]))[0] for p in {p for row in sample.prompts for p in row}}
    truth, made = [], []
    for k in range(window + chunks):
        part = slice(k * fpc, (k + 1) * fpc)
        prompt = torch.stack([table[row[k]] for row in sample.prompts])
        if k < window:
            cache.write(clean[:, :, part], actions[:, part], prompt, noise)
            continue
        chunk = cache.generate(actions[:, part], prompt, noise)
        truth.append(_mean_detail(clean[:, :, part]))
        made.append(_mean_detail(chunk))
    return DetailDecay(truth, made, episodes)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m demo.detail_decay", description=__doc__.split("\n\n")[0])
    p.add_argument("--weights", type=Path, required=True, help="a directory holding demo.safetensors, "
                   "demo_encoder.safetensors and demo.json (engine/weights: the shipped model)")
    p.add_argument("--model", default="demo", choices=sorted(MODELS))
    p.add_argument("--chunks", type=int, default=12, help="chunks generated after the true context (default 12)")
    p.add_argument("--episodes", type=int, default=16, help="episodes, generated as one batch (default 16)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default torch's)")
    p.add_argument("--json", type=Path, default=None, help="write the figures here too")
    return p


def run(args: argparse.Namespace) -> DetailDecay:
    if not 1 <= args.chunks <= 64:
        raise DemoError("bad_chunks", f"--chunks must lie in [1, 64], got {args.chunks}")
    if not 1 <= args.episodes <= 256:
        raise DemoError("bad_episodes", f"--episodes must lie in [1, 256], got {args.episodes}")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    config = MODELS[args.model]
    trained = load_trained(args.weights, config, ae_config_for(config))
    found = detail_decay(trained.dit, trained.text, trained.encoder.eval(), config,
                         WorldParams(width=config.width, height=config.height), args.chunks, args.episodes, args.seed)
    print("chunk  world  model  model/world")
    for k, (w, m, r) in enumerate(zip(found.world, found.model, found.ratio, strict=True)):
        print(f"{k:5d}  {w:5.3f}  {m:5.3f}  {r:5.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps({"weights": str(args.weights), **asdict(found), "ratio": found.ratio},
                                        indent=1) + "\n")
    return found


def main(argv: list[str] | None = None) -> int:
    return exit_code(run, build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
