"""Evidence channels and verdicts. Expected numbers are hand-derived in each comment."""

import math

import pytest
import torch

from gradaudit import Expectation, ExpectedError, InputSpec, SpecError, Tolerance, plan, run
from gradaudit.tolerances import ToleranceUsed


def by_method(records):
    return {(r.method, r.input): r for r in records}


def test_three_channels_agree_on_x_squared():
    # d/dx x^2 = 2x = 6 at x = 3
    recs = by_method(run([Expectation(name="sq", function="x*x", inputs={"x": 3.0}, expected={"x": 6})]))
    assert recs["backward", "x"].observed_gradient == 6.0
    assert recs["backward", "x"].stored_or_returned == "stored"
    assert recs["autograd.grad", "x"].observed_gradient == 6.0
    assert recs["autograd.grad", "x"].stored_or_returned == "returned"
    fd = recs["finite_difference", "x"]
    assert fd.observed_gradient == pytest.approx(6.0, abs=1e-9)
    assert fd.evidence.precision == "float64"
    assert fd.scheme == "ridders" and fd.evidence.evaluations <= 12
    # the allowance is derived from the evidence: 10 x Ridders' error bound, plus rtol 4 eps
    assert fd.tolerance.evidence_factor == 10 and fd.tolerance.atol == 0 and fd.tolerance.rtol == 4 * 2.0**-52
    assert fd.evidence.error_bound < 1e-9
    assert all(r.verdict == "pass" for r in recs.values())


def test_central_scheme_records_its_step():
    # h = cbrt(eps) * |x| at x = 3; two evaluations per element
    (fd,) = run([Expectation(name="sq", function="x*x", inputs={"x": 3.0}, expected={"x": 6}, scheme="central",
                       methods=["finite_difference"])])
    assert fd.evidence.steps == (pytest.approx(6.055e-6 * 3, rel=1e-3),)
    assert fd.evidence.evaluations == 2 and fd.tolerance.atol == 1e-6


def test_hand_derived_graph_of_seed_004():
    # z = w*x + b = 7, L = (z - t)^2 = 9, dL/dz = 2(z - t) = -6
    # dL/dw = -6*x = -12, dL/db = -6, dL/dx = -6*w = -18
    c = Expectation(name="graph", function="(w*x + b - t)**2",
              inputs={"x": 2.0, "w": 3.0, "b": 1.0, "t": InputSpec("t", 10.0, requires_grad=False)},
              expected={"w": -12, "b": -6, "x": -18})
    recs = by_method(run([c]))
    for method in ("backward", "autograd.grad"):
        assert recs[method, "w"].observed_gradient == -12.0
        assert recs[method, "b"].observed_gradient == -6.0
        assert recs[method, "x"].observed_gradient == -18.0
    assert recs["finite_difference", "w"].observed_gradient == pytest.approx(-12.0, abs=1e-8)
    assert {r.verdict for r in recs.values()} == {"pass"}


def test_autograd_grad_returns_without_storing():
    (r,) = [r for r in run([Expectation(name="s", function="x*x", inputs={"x": 3.0}, expected=6,
                                  methods=["autograd.grad"])])]
    assert r.evidence.details["stored_after_return"] == {"x": False}


def test_autograd_grad_fails_where_the_function_stores_a_gradient_itself():
    # y = x^2 at 3: autograd.grad returns 2x = 6, the expectation; but the function calls backward on its own
    # output, so x.grad holds 6 after a call that must store nothing: the returned channel fails and says why
    def f(x):
        y = x * x
        y.backward(retain_graph=True)
        return y

    (r,) = run([Expectation(name="s", function=f, inputs={"x": 3.0}, expected=6, methods=["autograd.grad"])])
    assert r.observed_gradient == 6.0
    assert r.evidence.details["stored_after_return"] == {"x": True}
    assert r.verdict == "fail" and "stores nothing" in r.reason and "'x'.grad" in r.reason


def test_wrong_expectation_fails_with_the_discrepancy():
    # the true derivative of x^2 at 3 is 6; the check claims 7: abs 1, rel 1/7
    recs = run([Expectation(name="wrong", function="x*x", inputs={"x": 3.0}, expected={"x": 7})])
    for r in recs:
        assert r.verdict == "fail" and r.outcome == "failed"
        d = r.discrepancy
        assert d.mismatched == 1 and d.total == 1 and d.exact
        assert d.max_abs == pytest.approx(1.0, abs=1e-8)
        assert d.max_rel == pytest.approx(1 / 7, rel=1e-7)


