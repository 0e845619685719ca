"""Writing and reading the demo model's files.

``demo.safetensors`` (fp16) is what the engine loads: DiT keys unprefixed (the action embedding
included), the decoder under ``streaming_decoder.``, the built-in text encoder under
``text_encoder.``. ``demo_encoder.safetensors`` holds the autoencoder's encoder, which only
evaluation needs (it turns ground-truth frames into context latents). ``demo.json`` records how
the weights were trained.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from demo.autoencoder import AEConfig, DemoDecoder, DemoEncoder
from demo.errors import DemoError
from engine.config import ModelConfig
from engine.decoders.base import DECODER_PREFIX
from engine.model import CausalDiT
from engine.text import TEXT_PREFIX, HashTextEncoder

__all__ = ["ENCODER_FILE", "META_FILE", "WEIGHTS_FILE", "TrainedModel", "load_encoder", "load_trained", "write_model"]

WEIGHTS_FILE = "demo.safetensors"
ENCODER_FILE = "demo_encoder.safetensors"
META_FILE = "demo.json"


def _fp16(module: nn.Module, prefix: str = "") -> dict[str, torch.Tensor]:
    return {prefix + k: v.detach().to("cpu", torch.float16).contiguous() for k, v in module.state_dict().items()}


def write_model(out: Path, dit: nn.Module, text: nn.Module, decoder: nn.Module, encoder: nn.Module,
                meta: dict[str, object]) -> dict[str, Path]:
    """Write the three files into ``out``; returns their paths by role."""
    out.mkdir(parents=True, exist_ok=True)
    state = {**_fp16(dit), **_fp16(decoder, DECODER_PREFIX), **_fp16(text, TEXT_PREFIX)}
    paths = {"weights": out / WEIGHTS_FILE, "encoder": out / ENCODER_FILE, "meta": out / META_FILE}
    save_file(state, str(paths["weights"]), metadata={"model": "demo"})
    save_file(_fp16(encoder), str(paths["encoder"]), metadata={"model": "demo", "part": "encoder"})
    sizes = {role: paths[role].stat().st_size for role in ("weights", "encoder")}
    paths["meta"].write_text(json.dumps({**meta, "file_bytes": sizes}, indent=2, sort_keys=True) + "\n")
    return paths


@dataclass
class TrainedModel:
    """Every part of a written demo model, float32, for training on from where it stopped."""

    dit: CausalDiT
    text: HashTextEncoder
    decoder: DemoDecoder
    encoder: DemoEncoder
    meta: dict[str, object]


def _load_part(module: nn.Module, state: dict[str, torch.Tensor], prefix: str, what: str, path: Path) -> None:
    part = {k[len(prefix):]: v.float() for k, v in state.items() if k.startswith(prefix)}
    own = module.state_dict()
    wrong = [f"{k} {tuple(v.shape)} (this config: {tuple(own[k].shape)})" for k, v in part.items()
             if k in own and v.shape != own[k].shape]
    if wrong:
        raise DemoError("weights_mismatch", f"{path}: the {what} was trained for another config (is --model "
                                            f"right?): {wrong[:3]}")
    missing, unexpected = module.load_state_dict(part, strict=False)
    if missing or unexpected:
        raise DemoError("weights_mismatch", f"{path}: the {what} does not fit this trainer's config: "
                                            f"missing {missing[:5]}, unexpected {unexpected[:5]}")


def load_trained(directory: Path, model: ModelConfig, ae: AEConfig) -> TrainedModel:
    """Read the three files ``write_model`` wrote into ``directory`` (CPU, float32)."""
    weights, meta_path = directory / WEIGHTS_FILE, directory / META_FILE
    for path in (weights, meta_path):
        if not path.is_file():
            raise DemoError("resume_not_found", f"{path} does not exist; --resume takes a directory written "
                                                "by python -m demo.train")
    state = load_file(str(weights))
    dit, text, decoder = CausalDiT(model), HashTextEncoder(model), DemoDecoder(ae)
    _load_part(dit, {k: v for k, v in state.items() if not k.startswith((DECODER_PREFIX, TEXT_PREFIX))}, "",
               "DiT", weights)
    _load_part(text, state, TEXT_PREFIX, "text encoder", weights)
    _load_part(decoder, state, DECODER_PREFIX, "decoder", weights)
    meta = json.loads(meta_path.read_text())
    return TrainedModel(dit, text, decoder.eval(), load_encoder(directory / ENCODER_FILE, ae), meta)


def load_encoder(path: Path, cfg: AEConfig, device: torch.device | str = "cpu") -> DemoEncoder:
    """The evaluation encoder, float32, strictly loaded."""
    if not path.is_file():
        raise DemoError("encoder_not_found", f"{path} does not exist; pass the directory holding {ENCODER_FILE}")
    encoder = DemoEncoder(cfg)
    state = {k: v.float() for k, v in load_file(str(path)).items()}
    missing, unexpected = encoder.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise DemoError("encoder_mismatch", f"{path} does not fit the demo encoder: missing {missing[:5]}, "
                                            f"unexpected {unexpected[:5]}")
    return encoder.to(device).eval()
