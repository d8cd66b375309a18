"""Inputs and outputs as gradcheck takes them, and more: non-tensor arguments, keyword arguments, nested
inputs, outputs left out of the check (and said so), complex functions by Wirtinger calculus.

Each planted bug is a minimal repro of a defect class found on PyTorch's OpInfo database; the expected
verdicts follow from the mathematics (a backward missing conj() is wrong; integer indices have no
gradient), not from running gradaudit.
"""

from __future__ import annotations

import pytest
import torch

import gradaudit as ga

F64 = torch.float64
MODES = ("full", "directional", "auto")


def leaf(*shape, dtype=F64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype).requires_grad_(True)


@pytest.mark.parametrize("mode", MODES)
def test_non_tensor_positional_arguments_pass_through(mode):
    x = leaf(4, 3)
    res = ga.check(torch.cumsum, (x, 1), mode=mode)
    assert res.ok, res
    assert [r.input for r in res.records] == ["input0"]  # the dim is not an input to check


@pytest.mark.parametrize("mode", MODES)
def test_keyword_arguments(mode):
    x = leaf(4, 3)
    assert ga.check(torch.sum, (x,), kwargs={"dim": 1, "keepdim": True}, mode=mode).ok


def test_kwargs_must_be_a_dict():
    with pytest.raises(ga.SpecError) as info:
        ga.check(torch.sum, (leaf(3),), kwargs=[("dim", 0)])
    assert info.value.field == "kwargs"


@pytest.mark.parametrize("mode", MODES)
def test_nested_inputs_are_flattened_and_named_by_their_path(mode):
    a, b = leaf(3, seed=1), leaf(2, seed=2)
    res = ga.check(torch.cat, ([a, b],), mode=mode, names=["a", "b"])
    assert res.ok, res
    assert [r.input for r in res.records] == ["a", "b"]

    def pair_sum(pair, scale):
        return (pair[0] * scale).sum() + pair[1].prod()

    res = ga.check(pair_sum, ((a, b), 2.0), mode=mode)
    assert res.ok and [r.input for r in res.records] == ["pair[0]", "pair[1]"]


def test_a_bug_in_one_nested_input_is_located_there():
    class Half(torch.autograd.Function):  # d/dy (2y) = 2; the backward returns 1
        @staticmethod
        def forward(ctx, x, y):
            return x + 2 * y

        @staticmethod
        def backward(ctx, g):
            return g, g

    res = ga.check(lambda xs: Half.apply(*xs), ([leaf(3, seed=1), leaf(3, seed=2)],), mode="full")
    assert [r.verdict for r in res.records] == ["pass", "fail"]
    assert res.records[1].input == "xs[1]"


@pytest.mark.parametrize("mode", MODES)
def test_integer_outputs_are_left_out_and_the_report_says_which(mode):
    x = leaf(4, 3)
    res = ga.check(lambda x: torch.max(x, 0), (x,), mode=mode)
    assert res.ok, res
    assert "output 1 (int64 tensor, not differentiable)" in res.report()


@pytest.mark.parametrize("mode", MODES)
def test_outputs_that_do_not_require_grad_are_left_out(mode):
    # native_layer_norm returns (y, mean, rstd); autograd differentiates y only
    x = leaf(4, 3)
    res = ga.check(lambda x: torch.ops.aten.native_layer_norm(x, (3,), None, None, 1e-5), (x,), mode=mode)
    assert res.ok, res
    assert "output 1 (float64 tensor, does not require grad)" in res.report()


@pytest.mark.parametrize("mode", MODES)
def test_a_function_that_detaches_its_only_output_still_fails(mode):
    # d/dx (2x) = 2 numerically; autograd sees no path (the output does not require grad)
    res = ga.check(lambda x: x.detach() * 2, (leaf(3),), mode=mode)
    assert res.verdict == "fail", res


class _Square(torch.autograd.Function):
    """z ↦ z²: autograd's convention returns grad_output · conj(dz²/dz) = g · conj(2z)."""

    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return z * z

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return g * (2 * z).conj()


class _SquareNoConj(_Square):
    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return g * 2 * z  # the conj() is missing


@pytest.mark.parametrize("mode", MODES)
def test_complex_functions_by_wirtinger_calculus(mode):
    z = leaf(4, dtype=torch.complex128)
    good = ga.check(_Square.apply, (z,), mode=mode)
    assert good.ok, good
    assert "real and imaginary parts" in good.report()
    assert ga.check(_SquareNoConj.apply, (z,), mode=mode).verdict == "fail"
    assert ga.check(torch.fft.fft, (leaf(5),), mode=mode).ok  # real in, complex out
    assert ga.check(lambda z: (z * z.conj()).real.sum(), (z,), mode=mode).ok  # complex in, real out


def test_sparse_inputs_are_refused_with_the_fix():
    s = torch.eye(3, dtype=F64).to_sparse().requires_grad_(True)
    with pytest.raises(ga.SpecError, match="to_dense"):
        ga.check(lambda s: s.to_dense().sum(), (s,))
