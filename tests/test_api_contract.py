"""ga.check's contract: one verdict whatever the mode, a visible tolerance, honest counts, errors as
records, misuse refused before any evaluation, deterministic results, names a user can paste.

Each planted Function's true derivative is in its comment; the backward carries the bug.
"""

import pytest
import torch

import gradaudit as ga

F64 = torch.float64
MODES = ("full", "directional", "auto")


def leaf(*shape, seed=0, low=0.3):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(*shape, generator=g, dtype=F64) + low).requires_grad_()


class Square(torch.autograd.Function):
    """y = x^2, dy/dx = 2x."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


class OffBy1e8(Square):
    """y = x^2; the backward is 2x (1 + 1e-8): a relative error of 1e-8."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g * (1 + 1e-8)


class ThroughFloat32(Square):
    """y = x^2; the backward rounds 2x g through float32 (a relative error up to 6e-8)."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return (2 * x * g).float().double()


@pytest.mark.parametrize("mode", MODES)
def test_a_1e_8_relative_error_and_a_float32_rounding_fail_in_every_mode(mode):
    x = leaf(50)
    assert ga.check(Square.apply, (x,), mode=mode).verdict == "pass"
    assert ga.check(OffBy1e8.apply, (x,), mode=mode).verdict == "fail"
    assert ga.check(ThroughFloat32.apply, (x,), mode=mode).verdict == "fail"


def test_the_default_tolerance_is_recorded_and_printed_with_its_basis():
    res = ga.check(OffBy1e8.apply, (leaf(4),))
    (r,) = res.records
    tol = r.tolerance
    assert (tol.atol, tol.rtol, tol.default, tol.evidence_factor) == (0, 1e-10, True, 10)
    assert "tolerance:  atol 0, rtol 1e-10, plus 10 × the evidence's error bound (default: float64 autograd" in str(res)


def test_a_tolerance_can_be_set_seen_and_must_say_why():
    class Off1e4(Square):  # y = x^2; the backward is 2x (1 + 1e-4)
        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g * (1 + 1e-4)

    loose = ga.Tolerance(1e-6, 1e-3, why="a float32-accumulating kernel is accurate to about 1e-4")
    for mode in MODES:
        assert ga.check(Off1e4.apply, (leaf(5),), mode=mode).verdict == "fail"
        res = ga.check(Off1e4.apply, (leaf(5),), mode=mode, tolerance=loose)
        assert res.verdict == "pass", res
        assert res.records[0].tolerance.why == loose.why and res.records[0].tolerance.default is False
    text = str(ga.check(OffBy1e8.apply, (leaf(5),), tolerance=ga.Tolerance(0, 1e-12, why="tight on purpose")))
    assert "tolerance:  atol 0, rtol 1e-12, plus 10 × the evidence's error bound (changed: tight on purpose)" in text
    with pytest.raises(ga.SpecError, match="has no 'why'") as info:
        ga.check(Square.apply, (leaf(3),), tolerance=ga.Tolerance(1e-3, 1e-3))
    assert info.value.field == "tolerance.why"
    assert ga.check(Square.apply, (leaf(3),), tolerance=ga.Tolerance(0, 1e-10)).ok  # the default needs no why


# -- misuse: SpecError naming the argument, before anything is evaluated ---------------------------

CALLS = []


def counted(x):
    CALLS.append(1)
    return x * x


@pytest.mark.parametrize("kwargs, field", [
    ({"mode": "fast"}, "mode"),
    ({"tolerance": 1e-6}, "tolerance"),
    ({"tolerance": (1e-6, 1e-6)}, "tolerance"),
    ({"seed": 1.5}, "seed"),
    ({"seed": True}, "seed"),
    ({"seed": -1}, "seed"),
    ({"order": 3}, "order"),
    ({"nondet_tol": 1e-3}, "nondet_tol"),
    ({"nondet_tol": ga.Tolerance(1e-3, 0.0)}, "nondet_tol"),
    ({"forward_ad": "yes"}, "forward_ad"),
    ({"names": ["a", "b"]}, "names"),
    ({"expected": [[1.0, 2.0]]}, "expected"),
    ({"expected": [float("nan")]}, "expected"),
])
def test_misuse_is_a_spec_error_naming_the_argument_before_any_evaluation(kwargs, field):
    CALLS.clear()
    with pytest.raises(ga.SpecError) as info:
        ga.check(counted, (torch.ones(3, dtype=F64, requires_grad=True),), **kwargs)
    assert info.value.field == field, str(info.value)
    assert field in str(info.value) or field.replace("_", " ") in str(info.value)
    assert len(CALLS) <= 1  # at most the forward that learns the output's shape (expected= needs it)


def test_a_function_that_is_not_callable_or_returns_no_tensor_is_a_spec_error():
    with pytest.raises(ga.SpecError, match="callable") as info:
        ga.check("sin", (leaf(3),))
    assert info.value.field == "fn"
    with pytest.raises(ga.SpecError, match="returned float") as info:  # noqa: PT012
        ga.check(lambda x: 3.0, (leaf(3),))
    assert info.value.field == "fn"
    with pytest.raises(ga.SpecError, match="nn.Module"):
        ga.check_module(torch.sin, (leaf(3),))


# -- errors are records ----------------------------------------------------------------------------

class RaisesInBackward(Square):
    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("planted failure in backward")


class WrongShape(Square):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return (2 * x * g)[:-1]  # one element short


def boom(x):
    raise ZeroDivisionError("planted failure in forward")


@pytest.mark.parametrize("fn, where, kind, text", [
    (boom, "the function", "ZeroDivisionError", "planted failure in forward"),
    (RaisesInBackward.apply, "the backward", "RuntimeError", "planted failure in backward"),
    (WrongShape.apply, "the backward", "RuntimeError", "invalid gradient"),
])
@pytest.mark.parametrize("mode", ("full", "directional"))
def test_an_exception_from_the_function_or_its_backward_is_the_error_verdict(fn, where, kind, text, mode):
    res = ga.check(fn, (leaf(4),), mode=mode)
    assert res.verdict == "error" and not res.ok
    (r,) = res.records
    assert r.verdict == "error" and r.outcome == "errors" and r.error.where == where
    assert r.error.type == kind and text in r.error.message and "Traceback" in r.error.traceback
    assert r.rerun and "ga.check(" in r.rerun
    report = str(res)
    assert "ERROR" in report and kind in report and "re-run: ga.check(" in report


# -- honest counts ---------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_a_correct_relu_at_30_zeros_is_inconclusive_and_every_kink_is_counted(mode):
    # relu'(0): left slope 0, right slope 1; 30 zeros and 10 positive elements
    x = torch.cat([torch.zeros(30, dtype=F64), torch.linspace(1, 2, 10, dtype=F64)]).requires_grad_()
    res = ga.check(torch.relu, (x,), mode=mode)
    assert res.verdict == "inconclusive", res
    kinks = [m for m in res.mismatches if m.kind == "kink"]
    assert len(kinks) == res.records[0].discrepancy.inconclusive == 30
    assert {m.element for m in kinks} == {(i,) for i in range(30)}


class ReluWrongAt35(torch.autograd.Function):
    """y = relu(x): dy/dx = 1 for x > 0; the backward doubles it at element 35."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.relu(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        out = g * (x > 0).to(g.dtype)
        out[35] = 2 * out[35]
        return out


