"""Training data generated on the fly: batched episodes of the demo world.

A pool of terrains lives on the training device and is refreshed with new seeds now and
then; every batch draws maps, start points, structured random play and themes (with
occasional prompt switches at chunk boundaries), and renders the frames on the device.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from demo.actions import DEMO_KEYS, ActionBatch, random_play
from demo.errors import DemoError
from demo.terrain import Terrain, generate_terrain
from demo.themes import THEME_NAMES
from demo.world import (
    WorldParams,
    WorldState,
    initial_state,
    render,
    render_tables,
    stack_states,
    stack_terrains,
    step_dynamics,
)

__all__ = ["PROMPTS", "EpisodeSource", "Episodes", "SourceParams"]

# phrasings the trainer samples for each theme; the world reads the theme from the words
PROMPTS: dict[str, tuple[str, ...]] = {
    "meadow": ("", "meadow", "a green meadow", "grass fields in spring", "a quiet landscape", "explore the world"),
    "snow": ("snow", "a snowy landscape", "winter with snow", "icy frozen land", "snow covered hills"),
    "desert": ("desert", "a sandy desert", "desert dunes", "arid desert land", "hot desert at noon"),
    "night": ("night", "the land at night", "a dark moonlit night", "midnight", "night time landscape"),
    "autumn": ("autumn", "autumn forest", "fall leaves", "an orange autumn landscape", "harvest season in fall"),
    "rain": ("rain", "a rainy day", "stormy weather with rain", "heavy rain", "drizzle over the land"),
}


@dataclass(frozen=True)
class SourceParams:
    pool_size: int = 64  # terrains held on the device
    refresh_every: int = 50  # batches between replacing a quarter of the pool
    seed_base: int = 1_000  # training seeds are seed_base + n; evaluation uses seeds far above
    warmup_frames: int = 6  # unrecorded play before the first frame, so episodes start in motion
    switch_probability: float = 0.35  # chance an episode changes theme at one chunk boundary
    # chance an episode stands still for 1-3 whole chunks, then holds one direction to the end: a
    # user who stops and presses a key; the motion must then come from the keys, not from momentum
    from_rest_probability: float = 0.4
    render_steps: int = 8  # world steps rendered per call (bounds the memory of one render)
    # how many whole chunks such an episode rests: 1, 2 or 3 with these weights; 2 puts the first moving
    # chunk on the trainer's first inference-layout target (context = the two resting chunks)
    rest_chunk_weights: tuple[float, float, float] = (0.25, 0.5, 0.25)
    # chance an episode's actions are a stretch of the source's ``script`` (when it has one): long
    # held directions, runs and brakes, as the long-play evaluation plays
    scripted_probability: float = 0.0


@dataclass(frozen=True)
class Episodes:
    """frames (B, T, 3, H, W) in [-1, 1]; actions over T frames; theme per chunk (B, n_chunks);
    prompt text per chunk."""

    frames: torch.Tensor
    actions: ActionBatch
    themes: torch.Tensor
    prompts: list[list[str]]


class EpisodeSource:
    """Draws batches of episodes; all randomness from one CPU generator seeded at construction."""

    def __init__(self, world: WorldParams, device: torch.device, seed: int = 0,
                 params: SourceParams | None = None, script: ActionBatch | None = None) -> None:
        """``script``: one long action track (batch of one) that scripted episodes take stretches of."""
        self.world = world
        self.script = script
        self.device = device
        self.params = params or SourceParams()
        self.gen = torch.Generator().manual_seed(seed)
        self._next_seed = self.params.seed_base + seed * 1_000_000
        self._pool = [self._new_terrain() for _ in range(self.params.pool_size)]
        self._batches = 0
        self._tables = render_tables(world, device)

    def _new_terrain(self) -> Terrain:
        seed = self._next_seed
        self._next_seed += 1
        return generate_terrain(seed, self.world.map_size, self.device)

    def _refresh(self) -> None:
        for _ in range(max(1, self.params.pool_size // 4)):
            i = int(torch.randint(0, self.params.pool_size, (1,), generator=self.gen))
            self._pool[i] = self._new_terrain()

    def sample(self, batch: int, frames: int, frames_per_chunk: int) -> Episodes:
        p = self.params
        self._batches += 1
        if self._batches % p.refresh_every == 0:
            self._refresh()
        n_chunks = frames // frames_per_chunk
        picks = torch.randint(0, p.pool_size, (batch,), generator=self.gen).tolist()
        maps = stack_terrains([self._pool[i] for i in picks])
        start = torch.rand(batch, 2, generator=self.gen) * self.world.map_size
        play = self._from_rest(random_play(batch, p.warmup_frames + frames, self.gen), frames_per_chunk)
        if self.script is not None and p.scripted_probability > 0.0:
            play = self._scripted(play)
        state: WorldState = initial_state(start.round().to(self.device))
        for t in range(p.warmup_frames):
            state = step_dynamics(state, play.frame(t).to(self.device), self.world)

        themes = self._themes(batch, n_chunks)
        theme_per_frame = themes.repeat_interleave(frames_per_chunk, dim=1).to(self.device)
        states = []
        for t in range(frames):
            state = step_dynamics(state, play.frame(p.warmup_frames + t).to(self.device), self.world)
            states.append(state)
        video = self._render(maps, states, theme_per_frame).permute(0, 1, 4, 2, 3) * 2.0 - 1.0  # (B, T, 3, H, W)
        actions = ActionBatch(play.keys[:, p.warmup_frames:], play.mouse[:, p.warmup_frames:],
                              play.axes[:, p.warmup_frames:])
        prompts = self._prompts(themes)
        return Episodes(video, actions.to(self.device), themes, prompts)

    def _render(self, maps: tuple[torch.Tensor, torch.Tensor, torch.Tensor], states: list[WorldState],
                themes: torch.Tensor) -> torch.Tensor:
        """Frames (B, T, H, W, 3) of T steps, rendered ``render_steps`` steps per call (the same pixels
        as one call per step: every operation is per pixel)."""
        batch, group = themes.shape[0], self.params.render_steps
        episode = torch.arange(batch, device=self.device)
        out = []
        for t0 in range(0, len(states), group):
            part = states[t0:t0 + group]
            frames = render(maps, stack_states(part), themes[:, t0:t0 + len(part)].T.reshape(-1), self.world,
                            self._tables, episode=episode.repeat(len(part)))
            out.append(frames.view(len(part), batch, *frames.shape[1:]))
        return torch.cat(out).transpose(0, 1)

    def _from_rest(self, play: ActionBatch, frames_per_chunk: int) -> ActionBatch:
        """Rewrite some episodes as rest (warm-up included) for 1-3 chunks, then one held direction
        (cardinal or diagonal, sometimes running) to the end."""
        batch = play.keys.shape[0]
        chosen = torch.rand(batch, generator=self.gen) < self.params.from_rest_probability
        weights = torch.tensor(self.params.rest_chunk_weights)
        rest_chunks = 1 + torch.multinomial(weights, batch, replacement=True, generator=self.gen)
        first = torch.randint(0, 4, (batch,), generator=self.gen)  # up, left, down, right (key order)
        second = (first + 1 + 2 * torch.randint(0, 2, (batch,), generator=self.gen)) % 4
        diagonal = torch.rand(batch, generator=self.gen) < 0.3
        running = torch.rand(batch, generator=self.gen) < 0.2
        keys, mouse, axes = play.keys.clone(), play.mouse.clone(), play.axes.clone()
        for b in torch.nonzero(chosen).flatten().tolist():
            start = self.params.warmup_frames + int(rest_chunks[b]) * frames_per_chunk
            keys[b], mouse[b], axes[b] = 0.0, 0.0, 0.0
            held = [int(first[b])] + ([int(second[b])] if bool(diagonal[b]) else [])
            for key in held:
                keys[b, start:, key] = 1.0
            if bool(running[b]):
                keys[b, start:, DEMO_KEYS.index("shift")] = 1.0
        return ActionBatch(keys, mouse, axes)

    def _scripted(self, play: ActionBatch) -> ActionBatch:
        """Replace some episodes' actions (warm-up included) by a stretch of the script from a random frame."""
        assert self.script is not None
        batch, frames = play.keys.shape[:2]
        length = self.script.keys.shape[1]
        if length < frames:
            raise DemoError("short_script", f"the script has {length} frames; episodes need {frames}")
        chosen = torch.rand(batch, generator=self.gen) < self.params.scripted_probability
        starts = torch.randint(0, length - frames + 1, (batch,), generator=self.gen)
        keys, mouse, axes = play.keys.clone(), play.mouse.clone(), play.axes.clone()
        for b in torch.nonzero(chosen).flatten().tolist():
            part = slice(int(starts[b]), int(starts[b]) + frames)
            keys[b], mouse[b], axes[b] = self.script.keys[0, part], self.script.mouse[0, part], self.script.axes[0, part]
        return ActionBatch(keys, mouse, axes)

    def _themes(self, batch: int, n_chunks: int) -> torch.Tensor:
        n = len(THEME_NAMES)
        first = torch.randint(0, n, (batch,), generator=self.gen)
        second = (first + torch.randint(1, n, (batch,), generator=self.gen)) % n
        switches = torch.rand(batch, generator=self.gen) < self.params.switch_probability
        at = torch.randint(1, max(2, n_chunks), (batch,), generator=self.gen)
        chunk = torch.arange(n_chunks)[None, :]
        later = switches[:, None] & (chunk >= at[:, None])
        return torch.where(later, second[:, None], first[:, None])  # (B, n_chunks)

    def _prompts(self, themes: torch.Tensor) -> list[list[str]]:
        """One phrasing per episode and theme, repeated over that theme's chunks."""
        out = []
        for row in themes.tolist():
            chosen: dict[int, str] = {}
            for theme in row:
                if theme not in chosen:
                    options = PROMPTS[THEME_NAMES[theme]]
                    chosen[theme] = options[int(torch.randint(0, len(options), (1,), generator=self.gen))]
            out.append([chosen[theme] for theme in row])
        return out
