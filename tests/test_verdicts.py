"""Verdicts from numeric evidence: derived tolerances, kinks, noise, precision, Taylor orders.

Every expected gradient here is the analytical derivative, written as a formula.
"""

import pytest
import torch

from gradaudit import Expectation, InputSpec, Tolerance, run
from gradaudit.render.text import evidence_text

X = [0.3, -0.7, 1.3]
POS = [0.3, 0.7, 1.3]

# (function, inputs, derivative): d/dx_i of a sum is the elementwise derivative
CORRECT_OPS = [
    ("sum(sin(x))", X, "cos(x)"),
    ("sum(cos(x))", X, "-sin(x)"),
    ("sum(exp(x))", X, "exp(x)"),
    ("sum(log(x))", POS, "1/x"),
    ("sum(sqrt(x))", POS, "0.5/sqrt(x)"),
    ("sum(tanh(x))", X, "1 - tanh(x)**2"),
    ("sum(sigmoid(x))", X, "sigmoid(x)*(1 - sigmoid(x))"),
    ("sum(softplus(x))", X, "sigmoid(x)"),
    ("sum(x**3)", X, "3*x**2"),
    ("sum(atan(x))", X, "1/(1 + x*x)"),
    ("sum(erf(x))", X, "2/sqrt(pi)*exp(-x*x)"),
    ("mean(x*x)", X, "2*x/3"),
    ("prod(x)", POS, "prod(x)/x"),
    ("sum(sinh(x)*cosh(x))", X, "cosh(x)**2 + sinh(x)**2"),
    ("log1p(sum(x*x))", X, "2*x/(1 + sum(x*x))"),
    ("sum(expm1(x))*1000", X, "1000*exp(x)"),
]


@pytest.mark.parametrize("fn, x, grad", CORRECT_OPS, ids=[c[0] for c in CORRECT_OPS])
def test_correct_torch_ops_pass_with_derived_tolerances(fn, x, grad):
    recs = run([Expectation(name=fn, function=fn, inputs={"x": x}, expected={"x": grad})])
    assert [r.verdict for r in recs] == ["pass", "pass", "pass"], [r.discrepancy for r in recs]


@pytest.mark.parametrize("fn, x, grad", CORRECT_OPS[:8], ids=[c[0] for c in CORRECT_OPS[:8]])
def test_a_relative_error_of_1e_6_is_caught_by_every_channel(fn, x, grad):
    recs = run([Expectation(name=fn, function=fn, inputs={"x": x}, expected={"x": f"({grad})*(1 + 1e-6)"})])
    assert [r.verdict for r in recs] == ["fail", "fail", "fail"]


def test_relu_at_zero_is_inconclusive_and_names_both_slopes():
    # relu'(x) = 1 for x > 0, 0 for x < 0; at 0 the slopes are 0 (left) and 1 (right)
    c = Expectation(name="relu", function="sum(relu(x))", inputs={"x": [0.0, 1.0]}, expected={"x": [0, 1]},
              methods=["finite_difference"])
    (r,) = run([c])
    assert r.verdict == "inconclusive" and r.outcome == "inconclusive"
    (kink,) = [c for c in r.discrepancy.worst if c.kind == "kink"]
    assert kink.element == (0,) and kink.slopes == (0.0, 1.0) and kink.verdict == "inconclusive"
    # torch's convention relu'(0) = 0
    assert "left slope 0, right slope 1, autograd chose 0.0" in r.reason


def test_a_declared_convention_turns_the_kink_into_a_pass():
    c = Expectation(name="relu", function="sum(relu(x))", inputs={"x": [0.0, 1.0]}, expected={"x": [0, 1]},
              convention={"x": [0, 1]}, methods=["finite_difference"])
    (r,) = run([c])
    assert r.verdict == "pass" and "declared convention" in r.reason


def test_a_convention_outside_the_slopes_does_not_pass():
    # 2 is not a subgradient of relu at 0 (it is not between 0 and 1)
    c = Expectation(name="relu", function="sum(relu(x))", inputs={"x": [0.0]}, expected={"x": [2]},
              convention={"x": [2]}, methods=["finite_difference"])
    assert run([c])[0].verdict == "inconclusive"


def test_a_kink_does_not_hide_a_real_error_elsewhere():
    c = Expectation(name="relu", function="sum(relu(x))", inputs={"x": [0.0, 1.0]}, expected={"x": [0, 2]},
              methods=["finite_difference"])
    assert run([c])[0].verdict == "fail"


def test_evidence_noisier_than_a_user_tolerance_is_inconclusive():
    # Ridders on sin(x)e^x carries an error bound of order 1e-13; a tolerance of 1e-17 cannot be decided
    c = Expectation(name="tight", function="sum(sin(x)*exp(x))", inputs={"x": [0.7]},
              expected={"x": "exp(x)*(sin(x) + cos(x))"}, methods=["finite_difference"],
              tolerance=Tolerance(1e-17, 0.0, why="deliberately tighter than the evidence can resolve"))
    (r,) = run([c])
    assert r.verdict == "inconclusive"
    assert "error bound exceeds the tolerance asked for" in r.discrepancy.worst[0].reason
    # the same tight tolerance still fails a real error far beyond the evidence's error bound
    wrong = Expectation(name="tight", function="sum(sin(x)*exp(x))", inputs={"x": [0.7]},
                  expected={"x": "exp(x)*(sin(x) + cos(x))*(1 + 1e-6)"}, methods=["finite_difference"],
                  tolerance=Tolerance(1e-17, 0.0, why="deliberately tighter than the evidence can resolve"))
    assert run([wrong])[0].verdict == "fail"


