"""Evidence channels and verdicts. Expected numbers are hand-derived in each comment."""

import math

import pytest
import torch

from gradaudit import Check, ExpectedError, InputSpec, Tolerance, plan, run


def by_method(records):
    return {(r.get("method"), r.get("input")): r for r in records}


def test_three_channels_agree_on_x_squared():
    # d/dx x^2 = 2x = 6 at x = 3
    recs = by_method(run([Check(name="sq", function="x*x", inputs={"x": 3.0}, expected={"x": 6})]))
    assert recs["backward", "x"].get("observed_gradient") == 6.0
    assert recs["backward", "x"].get("stored_or_returned") == "stored"
    assert recs["autograd.grad", "x"].get("observed_gradient") == 6.0
    assert recs["autograd.grad", "x"].get("stored_or_returned") == "returned"
    fd = recs["finite_difference", "x"]
    assert fd.get("observed_gradient") == pytest.approx(6.0, abs=1e-9)
    assert fd.get("evidence")["dtype"] == "float64"
    assert fd.get("scheme") == "ridders" and fd.get("evidence")["evaluations"] <= 12
    assert fd.get("tolerance")["derived"] is True and fd.get("tolerance_used")["atol"] < 1e-9
    assert all(r.verdict == "pass" for r in recs.values())


def test_central_scheme_records_its_step():
    # h = cbrt(eps) * |x| at x = 3; two evaluations per element
    (fd,) = run([Check(name="sq", function="x*x", inputs={"x": 3.0}, expected={"x": 6}, scheme="central",
                       methods=["finite_difference"])])
    assert fd.get("evidence")["step"] == [pytest.approx(6.055e-6 * 3, rel=1e-3)]
    assert fd.get("evidence")["evaluations"] == 2 and fd.get("tolerance")["atol"] == 1e-6


def test_hand_derived_graph_of_seed_004():
    # z = w*x + b = 7, L = (z - t)^2 = 9, dL/dz = 2(z - t) = -6
    # dL/dw = -6*x = -12, dL/db = -6, dL/dx = -6*w = -18
    c = Check(name="graph", function="(w*x + b - t)**2",
              inputs={"x": 2.0, "w": 3.0, "b": 1.0, "t": InputSpec("t", 10.0, requires_grad=False)},
              expected={"w": -12, "b": -6, "x": -18})
    recs = by_method(run([c]))
    for method in ("backward", "autograd.grad"):
        assert recs[method, "w"].get("observed_gradient") == -12.0
        assert recs[method, "b"].get("observed_gradient") == -6.0
        assert recs[method, "x"].get("observed_gradient") == -18.0
    assert recs["finite_difference", "w"].get("observed_gradient") == pytest.approx(-12.0, abs=1e-8)
    assert {r.verdict for r in recs.values()} == {"pass"}


def test_autograd_grad_returns_without_storing():
    (r,) = [r for r in run([Check(name="s", function="x*x", inputs={"x": 3.0}, expected=6,
                                  methods=["autograd.grad"])])]
    assert r.get("stored_after_return") == {"x": False}


def test_wrong_expectation_fails_with_the_discrepancy():
    # the true derivative of x^2 at 3 is 6; the check claims 7: abs 1, rel 1/7
    recs = run([Check(name="wrong", function="x*x", inputs={"x": 3.0}, expected={"x": 7})])
    for r in recs:
        assert r.verdict == "fail" and r.outcome == "failed"
        d = r.get("discrepancy")
        assert d["mismatched"] == 1 and d["total"] == 1
        assert d["max_abs"] == pytest.approx(1.0, abs=1e-8)
        assert d["max_rel"] == pytest.approx(1 / 7, rel=1e-7)


def test_vector_sum_locates_the_wrong_element():
    # d/dx_i sum(x^2) = 2 x_i = [2, 4, 6]; element 1 is claimed wrong (5)
    recs = run([Check(name="v", function="sum(x*x)", inputs={"x": [1.0, 2.0, 3.0]},
                      expected={"x": [2, 5, 6]}, methods=["backward"])])
    d = recs[0].get("discrepancy")
    assert d["mismatched"] == 1 and d["index"] == [1]
    assert d["worst"] == [{"index": [1], "expected": 5.0, "observed": 4.0, "abs": 1.0, "rel": 0.2}]


def test_accumulation_protocol_stores_12():
    # two fresh passes each add 2x = 6
    c = Check(name="acc", function="x*x", inputs={"x": 3.0}, expected=12, methods=["backward"],
              protocol=["forward", "backward", "forward", "backward"])
    (r,) = run([c])
    assert r.get("observed_gradient") == 12.0 and r.verdict == "pass"
    assert r.get("grad_before") is None


@pytest.mark.parametrize("reset", ["reset_none", "reset_zero"])
def test_resets_give_6_again(reset):
    c = Check(name="r", function="x*x", inputs={"x": 3.0}, expected=6, methods=["backward"],
              protocol=["forward", "backward", reset, "forward", "backward"])
    assert run([c])[0].get("observed_gradient") == 6.0


def test_expected_error_passes_only_when_it_occurs():
    second = ["forward", "backward", "backward"]
    ok = Check(name="twice", function="x*x", inputs={"x": 3.0}, methods=["backward"], protocol=second,
               expect_error=ExpectedError("RuntimeError", "second time"))
    (r,) = run([ok])
    assert r.verdict == "pass" and r.get("observed_error")["type"] == "RuntimeError"
    retained = Check(name="retained", function="x*x", inputs={"x": 3.0}, methods=["backward"],
                     protocol=["forward", "backward_retain", "backward"],
                     expect_error=ExpectedError("RuntimeError", "second time"))
    (r,) = run([retained])
    assert r.verdict == "fail" and "nothing was raised" in r.get("note")
    wrong_type = Check(name="t", function="x*x", inputs={"x": 3.0}, methods=["backward"], protocol=second,
                       expect_error=ExpectedError("ValueError", "second time"))
    assert run([wrong_type])[0].verdict == "fail"


