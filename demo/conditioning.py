"""Training-side conditioning for the DiT: batched action features and per-chunk prompts.

``action_features`` builds the same rows as ``engine.actions.encode_actions`` (keys | mouse *
scale | buttons | axes) for whole batches on the device. The engine's full-sequence forward
takes one prompt context per sequence; a prompt switch inside a training sequence needs one
per chunk. Everything after self-attention in a block (output projection, cross-attention, FFN,
modulation) acts on each token alone, so ``chunked_kernels`` gives the DiT a block ``post``
kernel that folds the chunks into the batch: chunk i's tokens, frames' modulation and prompt
K/V (prompt tokens [i * text_len, (i + 1) * text_len) of the concatenated context) go through
the engine's own ``post_attention`` as one row of a larger batch. Self-attention, with the
block-causal mask, still sees the whole sequence.
"""

from __future__ import annotations

import inspect

import torch

from demo.actions import ActionBatch
from demo.errors import DemoError
from engine.config import ModelConfig
from engine.model._fused import BlockKernels, post_attention, pre_attention

__all__ = ["action_features", "chunked_kernels", "prompt_context"]

_POST = inspect.signature(post_attention)
_SPLIT = ("x", "attn", "mod", "ck", "cv")  # post_attention arguments that carry tokens, frames or prompt


def action_features(actions: ActionBatch, config: ModelConfig) -> torch.Tensor:
    """(B, T, features) float32, laid out as the engine encodes FrameActions."""
    space = config.action_space
    parts = [actions.keys.float()]
    if space.mouse:
        parts.append(actions.mouse.float() * config.mouse_scale)
    if space.buttons:
        parts.append(torch.zeros(*actions.keys.shape[:2], space.buttons, device=actions.keys.device))
    if space.axes:
        parts.append(actions.axes.float()[..., : space.axes])
    return torch.cat(parts, dim=-1)


def prompt_context(embedded: torch.Tensor, chunks: int) -> torch.Tensor:
    """(B * chunks, text_len, dim) embedded prompts, one per chunk -> (B, chunks * text_len, dim)."""
    bn, length, dim = embedded.shape
    return embedded.reshape(bn // chunks, chunks * length, dim)


def _fold(t: torch.Tensor, chunks: int) -> torch.Tensor:
    """(B, chunks * n, ...) -> (B * chunks, n, ...)."""
    return t.reshape(t.shape[0] * chunks, t.shape[1] // chunks, *t.shape[2:])


def chunked_kernels(chunks: int) -> BlockKernels:
    """Block kernels for a forward over ``chunks`` chunks whose context holds one prompt per chunk."""
    missing = [name for name in _SPLIT if name not in _POST.parameters]
    if missing:
        raise DemoError("engine_changed", f"engine.model._fused.post_attention lost arguments {missing}; "
                                          "update demo/conditioning.py to the new block kernel")

    def post(*args: object, **kwargs: object) -> torch.Tensor:
        bound = _POST.bind(*args, **kwargs)
        values = dict(bound.arguments)
        batch = values["x"].shape[0]  # type: ignore[attr-defined]
        for name in _SPLIT:
            values[name] = _fold(values[name], chunks)  # type: ignore[arg-type]
        out = post_attention(**values)  # (B * chunks, tokens per chunk, dim)
        return out.reshape(batch, -1, out.shape[-1])

    return BlockKernels(pre=pre_attention, post=post)
