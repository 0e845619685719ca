"""The demo world: a top-down landscape explored by an avatar the camera follows.

Batched and in torch, so training renders on the GPU; :class:`World` wraps one episode for
evaluation and tests. Frame ``t`` shows the state after action ``t`` is applied. The camera
centres the avatar, so the view moves by exactly the avatar's integer displacement.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from demo.actions import DEMO_KEYS, DIRECTION_KEYS, ActionBatch, action_batch
from demo.errors import DemoError
from demo.terrain import Terrain, generate_terrain
from demo.themes import THEME_NAMES, THEMES, theme_for_prompt
from engine.api import FrameAction

__all__ = [
    "World",
    "WorldParams",
    "WorldState",
    "initial_state",
    "render",
    "render_tables",
    "stack_states",
    "stack_terrains",
    "step_dynamics",
    "to_uint8",
]


@dataclass(frozen=True)
class WorldParams:
    width: int = 128
    height: int = 128
    map_size: int = 512
    accel: float = 0.9  # px / frame^2 while a direction is held
    friction: float = 0.78  # velocity kept per frame (terminal speed accel / (1 - friction))
    run_factor: float = 1.7  # shift multiplies acceleration
    brake_friction: float = 0.35  # velocity kept per frame while space is held
    mouse_gain: float = 0.25  # pan in px per px of mouse movement
    mouse_clamp: float = 6.0  # most px the mouse pans per frame
    night_ambient: float = 0.42
    night_radius: float = 30.0  # px, light pool around the avatar
    rain_density: float = 0.006
    rain_length: int = 7
    rain_step: tuple[int, int] = (9, -2)  # streak motion per frame (dy, dx)
    rain_strength: float = 0.45
    rain_seed: int = 7
    avatar_radius: float = 4.5
    avatar_outline: float = 1.2
    facing_offset: float = 2.6
    facing_radius: float = 1.7


@dataclass(frozen=True)
class WorldState:
    """B episodes: position (B, 2) as (y, x) px, velocity (B, 2), facing unit (B, 2), frame (B,)."""

    pos: torch.Tensor
    vel: torch.Tensor
    facing: torch.Tensor
    frame: torch.Tensor


def initial_state(pos: torch.Tensor) -> WorldState:
    b = pos.shape[0]
    facing = torch.zeros(b, 2, device=pos.device)
    facing[:, 0] = -1.0
    return WorldState(pos.float(), torch.zeros(b, 2, device=pos.device), facing,
                      torch.zeros(b, dtype=torch.long, device=pos.device))


def _direction_matrix(device: torch.device) -> torch.Tensor:
    """(K, 2): the (dy, dx) push of each key; zero for space and shift."""
    rows = [DIRECTION_KEYS.get(key, (0, 0)) for key in DEMO_KEYS]
    return torch.tensor(rows, dtype=torch.float32).to(device)


def step_dynamics(state: WorldState, action: ActionBatch, params: WorldParams) -> WorldState:
    """Apply one frame of actions: keys (B, K), mouse (B, 2) as (dx, dy), axes (B, 2) as (x, y)."""
    dev = state.pos.device
    keys = action.keys.to(dev)
    push = (keys @ _direction_matrix(dev)).clamp(-1.0, 1.0)  # (B, 2) dy, dx; opposite keys cancel
    stick = torch.stack([action.axes[:, 1], action.axes[:, 0]], dim=1).to(dev)  # (y, x)
    intent = push + stick
    norm = intent.norm(dim=1, keepdim=True)
    intent = torch.where(norm > 1.0, intent / norm.clamp_min(1e-6), intent)
    run = 1.0 + (params.run_factor - 1.0) * keys[:, DEMO_KEYS.index("shift")]
    brake = keys[:, DEMO_KEYS.index("space")]
    keep = params.friction + (params.brake_friction - params.friction) * brake
    vel = state.vel * keep[:, None] + params.accel * run[:, None] * intent
    pan = torch.stack([action.mouse[:, 1], action.mouse[:, 0]], dim=1).to(dev) * params.mouse_gain
    pan = pan.clamp(-params.mouse_clamp, params.mouse_clamp)
    moving = norm > 0.2
    facing = torch.where(moving, intent / norm.clamp_min(1e-6), state.facing)
    return WorldState(state.pos + vel + pan, vel, facing, state.frame + 1)


def stack_terrains(terrains: list[Terrain]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(material, detail, light), each (B, M, M)."""
    return (torch.stack([t.material for t in terrains]), torch.stack([t.detail for t in terrains]),
            torch.stack([t.light for t in terrains]))


