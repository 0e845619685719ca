"""A family of synthesized traces: the load an admission must hold on without anyone tuning for it.

Eleven shapes, each drawn afresh from a family seed (session counts, duties and the traces' own seeds
vary with it): directors alone from 4 to 16 sessions at duty 0.2 to 0.6 with short and long think
times, world players alone, both at once, arrival bursts (every session created within 2 s),
interrupt-heavy directors, and sessions that detach and come back. Each trace's header names the
family seed, its shape and the duty it was drawn for (`generator.family`), so any member can be
regenerated; a new seed gives a new family (`sessiond trace-gen family --out DIR [--seed N]`)."""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.trace_tools.generator import DirectorParams, GameParams, director_trace, game_trace, mixed_trace
from sessiond.traces.format import Trace, write_trace

__all__ = ["SHAPES", "FamilyParams", "Shape", "family_traces", "think_for_duty", "write_family"]

_THINK_FLOOR_S = 1.0


@dataclass(frozen=True)
class FamilyParams:
    seed: int = 0
    duration_s: float = 60.0
    segment_s: float = 5.0


def think_for_duty(duty: float, segment_s: float) -> float:
    """Mean think time after a segment for a director busy `duty` of the time (segment over segment
    plus think); duty in (0, 1)."""
    if not 0.0 < duty < 1.0:
        raise ValueError(f"duty must be in (0, 1), got {duty}")
    return segment_s * (1.0 - duty) / duty


@dataclass(frozen=True)
class Shape:
    """One member of the family: how many directors (at a duty drawn from `duty`) and players, each
    count drawn uniformly from its range, and the behaviour parameters that make the shape."""

    what: str
    directors: tuple[int, int] = (0, 0)
    duty: tuple[float, float] = (0.3, 0.5)
    players: tuple[int, int] = (0, 0)
    director_params: tuple[tuple[str, float], ...] = ()
    player_params: tuple[tuple[str, float], ...] = ()

    def draw(self, p: FamilyParams, rng: random.Random) -> tuple[Trace, float | None]:
        """The trace and the duty its directors were drawn for (None without directors)."""
        directors, players = rng.randint(*self.directors), rng.randint(*self.players)
        duty = rng.uniform(*self.duty) if directors else None
        d = DirectorParams(sessions=directors, duration_s=p.duration_s, segment_s=p.segment_s,
                           think_s_mean=think_for_duty(duty, p.segment_s) if duty else 12.0,
                           think_s_min=_THINK_FLOOR_S, seed=rng.randrange(1 << 31), **dict(self.director_params))
        game: dict[str, Any] = dict(self.player_params)  # float parameters of GameParams, by name
        g = GameParams(sessions=players, duration_s=p.duration_s, seed=rng.randrange(1 << 31), **game)
        if directors and players:
            return mixed_trace(d, g), duty
        return (director_trace(d), duty) if directors else (game_trace(g), None)


_BURST = (("start_spread_s", 2.0), ("first_direct_s", 0.5))
SHAPES: dict[str, Shape] = {
    "directors-busy": Shape("4-6 directors at duty 0.5-0.6 (short think times)", directors=(4, 6), duty=(0.5, 0.6)),
    "directors-idle": Shape("12-16 directors at duty 0.2-0.3 (long think times)", directors=(12, 16),
                            duty=(0.2, 0.3)),
    "directors-middling": Shape("6-10 directors at duty 0.35-0.45", directors=(6, 10), duty=(0.35, 0.45)),
    "directors-wide": Shape("8-16 directors at a duty anywhere in 0.2-0.6", directors=(8, 16), duty=(0.2, 0.6)),
    "players-few": Shape("2-4 world players", players=(2, 4)),
    "players-many": Shape("5-8 world players", players=(5, 8)),
    "mixed": Shape("2-5 directors at duty 0.25-0.5 and 1-3 world players", directors=(2, 5), duty=(0.25, 0.5),
                   players=(1, 3)),
    "burst-directors": Shape("6-12 directors, every one created within 2 s", directors=(6, 12),
                             director_params=_BURST),
    "burst-mixed": Shape("3-6 directors and 2-4 players, every one created within 2 s", directors=(3, 6),
                         players=(2, 4), director_params=_BURST, player_params=(("start_spread_s", 2.0),)),
    "directors-interrupting": Shape("4-8 directors who interrupt half their segments and re-direct",
                                    directors=(4, 8), director_params=(("interrupt_prob", 0.5), ("redirect_s", 1.0))),
    "coming-back": Shape("3-6 directors who often leave between segments and 1-3 players who reconnect",
                         directors=(3, 6), duty=(0.25, 0.45), players=(1, 3),
                         director_params=(("detach_prob", 0.6),), player_params=(("reconnect_prob", 1.0),)),
}


def family_traces(p: FamilyParams) -> list[Trace]:
    """One trace per shape, named `<shape>-<sessions>`, drawn from the family seed."""
    out = []
    for shape, spec in SHAPES.items():
        rng = random.Random(f"{p.seed}:{shape}")
        trace, duty = spec.draw(p, rng)
        sessions = len(trace.sessions())
        family = {"seed": p.seed, "shape": shape, "what": spec.what, "target_duty": None if duty is None else round(duty, 3)}
        header = dataclasses.replace(trace.header, name=f"{shape}-{sessions}",
                                     description=f"family {p.seed}, {shape}: {trace.header.description}",
                                     generator={**(trace.header.generator or {}), "family": family})
        out.append(Trace(header, trace.events))
    return out


def write_family(directory: str | Path, p: FamilyParams) -> list[Path]:
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for trace in family_traces(p):
        path = folder / f"{trace.header.name}.jsonl"
        write_trace(trace, path)
        paths.append(path)
    return paths
