"""Stage 1: the autoencoder, trained on rendered frames with noisy latents."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from demo._progress import Budget, LossLog
from demo.autoencoder import AEConfig, DemoDecoder, DemoEncoder
from demo.data import EpisodeSource

__all__ = ["AETrainParams", "train_autoencoder"]


@dataclass(frozen=True)
class AETrainParams:
    batch: int = 32  # episodes per step
    frames: int = 4  # frames per episode
    lr: float = 1e-3
    weight_decay: float = 0.0
    latent_noise: float = 0.1  # absolute noise on raw latents: the decoder learns to forgive
    latent_l2: float = 1e-3  # keeps raw latents near unit scale
    stats_batches: int = 8  # batches used to measure the latent mean/std


def _lr(base: float, frac: float, warmup: float = 0.03) -> float:
    if frac < warmup:
        return base * frac / warmup
    return base * 0.5 * (1 + math.cos(math.pi * (frac - warmup) / (1 - warmup)))


def train_autoencoder(source: EpisodeSource, cfg: AEConfig, budget: Budget, params: AETrainParams,
                      log: LossLog) -> tuple[DemoEncoder, DemoDecoder]:
    """Train until the budget is spent; returns the encoder and decoder with latent statistics set."""
    device = source.device
    enc, dec = DemoEncoder(cfg).to(device), DemoDecoder(cfg).to(device)
    opt = torch.optim.AdamW([*enc.parameters(), *dec.parameters()], lr=params.lr,
                            weight_decay=params.weight_decay, betas=(0.9, 0.99))
    use_bf16 = device.type == "cuda"
    while not budget.done():
        for group in opt.param_groups:
            group["lr"] = _lr(params.lr, budget.fraction())
        with torch.no_grad():
            x = source.sample(params.batch, params.frames, params.frames).frames.flatten(0, 1)  # (N, 3, H, W)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16):
            z = enc.raw(x)
            recon = dec(z + params.latent_noise * torch.randn_like(z))
        recon = recon.float()
        rec = F.l1_loss(recon, x) + F.mse_loss(recon, x)
        loss = rec + params.latent_l2 * z.float().pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([*enc.parameters(), *dec.parameters()], 1.0)
        opt.step()
        value = float(rec.detach())
        log.add("autoencoder reconstruction (L1+MSE)", value)
        budget.tick(value)
    _set_latent_stats(source, enc, dec, params)
    return enc.eval(), dec.eval()


@torch.no_grad()
def _set_latent_stats(source: EpisodeSource, enc: DemoEncoder, dec: DemoDecoder, params: AETrainParams) -> None:
    zs = []
    for _ in range(params.stats_batches):
        x = source.sample(params.batch, params.frames, params.frames).frames.flatten(0, 1)
        zs.append(enc.raw(x).float().transpose(0, 1).flatten(1))  # (C, N*h*w)
    z = torch.cat(zs, dim=1)
    mean, std = z.mean(dim=1), z.std(dim=1).clamp_min(1e-3)
    for module in (enc, dec):
        module.latent_mean.copy_(mean)
        module.latent_std.copy_(std)
