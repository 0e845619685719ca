"""Train the demo world model: ``python -m demo.train --out DIR [--minutes M] [--device cuda] [--steps N]``.

Stage 1 trains the autoencoder on rendered frames, stage 2 the causal DiT (with its action
and prompt conditioning and the built-in text encoder) on the frozen encoder's latents. Data is
generated on the fly on the training device. ``--minutes`` bounds the whole run (default 13,
for one H200 in under 15 minutes); ``--steps N`` instead runs N steps per stage (a CPU smoke
run: ``--steps 3``). Writes demo.safetensors, demo_encoder.safetensors, demo.json and
losses.png into ``--out``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
import time
from pathlib import Path

import torch

from demo._progress import Budget, LossLog, StageClock, save_loss_plot
from demo._train_ae import AETrainParams, train_autoencoder
from demo._train_dit import DiTTrainParams, train_dit
from demo.autoencoder import ae_config_for
from demo.config import MODELS, TRAIN_CHUNKS
from demo.data import EpisodeSource, SourceParams
from demo.errors import DemoError, exit_code
from demo.export import load_trained, write_model
from demo.world import WorldParams
from engine._setup import parse_device
from engine.config import ModelConfig
from engine.errors import ConfigError, EngineError
from engine.model import CausalDiT
from engine.text import HashTextEncoder

__all__ = ["build_train_parser", "main"]

_RESERVE_S = 25.0  # kept back from --minutes for export and plots
_CHECK_S = 70.0  # ... and for the evaluation on the training device (cuda)


def build_train_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m demo.train", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path, help="directory for weights, metadata and loss plot")
    p.add_argument("--model", default="demo", choices=sorted(MODELS),
                   help="demo (served, 8x autoencoder) or demo-fine (an experiment: 4x autoencoder)")
    p.add_argument("--minutes", type=float, default=13.0, help="wall-clock budget for the whole run (default 13)")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    p.add_argument("--steps", type=int, default=None, help="run exactly this many steps per stage (smoke runs)")
    p.add_argument("--batch", type=int, default=None, help="DiT sequences per step (default 128 on cuda, 2 on cpu)")
    p.add_argument("--ae-batch", type=int, default=None, help="AE episodes of 4 frames per step (32 cuda, 2 cpu)")
    p.add_argument("--pool", type=int, default=None, help="terrains kept for sampling (default 64 cuda, 2 cpu)")
    p.add_argument("--ae-fraction", type=float, default=0.15, help="share of the time budget for the autoencoder")
    p.add_argument("--chunks", type=int, default=TRAIN_CHUNKS, help=f"chunks per DiT training sequence (default {TRAIN_CHUNKS})")
    p.add_argument("--no-check", action="store_true", help="skip the evaluation on the training device at the end")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--resume", type=Path, default=None,
                   help="train the DiT on from the files an earlier run wrote here (its autoencoder is kept)")
    p.add_argument("--autoencoder-from", type=Path, default=None,
                   help="keep the autoencoder an earlier run wrote here and train a new DiT from scratch")
    p.add_argument("--lr", type=float, default=DiTTrainParams.lr, help=f"DiT peak learning rate (default {DiTTrainParams.lr})")
    return p


def _check(args: argparse.Namespace) -> torch.device:
    if args.minutes <= 1.0:
        raise DemoError("bad_minutes", f"--minutes must be more than 1, got {args.minutes}")
    if args.resume is not None and args.autoencoder_from is not None:
        raise DemoError("bad_resume", "give --resume (the DiT trains on) or --autoencoder-from (a new DiT), not both")
    if args.steps is not None and args.steps < 1:
        raise DemoError("bad_steps", f"--steps must be at least 1, got {args.steps}")
    if not 0.05 <= args.ae_fraction <= 0.8:
        raise DemoError("bad_ae_fraction", f"--ae-fraction must lie in [0.05, 0.8], got {args.ae_fraction}")
    if not 0.0 < args.lr <= 0.01:
        raise DemoError("bad_lr", f"--lr must lie in (0, 0.01], got {args.lr}")
    window = MODELS[args.model].window_chunks
    if args.chunks < window + 1:
        raise DemoError("bad_chunks", f"--chunks must be at least {window + 1} so the window rolls")
    for name in ("batch", "ae_batch", "pool"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise DemoError(f"bad_{name}", f"--{name.replace('_', '-')} must be at least 1, got {value}")
    name = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return parse_device(name)
    except ConfigError as exc:
        raise DemoError(exc.code, f"--device: {exc.message}") from exc


def _meta(args: argparse.Namespace, device: torch.device, started: float, stages: dict[str, object],
          log: LossLog, partial: bool) -> dict[str, object]:
    config = MODELS[args.model]
    return {
        "model": config.name,
        "partial": partial,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "wall_seconds": round(time.monotonic() - started, 1),
        "args": {k: str(v) for k, v in vars(args).items()},
        "config": {k: (str(v) if k == "extra" else v) for k, v in dataclasses.asdict(config).items()},
        **stages,
        "final_losses": {name: sum(v[-50:]) / len(v[-50:]) for name, v in log.series.items()},
    }


def _check_on_device(out: Path, paths: dict[str, Path], device: torch.device, model: ModelConfig) -> None:
    """Evaluate the fresh weights on the training device and draw a sample sheet (quick feedback)."""
    from demo.eval import TRAINING_CHECK, evaluate, save_sheet

    report = evaluate(paths["weights"], paths["encoder"], str(device), TRAINING_CHECK, long=False, speed=False,
                      model=model)
    (out / "check.json").write_text(json.dumps(report, indent=2) + "\n")
    save_sheet(paths["weights"], paths["encoder"], str(device), out / "samples.png", model=model)
    motion, theme = report["motion"], report["theme"]
    assert isinstance(motion, dict) and isinstance(theme, dict)
    print(f"[check] direction accuracy {motion['direction_accuracy']:.3f} (ground truth "
          f"{motion['ground_truth_direction_accuracy']:.3f}), theme accuracy {theme['theme_accuracy']:.3f}, "
          f"PSNR by chunk {[round(v, 2) for v in motion['psnr_db_by_chunk']]}", flush=True)


def _earlier_steps(meta: dict[str, object]) -> int:
    """DiT steps of the run a resumed one starts from, its own predecessors included."""
    dit = meta.get("dit")
    steps = int(dit.get("steps", 0)) if isinstance(dit, dict) else 0
    earlier = meta.get("resumed_from")
    return steps + (_earlier_steps(earlier) if isinstance(earlier, dict) else 0)


def _autoencoder_origin(meta: dict[str, object]) -> dict[str, object]:
    """Where a kept autoencoder was trained: the run that trained it (following resumes back)."""
    ae = meta.get("autoencoder")
    if isinstance(ae, dict) and int(ae.get("steps", 0)) > 0:
        return {"date": meta.get("date"), "device": meta.get("device"), "wall_seconds": meta.get("wall_seconds"),
                "autoencoder": ae}
    for key in ("resumed_from", "autoencoder_from"):
        inner = meta.get(key)
        if isinstance(inner, dict):
            return inner if key == "autoencoder_from" else _autoencoder_origin(inner)
    return {}


def run_training(args: argparse.Namespace) -> dict[str, Path]:
    device = _check(args)
    started = time.monotonic()
    cuda = device.type == "cuda"
    check = cuda and not args.no_check and args.steps is None
    total_s = args.minutes * 60.0 - (_CHECK_S if check else 0.0)
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(args.seed)
    config = MODELS[args.model]
    ae_config = ae_config_for(config)
    world = WorldParams(width=config.width, height=config.height)
    source_params = SourceParams(pool_size=args.pool or (64 if cuda else 2))
    print(f"[setup] device {device}, building {source_params.pool_size} terrains", flush=True)
    source = EpisodeSource(world, device, seed=args.seed, params=source_params)
    log = LossLog()

    ae_params = AETrainParams(batch=args.ae_batch or (32 if cuda else 2))
    earlier = args.resume or args.autoencoder_from
    resumed = load_trained(earlier, config, ae_config) if earlier is not None else None
    if resumed is None:
        left = total_s - (time.monotonic() - started) - _RESERVE_S
        ae_budget = Budget("autoencoder", left * args.ae_fraction, steps=args.steps)
        encoder, decoder = train_autoencoder(source, ae_config, ae_budget, ae_params, log)
        start = None
    else:  # the earlier run's autoencoder stays as it is: the DiT's latents must not move
        ae_budget = Budget("autoencoder", 0.0, steps=0)
        encoder, decoder = resumed.encoder.to(device).eval(), resumed.decoder.to(device).eval()
        if args.resume is not None:
            start = (resumed.dit.to(device), resumed.text.to(device))
            print(f"[resume] from {args.resume} (DiT steps so far: {_earlier_steps(resumed.meta)})", flush=True)
        else:
            start = None
            print(f"[autoencoder] kept from {args.autoencoder_from}; the DiT starts from scratch", flush=True)

    left = total_s - (time.monotonic() - started) - _RESERVE_S
    dit_params = DiTTrainParams(batch=args.batch or (128 if cuda else 2), chunks=args.chunks, seed=args.seed,
                                lr=args.lr)
    dit_budget = Budget("dit", left, steps=args.steps)
    clock = StageClock(device, "dit")

    def stages() -> dict[str, object]:
        return {
            "autoencoder": {"steps": ae_budget.step, "params": dataclasses.asdict(ae_params),
                            "config": dataclasses.asdict(ae_config)},
            "dit": {"steps": dit_budget.step, "params": dataclasses.asdict(dit_params),
                    "stage_seconds": {k: round(v, 2) for k, v in clock.seconds().items()}},
            "data": {"world": dataclasses.asdict(world), "source": dataclasses.asdict(source_params)},
            **({"resumed_from": resumed.meta} if args.resume is not None and resumed is not None else {}),
            **({"autoencoder_from": _autoencoder_origin(resumed.meta)}
               if args.autoencoder_from is not None and resumed is not None else {}),
        }

    def checkpoint(dit: CausalDiT, text: HashTextEncoder, step: int) -> None:
        write_model(args.out, dit, text, decoder, encoder, _meta(args, device, started, stages(), log, True))
        print(f"[checkpoint] step {step} written to {args.out}", flush=True)

    dit, text = train_dit(source, encoder, config, dit_budget, dit_params, log, checkpoint, start, clock)
    print(f"[dit] time per stage: {clock.summary()}", flush=True)
    paths = write_model(args.out, dit, text, decoder, encoder, _meta(args, device, started, stages(), log, False))
    paths["plot"] = args.out / "losses.png"
    save_loss_plot(log, paths["plot"])
    print(f"[done] {time.monotonic() - started:.0f}s; wrote " + ", ".join(str(p) for p in paths.values()), flush=True)
    if check:
        try:
            _check_on_device(args.out, paths, device, config)
        except (DemoError, EngineError, RuntimeError) as exc:  # the weights are written; say why the check failed
            print(f"[check] failed, weights kept: {exc}", flush=True)
    return paths


def main(argv: list[str] | None = None) -> int:
    return exit_code(run_training, build_train_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
