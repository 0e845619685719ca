"""Evaluate the demo model against its ground-truth world:
``python -m demo.eval --weights W [--json out.json] [--device cpu] [--quick]``;
``--long-play [--seconds 300] [--figures DIR]`` runs the long-play evaluation instead
(``demo.long_play``: minutes of scripted vigorous play, every number of its targets);
``--theme-cycle [--figures DIR]`` the theme-cycle one (``demo.theme_cycle``: the theme changes every
10 s through all six, twice, under the same play; the avatar must stay); either with
``--from-nothing`` starts its play as a served session does, with no true chunk before it, and
``--play-seed N`` plays another world under other keys.
``--timesteps``, ``--guidance``, ``--guided-steps``, ``--guidance-rescale``, ``--context-noise``,
``--recontext``, ``--prompt-guidance`` and ``--prompt-guidance-chunks`` evaluate other sampling settings
than the ones ``demo/config.py`` serves with (the report records the settings it ran).

Rollouts run through the real Engine API, started from ground-truth chunks (encoded and handed
over as a continuation snapshot) under the same seeds, actions and prompts as the world.
Reports: autoencoder reconstruction; PSNR/SSIM of the first chunks; direction-of-motion accuracy
over 64-frame rollouts (phase correlation vs the held keys' direction); theme accuracy after a
prompt change (nearest-centroid classifier fitted on ground-truth frames); drift per 5 s window
over 30 s; collapse statistics over 60 s; single-session streaming speed on the device.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import torch

from demo._eval_parts import (
    EvalParams,
    Worlds,
    autoencoder_quality,
    fit_classifier,
    long_rollouts,
    motion_and_fidelity,
    sample_sheet,
    streaming_speed,
    theme_switches,
)
from demo.autoencoder import DemoEncoder, ae_config_for
from demo.config import CONFIG, MODELS
from demo.errors import DemoError
from demo.export import ENCODER_FILE, load_encoder
from demo.registration import catalog_with_demo
from demo.world import WorldParams
from engine.config import ModelConfig
from engine.engine import Engine
from engine.errors import EngineError

if TYPE_CHECKING:
    from demo.long_play import LongPlayParams
    from demo.theme_cycle import ThemeCycleParams

__all__ = ["QUICK", "TARGETS", "TRAINING_CHECK", "evaluate", "main", "save_sheet", "seeded"]

TARGETS = {"direction_accuracy": 0.9, "theme_accuracy": 0.9}
# a short run: the regression guard's rollouts
QUICK = EvalParams(directions=("right", "up-left"), direction_chunks=4, fidelity_chunks=2, theme_pairs=3,
                   theme_chunks=2, classifier_seeds=1, classifier_frames=16)


# the config fields that say how the model is sampled (recorded in every report)
_SAMPLING = ("denoise_timesteps", "action_guidance", "action_guidance_steps", "action_guidance_rescale",
             "cache_context_noise", "kv_from_last_pass", "recontext_on_prompt_change", "prompt_change_guidance",
             "prompt_change_guidance_chunks", "prompt_change_guidance_steps")


def _sampling(cfg: ModelConfig) -> dict[str, object]:
    return {name: list(v) if isinstance(v := getattr(cfg, name), tuple) else v for name in _SAMPLING}


def _demo_engine(model: ModelConfig, device: str, weights: Path, dtype: str | None = None,
                 compile: str = "off", attention: str = "sdpa") -> Engine:
    return Engine.create(model=model, catalog=catalog_with_demo(), device=device, weights=weights,
                         attention=attention, compile=compile, dtype=dtype)


def evaluate(weights: Path, encoder_path: Path, device: str, params: EvalParams, *, long: bool = True,
             speed: bool = True, model: ModelConfig = CONFIG, strip: Path | None = None,
             dtype: str | None = None, compile: str = "off", attention: str = "sdpa") -> dict[str, object]:
    """``model``: the config to run (a demo config, or a variant of its sampling settings).
    ``strip``: with the long rollouts, save them as a PNG here (ground truth above model, every 5 s).
    ``dtype``, ``compile``, ``attention``: the engine's (default fp32 on the CPU, eager, SDPA)."""
    started = time.monotonic()
    engine = _demo_engine(model, device, weights, dtype, compile, attention)
    encoder = load_encoder(encoder_path, ae_config_for(engine.config), engine.device)
    cfg = engine.config
    worlds = Worlds(WorldParams(width=cfg.width, height=cfg.height))
    classifier, classifier_accuracy = fit_classifier(params, worlds)
    report: dict[str, object] = {
        "model": engine.config.name,
        "weights": str(weights),
        "weights_sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
        "device": device,
        "torch": torch.__version__,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "params": asdict(params),
        "sampling": _sampling(cfg),
        "dtype": str(engine.parts.dtype),
        "attention": engine.parts.attend.name,
        "classifier_ground_truth_accuracy": classifier_accuracy,
        "autoencoder": autoencoder_quality(encoder, engine, params, worlds),
    }
    with torch.inference_mode():
        report["motion"] = motion_and_fidelity(engine, encoder, params, worlds)
        report["theme"] = theme_switches(engine, encoder, classifier, params, worlds)
        if long:
            rows: list[np.ndarray] = []
            report["long"] = long_rollouts(engine, encoder, classifier, params, worlds, rows)
            if strip is not None:
                from PIL import Image

                Image.fromarray(np.concatenate(rows, axis=0)).save(strip)
        if speed:
            report["speed"] = streaming_speed(engine, params)
    motion, theme = report["motion"], report["theme"]
    assert isinstance(motion, dict) and isinstance(theme, dict)
    report["targets"] = {
        name: {"target": target, "measured": (motion | theme)[name], "met": (motion | theme)[name] >= target}
        for name, target in TARGETS.items()
    }
    report["eval_seconds"] = round(time.monotonic() - started, 1)
    return report


