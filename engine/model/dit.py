"""The causal DiT over latent frames (Wan2.1 lineage) with per-frame action conditioning.

Parameter names and shapes equal Wan2.1's `WanModel` state dict (the manifest's `dit` keys) plus
`action_embedding.*` (ours, outside the manifest; its last layer is zero-initialised whenever a
checkpoint without it is loaded, so a text-to-video checkpoint behaves exactly as one).
"""

from __future__ import annotations

import math
from typing import cast

import torch
from torch import nn

from engine.attention import AttentionBackend
from engine.config import ModelConfig
from engine.model._fused import BlockKernels
from engine.model.blocks import AttnContext, Block, Head
from engine.model.kv_fp8 import KVFp8
from engine.model.layers import sinusoidal_embedding
from engine.model.masks import block_causal_mask
from engine.rope import RopeTable

__all__ = ["ACTION_PREFIX", "CausalDiT"]

ACTION_PREFIX = "action_"
_INIT_STD = 0.02


class CausalDiT(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        c = config
        self.config = c
        self.patch_embedding = nn.Conv3d(c.in_dim, c.dim, kernel_size=c.patch_size, stride=c.patch_size)
        self.text_embedding = nn.Sequential(
            nn.Linear(c.text_dim, c.dim), nn.GELU(approximate="tanh"), nn.Linear(c.dim, c.dim)
        )
        self.time_embedding = nn.Sequential(nn.Linear(c.freq_dim, c.dim), nn.SiLU(), nn.Linear(c.dim, c.dim))
        self.time_projection = nn.Sequential(nn.SiLU(), nn.Linear(c.dim, c.dim * 6))
        self.blocks = nn.ModuleList(Block(c.dim, c.ffn_dim, c.num_heads, c.eps) for _ in range(c.num_layers))
        self.head = Head(c.dim, math.prod(c.patch_size) * c.out_dim, c.eps)
        self.action_embedding = nn.Sequential(
            nn.Linear(c.action_features, c.action_hidden_dim), nn.SiLU(), nn.Linear(c.action_hidden_dim, c.dim)
        )
        self.kernels = BlockKernels()  # eager; `compile_blocks()` swaps in compiled versions

    def compile_blocks(self) -> None:
        """Use torch.compile'd block halves (one graph serves every block); warm up before serving."""
        self.kernels = BlockKernels.compiled_versions()

    def quantize_ffn(self) -> None:
        """Run every block's FFN GEMMs in FP8 (e4m3, row scales): a lossy speed option."""
        for block in self.blocks:
            cast(Block, block).quantize_ffn()

    def quantize_projections(self) -> None:
        """Run every block's q/k/v and cross-attention q GEMMs in FP8 (e4m3, row scales): lossy."""
        for block in self.blocks:
            cast(Block, block).quantize_projections()

    def set_kv_fp8(self, scales: list[KVFp8] | None) -> None:
        """Make self-attention's q, k, v (and so the K/V the cache stores) e4m3 with these fixed
        per-layer scales (engine.model.kv_fp8); None: back to the compute dtype."""
        if scales is not None and len(scales) != len(self.blocks):
            raise ValueError(f"set_kv_fp8 needs one KVFp8 per block ({len(self.blocks)}), got {len(scales)}")
        for i, block in enumerate(self.blocks):
            cast(Block, block).kv_fp8 = None if scales is None else scales[i]

    # initialisation ----------------------------------------------------------------------
    @torch.no_grad()
    def init_random(self, seed: int) -> None:
        """Deterministic random init from `seed` (no global RNG): weights N(0, 0.02), biases 0,
        norms 1, modulations N(0, 1/dim); action embedding random too, so actions matter."""
        gen = torch.Generator().manual_seed(seed)  # CPU numbers: the same weights on every device
        for name, param in self.named_parameters():
            if name.endswith("modulation"):
                param.copy_(torch.randn(param.shape, generator=gen) / self.config.dim**0.5)
            elif "norm" in name:
                param.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith("bias"):
                param.zero_()
            else:
                param.copy_(torch.randn(param.shape, generator=gen) * _INIT_STD)

    @torch.no_grad()
    def zero_action_output(self) -> None:
        """Make the action path contribute exactly zero (for checkpoints trained without it)."""
        last = self.action_embedding[2]
        assert isinstance(last, nn.Linear)
        last.weight.zero_()
        last.bias.zero_()

    # conditioning ------------------------------------------------------------------------
    def embed_text(self, prompt: torch.Tensor) -> torch.Tensor:
        """(B, text_len, text_dim) -> (B, text_len, dim) in the parameter dtype."""
        return self.text_embedding(prompt.to(self.dtype))  # type: ignore[no-any-return]

    @property
    def dtype(self) -> torch.dtype:
        return self.patch_embedding.weight.dtype

    def cross_kv_all(self, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, text_len, dim) prompt embeddings -> K and V, each (layers, B, text_len, heads, d): every
        block's cross-attention keys and values (they depend on the prompt only; `forward(cross=...)`
        reuses them)."""
        pairs = [cast(Block, block).cross_kv(context) for block in self.blocks]
        return torch.stack([k for k, _ in pairs]), torch.stack([v for _, v in pairs])

    def modulation(self, t: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """t (B, frames) timesteps, actions (B, frames, features) -> e (B, frames, dim) and the
        6-way block modulation (B, frames, 6, dim), both fp32."""
        dtype = self.dtype
        emb = self.time_embedding(sinusoidal_embedding(self.config.freq_dim, t).to(dtype)).float()
        emb = emb + self.action_embedding(actions.to(dtype)).float()
        e0 = self.time_projection(emb.to(dtype)).float().unflatten(-1, (6, self.config.dim))
        return emb, e0

    # forwards ----------------------------------------------------------------------------
    def forward(
        self,
        latents: torch.Tensor,  # (B, C, frames, h, w)
        t: torch.Tensor,  # (B, frames)
        actions: torch.Tensor,  # (B, frames, features)
        context: torch.Tensor,  # (B, text_len, dim) from embed_text
        ctx: AttnContext,
        attend: AttentionBackend,
        cross: tuple[torch.Tensor, torch.Tensor] | None = None,  # K, V (layers, B, ...) from cross_kv_all
        kv_only: bool = False,
    ) -> torch.Tensor | None:
        """Predicted flow (noise - clean) for `latents`, fp32, same shape. Without `cross` every
        block projects the prompt's K and V itself. With `kv_only` (a cache pass: only the K/V
        that `ctx.write` stores are wanted) the last block stops once its K/V are written, the head
        is skipped, and the result is None."""
        b, _, frames, h, w = latents.shape
        ph, pw = self.config.patch_size[1:]
        x = self.patch_embedding(latents.to(self.dtype))  # (B, dim, frames, h/ph, w/pw)
        x = x.flatten(2).transpose(1, 2).float()  # (B, L, dim), frame-major tokens
        e, e0 = self.modulation(t, actions)
        last = len(self.blocks) - 1
        for layer, block in enumerate(self.blocks):
            if kv_only and layer == last:
                cast(Block, block).write_kv(x, e0, layer, ctx, self.kernels)
                return None
            kv = None if cross is None else (cross[0][layer], cross[1][layer])
            x = block(x, e0, context, layer, ctx, attend, self.kernels, kv)
        out = self.head(x, e, self.dtype)  # (B, L, ph*pw*C)
        c = self.config.out_dim
        out = out.view(b, frames, h // ph, w // pw, ph, pw, c)
        return out.permute(0, 6, 1, 2, 4, 3, 5).reshape(b, c, frames, h, w).float()

    def forward_full(
        self,
        latents: torch.Tensor,  # (B, C, frames, h, w), frames = chunks * latent_frames_per_chunk
        t: torch.Tensor,  # (B, frames): per-frame timesteps (e.g. a noise level per chunk)
        actions: torch.Tensor,  # (B, frames, features)
        context: torch.Tensor,  # (B, text_len, dim)
        rope: RopeTable,
        attend: AttentionBackend,
    ) -> torch.Tensor:
        """Training / reference forward over a whole sequence with the block-causal sink + window
        mask: equal to rolling the chunks out one by one through the KV cache."""
        c = self.config
        b, frames = latents.shape[0], latents.shape[2]
        if frames % c.latent_frames_per_chunk:
            raise ValueError(f"frames {frames} must be a multiple of {c.latent_frames_per_chunk}")
        chunks = frames // c.latent_frames_per_chunk
        mask = block_causal_mask(chunks, c.tokens_per_chunk, c.sink_chunks, c.window_chunks, latents.device)
        cos, sin = rope.for_frames([0] * b, frames)
        ctx = AttnContext(cos=cos, sin=sin, mask=mask[None, None])
        out = self(latents, t, actions, context, ctx, attend)
        assert out is not None
        return out  # type: ignore[no-any-return]

    def new_rope(self, device: torch.device) -> RopeTable:
        c = self.config
        grid = (c.latent_height // c.patch_size[1], c.latent_width // c.patch_size[2])
        return RopeTable(c.head_dim, grid, c.latent_frames_per_chunk, c.rope_theta, c.rope_max_frames, device)
