"""Regression guard: the shipped demo weights reproduce their committed quick-evaluation numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import engine
from demo.config import CONFIG
from demo.eval import QUICK, evaluate
from demo.export import ENCODER_FILE, META_FILE, WEIGHTS_FILE

pytestmark = pytest.mark.slow  # re-measures the shipped demo weights (seconds)


WEIGHTS = Path(engine.__file__).parent / "weights"
COMMITTED = WEIGHTS / "demo_eval_quick.json"


@pytest.fixture(scope="module")
def committed() -> dict:  # type: ignore[type-arg]
    return json.loads(COMMITTED.read_text())  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def measured() -> dict:  # type: ignore[type-arg]
    return evaluate(WEIGHTS / WEIGHTS_FILE, WEIGHTS / ENCODER_FILE, "cpu", QUICK, long=False, speed=False)


def test_the_shipped_files_are_small_and_describe_their_training() -> None:
    assert (WEIGHTS / WEIGHTS_FILE).stat().st_size <= 15 * 1024 * 1024
    meta = json.loads((WEIGHTS / META_FILE).read_text())
    assert meta["model"] == "demo"
    assert meta["partial"] is False
    # the detail term on the served chunk, anchored to the model's own flows (distill, teacher unguided),
    # in two runs on an H100 (2026-12-07): 135 steps from the weights below, then 94 from those; the
    # student samples as the daemon serves it (demo.config: 3 steps, unguided)
    for run, steps, min_horizon in ((meta, 94, 6), (meta["resumed_from"], 135, 4)):
        params = run["rollout"]["params"]
        distill = params["distill"]
        assert (run["stage"], params["objective"], params["fresh_share"], params["batch"], params["min_horizon"],
                params["max_horizon"], params["lr"]) == ("rollout", "distill", 0.5, 48, min_horizon, 8, 1e-4)
        assert distill["student_timesteps"] == distill["teacher_timesteps"] == list(CONFIG.denoise_timesteps)
        assert (distill["teacher_guidance"], distill["detail_weight"], distill["detail_hide_centre"],
                distill["regress_weight"]) == (1.0, 1.0, 6, 0.0)
        assert run["rollout"]["steps"] == steps and run["device"] == "NVIDIA H100 80GB HBM3"
    assert (CONFIG.action_guidance, CONFIG.action_guidance_steps) == (1.0, 0)
    # under them: the guidance of the first step distilled into one pass (2026-12-07, CPU)
    one_pass = meta["resumed_from"]["resumed_from"]
    params = one_pass["rollout"]["params"]
    assert (params["objective"], params["distill"]["teacher_guidance"], params["distill"]["teacher_guided_steps"],
            params["batch"], params["max_horizon"]) == ("distill", 3.0, 1, 8, 4)
    assert one_pass["rollout"]["steps"] == 90 and one_pass["device"] == "cpu"
    # its teacher: the detail term (the avatar's place hidden) and a critic, half the episodes starting
    # from nothing as a served session does (2026-12-07, an H100), on a model trained on its own
    # rollouts (regress, 2026-12-02), on a teacher-forced one (stages 1-2): each stage recorded
    teacher = one_pass["resumed_from"]
    params = teacher["rollout"]["params"]
    assert (teacher["stage"], params["objective"], params["max_horizon"], params["fresh_share"], params["batch"]) == (
        "rollout", "adversarial", 8, 0.5, 48)
    assert (params["adversarial"]["weight"], params["adversarial"]["detail_weight"],
            params["adversarial"]["detail_hide_centre"], params["adversarial"]["regress_weight"]) == (0.1, 1.0, 6, 1.0)
    assert teacher["rollout"]["steps"] == 161 and teacher["device"] == "NVIDIA H100 80GB HBM3"
    before = teacher["resumed_from"]
    assert (before["stage"], before["rollout"]["params"]["objective"], before["rollout"]["params"]["max_horizon"]) == (
        "rollout", "regress", 8)
    assert before["rollout"]["steps"] > 100
    assert before["resumed_from"]["dit"]["steps"] > 100


def test_the_committed_numbers_belong_to_these_weights(committed: dict, measured: dict) -> None:  # type: ignore[type-arg]
    assert measured["weights_sha256"] == committed["weights_sha256"]


def test_autoencoder_reconstruction_is_reproduced(committed: dict, measured: dict) -> None:  # type: ignore[type-arg]
    assert measured["autoencoder"]["psnr_db"] == pytest.approx(committed["autoencoder"]["psnr_db"], abs=0.3)


def test_first_chunk_fidelity_is_reproduced(committed: dict, measured: dict) -> None:  # type: ignore[type-arg]
    got, want = measured["motion"]["psnr_db_by_chunk"], committed["motion"]["psnr_db_by_chunk"]
    assert got == pytest.approx(want, abs=1.0)


def test_direction_and_theme_accuracy_are_reproduced(committed: dict, measured: dict) -> None:  # type: ignore[type-arg]
    for group, name in (("motion", "direction_accuracy"), ("theme", "theme_accuracy")):
        assert measured[group][name] == pytest.approx(committed[group][name], abs=0.15)


def test_motion_is_judged_by_an_estimator_the_truth_and_the_autoencoder_pass(measured: dict) -> None:  # type: ignore[type-arg]
    motion = measured["motion"]
    assert motion["ground_truth_direction_accuracy"] == 1.0
    assert motion["autoencoder_direction_accuracy"] == 1.0  # the true frames, encoded and decoded


def test_the_phase_correlation_figures_are_reproduced(committed: dict, measured: dict) -> None:  # type: ignore[type-arg]
    for name in ("direction_accuracy_phase_correlation", "autoencoder_direction_accuracy_phase_correlation"):
        assert measured["motion"][name] == pytest.approx(committed["motion"][name], abs=0.15)


def test_the_speed_of_motion_is_reproduced(committed: dict, measured: dict) -> None:  # type: ignore[type-arg]
    assert measured["motion"]["speed_ratio"] == pytest.approx(committed["motion"]["speed_ratio"], abs=0.15)
