"""Streaming decoders: the protocol (`base`), the tiny test decoder, the Wan2.1 VAE decoder and the
TAEHV-layout preview decoder. `engine.catalog.ModelCatalog` maps each decoder kind to its factory."""

from engine.decoders.base import DECODER_PREFIX, StreamingDecoder

__all__ = ["DECODER_PREFIX", "StreamingDecoder"]
