"""`python -m engine.bench_decoder`: every candidate timed and compared with the plain one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from engine.bench_decoder import main, measure
from engine.config import get_config, register_config, unregister_config
from engine.decoders.wan_vae import WanVAEConfig

MODEL = "tiny+wan-vae-bench-decoder"


@pytest.fixture(scope="module", autouse=True)
def _model() -> Iterator[None]:
    tiny = get_config("tiny")
    register_config(
        MODEL, tiny.with_overrides(name=MODEL, decoder_kind="wan_vae", extra={"wan_vae": WanVAEConfig.tiny()})
    )
    yield
    unregister_config(MODEL)


def test_each_cpu_candidate_is_timed_and_the_layouts_agree() -> None:
    report = measure(MODEL, torch.device("cpu"), batch=2, repeats=2)
    assert report["reference"] == "ncdhw"
    candidates = report["candidates"]
    assert isinstance(candidates, dict)
    assert sorted(candidates) == ["channels_last", "ncdhw"]  # CPU: no cuDNN, no Triton kernel
    assert candidates["ncdhw"]["max_rel_err"] == 0.0
    assert candidates["channels_last"]["max_rel_err"] <= 1e-2  # bf16, another conv algorithm
    assert candidates["channels_last"]["max_uint8_diff"] <= 2
    assert all(c["steady_decode_s"] > 0 for c in candidates.values())


def test_the_command_writes_its_report(tmp_path: Path) -> None:
    out = tmp_path / "decoder.json"
    assert main(["--model", MODEL, "--device", "cpu", "--repeats", "1", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert (report["model"], report["batch"], report["repeats"]) == (MODEL, 1, 1)


def test_a_model_without_a_wan_vae_is_refused() -> None:
    with pytest.raises(SystemExit, match="no Wan VAE decoder"):
        measure("tiny", torch.device("cpu"), batch=1, repeats=1)
