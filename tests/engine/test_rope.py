"""3-D RoPE: Wan's axis split, complex rotation at absolute positions, fp32 tables."""

from __future__ import annotations

import torch

from engine.rope import RopeTable, apply_rope, rope_axis_dims


def test_rope_axis_split_follows_wan() -> None:
    assert rope_axis_dims(128) == (44, 42, 42)
    assert rope_axis_dims(16) == (8, 4, 4)


def test_rope_matches_complex_rotation_at_absolute_positions() -> None:
    table = RopeTable(head_dim=16, grid_hw=(2, 3), frames_per_chunk=2, theta=10000.0, max_frames=4, device=torch.device("cpu"))
    cos, sin = table.for_frames([5], frames=2)  # grows past max_frames
    assert table.max_frames >= 7
    x = torch.randn(1, 12, 1, 16, dtype=torch.float64).float()
    out = apply_rope(x, cos, sin)
    # token 7 = frame 5 + 1, row 0, col 1: its angles from the three axes
    dt, dh, dw = rope_axis_dims(16)

    def freqs(dim: int) -> list[float]:
        return [1.0 / 10000.0 ** (i / dim) for i in range(0, dim, 2)]

    angles = [6 * f for f in freqs(dt)] + [0 * f for f in freqs(dh)] + [1 * f for f in freqs(dw)]
    z = torch.view_as_complex(x[0, 7, 0].double().view(-1, 2).contiguous())
    rotated = z * torch.polar(torch.ones(len(angles), dtype=torch.float64), torch.tensor(angles, dtype=torch.float64))
    assert torch.allclose(out[0, 7, 0].double(), torch.view_as_real(rotated).flatten(), atol=1e-6)


def test_rope_tables_are_float32() -> None:
    table = RopeTable(16, (2, 2), 1, 10000.0, 8, torch.device("cpu"))
    cos, sin = table.for_frames([0, 3], frames=1)
    assert (cos.dtype, sin.dtype, tuple(cos.shape)) == (torch.float32, torch.float32, (2, 4, 1, 8))


def test_the_cpu_complex_product_is_the_real_rotation_bit_for_bit() -> None:
    gen = torch.Generator().manual_seed(3)
    angles = torch.rand(2, 24, 1, 8, generator=gen) * 6
    cos, sin = angles.cos(), angles.sin()
    for dtype in (torch.float32, torch.bfloat16):
        base = torch.randn(2, 24, 3, 20, generator=gen).to(dtype)
        x = base[..., 2:18]  # a strided view, as the q/k projections' outputs may be
        pairs = x.float().unflatten(-1, (-1, 2))
        x0, x1 = pairs[..., 0], pairs[..., 1]
        expected = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2).to(dtype)
        out = apply_rope(x, cos, sin)
        assert out.dtype == dtype and torch.equal(out, expected)