@pytest.mark.parametrize("mode", MODES)
def test_a_real_error_beside_30_kinks_still_fails_and_is_located(mode):
    x = torch.cat([torch.zeros(30, dtype=F64), torch.linspace(1, 2, 10, dtype=F64)]).requires_grad_()
    res = ga.check(ReluWrongAt35.apply, (x,), mode=mode)
    assert res.verdict == "fail", res
    failing = [m for m in res.mismatches if m.verdict == "fail"]
    assert {m.element for m in failing} == {(35,)}
    assert sum(m.kind == "kink" for m in res.mismatches) == 30


class SinWrongAt(torch.autograd.Function):
    """sin, whose backward is 1e-6 too large at elements 1, 2, 5 and 6 of 8."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        bad = torch.tensor([0, 1, 1, 0, 0, 1, 1, 0], dtype=F64)
        return g * x.cos() * (1 + 1e-6 * bad)


def test_bisection_splits_parts_that_clearly_disagree_and_judges_only_elements_whole():
    """Every half and quarter of the 8 elements holds a wrong one. A part whose quick stage disagrees by more
    than its truncation explains is split at once (4 evaluations), and only elements are judged whole, with
    Ridders and the slopes: the same 4 elements are found as when every part was judged whole, for the whole
    (at most 22 evaluations), 6 parts x 4, 4 right elements x 4 and 4 wrong ones x at most 22: at most 150
    evaluations, where judging the 6 parts whole cost at least 6 x 12 more (258). Each failure is then reproduced
    from 3/4 of Ridders' step before it stands (directional._reproduced: 8 evaluations, the whole and the 4 wrong
    elements): at most 190; and the outputs' rounding is measured once for the failures (directional._measured: 4,
    counted since the sixteenth session): at most 194; and their rounding at moves from about 1e-9 to 1e-6, once for
    the failures (evaluate.measure_stairs over the whole input: 20 points, 4 nodes on 5 scales; it finds none, so no
    projection measures its own): at most 214."""
    x = torch.linspace(-1.5, 2.0, 8, dtype=F64, requires_grad=True)
    res = ga.check(SinWrongAt.apply, (x,), mode="directional")
    assert res.verdict == "fail", res
    assert sorted(m.element for m in res.mismatches) == [(1,), (2,), (5,), (6,)]
    assert res.records[0].discrepancy.mismatched == 4 and res.records[0].discrepancy.exact
    assert res.info["evaluations"] <= 214


class ReciprocalWrongAt(torch.autograd.Function):
    """1 / x, whose backward is 1e-6 too large at element 341."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return 1 / x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        wrong = torch.ones_like(x)
        wrong[341] += 1e-6
        return -g / x**2 * wrong