def test_vector_sum_locates_the_wrong_element():
    # d/dx_i sum(x^2) = 2 x_i = [2, 4, 6]; element 1 is claimed wrong (5)
    recs = run([Expectation(name="v", function="sum(x*x)", inputs={"x": [1.0, 2.0, 3.0]},
                      expected={"x": [2, 5, 6]}, methods=["backward"])])
    d = recs[0].discrepancy
    assert d.mismatched == 1 and d.at.element == (1,)
    (c,) = d.worst
    assert (c.element, c.reference, c.observed, c.abs, c.rel, c.verdict) == ((1,), 5.0, 4.0, 1.0, 0.2, "fail")


def test_accumulation_protocol_stores_12():
    # two fresh passes each add 2x = 6
    c = Expectation(name="acc", function="x*x", inputs={"x": 3.0}, expected=12, methods=["backward"],
              protocol=["forward", "backward", "forward", "backward"])
    (r,) = run([c])
    assert r.observed_gradient == 12.0 and r.verdict == "pass"
    assert r.evidence.details["grad_before"] is None


@pytest.mark.parametrize("reset", ["reset_none", "reset_zero"])
def test_resets_give_6_again(reset):
    c = Expectation(name="r", function="x*x", inputs={"x": 3.0}, expected=6, methods=["backward"],
              protocol=["forward", "backward", reset, "forward", "backward"])
    assert run([c])[0].observed_gradient == 6.0


def test_expected_error_passes_only_when_it_occurs():
    second = ["forward", "backward", "backward"]
    ok = Expectation(name="twice", function="x*x", inputs={"x": 3.0}, methods=["backward"], protocol=second,
               expect_error=ExpectedError("RuntimeError", "second time"))
    (r,) = run([ok])
    assert r.verdict == "pass" and r.observed_error.type == "RuntimeError"
    retained = Expectation(name="retained", function="x*x", inputs={"x": 3.0}, methods=["backward"],
                     protocol=["forward", "backward_retain", "backward"],
                     expect_error=ExpectedError("RuntimeError", "second time"))
    (r,) = run([retained])
    assert r.verdict == "fail" and "nothing was raised" in r.reason
    wrong_type = Expectation(name="t", function="x*x", inputs={"x": 3.0}, methods=["backward"], protocol=second,
                       expect_error=ExpectedError("ValueError", "second time"))
    assert run([wrong_type])[0].verdict == "fail"


def test_a_function_that_raises_is_an_error_with_traceback():
    def boom(x):
        raise ZeroDivisionError("planted")

    recs = run([Expectation(name="boom", function=boom, inputs={"x": 3.0}, expected=6)])
    assert len(recs) == 3
    for r in recs:
        assert r.verdict == "error" and r.outcome == "errors"
        assert r.error.type == "ZeroDivisionError"
        assert "planted" in r.error.traceback and "Traceback" in r.error.traceback


def test_nan_output_is_an_error_naming_the_point():
    (r,) = run([Expectation(name="log", function="log(x)", inputs={"x": -1.0}, expected=-1, methods=["backward"])])
    assert r.verdict == "error"
    assert "output is nan at x=-1.0" in r.error.message


def test_non_scalar_output_says_how_to_reduce():
    # an expression is refused at load (it gives shape (2,)); a Python function only shows it when it runs
    with pytest.raises(SpecError, match=r"shape \(2,\).*sum\(\.\.\.\)"):
        Expectation(name="v", function="x*x", inputs={"x": [1.0, 2.0]}, expected="2*x", methods=["backward"])
    (r,) = run([Expectation(name="v", function=lambda x: x * x, inputs={"x": [1.0, 2.0]}, expected="2*x",
                            methods=["backward"])])
    assert r.verdict == "error" and "sum(...)" in r.error.message


