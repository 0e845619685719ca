"""Terrain of the demo world: a wrap-around map of materials and shading, made from a seed.

The map is a torus of ``size`` x ``size`` pixels. Heights and moisture come from periodic
value noise; thresholds are quantiles, so every seed has water, shore, grass and rock in
similar proportions. Trees and boulders sit on jittered grids. All randomness is drawn from
a CPU ``torch.Generator`` seeded with the map seed, so a seed gives the same map on every
device.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from demo.themes import MATERIALS

__all__ = ["Terrain", "TerrainParams", "generate_terrain", "value_noise"]

_M = {name: i for i, name in enumerate(MATERIALS)}


@dataclass(frozen=True)
class TerrainParams:
    """Shape of the generated landscape; one instance, no numbers elsewhere."""

    height_octaves: tuple[int, ...] = (4, 8, 16, 32)  # noise cells per map side
    moisture_octaves: tuple[int, ...] = (4, 8, 16)
    detail_octaves: tuple[int, ...] = (64, 128)
    deep_water_q: float = 0.12  # height quantiles bounding each material
    shallow_water_q: float = 0.22
    sand_q: float = 0.29
    rock_q: float = 0.91
    snowcap_q: float = 0.97
    bush_moisture_q: float = 0.60
    tree_cell: int = 16  # one candidate tree per cell of this many pixels
    tree_radius: tuple[float, float] = (4.0, 7.0)
    tree_density: tuple[float, float] = (0.10, 0.85)  # at driest, wettest grass
    tree_shadow_offset: int = 3
    boulder_cell: int = 32
    boulder_radius: tuple[float, float] = (2.0, 3.5)
    boulder_probability: float = 0.18
    shadow_light: float = 0.6  # light multiplier in a tree's shadow
    canopy_relief: float = 0.35  # top-left lit, bottom-right dark


@dataclass(frozen=True)
class Terrain:
    """One map: material ids (size, size) int64, detail in [-1, 1] and light multiplier."""

    seed: int
    material: torch.Tensor
    detail: torch.Tensor
    light: torch.Tensor

    @property
    def size(self) -> int:
        return int(self.material.shape[0])


def value_noise(size: int, octaves: tuple[int, ...], gen: torch.Generator, device: torch.device) -> torch.Tensor:
    """Periodic fractal value noise (size, size), amplitudes halving per octave, in [0, 1]."""
    total = torch.zeros(size, size, device=device)
    amplitude, norm = 1.0, 0.0
    for cells in octaves:
        grid = torch.rand(cells, cells, generator=gen).to(device)
        x = torch.arange(size, device=device, dtype=torch.float32) * (cells / size)
        i0 = x.floor().long()
        f = x - i0
        s = f * f * (3.0 - 2.0 * f)  # smoothstep
        i1 = (i0 + 1) % cells
        top = grid[i0][:, i0] * (1 - s)[None, :] + grid[i0][:, i1] * s[None, :]
        bottom = grid[i1][:, i0] * (1 - s)[None, :] + grid[i1][:, i1] * s[None, :]
        total += amplitude * (top * (1 - s)[:, None] + bottom * s[:, None])
        norm += amplitude
        amplitude *= 0.5
    return total / norm


def _disc_layout(n: int, cell: int, radius: tuple[float, float], gen: torch.Generator
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """One disc per cell of an n x n grid: centres (n, n, 2) within the cell, radii (n, n)."""
    centres = torch.rand(n, n, 2, generator=gen) * (cell - 2 * radius[0]) + radius[0]
    radii = torch.rand(n, n, generator=gen) * (radius[1] - radius[0]) + radius[0]
    return centres, radii


def _rasterize_discs(size: int, cell: int, centres: torch.Tensor, radii: torch.Tensor,
                     device: torch.device, offset: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Nearest disc per pixel (wrapping around the map).

    Returns (inside (size, size) bool, relief (size, size) in [-1, 1], owning cell index (size, size)).
    ``offset`` shifts every disc that many pixels right and down (for shadows). Works on blocks:
    pixel (i * cell + u, j * cell + v) is block (i, u, j, v).
    """
    n = centres.shape[0]
    centres, radii = centres.to(device), radii.to(device)
    local = torch.arange(cell, device=device, dtype=torch.float32)
    uy = local[None, :, None, None]  # (1, cell, 1, 1) row within the block
    vx = local[None, None, None, :]  # (1, 1, 1, cell) column within the block
    cells = torch.arange(n, device=device)
    best = torch.full((n, cell, n, cell), float("inf"), device=device)
    relief = torch.zeros(n, cell, n, cell, device=device)
    owner = torch.zeros(n, cell, n, cell, dtype=torch.long, device=device)
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            ny, nx = (cells + dy) % n, (cells + dx) % n
            c = centres[ny][:, nx]  # (n, n, 2): the neighbouring disc of every block
            r = radii[ny][:, nx][:, None, :, None]
            ey = uy - (dy * cell + c[..., 0][:, None, :, None] + offset)
            ex = vx - (dx * cell + c[..., 1][:, None, :, None] + offset)
            dist = torch.sqrt(ey * ey + ex * ex) / r  # < 1 inside
            closer = dist < best
            best = torch.where(closer, dist, best)
            relief = torch.where(closer, -(ey + ex) / (r * 1.4142), relief)
            index = (ny[:, None] * n + nx[None, :])[:, None, :, None].expand_as(owner)
            owner = torch.where(closer, index, owner)
    flat = (size, size)
    return (best < 1.0).reshape(flat), relief.clamp(-1.0, 1.0).reshape(flat), owner.reshape(flat)


