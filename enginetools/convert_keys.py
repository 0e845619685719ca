"""The Wan2.1 DiT checkpoint layout (parameter names and shapes) derived from a model config.

These are the keys of Wan's ``diffusion_pytorch_model.safetensors`` (and of Self-Forcing's
generator once its ``model.`` prefix is stripped), in checkpoint order. The engine's own extra
parameters (action conditioning) are not part of it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from engine.config import ModelConfig
from engine.errors import WeightsError

__all__ = ["KeyShapes", "manifest_key_shapes", "wan_dit_key_shapes"]

KeyShapes = dict[str, tuple[int, ...]]

# Wan's timestep modulation: 6 vectors per block (shift/scale/gate x 2), 2 for the head
BLOCK_MODULATION = 6
HEAD_MODULATION = 2


def _linear(prefix: str, out_features: int, in_features: int) -> KeyShapes:
    return {f"{prefix}.weight": (out_features, in_features), f"{prefix}.bias": (out_features,)}


def _block(i: int, cfg: ModelConfig) -> KeyShapes:
    d = cfg.dim
    p = f"blocks.{i}"
    keys: KeyShapes = {f"{p}.modulation": (1, BLOCK_MODULATION, d)}
    for name in ("q", "k", "v", "o"):
        keys |= _linear(f"{p}.self_attn.{name}", d, d)
    keys |= {f"{p}.self_attn.norm_q.weight": (d,), f"{p}.self_attn.norm_k.weight": (d,)}
    keys |= {f"{p}.norm3.weight": (d,), f"{p}.norm3.bias": (d,)}
    for name in ("q", "k", "v", "o"):
        keys |= _linear(f"{p}.cross_attn.{name}", d, d)
    keys |= {f"{p}.cross_attn.norm_q.weight": (d,), f"{p}.cross_attn.norm_k.weight": (d,)}
    keys |= _linear(f"{p}.ffn.0", cfg.ffn_dim, d)
    keys |= _linear(f"{p}.ffn.2", d, cfg.ffn_dim)
    return keys


def wan_dit_key_shapes(cfg: ModelConfig) -> KeyShapes:
    """Names and shapes of a Wan2.1 text-to-video DiT with `cfg`'s sizes, in checkpoint order."""
    d = cfg.dim
    keys: KeyShapes = {
        "patch_embedding.weight": (d, cfg.in_dim, *cfg.patch_size),
        "patch_embedding.bias": (d,),
    }
    keys |= _linear("text_embedding.0", d, cfg.text_dim) | _linear("text_embedding.2", d, d)
    keys |= _linear("time_embedding.0", d, cfg.freq_dim) | _linear("time_embedding.2", d, d)
    keys |= _linear("time_projection.1", BLOCK_MODULATION * d, d)
    for i in range(cfg.num_layers):
        keys |= _block(i, cfg)
    keys["head.modulation"] = (1, HEAD_MODULATION, d)
    keys |= _linear("head.head", cfg.out_dim * math.prod(cfg.patch_size), d)
    return keys


def manifest_key_shapes(path: str | Path) -> KeyShapes:
    """The `dit.keys` of a manifest JSON ({"dit": {"keys": {name: {"shape": [...]}}}})."""
    path = Path(path)
    try:
        keys = json.loads(path.read_text())["dit"]["keys"]
        return {name: tuple(int(n) for n in entry["shape"]) for name, entry in keys.items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise WeightsError(
            "bad_manifest", f"{str(path)!r} is not a readable manifest with dit.keys.<name>.shape: {exc!r}"
        ) from exc
