"""FlashAttention-3's call shapes on the CPU: the packing of samples with different key lengths
(prefix sums on the device), the per-head FP8 descales as FA3 takes them, and the exact reference
that runs where the kernels do not (the GPU checks compare the kernels with it:
`python -m enginetools.bench.attention`)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from engine.attention import AttentionBackend
from engine.attention_fa3 import FP8, Descale, PackingCache, reference_attention
from engine.errors import ConfigError

CPU = torch.device("cpu")


def _exact(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v in float64, (L, heads, d) per sample."""
    scores = torch.einsum("qhd,khd->hqk", q.double(), k.double()) / math.sqrt(q.shape[-1])
    return torch.einsum("hqk,khd->qhd", scores.softmax(-1), v.double())


def test_a_packing_holds_the_prefix_sums_as_int32_and_is_built_once_per_shape() -> None:
    cache = PackingCache(CPU)
    packing = cache.get([6, 6, 6], [6, 18, 12])
    assert packing.cu_q.dtype == packing.cu_k.dtype == torch.int32
    assert packing.cu_q.tolist() == [0, 6, 12, 18]
    assert packing.cu_k.tolist() == [0, 6, 24, 36]
    assert (packing.samples, packing.max_q, packing.max_k) == (3, 6, 18)
    assert cache.get((6, 6, 6), (6, 18, 12)) is packing  # same shape: no second upload
    assert cache.get([6, 6], [6, 18]) is not packing


def test_a_packing_needs_one_query_and_one_key_length_per_sample() -> None:
    with pytest.raises(ValueError, match="one query and one key length per sample"):
        PackingCache(CPU).get([6, 6], [6])


def test_packed_reference_attends_each_sample_to_its_own_keys_only() -> None:
    gen = torch.Generator().manual_seed(0)
    k_lens = [5, 15, 10]
    q = torch.randn(3 * 5, 2, 8, generator=gen)
    k, v = (torch.randn(sum(k_lens), 2, 8, generator=gen) for _ in range(2))
    out = reference_attention(q, k, v, packing=PackingCache(CPU).get([5, 5, 5], k_lens))
    assert out.shape == (15, 2, 8) and out.dtype == torch.float32
    starts = [0, 5, 20, 30]
    for i in range(3):
        expected = _exact(q[5 * i : 5 * i + 5], k[starts[i] : starts[i + 1]], v[starts[i] : starts[i + 1]])
        torch.testing.assert_close(out[5 * i : 5 * i + 5].double(), expected, rtol=0, atol=1e-6)


def test_packed_shapes_that_disagree_with_the_packing_are_refused() -> None:
    q, k = torch.zeros(10, 1, 8), torch.zeros(12, 1, 8)
    with pytest.raises(ValueError, match="do not match"):
        reference_attention(q, k, k, packing=PackingCache(CPU).get([5, 5], [5, 5]))


def test_descales_are_one_row_per_sample_and_head_built_once_per_sample_count() -> None:
    descale = Descale(torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0]), torch.tensor([5.0, 6.0]))
    q, k, v = descale.rows(3)
    assert q.shape == (3, 2) and q.is_contiguous() and q.dtype == torch.float32
    assert q.tolist() == [[1.0, 2.0]] * 3 and k.tolist() == [[3.0, 4.0]] * 3 and v.tolist() == [[5.0, 6.0]] * 3
    assert descale.rows(3)[0] is q


def test_fp8_reference_is_exact_attention_on_the_dequantized_inputs_in_bf16() -> None:
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, n, 3, 16, generator=gen).to(FP8) for n in (7, 11, 11))
    descale = Descale(torch.tensor([0.1, 0.2, 0.3]), torch.tensor([0.5, 0.25, 1.0]), torch.tensor([2.0, 1.0, 0.5]))
    out = reference_attention(q, k, v, descale)
    assert out.dtype == torch.bfloat16 and out.shape == (2, 7, 3, 16)
    for b in range(2):
        deq = [x[b].float() * s[:, None] for x, s in ((q, descale.q), (k, descale.k), (v, descale.v))]
        torch.testing.assert_close(out[b].double(), _exact(*deq), rtol=8e-3, atol=8e-3)  # bf16 output


def test_fa3_without_cuda_is_a_coded_error_that_says_how_to_install_it() -> None:
    with pytest.raises(ConfigError) as info:
        AttentionBackend.create("fa3", CPU)
    assert info.value.code == "attention_unavailable"
    assert "fa3-fwd" in info.value.message and "pip install 'sessiond[gpu]'" in info.value.message


def test_fp8_on_a_cpu_runs_the_reference_and_packs_samples() -> None:
    attend = AttentionBackend.create("fp8", CPU)
    assert (attend.name, attend.fp8, attend.packs, attend._fa3) == ("fp8", True, True, None)
    assert not AttentionBackend.create("sdpa", CPU).packs