def test_a_function_that_raises_is_an_error_with_traceback():
    def boom(x):
        raise ZeroDivisionError("planted")

    recs = run([Check(name="boom", function=boom, inputs={"x": 3.0}, expected=6)])
    assert len(recs) == 3
    for r in recs:
        assert r.verdict == "error" and r.outcome == "errors"
        assert r.get("error")["type"] == "ZeroDivisionError"
        assert "planted" in r.get("error")["traceback"] and "Traceback" in r.get("error")["traceback"]


def test_nan_output_is_an_error_naming_the_point():
    (r,) = run([Check(name="log", function="log(x)", inputs={"x": -1.0}, expected=-1, methods=["backward"])])
    assert r.verdict == "error"
    assert "output is nan at x=-1.0" in r.get("error")["message"]


def test_non_scalar_output_says_how_to_reduce():
    (r,) = run([Check(name="v", function="x*x", inputs={"x": [1.0, 2.0]}, expected="2*x", methods=["backward"])])
    assert r.verdict == "error" and "sum(...)" in r.get("error")["message"]


def test_none_gradient():
    # x*0 still depends on x in autograd's graph; a function ignoring y gives y.grad None
    def f(x, y):
        return x * x

    ok = run([Check(name="n", function=f, inputs={"x": 3.0, "y": 1.0}, expected={"x": 6, "y": 0},
                    methods=["autograd.grad"])])
    assert by_method(ok)["autograd.grad", "y"].verdict == "pass"
    bad = run([Check(name="n", function=f, inputs={"x": 3.0, "y": 1.0}, expected={"x": 6, "y": 1},
                     methods=["backward"])])
    r = by_method(bad)["backward", "y"]
    assert r.verdict == "fail" and "no gradient (None)" in r.get("note")


def test_float32_input_keeps_its_dtype_and_evidence_is_float64():
    c = Check(name="f32", function="x*x", inputs={"x": InputSpec("x", 3.0, dtype="float32")}, expected=6)
    recs = by_method(run([c]))
    assert recs["backward", "x"].get("dtype") == "float32"
    assert recs["backward", "x"].get("tolerance")["rtol"] == 1.3e-6
    assert recs["finite_difference", "x"].get("evidence")["dtype"] == "float64"


def test_expected_failure_does_not_count_as_failure():
    c = Check(name="erratum", function="x*x", inputs={"x": 3.0}, expected=7, methods=["backward"],
              expect="fail", expect_why="kept to show a failed check intact")
    (r,) = run([c])
    assert r.verdict == "fail" and r.outcome == "expected failures"
    c2 = Check(name="fixed", function="x*x", inputs={"x": 3.0}, expected=6, methods=["backward"],
               expect="fail", expect_why="was wrong once")
    assert run([c2])[0].outcome == "unexpected passes"


def test_user_tolerance_with_why_is_used_and_recorded():
    # claimed 6.001 vs true 6: abs 1e-3, inside atol 1e-2
    c = Check(name="tol", function="x*x", inputs={"x": 3.0}, expected=6.001, methods=["backward"],
              tolerance=Tolerance(1e-2, 0.0, why="the claim is rounded to 4 significant digits"))
    (r,) = run([c])
    assert r.verdict == "pass"
    assert r.get("tolerance") == {"atol": 1e-2, "rtol": 0.0, "why": "the claim is rounded to 4 significant digits",
                                  "default": False, "basis": "set by the check (see why)"}


def test_plan_never_calls_the_function():
    calls = []

    def f(x):
        calls.append(1)
        return x * x

    recs = plan([Check(name="p", function=f, inputs={"x": 3.0}, expected=6)])
    assert calls == [] and len(recs) == 3
    assert all(r.to_dict()["observed_gradient"] is None and r.to_dict()["executed"] is False for r in recs)


def test_plan_and_run_expectations_are_byte_identical():
    from gradaudit.record import EXPECTATION_KEYS, dumps

    c = Check(name="g", function="(w*x + b - 10)**2", inputs={"x": 2.0, "w": 3.0, "b": 1.0},
              expected={"w": -12, "b": -6, "x": -18}, derivation="chain rule")
    planned, ran = plan([c]), run([c])
    assert len(planned) == len(ran) == 9
    for p, r in zip(planned, ran):
        pd, rd = p.to_dict(), r.to_dict()
        assert dumps({k: pd[k] for k in EXPECTATION_KEYS}) == dumps({k: rd[k] for k in EXPECTATION_KEYS})
        assert pd["expectation_sha256"] == rd["expectation_sha256"]
        assert pd["executed"] is False and rd["executed"] is True


def test_finite_difference_on_a_smooth_function_is_accurate():
    # d/dx sin(x)e^x = e^x (sin x + cos x)
    x = 0.7
    exact = math.exp(x) * (math.sin(x) + math.cos(x))
    (r,) = run([Check(name="s", function="sin(x)*exp(x)", inputs={"x": x}, expected=exact,
                      methods=["finite_difference"])])
    assert r.verdict == "pass"
    assert abs(r.get("observed_gradient") - exact) < 1e-9


def test_fresh_leaves_for_every_channel():
    seen = []

    def f(x):
        seen.append(x)
        return (x * x).sum()

    run([Check(name="f", function=f, inputs={"x": [1.0, 2.0]}, expected="2*x", methods=["backward", "autograd.grad"])])
    assert seen[0] is not seen[1]
    assert torch.equal(seen[0].detach(), seen[1].detach())
