"""The trainer runs a few steps on CPU and its checkpoint loads into the Engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from demo.config import AE_CONFIG, CONFIG
from demo.eval import main as eval_main
from demo.export import ENCODER_FILE, META_FILE, WEIGHTS_FILE, TrainedModel, load_trained
from demo.registration import catalog_with_demo
from demo.rollout import run_chunks
from demo.train import main as train_main
from engine.api import FrameAction
from engine.engine import Engine
from engine.model import CausalDiT

pytestmark = pytest.mark.slow  # trains the demo model (seconds per run)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo-train")
    args = ["--steps", "1", "--pool", "1", "--batch", "1", "--ae-batch", "1", "--chunks", "3", "--device", "cpu"]
    assert train_main(["--out", str(out), *args]) == 0
    return out


def test_a_smoke_run_writes_weights_encoder_metadata_and_loss_plot(trained: Path) -> None:
    names = sorted(p.name for p in trained.iterdir())
    assert names == sorted([WEIGHTS_FILE, ENCODER_FILE, META_FILE, "losses.png"])
    meta = json.loads((trained / META_FILE).read_text())
    assert meta["autoencoder"]["steps"] == 1
    assert meta["dit"]["steps"] == 1
    assert meta["model"] == "demo"
    # where the DiT's step time went, per stage (the self-made context starts later in a run)
    assert set(meta["dit"]["stage_seconds"]) == {"render", "encode", "conditioning", "forward", "backward",
                                                 "optimizer", "ema"}
    assert all(v >= 0.0 for v in meta["dit"]["stage_seconds"].values())


def test_the_weights_file_stays_within_15_mb(trained: Path) -> None:
    assert (trained / WEIGHTS_FILE).stat().st_size <= 15 * 1024 * 1024


def test_the_checkpoint_loads_into_the_engine_and_streams_a_chunk(trained: Path) -> None:
    engine = Engine.create(model="demo", catalog=catalog_with_demo(), device="cpu", weights=trained / WEIGHTS_FILE)
    assert engine.open_session("s", seed=3, prompt="snow")
    frames = run_chunks(engine, {"s": [FrameAction(keys=("d",))] * 4})["s"]
    assert frames.shape == (4, 128, 128, 3)
    assert str(frames.dtype) == "uint8"


def _assert_same_autoencoder(before: TrainedModel, after: TrainedModel) -> None:
    for part in ("encoder", "decoder"):
        old, new = getattr(before, part).state_dict(), getattr(after, part).state_dict()
        assert old.keys() == new.keys()
        assert all(torch.equal(old[k], new[k]) for k in old), part


def _dit_distances(before: TrainedModel, after: TrainedModel, seed: int) -> tuple[float, float]:
    """Largest weight difference of the new DiT from the earlier run's, and from a fresh init of ``seed``."""
    fresh = CausalDiT(CONFIG)
    fresh.init_random(seed)
    triples = list(zip(before.dit.state_dict().values(), after.dit.state_dict().values(),
                       fresh.state_dict().values(), strict=True))
    return (max(float((b - a).abs().max()) for a, b, _ in triples),
            max(float((b - c).abs().max()) for _, b, c in triples))


def test_a_resumed_run_keeps_the_autoencoder_and_trains_the_dit_on(trained: Path, tmp_path: Path) -> None:
    args = ["--steps", "1", "--pool", "1", "--batch", "1", "--chunks", "3", "--device", "cpu", "--lr", "1e-4"]
    assert train_main(["--out", str(tmp_path), "--resume", str(trained), *args]) == 0
    before, after = load_trained(trained, CONFIG, AE_CONFIG), load_trained(tmp_path, CONFIG, AE_CONFIG)
    assert after.meta["autoencoder"]["steps"] == 0  # type: ignore[index]
    assert after.meta["resumed_from"] == before.meta
    assert after.meta["dit"]["params"]["lr"] == 1e-4  # type: ignore[index]
    _assert_same_autoencoder(before, after)
    # the DiT went on from the earlier weights (one warm-up step moves it by far less than fp16 rounding),
    # not from a fresh initialisation (which differs by the size of the weights themselves)
    near_earlier, near_fresh = _dit_distances(before, after, seed=1)
    assert near_earlier <= 2e-3 and near_fresh > 0.1


