"""Attention backends: chosen by configuration or measurement, clear errors otherwise."""

from __future__ import annotations

import pytest
import torch

from engine.attention import AttentionBackend, available_backends, measure_backends
from engine.errors import ConfigError
from tests.engine._helpers import make_engine

CPU = torch.device("cpu")


def test_sdpa_equals_softmax_attention_with_and_without_a_mask() -> None:
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 5, 3, 8, generator=gen) for _ in range(3))
    mask = torch.ones(2, 1, 5, 5, dtype=torch.bool).tril()
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / 8**0.5
    for m in (None, mask):
        masked = scores if m is None else scores.masked_fill(~m, float("-inf"))
        expected = torch.einsum("bhqk,bkhd->bqhd", masked.softmax(-1), v)
        assert torch.allclose(AttentionBackend.create("sdpa", CPU)(q, k, v, m), expected, atol=1e-6)


def test_only_sdpa_is_available_on_cpu() -> None:
    assert available_backends(CPU) == ["sdpa"]
    assert list(measure_backends(CPU, torch.float32, 4, 8, 2, 8, repeats=1)) == ["sdpa"]


def test_flash_without_cuda_is_a_clear_error() -> None:
    with pytest.raises(ConfigError) as info:
        AttentionBackend.create("flash", CPU)
    assert info.value.code == "attention_unavailable"


def test_unknown_attention_choice_names_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as info:
        make_engine(attention="xformers")
    assert info.value.code == "bad_attention"
    assert "['auto', 'sdpa', 'flash', 'fp8']" in info.value.message


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
