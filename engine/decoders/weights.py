"""Strict state-dict loading with errors that list what does not fit."""

from __future__ import annotations

import torch
from torch import nn

from engine.errors import WeightsError

__all__ = ["check_state", "load_strict"]


def check_state(module: nn.Module, state: dict[str, torch.Tensor], what: str, optional_prefix: str = "") -> None:
    """Raise WeightsError listing missing / unexpected keys, shape and dtype problems.
    Keys starting with `optional_prefix` (when given) may be missing."""
    expected = module.state_dict()
    missing = [k for k in expected if k not in state and not (optional_prefix and k.startswith(optional_prefix))]
    unexpected = [k for k in state if k not in expected]
    shapes = [
        f"{k}: checkpoint {tuple(state[k].shape)} vs model {tuple(v.shape)}"
        for k, v in expected.items()
        if k in state and tuple(state[k].shape) != tuple(v.shape)
    ]
    dtypes = [f"{k}: {state[k].dtype}" for k in state if k in expected and not state[k].dtype.is_floating_point]
    problems = []
    if missing:
        problems.append(f"missing keys ({len(missing)}): {missing[:10]}")
    if unexpected:
        problems.append(f"unexpected keys ({len(unexpected)}): {unexpected[:10]}")
    if shapes:
        problems.append(f"shape mismatches ({len(shapes)}): {shapes[:10]}")
    if dtypes:
        problems.append(f"non-floating dtypes ({len(dtypes)}): {dtypes[:10]}; weights must be float32/bfloat16/float16")
    if problems:
        code = "weights_dtype" if dtypes and not (missing or unexpected or shapes) else "weights_mismatch"
        raise WeightsError(code, f"{what} checkpoint does not fit the model: " + "; ".join(problems))


def load_strict(module: nn.Module, state: dict[str, torch.Tensor], what: str, optional_prefix: str = "") -> None:
    check_state(module, state, what, optional_prefix)
    module.load_state_dict(state, strict=not optional_prefix)
