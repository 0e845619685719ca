"""Per-latent-frame action conditioning: validate `FrameAction`s and turn them into feature rows.

Feature layout of one latent frame: held keys multi-hot (action space order) | mouse (dx, dy)
scaled by `mouse_scale` | button bits | axes.
"""

from __future__ import annotations

import math

import torch

from engine.api import ActionSpace, FrameAction
from engine.errors import ActionError

__all__ = ["encode_actions", "validate_action"]


def validate_action(space: ActionSpace, action: FrameAction) -> None:
    """Raise `ActionError` naming the offending field when `action` is outside `space`."""
    unknown = [key for key in action.keys if key not in space.keys]
    if unknown:
        raise ActionError(
            "bad_action_key", f"keys {unknown} are not in the model's action space; allowed: {list(space.keys)}"
        )
    if not space.mouse and action.mouse != (0.0, 0.0):
        raise ActionError("bad_action_mouse", "this model takes no mouse input; send mouse (0, 0)")
    if len(action.mouse) != 2 or not all(math.isfinite(v) for v in action.mouse):
        raise ActionError("bad_action_mouse", f"mouse must be two finite numbers (dx, dy), got {action.mouse!r}")
    if action.buttons < 0 or action.buttons >= (1 << space.buttons):
        raise ActionError(
            "bad_action_buttons",
            f"buttons bitmask {action.buttons} is outside the {space.buttons} button bits this model honours",
        )
    if len(action.axes) > space.axes:
        raise ActionError("bad_action_axes", f"{len(action.axes)} axes sent; this model honours {space.axes}")
    if not all(math.isfinite(v) and -1.0 <= v <= 1.0 for v in action.axes):
        raise ActionError("bad_action_axes", f"axes must lie in [-1, 1], got {list(action.axes)}")


def _row(space: ActionSpace, action: FrameAction, mouse_scale: float) -> list[float]:
    keys = [1.0 if key in action.keys else 0.0 for key in space.keys]
    mouse = [action.mouse[0] * mouse_scale, action.mouse[1] * mouse_scale] if space.mouse else []
    buttons = [float((action.buttons >> bit) & 1) for bit in range(space.buttons)]
    axes = [*action.axes, *([0.0] * (space.axes - len(action.axes)))]
    return keys + mouse + buttons + [float(a) for a in axes]


def encode_actions(
    space: ActionSpace, actions: list[FrameAction], frames: int, mouse_scale: float
) -> torch.Tensor:
    """(frames, features) fp32 on the CPU; `actions` has one entry per latent frame or one for all."""
    if len(actions) not in (1, frames):
        raise ActionError(
            "bad_action_count", f"give one action per latent frame ({frames}) or one for the chunk, got {len(actions)}"
        )
    for action in actions:
        validate_action(space, action)
    rows = [_row(space, action, mouse_scale) for action in actions]
    if len(rows) == 1:
        rows = rows * frames
    return torch.tensor(rows, dtype=torch.float32)
