"""The FFN's hidden layer on a CPU: the tanh GELU computed as x * sigmoid(2u) in place, the same
function as PyTorch's tanh GELU kernel."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from engine.model._fused import _ffn_hidden, gelu_tanh_, linear_gelu_tanh


def test_gelu_tanh_in_place_is_the_tanh_gelu_in_fp32() -> None:
    x = torch.linspace(-12.0, 12.0, 4801, dtype=torch.float64)
    exact = 0.5 * x * (1.0 + torch.tanh((2.0 / torch.pi) ** 0.5 * (x + 0.044715 * x**3)))
    ours = gelu_tanh_(x.float().clone()).double()
    torch.testing.assert_close(ours, exact, rtol=2e-6, atol=2e-6)
    assert ours[0].item() == 0.0 and ours[-1].item() == 12.0  # the tails: exactly 0 and x in fp32
    assert (ours - F.gelu(x.float(), approximate="tanh").double()).abs().max().item() < 2e-6


def test_gelu_tanh_in_place_writes_into_its_input() -> None:
    x = torch.tensor([-1.0, 0.0, 1.0, 3.0])
    out = gelu_tanh_(x)
    assert out.data_ptr() == x.data_ptr()
    torch.testing.assert_close(x, F.gelu(torch.tensor([-1.0, 0.0, 1.0, 3.0]), approximate="tanh"))


def test_linear_gelu_on_cpu_matches_the_plain_expression_in_each_dtype() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 64, 32, generator=gen)
    weight, bias = torch.randn(96, 32, generator=gen) / 4, torch.randn(96, generator=gen)
    for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 0.0)):  # bf16 keeps the tanh kernel: equal
        args = (x.to(dtype), weight.to(dtype), bias.to(dtype))
        with torch.inference_mode():
            got = linear_gelu_tanh(*args)
        want = F.gelu(F.linear(*args), approximate="tanh")
        assert got.dtype == dtype and got.shape == (2, 64, 96)
        torch.testing.assert_close(got, want, rtol=tol, atol=tol)


def test_the_training_path_computes_the_inference_numbers_bit_for_bit_on_cpu() -> None:
    """A frozen copy of a model (the distill teacher, no gradient) and the model being trained give
    the same numbers: the student equal to its teacher has a distill loss of exactly 0."""
    gen = torch.Generator().manual_seed(1)
    h = torch.randn(3, 50, 32, generator=gen)
    weight = (torch.randn(96, 32, generator=gen) / 4).requires_grad_()
    bias = torch.randn(96, generator=gen)
    with torch.no_grad():
        inference = _ffn_hidden(h, weight, bias)
    training = _ffn_hidden(h, weight, bias)
    assert training.requires_grad and torch.equal(training.detach(), inference)
    training.sum().backward()
    assert weight.grad is not None and torch.isfinite(weight.grad).all()