def test_none_gradient():
    # x*0 still depends on x in autograd's graph; a function ignoring y gives y.grad None
    def f(x, y):
        return x * x

    ok = run([Expectation(name="n", function=f, inputs={"x": 3.0, "y": 1.0}, expected={"x": 6, "y": 0},
                    methods=["autograd.grad"])])
    assert by_method(ok)["autograd.grad", "y"].verdict == "pass"
    bad = run([Expectation(name="n", function=f, inputs={"x": 3.0, "y": 1.0}, expected={"x": 6, "y": 1},
                     methods=["backward"])])
    r = by_method(bad)["backward", "y"]
    assert r.verdict == "fail" and "no gradient (None)" in r.reason


def test_float32_input_keeps_its_dtype_and_evidence_is_float64():
    c = Expectation(name="f32", function="x*x", inputs={"x": InputSpec("x", 3.0, dtype="float32")}, expected=6)
    recs = by_method(run([c]))
    assert recs["backward", "x"].dtype == "float32"
    assert recs["backward", "x"].tolerance.rtol == 1.3e-6
    assert recs["finite_difference", "x"].evidence.precision == "float64"


def test_expected_failure_does_not_count_as_failure():
    c = Expectation(name="erratum", function="x*x", inputs={"x": 3.0}, expected=7, methods=["backward"],
              expect="fail", expect_why="kept to show a failed check intact")
    (r,) = run([c])
    assert r.verdict == "fail" and r.outcome == "expected failures"
    c2 = Expectation(name="fixed", function="x*x", inputs={"x": 3.0}, expected=6, methods=["backward"],
               expect="fail", expect_why="was wrong once")
    assert run([c2])[0].outcome == "unexpected passes"


def test_user_tolerance_with_why_is_used_and_recorded():
    # claimed 6.001 vs true 6: abs 1e-3, inside atol 1e-2
    c = Expectation(name="tol", function="x*x", inputs={"x": 3.0}, expected=6.001, methods=["backward"],
              tolerance=Tolerance(1e-2, 0.0, why="the claim is rounded to 4 significant digits"))
    (r,) = run([c])
    assert r.verdict == "pass"
    assert r.tolerance == ToleranceUsed(1e-2, 0.0, "the claim is rounded to 4 significant digits", False,
                                        "set by the check (see why)")


def test_plan_never_calls_the_function():
    calls = []

    def f(x):
        calls.append(1)
        return x * x

    recs = plan([Expectation(name="p", function=f, inputs={"x": 3.0}, expected=6)])
    assert calls == [] and len(recs) == 3
    assert all(r.to_dict()["observed_gradient"] is None and r.to_dict()["executed"] is False for r in recs)


def test_plan_and_run_expectations_are_byte_identical():
    from gradaudit.record import EXPECTATION_FIELDS, dumps

    c = Expectation(name="g", function="(w*x + b - 10)**2", inputs={"x": 2.0, "w": 3.0, "b": 1.0},
              expected={"w": -12, "b": -6, "x": -18}, derivation="chain rule")
    planned, ran = plan([c]), run([c])
    assert len(planned) == len(ran) == 9
    for p, r in zip(planned, ran):
        pd, rd = p.to_dict(), r.to_dict()
        assert dumps({k: pd[k] for k in EXPECTATION_FIELDS}) == dumps({k: rd[k] for k in EXPECTATION_FIELDS})
        assert pd["expectation_sha256"] == rd["expectation_sha256"]
        assert pd["executed"] is False and rd["executed"] is True


def test_finite_difference_on_a_smooth_function_is_accurate():
    # d/dx sin(x)e^x = e^x (sin x + cos x)
    x = 0.7
    exact = math.exp(x) * (math.sin(x) + math.cos(x))
    (r,) = run([Expectation(name="s", function="sin(x)*exp(x)", inputs={"x": x}, expected=exact,
                      methods=["finite_difference"])])
    assert r.verdict == "pass"
    assert abs(r.observed_gradient - exact) < 1e-9


def test_fresh_leaves_for_every_channel():
    seen = []

    def f(x):
        seen.append(x)
        return (x * x).sum()

    run([Expectation(name="f", function=f, inputs={"x": [1.0, 2.0]}, expected="2*x",
                     methods=["backward", "autograd.grad"])])
    assert seen[0] is not seen[1]
    assert torch.equal(seen[0].detach(), seen[1].detach())
