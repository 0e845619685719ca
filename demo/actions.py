"""Actions of the demo world: the key set, FrameAction <-> tensors, and random play.

Per frame an action is: held keys (multi-hot over ``DEMO_KEYS``), the mouse movement
accumulated during the frame (dx, dy in screen pixels) and two analog axes in [-1, 1]
(a stick: x right, y down).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from demo.errors import DemoError
from engine.api import FrameAction

__all__ = [
    "DEMO_AXES",
    "DEMO_KEYS",
    "DIRECTION_KEYS",
    "ActionBatch",
    "PlayParams",
    "action_batch",
    "frame_actions",
    "random_play",
]

# movement keys come as w,a,s,d then arrows in the same order (up, left, down, right): random_play relies on it
DEMO_KEYS: tuple[str, ...] = ("w", "a", "s", "d", "arrowup", "arrowleft", "arrowdown", "arrowright", "space", "shift")
DEMO_AXES = 2
# screen direction (dy, dx) each movement key pushes the avatar
DIRECTION_KEYS: dict[str, tuple[int, int]] = {
    "w": (-1, 0), "arrowup": (-1, 0), "s": (1, 0), "arrowdown": (1, 0),
    "a": (0, -1), "arrowleft": (0, -1), "d": (0, 1), "arrowright": (0, 1),
}
_INDEX = {k: i for i, k in enumerate(DEMO_KEYS)}


@dataclass(frozen=True)
class ActionBatch:
    """Actions of B episodes over T frames: keys (B, T, K) float 0/1, mouse (B, T, 2), axes (B, T, 2)."""

    keys: torch.Tensor
    mouse: torch.Tensor
    axes: torch.Tensor

    def frame(self, t: int) -> ActionBatch:
        return ActionBatch(self.keys[:, t], self.mouse[:, t], self.axes[:, t])

    def to(self, device: torch.device | str) -> ActionBatch:
        return ActionBatch(self.keys.to(device), self.mouse.to(device), self.axes.to(device))


def action_batch(actions: list[FrameAction]) -> ActionBatch:
    """One episode's FrameActions as a batch of one: keys (1, T, K), mouse (1, T, 2), axes (1, T, 2)."""
    t = len(actions)
    keys = torch.zeros(1, t, len(DEMO_KEYS))
    mouse = torch.zeros(1, t, 2)
    axes = torch.zeros(1, t, DEMO_AXES)
    for i, action in enumerate(actions):
        for key in action.keys:
            if key not in _INDEX:
                raise DemoError("unknown_key", f"key {key!r} is not in the demo action space {list(DEMO_KEYS)}")
            keys[0, i, _INDEX[key]] = 1.0
        mouse[0, i] = torch.tensor([float(action.mouse[0]), float(action.mouse[1])])
        if len(action.axes) not in (0, DEMO_AXES):
            raise DemoError("bad_axes", f"give {DEMO_AXES} axes (x, y) or none, not {len(action.axes)}")
        if action.axes:
            if any(not -1.0 <= a <= 1.0 for a in action.axes):
                raise DemoError("bad_axes", f"axes must lie in [-1, 1], got {action.axes}")
            axes[0, i] = torch.tensor([float(a) for a in action.axes])
    return ActionBatch(keys, mouse, axes)


def frame_actions(batch: ActionBatch, row: int = 0) -> list[FrameAction]:
    """Episode ``row`` of a batch back as FrameActions (one per frame)."""
    out = []
    for t in range(batch.keys.shape[1]):
        held = tuple(DEMO_KEYS[i] for i in torch.nonzero(batch.keys[row, t] > 0.5).flatten().tolist())
        mouse = batch.mouse[row, t].tolist()
        axes = batch.axes[row, t].tolist()
        out.append(FrameAction(keys=held, mouse=(mouse[0], mouse[1]),
                               axes=tuple(axes) if any(a != 0.0 for a in axes) else ()))
    return out


@dataclass(frozen=True)
class PlayParams:
    """Random-but-structured play: segments of one behaviour held for a while."""

    switch_probability: float = 0.1  # per frame; mean segment 10 frames
    # behaviour weights: idle, cardinal, diagonal, cardinal+shift, diagonal+shift, brake, mouse, axes
    weights: tuple[float, ...] = (0.13, 0.34, 0.18, 0.1, 0.05, 0.06, 0.07, 0.07)
    mouse_sigma: float = 10.0  # pixels per frame


def random_play(batch: int, frames: int, gen: torch.Generator, params: PlayParams | None = None) -> ActionBatch:
    """B episodes of T frames of structured random actions, drawn from ``gen`` (CPU)."""
    p = params or PlayParams()
    switch = torch.rand(batch, frames, generator=gen) < p.switch_probability
    switch[:, 0] = False
    segment = torch.cumsum(switch.long(), dim=1)  # (B, T) segment id per frame
    kind = torch.multinomial(torch.tensor(p.weights), batch * frames, replacement=True, generator=gen)
    kind = kind.view(batch, frames)
    cardinal = torch.randint(0, 4, (batch, frames), generator=gen)
    second = (cardinal + 1 + 2 * torch.randint(0, 2, (batch, frames), generator=gen)) % 4  # perpendicular
    arrows = torch.rand(batch, frames, generator=gen) < 0.5
    mouse_seg = torch.randn(batch, frames, 2, generator=gen) * p.mouse_sigma
    axes_seg = torch.rand(batch, frames, 2, generator=gen) * 2.0 - 1.0

    keys = torch.zeros(batch, frames, len(DEMO_KEYS))
    mouse = torch.zeros(batch, frames, 2)
    axes = torch.zeros(batch, frames, DEMO_AXES)
    rows = torch.arange(batch)[:, None].expand(batch, frames)
    k = kind.gather(1, segment)
    c = cardinal.gather(1, segment)
    s2 = second.gather(1, segment)
    use_arrows = arrows.gather(1, segment)
    base = torch.where(use_arrows, torch.full_like(c, _INDEX["arrowup"]), torch.full_like(c, _INDEX["w"]))
    moving = (k == 1) | (k == 2) | (k == 3) | (k == 4)
    diagonal = (k == 2) | (k == 4)
    shifted = (k == 3) | (k == 4)
    t_idx = torch.arange(frames)[None, :].expand(batch, frames)
    keys[rows[moving], t_idx[moving], (base + c)[moving]] = 1.0
    keys[rows[diagonal], t_idx[diagonal], (base + s2)[diagonal]] = 1.0
    keys[rows[shifted], t_idx[shifted], _INDEX["shift"]] = 1.0
    keys[rows[k == 5], t_idx[k == 5], _INDEX["space"]] = 1.0
    mouse_on = (k == 6)[..., None]
    mouse = torch.where(mouse_on, mouse_seg.gather(1, segment[..., None].expand(-1, -1, 2)), mouse)
    axes_on = (k == 7)[..., None]
    axes = torch.where(axes_on, axes_seg.gather(1, segment[..., None].expand(-1, -1, 2)), axes)
    return ActionBatch(keys, mouse, axes)

