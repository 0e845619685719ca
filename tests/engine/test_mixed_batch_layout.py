"""Sessions at different context lengths batched together hand the compiled block halves the same
kind of tensors as a uniform batch (layout, view or not): no recompilation on the first mixed batch."""

from __future__ import annotations

import inspect

import pytest
import torch

from engine.api import StepItem, StepPlan
from engine.model._fused import BlockKernels
from tests.engine._helpers import W, make_engine, run_chunk


@pytest.mark.slow
def test_a_mixed_context_batch_reuses_the_uniform_batch_s_compiled_graphs() -> None:
    compiled: list[str] = []

    def counting_backend(gm: torch.fx.GraphModule, inputs: list[torch.Tensor]):  # type: ignore[no-untyped-def]
        compiled.append(gm.__class__.__name__)
        return gm.forward

    torch._dynamo.reset()
    engine = make_engine()
    engine.parts.model.kernels = BlockKernels.compiled_versions(backend=counting_backend)
    for sid in ("a", "b", "c"):
        assert engine.open_session(sid, seed=len(compiled), prompt="a ridge in fog")

    def step_together(ids: tuple[str, ...]) -> None:
        for sid in ids:
            engine.begin_chunk(sid, [W])
        while (phase := engine.next_phase(ids[0])) is not None:
            result = engine.step(StepPlan(tuple(StepItem(sid, phase) for sid in ids)))
            assert all(r.error is None for r in result.results)
            for r in result.results:
                if r.chunk is not None:
                    engine.mark_delivered(r.session_id, r.chunk_index)

    run_chunk(engine, "c")
    run_chunk(engine, "c")  # c is two chunks ahead of a and b
    step_together(("a", "b"))  # a uniform batch of two (same context length)
    after_uniform = len(compiled)
    assert after_uniform > 0
    step_together(("a", "c"))  # a batch of two at different context lengths: two attention groups
    assert sorted(engine.session("a").records) == [0, 1] and sorted(engine.session("c").records) == [0, 1, 2]
    assert len(compiled) == after_uniform


def test_the_aliased_arguments_are_the_activations_of_each_half() -> None:
    from engine.model import _fused

    def names(fn: object, positions: tuple[int, ...]) -> list[str]:
        parameters = list(inspect.signature(fn).parameters)  # type: ignore[arg-type]
        return [parameters[i] for i in positions]

    assert names(_fused.pre_attention, _fused._PRE_ACTIVATIONS) == ["x", "mod", "cos", "sin"]
    assert names(_fused.post_attention, _fused._POST_ACTIVATIONS) == ["x", "attn", "mod", "ck", "cv"]