# run by the trainer on its own device right after training: every direction, every theme pair
TRAINING_CHECK = EvalParams(direction_chunks=8, theme_chunks=2, classifier_seeds=2)


def save_sheet(weights: Path, encoder_path: Path, device: str, path: Path, model: ModelConfig = CONFIG) -> None:
    """Ground truth vs model, one frame per chunk, per theme (see ``sample_sheet``), as a PNG."""
    from PIL import Image

    engine = _demo_engine(model, device, weights)
    encoder = load_encoder(encoder_path, ae_config_for(engine.config), engine.device)
    worlds = Worlds(WorldParams(width=engine.config.width, height=engine.config.height))
    with torch.inference_mode():
        sheet = sample_sheet(engine, encoder, EvalParams(), worlds)
    Image.fromarray(sheet).save(path)


def build_eval_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m demo.eval", description=__doc__.split("\n\n")[0])
    p.add_argument("--weights", required=True, type=Path, help="the demo model's demo.safetensors")
    p.add_argument("--model", default="demo", choices=sorted(MODELS), help="the config the weights were trained for")
    p.add_argument("--encoder", type=Path, default=None, help=f"default: {ENCODER_FILE} next to --weights")
    p.add_argument("--json", type=Path, default=None, help="write the report here")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument("--quick", action="store_true", help="short rollouts only (the regression guard's)")
    p.add_argument("--no-long", action="store_true", help="skip the 30 s / 60 s rollouts")
    p.add_argument("--no-speed", action="store_true", help="skip the streaming speed measurement")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--sheet", type=Path, default=None, help="also save a ground truth vs model PNG here")
    p.add_argument("--long-strip", type=Path, default=None,
                   help="save the 60 s rollouts here as a PNG (ground truth above model, one frame per 5 s)")
    p.add_argument("--timesteps", default=None, help="denoise timesteps to sample with, e.g. 1000,750,500,250")
    p.add_argument("--guidance", type=float, default=None, help="action guidance scale (1 = none)")
    p.add_argument("--guided-steps", type=int, default=None, help="how many first denoise steps are guided")
    p.add_argument("--context-noise", type=float, default=None, help="std of the seeded noise on each chunk's "
                                                                     "latents for its cache pass")
    p.add_argument("--kv-from-last-pass", action="store_true",
                   help="skip the cache pass: the last denoise pass writes each chunk's K/V (an approximation)")
    p.add_argument("--recontext", default=None, choices=["on", "off"],
                   help="on a prompt change, rewrite the window's K/V under the new prompt (default: the config's)")
    p.add_argument("--prompt-guidance", type=float, default=None,
                   help="guidance away from the prompt a session changed from, on the first chunks under the new one "
                        "(1 = none; default: the config's)")
    p.add_argument("--prompt-guidance-chunks", type=int, default=None,
                   help="how many chunks after a prompt change are guided (default: the config's)")
    p.add_argument("--dtype", default=None, help="engine dtype (default float32 on the CPU; bfloat16 is a speed trade)")
    p.add_argument("--attention", default="sdpa", choices=["sdpa", "matmul"],
                   help="self-attention backend (default sdpa; the daemon picks the faster at warmup)")
    p.add_argument("--long-play", action="store_true",
                   help="run the long-play evaluation (demo/long_play.py) instead of the short one")
    p.add_argument("--seconds", type=float, default=300.0, help="length of the long play (default 300)")
    p.add_argument("--theme-cycle", action="store_true",
                   help="run the theme-cycle evaluation (demo/theme_cycle.py): the theme changes every 10 s, "
                        "all six twice")
    p.add_argument("--from-nothing", action="store_true",
                   help="with --long-play or --theme-cycle: start the play as a served session does, from its "
                        "seed and prompt alone, not on two true chunks (its first two chunks are made, not scored)")
    p.add_argument("--play-seed", type=int, default=0,
                   help="with --long-play or --theme-cycle: another play, its world and its keys drawn from "
                        "this seed (default 0: the play every report so far used)")
    p.add_argument("--figures", type=Path, default=None,
                   help="with --long-play: write long_play_filmstrip.png and long_play_directions.png here; "
                        "with --theme-cycle: theme_cycle_filmstrip.png")
    p.add_argument("--guidance-rescale", type=float, default=None, help="share of the guided flow rescaled to "
                                                                        "the plain flow-with-actions std, 0..1")
    return p


