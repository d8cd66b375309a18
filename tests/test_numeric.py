"""Numeric evidence against exact derivatives (derived in the comments)."""

import math

import pytest
import torch

from gradaudit.numeric import central_difference, complex_step, one_sided, ridders, step_for, taylor_orders

F64 = torch.float64


def test_step_is_exactly_representable_and_scaled():
    x = torch.tensor([0.0, 3.0, -1e4], dtype=F64)
    h = step_for(x)
    assert torch.equal((x + h) - x, h)
    assert float(h[0]) == pytest.approx(2.220446049250313e-16 ** (1 / 3), rel=1e-12)  # cbrt(eps)
    assert float(h[2]) == pytest.approx(1e4 * 2.220446049250313e-16 ** (1 / 3), rel=1e-12)


def test_central_difference_of_a_cubic_has_error_h_squared():
    # ((x+h)^3 - (x-h)^3) / 2h = 3x^2 + h^2: at x = 2, h = 1e-3 -> 12.000001
    g, info = central_difference(lambda t: (t["x"] ** 3).sum(), {"x": torch.tensor([2.0], dtype=F64)}, "x", step=1e-3)
    assert float(g[0]) == pytest.approx(12.000001, abs=1e-10)
    assert info["step_rule"] == "chosen: h = 0.001" and info["evaluations"] == 2


@pytest.mark.parametrize("f, x0, exact", [
    (lambda t: (t.sin() * t.exp()).sum(), 0.7, math.exp(0.7) * (math.sin(0.7) + math.cos(0.7))),
    (lambda t: t.log().sum(), 2.5, 1 / 2.5),
    (lambda t: t.tanh().sum(), -0.3, 1 - math.tanh(-0.3) ** 2),
    (lambda t: (3 * t).exp().sum(), 1.2, 3 * math.exp(3.6)),
])
def test_ridders_reaches_1e_12_in_at_most_12_evaluations(f, x0, exact):
    d, err, evals = ridders(f, torch.tensor([x0], dtype=F64))
    assert abs(float(d[0]) - exact) <= 1e-12 * abs(exact)
    assert evals <= 12 and float(err[0]) >= 0


@pytest.mark.parametrize("f, x0, exact", [
    (lambda t: (t.sin() * t.exp()).sum(), 0.7, math.exp(0.7) * (math.sin(0.7) + math.cos(0.7))),
    (lambda t: ((2 * t + 1 - 10) ** 2).sum(), 3.0, -12.0),  # the lesson's L(w): 4(2w - 9)
    (lambda t: t.sqrt().sum(), 4.0, 0.25),
])
def test_complex_step_is_exact_to_rounding(f, x0, exact):
    d, note = complex_step(f, torch.tensor([x0], dtype=F64))
    assert abs(float(d[0]) - exact) <= 1e-15 * max(1.0, abs(exact))
    assert note == "complex step, h = 1e-20"


def test_complex_step_says_why_it_cannot_run():
    d, note = complex_step(lambda t: t.abs().sum(), torch.tensor([1.0], dtype=F64))
    assert d is None and "real result" in note
    d, note = complex_step(lambda t: torch.relu(t).sum(), torch.tensor([1.0], dtype=F64))
    assert d is None and "does not run on complex input" in note


def test_one_sided_slopes_expose_a_kink():
    # |x| at 0: right slope +1, left slope -1; smooth x^2 at 1: both about 2
    right, left = one_sided(lambda t: t.abs().sum(), torch.tensor([0.0, 1.0], dtype=F64))
    assert right.tolist() == [1.0, 1.0] and left.tolist() == [-1.0, 1.0]
    right, left = one_sided(lambda t: (t * t).sum(), torch.tensor([1.0], dtype=F64))
    assert float(right[0]) == pytest.approx(2.0, abs=1e-7) and float(left[0]) == pytest.approx(2.0, abs=1e-7)


def test_taylor_orders_separate_right_from_slightly_wrong():
    # f = sum(x sin x), grad = sin x + x cos x; a 1e-3 relative error drops the order to 1
    x = torch.tensor([0.5, -1.0, 2.0], dtype=F64)
    f = lambda t: (t.sin() * t).sum()  # noqa: E731
    good = x.sin() + x * x.cos()
    assert all(abs(o - 2) < 0.1 for o in taylor_orders(f, x, good))
    assert all(abs(o - 1) < 0.2 for o in taylor_orders(f, x, good * (1 + 1e-3), h0=1e-4))
