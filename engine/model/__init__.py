"""The causal DiT and its pieces."""

from engine.model.blocks import AttnContext
from engine.model.dit import ACTION_PREFIX, CausalDiT
from engine.model.masks import block_causal_mask, context_chunks

__all__ = ["ACTION_PREFIX", "AttnContext", "CausalDiT", "block_causal_mask", "context_chunks"]
