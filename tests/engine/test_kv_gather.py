"""The slab gather/scatter by device ids (the graphed pass's K/V read and write): the Triton kernel
in its CPU interpreter (a child process: the interpreter is chosen at import) and the CPU
fallback give exactly the slabs asked for, with a tail block in every slab."""

from __future__ import annotations

import textwrap

import pytest
import torch

from engine.kv.gather import gather_slabs, scatter_slabs
from tests.engine._helpers import run_interpreted

pytestmark = pytest.mark.slow  # Triton's CPU interpreter takes seconds to start

CHILD = textwrap.dedent(
    """
    import json
    import torch
    from engine.kv.gather import BLOCK, gather_slabs, scatter_slabs, triton_gather_usable

    # 7 slabs of (tokens 3, heads 2, d BLOCK // 4 + 5): 6 * (BLOCK // 4 + 5) elements, a tail block
    storage = torch.randn(7, 3, 2, BLOCK // 4 + 5, generator=torch.Generator().manual_seed(0))
    index = torch.tensor([[4, 0, 6], [2, 2, 5]])
    out = torch.full((2, 4, *storage.shape[1:]), -1.0)
    gather_slabs(storage, index, out, first_slot=1)
    values = torch.randn(2, *storage.shape[1:], generator=torch.Generator().manual_seed(1))
    target = storage.clone()
    scatter_slabs(values, torch.tensor([5, 1]), target)
    print(json.dumps({
        "usable": triton_gather_usable(storage),
        "gathered": all(torch.equal(out[r, j + 1], storage[index[r, j]]) for r in range(2) for j in range(3)),
        "slot0_untouched": bool((out[:, 0] == -1.0).all()),
        "scattered": torch.equal(target[5], values[0]) and torch.equal(target[1], values[1]),
        "others_kept": all(torch.equal(target[i], storage[i]) for i in (0, 2, 3, 4, 6)),
    }))
    """
)


def test_the_triton_kernel_copies_exactly_the_slabs_asked_for_in_the_interpreter() -> None:
    assert run_interpreted(CHILD) == {"usable": True, "gathered": True, "slot0_untouched": True, "scattered": True,
                      "others_kept": True}


def test_the_cpu_fallback_gathers_and_scatters_the_same_slabs() -> None:
    storage = torch.arange(5 * 4, dtype=torch.float32).reshape(5, 2, 2)
    out = torch.zeros(2, 3, 2, 2)
    gather_slabs(storage, torch.tensor([[3, 1], [0, 4]]), out, first_slot=1)
    assert torch.equal(out[0, 1:], storage[[3, 1]]) and torch.equal(out[1, 1:], storage[[0, 4]])
    assert not out[:, 0].any()
    scatter_slabs(torch.full((2, 2, 2), -1.0), torch.tensor([2, 0]), storage)
    assert storage[[0, 2]].eq(-1.0).all() and storage[1].eq(torch.tensor([[4.0, 5.0], [6.0, 7.0]])).all()