_VARIANT = "+sampling"  # suffix of the name of a variant of the evaluated config


def _sampling_variant(args: argparse.Namespace) -> ModelConfig:
    """The config to evaluate: the demo's own, or a variant with the sampling settings asked for."""
    changes: dict[str, object] = {}
    if args.timesteps is not None:
        try:
            changes["denoise_timesteps"] = tuple(float(v) for v in args.timesteps.split(","))
        except ValueError as exc:
            raise DemoError("bad_timesteps", f"--timesteps takes numbers separated by commas, got "
                                             f"{args.timesteps!r}") from exc
    if args.guidance is not None:
        changes["action_guidance"] = args.guidance
    if args.guided_steps is not None:
        changes["action_guidance_steps"] = args.guided_steps
    if args.context_noise is not None:
        changes["cache_context_noise"] = args.context_noise
    if args.guidance_rescale is not None:
        changes["action_guidance_rescale"] = args.guidance_rescale
    if args.kv_from_last_pass:
        changes["kv_from_last_pass"] = True
    if args.recontext is not None:
        changes["recontext_on_prompt_change"] = args.recontext == "on"
    if args.prompt_guidance is not None:
        changes["prompt_change_guidance"] = args.prompt_guidance
    if args.prompt_guidance_chunks is not None:
        changes["prompt_change_guidance_chunks"] = args.prompt_guidance_chunks
    config = MODELS[args.model]
    if not changes:
        return config
    return config.with_overrides(name=args.model + _VARIANT, **changes)


