"""The engine benchmark on CPU with the tiny model: every field present, every number positive."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from engine.catalog import core_catalog
from engine.config import tiny_config, wan_13b_config
from enginetools.bench.flops import attended_chunks, dit_pass_flops
from enginetools.bench.report import check_targets
from enginetools.bench.run import main
from sessiond.commands.bench import add_parser

PHASES = ("cache", "decode", "denoise")
PHASE_FIELDS = ("calls", "p50_ms", "p95_ms", "mean_ms", "total_s", "tflop", "achieved_tflops")
RUN_FIELDS = (
    "wall_s", "fps_aggregate", "fps_per_session_mean", "dit_tflop", "dit_achieved_tflops", "peak_memory_bytes",
    "kv_bytes_per_session",
)  # fmt: skip


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("bench") / "tiny.json"
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        code = main(
            ["--model", "tiny", "--batch", "1,2", "--chunks", "2", "--threads", "1", "--json", str(out)]
        )
    assert code == 0, stderr.getvalue()
    assert "global b=2 chunk 2/2" in stderr.getvalue()  # progress lines go to stderr
    return json.loads(out.read_text())


def test_the_results_name_commit_device_date_and_torch_version(results: dict) -> None:
    meta = results["provenance"]
    assert len(meta["git_commit"]) == 40
    assert meta["device"] == "cpu"
    assert meta["date_utc"].endswith("+00:00")
    assert meta["torch_version"].startswith("2.")
    assert "--model tiny --batch 1,2 --chunks 2 --threads 1" in meta["command"]


def test_every_workload_reports_every_batch_size(results: dict) -> None:
    assert set(results["workloads"]) == {"global", "rolling", "mixed"}
    assert all(set(runs) == {"1", "2"} for runs in results["workloads"].values())


def test_every_phase_and_run_number_is_positive(results: dict) -> None:
    for runs in results["workloads"].values():
        for run in runs.values():
            assert all(run[name] > 0 for name in RUN_FIELDS), run
            assert set(run["phases"]) == set(PHASES)
            for phase in PHASES:
                assert all(run["phases"][phase][name] > 0 for name in PHASE_FIELDS), (
                    phase,
                    run["phases"][phase],
                )


def test_the_global_workload_counts_frames_and_first_frames(results: dict) -> None:
    run = results["workloads"]["global"]["2"]
    # tiny: 2 latent frames per chunk -> first chunk 1 + 4 frames, then 8
    assert run["frames_per_session"] == [13, 13]
    assert run["chunks_per_session"] == 2
    assert run["phases"]["denoise"]["calls"] == 8  # 4 steps x 2 chunks, both sessions in each call
    assert run["phases"]["denoise"]["batch_sizes"] == [2]
    assert 0 < run["ttff_ms"] < run["wall_s"] * 1e3
    assert run["fps_aggregate"] == pytest.approx(26 / run["wall_s"])
    # 26 frames at tiny's 16 fps = 1.625 media seconds over the wall
    assert run["gpu_s_per_media_s"] == pytest.approx(run["wall_s"] / (26 / 16))
    assert run["realtime_factor"] == pytest.approx(1 / run["gpu_s_per_media_s"])
    assert run["realtime_factor_per_session"] == pytest.approx(run["realtime_factor"] / 2)
    assert 0.5 < sum(run["wall_share"].values()) <= 1.0


def test_the_mixed_workload_batches_sessions_at_different_context_lengths(results: dict) -> None:
    tiny = tiny_config()  # sink 1 + window 2: sessions start at chunks 0 and 3
    assert results["workloads"]["mixed"]["2"]["context_chunks_per_session"] == [1, 4]
    assert (
        results["workloads"]["rolling"]["2"]["context_chunks_per_session"]
        == [tiny.sink_chunks + tiny.window_chunks + 1] * 2
    )


def test_the_flop_formula_and_counts_are_recorded(results: dict) -> None:
    flops = results["flops"]
    assert "4*q*kv*d" in flops["dit_pass_formula"]
    assert flops["dit_pass_tflop_by_chunk_global"] == [
        dit_pass_flops(tiny_config(), k) / 1e12 for k in (0, 1)
    ]
    assert flops["decoder_tflop_first_chunk"] > 0 and flops["decoder_tflop_steady_chunk"] > 0
    assert results["engines"]["tiny"]["info"]["kv_bytes_per_session"] > 0


def test_the_wan_13b_pass_flops_match_the_reference_count() -> None:
    wan = wan_13b_config()
    # docs/performance.md, Reference: 12.15 + 4.04 * (k + 1) TFLOP per pass at chunk k with the global cache
    assert [round(dit_pass_flops(wan, k) / 1e12, 2) for k in range(3)] == [16.18, 20.22, 24.26]
    assert [attended_chunks(wan, k) for k in (0, 6, 7, 50)] == [1, 7, 8, 8]
    assert round(sum(5 * dit_pass_flops(wan, k) for k in range(7)) / 1e12) == 990


def test_targets_say_by_how_much_they_are_missed() -> None:
    verdict: dict[str, Any] = dict(check_targets({1: {"fps_per_session_mean": 18.0, "ttff_ms": 250.0},
                                                 4: {"fps_aggregate": 60.0}}))
    assert verdict["fps_single_stream"]["met"] is False
    assert verdict["fps_single_stream"]["missed_by"] == pytest.approx(9.0)
    assert verdict["first_frames_ms"]["met"] is True
    assert verdict["fps_aggregate_4_streams"]["fraction_of_target"] == pytest.approx(1.25)
    assert verdict["dit_achieved_tflops"]["measured"] is None


def test_profile_and_plot_options_write_their_files(tmp_path: Path) -> None:
    argv = ["--model", "tiny", "--batch", "1", "--chunks", "1", "--workloads", "global", "--threads", "1"]
    paths = {"--json": tmp_path / "r.json", "--profile": tmp_path / "ops.txt", "--plot": tmp_path / "fps.png"}
    assert main([*argv, *(x for flag, path in paths.items() for x in (flag, str(path)))]) == 0
    profile = json.loads(paths["--json"].read_text())["profile"]
    assert "Self CPU" in paths["--profile"].read_text()
    assert profile["top_ops"][0]["self_ms"] > 0
    assert set(profile["phases"]) == {"bench.denoise", "bench.cache", "bench.decode"}
    assert paths["--plot"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_unknown_model_is_a_coded_error_not_a_crash(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--model", "wan-14b", "--batch", "1"]) == 2
    assert "[unknown_model]" in capsys.readouterr().err


def test_sessiond_bench_parses_the_same_options() -> None:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"), "bench")
    args = parser.parse_args(["bench", "--model", "wan-1.3b", "--batch", "1,2,4", "--window", "1,6"])
    assert (args.model, args.batch, args.window, args.chunks) == ("wan-1.3b", [1, 2, 4], (1, 6), 7)
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "--batch", "0,2"])


def test_a_batch_that_does_not_fit_is_recorded_as_an_error_and_the_rest_is_kept(tmp_path: Path) -> None:
    one_session = 5 * 4096 / 2**30  # tiny: a session holds 3 KV slabs of 4,096 bytes
    out = tmp_path / "r.json"
    argv = ["--model", "tiny", "--batch", "1,2", "--chunks", "1", "--workloads", "global", "--threads", "1"]
    assert main([*argv, "--kv-budget-gib", str(one_session), "--json", str(out)]) == 0
    runs = json.loads(out.read_text())["workloads"]["global"]
    assert runs["1"]["fps_aggregate"] > 0
    assert "[kv_full]" in runs["2"]["error"]


def test_a_device_this_machine_lacks_is_a_coded_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert main(["--model", "tiny", "--device", "cuda", "--batch", "1"]) == 2
    assert "[bad_device]" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--device", "tpu"])


def test_decoder_flops_are_counted_before_the_timed_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counting on the meta device took 0.27 s of the H200's 81-frame wall when it ran inside the
    timed chunks; every count must happen before the first timed step."""
    from engine.engine import Engine
    from enginetools.bench import workloads as bench_workloads
    from enginetools.bench.stats import Clock

    engine = Engine.create(model="tiny", device="cpu")
    driver = bench_workloads.Driver(engine, Clock(engine.device), core_catalog())
    timed_steps_at_count: list[int] = []
    runs: list[bench_workloads.BatchRun] = []
    original_run = bench_workloads.BatchRun

    def recording_run(*args: object) -> bench_workloads.BatchRun:
        run = original_run(*args)  # type: ignore[arg-type]
        runs.append(run)
        return run

    def counting(config: object, catalog: object, first: bool) -> float:
        timed_steps_at_count.append(sum(len(p.seconds) for r in runs for p in r.phases.values()))
        return 1.0e12

    monkeypatch.setattr(bench_workloads, "BatchRun", recording_run)
    monkeypatch.setattr(bench_workloads, "decoder_chunk_flops", counting)
    run = driver.run_global(1, 3)
    assert timed_steps_at_count == [0, 0]  # first and steady chunk, both before any timed step
    assert sum(len(p.seconds) for p in run.phases.values()) == 3 * (4 + 1 + 1)  # denoise x4, decode, cache
