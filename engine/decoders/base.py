"""The streaming decoder protocol: latents -> uint8 RGB frames, with functional per-session caches.

`decode` never mutates the caches it is given and returns new ones, so rollback is "keep the old
cache". Caches of a batch must agree on being first (None or fresh) or not, because a first chunk
decodes to fewer frames (`frames_for(T, first=True)`).
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

__all__ = ["DECODER_PREFIX", "StreamingDecoder", "batch_starts"]

# keys of a decoder inside a combined checkpoint (e.g. the demo model's one safetensors file)
DECODER_PREFIX = "streaming_decoder."


class StreamingDecoder(Protocol):
    kind: str  # the decoder kind it is registered under in the model catalog
    label: str  # what it is, for humans (e.g. "tiny random-init upsampler, not a trained VAE")

    def new_cache(self) -> Any:
        """The cache of a session that has decoded nothing yet."""
        ...

    def decode(self, latents: torch.Tensor, caches: list[Any | None]) -> tuple[torch.Tensor, list[Any]]:
        """latents (B, C, T, h, w) -> (uint8 frames (B, F, H, W, 3) on the decoder's device, new
        caches). None in `caches` means new_cache()."""
        ...

    def cache_to(self, cache: Any, device: torch.device) -> Any:
        """The same cache with its tensors on `device` (offload / restore)."""
        ...

    def frames_for(self, latent_frames: int, first: bool) -> int:
        """Video frames decoded from `latent_frames` latent frames (first chunk or not)."""
        ...

    def is_first(self, cache: Any | None) -> bool:
        """True when decoding with this cache produces a first chunk."""
        ...

    def load_weights(self, state: dict[str, torch.Tensor]) -> None:
        """Load a state dict strictly; raise engine.errors.WeightsError naming bad keys."""
        ...


def batch_starts(decoder: StreamingDecoder, latents: torch.Tensor, caches: list[Any | None]) -> bool:
    """Whether this decode batch is a first chunk: one cache per sample, all first or none."""
    first = {decoder.is_first(cache) for cache in caches}
    if len(caches) != latents.shape[0] or len(first) > 1:
        raise ValueError("decode needs one cache per sample, all first chunks or none")
    return first.pop()