def main(argv: list[str] | None = None) -> int:
    args = build_eval_parser().parse_args(argv)
    if args.threads is not None:
        if args.threads < 1:
            print("error: --threads must be at least 1", file=sys.stderr)
            return 2
        torch.set_num_threads(args.threads)
    if args.long_strip is not None and (args.quick or args.no_long):
        print("error: bad_long_strip: --long-strip draws the long rollouts; drop --quick / --no-long", file=sys.stderr)
        return 2
    encoder = args.encoder or args.weights.parent / ENCODER_FILE
    params = replace(QUICK) if args.quick else EvalParams()
    try:
        model = _sampling_variant(args)
        if args.long_play and args.theme_cycle:
            raise DemoError("bad_evaluation", "--long-play and --theme-cycle are two evaluations: run one at a time")
        if args.play_seed and not (args.long_play or args.theme_cycle):
            raise DemoError("bad_evaluation", "--play-seed picks the play of --long-play or --theme-cycle; add one "
                                              "of them")
        if not 0 <= args.play_seed <= 1000:
            raise DemoError("bad_seed", f"--play-seed must lie in [0, 1000], got {args.play_seed}")
        if args.from_nothing and not (args.long_play or args.theme_cycle):
            raise DemoError("bad_evaluation", "--from-nothing starts the play of --long-play or --theme-cycle; "
                                              "add one of them")
        if args.theme_cycle:
            return _write(run_theme_cycle(args.weights, encoder, args.device, model, args.figures, args.dtype,
                                          args.attention, args.from_nothing, args.play_seed), args.json)
        if args.long_play:
            return _write(run_long_play(args.weights, encoder, args.device, model, args.seconds, args.figures,
                                        args.dtype, args.attention, args.from_nothing, args.play_seed), args.json)
        report = evaluate(args.weights, encoder, args.device, params, long=not (args.quick or args.no_long),
                          speed=not (args.quick or args.no_speed), model=model, strip=args.long_strip,
                          dtype=args.dtype, attention=args.attention)
        if args.sheet is not None:
            save_sheet(args.weights, encoder, args.device, args.sheet, model=model)
    except (DemoError, EngineError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return _write(report, args.json)


def _write(report: dict[str, object], path: Path | None) -> int:
    text = json.dumps(report, indent=2)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    print(text)
    return 0


_P = TypeVar("_P", "LongPlayParams", "ThemeCycleParams")


def seeded(params: _P, play_seed: int) -> _P:
    """``params`` for play ``play_seed``: its world seed 1000 apart per play (the probes' worlds sit
    100-207 above it), its script seed the next one up; play 0 is ``params`` itself."""
    return replace(params, world_seed=params.world_seed + 1000 * play_seed, script_seed=params.script_seed + play_seed)


def run_long_play(weights: Path, encoder_path: Path, device: str, model: ModelConfig, seconds: float,
                  figures: Path | None, dtype: str | None = None, attention: str = "sdpa",
                  from_nothing: bool = False, play_seed: int = 0) -> dict[str, object]:
    """The long-play evaluation of ``weights`` sampled as ``model`` says (see demo.long_play)."""
    from demo.long_play import LongPlayParams, long_play

    if seconds < 70.0:
        raise DemoError("bad_seconds", f"--seconds must be at least 70 (probes fork after 60 s of play), got {seconds}")
    engine, encoder, worlds = _played_engine(weights, encoder_path, device, model, dtype, attention)
    report = long_play(engine, encoder, worlds, seeded(LongPlayParams(seconds=seconds, from_nothing=from_nothing),
                                                      play_seed), figures)
    return {**_provenance(engine, weights, device), "long_play": report}


def run_theme_cycle(weights: Path, encoder_path: Path, device: str, model: ModelConfig, figures: Path | None,
                    dtype: str | None = None, attention: str = "sdpa", from_nothing: bool = False,
                    play_seed: int = 0) -> dict[str, object]:
    """The theme-cycle evaluation of ``weights`` sampled as ``model`` says (see demo.theme_cycle)."""
    from demo.theme_cycle import ThemeCycleParams, theme_cycle

    engine, encoder, worlds = _played_engine(weights, encoder_path, device, model, dtype, attention)
    report = theme_cycle(engine, encoder, worlds, seeded(ThemeCycleParams(from_nothing=from_nothing), play_seed),
                         figures)
    return {**_provenance(engine, weights, device), "theme_cycle": report}


def _played_engine(weights: Path, encoder_path: Path, device: str, model: ModelConfig, dtype: str | None,
                   attention: str) -> tuple[Engine, DemoEncoder, Worlds]:
    engine = _demo_engine(model, device, weights, dtype, attention=attention)
    encoder = load_encoder(encoder_path, ae_config_for(engine.config), engine.device)
    return engine, encoder, Worlds(WorldParams(width=engine.config.width, height=engine.config.height))


def _provenance(engine: Engine, weights: Path, device: str) -> dict[str, object]:
    return {"model": engine.config.name, "weights": str(weights),
            "weights_sha256": hashlib.sha256(weights.read_bytes()).hexdigest(), "device": device,
            "torch": torch.__version__, "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "sampling": _sampling(engine.config), "dtype": str(engine.parts.dtype),
            "attention": engine.parts.attend.name}


if __name__ == "__main__":
    sys.exit(main())
