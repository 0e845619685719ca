"""FLOP counts the benchmark divides by: an analytic formula for the DiT, a counted one for decoders.

DiT pass over one chunk of q = tokens_per_chunk query tokens attending kv tokens (the chunk's
context plus itself), L layers, width d, FFN width f, prompt length p:

    FLOPs = L * [ 2*q*(6*d^2 + 2*d*f)   linear layers: self q,k,v,o + cross q,o + FFN
                + 4*q*kv*d               self-attention QK^T and PV
                + 4*q*p*d ]              cross-attention QK^T and PV

Cross-attention K/V projections of the prompt (computed once per prompt), embeddings, norms,
modulation, RoPE and the head are not counted. For wan-1.3b (q = 4,680, d = 1,536, f = 8,960,
L = 30, p = 512) this is 12.15 + 4.04 * (k + 1) TFLOP at chunk k with a global cache, the count
the reference measurements in docs/performance.md use.

Decoder FLOPs are counted by running the decoder on the meta device under
torch.utils.flop_counter (convolutions, matmuls, attention): 40.65 TFLOP for a steady 12-frame
chunk of the Wan2.1 VAE at 480x832.
"""

from __future__ import annotations

import logging

import torch
from torch.utils.flop_counter import FlopCounterMode

from engine.catalog import ModelCatalog
from engine.config import ModelConfig
from engine.model.masks import context_chunks

__all__ = ["DIT_FLOP_FORMULA", "attended_chunks", "decoder_chunk_flops", "dit_pass_flops"]

logger = logging.getLogger(__name__)

DIT_FLOP_FORMULA = (
    "L*(2*q*(6*d^2 + 2*d*f) + 4*q*kv*d + 4*q*p*d) per sample and pass; q = tokens per chunk, "
    "kv = q * chunks attended (context + current), p = prompt tokens; prompt K/V projections, "
    "embeddings, norms, modulation, RoPE and head not counted"
)


def attended_chunks(config: ModelConfig, chunk_index: int) -> int:
    """Chunks a pass at `chunk_index` attends to: its sink + window context, plus itself."""
    return len(context_chunks(chunk_index, config.sink_chunks, config.window_chunks)) + 1


def dit_pass_flops(config: ModelConfig, chunk_index: int) -> float:
    """FLOPs of one DiT pass (a denoise step or the cache pass) of one session at `chunk_index`."""
    q = config.tokens_per_chunk
    kv = q * attended_chunks(config, chunk_index)
    d, f = config.dim, config.ffn_dim
    linear = 2 * q * (6 * d * d + 2 * d * f)
    self_attention = 4 * q * kv * d
    cross_attention = 4 * q * config.text_len * d
    return float(config.num_layers * (linear + self_attention + cross_attention))


def decoder_chunk_flops(config: ModelConfig, catalog: ModelCatalog, first: bool) -> float | None:
    """FLOPs the model's decoder spends on one chunk of one session (counted on the meta device);
    None when the decoder cannot run on the meta device."""
    latent_shape = (
        1,
        config.out_dim,
        config.latent_frames_per_chunk,
        config.latent_height,
        config.latent_width,
    )
    meta = torch.device("meta")
    try:
        decoder = catalog.build_decoder(config, meta, torch.bfloat16)
        latents = torch.zeros(latent_shape, device=meta)
        cache = None
        if not first:  # a steady chunk: decode one chunk first to get a cache of the right shape
            _, caches = decoder.decode(latents, [None])
            cache = caches[0]
        with FlopCounterMode(display=False) as counter:
            decoder.decode(latents, [cache])
    except (RuntimeError, NotImplementedError, TypeError) as exc:
        logger.warning(
            "decoder FLOPs not counted (%s decoder on the meta device: %s)", config.decoder_kind, exc
        )
        return None
    return float(counter.get_total_flops())
