"""Attention backends: chosen by configuration or measurement, clear errors otherwise."""

from __future__ import annotations

import pytest
import torch

from engine.attention import AttentionBackend, available_backends, measure_backends
from engine.errors import ConfigError
from tests.engine._helpers import make_engine

CPU = torch.device("cpu")


@pytest.mark.parametrize("name", ["sdpa", "matmul"])
def test_each_exact_backend_equals_softmax_attention_with_and_without_a_mask(name: str) -> None:
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 5, 3, 8, generator=gen)
    k, v = (torch.randn(2, 7, 3, 8, generator=gen) for _ in range(2))  # more keys than queries: a cached context
    mask = torch.ones(2, 1, 5, 7, dtype=torch.bool).tril(diagonal=2)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / 8**0.5
    for m in (None, mask):
        masked = scores if m is None else scores.masked_fill(~m, float("-inf"))
        expected = torch.einsum("bhqk,bkhd->bqhd", masked.softmax(-1), v)
        out = AttentionBackend.create(name, CPU)(q, k, v, m)
        assert out.shape == (2, 5, 3, 8)
        assert torch.allclose(out, expected, atol=1e-6)


def test_matmul_in_bf16_stays_within_bf16_rounding_of_the_fp32_result() -> None:
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, n, 4, 64, generator=gen) for n in (256, 768, 768))
    exact = AttentionBackend.create("sdpa", CPU)(q, k, v)
    bf16 = AttentionBackend.create("matmul", CPU)(q.bfloat16(), k.bfloat16(), v.bfloat16()).float()
    assert ((bf16 - exact).norm() / exact.norm()).item() < 1e-2


def test_sdpa_and_matmul_are_available_and_measured_on_cpu_in_16_bit() -> None:
    assert available_backends(CPU, torch.bfloat16) == ["sdpa", "matmul"]
    assert available_backends(CPU, torch.float16) == ["sdpa", "matmul"]
    timings = measure_backends(CPU, torch.bfloat16, 4, 8, 2, 8, repeats=1)
    assert list(timings) == ["sdpa", "matmul"]
    assert all(t > 0 for t in timings.values())


def test_fp32_on_cpu_measures_sdpa_alone_so_two_runs_of_one_seed_agree_bit_for_bit() -> None:
    assert available_backends(CPU, torch.float32) == ["sdpa"]
    assert list(measure_backends(CPU, torch.float32, 4, 8, 2, 8, repeats=1)) == ["sdpa"]
    engine = make_engine(attention="auto")  # fp32
    engine.warmup()
    assert (engine.parts.attend.name, engine.parts.attend.timings) == ("sdpa", {})


def test_auto_on_cpu_in_bf16_picks_the_faster_backend_at_warmup() -> None:
    engine = make_engine(attention="auto", dtype="bfloat16")
    engine.warmup()
    attend = engine.parts.attend
    assert set(attend.timings) == {"sdpa", "matmul"}
    assert attend.name == min(attend.timings, key=lambda name: attend.timings[name])
    # the engine's info says which backend runs and what the measurement saw (the daemon reports it)
    assert engine.info.attention == attend.name
    assert engine.info.attention_timings_ms == tuple(
        (name, round(attend.timings[name] * 1000.0, 4)) for name in ("matmul", "sdpa"))


def test_a_configured_backend_is_not_replaced_at_warmup() -> None:
    engine = make_engine(attention="matmul")
    assert engine.info.attention == "matmul"  # said from the build on
    engine.warmup()
    assert (engine.parts.attend.name, engine.parts.attend.timings) == ("matmul", {})
    assert (engine.info.attention, engine.info.attention_timings_ms) == ("matmul", ())


def test_flash_without_cuda_is_a_clear_error() -> None:
    with pytest.raises(ConfigError) as info:
        AttentionBackend.create("flash", CPU)
    assert info.value.code == "attention_unavailable"


def test_unknown_attention_choice_names_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as info:
        make_engine(attention="xformers")
    assert info.value.code == "bad_attention"
    assert "['auto', 'sdpa', 'matmul', 'flash', 'fa3', 'fp8', 'fp8_triton']" in info.value.message


def test_unknown_compile_choice_is_rejected() -> None:
    with pytest.raises(ConfigError) as info:
        make_engine(compile="max")
    assert info.value.code == "bad_compile"


def test_cuda_on_a_machine_without_it_is_a_clear_error() -> None:
    if torch.cuda.is_available():
        assert make_engine(device="cuda").device.type == "cuda"
        return
    with pytest.raises(ConfigError) as info:
        make_engine(device="cuda")
    assert info.value.code == "bad_device"


def test_an_explicit_sdpa_is_kept_at_warmup_where_auto_would_measure() -> None:
    engine = make_engine(attention="sdpa", dtype="bfloat16")  # bf16 on a CPU: "auto" would time matmul
    engine.warmup()
    assert (engine.parts.attend.name, engine.parts.attend.auto, engine.parts.attend.timings) == ("sdpa", False, {})
    assert make_engine(attention="auto").parts.attend.auto
