"""3-D rotary position embedding (frame, height, width) as in Wan2.1, in real fp32 arithmetic.

Wan splits each head's dimensions into a frame part (d - 4*(d//6)) and two spatial parts
(2*(d//6) each) and rotates consecutive pairs. We keep fp32 cos/sin tables built once per model
(angles computed in float64 at build time only) and look positions up by absolute latent frame,
so the hot path has no float64 or complex arithmetic.
"""

from __future__ import annotations

import torch

__all__ = ["RopeTable", "apply_rope", "rope_axis_dims"]


def rope_axis_dims(head_dim: int) -> tuple[int, int, int]:
    """Real dimensions rotated by frame, height and width position (they sum to head_dim)."""
    spatial = 2 * (head_dim // 6)
    return head_dim - 2 * spatial, spatial, spatial


def _angles(positions: int, dim: int, theta: float) -> torch.Tensor:
    inv = 1.0 / torch.pow(theta, torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    return torch.outer(torch.arange(positions, dtype=torch.float64), inv)  # (positions, dim/2)


class RopeTable:
    """Cos/sin tables for one model geometry on one device; grows when frames run past it."""

    def __init__(
        self,
        head_dim: int,
        grid_hw: tuple[int, int],
        frames_per_chunk: int,
        theta: float,
        max_frames: int,
        device: torch.device,
    ) -> None:
        self.head_dim = head_dim
        self.grid_hw = grid_hw
        self.frames_per_chunk = frames_per_chunk
        self.theta = theta
        self.device = device
        _, dh, dw = rope_axis_dims(head_dim)
        gh, gw = grid_hw
        h_ang = _angles(gh, dh, theta)[:, None, :].expand(gh, gw, dh // 2)
        w_ang = _angles(gw, dw, theta)[None, :, :].expand(gh, gw, dw // 2)
        hw = torch.cat([h_ang, w_ang], dim=-1).reshape(gh * gw, (dh + dw) // 2)  # (hw, (dh+dw)/2)
        self._hw_cos = hw.cos().float().to(device)
        self._hw_sin = hw.sin().float().to(device)
        self._frame_cos = torch.empty(0)
        self._frame_sin = torch.empty(0)
        self._build_frames(max_frames)

    def _build_frames(self, frames: int) -> None:
        dt = rope_axis_dims(self.head_dim)[0]
        ang = _angles(frames, dt, self.theta)  # (frames, dt/2)
        self._frame_cos = ang.cos().float().to(self.device)
        self._frame_sin = ang.sin().float().to(self.device)

    @property
    def max_frames(self) -> int:
        return int(self._frame_cos.shape[0])

    def for_frames(self, frame_starts: list[int], frames: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Cos and sin, each (B, frames*h*w, 1, head_dim/2), for B samples whose tokens start at
        the given absolute latent (token) frames."""
        need = max(frame_starts) + frames
        if need > self.max_frames:
            self._build_frames(max(need, 2 * self.max_frames))
        hw = self._hw_cos.shape[0]
        parts = []
        for frame_tab, hw_tab in ((self._frame_cos, self._hw_cos), (self._frame_sin, self._hw_sin)):
            # slices of the device table (no host-to-device copy, no sync)
            ft = torch.stack([frame_tab[start : start + frames] for start in frame_starts])  # (B, frames, dt/2)
            ft = ft[:, :, None, :].expand(-1, -1, hw, -1)
            st = hw_tab[None, None].expand(len(frame_starts), frames, -1, -1)
            table = torch.cat([ft, st], dim=-1)  # (B, frames, hw, d/2)
            parts.append(table.reshape(len(frame_starts), frames * hw, 1, self.head_dim // 2))
        return parts[0], parts[1]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, dtype: torch.dtype | None = None
               ) -> torch.Tensor:
    """Rotate consecutive pairs of x (B, L, heads, head_dim) in fp32; returns `dtype` (default x's). Eager on a
    CPU as one complex product (x0 + i x1)(cos + i sin): the same arithmetic, bit for bit, in one
    kernel instead of six strided ones (8x faster at the demo model's shapes); compiled graphs
    keep the real form (inductor fuses it, and complex tensors do not compile everywhere)."""
    if x.device.type == "cpu" and not torch.compiler.is_compiling():
        pairs_c = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)).contiguous())
        return torch.view_as_real(pairs_c * torch.complex(cos, sin)).flatten(-2).to(dtype or x.dtype)
    pairs = x.float().unflatten(-1, (-1, 2))  # (B, L, heads, d/2, 2)
    x0, x1 = pairs[..., 0], pairs[..., 1]
    out = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)
    return out.flatten(-2).to(dtype or x.dtype)
