"""The CUDA KV pool, default or explicit, leaves room for the decoder's measured working set and caches."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from engine._memory import WorkingSet, check_cuda_kv_budget, cuda_kv_budget
from engine.config import tiny_config, wan_13b_config
from engine.errors import ConfigError

GIB = 2**30
CONFIG = dataclasses.replace(tiny_config(), cuda_kv_memory_fraction=0.8, cuda_working_margin=0.25)


def test_the_pool_gets_whole_sessions_of_the_memory_left_after_the_working_set() -> None:
    # 100 GiB free, 20 GiB peak -> 75 GiB after 25% headroom -> 60 GiB at 0.8 -> 60 // (6 + 2) = 7 sessions
    working = WorkingSet(peak_bytes=20 * GIB, cache_bytes_per_session=2 * GIB)
    assert cuda_kv_budget(100 * GIB, working, 6 * GIB, CONFIG) == 7 * 6 * GIB


def test_decoder_caches_count_against_each_pooled_session() -> None:
    without = cuda_kv_budget(100 * GIB, WorkingSet(20 * GIB, 0), 6 * GIB, CONFIG)
    assert without == 10 * 6 * GIB  # 60 // 6


def test_no_room_for_one_session_is_a_coded_error_that_says_what_to_change() -> None:
    with pytest.raises(ConfigError) as err:
        cuda_kv_budget(30 * GIB, WorkingSet(24 * GIB, 1 * GIB), 6 * GIB, CONFIG)
    assert err.value.code == "kv_budget_too_small"
    assert "max_batch" in err.value.message and "kv_budget_bytes" in err.value.message


def test_a_small_model_does_not_take_the_whole_gpu() -> None:
    capped = dataclasses.replace(CONFIG, cuda_kv_max_sessions=100)
    assert cuda_kv_budget(100 * GIB, WorkingSet(1 * GIB, 0), 1 << 20, capped) == 100 << 20


def test_an_explicit_pool_may_fill_what_the_working_set_leaves() -> None:
    # 100 GiB free, 20 GiB peak -> 75 GiB beside it (no 0.8 fraction) -> 9 sessions of 6 + 2 GiB = 72 GiB fit
    assert check_cuda_kv_budget(9 * 6 * GIB, 100 * GIB, WorkingSet(20 * GIB, 2 * GIB), 6 * GIB, CONFIG) == 9
    # a budget between whole sessions holds the whole ones: 9.5 sessions' bytes -> 9
    assert check_cuda_kv_budget(9 * 6 * GIB + 3 * GIB, 100 * GIB, WorkingSet(20 * GIB, 2 * GIB), 6 * GIB, CONFIG) == 9


def test_an_explicit_pool_too_large_for_the_working_set_is_a_coded_error_naming_what_fits() -> None:
    with pytest.raises(ConfigError) as err:  # 10 sessions need 80 GiB of the 75 beside the working set
        check_cuda_kv_budget(10 * 6 * GIB, 100 * GIB, WorkingSet(20 * GIB, 2 * GIB), 6 * GIB, CONFIG)
    assert err.value.code == "kv_budget_too_large"
    assert "at most 54.0 GiB (9 sessions)" in err.value.message and "max_batch=" in err.value.message


def test_each_session_s_prompt_cross_attention_k_v_count_beside_its_kv() -> None:
    wan = wan_13b_config()
    working = WorkingSet(peak_bytes=20 * GIB, cache_bytes_per_session=2 * GIB)
    counted = working.with_cross(wan, torch.bfloat16)
    # 2 (K and V) x 30 layers x 512 prompt tokens x 1,536 channels x 2 bytes = 94,371,840 bytes
    assert counted == WorkingSet(20 * GIB, 2 * GIB + 94_371_840)
    assert working.with_cross(wan, torch.float32).cache_bytes_per_session == 2 * GIB + 2 * 94_371_840