def generate_terrain(seed: int, size: int = 512, device: str | torch.device = "cpu",
                     params: TerrainParams | None = None) -> Terrain:
    """The map for ``seed``: same seed, same map."""
    p = params or TerrainParams()
    dev = torch.device(device)
    gen = torch.Generator().manual_seed(int(seed))
    height = value_noise(size, p.height_octaves, gen, dev)
    moisture = value_noise(size, p.moisture_octaves, gen, dev)
    detail = value_noise(size, p.detail_octaves, gen, dev) * 2.0 - 1.0

    flat_h = height.flatten()
    q = torch.quantile(flat_h, torch.tensor([p.deep_water_q, p.shallow_water_q, p.sand_q, p.rock_q, p.snowcap_q],
                                            device=dev))
    material = torch.full((size, size), _M["grass"], dtype=torch.long, device=dev)
    wet_q = torch.quantile(moisture.flatten(), p.bush_moisture_q)
    material[(moisture > wet_q) & (detail > -0.1)] = _M["bush"]
    material[height < q[2]] = _M["sand"]
    material[height < q[1]] = _M["shallow_water"]
    material[height < q[0]] = _M["deep_water"]
    material[height > q[3]] = _M["rock"]
    material[height > q[4]] = _M["snowcap"]
    land = (material == _M["grass"]) | (material == _M["bush"]) | (material == _M["sand"])

    light = torch.ones(size, size, device=dev)
    b_n = size // p.boulder_cell
    b_centres, b_radii = _disc_layout(b_n, p.boulder_cell, p.boulder_radius, gen)
    boulders, boulder_relief, b_owner = _rasterize_discs(size, p.boulder_cell, b_centres, b_radii, dev)
    b_keep = (torch.rand(b_n * b_n, generator=gen) < p.boulder_probability).to(dev)[b_owner]
    boulders = boulders & b_keep & land
    material[boulders] = _M["rock"]
    light = torch.where(boulders, 1.0 + 0.3 * boulder_relief, light)

    t_n = size // p.tree_cell
    t_centres, t_radii = _disc_layout(t_n, p.tree_cell, p.tree_radius, gen)
    canopy, canopy_relief, owner = _rasterize_discs(size, p.tree_cell, t_centres, t_radii, dev)
    shadow, _, s_owner = _rasterize_discs(size, p.tree_cell, t_centres, t_radii, dev, p.tree_shadow_offset)

    tree_pick = torch.rand(t_n * t_n, generator=gen).to(dev)
    # a tree grows where the ground under its cell's centre is grass or bush, densest where wet
    cell_centre = (torch.arange(t_n, device=dev) * p.tree_cell + p.tree_cell // 2)
    centre_material = material[cell_centre[:, None], cell_centre[None, :]].flatten()
    centre_moisture = moisture[cell_centre[:, None], cell_centre[None, :]].flatten()
    lo, hi = p.tree_density
    density = lo + (hi - lo) * centre_moisture.clamp(0, 1)
    grows = (tree_pick < density) & ((centre_material == _M["grass"]) | (centre_material == _M["bush"]))
    canopy = canopy & grows[owner] & land
    shadow = shadow & grows[s_owner] & land & ~canopy
    material[canopy] = _M["canopy"]
    light = torch.where(canopy, 1.0 + p.canopy_relief * canopy_relief, light)
    light = torch.where(shadow, torch.full_like(light, p.shadow_light), light)
    return Terrain(seed=int(seed), material=material, detail=detail, light=light)