def render_tables(params: WorldParams, device: torch.device | str) -> dict[str, torch.Tensor]:
    """Theme palettes and switches, and the rain tile, on ``device``: build once, render many."""
    device = torch.device(device)
    themes = [THEMES[n] for n in THEME_NAMES]
    h, w = params.height, params.width
    yy = torch.arange(h, device=device, dtype=torch.float32)[:, None] - (h // 2)  # (H, 1)
    xx = torch.arange(w, device=device, dtype=torch.float32)[None, :] - (w // 2)  # (1, W)
    radius2 = yy * yy + xx * xx
    return {
        "screen_y": yy,
        "screen_x": xx,
        "screen_dist": torch.sqrt(radius2),
        "night_pool": params.night_ambient + (1.0 - params.night_ambient) * torch.exp(-radius2 / params.night_radius**2),
        "rain_tile": _rain_tile(params, device),
        "palette": torch.tensor([t.palette for t in themes], device=device),  # (n_themes, n_mat, 3)
        "amp": torch.tensor([t.shade_amplitude for t in themes], device=device),
        "light": torch.tensor([t.light for t in themes], device=device),
        "night": torch.tensor([float(t.night_light) for t in themes], device=device),
        "rain": torch.tensor([float(t.rain) for t in themes], device=device),
    }


def _rain_tile(params: WorldParams, device: torch.device) -> torch.Tensor:
    """(H, W) periodic streak mask in [0, 1]; it slides by ``rain_step`` per frame."""
    gen = torch.Generator().manual_seed(params.rain_seed)
    drops = (torch.rand(params.height, params.width, generator=gen) < params.rain_density).float()
    streak = torch.zeros_like(drops)
    for i in range(params.rain_length):
        fade = 1.0 - i / params.rain_length
        streak = torch.maximum(streak, fade * torch.roll(drops, shifts=(-i, (i * 2) // 9), dims=(0, 1)))
    return streak.to(device)


def _disc(dist: torch.Tensor, radius: float) -> torch.Tensor:
    """Anti-aliased coverage of a disc of ``radius`` given distances from its centre."""
    return (radius - dist + 0.5).clamp(0.0, 1.0)


def stack_states(states: list[WorldState]) -> WorldState:
    """Several steps of B episodes as one state of len(states) * B rows, step-major."""
    return WorldState(torch.cat([s.pos for s in states]), torch.cat([s.vel for s in states]),
                      torch.cat([s.facing for s in states]), torch.cat([s.frame for s in states]))


def render(maps: tuple[torch.Tensor, torch.Tensor, torch.Tensor], state: WorldState, theme: torch.Tensor,
           params: WorldParams, tables: dict[str, torch.Tensor] | None = None,
           episode: torch.Tensor | None = None) -> torch.Tensor:
    """Frames (N, H, W, 3) float in [0, 1] for each of the N rows of ``state`` and theme index (N,).
    ``episode`` (N,) says which map row each state row is drawn on (default: row i on map i), so
    many steps of the same episodes render in one call."""
    material, detail, light = maps
    dev = material.device
    b, m = state.pos.shape[0], material.shape[1]
    h, w = params.height, params.width
    top = torch.round(state.pos[:, 0]).long() - h // 2
    left = torch.round(state.pos[:, 1]).long() - w // 2
    rows = (top[:, None] + torch.arange(h, device=dev)[None, :]) % m  # (N, H)
    cols = (left[:, None] + torch.arange(w, device=dev)[None, :]) % m  # (N, W)
    bi = (episode if episode is not None else torch.arange(b, device=dev))[:, None, None]
    mat = material[bi, rows[:, :, None], cols[:, None, :]]  # (B, H, W)
    det = detail[bi, rows[:, :, None], cols[:, None, :]]
    lit = light[bi, rows[:, :, None], cols[:, None, :]]

    tables = tables if tables is not None else render_tables(params, dev)
    palette = tables["palette"][theme]  # (B, n_mat, 3)
    color = torch.gather(palette, 1, mat.reshape(b, -1, 1).expand(-1, -1, 3)).view(b, h, w, 3)
    amp = tables["amp"][theme][:, None, None, None]
    color = color * lit[..., None] * (1.0 + 0.5 * amp * det[..., None]) * tables["light"][theme][:, None, None, None]

    pool = tables["night_pool"][None, :, :, None]
    night = tables["night"][theme][:, None, None, None]
    color = color * (1.0 - night + night * pool)

    rain = tables["rain"][theme][:, None, None, None]
    tile = tables["rain_tile"]
    ry = (torch.arange(h, device=dev)[None, :] - state.frame[:, None] * params.rain_step[0]) % h  # (B, H)
    rx = (torch.arange(w, device=dev)[None, :] - state.frame[:, None] * params.rain_step[1]) % w  # (B, W)
    streaks = tile[ry[:, :, None], rx[:, None, :]][..., None] * params.rain_strength
    color = color * (1.0 - rain * streaks) + rain * streaks * 0.85

    yy, xx, dist = tables["screen_y"], tables["screen_x"], tables["screen_dist"][None]  # centred coordinates
    body = _disc(dist, params.avatar_radius)
    ring = _disc(dist, params.avatar_radius + params.avatar_outline)
    fy = params.facing_offset * state.facing[:, 0][:, None, None]
    fx = params.facing_offset * state.facing[:, 1][:, None, None]
    nose = _disc(torch.sqrt((yy[None] - fy) ** 2 + (xx[None] - fx) ** 2), params.facing_radius)
    dark = torch.tensor([0.08, 0.05, 0.05], device=dev)
    red = torch.tensor([0.95, 0.30, 0.20], device=dev)
    white = torch.tensor([1.0, 0.97, 0.90], device=dev)
    color = color * (1 - ring[..., None]) + dark * ring[..., None]
    color = color * (1 - body[..., None]) + red * body[..., None]
    color = color * (1 - nose[..., None]) + white * nose[..., None]
    return color.clamp(0.0, 1.0)


def to_uint8(frames: torch.Tensor) -> np.ndarray:
    return (frames * 255.0).round().to(torch.uint8).cpu().numpy()


class World:
    """One episode of the demo world: deterministic for a seed, a prompt and an action sequence."""

    def __init__(self, seed: int, prompt: str = "", params: WorldParams | None = None,
                 terrain: Terrain | None = None) -> None:
        """``terrain``: the map of ``seed`` made earlier (maps cost a second or two to build)."""
        self.params = params or WorldParams()
        if self.params.map_size % 32 != 0 or self.params.map_size < 2 * max(self.params.width, self.params.height):
            raise DemoError("bad_world_size", "map_size must be a multiple of 32 and at least twice the frame size")
        self.seed = int(seed)
        if terrain is not None and (terrain.seed != self.seed or terrain.size != self.params.map_size):
            raise DemoError("terrain_mismatch", f"terrain of seed {terrain.seed} size {terrain.size} given for "
                                                f"seed {self.seed} size {self.params.map_size}")
        self.terrain = terrain if terrain is not None else generate_terrain(self.seed, self.params.map_size)
        self._maps = stack_terrains([self.terrain])
        self._tables = render_tables(self.params, "cpu")
        gen = torch.Generator().manual_seed(self.seed + 1)
        start = torch.rand(1, 2, generator=gen) * self.params.map_size
        self.state = initial_state(start.round())
        self.theme = theme_for_prompt(prompt)

    def set_prompt(self, prompt: str) -> None:
        """From the next frame on, the theme the prompt asks for."""
        self.theme = theme_for_prompt(prompt)

    @property
    def position(self) -> tuple[float, float]:
        """Avatar position (y, x) in pixels, unwrapped."""
        return float(self.state.pos[0, 0]), float(self.state.pos[0, 1])

    def frame(self) -> np.ndarray:
        """The current view, uint8 (H, W, 3)."""
        theme = torch.tensor([THEME_NAMES.index(self.theme)])
        return to_uint8(render(self._maps, self.state, theme, self.params, self._tables))[0]

    def step(self, action: FrameAction) -> np.ndarray:
        """Apply one frame's action; returns the new view, uint8 (H, W, 3)."""
        batch = action_batch([action])
        self.state = step_dynamics(self.state, batch.frame(0), self.params)
        return self.frame()

    def rollout(self, actions: list[FrameAction]) -> np.ndarray:
        """Frames (T, H, W, 3) uint8, one per action."""
        return np.stack([self.step(a) for a in actions])