def test_a_new_dit_on_a_kept_autoencoder_starts_from_scratch(trained: Path, tmp_path: Path) -> None:
    args = ["--steps", "1", "--pool", "1", "--batch", "1", "--chunks", "3", "--device", "cpu"]
    assert train_main(["--out", str(tmp_path), "--autoencoder-from", str(trained), "--seed", "5", *args]) == 0
    before, after = load_trained(trained, CONFIG, AE_CONFIG), load_trained(tmp_path, CONFIG, AE_CONFIG)
    assert "resumed_from" not in after.meta
    origin = after.meta["autoencoder_from"]
    assert origin["autoencoder"] == before.meta["autoencoder"]  # type: ignore[index]
    assert origin["date"] == before.meta["date"]  # type: ignore[index]
    _assert_same_autoencoder(before, after)
    # the DiT is a fresh initialisation of its own seed (one warm-up step moves it by far less than
    # fp16 rounding), far from the earlier run's DiT
    near_earlier, near_fresh = _dit_distances(before, after, seed=5)
    assert near_fresh <= 2e-3 and near_earlier > 0.1


def test_the_fine_variant_trains_and_its_checkpoint_streams_in_the_engine(trained: Path, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--steps", "1", "--pool", "1", "--batch", "1", "--ae-batch", "1", "--chunks", "3", "--device", "cpu"]
    assert train_main(["--out", str(tmp_path), "--model", "demo-fine", *args]) == 0
    meta = json.loads((tmp_path / META_FILE).read_text())
    assert meta["model"] == "demo-fine" and meta["autoencoder"]["config"]["downsample"] == 4
    engine = Engine.create(model="demo-fine", catalog=catalog_with_demo(), device="cpu", weights=tmp_path / WEIGHTS_FILE)
    assert engine.open_session("s", seed=3, prompt="snow")
    frames = run_chunks(engine, {"s": [FrameAction(keys=("d",))] * 4})["s"]
    assert frames.shape == (4, 128, 128, 3)
    # the 8x model's files do not fit the 4x model: a coded error, not a partial load
    assert train_main(["--out", str(tmp_path / "x"), "--model", "demo-fine", "--resume", str(trained), *args]) == 2
    assert "error: weights_mismatch" in capsys.readouterr().err


def test_resume_and_autoencoder_from_together_are_a_coded_error(trained: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert train_main(["--out", str(tmp_path), "--resume", str(trained), "--autoencoder-from", str(trained),
                       "--steps", "1", "--device", "cpu"]) == 2
    assert "error: bad_resume" in capsys.readouterr().err


def test_resuming_from_a_directory_without_a_model_is_a_coded_error(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert train_main(["--out", str(tmp_path / "out"), "--resume", str(tmp_path), "--steps", "1",
                       "--device", "cpu"]) == 2
    assert "error: resume_not_found" in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "value"), [("--steps", "0"), ("--minutes", "0.5"), ("--device", "tpu"),
                                              ("--pool", "0"), ("--ae-fraction", "0.95"),
                                              ("--chunks", "2"), ("--lr", "0")])
def test_bad_arguments_exit_2_with_a_coded_message(flag: str, value: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert train_main(["--out", str(tmp_path), flag, value]) == 2
    assert "error: bad_" in capsys.readouterr().err


def test_eval_refuses_missing_weights_with_a_coded_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert eval_main(["--weights", str(tmp_path / "none.safetensors"), "--quick"]) == 2
    assert "weights_not_found" in capsys.readouterr().err
