"""The committed synthesized trace set of load_traces/ (regenerate with `sessiond trace-gen --standard`)."""

from __future__ import annotations

from pathlib import Path

from loadtest.trace_tools.generator import DirectorParams, GameParams, director_trace, game_trace, mixed_trace
from sessiond.traces.format import Trace, write_trace

__all__ = ["standard_traces", "write_standard"]


def standard_traces() -> list[Trace]:
    """Director at 2, 4, 8, 16 sessions (120 s) and 8 over 60 s (the H200 comparison); game at 2, 4, 8 (60 s); mixed at 4, 8 (120 s);
    and `smoke-2`: one director and one game session over 12 s, for tests and quick checks."""
    out = [director_trace(DirectorParams(sessions=n, seed=100 + n)) for n in (2, 4, 8, 16)]
    out.append(director_trace(DirectorParams(sessions=8, duration_s=60.0, seed=108), "director-8-60s"))
    out += [game_trace(GameParams(sessions=n, seed=200 + n)) for n in (2, 4, 8)]
    out += [mixed_trace(DirectorParams(sessions=n // 2, seed=300 + n),
                        GameParams(sessions=n // 2, duration_s=120.0, seed=400 + n)) for n in (4, 8)]
    out.append(mixed_trace(
        DirectorParams(sessions=1, duration_s=12.0, segment_s=2.0, think_s_mean=2.0, first_direct_s=1.0,
                       interrupt_prob=0.5, start_spread_s=0.5, seed=7),
        GameParams(sessions=1, duration_s=12.0, burst_s_mean=3.0, idle_s_mean=1.0, menu_pause_prob=0.5,
                   interrupt_per_min=10.0, flush_per_min=10.0, reconnect_prob=1.0, start_spread_s=0.5, seed=12),
        name="smoke-2"))
    return out


def write_standard(directory: str | Path) -> list[Path]:
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for trace in standard_traces():
        path = folder / f"{trace.header.name}.jsonl"
        write_trace(trace, path)
        paths.append(path)
    return paths
