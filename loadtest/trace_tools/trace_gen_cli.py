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
                       "(for mixed, prefix with director. or game.). --standard DIR writes the committed set.")
    p.add_argument("kind", nargs="?", choices=("director", "game", "mixed"), help="which population")
    p.add_argument("--sessions", type=int, default=4, help="sessions (mixed: split half and half; default 4)")
    p.add_argument("--duration", type=float, default=None, help="trace length in seconds")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
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
        print("trace-gen: give KIND (director, game or mixed) or --standard DIR", file=sys.stderr)
        return 2
    pairs = []
    for item in args.param:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"trace-gen: --param must be KEY=VALUE, got {item!r}", file=sys.stderr)
            return 2
        pairs.append((key, value))
    base: dict[str, Any] = {"sessions": args.sessions, "seed": args.seed}
    if args.duration is not None:
        base["duration_s"] = args.duration
    try:
        if args.kind == "director":
            trace = director_trace(_params(DirectorParams, base, pairs), args.name)
        elif args.kind == "game":
            trace = game_trace(_params(GameParams, base, pairs), args.name)
        else:
            half = {**base, "sessions": max(1, args.sessions // 2)}
            d = _params(DirectorParams, half, [(k[9:], v) for k, v in pairs if k.startswith("director.")])
            g = _params(GameParams, {**half, "seed": args.seed + 1},
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