def test_bisection_judges_parts_near_a_pole_whole_and_stops_where_they_pass():
    """1 / x on 1,024 elements between 1e-4 and 1e-2: every part holds elements whose quick steps reach towards
    the pole, so no quick stage accepts one. Such a part (its disagreement within what truncation explains) is
    judged whole, and a pass ends its descent: the one wrong element is located in about 600 evaluations
    (log2(1024) levels of two parts). Splitting every part the quick stages did not accept judged each of the
    1,024 elements near the pole, 18,489 evaluations (a reviewer's measurement)."""
    x = torch.logspace(-4, -2, 1024, dtype=F64).requires_grad_()
    res = ga.check(ReciprocalWrongAt.apply, (x,), mode="directional")
    assert res.verdict == "fail", res
    assert [m.element for m in res.mismatches] == [(341,)]
    assert res.info["evaluations"] < 1500


class EveryElementWrong(Square):
    @staticmethod
    def backward(ctx, g):  # y = x^2: dy/dx = 2x; the backward returns 3x everywhere
        (x,) = ctx.saved_tensors
        return 3 * x * g


def test_counts_are_exact_in_full_mode_and_say_at_least_where_localization_stopped():
    full = ga.check(EveryElementWrong.apply, (leaf(200),), mode="full")
    d = full.records[0].discrepancy
    assert d.exact and d.mismatched == 200 and d.total == 200 * 200  # the diagonal; zeros elsewhere agree
    assert len(full.mismatches) == 200
    text = str(full)
    assert "Mismatched elements: 200 / 40000 (0.5%)" in text and "… 195 more: see result.mismatches" in text
    directional = ga.check(EveryElementWrong.apply, (leaf(200),), mode="directional")
    d = directional.records[0].discrepancy
    assert not d.exact and d.mismatched == 32 and "localization stopped after 32" in d.why_inexact
    assert "Mismatched elements: at least 32 / 200: localization stopped after 32 elements" in str(directional)


def test_percentages_read_as_people_write_them():
    x = leaf(1)
    res = ga.check(EveryElementWrong.apply, (x,), mode="full")
    assert "Mismatched elements: 1 / 1 (100%)" in str(res) and "1e+02%" not in str(res)


