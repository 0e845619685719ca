"""Convert Self-Forcing generator checkpoints (torch pickles) to a Wan2.1 DiT safetensors file.

    python -m enginetools.convert selfforcing IN.pt OUT.safetensors [--ema] [--model wan-1.3b |
        --manifest MANIFEST.json] [--dtype keep|bf16|fp32]

Self-Forcing saves ``{"generator": ..., "critic": ..., "generator_ema": ...}``; each generator
dict is a wrapper's state dict, so every DiT key carries the prefix ``model.``. The pickle is
read with ``weights_only=True`` (no code runs), the chosen dict's prefix is stripped, and its
keys and shapes must equal the expected layout exactly — no partial conversion.
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file

from engine.catalog import core_catalog
from engine.errors import EngineError, WeightsError
from enginetools.convert_keys import KeyShapes, manifest_key_shapes, wan_dit_key_shapes

__all__ = ["ConversionReport", "check_layout", "convert_selfforcing", "main", "selfforcing_state_dict"]

logger = logging.getLogger(__name__)

SELFFORCING_PREFIX = "model."
GENERATOR_KEY = "generator"
GENERATOR_EMA_KEY = "generator_ema"
MAX_LISTED = 5
DTYPES = {"keep": None, "bf16": torch.bfloat16, "fp32": torch.float32}


@dataclass(frozen=True)
class ConversionReport:
    source_dict: str
    tensors: int
    parameters: int
    bytes_written: int


def _listed(items: list[str]) -> str:
    shown = ", ".join(items[:MAX_LISTED])
    return shown + (f" ... ({len(items)} in all)" if len(items) > MAX_LISTED else "")


def selfforcing_state_dict(path: str | Path, ema: bool) -> dict[str, torch.Tensor]:
    """The generator (or generator_ema) dict of a Self-Forcing checkpoint, prefix stripped."""
    path = Path(path)
    if not path.is_file():
        raise WeightsError("checkpoint_missing", f"checkpoint {str(path)!r} does not exist")
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # pickles with code objects, or corrupt files
        raise WeightsError(
            "checkpoint_unreadable",
            f"cannot read {str(path)!r} with torch.load(weights_only=True): {exc}",
        ) from exc
    wanted = GENERATOR_EMA_KEY if ema else GENERATOR_KEY
    if not isinstance(loaded, dict) or not isinstance(loaded.get(wanted), dict):
        present = sorted(str(k) for k in loaded) if isinstance(loaded, dict) else [type(loaded).__name__]
        hint = " (drop --ema to use 'generator')" if ema else " (pass --ema for 'generator_ema')"
        raise WeightsError(
            "checkpoint_missing_dict",
            f"{str(path)!r} has no {wanted!r} dict; it holds {present}{hint}",
        )
    generator = loaded[wanted]
    unprefixed = sorted(k for k in generator if not str(k).startswith(SELFFORCING_PREFIX))
    if unprefixed:
        raise WeightsError(
            "checkpoint_prefix",
            f"{wanted!r} keys must all start with {SELFFORCING_PREFIX!r} (Self-Forcing's wrapper); "
            f"these do not: {_listed(unprefixed)}",
        )
    not_tensors = sorted(k for k, v in generator.items() if not isinstance(v, torch.Tensor))
    if not_tensors:
        raise WeightsError("checkpoint_layout", f"{wanted!r} holds non-tensors: {_listed(not_tensors)}")
    return {k[len(SELFFORCING_PREFIX) :]: v for k, v in generator.items()}


def check_layout(state: dict[str, torch.Tensor], expected: KeyShapes) -> None:
    """Raise a WeightsError unless `state` has exactly the expected keys and shapes, floating point."""
    missing = [k for k in expected if k not in state]
    if missing:
        raise WeightsError(
            "checkpoint_missing_keys",
            f"the checkpoint lacks {len(missing)} DiT keys: {_listed(missing)}; is it a generator of this model?",
        )
    extra = sorted(k for k in state if k not in expected)
    if extra:
        raise WeightsError(
            "checkpoint_unexpected_keys",
            f"the checkpoint has {len(extra)} keys outside the DiT layout: {_listed(extra)}; "
            "choose the matching --model or --manifest",
        )
    wrong = [
        f"{k} {tuple(state[k].shape)} != {shape}"
        for k, shape in expected.items()
        if tuple(state[k].shape) != shape
    ]
    if wrong:
        raise WeightsError(
            "checkpoint_shape_mismatch",
            f"{len(wrong)} tensors have the wrong shape (found != expected): {_listed(wrong)}",
        )
    not_float = [k for k in expected if not state[k].is_floating_point()]
    if not_float:
        raise WeightsError(
            "checkpoint_bad_dtype", f"DiT tensors must be floating point: {_listed(not_float)}"
        )


def convert_selfforcing(
    source: str | Path,
    target: str | Path,
    expected: KeyShapes,
    ema: bool = False,
    dtype: torch.dtype | None = None,
) -> ConversionReport:
    """Read, check and write; `dtype` None keeps the stored dtypes. Writes nothing on error."""
    state = selfforcing_state_dict(source, ema)
    check_layout(state, expected)
    out = {k: (state[k] if dtype is None else state[k].to(dtype)).contiguous().clone() for k in expected}
    wanted = GENERATOR_EMA_KEY if ema else GENERATOR_KEY
    save_file(out, str(target), metadata={"format": "pt", "source": Path(source).name, "dict": wanted})
    return ConversionReport(
        source_dict=wanted,
        tensors=len(out),
        parameters=sum(t.numel() for t in out.values()),
        bytes_written=Path(target).stat().st_size,
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m enginetools.convert", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="format", required=True)
    sf = sub.add_parser("selfforcing", help="Self-Forcing *.pt -> Wan2.1 DiT safetensors")
    sf.add_argument("source", type=Path, help="Self-Forcing checkpoint (*.pt)")
    sf.add_argument("target", type=Path, help="output *.safetensors")
    sf.add_argument("--ema", action="store_true", help="convert 'generator_ema' instead of 'generator'")
    group = sf.add_mutually_exclusive_group()
    group.add_argument("--model", default="wan-1.3b", help="engine model config giving the layout")
    group.add_argument("--manifest", type=Path, help="check against a manifest JSON's dit.keys instead")
    sf.add_argument(
        "--dtype", choices=sorted(DTYPES), default="keep", help="output dtype (default: as stored)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.target.suffix != ".safetensors":
            raise WeightsError("bad_target", f"output {str(args.target)!r} must end in .safetensors")
        expected = (
            manifest_key_shapes(args.manifest)
            if args.manifest
            else wan_dit_key_shapes(core_catalog().config(args.model))
        )
        report = convert_selfforcing(
            args.source, args.target, expected, ema=args.ema, dtype=DTYPES[args.dtype]
        )
    except EngineError as exc:
        print(f"convert: {exc}", file=sys.stderr)
        return 2
    print(
        f"wrote {args.target}: {report.tensors} tensors, {report.parameters:,} parameters, "
        f"{report.bytes_written:,} bytes from {report.source_dict!r}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
