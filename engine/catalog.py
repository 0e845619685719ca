"""The models an engine can be built from: configs by name, decoder factories by kind.

A `ModelCatalog` is a plain object that whoever composes the program builds and hands to
`Engine.create`: `core_catalog()` holds the core's own models (tiny, wan-1.3b and its world and
preview variants) and decoders (tiny, wan_vae, taehv); a model family outside the core adds its entries with `add_decoder` and `add_config`
(`demo.registration.register_demo` does so for the demo model). The core never imports such
a family.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from engine.config import ModelConfig, preview_config, tiny_config, wan_13b_config, wan_13b_world_config
from engine.decoders.base import StreamingDecoder
from engine.decoders.tiny import build_tiny_decoder
from engine.errors import ConfigError

__all__ = ["DecoderFactory", "ModelCatalog", "core_catalog"]

DecoderFactory = Callable[[ModelConfig, torch.device, torch.dtype], StreamingDecoder]


@dataclass
class ModelCatalog:
    """Model configs by name and the decoder factory of each decoder kind."""

    _configs: dict[str, ModelConfig] = field(default_factory=dict)
    _decoders: dict[str, DecoderFactory] = field(default_factory=dict)

    def add_decoder(self, kind: str, factory: DecoderFactory) -> None:
        if kind in self._decoders:
            raise ConfigError("duplicate_decoder", f"decoder kind {kind!r} is already in the catalog")
        self._decoders[kind] = factory

    def add_config(self, config: ModelConfig) -> None:
        """Add `config` under `config.name`; its decoder kind must already be in the catalog."""
        if config.name in self._configs:
            raise ConfigError("duplicate_model", f"model {config.name!r} is already in the catalog; pick another name")
        self._check_decoder(config)
        self._configs[config.name] = config

    def config(self, name: str) -> ModelConfig:
        """The config added under `name`; a `ConfigError` listing the valid names otherwise."""
        if name not in self._configs:
            raise ConfigError("unknown_model", f"unknown model {name!r}; valid names: {', '.join(self.names())}")
        return self._configs[name]

    def names(self) -> list[str]:
        return sorted(self._configs)

    def decoder_kinds(self) -> list[str]:
        return sorted(self._decoders)

    def build_decoder(self, config: ModelConfig, device: torch.device, dtype: torch.dtype) -> StreamingDecoder:
        self._check_decoder(config)
        return self._decoders[config.decoder_kind](config, device, dtype)

    def _check_decoder(self, config: ModelConfig) -> None:
        if config.decoder_kind not in self._decoders:
            raise ConfigError(
                "unknown_decoder",
                f"model {config.name!r}: decoder kind {config.decoder_kind!r} is not one of {self.decoder_kinds()}",
            )


def _wan_vae_decoder(config: ModelConfig, device: torch.device, dtype: torch.dtype) -> StreamingDecoder:
    from engine.decoders.wan_vae import build_wan_vae_decoder  # imported only when a Wan VAE is built

    return build_wan_vae_decoder(config, device, dtype)


def _taehv_decoder(config: ModelConfig, device: torch.device, dtype: torch.dtype) -> StreamingDecoder:
    from engine.decoders.taehv import build_taehv_decoder  # imported only when a preview decoder is built

    return build_taehv_decoder(config, device, dtype)


def core_catalog() -> ModelCatalog:
    """A new catalog holding the core's models (tiny, wan-1.3b, wan-1.3b-world and the -preview of
    both wan geometries) and decoders (tiny, wan_vae, taehv)."""
    catalog = ModelCatalog()
    catalog.add_decoder("tiny", build_tiny_decoder)
    catalog.add_decoder("wan_vae", _wan_vae_decoder)
    catalog.add_decoder("taehv", _taehv_decoder)
    catalog.add_config(tiny_config())
    wan, world = wan_13b_config(), wan_13b_world_config()
    for config in (wan, world, preview_config(wan), preview_config(world)):
        catalog.add_config(config)
    return catalog
