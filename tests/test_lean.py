"""The lean paths for small problems against the general tensor path: the same result, to the last bit.

gradaudit checks a small problem (an input of a few elements, scalar outputs, a small block of the Jacobian)
in Python floats and with fewer tensor operations (``evaluate.LEAN``): the same steps, points, order of
calls, quotients and judge's rule, IEEE operation for operation. These tests run every check twice, once
as released and once with ``LEAN = False`` (the general tensor path everywhere), and require the same
report, records and info, to the last bit: correct and wrong backwards, kinks, steps, huge and non-finite
values, several inputs and outputs, every mode and two seeds. A difference would make a verdict depend on
the size of the problem.
"""

from __future__ import annotations

import pytest
import torch

import gradaudit as ga
from gradaudit import evaluate

F64 = torch.float64


def t(*values, dtype=F64):
    return torch.tensor(values, dtype=dtype, requires_grad=True)


def s(value):
    return torch.tensor(value, dtype=F64, requires_grad=True)


class Planted(torch.autograd.Function):
    """x^3 whose backward is off by a relative 1e-8."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x ** 2 * (1 + 1e-8)


class NoGrad(torch.autograd.Function):
    """sin(x) whose backward returns None."""

    @staticmethod
    def forward(ctx, x):
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        return None


class Stats(torch.autograd.Function):
    """(x w, sum(x w)) whose backward drops the sum's gradient."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        y = x * w
        return y, y.sum()

    @staticmethod
    def backward(ctx, gy, gs):
        x, w = ctx.saved_tensors
        return w * gy, x * gy


class FastSine(torch.autograd.Function):
    """sin(300 x) whose backward is off by a relative 1e-8."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sin(300 * x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 300 * torch.cos(300 * x) * (1 + 1e-8)


class ScaledPair(torch.autograd.Function):
    """x y whose gradient for y is off by a relative 1e-8."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * y, g * x * (1 + 1e-8)


CASES = {
    "sin, one element": (torch.sin, lambda: (t(0.7),)),
    "a scalar": (lambda x: x.exp() * 3, lambda: (s(-1.3),)),
    "atan2 of scalars": (torch.atan2, lambda: (s(0.4), s(-2.5))),
    "hypot, three outputs": (lambda a, b: (torch.hypot(a, b), a * b, (a - b).sin()), lambda: (s(1.5), s(-0.25))),
    # several one-element inputs moved at once (directional._together in Python floats)
    "scalars, one partial off by 1e-8": (ScaledPair.apply, lambda: (s(0.8), s(-1.9))),
    "one-element vectors": (lambda a, b: (a * b).sin() + b, lambda: (t(0.3), t(-1.7))),
    "three scalars at a kink": (lambda a, b, c: torch.abs(a - b) + c * a, lambda: (s(0.5), s(0.5), s(2.0))),
    "scalars, large and small": (lambda a, b: a * a * b + 1e3 * b, lambda: (s(1e3), s(-2e-3))),
    "log near zero": (torch.log, lambda: (t(1e-3),)),
    "a large input": (lambda x: torch.sin(x) * x, lambda: (t(7.58),)),
    "a kink at zero": (torch.abs, lambda: (t(0.0),)),
    "relu at zero and away": (torch.relu, lambda: (t(0.0, 1.5, -2.0),)),
    "a step": (torch.floor, lambda: (t(0.5),)),
    "huge values": (lambda x: 1e154 * x * x, lambda: (t(0.5),)),
    "planted 1e-8 bug": (Planted.apply, lambda: (t(1.3),)),
    "planted 1e-8 bug, small vector": (Planted.apply, lambda: (t(1.3, -0.4, 2.0, 0.1),)),
    "no gradient": (NoGrad.apply, lambda: (t(0.3),)),
    "a dropped output gradient": (Stats.apply, lambda: (t(0.5, -1.0, 2.0), t(1.5, 0.25, -0.5))),
    "a NaN output": (torch.sqrt, lambda: (t(-1.0),)),
    "an infinite input element": (lambda x: torch.softmax(x, 0), lambda: (t(0.3, float("-inf"), 1.0),)),
    "sum of products": (lambda x, y: (x * y).sum(), lambda: (t(0.5, 1.5), t(-2.0, 0.25))),
    "a small matrix product": (torch.mm, lambda: (t(0.5, -1.0, 2.0, 0.25).reshape(2, 2).detach().requires_grad_(),
                                                 t(1.0, 2.0).reshape(2, 1).detach().requires_grad_())),
    "cumulative product": (lambda x: torch.cumprod(x, 0), lambda: (t(0.5, -1.5, 2.0, 0.75, 1.25),)),
    "a float32 output": (lambda x: (x.float() * 2).double(), lambda: (t(0.3, 0.6),)),
    "float32 inputs": (lambda x: x.sin(), lambda: (t(0.3, 0.6, dtype=torch.float32),)),
    "a random draw": (lambda x: x * (torch.rand(()) + 1), lambda: (t(0.3, -0.6),)),
    "an empty output": (lambda x: x[:0] * 2, lambda: (t(0.3, 0.6),)),
    "a fast oscillation": (lambda x: torch.sin(300 * x), lambda: (t(-1.0, -0.2, 0.45, 1.0),)),
    # Ridders' first bounds coarser than 1e-8 of the entries: Ridders again from smaller steps, on both paths
    "a fast oscillation off by 1e-8": (lambda x: FastSine.apply(x), lambda: (t(-1.0, -0.2, 0.45, 1.0),)),
    # torch's trigamma, 3e-10 off: central differences pass it within their bound, the confirmation decides
    "digamma at half-integers": (torch.digamma, lambda: (t(0.5, 1.5, 2.5),)),
    # one output element, entries central differences cannot resolve to 1e-8: projections along some columns
    # (phi of the moved outputs in Python floats, _split's first step, the open columns in Python floats)
    "a scalar loss of four elements": (lambda x: torch.sin(x).sum(), lambda: (t(0.7, 1.2, -0.3, 2.0),)),
    "a small loss, projected along its columns": (
        lambda x: torch.nn.functional.soft_margin_loss(x, torch.tensor([1.0, -1.0, 1.0, 1.0, -1.0], dtype=F64)),
        lambda: (t(-4.83, -7.58, -0.60, -1.54, -1.97),)),
    "two scalars with small entries": (lambda a, b: a * torch.exp2(b), lambda: (s(-4.83), s(-7.58))),
}


