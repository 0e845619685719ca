"""`python -m enginetools.bench.cost` on the tiny CPU model: every lever in alternating rounds on both
geometries, the median and spread per lever, the lever table against each lever's parent, the
headline metric as the wall over the media made, and each lossy lever's fidelity."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from engine.catalog import core_catalog
from engine.config import tiny_config
from enginetools.bench.cost import _geometry_models, main
from enginetools.bench.levers import Lever
from enginetools.bench.rounds import aggregate, lever_table

LEVERS = "base,fp8,fp8+graphs,kv_last_pass"
KEYS = ["global/1", "serving/1", "first/1", "world/1"]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict:
    path = tmp_path_factory.mktemp("cost") / "cost.json"
    argv = ["--model", "tiny", "--device", "cpu", "--chunks", "3", "--steady-chunks", "2", "--rounds", "2",
            "--levers", LEVERS, "--fidelity-seeds", "1", "--kv-budget-gib", "0.05", "--json", str(path)]
    assert main(argv) == 0
    return json.loads(Path(path).read_text())


@pytest.mark.slow
def test_every_lever_runs_every_round_on_every_workload(results: dict) -> None:
    assert list(results["levers"]) == LEVERS.split(",")
    assert len(results["rounds"]) == 2
    for per_round in results["rounds"]:
        assert list(per_round) == LEVERS.split(",")
        for per_workload in per_round.values():
            assert list(per_workload) == KEYS
    command = results["provenance"]["command"].split()
    assert command[1:4] == ["-m", "enginetools.bench.cost", "--model"]
    assert command[command.index("--levers") + 1] == LEVERS


@pytest.mark.slow
def test_each_lever_reports_the_median_and_spread_of_its_rounds(results: dict) -> None:
    for name, per_workload in results["levers"].items():
        for key, row in per_workload.items():
            values = [r[name][key]["gpu_s_per_media_s"] for r in results["rounds"]]
            assert row["gpu_s_per_media_s_rounds"] == values
            assert row["gpu_s_per_media_s"] == statistics.median(values)
            assert row["spread"] == max(values) - min(values)
            assert row["rounds"] == 2


@pytest.mark.slow
def test_the_cost_of_a_media_second_is_the_wall_over_the_media_made(results: dict) -> None:
    # tiny: 5 video frames for a stream's first chunk, 8 for each later one; 16 frames per second
    for key, frames in (("global/1", 5 + 8 + 8), ("first/1", 5), ("world/1", 8 + 8), ("serving/1", 8 + 8)):
        run = results["rounds"][0]["base"][key]
        assert run["fps_aggregate"] * run["wall_s"] == pytest.approx(frames)
        assert run["gpu_s_per_media_s"] == pytest.approx(run["wall_s"] / (frames / 16))
    assert results["levers"]["base"]["first/1"]["ttff_ms"] is not None
    assert results["levers"]["kv_last_pass"]["world/1"]["workload"] == "rolling"


@pytest.mark.slow
def test_the_lever_table_sets_each_lever_against_its_parent(results: dict) -> None:
    rows = {(r["lever"], r["workload"]): r for r in results["lever_table"]}
    assert {lever for lever, _ in rows} == {"fp8", "fp8+graphs", "kv_last_pass"}
    assert rows["fp8+graphs", "world/1"]["against"] == "fp8" and rows["fp8", "world/1"]["against"] == "base"
    for row in rows.values():
        assert row["gain"] == pytest.approx(row["against_median"] - row["median"])
        assert row["counts"] == (row["gain"] > row["spread"])


@pytest.mark.slow
def test_fp8_engines_hold_half_a_bf16_cache_and_a_quarter_of_fp32s(results: dict) -> None:
    engines = results["engines"]
    assert set(engines) == {"serving/bf16", "serving/fp8", "world/bf16", "world/fp8"}
    assert engines["world/fp8"]["kv_dtype"] == "float8_e4m3fn" and engines["world/bf16"]["kv_dtype"] == "float32"
    assert engines["world/fp8"]["kv_bytes_per_session"] * 4 == engines["world/bf16"]["kv_bytes_per_session"]


@pytest.mark.slow
def test_each_lossy_lever_reports_its_fidelity_per_chunk(results: dict) -> None:
    fidelity = results["fidelity"]
    assert (fidelity["chunks"], fidelity["seeds"], results["fidelity_geometry"]) == (3, [0], "serving")
    for name in ("fp8", "fp8+graphs", "kv_last_pass"):
        [seed] = fidelity[name]["per_seed"]
        assert len(seed["rel_l2_per_chunk"]) == len(seed["cosine_per_chunk"]) == 3
        assert fidelity[name]["worst_rel_l2"] == max(seed["rel_l2_per_chunk"])
    assert fidelity["fp8"]["worst_rel_l2"] < 1e-2 and fidelity["fp8"]["worst_cosine"] > 0.9999
    assert fidelity["fp8"] == fidelity["fp8+graphs"]  # graphs are exact: the same latents
    # the first chunk has no context, so writing its K/V from the last pass changes nothing there
    assert fidelity["kv_last_pass"]["per_seed"][0]["rel_l2_per_chunk"][0] == 0.0
    [errors] = fidelity["attention_output_error"]  # tiny: layer 0 (the last layer's cache pass has no attention)
    assert errors["layer"] == 0 and 0.0 < errors["fp8"] < 0.05 and errors["bf16_sdpa"] < 1e-5
    assert errors["fp8_saturated"]["q"] == errors["fp8_saturated"]["k"] == 0.0
    # on a CPU the engine's FP8 attention is the exact reference on its e4m3 inputs: the same numbers
    assert errors["fp8"] == errors["fp8_inputs_exact_attention"]
    one_call = [errors["fp8_one_call_v_own_mean"], errors["fp8_one_call_v_not_centred"],
                errors["fp8_one_call_v_own_mean_without_mean_key"], errors["fp8_one_call_p_rounded_emulated"]]
    assert all(0.0 < e < 0.1 for e in one_call), one_call
    assert errors["v_mean_norm_over_residual_rms"] > 0.0 and errors["v_chunk_means_stray_over_residual_rms"] > 0.0
    assert errors["softmax_mass"]["offset_bits"] == 8 and errors["softmax_mass_no_offset"]["offset_bits"] == 0
    assert 0.0 <= errors["softmax_mass"]["flushed_median"] <= errors["softmax_mass_no_offset"]["flushed_median"] <= 1.0


def test_aggregate_and_lever_table_on_known_numbers() -> None:
    def run(cost: float) -> dict[str, object]:
        return {"gpu_s_per_media_s": cost, "fps_aggregate": 1 / cost, "phases": {"denoise": {"p50_ms": 10 * cost}}}

    rounds = [{"base": {"w": run(0.50)}, "fa3": {"w": run(0.40)}, "fa3+graphs": {"w": run(0.39)}},
              {"base": {"w": run(0.52)}, "fa3": {"w": run(0.42)}, "fa3+graphs": {"w": run(0.41)}},
              {"base": {"w": run(0.48)}, "fa3": {"w": run(0.41)}, "fa3+graphs": {"w": run(0.40)}}]
    levers = aggregate(rounds)
    assert levers["base"]["w"]["gpu_s_per_media_s"] == 0.50
    assert levers["base"]["w"]["spread"] == pytest.approx(0.04)
    assert levers["fa3"]["w"]["phases_p50_ms"] == {"denoise": pytest.approx(4.1)}
    rows = {r["lever"]: r for r in lever_table(levers)}
    assert rows["fa3"]["against"] == "base" and rows["fa3"]["counts"] is True  # 0.09 > 0.04
    assert rows["fa3"]["gain_pct"] == pytest.approx(18.0)
    assert rows["fa3+graphs"]["against"] == "fa3" and rows["fa3+graphs"]["counts"] is False  # 0.01 < 0.02


def test_the_world_geometry_comes_from_the_catalog_or_is_derived() -> None:
    catalog = core_catalog()
    wan = _geometry_models(catalog.config("wan-1.3b"), catalog)
    assert wan["world"].name == "wan-1.3b-world"
    assert _geometry_models(catalog.config("wan-1.3b-preview"), catalog)["world"].name == "wan-1.3b-world-preview"
    assert list(_geometry_models(catalog.config("wan-1.3b-world-preview"), catalog)) == ["world"]
    tiny = _geometry_models(tiny_config().with_overrides(window_chunks=4), catalog)
    assert (tiny["world"].name, tiny["world"].sink_chunks, tiny["world"].window_chunks) == ("tiny-world", 1, 2)


def test_a_lever_is_base_or_parts_joined_by_plus() -> None:
    lever = Lever.parse("preview+fp8+graphs")
    assert (lever.parts, lever.attention, lever.precision, lever.parent, lever.lossy) == (
        ("preview", "fp8", "graphs"), "fp8", "fp8", "preview+fp8", True)
    assert (Lever.parse("fa3").attention, Lever.parse("fa3").precision, Lever.parse("fa3").lossy) == ("fa3", "bf16", False)
    assert Lever.parse("base").parts == () and Lever.parse("graphs").parent == "base"
    with pytest.raises(ValueError, match="unknown lever part turbo"):
        Lever.parse("graphs+turbo")
    with pytest.raises(ValueError, match="two attention kernels"):
        Lever.parse("fa3+fp8")


@pytest.mark.slow
def test_levers_run_in_the_order_asked_on_the_geometries_asked(tmp_path: Path) -> None:
    path = tmp_path / "cost.json"
    argv = ["--model", "tiny", "--device", "cpu", "--chunks", "2", "--steady-chunks", "1", "--rounds", "1",
            "--levers", "graphs,base", "--geometries", "world", "--fidelity-seeds", "0", "--batch", "2",
            "--json", str(path)]
    assert main(argv) == 0
    results = json.loads(path.read_text())
    assert list(results["levers"]) == ["graphs", "base"] and "fidelity" not in results
    assert list(results["levers"]["base"]) == ["first/2", "world/2"] and list(results["engines"]) == ["world/bf16"]
    assert "profiles" not in results
    assert results["levers"]["base"]["world/2"]["batch"] == 2


@pytest.mark.parametrize(("option", "message"), [
    (["--levers", "base,turbo"], "lever 'turbo': unknown lever part turbo"),
    (["--geometries", "moon"], "unknown geometry 'moon'"),
    (["--rounds", "0"], "--rounds and --steady-chunks must be >= 1"),
])
def test_a_bad_option_is_refused_with_what_is_valid(option: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--model", "tiny", "--device", "cpu", "--json", "x.json", *option])
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_a_fidelity_rollout_longer_than_the_window_keeps_every_chunk() -> None:
    from enginetools.bench.fidelity import rollout
    from tests.engine._helpers import make_engine

    engine = make_engine()  # tiny: sink 1 + window 2, so records of early chunks are trimmed
    latents, captured = rollout(engine, 5, seed=1, capture_at=3, layers=(0,))
    assert len(latents) == 5 and list(captured) == [0]
    q, k, _ = captured[0]
    assert k.shape[1] == 4 * q.shape[1]  # the cache pass of chunk 3: its own keys and 3 context chunks
