"""The evaluation command runs other sampling settings than the served ones when asked, and says which."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import engine
from demo.config import CONFIG
from demo.eval import main as eval_main
from demo.eval import seeded
from demo.export import WEIGHTS_FILE
from demo.long_play import LongPlayParams
from demo.registration import catalog_with_demo
from demo.theme_cycle import ThemeCycleParams

WEIGHTS = Path(engine.__file__).parent / "weights" / WEIGHTS_FILE


def _report(tmp_path: Path, *flags: str) -> dict:  # type: ignore[type-arg]
    out = tmp_path / "report.json"
    assert eval_main(["--weights", str(WEIGHTS), "--quick", "--json", str(out), *flags]) == 0
    return json.loads(out.read_text())  # type: ignore[no-any-return]


@pytest.mark.slow
def test_the_report_records_the_served_sampling_settings(tmp_path: Path) -> None:
    report = _report(tmp_path)
    assert report["sampling"] == {"denoise_timesteps": list(CONFIG.denoise_timesteps),
                                  "action_guidance": CONFIG.action_guidance,
                                  "action_guidance_steps": CONFIG.action_guidance_steps,
                                  "action_guidance_rescale": CONFIG.action_guidance_rescale,
                                  "cache_context_noise": CONFIG.cache_context_noise,
                                  "kv_from_last_pass": CONFIG.kv_from_last_pass,
                                  "recontext_on_prompt_change": CONFIG.recontext_on_prompt_change,
                                  "prompt_change_guidance": CONFIG.prompt_change_guidance,
                                  "prompt_change_guidance_chunks": CONFIG.prompt_change_guidance_chunks,
                                  "prompt_change_guidance_steps": CONFIG.prompt_change_guidance_steps}


@pytest.mark.slow
def test_other_sampling_settings_are_evaluated_and_recorded_then_forgotten(tmp_path: Path) -> None:
    report = _report(tmp_path, "--timesteps", "1000,500", "--guidance", "2", "--guided-steps", "1",
                     "--guidance-rescale", "0.25", "--context-noise", "0.5", "--kv-from-last-pass",
                     "--recontext", "off" if CONFIG.recontext_on_prompt_change else "on",
                     "--prompt-guidance", "1.75", "--prompt-guidance-chunks", "3")
    assert report["sampling"] == {"denoise_timesteps": [1000.0, 500.0], "action_guidance": 2.0,
                                  "action_guidance_steps": 1, "action_guidance_rescale": 0.25,
                                  "cache_context_noise": 0.5, "kv_from_last_pass": True,
                                  "recontext_on_prompt_change": not CONFIG.recontext_on_prompt_change,
                                  "prompt_change_guidance": 1.75, "prompt_change_guidance_chunks": 3,
                                  "prompt_change_guidance_steps": CONFIG.prompt_change_guidance_steps}
    assert report["model"] == "demo+sampling"
    assert "demo+sampling" not in catalog_with_demo().names()


@pytest.mark.parametrize(("flags", "code"), [(["--timesteps", "1000,x"], "bad_timesteps"),
                                             (["--long-strip", "strip.png"], "bad_long_strip"),
                                             (["--guided-steps", "9"], "bad_config"),
                                             (["--guidance", "0"], "bad_config"),
                                             (["--guidance-rescale", "1.5"], "bad_config"),
                                             (["--context-noise", "-1"], "bad_config"),
                                             (["--prompt-guidance", "0"], "bad_config"),
                                             (["--prompt-guidance-chunks", "-2"], "bad_config"),
                                             (["--model", "demo-fine", "--guided-steps", "9"], "bad_config"),
                                             (["--long-play", "--seconds", "30"], "bad_seconds"),
                                             (["--long-play", "--theme-cycle"], "bad_evaluation"),
                                             (["--from-nothing"], "bad_evaluation: --from-nothing starts"),
                                             (["--play-seed", "3"], "bad_evaluation: --play-seed picks"),
                                             (["--long-play", "--play-seed", "-1"], "bad_seed")])
def test_bad_sampling_settings_exit_2_with_a_coded_message(flags: list[str], code: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert eval_main(["--weights", str(WEIGHTS), "--quick", *flags]) == 2
    assert code in capsys.readouterr().err
    assert "demo+sampling" not in catalog_with_demo().names()


@pytest.mark.slow
def test_the_long_strip_shows_truth_above_model_one_frame_per_window(tmp_path: Path) -> None:
    from PIL import Image

    from demo._eval_parts import EvalParams
    from demo.eval import evaluate
    from demo.export import ENCODER_FILE

    params = EvalParams(directions=("right",), direction_chunks=2, fidelity_chunks=1, theme_pairs=1, theme_chunks=1,
                        classifier_seeds=1, classifier_frames=8, long_sessions=1, drift_seconds=1.0,
                        collapse_seconds=2.0, window_seconds=1.0)
    path = tmp_path / "strip.png"
    report = evaluate(WEIGHTS, WEIGHTS.parent / ENCODER_FILE, "cpu", params, long=True, speed=False, strip=path)
    strip = np.asarray(Image.open(path))
    size = CONFIG.height
    assert report["long"]["collapse_seconds"] == 2.0  # type: ignore[index]
    assert strip.shape == (2 * size, 2 * size, 3)  # one session: truth row, model row; 2 s at one frame per 1 s
    assert int(np.abs(strip[:size].astype(int) - strip[size:].astype(int)).sum()) > 0


def test_another_play_seed_moves_the_world_and_the_keys_and_seed_0_is_the_play_reported_so_far() -> None:
    assert seeded(LongPlayParams(seconds=120, from_nothing=True), 0) == LongPlayParams(seconds=120, from_nothing=True)
    moved = seeded(LongPlayParams(seconds=120), 2)
    assert (moved.world_seed, moved.script_seed, moved.seconds) == (907_000, 19, 120)
    cycle = seeded(ThemeCycleParams(), 1)
    assert (cycle.world_seed, cycle.script_seed) == (907_000, 30)