def _result(fn, make, mode, seed):
    res = ga.check(fn, make(), mode=mode, seed=seed)
    return res.verdict, str(res), repr(res.records), repr(res.info)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("mode", ["full", "directional", "auto"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_lean_path_gives_the_general_paths_result(case, mode, seed, monkeypatch):
    fn, make = CASES[case]
    lean = _result(fn, make, mode, seed)
    monkeypatch.setattr(evaluate, "LEAN", False)
    general = _result(fn, make, mode, seed)
    assert lean == general


@pytest.mark.parametrize("make", [
    lambda: torch.tensor(0.25, dtype=F64), lambda: torch.tensor([0.5, -0.0, float("nan")], dtype=F64),
    lambda: torch.arange(12, dtype=F64).reshape(3, 4), lambda: torch.arange(40, dtype=F64).reshape(5, 8),
    lambda: torch.empty(2, 0, dtype=F64), lambda: torch.arange(6, dtype=F64).reshape(1, 6),
    lambda: torch.arange(24, dtype=torch.float32).reshape(2, 3, 4),
    lambda: torch.arange(10, dtype=F64)[::3], lambda: torch.arange(6, dtype=F64).reshape(2, 3).T,
    lambda: torch.tensor([True, False]), lambda: torch.tensor([[1, 2], [3, 4]]), lambda: torch.tensor([1 + 2j, -3j]),
    lambda: torch.tensor([[0.1, 0.2]], dtype=F64, requires_grad=True) * 3, lambda: torch.empty(0, 3, dtype=F64),
    lambda: torch.tensor([1.5, 2.5], dtype=torch.bfloat16)])
def test_flat_list_reads_what_reshape_and_tolist_read(make):
    x = make()
    got, want = evaluate.flat_list(x), x.detach().reshape(-1).tolist()
    assert [type(v) for v in got] == [type(v) for v in want]
    assert repr(got) == repr(want)  # (NaN and -0.0 included)


def test_the_planted_bugs_fail_on_the_lean_path():
    """The differential test above is only worth something if the cases it compares decide something: the
    planted bugs fail on the lean path (and so, by the test above, on the general path too)."""
    assert evaluate.LEAN
    for case in ("planted 1e-8 bug", "planted 1e-8 bug, small vector", "no gradient", "a dropped output gradient",
                 "a fast oscillation off by 1e-8", "scalars, one partial off by 1e-8"):
        fn, make = CASES[case]
        for mode in ("full", "directional"):
            assert ga.check(fn, make(), mode=mode).verdict == "fail", (case, mode)
    for case in ("sin, one element", "atan2 of scalars", "hypot, three outputs", "sum of products",
                 "one-element vectors", "scalars, large and small"):
        fn, make = CASES[case]
        for mode in ("full", "directional"):
            assert ga.check(fn, make(), mode=mode).verdict == "pass", (case, mode)


OPS = (torch.sin, torch.tanh, torch.exp, lambda v: v * v * v, torch.atan, lambda v: torch.log1p(v * v),
       torch.abs, lambda v: torch.clamp(v, -0.5, 0.5), lambda v: 1 / (1 + v * v))


@pytest.mark.parametrize("draw", range(12))
def test_random_compositions_agree_on_both_paths(draw, monkeypatch):
    """Functions drawn at random from a few elementwise ops (smooth ones, kinks, a clamp) on one to three
    inputs of one to five elements at magnitudes from 1e-3 to 1e3, one or two outputs, every mode."""
    g = torch.Generator().manual_seed(draw)
    pick = torch.randint(len(OPS), (3,), generator=g).tolist()
    count = 1 + draw % 3
    size = 1 + int(torch.randint(5, (1,), generator=g))
    scale = 10.0 ** float(torch.randint(-3, 4, (1,), generator=g))
    values = [(torch.randn(size, generator=g, dtype=F64) * scale) for _ in range(count)]
    two = draw % 2 == 1

    def fn(*xs):
        total = sum(OPS[pick[i % 3]](x) * (i + 1) for i, x in enumerate(xs))
        return (total.sum(), OPS[pick[2]](xs[0]).sum()) if two else total

    for mode in ("full", "directional", "auto"):
        def make():
            return tuple(v.clone().requires_grad_() for v in values)

        monkeypatch.setattr(evaluate, "LEAN", True)
        lean = _result(fn, make, mode, draw)
        monkeypatch.setattr(evaluate, "LEAN", False)
        assert _result(fn, make, mode, draw) == lean, mode


def test_seen_blocks_kept_as_lists_read_as_the_tensors_they_stand_for():
    """full._seen_values keeps a small block's accepted differences as Python numbers; the tensor path reads them
    as the tensors full._seen keeps (the same values, int64 rows and columns, float64 differences and entries)."""
    from gradaudit import full

    k, rows, cols, diff, entry = full._seen_tensors((1, [0, 2], [3, 1], [1e-9, -0.0], [0.5, 2.0]))
    assert k == 1 and rows.dtype == cols.dtype == torch.int64 and diff.dtype == entry.dtype == F64
    assert (rows.tolist(), cols.tolist(), diff.tolist(), entry.tolist()) == ([0, 2], [3, 1], [1e-9, -0.0], [0.5, 2.0])
    assert str(diff[1].item()) == "-0.0"
    kept = (0, torch.tensor([1]), torch.tensor([0]), torch.tensor([1e-9], dtype=F64), torch.tensor([3.0], dtype=F64))
    assert all(a is b for a, b in zip(full._seen_tensors(kept), kept))


def test_a_scalar_outputs_row_is_the_same_divided_in_python_floats(monkeypatch):
    """full._row_over divides a few float64 values by v in Python floats: the division torch makes, bit for bit
    (signed zeros, infinities, NaN, subnormals and huge values included)."""
    from gradaudit import full

    g = torch.tensor([0.3, -0.0, 0.0, float("inf"), float("nan"), 5e-324, 1e308, -7.25], dtype=F64)
    for v in (0.7, -1.3e-100, 0.5, 1.4999):
        lean = full._row_over(g, v)
        monkeypatch.setattr(evaluate, "LEAN", False)
        general = full._row_over(g, v)
        monkeypatch.setattr(evaluate, "LEAN", True)
        assert lean.shape == general.shape == (1, 8) and lean.dtype == general.dtype == F64
        assert repr(lean.tolist()) == repr(general.tolist())
