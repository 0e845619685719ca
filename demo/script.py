"""Scripted vigorous play for the long-play evaluation (and the rollout trainer's long horizons).

A seeded sequence of segments, each one behaviour held for a while: every one of the 8 directions
held 2-10 s (the first eight holds go through all of them in a shuffled order, later ones draw
freely), direct turns from one direction into another, runs (shift), brakes (space), rests, mouse
drags, keys from WASD or the arrows; and a prompt change to another theme every 20-45 s, at a
chunk boundary (the engine reads a prompt per chunk).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from demo.data import PROMPTS
from demo.themes import THEME_NAMES, theme_for_prompt
from engine.api import FrameAction

__all__ = ["HELD_DIRECTIONS", "PlayScript", "Segment", "scripted_play", "theme_cycle_play"]

# name -> (WASD keys, arrow keys, camera direction (dy, dx))
HELD_DIRECTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[int, int]]] = {
    "up": (("w",), ("arrowup",), (-1, 0)),
    "down": (("s",), ("arrowdown",), (1, 0)),
    "left": (("a",), ("arrowleft",), (0, -1)),
    "right": (("d",), ("arrowright",), (0, 1)),
    "up-left": (("w", "a"), ("arrowup", "arrowleft"), (-1, -1)),
    "up-right": (("w", "d"), ("arrowup", "arrowright"), (-1, 1)),
    "down-left": (("s", "a"), ("arrowdown", "arrowleft"), (1, -1)),
    "down-right": (("s", "d"), ("arrowdown", "arrowright"), (1, 1)),
}


@dataclass(frozen=True)
class Segment:
    """Frames [start, end) of one behaviour: ``kind`` hold | run | brake | rest | mouse; ``direction``
    names the held direction of hold and run segments ("" otherwise)."""

    start: int
    end: int
    kind: str
    direction: str = ""


@dataclass(frozen=True)
class PlayScript:
    """One action per frame, one prompt per chunk, and the segments and prompt changes they came from."""

    actions: list[FrameAction]
    prompts: list[str]  # per chunk
    segments: list[Segment]
    changes: list[int]  # chunk indices at which the prompt changes

    def theme_of_chunk(self, chunk: int) -> str:
        return theme_for_prompt(self.prompts[chunk])


def _seconds(rng: np.random.Generator, low: float, high: float, fps: int) -> int:
    return max(1, round(float(rng.uniform(low, high)) * fps))


def scripted_play(seconds: float, seed: int, fps: int = 16, frames_per_chunk: int = 4,
                  first_theme: str = "meadow") -> PlayScript:
    """``seconds`` of vigorous play (rounded up to whole chunks), the same for the same seed."""
    rng = np.random.default_rng(seed)
    total = -(-round(seconds * fps) // frames_per_chunk) * frames_per_chunk
    order = list(rng.permutation(list(HELD_DIRECTIONS)))
    segments: list[Segment] = []
    actions: list[FrameAction] = []
    last = ""
    while len(actions) < total:
        start = len(actions)
        roll = float(rng.random())
        if order or roll < 0.55:  # a held direction; right after another one it is a turn
            name = order.pop(0) if order else str(rng.choice([d for d in HELD_DIRECTIONS if d != last]))
            keys: tuple[str, ...] = HELD_DIRECTIONS[name][int(rng.integers(0, 2))]  # type: ignore[assignment]
            running = float(rng.random()) < 0.3
            n = _seconds(rng, 2.0, 10.0, fps)
            actions += [FrameAction(keys=keys + (("shift",) if running else ()))] * n
            segments.append(Segment(start, start + n, "run" if running else "hold", name))
            last = name
            continue
        if roll < 0.7:
            n = _seconds(rng, 0.3, 1.0, fps)
            actions += [FrameAction(keys=("space",))] * n
            segments.append(Segment(start, start + n, "brake"))
        elif roll < 0.85:
            n = _seconds(rng, 0.5, 2.0, fps)
            actions += [FrameAction()] * n
            segments.append(Segment(start, start + n, "rest"))
        else:
            n = _seconds(rng, 1.0, 3.0, fps)
            dx, dy = (float(v) for v in rng.normal(0.0, 10.0, size=2))
            actions += [FrameAction(mouse=(dx, dy))] * n
            segments.append(Segment(start, start + n, "mouse"))
        last = ""
    actions = actions[:total]
    segments = [Segment(s.start, min(s.end, total), s.kind, s.direction) for s in segments if s.start < total]
    chunks = total // frames_per_chunk
    prompts, changes = [], []
    theme = first_theme
    prompt = PROMPTS[theme][1]
    next_change = _seconds(rng, 20.0, 45.0, fps) // frames_per_chunk
    for k in range(chunks):
        if k == next_change:
            theme = str(rng.choice([t for t in THEME_NAMES if t != theme]))
            options = [p for p in PROMPTS[theme] if p]
            prompt = options[int(rng.integers(0, len(options)))]
            changes.append(k)
            next_change = k + _seconds(rng, 20.0, 45.0, fps) // frames_per_chunk
        prompts.append(prompt)
    return PlayScript(actions, prompts, segments, changes)


def theme_cycle_play(seed: int, fps: int = 16, frames_per_chunk: int = 4, seconds_per_theme: float = 10.0,
                     passes: int = 2) -> PlayScript:
    """The themes in turn: each of the six for ``seconds_per_theme`` (rounded to whole chunks), in a
    seeded order, ``passes`` times (a pass never starts on the theme the last one ended on), under
    the same vigorous play as ``scripted_play``; each theme's prompt drawn from its prompts."""
    rng = np.random.default_rng(seed + 1)
    per_theme = max(1, round(seconds_per_theme * fps / frames_per_chunk))
    order: list[str] = []
    for _ in range(passes):
        turn = [str(t) for t in rng.permutation(THEME_NAMES)]
        if order and turn[0] == order[-1]:
            turn = turn[1:] + turn[:1]
        order += turn
    play = scripted_play(len(order) * per_theme * frames_per_chunk / fps, seed, fps, frames_per_chunk)
    prompts: list[str] = []
    for theme in order:
        options = [p for p in PROMPTS[theme] if p]
        prompts += [options[int(rng.integers(0, len(options)))]] * per_theme
    changes = [i * per_theme for i in range(1, len(order))]
    return PlayScript(play.actions, prompts, play.segments, changes)
