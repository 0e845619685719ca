"""`python -m enginetools.bench.cost` on the tiny CPU model: every lever asked for is run alone and
stacked on the three workloads, the headline metric is the wall over the media made, and every
lossy lever gets its fidelity against the exact path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.catalog import core_catalog
from engine.config import tiny_config
from enginetools.bench.cost import Lever, _geometry_models, main

LEVERS = "base,graphs,kv_last_pass,fp8_ffn"


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict:
    path = tmp_path_factory.mktemp("cost") / "cost.json"
    argv = ["--model", "tiny", "--device", "cpu", "--chunks", "3", "--steady-chunks", "2", "--levers", LEVERS,
            "--fidelity-seeds", "1", "--kv-budget-gib", "0.05", "--json", str(path)]
    assert main(argv) == 0
    return json.loads(Path(path).read_text())


@pytest.mark.slow
def test_every_lever_alone_and_stacked_on_every_workload(results: dict) -> None:
    assert list(results["levers"]) == ["base", "graphs", "kv_last_pass", "fp8_ffn", "stacked_all", "stacked_chosen"]
    assert results["stacks"]["stacked_all"] == ["graphs", "fp8_ffn", "kv_last_pass"]
    assert set(results["stacks"]["stacked_chosen"]) <= {"graphs", "fp8_ffn", "kv_last_pass"}
    for per_workload in results["levers"].values():
        assert list(per_workload) == ["global/1", "serving/1", "world/1"]
    command = results["provenance"]["command"].split()
    assert command[1:4] == ["-m", "enginetools.bench.cost", "--model"]
    assert command[command.index("--levers") + 1] == LEVERS


def test_the_cost_of_a_media_second_is_the_wall_over_the_media_made(results: dict) -> None:
    # tiny: 5 video frames for a stream's first chunk, 8 for each later one; 16 frames per second
    for key, frames in (("global/1", 5 + 8 + 8), ("world/1", 8 + 8)):
        run = results["levers"]["base"][key]
        assert run["fps_aggregate"] * run["wall_s"] == pytest.approx(frames)
        assert run["gpu_s_per_media_s"] == pytest.approx(run["wall_s"] / (frames / 16))
        assert run["realtime_factor"] == pytest.approx(1 / run["gpu_s_per_media_s"])
    world = results["levers"]["kv_last_pass"]["world/1"]
    assert world["workload"] == "rolling" and world["chunks_per_session"] == 2


def test_each_lossy_lever_reports_its_fidelity_per_chunk(results: dict) -> None:
    fidelity = results["fidelity"]
    assert (fidelity["chunks"], fidelity["seeds"]) == (3, [0])
    assert "graphs" not in fidelity  # exact: no fidelity row
    for name in ("fp8_ffn", "kv_last_pass"):
        [seed] = fidelity[name]["per_seed"]
        assert len(seed["rel_l2_per_chunk"]) == len(seed["cosine_per_chunk"]) == 3
        assert seed["rel_l2_per_chunk"][0] < 1e-2 and fidelity[name]["worst_cosine"] > 0.99
        assert fidelity[name]["worst_rel_l2"] == max(seed["rel_l2_per_chunk"])
    # the first chunk has no context, so writing its K/V from the last pass changes nothing there
    assert fidelity["kv_last_pass"]["per_seed"][0]["rel_l2_per_chunk"][0] == 0.0


def test_the_world_geometry_comes_from_the_catalog_or_is_derived() -> None:
    catalog = core_catalog()
    wan = _geometry_models(catalog.config("wan-1.3b"), catalog)
    assert wan["world"] is not None and wan["world"].name == "wan-1.3b-world"
    tiny = _geometry_models(tiny_config().with_overrides(window_chunks=4), catalog)
    assert (tiny["world"].name, tiny["world"].sink_chunks, tiny["world"].window_chunks) == ("tiny-world", 1, 2)


def test_a_stack_switches_each_of_its_levers() -> None:
    lever = Lever.of("stacked", ("graphs", "preview"))
    assert (lever.graphs, lever.preview, lever.fp8_attention, lever.fp8_ffn, lever.kv_last_pass) == (
        True, True, False, False, False)


def test_levers_run_in_the_order_asked_and_stacks_only_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "cost.json"
    argv = ["--model", "tiny", "--device", "cpu", "--chunks", "2", "--steady-chunks", "1", "--levers",
            "graphs,base", "--stacks", "", "--fidelity-seeds", "0", "--batch", "2", "--json", str(path)]
    assert main(argv) == 0
    results = json.loads(path.read_text())
    assert list(results["levers"]) == ["graphs", "base"] and "stacks" not in results and "fidelity" not in results
    assert list(results["levers"]["base"]) == ["global/2", "serving/2", "world/2"]
    assert results["levers"]["base"]["world/2"]["batch"] == 2


@pytest.mark.parametrize("option", [["--levers", "base,turbo"], ["--stacks", "best"]])
def test_an_unknown_lever_or_stack_is_refused_with_the_valid_names(option: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--model", "tiny", "--device", "cpu", "--json", "x.json", *option])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"unknown lever or stack {option[1].split(',')[-1]}" in err
    assert "levers: base, graphs, fp8_attention, fp8_ffn, kv_last_pass, preview; stacks: all, chosen" in err
