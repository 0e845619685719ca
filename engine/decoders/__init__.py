"""Streaming decoders by kind; each kind's module is imported only when that kind is built."""

from __future__ import annotations

import importlib

import torch

from engine.config import ModelConfig
from engine.decoders.base import DECODER_PREFIX, StreamingDecoder
from engine.errors import ConfigError

__all__ = ["DECODER_MODULES", "DECODER_PREFIX", "StreamingDecoder", "build_decoder"]

# kind -> module exposing build_decoder(config, device, dtype) -> StreamingDecoder
DECODER_MODULES = {
    "tiny": "engine.decoders.tiny",
    "wan_vae": "engine.decoders.wan_vae",
    "taehv": "engine.decoders.taehv",
    "demo_ae": "engine.demo.autoencoder",
}


def build_decoder(config: ModelConfig, device: torch.device, dtype: torch.dtype) -> StreamingDecoder:
    kind = config.decoder_kind
    if kind not in DECODER_MODULES:
        raise ConfigError("unknown_decoder", f"decoder kind {kind!r} is not one of {sorted(DECODER_MODULES)}")
    try:
        module = importlib.import_module(DECODER_MODULES[kind])
    except ImportError as exc:
        raise ConfigError("decoder_unavailable", f"decoder {kind!r} failed to import: {exc}") from exc
    return module.build_decoder(config, device, dtype)  # type: ignore[no-any-return]
