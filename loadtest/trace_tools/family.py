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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.trace_tools.generator import DirectorParams, GameParams, director_trace, game_trace, mixed_trace
from sessiond.traces.format import Trace, write_trace

__all__ = ["SHAPES", "FamilyParams", "family_traces", "think_for_duty", "write_family"]

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


def _directors(p: FamilyParams, rng: random.Random, sessions: int, duty: float, **over: Any) -> DirectorParams:
    return DirectorParams(sessions=sessions, duration_s=p.duration_s, segment_s=p.segment_s,
                          think_s_mean=think_for_duty(duty, p.segment_s), think_s_min=_THINK_FLOOR_S,
                          seed=rng.randrange(1 << 31), **over)


def _players(p: FamilyParams, rng: random.Random, sessions: int, **over: Any) -> GameParams:
    return GameParams(sessions=sessions, duration_s=p.duration_s, seed=rng.randrange(1 << 31), **over)


# shape -> (what it is, how to draw it: (params, rng) -> (trace, the duty it was drawn for or None))
Draw = Callable[[FamilyParams, random.Random], tuple[Trace, float | None]]


def _busy(p: FamilyParams, r: random.Random) -> tuple[Trace, float | None]:
    duty = r.uniform(0.5, 0.6)
    return director_trace(_directors(p, r, r.randint(4, 6), duty)), duty


def _idle(p: FamilyParams, r: random.Random) -> tuple[Trace, float | None]:
    duty = r.uniform(0.2, 0.3)
    return director_trace(_directors(p, r, r.randint(12, 16), duty)), duty


def _middling(p: FamilyParams, r: random.Random) -> tuple[Trace, float | None]:
    duty = r.uniform(0.35, 0.45)
    return director_trace(_directors(p, r, r.randint(6, 10), duty)), duty


def _wide(p: FamilyParams, r: random.Random) -> tuple[Trace, float | None]:
    duty = r.uniform(0.2, 0.6)
    return director_trace(_directors(p, r, r.randint(8, 16), duty)), duty


def _players_few(p: FamilyParams, r: random.Random) -> tuple[Trace, float | None]:
    return game_trace(_players(p, r, r.randint(2, 4))), None


def _players_many(p: FamilyParams, r: random.Random) -> tuple[Trace, float | None]:
    return game_trace(_players(p, r, r.randint(5, 8))), None


def _mixed(p: FamilyParams, r: random.Random) -> tuple[Trace, float | None]:
    duty = r.uniform(0.25, 0.5)
    return mixed_trace(_directors(p, r, r.randint(2, 5), duty), _players(p, r, r.randint(1, 3))), duty


def _burst_directors(p: FamilyParams, r: random.Random) -> tuple[Trace, float | None]:
    duty = r.uniform(0.3, 0.5)
    return director_trace(_directors(p, r, r.randint(6, 12), duty, start_spread_s=2.0, first_direct_s=0.5)), duty


def _burst_mixed(p: FamilyParams, r: random.Random) -> tuple[Trace, float | None]:
    duty = r.uniform(0.3, 0.5)
    return mixed_trace(_directors(p, r, r.randint(3, 6), duty, start_spread_s=2.0, first_direct_s=0.5),
                       _players(p, r, r.randint(2, 4), start_spread_s=2.0)), duty


def _interrupting(p: FamilyParams, r: random.Random) -> tuple[Trace, float | None]:
    duty = r.uniform(0.3, 0.5)
    return director_trace(_directors(p, r, r.randint(4, 8), duty, interrupt_prob=0.5, redirect_s=1.0)), duty


def _coming_back(p: FamilyParams, r: random.Random) -> tuple[Trace, float | None]:
    duty = r.uniform(0.25, 0.45)
    return mixed_trace(_directors(p, r, r.randint(3, 6), duty, detach_prob=0.6),
                       _players(p, r, r.randint(1, 3), reconnect_prob=1.0)), duty


SHAPES: dict[str, tuple[str, Draw]] = {
    "directors-busy": ("4-6 directors at duty 0.5-0.6 (short think times)", _busy),
    "directors-idle": ("12-16 directors at duty 0.2-0.3 (long think times)", _idle),
    "directors-middling": ("6-10 directors at duty 0.35-0.45", _middling),
    "directors-wide": ("8-16 directors at a duty anywhere in 0.2-0.6", _wide),
    "players-few": ("2-4 world players", _players_few),
    "players-many": ("5-8 world players", _players_many),
    "mixed": ("2-5 directors at duty 0.25-0.5 and 1-3 world players", _mixed),
    "burst-directors": ("6-12 directors, every one created within 2 s", _burst_directors),
    "burst-mixed": ("3-6 directors and 2-4 players, every one created within 2 s", _burst_mixed),
    "directors-interrupting": ("4-8 directors who interrupt half their segments and re-direct", _interrupting),
    "coming-back": ("3-6 directors who often leave between segments and 1-3 players who reconnect", _coming_back),
}


def family_traces(p: FamilyParams) -> list[Trace]:
    """One trace per shape, named `<shape>-<sessions>`, drawn from the family seed."""
    out = []
    for shape, (what, draw) in SHAPES.items():
        rng = random.Random(f"{p.seed}:{shape}")
        trace, duty = draw(p, rng)
        sessions = len(trace.sessions())
        family = {"seed": p.seed, "shape": shape, "what": what, "target_duty": None if duty is None else round(duty, 3)}
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
