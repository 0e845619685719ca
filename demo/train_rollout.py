"""Train the demo model on its own rollouts (``demo._train_rollout``), from a trained model:
``python -m demo.train_rollout --resume DIR --out DIR [--minutes M] [--device cuda] [--steps N]``.

``--resume`` takes a directory written by ``python -m demo.train`` (or ``engine/weights``,
which holds the shipped files) or by this command. From the former it starts a new rollout run
on those weights (the autoencoder is kept: the DiT's latents must not move); from the latter it
continues exactly where that run stopped (``rollout_state.pt``: weights, their average, the
optimizer, the step, the seconds spent). Writes demo.safetensors, demo_encoder.safetensors,
demo.json (loadable by the engine, the evaluation and ``--resume``), rollout_state.pt (not for
shipping: it holds the optimizer) and losses.png into ``--out``; checkpoints every 2 minutes.

``--objective regress`` (``demo._train_rollout``) regresses each rolled-out chunk to the
true world's; ``--objective dmd`` (``demo._train_dmd``) matches the starting model's
distribution given the self-made context (real score: the starting DiT, frozen; fake score: a
trained copy, ``--fake-lr``, ``--fake-steps``; ``--real-guidance``, ``--regress-weight``);
``--objective distill`` (``demo._train_distill``) trains a sampler of ``--student-timesteps``
(default 1000,500) without guidance to give the starting model's served, guided flows
(``--anchor-weight``); ``--objective adversarial`` (``demo._train_adversarial``) keeps the regress
term (``--regress-weight``, default 1) and adds a critic that tells the true world's chunks from the
model's (``--adversarial-weight``, ``--critic-lr``). A new run takes DEFAULT_OBJECTIVE, a resumed one
the objective it was started with.
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

from demo._progress import Budget, LossLog, save_loss_plot
from demo._rollout_critics import OBJECTIVES, AdversarialParams, DistillParams, DmdParams
from demo._train_adversarial import adversarial_step
from demo._train_distill import distill_step
from demo._train_dmd import dmd_step
from demo._train_rollout import RolloutParams, RolloutState, horizon_at, rollout_step
from demo.actions import action_batch
from demo.autoencoder import ae_config_for
from demo.config import MODELS
from demo.data import EpisodeSource, SourceParams
from demo.errors import DemoError, exit_code
from demo.export import load_trained, write_model
from demo.script import scripted_play
from demo.world import WorldParams
from engine._setup import parse_device
from engine.attention import AttentionBackend
from engine.errors import ConfigError

__all__ = ["DEFAULT_OBJECTIVE", "STATE_FILE", "build_parser", "changed_settings", "main", "run",
           "schedule_fraction"]

STATE_FILE = "rollout_state.pt"
DEFAULT_OBJECTIVE = "regress"  # of a new run; a resumed run keeps its own
_RESERVE_S = 20.0  # kept back from --minutes for writing the files and the plot
_SCRIPT_SECONDS = 900.0  # the action track scripted episodes take stretches of


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m demo.train_rollout", description=__doc__.split("\n\n")[0])
    p.add_argument("--resume", required=True, type=Path, help="a trained model's directory (see above)")
    p.add_argument("--out", required=True, type=Path, help="directory for weights, state and loss plot")
    p.add_argument("--model", default="demo", choices=sorted(MODELS))
    p.add_argument("--minutes", type=float, default=13.0, help="wall-clock budget of this run (default 13)")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    p.add_argument("--steps", type=int, default=None, help="run exactly this many steps (smoke runs)")
    p.add_argument("--schedule-minutes", type=float, default=None,
                   help="the whole run's training minutes over all its calls, which the horizon growth and the "
                        "learning-rate decay are spread over (default: the minutes trained before plus this call's)")
    p.add_argument("--batch", type=int, default=None, help=f"episodes per step (default {RolloutParams.batch} "
                                                           "on cuda, 1 on cpu)")
    p.add_argument("--min-horizon", type=int, default=RolloutParams.min_horizon)
    p.add_argument("--max-horizon", type=int, default=RolloutParams.max_horizon,
                   help=f"chunks rolled out per step by the end of the growth (default {RolloutParams.max_horizon})")
    p.add_argument("--lr", type=float, default=RolloutParams.lr)
    p.add_argument("--ema-decay", type=float, default=RolloutParams.ema_decay,
                   help="decay of the weights' average that gets written (default %(default)s; "
                        "at most (1 + step) / (10 + step) early on, so a short run writes what it learned)")
    p.add_argument("--pool", type=int, default=None, help="terrains kept for sampling (default 64 cuda, 2 cpu)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--objective", default=None, help=f"{' or '.join(OBJECTIVES)} (default: a resumed run's own, "
                                                     f"else {DEFAULT_OBJECTIVE})")
    p.add_argument("--fake-lr", type=float, default=None, help="dmd: the fake score's learning rate (default --lr)")
    p.add_argument("--fake-steps", type=int, default=DmdParams.fake_steps,
                   help="dmd: fake-score updates per generator update, each a rollout (0: F stays the start)")
    p.add_argument("--real-guidance", type=float, default=None,
                   help="dmd: the real score's guidance on the actions (default the config's action_guidance)")
    p.add_argument("--regress-weight", type=float, default=None,
                   help="dmd, distill and adversarial: weight of the true-world regression term added (default 0; "
                        f"adversarial {AdversarialParams.regress_weight:g})")
    p.add_argument("--teacher-guidance", type=float, default=DistillParams.teacher_guidance,
                   help="distill: the teacher's guidance on the actions at its guided step (default %(default)s)")
    p.add_argument("--student-timesteps", default=",".join(f"{t:g}" for t in DistillParams.student_timesteps),
                   help="distill: the student's denoise timesteps (default %(default)s)")
    p.add_argument("--anchor-weight", type=float, default=DistillParams.anchor_weight,
                   help="distill: weight of the term keeping the student's flow the teacher's at a random sigma")
    p.add_argument("--adversarial-weight", type=float, default=AdversarialParams.weight,
                   help="adversarial: weight of the critic's term in the generator's loss (default %(default)s)")
    p.add_argument("--critic-lr", type=float, default=None,
                   help="adversarial: the critic's learning rate (default --lr)")
    p.add_argument("--detail-weight", type=float, default=AdversarialParams.detail_weight,
                   help="adversarial and distill: weight of the term matching the chunks' spatial detail to the "
                        "world's (default %(default)s)")
    p.add_argument("--detail-hide-centre", type=int, default=AdversarialParams.detail_hide_centre,
                   help="adversarial and distill: leave the centre square of this many latent cells a side (the avatar's "
                        "place) out of the detail term (default %(default)s: none)")
    p.add_argument("--new-settings", action="store_true",
                   help="continue a run under settings other than the ones it was trained with (without it, "
                        "continuing with other flags is refused: give the flags the run was started with)")
    p.add_argument("--fresh-share", type=float, default=RolloutParams.fresh_share,
                   help="the share of steps whose episodes start from nothing, the model making every chunk from "
                        "the first, as a served session starts (default %(default)s: all start on true chunks)")
    return p


def _saved_objective(resume: Path) -> str | None:
    saved = resume / STATE_FILE
    if not saved.is_file():
        return None
    return str(torch.load(saved, map_location="cpu", weights_only=True).get("objective", "regress"))


def _dmd(args: argparse.Namespace) -> DmdParams:
    if args.fake_steps < 0:
        raise DemoError("bad_fake_steps", f"--fake-steps must be 0 or more, got {args.fake_steps}")
    if args.fake_lr is not None and not 0.0 < args.fake_lr <= 0.01:
        raise DemoError("bad_lr", f"--fake-lr must lie in (0, 0.01], got {args.fake_lr}")
    if args.real_guidance is not None and not 0.0 < args.real_guidance <= 20.0:
        raise DemoError("bad_guidance", f"--real-guidance must lie in (0, 20], got {args.real_guidance}")
    if args.regress_weight is not None and not 0.0 <= args.regress_weight <= 100.0:
        raise DemoError("bad_regress_weight", f"--regress-weight must lie in [0, 100], got {args.regress_weight}")
    return DmdParams(fake_lr=args.fake_lr, fake_steps=args.fake_steps, real_guidance=args.real_guidance,
                     regress_weight=args.regress_weight or 0.0)


def _adversarial(args: argparse.Namespace) -> AdversarialParams:
    if not 0.0 <= args.adversarial_weight <= 100.0:
        raise DemoError("bad_adversarial_weight", f"--adversarial-weight must lie in [0, 100], got "
                                                  f"{args.adversarial_weight}")
    if args.critic_lr is not None and not 0.0 < args.critic_lr <= 0.01:
        raise DemoError("bad_lr", f"--critic-lr must lie in (0, 0.01], got {args.critic_lr}")
    if not 0.0 <= args.detail_weight <= 100.0:
        raise DemoError("bad_detail_weight", f"--detail-weight must lie in [0, 100], got {args.detail_weight}")
    if not 0 <= args.detail_hide_centre <= 12:
        raise DemoError("bad_detail_hide_centre", f"--detail-hide-centre must lie in [0, 12] latent cells, got "
                                                  f"{args.detail_hide_centre}")
    regress = AdversarialParams.regress_weight if args.regress_weight is None else args.regress_weight
    if args.adversarial_weight == 0.0 and regress == 0.0 and args.detail_weight == 0.0:
        raise DemoError("bad_adversarial_weight", "--adversarial-weight, --regress-weight and --detail-weight are "
                                                  "all 0: the generator would learn nothing; give one a weight")
    return AdversarialParams(weight=args.adversarial_weight, regress_weight=regress, critic_lr=args.critic_lr,
                             detail_weight=args.detail_weight, detail_hide_centre=args.detail_hide_centre)


def _distill(args: argparse.Namespace) -> DistillParams:
    try:
        steps = tuple(float(t) for t in args.student_timesteps.split(",") if t.strip())
    except ValueError:
        steps = ()
    if not steps or any(not 0.0 < t <= 1000.0 for t in steps) or list(steps) != sorted(steps, reverse=True):
        raise DemoError("bad_timesteps", f"--student-timesteps must be decreasing numbers in (0, 1000], e.g. "
                                         f"1000,500; got {args.student_timesteps!r}")
    if not 0.0 <= args.anchor_weight <= 100.0:
        raise DemoError("bad_anchor_weight", f"--anchor-weight must lie in [0, 100], got {args.anchor_weight}")
    if not 0.0 < args.teacher_guidance <= 20.0:
        raise DemoError("bad_guidance", f"--teacher-guidance must lie in (0, 20], got {args.teacher_guidance}")
    return DistillParams(student_timesteps=steps, anchor_weight=args.anchor_weight,
                         teacher_guidance=args.teacher_guidance, regress_weight=args.regress_weight or 0.0,
                         detail_weight=args.detail_weight, detail_hide_centre=args.detail_hide_centre)


def _params(args: argparse.Namespace, cuda: bool) -> RolloutParams:
    if args.minutes <= 0.5:
        raise DemoError("bad_minutes", f"--minutes must be more than 0.5, got {args.minutes}")
    if args.schedule_minutes is not None and args.schedule_minutes <= 0:
        raise DemoError("bad_schedule_minutes", f"--schedule-minutes must be positive, got {args.schedule_minutes}")
    if args.steps is not None and args.steps < 1:
        raise DemoError("bad_steps", f"--steps must be at least 1, got {args.steps}")
    if not 1 <= args.min_horizon <= args.max_horizon:
        raise DemoError("bad_horizon", f"need 1 <= --min-horizon <= --max-horizon, got {args.min_horizon}, "
                                       f"{args.max_horizon}")
    if not 0.0 < args.lr <= 0.01:
        raise DemoError("bad_lr", f"--lr must lie in (0, 0.01], got {args.lr}")
    if not 0.0 <= args.ema_decay < 1.0:
        raise DemoError("bad_ema_decay", f"--ema-decay must lie in [0, 1), got {args.ema_decay}")
    if not 0.0 <= args.fresh_share <= 1.0:
        raise DemoError("bad_fresh_share", f"--fresh-share must lie in [0, 1], got {args.fresh_share}")
    if args.objective is not None and args.objective not in OBJECTIVES:
        raise DemoError("bad_objective", f"--objective must be one of {', '.join(OBJECTIVES)}, got {args.objective!r}")
    dmd, distill, adversarial = _dmd(args), _distill(args), _adversarial(args)
    objective = args.objective or _saved_objective(args.resume) or DEFAULT_OBJECTIVE
    return RolloutParams(batch=args.batch or (RolloutParams.batch if cuda else 1), min_horizon=args.min_horizon,
                         max_horizon=args.max_horizon, lr=args.lr, ema_decay=args.ema_decay, seed=args.seed,
                         fresh_share=args.fresh_share, objective=objective, dmd=dmd,
                         distill=distill, adversarial=adversarial)


def changed_settings(rollout: object, params: RolloutParams) -> list[str]:
    """The settings of ``params`` that differ from those a run was trained with (``rollout``: the
    ``rollout`` entry of its demo.json), as 'name: saved -> now'; none where nothing was saved."""
    saved = rollout.get("params") if isinstance(rollout, dict) else None
    if not isinstance(saved, dict):
        return []
    now = json.loads(json.dumps(dataclasses.asdict(params)))  # tuples as the lists the meta holds
    changed = []
    for name, value in now.items():
        if isinstance(value, dict) and isinstance(saved.get(name), dict):
            changed += [f"{name}.{k}: {saved[name].get(k)!r} -> {v!r}" for k, v in value.items()
                        if saved[name].get(k) != v]
        elif saved.get(name) != value:
            changed.append(f"{name}: {saved.get(name)!r} -> {value!r}")
    return changed


def _tail_mean(values: list[float]) -> float:
    return sum(values[-20:]) / max(1, len(values[-20:]))


def schedule_fraction(before_s: float, elapsed_s: float, budget_s: float, schedule_s: float | None) -> float:
    """How far through its schedule a run is: trained seconds (earlier calls' and this one's) over the
    whole run's planned seconds (``--schedule-minutes``; by default what came before plus this call's
    budget, so a run in one call ends its schedule as its budget ends)."""
    planned = schedule_s if schedule_s is not None else before_s + budget_s
    return min(1.0, (before_s + elapsed_s) / max(1e-9, planned))


def run(args: argparse.Namespace) -> dict[str, Path]:
    started = time.monotonic()
    try:
        device = parse_device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    except ConfigError as exc:
        raise DemoError(exc.code, f"--device: {exc.message}") from exc
    cuda = device.type == "cuda"
    params = _params(args, cuda)
    config = MODELS[args.model]
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
    trained = load_trained(args.resume, config, ae_config_for(config))
    encoder, decoder = trained.encoder.to(device).eval(), trained.decoder.to(device).eval()
    state = RolloutState.start(trained.dit, trained.text, params, device)
    saved = args.resume / STATE_FILE
    if saved.is_file():
        changed = changed_settings(trained.meta.get("rollout"), params)
        if changed and not args.new_settings:
            raise DemoError("settings_changed", f"the run in {args.resume} was trained with other settings than these "
                                                f"flags give ({'; '.join(changed)}): give the flags it was started "
                                                "with to continue it exactly, or --new-settings to go on under these")
        state.load_state_dict(torch.load(saved, map_location=device, weights_only=True))
        print(f"[resume] {saved}: step {state.step}, {state.seconds:.0f} s trained", flush=True)
    else:
        print(f"[start] rollout training ({params.objective}) on the weights in {args.resume}", flush=True)
    fps, fpc = config.fps, config.latent_frames_per_chunk
    script = action_batch(scripted_play(_SCRIPT_SECONDS, args.seed + 1, fps, fpc).actions)
    source = EpisodeSource(WorldParams(width=config.width, height=config.height), device, seed=args.seed + 7,
                           params=SourceParams(pool_size=args.pool or (64 if cuda else 2),
                                               scripted_probability=params.scripted_share), script=script)
    attend = AttentionBackend.create("sdpa", device)
    gen = torch.Generator().manual_seed(params.seed + 31 + state.step)
    noise = torch.Generator(device=device).manual_seed(params.seed + 97 + state.step)
    budget = Budget("rollout", args.minutes * 60.0 - _RESERVE_S - (time.monotonic() - started), steps=args.steps,
                    log_every=10)
    before, first_step = state.seconds, state.step
    if state.objective == "distill":
        log = LossLog({"distill: student flow vs the teacher's, plus any detail and regress terms": state.losses})
    elif state.adversary is not None:
        log = LossLog({"generator: critic term + regress term (self-made context)": state.losses,
                       "critic: hinge loss, true chunks against the generator's": state.adversary.losses})
    elif state.critics is None:
        log = LossLog({"rollout flow-matching loss (true chunk after self-made context)": state.losses})
    else:
        log = LossLog({"generator: DMD loss (self-made context)": state.losses,
                       "fake score: flow-matching loss on the generator's chunks": state.critics.losses})

    def fraction() -> float:  # of the whole run, resumed parts included
        if args.steps is not None:
            return budget.fraction()
        schedule_s = None if args.schedule_minutes is None else args.schedule_minutes * 60.0
        return schedule_fraction(before, time.monotonic() - budget.started, budget.seconds, schedule_s)

    def write(partial: bool) -> dict[str, Path]:
        state.seconds = before + time.monotonic() - budget.started
        meta = {"model": config.name, "stage": "rollout", "partial": partial,
                "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "device": torch.cuda.get_device_name(device) if cuda else "cpu", "torch": torch.__version__,
                "args": {k: str(v) for k, v in vars(args).items()}, "rollout": {
                    "steps": state.step, "steps_this_run": state.step - first_step, "seconds": round(state.seconds, 1),
                    "params": dataclasses.asdict(params), "final_loss": _tail_mean(state.losses),
                    "final_fake_loss": None if state.critics is None else _tail_mean(state.critics.losses),
                    "final_critic_loss": None if state.adversary is None else _tail_mean(state.adversary.losses)},
                "resumed_from": trained.meta}
        paths = write_model(args.out, state.ema_dit, state.ema_text, decoder, encoder, meta)
        paths["state"] = args.out / STATE_FILE
        torch.save(state.state_dict(), paths["state"])
        return paths

    last_checkpoint = time.monotonic()
    while not budget.done():
        horizon = horizon_at(params, fraction())
        episodes = source.sample(params.batch, (config.window_chunks + horizon) * fpc, fpc)
        if state.objective == "distill":
            loss = distill_step(state, episodes, encoder, config, attend, params, fraction(), gen, noise)
            budget.tick(loss, f"horizon {horizon}")
        elif state.adversary is not None:
            judged = adversarial_step(state, episodes, encoder, config, attend, params, fraction(), gen, noise)
            loss = judged.generator
            budget.tick(loss, f"critic {judged.critic:.4f} horizon {horizon}")
        elif state.critics is None:
            loss = rollout_step(state, episodes, encoder, config, attend, params, fraction(), gen, noise)
            budget.tick(loss, f"horizon {horizon}")
        else:
            losses = dmd_step(state, episodes, encoder, config, attend, params, fraction(), gen, noise)
            loss = losses.generator
            budget.tick(loss, f"fake {losses.fake:.5f} horizon {horizon}")
        if time.monotonic() - last_checkpoint >= params.checkpoint_every_s:
            write(partial=True)
            print(f"[checkpoint] step {state.step} written to {args.out}", flush=True)
            last_checkpoint = time.monotonic()
    paths = write(partial=False)
    paths["plot"] = args.out / "losses.png"
    save_loss_plot(log, paths["plot"])
    print(f"[done] step {state.step} ({state.step - first_step} this run), {time.monotonic() - started:.0f} s; "
          f"wrote " + ", ".join(str(p) for p in paths.values()), flush=True)
    return paths


def main(argv: list[str] | None = None) -> int:
    return exit_code(run, build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
