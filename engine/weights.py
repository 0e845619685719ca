"""Loading a DiT checkpoint in the Wan2.1 `diffusion_pytorch_model.safetensors` layout.

DiT keys carry no prefix (exactly the manifest's `dit` keys), `action_embedding.*` is optional
(absent: zero-initialised, so a text-to-video checkpoint behaves as one). A combined checkpoint
(e.g. the demo model) may also hold the streaming decoder under `streaming_decoder.` and the
built-in text encoder under `text_encoder.`. Anything else is an error listing the keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from engine.decoders.base import DECODER_PREFIX
from engine.decoders.weights import check_state
from engine.errors import ConfigError, WeightsError
from engine.model.dit import ACTION_PREFIX, CausalDiT
from engine.text import TEXT_PREFIX

__all__ = ["DTYPES", "Checkpoint", "load_checkpoint", "load_dit", "parse_dtype"]

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def parse_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """None -> bfloat16 on CUDA, float32 elsewhere; a name or torch dtype from DTYPES otherwise."""
    if dtype is None:
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if isinstance(dtype, torch.dtype):
        if dtype in DTYPES.values():
            return dtype
    elif dtype in DTYPES:
        return DTYPES[dtype]
    raise ConfigError("bad_dtype", f"dtype {dtype!r} is not supported; use one of {sorted(DTYPES)}")


@dataclass
class Checkpoint:
    dit: dict[str, torch.Tensor]
    decoder: dict[str, torch.Tensor] = field(default_factory=dict)
    text: dict[str, torch.Tensor] = field(default_factory=dict)


def load_checkpoint(path: str | Path) -> Checkpoint:
    path = Path(path)
    if not path.is_file():
        raise WeightsError("weights_not_found", f"weights file {str(path)!r} does not exist")
    try:
        state = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise WeightsError(
            "weights_unreadable", f"{str(path)!r} is not a safetensors file ({exc}); convert pickles first"
        ) from exc
    checkpoint = Checkpoint(dit={})
    for key, value in state.items():
        if key.startswith(DECODER_PREFIX):
            checkpoint.decoder[key[len(DECODER_PREFIX) :]] = value
        elif key.startswith(TEXT_PREFIX):
            checkpoint.text[key[len(TEXT_PREFIX) :]] = value
        else:
            checkpoint.dit[key] = value
    return checkpoint


def load_dit(model: CausalDiT, state: dict[str, torch.Tensor]) -> None:
    """Strictly load `state` into `model` (action keys all present or all absent)."""
    has_action = any(k.startswith(ACTION_PREFIX) for k in state)
    check_state(model, state, "DiT", optional_prefix="" if has_action else ACTION_PREFIX)
    with torch.no_grad():
        model.load_state_dict(state, strict=has_action)
    if not has_action:
        model.zero_action_output()
