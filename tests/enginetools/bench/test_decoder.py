"""`python -m enginetools.bench.decoder`: every candidate timed and compared with the plain one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from engine.catalog import core_catalog
from engine.config import tiny_config
from engine.decoders.wan_vae import WanVAEConfig
from enginetools.bench.decoder import main, measure_decoder_candidates

MODEL = "tiny+wan-vae-bench-decoder"
CONFIG = tiny_config().with_overrides(name=MODEL, decoder_kind="wan_vae", extra={"wan_vae": WanVAEConfig.tiny()})


def test_each_cpu_candidate_is_timed_and_the_layouts_agree() -> None:
    report = measure_decoder_candidates(CONFIG, torch.device("cpu"), batch=2, repeats=2)
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
    catalog = core_catalog()
    catalog.add_config(CONFIG)
    assert main(["--model", MODEL, "--device", "cpu", "--repeats", "1", "--json", str(out)], catalog) == 0
    report = json.loads(out.read_text())
    assert (report["model"], report["batch"], report["repeats"]) == (MODEL, 1, 1)


def test_a_model_without_a_wan_vae_is_refused() -> None:
    with pytest.raises(SystemExit, match="no Wan VAE decoder"):
        measure_decoder_candidates(tiny_config(), torch.device("cpu"), batch=1, repeats=1)