def test_precision_is_stated_for_float32_inputs():
    c = Expectation(name="f32", function="sum(x*x)", inputs={"x": InputSpec("x", [1.5], dtype="float32")},
              expected={"x": [3]}, methods=["finite_difference"])
    (r,) = run([c])
    assert r.evidence.precision == "float64"
    assert evidence_text(r).startswith("float64 evidence (eps 2.2e-16, about 15 significant digits)")


def test_a_function_that_refuses_float64_is_checked_in_its_own_dtype_and_says_so():
    def only_f32(x):
        if x.dtype != torch.float32:
            raise TypeError("this kernel is float32 only")
        return (x * x).sum()

    c = Expectation(name="f32 only", function=only_f32, inputs={"x": InputSpec("x", [1.5], dtype="float32")},
              expected={"x": [3]}, methods=["finite_difference"])
    (r,) = run([c])
    assert r.verdict == "pass" and "float32 only" in r.evidence.notes[0]
    assert evidence_text(r).startswith("float32 evidence")


@pytest.mark.parametrize("scheme", ["central", "complex_step", "forward", "backward", "ridders"])
def test_every_scheme_is_selectable_and_recorded(scheme):
    (r,) = run([Expectation(name="s", function="sum(x**3)", inputs={"x": [2.0]}, expected={"x": [12]},
                      methods=["finite_difference"], scheme=scheme)])
    assert r.verdict == "pass" and r.scheme == scheme and r.evidence.scheme == scheme


def test_taylor_test_passes_a_right_gradient_and_fails_a_wrong_one():
    right = Expectation(name="t", function="sum(sin(x)*x)", inputs={"x": X}, expected={"x": "sin(x) + x*cos(x)"},
                  methods=["taylor"])
    (r,) = run([right])
    assert r.verdict == "pass" and all(abs(o - 2) < 0.1 for o in r.evidence.details["orders"])
    wrong = Expectation(name="t", function="sum(sin(x)*x)", inputs={"x": X},
                        expected={"x": "(sin(x) + x*cos(x))*1.001"}, methods=["taylor"])
    (r,) = run([wrong])
    assert r.verdict == "fail" and "not O(h^2)" in r.reason
    assert all(o < 1.2 for o in r.evidence.details["orders"])
    assert r.details["order"] < 1.2


def test_ridders_bound_holds_the_rounding_of_the_values_at_its_steps():
    # x² at 1e-5: f is 1e-10 at the point and 1e-4 at x + 0.01, where Ridders' steps start; the bound took the
    # rounding measured at the point (2e-24) against an error of 1e-19, and the right expectation 2x FAILED
    for x in (1e-5, 1e-8):
        recs = run([Expectation(name="square", function="x*x", inputs={"x": x}, expected={"x": 2 * x})])
        assert {r.method: r.verdict for r in recs} == {"backward": "pass", "autograd.grad": "pass",
                                                       "finite_difference": "pass"}
    # and a ledger's expectation 1e-8 off (relative) still fails its finite_difference channel at an ordinary point
    recs = run([Expectation(name="square", function="x*x", inputs={"x": 3.0}, expected={"x": 6.0 * (1 + 1e-8)})])
    assert {r.method: r.verdict for r in recs}["finite_difference"] == "fail"


@pytest.mark.parametrize("offset, expected, verdict", [
    # d/dx (x0 + x1 + c) = (1, 1). At c = 1e10 the values round at 2e-6 and Ridders resolves about 4e-3 of the slope:
    # it confirms neither 1 nor 1.01 to the promise (inconclusive, where |f| / |x| = 5e9 as the size let both pass);
    # 0 is outside its allowance. At c = 1e20 float64 absorbs x (the estimate is 0): 1 is inconclusive, where it
    # passed; 0 agrees with the float64 function, which no step can move
    (1e10, 1.0, "inconclusive"), (1e10, 1.01, "inconclusive"), (1e10, 0.0, "fail"),
    (1e20, 1.0, "inconclusive"), (1e20, 0.0, "pass"),
    (0.0, 1.0, "pass"), (0.0, 1.01, "fail"),
])
def test_a_finite_difference_bound_is_judged_against_the_expectations_own_size(offset, expected, verdict):
    (r,) = run([Expectation("offset", f"sum(x) + {offset!r}", {"x": [1.0, 2.0]}, {"x": [expected, expected]},
                            methods=["finite_difference"])])
    assert r.verdict == verdict, r.reason


def test_a_zero_expectation_at_a_stationary_point_still_passes_on_the_functions_size():
    (r,) = run([Expectation("stationary", "sum((x - 1)**2) + 5", {"x": [1.0, 1.0]}, {"x": [0.0, 0.0]},
                            methods=["finite_difference"])])
    assert r.verdict == "pass", r.reason


@pytest.mark.parametrize("function, x, gradient", [
    # d/dx (x.x + c) = 2x; d/dx (c + |x|^2 / 2) = x: right expectations, one entry small beside the other, whose bound
    # against its own size (3.6e-6 against 1e-3) made the ledger inconclusive where ga.check passes; judged against the
    # input's largest expectation, they pass
    ("sum(x*x) + 1e8", [0.5, -0.3, 0.8], [1.0, -0.6, 1.6]),
    ("sum(x*x) + 1e8", [1.0, 0.01], [2.0, 0.02]),
    ("1e6 + 0.5*sum(x*x)", [1.0, 0.001], [1.0, 0.001]),
])
def test_a_small_expectation_beside_a_large_one_is_judged_against_the_largest(function, x, gradient):
    (r,) = run([Expectation("small", function, {"x": x}, {"x": gradient}, methods=["finite_difference"])])
    assert r.verdict == "pass", r.reason