def test_the_backend_packs_samples_of_different_key_lengths_into_one_call() -> None:
    gen = torch.Generator().manual_seed(2)
    attend = AttentionBackend.create("fp8", CPU)
    descale = Descale(*(torch.rand(2, generator=gen) + 0.5 for _ in range(3)))
    q = torch.randn(3, 4, 2, 8, generator=gen).to(FP8)
    lengths = [4, 12, 8]
    k, v = (torch.randn(sum(lengths), 2, 8, generator=gen).to(FP8) for _ in range(2))
    out = attend.packed(q, k, v, lengths, descale)
    assert out.shape == (3, 4, 2, 8) and out.is_contiguous()
    starts = [0, 4, 16, 24]
    for i in range(3):
        alone = attend(q[i : i + 1], k[None, starts[i] : starts[i + 1]], v[None, starts[i] : starts[i + 1]],
                       None, descale)
        assert torch.equal(out[i], alone[0])
    assert list(attend._packings[CPU]._cache) == [((4, 4, 4), (4, 12, 8))]


def test_a_backend_that_does_not_pack_refuses_packed_samples() -> None:
    with pytest.raises(ConfigError) as info:
        AttentionBackend.create("sdpa", CPU).packed(torch.zeros(1, 2, 1, 8), torch.zeros(2, 1, 8),
                                                     torch.zeros(2, 1, 8), [2])
    assert info.value.code == "attention_cannot_pack"


def test_switching_between_fp8_and_a_bf16_backend_needs_another_engine() -> None:
    fp8 = AttentionBackend.create("fp8", CPU)
    with pytest.raises(ConfigError) as info:
        fp8.select("sdpa")
    assert info.value.code == "attention_precision"
    with pytest.raises(ConfigError):
        AttentionBackend.create("sdpa", CPU).select("fp8")
    fp8.select("fp8")  # the same precision: allowed
    assert fp8.name == "fp8"


def test_masked_fp8_attention_dequantizes_and_attends_exactly() -> None:
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 6, 2, 8, generator=gen).to(FP8) for _ in range(3))
    ones = torch.ones(2)
    mask = torch.ones(1, 1, 6, 6, dtype=torch.bool).tril()
    out = AttentionBackend.create("fp8", CPU)(q, k, v, mask, Descale(ones, ones, ones))
    expected = F.scaled_dot_product_attention(*(x.float().transpose(1, 2) for x in (q, k, v)), attn_mask=mask)
    torch.testing.assert_close(out.float(), expected.transpose(1, 2), rtol=8e-3, atol=8e-3)



class _RecordingOp:
    """Stands where torch.ops.fa3_fwd.fwd stands: records the positional arguments it was called
    with and answers like the kernel (out, lse, accum, lse accum) with the reference's output."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    def fwd(self, *args: object) -> tuple[torch.Tensor, ...]:
        self.calls.append(args)
        q, k, v = args[0], args[1], args[2]
        descale = None if args[20] is None else Descale(args[20][0], args[21][0], args[22][0])  # type: ignore[index]
        packing = None
        if args[7] is not None:
            cu_q, cu_k = args[7].tolist(), args[8].tolist()  # type: ignore[union-attr]
            packing = PackingCache(CPU).get([b - a for a, b in itertools.pairwise(cu_q)],
                                            [b - a for a, b in itertools.pairwise(cu_k)])
        return reference_attention(q, k, v, descale, packing), torch.empty(0), torch.empty(0), torch.empty(0)  # type: ignore[arg-type]


class _Module:
    def __init__(self) -> None:
        self.fa3_fwd_cuda = _RecordingOp()


def test_the_registered_op_gets_the_interface_s_argument_order() -> None:
    from engine.attention_fa3 import fa3_attention

    module = _Module()
    gen = torch.Generator().manual_seed(4)
    q = torch.randn(6, 2, 8, generator=gen).to(FP8)
    k, v = (torch.randn(10, 2, 8, generator=gen).to(FP8) for _ in range(2))
    descale = Descale(torch.tensor([0.5, 1.0]), torch.tensor([1.0, 2.0]), torch.tensor([0.25, 4.0]))
    packing = PackingCache(CPU).get([3, 3], [4, 6])
    out = fa3_attention(module, q, k, v, descale, packing)  # type: ignore[arg-type]
    [args] = module.fa3_fwd_cuda.calls
    assert len(args) == 34
    assert args[7] is packing.cu_q and args[8] is packing.cu_k and (args[12], args[13]) == (3, 6)
    assert [a.tolist() for a in args[20:23]] == [[[0.5, 1.0]] * 2, [[1.0, 2.0]] * 2, [[0.25, 4.0]] * 2]
    assert args[23] == 8**-0.5 and args[24] is False and args[25:27] == (-1, -1) and args[31] == 1
    assert torch.equal(out, reference_attention(q, k, v, descale, packing))
    uniform = fa3_attention(module, q[None, :3].float(), k[None, :4].float(), v[None, :4].float())  # type: ignore[arg-type]
    assert module.fa3_fwd_cuda.calls[1][7] is None and module.fa3_fwd_cuda.calls[1][20] is None
    assert uniform.shape == (1, 3, 2, 8)
