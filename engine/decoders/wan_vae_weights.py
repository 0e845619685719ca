"""Loading Wan2.1 VAE decoder weights: the official ``Wan2.1_VAE.pth`` or a safetensors file.

The official file holds the whole VAE (encoder, ``conv1``, ``conv2``, decoder). The decoder
keeps what it uses — keys starting ``decoder.`` or ``conv2.`` — and loads them strictly: every
decoder key present, every shape equal, or a :class:`WeightsError` naming what differs.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn

from engine.errors import WeightsError

__all__ = ["decoder_state_dict", "load_wan_vae_file", "load_wan_vae_state_dict"]

# the official checkpoint's top-level prefixes of the decoder half
DECODER_PREFIXES = ("decoder.", "conv2.")
MAX_LISTED = 5  # keys named in an error message before "..."


def _listed(keys: list[str]) -> str:
    shown = ", ".join(keys[:MAX_LISTED])
    return shown + (f" ... ({len(keys)} in all)" if len(keys) > MAX_LISTED else "")


def decoder_state_dict(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The decoder half of a full VAE state dict (keys starting 'decoder.' or 'conv2.')."""
    return {k: v for k, v in state.items() if k.startswith(DECODER_PREFIXES)}


def load_wan_vae_state_dict(decoder: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Copy a (full or decoder-only) Wan VAE state dict into `decoder`, strictly."""
    wanted = decoder.state_dict()
    given = decoder_state_dict(state)
    missing = sorted(set(wanted) - set(given))
    if missing:
        raise WeightsError(
            "vae_missing_keys",
            f"the VAE checkpoint lacks {len(missing)} decoder keys ({_listed(missing)}); "
            "pass the Wan2.1 VAE file (Wan2.1_VAE.pth) or its decoder half",
        )
    extra = sorted(set(given) - set(wanted))
    if extra:
        raise WeightsError(
            "vae_unexpected_keys",
            f"the VAE checkpoint has decoder keys this decoder lacks ({_listed(extra)}); "
            "it is not a Wan2.1 VAE or the decoder config differs",
        )
    wrong = [
        f"{k} {tuple(given[k].shape)} != {tuple(wanted[k].shape)}"
        for k in wanted
        if tuple(given[k].shape) != tuple(wanted[k].shape)
    ]
    if wrong:
        raise WeightsError(
            "vae_shape_mismatch",
            f"{len(wrong)} VAE decoder tensors have the wrong shape ({_listed(wrong)}); "
            "check the decoder config against the checkpoint",
        )
    not_float = sorted(k for k in wanted if not given[k].is_floating_point())
    if not_float:
        raise WeightsError("vae_bad_dtype", f"VAE tensors must be floating point: {_listed(not_float)}")
    decoder.load_state_dict(given, strict=True)


def load_wan_vae_file(decoder: nn.Module, path: str | Path) -> None:
    """Load `path` (.pth/.pt torch pickle, read with weights_only=True, or .safetensors)."""
    path = Path(path)
    if not path.is_file():
        raise WeightsError("vae_file_missing", f"VAE weights file {str(path)!r} does not exist")
    if path.suffix == ".safetensors":
        state = load_file(str(path), device="cpu")
    elif path.suffix in (".pth", ".pt"):
        try:
            loaded = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # a pickle with non-tensor objects, or a corrupt file
            raise WeightsError(
                "vae_file_unreadable", f"cannot read {str(path)!r} as a weights-only torch file: {exc}"
            ) from exc
        if not isinstance(loaded, dict) or not all(isinstance(v, torch.Tensor) for v in loaded.values()):
            raise WeightsError("vae_file_layout", f"{str(path)!r} is not a flat state dict of tensors")
        state = loaded
    else:
        raise WeightsError(
            "vae_file_type", f"VAE weights {str(path)!r}: use a .pth/.pt torch file or a .safetensors file"
        )
    load_wan_vae_state_dict(decoder, state)
