"""Self-Forcing pickle -> Wan2.1 DiT safetensors: exact layout or a coded error, never partial."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from engine.config import tiny_config, wan_13b_config
from engine.errors import WeightsError
from enginetools.convert import convert_selfforcing, main
from enginetools.convert_keys import KeyShapes, manifest_key_shapes, wan_dit_key_shapes

MANIFEST = Path(__file__).resolve().parents[1] / "fixtures" / "wan2.1_t2v_1.3b_manifest.json"


def _tiny_layout() -> KeyShapes:
    return wan_dit_key_shapes(tiny_config())


def _generator(layout: KeyShapes, seed: int) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    return {f"model.{k}": torch.randn(shape) for k, shape in layout.items()}


def _save_checkpoint(path: Path, layout: KeyShapes, **overrides: object) -> Path:
    """A Self-Forcing trainer checkpoint: generator, critic, generator_ema."""
    checkpoint: dict[str, object] = {
        "generator": _generator(layout, seed=1),
        "critic": {"model.head.head.weight": torch.zeros(2, 2)},
        "generator_ema": _generator(layout, seed=2),
    }
    checkpoint.update(overrides)
    torch.save(checkpoint, path)
    return path


def test_the_wan_13b_layout_derived_from_the_config_equals_the_manifest() -> None:
    expected = manifest_key_shapes(MANIFEST)
    derived = wan_dit_key_shapes(wan_13b_config())
    assert list(derived) == list(expected)
    assert derived == expected
    assert len(derived) == 825
    assert sum(torch.Size(s).numel() for s in derived.values()) == 1_418_996_800


def test_the_generator_converts_with_its_prefix_stripped(tmp_path: Path) -> None:
    layout = _tiny_layout()
    source = _save_checkpoint(tmp_path / "sf.pt", layout)
    report = convert_selfforcing(source, tmp_path / "dit.safetensors", layout)
    written = load_file(str(tmp_path / "dit.safetensors"))
    generator = _generator(layout, seed=1)
    assert list(written) == sorted(layout)
    assert all(torch.equal(written[k], generator[f"model.{k}"]) for k in layout)
    assert (report.source_dict, report.tensors) == ("generator", len(layout))


def test_ema_selects_the_generator_ema_dict_and_records_it(tmp_path: Path) -> None:
    layout = _tiny_layout()
    source = _save_checkpoint(tmp_path / "sf.pt", layout)
    convert_selfforcing(source, tmp_path / "dit.safetensors", layout, ema=True)
    written = load_file(str(tmp_path / "dit.safetensors"))
    ema = _generator(layout, seed=2)
    assert all(torch.equal(written[k], ema[f"model.{k}"]) for k in layout)
    with safe_open(str(tmp_path / "dit.safetensors"), framework="pt") as handle:
        assert handle.metadata() == {"format": "pt", "source": "sf.pt", "dict": "generator_ema"}


def test_the_command_checks_against_a_manifest_like_key_list(tmp_path: Path, capsys) -> None:
    layout = _tiny_layout()
    manifest = tmp_path / "tiny_manifest.json"
    manifest.write_text(json.dumps({"dit": {"keys": {k: {"shape": list(s)} for k, s in layout.items()}}}))
    source = _save_checkpoint(tmp_path / "sf.pt", layout)
    target = tmp_path / "dit.safetensors"
    code = main(["selfforcing", str(source), str(target), "--manifest", str(manifest), "--dtype", "bf16"])
    assert code == 0
    assert f"{len(layout)} tensors" in capsys.readouterr().out
    assert {t.dtype for t in load_file(str(target)).values()} == {torch.bfloat16}


def test_a_checkpoint_without_the_requested_dict_names_what_it_holds(tmp_path: Path) -> None:
    source = tmp_path / "sf.pt"
    torch.save({"generator": _generator(_tiny_layout(), seed=1)}, source)
    with pytest.raises(WeightsError) as err:
        convert_selfforcing(source, tmp_path / "dit.safetensors", _tiny_layout(), ema=True)
    assert err.value.code == "checkpoint_missing_dict"
    assert "['generator']" in str(err.value) and "drop --ema" in str(err.value)
    assert not (tmp_path / "dit.safetensors").exists()


def test_a_missing_key_is_named_and_nothing_is_written(tmp_path: Path) -> None:
    layout = _tiny_layout()
    generator = _generator(layout, seed=1)
    del generator["model.blocks.1.ffn.2.bias"]
    source = _save_checkpoint(tmp_path / "sf.pt", layout, generator=generator)
    with pytest.raises(WeightsError) as err:
        convert_selfforcing(source, tmp_path / "dit.safetensors", layout)
    assert err.value.code == "checkpoint_missing_keys"
    assert "blocks.1.ffn.2.bias" in str(err.value)
    assert not (tmp_path / "dit.safetensors").exists()


def test_an_extra_key_is_named(tmp_path: Path) -> None:
    layout = _tiny_layout()
    generator = _generator(layout, seed=1) | {"model.img_emb.proj.0.weight": torch.zeros(4)}
    source = _save_checkpoint(tmp_path / "sf.pt", layout, generator=generator)
    with pytest.raises(WeightsError) as err:
        convert_selfforcing(source, tmp_path / "dit.safetensors", layout)
    assert err.value.code == "checkpoint_unexpected_keys"
    assert "img_emb.proj.0.weight" in str(err.value)


def test_a_shape_mismatch_names_found_and_expected_shapes(tmp_path: Path) -> None:
    layout = _tiny_layout()
    generator = _generator(layout, seed=1) | {"model.head.head.weight": torch.zeros(16, 33)}
    source = _save_checkpoint(tmp_path / "sf.pt", layout, generator=generator)
    with pytest.raises(WeightsError) as err:
        convert_selfforcing(source, tmp_path / "dit.safetensors", layout)
    assert err.value.code == "checkpoint_shape_mismatch"
    assert "head.head.weight (16, 33) != (16, 32)" in str(err.value)


def test_keys_without_the_model_prefix_are_rejected(tmp_path: Path) -> None:
    layout = _tiny_layout()
    generator = {k.removeprefix("model."): v for k, v in _generator(layout, seed=1).items()}
    source = _save_checkpoint(tmp_path / "sf.pt", layout, generator=generator)
    with pytest.raises(WeightsError) as err:
        convert_selfforcing(source, tmp_path / "dit.safetensors", layout)
    assert err.value.code == "checkpoint_prefix"


def test_a_pickle_that_needs_code_to_load_is_refused(tmp_path: Path) -> None:
    source = _save_checkpoint(tmp_path / "sf.pt", _tiny_layout(), config=argparse.Namespace(lr=1e-5))
    with pytest.raises(WeightsError) as err:
        convert_selfforcing(source, tmp_path / "dit.safetensors", _tiny_layout())
    assert err.value.code == "checkpoint_unreadable"


def test_the_command_reports_errors_on_stderr_with_exit_code_2(tmp_path: Path, capsys) -> None:
    code = main(
        ["selfforcing", str(tmp_path / "absent.pt"), str(tmp_path / "dit.safetensors"), "--model", "tiny"]
    )
    assert code == 2
    assert "[checkpoint_missing]" in capsys.readouterr().err


def test_an_unknown_model_name_is_a_coded_error(tmp_path: Path, capsys) -> None:
    source = _save_checkpoint(tmp_path / "sf.pt", _tiny_layout())
    code = main(["selfforcing", str(source), str(tmp_path / "dit.safetensors"), "--model", "wan-14b"])
    assert code == 2
    assert "[unknown_model]" in capsys.readouterr().err