def test_a_relative_difference_against_zero_is_not_printed_as_a_huge_number():
    class NonZeroWhereZero(torch.autograd.Function):  # y = 5 (constant): dy/dx = 0; the backward gives 1
        @staticmethod
        def forward(ctx, x):
            return x * 0 + 5

        @staticmethod
        def backward(ctx, g):
            return g

    text = str(ga.check(NonZeroWhereZero.apply, (leaf(3),), mode="full"))
    assert "Greatest relative difference: — " in text and "e+30" not in text


# -- determinism, names, re-run lines --------------------------------------------------------------

def test_the_same_call_gives_the_same_info_and_report():
    x = leaf(40)

    def f(x):
        return torch.sin(x) * x.sum()

    first = ga.check(f, (x,), seed=3)
    second = ga.check(f, (x,), seed=3)
    assert first.info == second.info and str(first) == str(second)
    assert not any("elapsed" in k or "time" in k for k in first.info)


def test_names_are_the_users_and_the_re_run_line_can_be_pasted():
    x = torch.tensor([0.5, 1.5], dtype=F64, requires_grad=True)
    res = ga.check(torch.sin, (x,), mode="directional", seed=2)
    assert res.name == "torch.sin" and res.records[0].function_name == "torch.sin"
    again = eval(res.rerun.split("  #")[0], {"ga": ga, "torch": torch})  # noqa: S307 - the line we printed
    assert again.verdict == res.verdict and again.mode == "directional"
    wrong = ga.check(EveryElementWrong.apply, (x,))
    assert wrong.name == "EveryElementWrong.apply" and "class EveryElementWrong" in wrong.records[0].function
    assert "test_api_contract.EveryElementWrong.apply, (torch.tensor([0.5, 1.5], dtype=torch.float64" in wrong.rerun


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_a_small_complex_input_is_written_out_in_the_re_run_line(dtype):
    """A complex input is written as torch.complex(real, imag), exactly (its parts' own literals; the sign
    of a zero imaginary part kept): the line used to say "inputs: the tensors checked" instead."""
    z = torch.complex(torch.tensor([1.0, 0.1]), torch.tensor([-0.0, 0.2])).to(dtype).requires_grad_()
    res = ga.check(torch.abs, (z,))
    assert res.verdict == "pass" and "the tensors checked" not in res.rerun and "torch.complex(" in res.rerun
    again = eval(res.rerun.split("  #")[0], {"ga": ga, "torch": torch})  # noqa: S307 - the line we printed
    assert again.verdict == "pass"
    literal = res.rerun.split("(torch.abs, (", 1)[1].rsplit(",))", 1)[0]
    pasted = eval(literal, {"torch": torch})  # noqa: S307
    assert pasted.dtype == dtype and pasted.requires_grad
    assert torch.equal(torch.view_as_real(pasted.detach()), torch.view_as_real(z.detach()))
    assert str(torch.view_as_real(pasted.detach())[0, 1].item()) == "-0.0"


def test_assert_ok_shows_the_readable_report():
    res = ga.check(EveryElementWrong.apply, (leaf(3),))
    plain = compile("assert res.ok, res", "<user code>", "exec")  # Python's own assert, as in a script
    with pytest.raises(AssertionError) as info:
        exec(plain, {"res": res})  # noqa: S102
    assert str(info.value) == str(res) and "Mismatched elements: 3 / 9" in str(info.value)
    with pytest.raises(AssertionError) as info:  # pytest shortens long messages; the header comes first
        assert res.ok, res
    assert str(info.value).startswith("gradaudit.check EveryElementWrong.apply: FAIL")


def test_a_check_module_failure_names_the_parameter_and_re_runs_as_check_module():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2).double()
    res = ga.check_module(model, (torch.randn(4, 3, dtype=F64),), loss_fn=lambda o: o.square().sum())
    assert res.ok and res.name == "Linear parameters"
    assert res.rerun.startswith("ga.check_module(model, inputs, loss_fn")
    assert {r.input for r in res.records} == {"weight", "bias"}
