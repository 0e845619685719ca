"""`sessiond trace-gen`: synthesize a load trace from behaviour parameters."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

__all__ = ["add_parser", "run"]


def add_parser(sub: Any, name: str) -> None:
    p = sub.add_parser(name, help="synthesize a load trace from behaviour parameters",
                       description="Write a synthesized trace (source \"synthesized\", parameters in the header). "
                       "KIND is director, game or mixed; --param KEY=VALUE sets any behaviour parameter "
                       "(for mixed, prefix with director. or game.). --standard DIR writes the committed set. "
                       "KIND family writes a family of traces (eleven shapes: directors alone at 4-16 sessions "
                       "and duty 0.2-0.6, world players, mixed, arrival bursts, interrupting directors, sessions "
                       "that leave and come back) into the folder --out, drawn from --seed (default: a new "
                       "seed, printed), for `sessiond replay-compare DIR`.")
    p.add_argument("kind", nargs="?", choices=("director", "game", "mixed", "family"), help="which population")
    p.add_argument("--sessions", type=int, default=4, help="sessions (mixed: split half and half; default 4)")
    p.add_argument("--duration", type=float, default=None, help="trace length in seconds")
    p.add_argument("--players", type=int, default=1,
                   help="co-play: seats per world session, the owner included (2..8; game and mixed; default 1): "
                   "each invited player sends its own action stream (docs/traces.md, Co-play)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default 0; family: a new one, printed)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="a behaviour parameter")
    p.add_argument("--name", default=None, help="trace name (default KIND-SESSIONS)")
    p.add_argument("--out", default=None, help="file to write (default: stdout)")
    p.add_argument("--standard", default=None, metavar="DIR", help="write the standard set of load_traces/ to DIR")


def _params(cls: Any, base: dict[str, Any], pairs: list[tuple[str, str]]) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values = dict(base)
    for key, raw in pairs:
        if key not in fields:
            raise ValueError(f"unknown parameter {key!r} for {cls.__name__}; known: {', '.join(fields)}")
        kind = type(getattr(cls(), key))
        try:
            values[key] = kind(raw)
        except ValueError:
            raise ValueError(f"parameter {key!r} must be {kind.__name__}, got {raw!r}") from None
    return cls(**values)


def run(args: argparse.Namespace) -> int:
    from loadtest.trace_tools.generator import (
        DirectorParams,
        GameParams,
        director_trace,
        game_trace,
        mixed_trace,
    )
    from loadtest.trace_tools.standard import write_standard
    from sessiond.traces.format import dump_trace

    if args.standard:
        for path in write_standard(args.standard):
            print(path)
        return 0
    if args.kind is None:
        print("trace-gen: give KIND (director, game, mixed or family) or --standard DIR", file=sys.stderr)
        return 2
    if args.kind == "family":
        return _family(args)
    if not 1 <= args.players <= 8 or (args.players > 1 and args.kind == "director"):
        print(f"trace-gen: --players must be 1..8 and co-play is a world's (game or mixed), got {args.players} "
              f"for {args.kind}", file=sys.stderr)
        return 2
    pairs = []
    for item in args.param:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"trace-gen: --param must be KEY=VALUE, got {item!r}", file=sys.stderr)
            return 2
        pairs.append((key, value))
    base: dict[str, Any] = {"sessions": args.sessions, "seed": args.seed or 0}
    if args.duration is not None:
        base["duration_s"] = args.duration
    try:
        if args.kind == "director":
            trace = director_trace(_params(DirectorParams, base, pairs), args.name)
        elif args.kind == "game":
            trace = game_trace(_params(GameParams, {**base, "players": args.players}, pairs), args.name)
        else:
            half = {**base, "sessions": max(1, args.sessions // 2)}
            d = _params(DirectorParams, half, [(k[9:], v) for k, v in pairs if k.startswith("director.")])
            g = _params(GameParams, {**half, "seed": (args.seed or 0) + 1, "players": args.players},
                        [(k[5:], v) for k, v in pairs if k.startswith("game.")])
            trace = mixed_trace(d, g, args.name)
    except ValueError as exc:
        print(f"trace-gen: {exc}", file=sys.stderr)
        return 2
    text = dump_trace(trace)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    return 0



def _family(args: argparse.Namespace) -> int:
    import secrets

    from loadtest.trace_tools.family import FamilyParams, write_family

    if not args.out:
        print("trace-gen: family writes a folder of traces: give --out DIR", file=sys.stderr)
        return 2
    if args.param or args.name:
        print("trace-gen: family draws its own parameters (--param and --name do not apply)", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else secrets.randbelow(1 << 31)
    duration = 60.0 if args.duration is None else args.duration
    if duration < 20.0:
        print(f"trace-gen: a family's traces need --duration >= 20 s, got {duration:g}", file=sys.stderr)
        return 2
    paths = write_family(args.out, FamilyParams(seed=seed, duration_s=duration))
    print(f"family seed {seed}: {len(paths)} traces of {duration:g} s in {args.out}")
    for path in paths:
        print(path)
    return 0
