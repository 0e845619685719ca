"""Synthesized load traces from stated behaviour parameters (`source: "synthesized"`).

Director users (Dreamverse-like): type a direction, watch a segment, think, direct again; now and
then interrupt a segment and re-direct, or cut to a fresh scene. Game-controller users: action
streams at 30-60 Hz in bursts separated by input pauses, some of them menu pauses (`pause` /
`resume`), rare reconnects and lead-discarding interrupts; with `players` above 1 each world is
co-played: its create asks for that many seats and every invited player (`player` k) sends an
action stream of its own, drawn as the owner's is but from a generator of its own (seeded with the
trace seed, session and seat), so the owners' events are exactly those of the same trace with one
seat. Mixed: both populations at once.
Every parameter goes into the header's `generator` object, so a trace can be regenerated.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

from sessiond.traces.format import Trace, TraceEvent, TraceHeader

__all__ = ["DirectorParams", "GameParams", "director_trace", "game_trace", "mixed_trace"]

_SUBJECTS = ("a lighthouse on a cliff", "a neon market street", "a forest river", "a desert caravan",
             "a snowy mountain village", "an underwater reef", "a rainy train platform", "a castle courtyard")
_MOTIONS = ("the camera pans left", "the camera dollies forward", "a slow orbit", "a drone rises",
            "handheld, walking pace", "a crane shot descends")
_LIGHT = ("at dusk", "at noon", "under moonlight", "in heavy fog", "at golden hour", "during a storm")
_KEYS = ("w", "a", "s", "d", "shift", "space")


@dataclass(frozen=True)
class DirectorParams:
    sessions: int = 4
    duration_s: float = 120.0
    segment_s: float = 5.0  # media seconds per `direct`
    think_s_mean: float = 12.0  # mean think time after a segment ends (exponential, floor think_s_min)
    think_s_min: float = 2.0
    first_direct_s: float = 2.0  # typing the first direction after create
    interrupt_prob: float = 0.12  # a segment is interrupted part-way ...
    redirect_s: float = 1.5  # ... and re-directed this long after the interrupt
    cut_prob: float = 0.15  # a direction starts a fresh scene (`cut: true`)
    start_spread_s: float = 10.0  # creates spread uniformly over this window
    seed: int = 0
    detach_prob: float = 0.0  # after a segment the user leaves (`detach`) and comes back to direct again


@dataclass(frozen=True)
class GameParams:
    sessions: int = 4
    duration_s: float = 60.0
    rate_hz_min: float = 30.0
    rate_hz_max: float = 60.0
    burst_s_mean: float = 6.0  # bursts of input (exponential)
    idle_s_mean: float = 2.0  # input pauses between bursts (exponential)
    menu_pause_prob: float = 0.2  # an input pause is a menu pause: `pause` ... `resume`
    interrupt_per_min: float = 1.0  # lead-discarding interrupts (Poisson)
    flush_per_min: float = 0.5  # catch-up flushes of frames generated but not yet sent (Poisson)
    reconnect_prob: float = 0.25  # the session detaches once and re-attaches
    start_spread_s: float = 5.0
    seed: int = 0
    players: int = 1  # co-play seats per world, the owner included (docs/traces.md, "Co-play")


def _prompt(rng: random.Random) -> str:
    return f"{rng.choice(_SUBJECTS)} {rng.choice(_LIGHT)}, {rng.choice(_MOTIONS)}"


def _director_session(key: str, p: DirectorParams, rng: random.Random) -> list[TraceEvent]:
    t = rng.uniform(0.0, p.start_spread_s)
    events = [TraceEvent(t, key, "create", {"mode": "director", "prompt": _prompt(rng),
                                            "seed": rng.randrange(1 << 31)})]
    t += p.first_direct_s
    end = p.duration_s - 0.5
    cut = False
    while t + p.segment_s < end:
        direct = {"prompt": _prompt(rng), "seconds": p.segment_s}
        if cut:
            direct["cut"] = True
        events.append(TraceEvent(t, key, "direct", direct))
        if rng.random() < p.interrupt_prob:
            t += rng.uniform(0.3, 0.9) * p.segment_s
            events.append(TraceEvent(t, key, "interrupt", {}))
            t += p.redirect_s
        else:
            think = max(p.think_s_min, rng.expovariate(1.0 / p.think_s_mean))
            back = t + p.segment_s + think - 0.5
            if p.detach_prob > 0.0 and think > 1.0 and back < end and rng.random() < p.detach_prob:
                events += [TraceEvent(t + p.segment_s + 0.2, key, "detach", {}),
                           TraceEvent(back, key, "attach", {})]
            t += p.segment_s + think
        cut = rng.random() < p.cut_prob
    events.append(TraceEvent(min(p.duration_s, max(t, end)), key, "close", {}))
    return events


def _burst(key: str, t: float, until: float, rate: float, rng: random.Random) -> list[TraceEvent]:
    """Actions at `rate` Hz (with 10% jitter) from t to until; held keys change about twice a second."""
    out: list[TraceEvent] = []
    held = [rng.choice(_KEYS[:4])]
    while t < until:
        if rng.random() < 0.5 / rate:
            held = sorted(set(rng.sample(_KEYS, rng.randint(0, 2))))
        out.append(TraceEvent(t, key, "action", {"keys": list(held),
                                                 "mouse": [round(rng.gauss(0, 3), 2), round(rng.gauss(0, 1.5), 2)]}))
        t += rng.uniform(0.9, 1.1) / rate
    return out


def _co_player(key: str, player: int, start: float, p: GameParams, rng: random.Random) -> list[TraceEvent]:
    """Invited player `player`'s actions: bursts and pauses like the owner's, each event marked with its seat."""
    rate = rng.uniform(p.rate_hz_min, p.rate_hz_max)
    t, end, events = start + rng.uniform(0.5, 1.5), p.duration_s - 0.5, []
    while t < end:
        until = min(end, t + rng.expovariate(1.0 / p.burst_s_mean))
        events += [TraceEvent(e.t, e.s, e.ev, {**e.fields, "player": player}) for e in _burst(key, t, until, rate, rng)]
        t = until + max(0.3, rng.expovariate(1.0 / p.idle_s_mean))
    return events


def _game_session(key: str, p: GameParams, rng: random.Random) -> list[TraceEvent]:
    t = rng.uniform(0.0, p.start_spread_s)
    create: dict[str, object] = {"mode": "world", "prompt": _prompt(rng), "seed": rng.randrange(1 << 31)}
    if p.players > 1:
        create["players"] = p.players
    events = [TraceEvent(t, key, "create", create)]
    start = t
    rate = rng.uniform(p.rate_hz_min, p.rate_hz_max)
    end = p.duration_s - 0.5
    reconnect_at = rng.uniform(t, end) if rng.random() < p.reconnect_prob else None
    t += 0.5
    while t < end:
        until = min(end, t + rng.expovariate(1.0 / p.burst_s_mean))
        burst = _burst(key, t, until, rate, rng)
        events.extend(burst)
        for ev, per_min in (("interrupt", p.interrupt_per_min), ("flush", p.flush_per_min)):
            for _ in range(_poisson(rng, per_min * (until - t) / 60.0)):
                events.append(TraceEvent(rng.uniform(t, until), key, ev, {}))
        t = until
        gap = max(0.3, rng.expovariate(1.0 / p.idle_s_mean))
        if t + gap >= end:
            break
        if reconnect_at is not None and reconnect_at < t + gap:
            events += [TraceEvent(t + 0.05, key, "detach", {}), TraceEvent(t + gap, key, "attach", {})]
            reconnect_at = None
        elif rng.random() < p.menu_pause_prob:
            events += [TraceEvent(t + 0.05, key, "pause", {}), TraceEvent(t + gap, key, "resume", {})]
        t += gap + 0.05
    events.append(TraceEvent(p.duration_s, key, "close", {}))
    for player in range(1, p.players):  # each from its own generator: the owners' events stay those of one seat
        events += _co_player(key, player, start, p, random.Random(f"{p.seed}/{key}/{player}"))
    return sorted(events, key=lambda e: e.t)


def _poisson(rng: random.Random, mean: float) -> int:
    count, threshold, product = 0, pow(2.718281828459045, -mean), rng.random()
    while product > threshold:
        count += 1
        product *= rng.random()
    return count


def _header(name: str, description: str, generator: dict[str, object]) -> TraceHeader:
    return TraceHeader(name=name, source="synthesized", description=description,
                       generator={"tool": "sessiond trace-gen", **generator})


def _rounded(events: list[TraceEvent]) -> tuple[TraceEvent, ...]:
    ordered = sorted(events, key=lambda e: e.t)
    return tuple(TraceEvent(round(e.t, 4), e.s, e.ev, e.fields) for e in ordered)


def _director_fields(p: DirectorParams) -> dict[str, object]:
    """The parameters for a header; `detach_prob` only when set (the committed traces predate it)."""
    fields = asdict(p)
    if not p.detach_prob:
        del fields["detach_prob"]
    return fields


def _game_fields(p: GameParams) -> dict[str, object]:
    """The parameters for a header; `players` only when above 1 (the committed traces predate it)."""
    fields = asdict(p)
    if p.players == 1:
        del fields["players"]
    return fields


def director_trace(p: DirectorParams, name: str | None = None) -> Trace:
    rng = random.Random(p.seed)
    events = [e for i in range(p.sessions) for e in _director_session(f"d{i + 1}", p, rng)]
    desc = (f"{p.sessions} director sessions over {p.duration_s:g} s: {p.segment_s:g} s segments, "
            f"think ~{p.think_s_mean:g} s, interrupts {p.interrupt_prob:.0%}, cuts {p.cut_prob:.0%}")
    return Trace(_header(name or f"director-{p.sessions}", desc, {"kind": "director", **_director_fields(p)}),
                 _rounded(events))


def game_trace(p: GameParams, name: str | None = None) -> Trace:
    rng = random.Random(p.seed)
    events = [e for i in range(p.sessions) for e in _game_session(f"g{i + 1}", p, rng)]
    desc = (f"{p.sessions} game-controller sessions over {p.duration_s:g} s: actions at "
            f"{p.rate_hz_min:g}-{p.rate_hz_max:g} Hz in ~{p.burst_s_mean:g} s bursts, ~{p.idle_s_mean:g} s pauses")
    if p.players > 1:
        desc += f"; each world co-played by {p.players} players, each with its own action stream"
    return Trace(_header(name or f"game-{p.sessions}", desc, {"kind": "game", **_game_fields(p)}), _rounded(events))


def mixed_trace(director: DirectorParams, game: GameParams, name: str | None = None) -> Trace:
    d, g = director_trace(director), game_trace(game)
    total = director.sessions + game.sessions
    desc = f"mixed: {d.header.description}; and {g.header.description}"
    generator: dict[str, object] = {"kind": "mixed", "director": _director_fields(director),
                                    "game": _game_fields(game)}
    return Trace(_header(name or f"mixed-{total}", desc, generator), _rounded([*d.events, *g.events]))
