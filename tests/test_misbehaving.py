"""User functions and backwards that misbehave (a fresh-eyes audit, 2026-12-06): each gets a verdict that says what
happened, never a bare traceback from gradaudit's own code, and the caller's world stays as it was."""

from __future__ import annotations

import pytest
import torch

import gradaudit as ga

F64 = torch.float64
MODES = ("full", "directional")


def _x() -> torch.Tensor:
    return torch.tensor([0.3, 0.5, 0.9], dtype=F64, requires_grad=True)


class BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str broke")


class NonStr(Exception):
    def __str__(self):  # type: ignore[no-untyped-def]
        return 42


class RaisingBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        raise BadStr()


@pytest.mark.parametrize("mode", MODES)
def test_an_exception_whose_str_fails_is_an_error_verdict_not_a_traceback_of_gradauditss(mode):
    def forward(x: torch.Tensor) -> torch.Tensor:
        raise NonStr()

    for fn in (forward, RaisingBackward.apply):
        res = ga.check(fn, (_x(),), mode=mode)
        assert res.verdict == "error"
        assert res.records[0].error.message == "<exception str() failed>"  # as Python's own traceback says it
        assert "<exception str() failed>" in str(res)


@pytest.mark.parametrize("mode", MODES)
def test_a_function_that_changes_the_default_device_is_checked_and_the_callers_default_device_kept(mode):
    def f(x: torch.Tensor) -> torch.Tensor:
        y = x.sin() * 2
        torch.set_default_device("meta")  # (model-building code left it; "cuda" on a machine with a GPU)
        return y

    try:
        assert ga.check(f, (_x(),), mode=mode).verdict == "pass"  # sin's backward, times 2: autograd's own
        assert torch.get_default_device() == torch.device("cpu")
    finally:
        torch.set_default_device(None)


@pytest.mark.parametrize("mode", MODES)
def test_a_function_that_rebinds_its_inputs_data_is_said_to_change_its_input(mode):
    def rebinds(x: torch.Tensor) -> torch.Tensor:
        x.data = x.data * 2
        return x.sin()

    x = _x()
    res = ga.check(rebinds, (x,), mode=mode)
    assert res.verdict == "error" and res.records[0].error.type == "InputMutated", res.report()
    assert x.detach().tolist() == [0.3, 0.5, 0.9]


@pytest.mark.parametrize("mode", MODES)
def test_an_exception_at_a_point_the_check_stepped_to_says_so_and_how_far(mode):
    # log's domain ends 1e-4 below the point: the steps of full mode's Ridders (1e-2) and of the directional
    # confirmation leave it; returning NaN there instead lets them shrink, and the same function passes
    def f(x: torch.Tensor) -> torch.Tensor:
        if bool((x <= 0).any()):
            raise ValueError("domain: x must be positive")
        return x.log()

    x = torch.tensor([1e-4, 1.0, 2.0], dtype=F64, requires_grad=True)
    res = ga.check(f, (x,), mode=mode)
    assert res.verdict == "error"
    reason = res.records[0].reason
    assert reason.startswith("the function, at a point the check stepped to ('x' by up to ") and "NaN" in reason
    assert ga.check(lambda t: torch.where(t > 0, t, torch.nan).log(), (x,), mode=mode).verdict == "pass"


def test_an_error_raised_once_with_gradients_off_and_not_again_is_an_error_not_a_pass():
    # the second call (the determinism check, gradients off) raised once: the check retried with gradients on,
    # PASSED, and said the function fails with gradients off
    calls = [0]

    def flaky(x: torch.Tensor) -> torch.Tensor:
        calls[0] += 1
        if calls[0] == 2:
            raise ConnectionError("the network hiccupped")
        return x.sin()

    res = ga.check(flaky, (_x(),))
    assert res.verdict == "error" and res.records[0].error.type == "ConnectionError"
    assert not any("gradients off" in n for n in res.info.get("notes", []))


class NoJvp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos()


class BrokenJvp(NoJvp):  # the same sin, with a jvp that raises
    @staticmethod
    def jvp(ctx, t):
        raise ValueError("my jvp is broken")


@pytest.mark.parametrize("mode", MODES)
def test_a_jvp_that_raises_is_an_error_with_its_traceback_and_a_missing_one_a_failure(mode):
    res = ga.check(BrokenJvp.apply, (_x(),), forward_ad=True, mode=mode)
    error = res.records[0].error
    assert res.verdict == "error" and error.type == "ValueError" and "in jvp" in error.traceback
    assert res.records[0].reason.startswith("forward-mode AD")
    res = ga.check(NoJvp.apply, (_x(),), forward_ad=True, mode=mode)  # no formula: that input's jvp fails
    assert res.verdict == "fail"
    assert [r.verdict for r in res.records if r.method == "vjp"] == ["pass"]


def test_a_name_holding_a_newline_cannot_forge_a_line_of_the_report():
    class Off(torch.autograd.Function):  # y's and z's gradients 10% off
        @staticmethod
        def forward(ctx, x, y, z):
            return x.sin() + y.sin() + z.sin()

        @staticmethod
        def backward(ctx, g):
            return g, 0.9 * g, 0.9 * g

    args = tuple(torch.tensor([0.1, 0.2], dtype=F64, requires_grad=True) for _ in range(3))
    res = ga.check(Off.apply, args, names=["x' (vjp): PASS\ninput 'y", "y", "z"])
    text = str(res)
    assert res.verdict == "fail"
    assert "\\n" in text
    heads = [line for line in text.splitlines() if line.startswith("input ")]  # one line per record, no more
    assert len(heads) == 3 and heads[0].startswith("input 'x' (vjp): PASS\\ninput 'y' (vjp): FAIL")


def test_a_failing_projection_in_full_mode_shows_its_numbers():
    # a backward wrong wherever grad_output has a negative entry: full mode's one-hot rows agree with every entry,
    # its projection does not, and the report said so without a number
    class Signed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.cos() * (2 if bool((g < 0).any()) else 1)

    res = ga.check(Signed.apply, (_x(),), mode="full")
    assert res.verdict == "fail"
    rows = [line for line in str(res).splitlines() if "| fail (projection" in line]
    assert len(rows) == 1
    # the row's numeric and autograd values: autograd's is twice the numeric (the backward doubled it)
    numeric, autograd = (float(v) for v in rows[0].split("|")[1:3])
    assert autograd == pytest.approx(2 * numeric, rel=1e-5)


def test_an_error_beside_a_non_finite_input_element_is_placed_where_it_was_raised():
    # NaN - NaN read as a step: every error, even at the point itself, said "at a point the check stepped to ('x' by
    # up to nan)" (a review)
    calls = [0]

    def raises_second(x: torch.Tensor) -> torch.Tensor:
        calls[0] += 1
        if calls[0] == 2:  # (the determinism call, at the point itself)
            raise ValueError("at the point")
        return x.sin()

    x = torch.tensor([0.3, float("nan"), 0.9], dtype=F64, requires_grad=True)
    res = ga.check(raises_second, (x,))
    assert res.verdict == "error" and res.records[0].reason == "the function raised ValueError"


def test_a_rebind_to_the_same_values_passes_and_one_to_another_dtype_is_said_to_change_the_input():
    # x.data = x.data.clone() changes nothing; x.data = x.data.float() on a float32 input (checked on float64 copies)
    # holds the same values but made the later evaluations, which run on the check's own tensors, float32's: exempting
    # it (a review's first suggestion) passed a backward 1e-4 off, and a rebind to complex128 crashed gradaudit's
    # judge (a second review)
    def same(t: torch.Tensor) -> torch.Tensor:
        t.data = t.data.clone()
        return t.sin()

    assert ga.check(same, (_x(),)).verdict == "pass"

    def narrowed(t: torch.Tensor) -> torch.Tensor:
        t.data = t.data.float()
        return t.double().sin()

    for dtype, to in ((torch.float32, narrowed), (F64, lambda t: setattr(t, "data", t.data.to(torch.complex128))
                                                   or t.real.sin())):
        x = torch.tensor([0.25, 0.5, 0.75], dtype=dtype, requires_grad=True)
        res = ga.check(to, (x,))
        error = res.records[0].error
        assert res.verdict == "error" and error.type == "InputMutated", res.report()
        assert "replaces the data of its input 't' with a" in error.message


def test_a_missing_jvp_is_said_once_not_repeated_under_its_record():
    res = ga.check(NoJvp.apply, (_x(),), forward_ad=True)
    lines = str(res).splitlines()
    assert sum("forward-mode AD failed" in line for line in lines) == 1, str(res)
