"""ga.check on planted bugs (each must fail, located) and on correct ops (each must pass).

Each planted Function's true derivative is written in its forward's comment; the backward
carries one deliberate bug.
"""

import math
import warnings

import pytest
import torch

import gradaudit as ga
from gradaudit import GradientMismatch, Tolerance
from gradaudit import evaluate as ga_evaluate

F64 = torch.float64


def leaf(*shape, seed=0, low=0.3):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(*shape, generator=g, dtype=F64) + low).requires_grad_()


def fn_class(forward, backward, n_in=1):
    """An autograd.Function from a forward (saving inputs) and a backward of (grad, *inputs)."""

    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *xs):
            ctx.save_for_backward(*xs)
            return forward(*xs)

        @staticmethod
        def backward(ctx, grad):
            return backward(grad, *ctx.saved_tensors)

    F.__name__ = F.__qualname__ = getattr(backward, "__name__", "F")
    return F


def _one_element(g, x):
    out = 2 * x * g
    out = out.clone()
    out.reshape(-1)[3] *= 1.25
    return out


# name: (Function, inputs, input index that must be blamed, element that must be blamed or None)
PLANTED = {
    # y = x^2: dy/dx = 2x
    "wrong constant": (fn_class(lambda x: x * x, lambda g, x: 3 * x * g), lambda: (leaf(6),), 0, None),
    "ignores grad_output": (fn_class(lambda x: x * x, lambda g, x: 2 * x), lambda: (leaf(6),), 0, None),
    "wrong sign": (fn_class(lambda x: x * x, lambda g, x: -2 * x * g), lambda: (leaf(6),), 0, None),
    "wrong at one element only": (fn_class(lambda x: x * x, _one_element), lambda: (leaf(6),), 0, (3,)),
    "small relative error 1e-4": (fn_class(lambda x: x * x, lambda g, x: 2 * x * g * (1 + 1e-4)),
                                  lambda: (leaf(6),), 0, None),
    # y = sin(x): dy/dx = cos(x); the bug uses the output where the input was saved
    "uses the output where the input was saved": (fn_class(lambda x: x.sin(), lambda g, x: g * x.sin().cos()),
                                                  lambda: (leaf(6),), 0, None),
    # y = x * w: dy/dx = w, dy/dw = x; the bug swaps them
    "swapped inputs": (fn_class(lambda x, w: x * w, lambda g, x, w: (g * x, g * w)),
                       lambda: (leaf(5, seed=1), leaf(5, seed=2, low=2.0)), 0, None),
    "None for an input": (fn_class(lambda x, w: x * w, lambda g, x, w: (g * w, None)),
                          lambda: (leaf(5, seed=1), leaf(5, seed=2)), 1, None),
    # y = x + b (b of shape (3,) broadcast over (4, 3)): db = sum over rows, not the mean
    "mean instead of sum for a broadcast bias": (fn_class(lambda x, b: x + b, lambda g, x, b: (g, g.mean(0))),
                                                 lambda: (leaf(4, 3, seed=1), leaf(3, seed=2)), 1, None),
    # y = A @ x: dy/dA = g x^T, dy/dx = A^T g; the bug forgets the transpose
    "missing transpose": (fn_class(lambda a, x: a @ x, lambda g, a, x: (torch.outer(g, x), a @ g)),
                          lambda: (leaf(4, 4, seed=3), leaf(4, seed=4)), 1, None),
    # y = exp(x): dy/dx = exp(x); the bug returns x
    "returns the input instead of exp": (fn_class(lambda x: x.exp(), lambda g, x: g * x), lambda: (leaf(5),), 0, None),
    # y = sum(x^2) (scalar): dy/dx = 2x
    "scalar output, wrong factor": (fn_class(lambda x: (x * x).sum(), lambda g, x: g * x), lambda: (leaf(5),), 0, None),
    # y = x^3: dy/dx = 3x^2; the bug forgets the power rule's exponent decrease
    "power rule slip": (fn_class(lambda x: x**3, lambda g, x: 3 * x**3 * g), lambda: (leaf(5),), 0, None),
    # y = x * w: the bug returns dy/dw with the wrong sign only
    "wrong sign on the second input": (fn_class(lambda x, w: x * w, lambda g, x, w: (g * w, -g * x)),
                                       lambda: (leaf(5, seed=1), leaf(5, seed=2)), 1, None),
    # y = x / w: dy/dw = -x / w^2; the bug drops the square
    "quotient rule slip": (fn_class(lambda x, w: x / w, lambda g, x, w: (g / w, -g * x / w)),
                           lambda: (leaf(5, seed=1), leaf(5, seed=2, low=1.5)), 1, None),
    # y = x^2 with a 3x3 input: the bug transposes the gradient
    "transposed gradient": (fn_class(lambda x: x * x, lambda g, x: (2 * x * g).T.contiguous()),
                            lambda: (leaf(3, 3, seed=5),), 0, None),
}


@pytest.mark.parametrize("mode", ["full", "directional", "auto"])
@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_planted_bug_fails_and_is_located_in_every_mode(bug, mode):
    function, make, blamed, element = PLANTED[bug]
    res = ga.check(function.apply, make(), mode=mode)
    assert res.verdict == "fail", res.report()
    inputs_blamed = {m.input for m in res.mismatches if m.kind in ("value", "none-gradient")}
    assert f"input{blamed}" in inputs_blamed, res.report()
    if element is not None:
        assert all(m.element == element for m in res.mismatches if m.kind == "value"), res.report()


@pytest.mark.parametrize("mode", ["full", "directional"])
def test_a_none_gradient_is_said_once_and_located_in_full_mode(mode):
    """y = x * w with a backward returning None for w (dy/dw = x). At these points full mode also runs the
    directional confirmation (entries below 1e-2 of the output's scale), whose projection repeated what
    every entry said ("3 of 3 outside the allowance; outside the allowance; 'w' requires grad but autograd
    gives None ...") and added a row without an element. Each mode now says it once; full mode's rows are
    the three elements of w, each numeric dy_i/dw_i = x_i against autograd's 0."""
    f = fn_class(lambda x, w: x * w, lambda g, x, w: (g * w, None))
    x = torch.tensor([0.4033468476292993, 0.8380263329976598, -0.7192575784693592], dtype=torch.float64)
    w = torch.tensor([-0.40334352493217457, -0.5966353626151273, 0.18203648506130554], dtype=torch.float64)
    res = ga.check(f.apply, (x.requires_grad_(), w.requires_grad_()), mode=mode)
    reason = res.records[1].reason
    assert res.verdict == "fail" and reason.count("None") == 1 and "allowance; outside" not in reason, reason
    if mode == "full":
        rows = [m for m in res.mismatches if m.input == "input1"]
        assert sorted(m.element for m in rows) == [(0,), (1,), (2,)], res.report()
        for m in rows:
            assert m.observed == 0.0 and m.reference == pytest.approx(float(x.detach()[m.element]), rel=1e-9)


def test_at_least_15_planted_bugs():
    assert len(PLANTED) >= 15


def _square():
    return fn_class(lambda x: x * x, lambda g, x: 2 * x * g)


A = torch.randn(6, 6, generator=torch.Generator().manual_seed(9), dtype=F64)
CORRECT = {
    "sin(x)*x": (lambda x: torch.sin(x) * x, lambda: (leaf(40),)),
    "A@x": (lambda x: A @ x, lambda: (leaf(6),)),
    "exp": (torch.exp, lambda: (leaf(7),)),
    "log": (torch.log, lambda: (leaf(7),)),
    "tanh": (torch.tanh, lambda: (leaf(7),)),
    "sigmoid": (torch.sigmoid, lambda: (leaf(7),)),
    "softmax": (lambda x: torch.softmax(x, 0), lambda: (leaf(7),)),
    "cumsum (triangular)": (lambda x: torch.cumsum(x, 0), lambda: (leaf(20),)),
    "conv1d-like band": (lambda x: x[:-2] + 2 * x[1:-1] - x[2:], lambda: (leaf(30),)),
    "matmul of two": (lambda a, b: a @ b, lambda: (leaf(3, 4, seed=1), leaf(4, 2, seed=2))),
    "two outputs": (lambda x: (x.sin(), (x * x).sum()), lambda: (leaf(5),)),
    "norm": (torch.linalg.norm, lambda: (leaf(5),)),
    "logsumexp": (lambda x: torch.logsumexp(x, 0), lambda: (leaf(5),)),
    "custom square Function": (lambda x: _square().apply(x), lambda: (leaf(8),)),
    "mse loss": (lambda p, t: ((p - t) ** 2).mean(), lambda: (leaf(6, seed=1), leaf(6, seed=2).detach())),
    "broadcast bias (correct sum)": (fn_class(lambda x, b: x + b, lambda g, x, b: (g, g.sum(0))).apply,
                                     lambda: (leaf(4, 3, seed=1), leaf(3, seed=2))),
}


@pytest.mark.parametrize("mode", ["full", "directional", "auto"])
@pytest.mark.parametrize("case", sorted(CORRECT))
def test_correct_ops_pass_in_every_mode(case, mode):
    function, make = CORRECT[case]
    res = ga.check(function, make(), mode=mode)
    assert res.verdict == "pass", res.report()


def test_structure_is_exploited_for_elementwise_and_banded():
    res = ga.check(lambda x: torch.sin(x) * x, (leaf(200),), mode="full")
    # one probe column (2 evaluations), then the diagonal hypothesis: two draws of one group; then the
    # directional confirmation (4), as for every band (autograd's entries are not built, so how finely the
    # quick stage resolved them is not known: see full.full)
    assert res.ok and res.info["structure"].startswith("diagonal") and res.info["evaluations"] == 2 + 4 + 4
    res = ga.check(lambda x: x[:-2] + 2 * x[1:-1] - x[2:], (leaf(200),), mode="full")
    assert res.ok and "structure" not in res.info  # 198 x 200 is not square: dense
    res = ga.check(lambda x: torch.cat([x[:1], x[1:] - x[:-1]]), (leaf(200),), mode="full")
    assert res.ok and res.info["structure"].startswith("banded (half-width 1)")
    kernel = torch.linspace(1.0, 2.0, 9, dtype=F64).reshape(1, 1, 9)  # y_i = sum_d k_d x_(i+d-4): |i - j| <= 4
    res = ga.check(lambda x: torch.nn.functional.conv1d(x.reshape(1, 1, -1), kernel, padding=4).reshape(-1),
                   (leaf(200),), mode="full")
    # the probe column reaches 4 from the diagonal, so half-widths 0, 1 and 2 are never tried:
    # 2 probe evaluations, then two draws of 9 groups (2 evaluations each), then the confirmation (4), and
    # whatever projections it took along the columns whose entries neither it nor the band resolved to 1e-8
    # (4 each): no column is differenced on its own
    assert res.ok and res.info["structure"].startswith("banded (half-width 4)")
    projections = res.info["directional"]
    assert all(p["evaluations"] == 4 for p in projections)
    assert res.info["evaluations"] == 2 + 2 * 2 * 9 + 4 * len(projections)


def _matrix(n, seed=3):
    return torch.randn(n, n, generator=torch.Generator().manual_seed(seed), dtype=F64) / n**0.5


def test_dense_jacobian_skips_bands_and_affine_functions_use_one_sided_steps():
    a = _matrix(200)
    res = ga.check(lambda x: a @ x, (leaf(200),), mode="full")
    # a probe column (2 evaluations) rules every band out; the affine test takes two random
    # directions (2 evaluations each); then one evaluation per column, steps max(1, |x|): they resolve SAFETY x 8
    # ulps of max(1, |f|), 1.8e-14 |f|, which is more than 1e-8 of the smallest of the 40,000 entries of A
    # (random, 0.05 at the median, 1.1e-6 at the least); those columns, a proper part of the 200, and nothing
    # else, ask for the directional confirmation, so it is made along them alone (4), the others still; it leaves
    # some open (200 outputs share its allowance), so the whole confirmation (4) and the projection along what that
    # leaves open (4) follow, as before the thirteenth session; and vmap's batch is confirmed against plain calls at
    # its first and last rows (2), within the outputs' rounding as measured (4): counted since the sixteenth session
    assert float(a.abs().min()) < 10 * 8 * torch.finfo(F64).eps / 1e-8
    assert res.ok and "structure" not in res.info
    assert res.info["evaluation"] == "torch.func.vmap" and res.info["evaluations"] == 2 + 4 + 200 + 4 + 4 + 4 + 2 + 4
    along = "the columns whose entries central differences could not resolve to 1e-8"
    assert [d.get("along", "").split(" (")[0] for d in res.info["directional"]] == [along, "", along]
    assert res.info["numeric"].startswith("affine")
    res = ga.check(lambda x: torch.sin(a @ x), (leaf(200),), mode="full")
    # central differences, then the directional confirmation (4): entries cos(A x) A of about 0.07 against
    # max(1, |f|) = 1 are resolved to about 4e-8 of themselves, not the 1e-8 the default tolerance promises; vmap's
    # rows confirmed (2) within the outputs' rounding as measured (4)
    assert res.ok and "numeric" not in res.info and res.info["evaluations"] == 2 + 4 + 2 * 200 + 4 + 2 + 4


def test_affine_one_sided_columns_that_disagree_are_judged_again_by_ridders():
    a = _matrix(40)

    class WrongAt(torch.autograd.Function):  # y = A x, dy/dx = A; the backward is wrong at A[7, 5]
        @staticmethod
        def forward(ctx, x):
            return a @ x

        @staticmethod
        def backward(ctx, g):
            wrong = a.clone()
            wrong[7, 5] += 0.5
            return wrong.T @ g

    res = ga.check(WrongAt.apply, (leaf(40),), mode="full")
    assert res.info["numeric"].startswith("affine") and res.info["ridders_columns"] == 1
    (m,) = res.mismatches
    assert (m.element, m.output_element) == ((5,), (7,))
    assert m.reference == pytest.approx(a[7, 5].item(), abs=1e-12)
    assert m.observed == pytest.approx(a[7, 5].item() + 0.5, abs=1e-12)
    text = res.report()
    assert "ridders columns 1" in text and "affine in 'x'" in text


def test_a_kink_within_the_one_sided_step_is_never_a_false_failure():
    # y = A x + e_11 relu(x_11 - x0_11 - 0.6): affine near x0, but a step of max(1, |x|) crosses the
    # kink; the affine test sees it only when a random direction moves x_11 by more than 0.6
    a = _matrix(40)
    x0 = leaf(40)
    corner = x0.detach()[11] + 0.6
    unit = torch.zeros(40, dtype=F64)
    unit[11] = 1.0
    took_affine = 0
    for seed in range(6):
        res = ga.check(lambda x: a @ x + unit * torch.relu(x[11] - corner), (x0,), mode="full", seed=seed)
        assert res.verdict == "pass", res.report()
        if res.info.get("numeric", "").startswith("affine"):  # wrong for column 11 only: judged again by Ridders
            took_affine += 1
            assert res.info["ridders_columns"] == 1
    assert took_affine  # the affine guess was made, and wrong, at least once


def test_a_diagonal_jacobian_judged_by_ridders_locates_exactly_the_wrong_entries():
    """y = sin(x), dy/dx = cos(x) (diagonal); the backward is off by a relative 1e-6 at elements 3 and 17 of 40:
    exactly those entries, with cos(x) as the reference."""
    x = leaf(40)

    def off_at_3_and_17(g, x):
        out = torch.cos(x) * g
        out[[3, 17]] *= 1 + 1e-6
        return out

    f = fn_class(torch.sin, off_at_3_and_17)
    res = ga.check(f.apply, (x,), mode="full")
    assert res.verdict == "fail" and res.info["structure"].startswith("diagonal"), res.report()
    assert sorted((m.element, m.output_element) for m in res.mismatches) == [((3,), (3,)), ((17,), (17,))]
    for m in res.mismatches:
        want = math.cos(x[m.element[0]].item())
        assert m.reference == pytest.approx(want, rel=1e-9)
        assert m.observed == pytest.approx(want * (1 + 1e-6), rel=1e-12)


def test_a_banded_jacobian_judged_by_ridders_locates_an_off_diagonal_entry():
    """y_i = sin(x_i) + x_i x_{i+1} (y_39 = sin(x_39)): J[i, i] = cos(x_i) + x_{i+1}, J[i, i + 1] = x_i, a band of
    half-width 1. The backward is off by a relative 1e-6 at the off-diagonal entry (5, 6): the mismatch is there,
    with x_5 as the reference."""
    x = leaf(40)

    def forward(x):
        y = torch.sin(x)
        return torch.cat([y[:-1] + x[:-1] * x[1:], y[-1:]])

    def backward(g, x):
        out = torch.cos(x) * g
        out[:-1] += g[:-1] * x[1:]
        out[1:] += g[:-1] * x[:-1]
        out[6] += 1e-6 * g[5] * x[5]
        return out

    res = ga.check(fn_class(forward, backward).apply, (x,), mode="full")
    assert res.verdict == "fail" and res.info["structure"].startswith("banded (half-width 1)"), res.report()
    (m,) = res.mismatches
    assert (m.element, m.output_element) == ((6,), (5,))
    assert m.reference == pytest.approx(x[5].item(), rel=1e-9)


def test_a_small_dependence_outside_a_verified_band_is_located_where_it_is():
    """y = sin(30 x), and y_0 also has 3e-8 x_39: J[r, r] = 30 cos(30 x_r), J[0, 39] = 3e-8. The backward routes that
    term to x_0 instead (J[0, 0] off by 3e-8, J[0, 39] given as 0). The band test (to 1e-7 of an entry) takes the
    Jacobian for diagonal; the final stage must still judge each column by itself and name both entries. (A
    reviewer's case against moving a band's columns together in Ridders' stage, tried and dropped: the term of
    column 39 was credited to entry (0, 0), and with a custom tolerance the check passed.)"""
    class Leaky(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            y = torch.sin(30 * x)
            y[0] += 3e-8 * x[-1]
            return y

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            out = 30 * torch.cos(30 * x) * g
            out[0] += 3e-8 * g[0]
            return out

    g = torch.Generator().manual_seed(0)
    x = (torch.rand(40, generator=g, dtype=F64) * 0.8 + 0.1).requires_grad_()
    for tol in (None, Tolerance(0.0, 1e-9, why="a custom tolerance: the directional confirmation does not run")):
        res = ga.check(Leaky.apply, (x,), mode="full", tolerance=tol)
        assert res.verdict == "fail", res.report()
        assert {(m.element, m.output_element) for m in res.mismatches} == {((0,), (0,)), ((39,), (0,))}, res.report()


@pytest.mark.parametrize("invented", [1e-8, 1e-6])
def test_an_entry_the_backward_invents_beside_a_steep_band_is_named(invented):
    """y = s x with s_3 = 1e8 (25 elements): a diagonal Jacobian, which the band test verifies. The backward also
    gives x_3 the gradient invented * g_4 (an entry (4, 3) the function does not have); beside 1e8 in column 3 the
    band test's draws cannot see it (they agree to 64 eps of 1e8), and the band never builds autograd's entries
    outside it, so the check failed on the directional confirmation alone, no entry named (gradcheck passes both).
    When that confirmation disagrees, autograd's rows are built and every column judged against them: the entry
    is named."""
    s = torch.ones(25, dtype=F64)
    s[3] = 1e8

    class Invented(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * s

        @staticmethod
        def backward(ctx, g):
            out = g * s
            out[3] = out[3] + invented * g[4]
            return out

    x = leaf(25, low=0.5)
    res = ga.check(Invented.apply, (x,), mode="full")
    assert res.verdict == "fail" and res.info["structure"].startswith("diagonal"), res.report()
    assert [(m.element, m.output_element) for m in res.mismatches] == [((3,), (4,))], res.report()
    assert res.mismatches[0].observed == pytest.approx(invented, rel=1e-6) and res.mismatches[0].reference == 0
    assert "against autograd's rows" in res.info["confirmation"]


@pytest.mark.parametrize("missed", [1e-8, 1e-7])
def test_a_dependence_autograd_misses_outside_a_band_fails_with_a_tolerance_of_ones_own(missed):
    """y = sin(x), and y_0 also has missed * x_last, which the backward leaves out: J[0, last] = missed, autograd 0.
    The band test (two draws agreeing to 1e-7 of the entries) takes the Jacobian for diagonal; only the directional
    confirmation sees the rest, and with a tolerance the user set it did not run: full mode passed at 40 elements
    where 15 elements and directional mode fail. Now every mode and size fails it, at (last, 0)."""
    class Missed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            y = torch.sin(x)
            y[0] = y[0] + missed * x[-1]
            return y

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return torch.cos(x) * g

    tol = Tolerance(0.0, 1e-9, why="a tolerance of one's own: the default's promise is not made")
    for n in (40, 15):
        x = (torch.rand(n, generator=torch.Generator().manual_seed(0), dtype=F64) * 0.8 + 0.1).requires_grad_()
        for mode in ("full", "directional"):
            res = ga.check(Missed.apply, (x,), mode=mode, tolerance=tol)
            assert res.verdict == "fail", (n, mode, res.report())
            if mode == "full":
                assert {(m.element, m.output_element) for m in res.mismatches} == {((n - 1,), (0,))}, res.report()


def _float32_sixth(x):
    """hardsigmoid's backward as torch 2.13 computes it in float64 (a float32 1/6: 2.98e-8 relative off)."""
    return torch.where((x > -3) & (x < 3), torch.tensor(1 / 6, dtype=torch.float32).to(F64), 0.0)


def test_a_confirmation_that_agrees_along_the_accepted_columns_leaves_them_standing():
    """hardsigmoid at 20 points in [-6, 6], 10 of them inside (-3, 3) (-2.84 to 2.84), where the backward's slope
    is float32's 1/6 (2.98e-8 relative off). The quick stage does not accept those 10 columns; the directional
    confirmation (which a band always asks) disagrees; along the 10 columns the quick stage accepted, it agrees:
    so exactly those go to Ridders (not all 20), and they fail, located, with the 10 right ones counted as
    agreeing."""
    x = torch.linspace(-6.0, 6.0, 20, dtype=F64).requires_grad_()
    inside = [i for i, v in enumerate(x.tolist()) if -3 < v < 3]
    assert len(inside) == 10
    f = fn_class(lambda x: torch.clamp(x / 6 + 0.5, 0.0, 1.0), lambda g, x: g * _float32_sixth(x))
    res = ga.check(f.apply, (x,), mode="full")
    assert res.verdict == "fail", res.report()
    assert sorted(m.element[0] for m in res.mismatches) == inside
    assert all(m.output_element == m.element for m in res.mismatches)
    assert res.info["ridders_columns"] == 10, res.info
    assert res.info["confirmation"].startswith("the directional confirmation disagreed, and agreed along"), res.info
    assert res.records[0].discrepancy.total == 400 and res.records[0].discrepancy.mismatched == 10


def test_a_confirmation_that_disagrees_along_the_accepted_columns_sends_every_column_to_ridders():
    """y = sin(x) with y_0 also holding 1e-7 x_39, which the backward leaves out (J[0, 39] = 1e-7, autograd 0:
    below the band test's resolution, so the band is taken for diagonal and the quick stage accepts column 39),
    and the backward off by 1e-6 at element 3 (a column the quick stage does not accept). The confirmation
    disagrees, and along the accepted columns it still does (column 39 moves y_0): every column is judged by
    Ridders, and both wrong entries are named."""
    class Both(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            y = torch.sin(x)
            y[0] = y[0] + 1e-7 * x[-1]
            return y

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            out = torch.cos(x) * g
            out[3] *= 1 + 1e-6
            return out

    x = (torch.rand(40, generator=torch.Generator().manual_seed(0), dtype=F64) * 0.8 + 0.1).requires_grad_()
    res = ga.check(Both.apply, (x,), mode="full")
    assert res.verdict == "fail", res.report()
    assert {(m.element, m.output_element) for m in res.mismatches} == {((3,), (3,)), ((39,), (0,))}, res.report()
    assert res.info["confirmation"] == ("the directional confirmation disagreed: every column judged by Ridders, "
                                        "against autograd's rows (the band's own entries were not enough)")
    assert res.info["ridders_columns"] == 40, res.info


def test_functions_that_refuse_far_points_fall_back_to_central_differences():
    a = _matrix(40)
    x0 = leaf(40)

    def positive_only(x):  # y = A x, defined for x > 0 only; the check sits at x in [0.3, 1.3)
        if bool((x <= 0).any()):
            raise ValueError("x must be positive")
        return a @ x

    res = ga.check(positive_only, (x0,), mode="full")
    # the affine test's far points (|u| up to 1) leave the domain: central differences, in a loop
    # (vmap cannot run the data-dependent check), and no crash
    assert res.ok and "numeric" not in res.info and res.info["evaluation"] == "loop"
    limit = x0.detach()[0] + 0.9

    def bounded(x):  # defined while x_0 < x0_0 + 0.9: a one-sided step of 1 on column 0 leaves it
        if bool(x[0] >= limit):
            raise ValueError("x_0 out of range")
        return a @ x

    took_affine = 0
    for seed in range(4):
        res = ga.check(bounded, (x0,), mode="full", seed=seed)
        assert res.ok, res.report()
        if res.info.get("numeric", "").startswith("affine"):  # the random directions stayed inside
            took_affine += 1
            assert "'x' from column 0 on: central differences" in res.info["numeric"]
    assert took_affine


def test_several_inputs_and_outputs_one_of_them_empty_or_independent():
    a = _matrix(30)

    def f(x, w):  # d(A x * w)/dx = diag(w) A, d/dw = diag(A x); d(sum x)/dx = 1, d/dw = 0; an empty output
        return a @ x * w, x.sum(), x[:0] * 2

    for mode in ("full", "directional"):
        res = ga.check(f, (leaf(30, seed=1), leaf(30, seed=2)), mode=mode)
        assert res.verdict == "pass", res.report()
    # x: affine (dense columns, A x * w): the affine test (4) and one evaluation per column; w: a diagonal
    # Jacobian (A x * w, and sum x does not use w), so all 30 columns move as one group: one central
    # difference. None judged again, and the backward of all outputs at once equals the rows of each one
    # summed; but w's entries (A x, of about 0.2 against max(1, |f|) = 1 and max(1, |w|)) are resolved to
    # 1e-8 of themselves only where they are large, so the directional confirmation runs: both inputs at once,
    # 4 evaluations, and it agrees; then those of w's columns whose entries neither central differences nor it
    # resolved (if any) are confirmed again on their own (4 each projection), and agree; the column group's jump
    # test asks for the outputs' rounding as measured (4: counted since the sixteenth session)
    full = ga.check(f, (leaf(30, seed=1), leaf(30, seed=2)), mode="full")
    assert full.info["numeric"].startswith("affine in 'x'") and "'w'" not in full.info["numeric"]
    assert "'w' sparse: 1 column group(s) for 30 columns" in full.info["structure"]
    assert "ridders_columns" not in full.info and "confirmation" not in full.info
    again = full.info["directional"][1:]
    assert "(together)" in full.info["directional"][0]["input"]
    assert full.info["evaluations"] == (4 + 30) + 2 + 4 + 4 * len(again) + 4
    assert all(d["input"].startswith("w") and d["verdict"] == "pass" for d in again)


def test_an_empty_input_beside_a_wrong_one_and_a_dead_output_is_judged_not_raised():
    """An empty checked input next to one whose backward is 0.1% off at an element, with an output -inf everywhere:
    directional mode judged each input alone, read NaN along the empty one's empty direction and bisected it,
    raising IndexError out of ga.check (a reviewer's random cases). The empty input has nothing to compare, as
    in full mode; the dead output makes it inconclusive (its rows are not checked), in every mode."""
    def f(a, b):
        return a.sum() + _SquareSumOff.apply(b), torch.log(b * 0)

    a = torch.empty(0, dtype=F64, requires_grad=True)
    b = torch.tensor([0.3, -1.2, 2.0], dtype=F64, requires_grad=True)
    for mode in ("directional", "full", "auto"):
        res = ga.check(f, (a, b), mode=mode)
        assert res.verdict != "pass" and res.records[0].input == "a", res.report()
        assert res.records[0].verdict == "inconclusive" and "not finite at the point" in res.records[0].reason
        assert res.records[1].verdict == "fail" and res.records[1].reason.startswith("1 of 3 outside"), res.report()


def test_an_output_dead_everywhere_beside_a_finite_one_is_left_out_in_every_mode():
    """An output that is -inf at every element (log(0 x)) beside a finite one whose backward is 0.1% off at element
    2: the dead
    output was weighed (the test that leaves dead outputs out read "each output wholly finite or wholly dead" as
    "none finite"), and its backward made 0 / 0 of its zero weight: directional mode said inconclusive with NaN
    for autograd's vᵀJ where full mode failed an entry and left the dead rows' 9 inconclusive. Now both fail that
    entry of the finite output, with autograd's numbers, and name the dead rows as not checked."""
    def f(b):
        return _SquareSumOff.apply(b), torch.log(b * 0)

    b = torch.tensor([0.3, -1.2, 2.0], dtype=F64, requires_grad=True)
    for mode in ("directional", "full"):
        res = ga.check(f, (b,), mode=mode)
        (record,) = res.records
        assert record.verdict == "fail" and record.reason.startswith("1 of 3 outside the allowance"), res.report()
        assert "3 output elements not finite at the point" in record.reason
        (failed,) = [c for c in res.mismatches if c.verdict == "fail"]
        assert failed.location.element == (2,) and math.isfinite(failed.observed)
        assert failed.observed == pytest.approx(1.001 * failed.reference, rel=1e-6)


def test_an_output_dead_everywhere_is_not_checked_alone_either():
    """(sin x, (exp(x + 1e5) * 0).sum()): the second output is inf * 0, NaN wherever x is, so it has no derivative and
    its row is not checked; sin's rows are right. Directional mode's check of each output alone took the dead one's
    backward at weight 0, inf * 0 again, and FAILED it ("the observed value is nan") where full mode is inconclusive
    (the dead row not checked). Both modes are now inconclusive, for that row alone."""
    x = torch.tensor([0.3, 1.1, -0.4], dtype=F64, requires_grad=True)
    for mode in ("full", "directional"):
        res = ga.check(lambda x: (torch.sin(x), (torch.exp(x + 1e5) * 0).sum()), (x,), mode=mode, seed=0)
        assert res.verdict == "inconclusive", (mode, res.report())
        assert not [c for c in res.mismatches if c.verdict == "fail"], (mode, res.report())
        assert "1 output element not finite at the point" in res.records[0].reason, (mode, res.report())


def test_a_nan_gradient_is_a_located_failure_in_both_modes():
    def nan_at_3(g, x):  # y = x^2: dy/dx = 2x; the backward writes NaN at element 3
        out = (2 * x * g).clone()
        out[3] = float("nan")
        return out

    f = fn_class(lambda x: x * x, nan_at_3)
    for mode in ("full", "directional"):
        res = ga.check(f.apply, (leaf(40),), mode=mode)
        assert res.verdict == "fail" and {m.element for m in res.mismatches} == {(3,)}, mode


def test_a_kink_is_not_a_plain_failure():
    x = torch.tensor([0.0, 1.0, -1.0], dtype=F64, requires_grad=True)
    res = ga.check(torch.relu, (x,), mode="full")
    assert res.verdict == "inconclusive"
    (kink,) = [m for m in res.mismatches if m.kind == "kink"]
    assert kink.element == (0,) and "left slope 0, right slope 1, autograd chose 0" in kink.reason


def test_mismatch_fields_and_report():
    function, make, _, _ = PLANTED["wrong at one element only"]
    res = ga.check(function.apply, make(), mode="full")
    (m,) = res.mismatches
    x = make()[0]
    assert (m.input, m.element, m.output, m.output_element) == ("input0", (3,), 0, (3,))
    assert m.observed == pytest.approx(2.5 * x[3].item(), rel=1e-12)  # 2x * 1.25
    assert m.reference == pytest.approx(2 * x[3].item(), rel=1e-12)  # Ridders' value
    assert m.allowance.total < 1e-9 and m.verdict == "fail" and m.kind == "value"
    text = res.report()
    assert "Mismatched elements: 1 / 36 (2.78%)" in text and "Greatest absolute difference" in text
    assert "tolerance:  atol 0, rtol 1e-10, plus 10 × the evidence's error bound (default" in text
    assert text.count("\n") < 15  # never whole Jacobians


def test_records_are_json_ready():
    import json

    res = ga.check(PLANTED["wrong sign"][0].apply, PLANTED["wrong sign"][1]())
    (rec,) = res.records
    d = json.loads(json.dumps(rec.to_dict(), allow_nan=False))
    assert d["verdict"] == "fail" and d["discrepancy"]["mismatched"] == 6 and d["input"] == "input0"


def test_nondeterministic_backward_is_reported_and_can_be_allowed_with_why():
    calls = []

    def noisy_backward(g, x):
        calls.append(1)
        return 2 * x * g + 1e-9 * len(calls)

    f = fn_class(lambda x: x * x, noisy_backward)
    res = ga.check(f.apply, (leaf(4),), mode="directional")
    assert any(m.kind == "nondeterministic" for m in res.mismatches)
    res = ga.check(f.apply, (leaf(4),), mode="directional",
                   nondet_tol=Tolerance(1e-6, 0.0, why="atomic adds reorder on the GPU"))
    assert not any(m.kind == "nondeterministic" for m in res.mismatches)


    (m,) = [m for m in ga.check(f.apply, (leaf(4),), mode="full").mismatches if m.kind == "nondeterministic"]
    assert "the same grad_output v" in m.reason, m.reason


@pytest.mark.parametrize("mode", ["full", "directional", "auto"])
def test_a_right_backward_whose_rounding_depends_on_the_sign_of_grad_output_passes(mode):
    """y = c x (complex c): by Wirtinger calculus, as gradcheck, the backward is conj(c) g. This one computes it
    as conj(exp(log(conj g) + log c)), right to an ulp or two, but log(-g) = log(g) + i pi rounds its angle
    otherwise, so backward(-v) is -backward(v) only to rounding. Its grad_outputs v and -v were compared
    exactly, and it failed as 'nondeterministic' in every mode (as did torch's own logcumsumexp on complex
    inputs, whose backward takes the log of its grad_output; gradcheck passes both)."""
    c = torch.tensor(0.3 + 0.7j, dtype=torch.complex128)

    class LogExp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return c * x

        @staticmethod
        def backward(ctx, g):
            return (g.conj().log() + c.log()).exp().conj()

    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, dtype=torch.complex128, generator=g).requires_grad_()
    assert torch.autograd.gradcheck(LogExp.apply, (x,))
    res = ga.check(LogExp.apply, (x,), mode=mode)
    assert res.verdict == "pass", res.report()
    z = torch.randn(5, 5, dtype=torch.complex128, generator=g).requires_grad_()
    res = ga.check(lambda t: torch.logcumsumexp(t, 0), (z,), mode=mode)
    assert res.verdict == "pass", res.report()


@pytest.mark.parametrize("mode", ["full", "directional"])
def test_a_backward_not_linear_in_its_grad_output_is_named_so_not_nondeterministic(mode):
    """d(x^2)/dx = 2x; this backward adds 1e-3 g^2, the same for g and -g: backward(-v) is not -backward(v) (by
    2e-3 v^2, far beyond rounding), while a second pass with v gives exactly the first."""
    f = fn_class(lambda x: x * x, lambda g, x: 2 * x * g + 1e-3 * g * g)
    res = ga.check(f.apply, (leaf(4),), mode=mode)
    kinds = {m.kind for m in res.mismatches}
    assert res.verdict == "fail" and "grad-output-linearity" in kinds and "nondeterministic" not in kinds, res.report()


@pytest.mark.parametrize("mode", ["full", "directional", "auto"])
def test_a_nan_gradient_beside_a_held_input_element_is_not_called_nondeterministic(mode):
    """(x t).sum() with x = [nan, 1, 2] and t = [1, nan, 3]: x0 is held (not finite), the output is NaN (its row
    not checked), and the gradient v t holds NaN at element 1 in every backward. The first two passes (v, -v)
    were compared with x0 left out, the third (v again) with x0 in: 0 against v there read as "two backward passes
    with the same grad_output v differ" and FAILED a backward that is the same every time (nn.KLDivLoss at
    ModuleInfo's NaN inputs, inconclusive before the third pass came in). Now inconclusive, as nothing can be
    checked, and nothing is called nondeterministic."""
    t = torch.tensor([1.0, math.nan, 3.0], dtype=torch.float64)
    x = torch.tensor([math.nan, 1.0, 2.0], dtype=torch.float64)
    res = ga.check(lambda a: (a * t).sum(), (x.requires_grad_(),), mode=mode)
    assert res.verdict == "inconclusive", res.report()
    assert not [m for m in res.mismatches if m.verdict == "fail"], res.report()


@pytest.mark.parametrize("n", [1, 5])
@pytest.mark.parametrize("mode", ["full", "directional", "auto"])
def test_a_backward_that_cannot_run_twice_through_its_graph_is_an_error_in_every_mode(mode, n):
    """A backward that pops the state its forward left on ctx cannot run a second time through the same
    graph (IndexError): every mode takes two or more backward passes through one forward (vᵀJ with v and
    -v; full mode's rows), so every mode and size says error, with the backward's own exception. (Giving the
    second pass a forward of its own was tried: directional mode then passed while full mode's rows still
    raised, a verdict that depended on the mode and the size.)"""
    class PopOnce(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.stash = [x.detach()]
            return x * x

        @staticmethod
        def backward(ctx, g):
            return 2 * ctx.stash.pop() * g

    res = ga.check(PopOnce.apply, (leaf(n),), mode=mode)
    assert res.verdict == "error" and res.records[0].error.type == "IndexError", res


def _recomputing(scale):
    class Recompute(torch.autograd.Function):
        """A checkpoint-style backward: it recomputes the forward with gradients on and differentiates it
        with create_graph=True, so the gradient it returns requires grad."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.sin(x) * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            with torch.enable_grad():
                xd = x.detach().requires_grad_()
                (gx,) = torch.autograd.grad(torch.sin(xd) * xd, xd, g, create_graph=True)
            return scale * gx
    return Recompute


@pytest.mark.parametrize("n", [1, 3, 100])
@pytest.mark.parametrize("mode", ["full", "directional", "auto"])
def test_a_backward_that_differentiates_inside_is_judged_without_a_warning(mode, n):
    """A gradient that requires grad (the backward built a graph of its own) is read as plain numbers:
    reading it as one warned ("Converting a tensor with requires_grad=True to a scalar"), which the tests'
    warnings-as-errors turned into a crash. d/dx sin(x) x = cos(x) x + sin(x): the correct backward passes,
    one scaled by 1 + 1e-6 fails, in every mode and size."""
    x = torch.linspace(-1.3, 2.1, n, dtype=torch.float64).requires_grad_()
    assert ga.check(_recomputing(1.0).apply, (x,), mode=mode).verdict == "pass"
    assert ga.check(_recomputing(1.0 + 1e-6).apply, (x,), mode=mode).verdict == "fail"

    class SavedOutput(torch.autograd.Function):  # returns its saved output (which requires grad), ignoring g
        @staticmethod
        def forward(ctx, x):
            y = torch.exp(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            return ctx.saved_tensors[0]

    assert ga.check(SavedOutput.apply, (x,), mode=mode).verdict == "fail"


@pytest.mark.parametrize("mode", ["full", "directional", "auto"])
def test_an_op_without_a_batching_rule_warns_nothing_and_leaves_vmaps_fallback_as_it_was(mode, capfd):
    """ihfft2 has no vmap batching rule, and sin(x) ihfft2(x) over 64 elements is batched (more than
    SMALL_BATCH columns, more than ANALYTIC_LOOP rows): vmap's fallback looped over it and warned "There is a
    performance drop because we have not yet implemented the batching rule for aten::fft_ihfftn" (a UserWarning
    per check; torch._refs.to's prims::copy_to printed 40 such lines straight to stderr). gradaudit now loops
    itself there: the same verdicts (the right backward passes, one 1e-6 off fails), no warning, nothing on
    stderr, and vmap's fallback setting as the caller left it, either way."""
    import torch._C._functorch as functorch

    def fn(a):
        return torch.fft.ihfft2(torch.sin(a))

    off = fn_class(fn, lambda g, a: (1 + 1e-6) * torch.func.vjp(fn, a)[1](g)[0])  # torch's backward, 1e-6 off
    x = torch.linspace(-1.3, 2.1, 64, dtype=torch.float64).reshape(8, 8)
    for fallback in (True, False):
        functorch._set_vmap_fallback_enabled(fallback)
        try:
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                right = ga.check(fn, (x.clone().requires_grad_(),), mode=mode)
                wrong = ga.check(off.apply, (x.clone().requires_grad_(),), mode=mode)
            assert functorch._is_vmap_fallback_enabled() is fallback
        finally:
            functorch._set_vmap_fallback_enabled(True)
        assert right.verdict == "pass", right
        assert wrong.verdict == "fail", wrong
        assert [str(w.message) for w in seen] == []
        assert capfd.readouterr().err == ""


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_a_low_precision_input_is_checked_in_float64_and_the_report_says_so(dtype):
    """A float32 input is checked on float64 copies (the evidence's precision): a backward wrong only in
    float32 (x g instead of 2 x g for y = x^2) is not exercised, and the report now says so, naming the input
    and its dtype, where it said nothing (a newcomer read the pass as a pass of the float32 kernel)."""
    f = fn_class(lambda x: x * x, lambda g, x: (x if x.dtype != torch.float64 else 2 * x) * g)
    res = ga.check(f.apply, (torch.tensor([0.5, -1.25], dtype=dtype, requires_grad=True),))
    notes = [n for n in res.records[0].evidence.notes if "checked in float64" in n]
    name = str(dtype).removeprefix("torch.")
    assert res.verdict == "pass"
    assert (notes == []) if dtype == torch.float64 else (f"'input0' ({name})" in notes[0] and "ga.compare" in notes[0])
    assert dtype == torch.float64 or notes[0] in res.report()


def test_gradient_metadata_is_compared_with_the_inputs(monkeypatch):
    # autograd's engine casts a Function's float32 gradient back to float64, so a wrong dtype is
    # planted where the checker reads the gradients: the report must name dtype and shape
    f = fn_class(lambda x: x * x, lambda g, x: 2 * x * g)
    assert not any(m.kind == "metadata" for m in ga.check(f.apply, (leaf(4),)).mismatches)
    from gradaudit import api

    real_grad = api.grad

    def float32_grads(*args, **kwargs):
        out = real_grad(*args, **kwargs)
        return tuple(None if g is None else g.float()[:3] for g in out)

    monkeypatch.setattr(api, "grad", float32_grads)
    problem = api._problem(f.apply, (leaf(4),), None)
    _, found = api._metadata(problem, [torch.ones(4, dtype=F64)], None)
    notes = " ".join(m.reason for m in found[0])
    assert "dtype torch.float32, its input torch.float64" in notes and "shape (3,), its input (4,)" in notes


def test_forward_ad_and_second_order():
    x = leaf(5)
    assert ga.check(lambda x: torch.sin(x) * x, (x,), forward_ad=True, order=2).ok
    bad2 = fn_class(lambda x: x * x, lambda g, x: 2 * x.detach() * g)  # first order right, no double backward
    for mode in ("full", "directional"):
        res = ga.check(bad2.apply, (x,), order=2, mode=mode)
        assert [(r.method, r.verdict) for r in res.records] == [("vjp", "pass"), ("double backward", "fail")]


def jvp_class(forward, derivative, scale=None):
    """An elementwise autograd.Function with forward-mode AD (setup_context, jvp) and a right backward; its jvp is
    derivative(x) * t times *scale(x)* (a planted bug) when given."""

    class F(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return forward(x)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.x = inputs[0]

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return derivative(x) * grad

        @staticmethod
        def jvp(ctx, tangent):
            out = derivative(ctx.x) * tangent
            return out if scale is None else out * scale(ctx.x)

    return F


def _jvp_verdicts(res):
    return [r.verdict for r in res.records if r.method == "jvp"]


def _off_at(index, off):
    def scale(x):
        s = torch.ones_like(x)
        s[index] = 1 + off
        return s
    return scale


def _exp500(x):  # exp(x / 500) and its first two derivatives: at [1e4, 0.01] one output is 4.9e8, the other 1
    return torch.exp(x / 500)


def _exp500_d1(x):
    return torch.exp(x / 500) / 500


def _exp500_d2(x):
    return torch.exp(x / 500) / 250000


def test_forward_ad_weighs_each_output_by_its_size():
    # exp(x / 500) at [1e4, 0.01]: output 0 is 4.9e8, output 1 about 1. The forward-mode check weighed the outputs by
    # U[0.5, 1.5) alone, so output 0 held the projection and a jvp 100% off at element 1 PASSED (before the
    # twenty-first session); with the backward's weights, 1 / max(1, |f|) each, it fails, and the right one passes
    x = torch.tensor([1e4, 0.01], dtype=F64, requires_grad=True)
    assert _jvp_verdicts(ga.check(jvp_class(_exp500, _exp500_d1).apply, (x,), forward_ad=True)) == ["pass"]
    wrong = ga.check(jvp_class(_exp500, _exp500_d1, _off_at(1, 1.0)).apply, (x,), forward_ad=True)
    assert _jvp_verdicts(wrong) == ["fail"]
    assert [r.verdict for r in wrong.records if r.method == "vjp"] == ["pass"]  # the backward is right


@pytest.mark.parametrize("off", [1e-6, -1e-7])
def test_forward_ad_fails_a_small_relative_error_and_passes_the_right_jvp(off):
    # a jvp off by 1e-7 of itself, everywhere: its projection is resolved to about 1e-10 of the value
    x = leaf(6, low=-0.5)
    assert _jvp_verdicts(ga.check(jvp_class(torch.sin, torch.cos).apply, (x,), forward_ad=True)) == ["pass"]
    scaled = jvp_class(torch.sin, torch.cos, lambda x: torch.full_like(x, 1 + off))
    assert _jvp_verdicts(ga.check(scaled.apply, (x,), forward_ad=True)) == ["fail"]


@pytest.mark.parametrize("mode", ["full", "directional"])
def test_a_jvp_that_writes_into_its_tangent_is_judged_on_its_value(mode):
    # f(x) = 3x, whose jvp returns t.mul_(3): the right value, 3t, written into the tangent it was given. make_dual
    # keeps that tensor, so the write landed in the check's own direction u and the numeric side moved along 3u:
    # the right jvp FAILED ("rel 0.667", 1 - 1/3). A jvp 1% off that writes the same way still fails
    def tripled(factor):
        class Triple(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 3

            @staticmethod
            def backward(ctx, g):
                return g * 3

            @staticmethod
            def jvp(ctx, t):
                return t.mul_(factor)
        return Triple.apply

    x = torch.tensor([0.3, -1.2, 2.0, 0.7], dtype=torch.float64, requires_grad=True)
    assert _jvp_verdicts(ga.check(tripled(3.0), (x,), forward_ad=True, mode=mode)) == ["pass"]
    assert _jvp_verdicts(ga.check(tripled(3.03), (x,), forward_ad=True, mode=mode)) == ["fail"]


def test_forward_ad_judges_each_output_alone_and_names_it():
    # two outputs; the jvp of the second is off by 1e-6 at one element: the failing comparison names output 1
    class Two(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return torch.sin(x), torch.exp(x)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.x = inputs[0]
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g0, g1):
            (x,) = ctx.saved_tensors
            return torch.cos(x) * g0 + torch.exp(x) * g1

        @staticmethod
        def jvp(ctx, t):
            x = ctx.x
            return torch.cos(x) * t, torch.exp(x) * t * _off_at(2, 1e-6)(x)

    res = ga.check(Two.apply, (leaf(5),), forward_ad=True)
    (jvp,) = [r for r in res.records if r.method == "jvp"]
    assert jvp.verdict == "fail"
    assert {c.location.output for c in res.mismatches if "forward-mode" in c.reason} == {1}


def test_forward_ad_holds_non_finite_inputs_and_leaves_out_outputs_not_finite():
    # softmax with a masked (-inf) element: the element is held, its tangent 0, the record says it is not checked
    # (before the twenty-first session every step from -inf was NaN: inconclusive); a jvp 1% off elsewhere fails
    x = torch.tensor([0.5, float("-inf"), 1.5, -0.3], dtype=F64, requires_grad=True)
    res = ga.check(lambda x: torch.softmax(x, 0), (x,), forward_ad=True)
    assert _jvp_verdicts(res) == ["pass"]
    assert "held at its value and not checked" in res.report()
    sqrt = jvp_class(torch.sqrt, lambda x: 0.5 / torch.sqrt(x))
    y = torch.tensor([-1.0, 2.0, 3.0], dtype=F64, requires_grad=True)  # output 0 is NaN: its row is not checked
    res = ga.check(sqrt.apply, (y,), forward_ad=True)
    (jvp,) = [r for r in res.records if r.method == "jvp"]
    assert jvp.verdict == "inconclusive" and "output 0 element (0,) = nan" in jvp.reason
    assert jvp.discrepancy.total == 1 and jvp.discrepancy.mismatched == 0
    wrong = jvp_class(torch.sqrt, lambda x: 0.5 / torch.sqrt(x), _off_at(2, 0.01))
    assert _jvp_verdicts(ga.check(wrong.apply, (y,), forward_ad=True)) == ["fail"]
    # an input every element of which is held: nothing is compared, in the jvp's record as in the backward's
    held = torch.full((3,), float("-inf"), dtype=F64, requires_grad=True)
    res = ga.check(lambda h, y: torch.cat([torch.softmax(h, 0).nan_to_num(), y.sin()]), (held, leaf(2)),
                   forward_ad=True, order=2)
    records = [r for r in res.records if r.input == "h"]
    assert [r.method for r in records] == ["vjp", "jvp", "double backward"]
    for record in records:
        assert record.verdict == "inconclusive" and record.discrepancy.total == 0, record
        assert "nothing could be checked" in record.reason


def test_forward_ad_without_a_formula_is_a_failure_of_that_input():
    f = fn_class(lambda x: x * x, lambda g, x: 2 * x * g)  # no jvp: forward-mode AD raises
    res = ga.check(f.apply, (leaf(3),), forward_ad=True)
    (jvp,) = [r for r in res.records if r.method == "jvp"]
    assert jvp.verdict == "fail" and "forward-mode AD failed" in res.report()


def second_derivative_off(forward, derivative, second, index, off):
    """An elementwise autograd.Function whose backward is right and differentiable, and whose second derivative
    is off by *off* (relative) at element *index*: the backward adds (x.detach() - x) off f''(x) there, 0 in value."""

    def backward(grad, x):
        mask = torch.zeros_like(x)
        mask[index] = off
        return grad * (derivative(x) + mask * (x.detach() - x) * second(x.detach()))

    return fn_class(forward, backward)


def test_second_order_weighs_each_term_by_its_size():
    # exp(x / 500) at [1e4, 0.01]: the double backward was judged on G = vᵀJ·w with v, w in U[0.5, 1.5), which the
    # element at 1e4 held (its first derivative 9.7e5 against 2e-3), and a second derivative 100% off at the small
    # element PASSED (before the twenty-first session). With the backward's output weights and w_i of order
    # 1 / max(1, |vᵀJ|_i), each term of G is of order one: it fails, and the right one passes
    x = torch.tensor([1e4, 0.01], dtype=F64, requires_grad=True)
    f, d1, d2 = _exp500, _exp500_d1, _exp500_d2

    def verdicts(fn):
        return [(r.method, r.verdict) for r in ga.check(fn.apply, (x,), order=2).records]

    assert verdicts(second_derivative_off(f, d1, d2, 1, 0.0)) == [("vjp", "pass"), ("double backward", "pass")]
    assert verdicts(second_derivative_off(f, d1, d2, 1, 1.0)) == [("vjp", "pass"), ("double backward", "fail")]
    # (1% there moves the projection by 2e-9 of itself, above its rtol of 1e-10; the one projection does not
    # promise 1e-8 of an element whose term is 1e-7 of the others', as directional mode's does not)
    assert verdicts(second_derivative_off(f, d1, d2, 1, 0.01)) == [("vjp", "pass"), ("double backward", "fail")]


@pytest.mark.parametrize("mode", ["full", "directional"])
def test_second_order_without_a_double_backward_keeps_the_first_order_record(mode):
    # torch.cdist's backward has no derivative of its own ("the derivative for '_cdist_backward' is not implemented",
    # as gradgradcheck raises): order=2 made the whole check an error filed under the vjp record ("the backward
    # raised"), whose first-order check passes (a fresh-eyes audit). Now that record passes and the double
    # backward's fails, saying why, as forward_ad=True does for a missing jvp
    x = torch.tensor([0.3, -1.2, 2.0], dtype=F64, requires_grad=True)
    res = ga.check(lambda x: torch.cdist(x.view(1, 3, 1), x.view(1, 3, 1) * 2), (x,), order=2, mode=mode)
    assert [(r.method, r.verdict) for r in res.records] == [("vjp", "pass"), ("double backward", "fail")]
    (second,) = [r for r in res.records if r.method == "double backward"]
    assert "the double backward failed" in second.reason and "_cdist_backward" in second.reason


@pytest.mark.parametrize("mode", ["full", "directional"])
@pytest.mark.parametrize("name", ["linear", "relu", "abs"])
def test_second_order_of_a_piecewise_linear_function_passes(mode, name):
    # 3x, relu and abs away from 0: the second derivative is exactly 0, and the double backward gives 0; G's numeric
    # derivative reads exactly 0 too. A version of the quick stage's rule for projections of exactly 0 (not kept) made
    # these inconclusive, "numeric 0, autograd 0" (a fresh-eyes audit's regression check)
    fn = {"linear": lambda t: 3 * t, "relu": torch.relu, "abs": torch.abs}[name]
    x = torch.tensor([0.3, -1.2, 2.0, 0.7], dtype=F64, requires_grad=True)
    res = ga.check(fn, (x,), order=2, mode=mode)
    assert [(r.method, r.verdict) for r in res.records] == [("vjp", "pass"), ("double backward", "pass")]


def test_a_failing_double_backward_names_each_projection_and_a_missing_graph():
    # a backward under @once_differentiable: autograd's double backward is 0 (no graph back to x), and both of the
    # record's projections fail. Their rows read "all | ... | fail" alike (which derivative failed?), and nothing
    # said why autograd gave 0 (a fresh-eyes audit): each row now names its projection, and the first says why
    from torch.autograd.function import once_differentiable

    class Once(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.cos()

    x = torch.tensor([0.3, -1.2, 2.0], dtype=F64, requires_grad=True)
    res = ga.check(Once.apply, (x,), order=2)
    assert [(r.method, r.verdict) for r in res.records] == [("vjp", "pass"), ("double backward", "fail")]
    rows = [line for line in str(res).splitlines() if line.strip().startswith("all |")]
    assert len(rows) == 2 and "uᵀ∇G" in rows[0] and "sᵀ∂(vᵀJ·u)/∂v" in rows[1]
    assert "the first derivative has no graph back to 'x'" in rows[0]


def test_second_order_holds_non_finite_inputs():
    # softmax with a masked (-inf) element: held, not moved (before the twenty-first session: inconclusive)
    x = torch.tensor([0.5, float("-inf"), 1.5, -0.3], dtype=F64, requires_grad=True)
    res = ga.check(lambda x: torch.softmax(x, 0), (x,), order=2)
    assert [(r.method, r.verdict) for r in res.records] == [("vjp", "pass"), ("double backward", "pass")]
    (second,) = [r for r in res.records if r.method == "double backward"]
    assert "held at its value and not checked" in second.reason


@pytest.mark.parametrize("size", [1e4, 1e6])
def test_a_periodic_function_at_a_large_input_is_judged_on_steps_within_its_period(size):
    # sin at 1e4: Ridders' first tableau, from h0 = 1e-2 max(1, |x|) = 100, sees sin(h) / h over steps of 100 to 3,
    # settles on 0.005 with a bound of 1e-13, and every finer tableau (from 10, 1, 0.1) was set aside for its larger
    # bound: inconclusive in full mode (before the twenty-first session), where gradcheck passes. A finer estimate
    # outside the coarser one's allowance now stands; the right backward passes in every mode, and one off by 1e-6
    # at that element fails, located
    x = torch.tensor([size, 2.0], dtype=F64, requires_grad=True)
    for mode in ("full", "directional"):
        assert ga.check(torch.sin, (x,), mode=mode).verdict == "pass"
    off = fn_class(torch.sin, lambda g, x: g * torch.cos(x) * torch.tensor([1 + 1e-6, 1.0], dtype=F64))
    res = ga.check(off.apply, (x,), mode="full")
    assert res.verdict == "fail" and {m.location.element for m in res.mismatches} == {(0,)}
    assert ga.check(off.apply, (x,), mode="directional").verdict == "fail"


def test_expected_values():
    x = torch.tensor(3.0, dtype=F64, requires_grad=True)
    assert ga.check(lambda x: x * x, (x,), expected=[6.0]).ok  # 2x at 3
    res = ga.check(lambda x: x * x, (x,), expected=[7.0])
    assert not res.ok and res.mismatches[0].reference == 7.0 and res.mismatches[0].reference_kind == "expected"
    assert res.records[-1].tolerance.atol == 1e-7  # autograd against an expectation: assert_close's float64 table


def test_assert_gradients_raises_gradient_mismatch_with_report():
    with pytest.raises(GradientMismatch) as info:
        ga.assert_gradients(PLANTED["wrong sign"][0].apply, PLANTED["wrong sign"][1]())
    assert isinstance(info.value, AssertionError)
    assert "Mismatched elements" in str(info.value) and info.value.records


def test_check_module_names_parameters():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1)).double()
    x = torch.randn(5, 3, dtype=F64)
    res = ga.check_module(model, (x,), loss_fn=lambda out: (out**2).mean())
    assert res.ok, res.report()
    assert {r.input for r in res.records} == {"0.weight", "0.bias", "2.weight", "2.bias"}


def test_check_module_blames_a_parameter_used_through_data():
    class Leaky(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = torch.nn.Linear(3, 2).double()
            self.scale = torch.nn.Parameter(torch.tensor(2.0, dtype=F64))

        def forward(self, x):
            return self.l1(x) * self.scale.data  # .data: the loss depends on scale, autograd does not see it

    torch.manual_seed(0)
    res = ga.check_module(Leaky(), (torch.randn(4, 3, dtype=F64),), loss_fn=lambda o: o.sum())
    assert res.verdict == "fail"
    blamed = {m.input for m in res.mismatches}
    assert blamed == {"scale"}, res.report()


class _Masked(torch.nn.Module):
    """y = (w x) * mask * scale: a forward with keyword arguments; d/dw of sum(y) is outer(mask * scale, x)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=F64))
        self.seen = []

    def forward(self, x, *, mask=None, scale=1.0):
        self.seen.append((mask is not None, scale))
        y = self.w @ x
        return (y if mask is None else y * mask) * scale


def test_check_module_says_why_an_embeddings_padding_row_fails():
    # torch gives nn.Embedding(padding_idx=0)'s row 0 no gradient by design while its forward reads the row: with
    # index 0 in the batch that row's entries fail (as in gradcheck), and the report did not say why (a fresh-eyes
    # audit). The note names the module and the index; without the index in the batch there is neither
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(6, 4, padding_idx=0), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    model = model.double()
    padded = ga.check_module(model, (torch.tensor([[1, 2, 0], [3, 0, 0]]),), lambda o: o.pow(2).sum())
    assert padded.verdict == "fail"
    assert {m.location.element[0] for m in padded.mismatches} == {0}  # row 0 of '0.weight' alone
    assert "'0.weight': Embedding(padding_idx=0) gives row 0 no gradient by design" in str(padded)
    plain = ga.check_module(model, (torch.tensor([[1, 2, 3]]),), lambda o: o.pow(2).sum())
    assert plain.verdict == "pass" and "padding_idx" not in str(plain)
    # EmbeddingBag leaves padding entries out of the bag: nothing fails, and nothing is said (a review)
    bag = torch.nn.EmbeddingBag(6, 4, padding_idx=0, mode="sum").double()
    res = ga.check_module(bag, (torch.tensor([[1, 0, 2], [0, 3, 4]]),), lambda o: o.pow(2).sum())
    assert res.verdict == "pass" and "padding_idx" not in str(res)


def test_check_module_passes_keyword_arguments_to_the_forward():
    model = _Masked()
    x = torch.tensor([0.5, -1.0], dtype=F64)
    mask = torch.tensor([1.0, 0.0], dtype=F64)
    res = ga.check_module(model, (x,), lambda y: y.sum(), kwargs={"mask": mask, "scale": 3.0}, mode="full")
    assert res.ok, res
    assert set(model.seen) == {(True, 3.0)}  # every evaluation got them
    assert "kwargs=kwargs" in res.rerun
    # a backward that ignored the mask would give outer((3, 3), x); the expectation is outer((3, 0), x)
    expected = torch.outer(mask * 3.0, x)
    res = ga.check_module(model, (x,), lambda y: y.sum(), kwargs={"mask": mask, "scale": 3.0},
                          expected=[expected])
    assert res.ok, res
    with pytest.raises(ga.SpecError, match="kwargs must be a dict"):
        ga.check_module(model, (x,), kwargs=[("scale", 3.0)])
    # a forward keyword given directly is refused, and the message says where it goes
    with pytest.raises(ga.SpecError, match=r"no argument 'mask'; it takes loss_fn, .*kwargs \(for the forward\)"):
        ga.check_module(model, (x,), mask=mask)


def test_check_module_of_attention_with_keyword_arguments():
    torch.manual_seed(0)
    attention = torch.nn.MultiheadAttention(4, 2, batch_first=True).double()
    q = torch.randn(1, 3, 4, dtype=F64)
    res = ga.check_module(attention, (q, q, q), lambda out: out[0].square().sum(), kwargs={"need_weights": False})
    assert res.ok, res


def test_bad_input_is_a_clear_spec_error():
    with pytest.raises(ga.SpecError, match="requires_grad=True"):
        ga.check(torch.sin, (torch.ones(3),))
    with pytest.raises(ga.SpecError, match="mode"):
        ga.check(torch.sin, (leaf(3),), mode="fast")


@pytest.mark.parametrize("together, confirmed, verdict", [
    (lambda g1, g2: 2 * g1, True, "fail"),  # drops g2
    (lambda g1, g2: 2 * g1 + 3 * g2 + 1e-6, True, "fail"),  # a wrong combined backward
    (lambda g1, g2: 2 * g1 + 3 * g2 + 1e-20, False, "pass"),  # far below what any entry resolves (~3e-10)
], ids=["drops-g2", "shifted-1e-6", "shifted-1e-20"])
@pytest.mark.parametrize("n", [5, 30], ids=["python-floats", "tensors"])  # 5 x 10 entries: full._together_small
def test_a_backward_wrong_only_when_several_outputs_receive_a_gradient(together, confirmed, verdict, n):
    # y1 = 2x, y2 = 3x; the backward is right for each output alone, and *together* when both grad_outputs are
    # non-zero. Full mode judges one output at a time, so every entry agrees; the combined backward is then
    # compared with the rows summed, at the resolution of the entries' own judgement: where they differ the
    # directional confirmation runs and disagrees; a difference no entry could resolve (a backward that sums
    # in another order) runs nothing
    class Combined(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return 2 * x, 3 * x

        @staticmethod
        def backward(ctx, g1, g2):
            if bool((g1 != 0).any()) and bool((g2 != 0).any()):
                return together(g1, g2)
            return 2 * g1 + 3 * g2

    res = ga.check(Combined.apply, (leaf(n),), mode="full")
    assert res.verdict == verdict
    assert res.records[0].discrepancy.mismatched == 0  # no single entry is wrong
    assert ("directional" in res.info) == confirmed
    if confirmed:
        assert res.info["confirmation"].startswith("the directional confirmation disagreed")


@pytest.mark.parametrize("mode", ["full", "directional"])
def test_a_check_keeps_nothing_of_the_function_alive(mode):
    """gradaudit remembers how to name a function only weakly: a closure and what it captures (a model, a
    large tensor) are freed as soon as the caller drops them, while the result lives on."""
    import gc
    import weakref

    class Captured:
        weight = torch.tensor([1.0, 2.0, 3.0], dtype=F64)

    def closure_over(obj):
        return lambda x: (x * obj.weight).sum()

    held = Captured()
    fn = closure_over(held)
    res = ga.check(fn, (leaf(3),), mode=mode)
    assert res.ok, res
    alive = weakref.ref(held)
    del fn, held
    gc.collect()
    assert alive() is None and res.ok  # the result holds no reference to the closure either


@pytest.mark.parametrize("mode", ["full", "directional"])
def test_a_backward_that_writes_to_its_grad_output_is_judged_by_what_it_returns(mode):
    """d(x.clone())/dx = 1, but this backward returns 2g, doubling grad_output in place: the output
    weights gradaudit hands it must be copies, or the numeric side would be doubled with them."""

    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g.mul_(2)

    for x in (leaf(5), torch.tensor(0.7, dtype=F64, requires_grad=True)):
        res = ga.check(Twice.apply, (x,), mode=mode)
        assert res.verdict == "fail", res


@pytest.mark.parametrize("mode", ["full", "directional"])
def test_state_a_forward_leaves_for_its_backward_is_fresh_at_every_backward(mode):
    """Per-sample-gradient hooks (as Opacus writes them) store the layer's input in a forward hook and
    read it in the backward hook; a Function may keep its input outside ctx. Each batch of backward
    passes gets its own forward right before it, as in a training step, so evaluations at other points
    in between never change what a backward reads. Both functions are correct: they pass."""
    lin = torch.nn.Linear(3, 2).double()
    stored = []
    lin.register_forward_hook(lambda m, i, o: stored.append(i[0].detach()))

    def per_sample(m, grad_in, grad_out):
        m.weight.grad_sample = torch.outer(grad_out[0], stored.pop())

    lin.register_full_backward_hook(per_sample)
    x = leaf(3)
    res = ga.check(lambda x: (lin(x), lin(x).tanh()), (x,), mode=mode)
    assert res.ok, res

    class KeptOutside(torch.autograd.Function):
        last = None

        @staticmethod
        def forward(ctx, x):
            KeptOutside.last = x.detach().clone()
            return x ** 2

        @staticmethod
        def backward(ctx, g):
            return 2 * KeptOutside.last * g

    def two(x):
        y = KeptOutside.apply(x)
        return y, y.sum()

    res = ga.check(two, (leaf(4),), mode=mode)
    assert res.ok, res


def test_each_output_alone_is_back_propagated_through_one_forward_of_its_own():
    """Directional mode checks each output of a function alone (vₖᵀJₖu), one backward per output. They share
    one forward, taken right before them (after the evaluations of the check of all outputs at once), so
    three outputs cost two forwards with a graph in all (the first call's and this one), not one per output;
    and a backward that is wrong for one output alone still fails there."""
    graphs = []

    def three(x):
        graphs.append(torch.is_grad_enabled())
        return x.sin(), x.cos().sum(), (x * x).mean()

    res = ga.check(three, (leaf(5),), mode="directional")
    assert res.verdict == "pass", res.report()
    assert sum(graphs) == 2, graphs

    class SecondAlone(torch.autograd.Function):
        """(x², x.sum()) with its backward."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x, x.sum()

        @staticmethod
        def backward(ctx, g1, g2):
            (x,) = ctx.saved_tensors
            return 2 * x * g1 + g2

    class DropsSecond(SecondAlone):
        """The same, but the second output's gradient is dropped when it alone receives one."""

        @staticmethod
        def backward(ctx, g1, g2):
            (x,) = ctx.saved_tensors
            return 2 * x * g1 + (g2 if bool(g1.ne(0).any()) else 0.0 * g2)

    assert ga.check(SecondAlone.apply, (leaf(4),), mode="directional").verdict == "pass"
    res = ga.check(DropsSecond.apply, (leaf(4),), mode="directional")
    assert res.verdict == "fail", res.report()
    assert "output 1 alone" in res.report()


def test_a_projections_still_and_moved_shares_are_computed_once_per_set_of_moved_elements():
    """directional._still splits autograd's vᵀJu along part of an input into the share of the output elements no
    step moved and that of the moved ones (a forward and two backwards). The shares depend on which elements moved,
    not on the step: asked again with the same moved elements (a failure judged again after the quick stage, as
    multi_head_attention_forward's sample 0 was, three times), they are reused without a forward, and only the
    bound the still elements can hold scales with the step. The expected values are the analytic ones."""
    from gradaudit import api, directional
    from gradaudit.tolerances import ROUNDING_ULPS

    calls = []

    def fn(a):
        calls.append(1)
        return torch.cat([100 + 1e-14 * torch.sin(a), 1e-19 * torch.exp(a[:1])])

    x = torch.tensor([0.3, -0.7, 0.9], dtype=F64, requires_grad=True)
    problem = api._problem(fn, (x,), None)
    u = torch.tensor([1.0, 0.0, 0.0], dtype=F64)
    ws = [torch.ones(4, dtype=F64)]
    moving = torch.tensor([False, False, False, True])  # only the small output moved
    still = directional._still(problem, 0, u, ws, lambda: [moving])
    before = len(calls)
    first = still(1e-2)
    assert len(calls) == before + 1  # one forward (and two backwards)
    second = still(1e-3)
    assert len(calls) == before + 1  # none
    eps = torch.finfo(F64).eps
    # the three still elements (100 + 1e-14 sin x, each of size max(1, |f|) = 100 to the last bit or so) can hold
    # 2 ROUNDING_ULPS eps max(1, |f_r|) |v_r| each over the step
    sizes = 100 + 1e-14 * torch.sin(x.detach())
    hidden = float((2 * ROUNDING_ULPS * eps * sizes).sum())
    assert first[0] == pytest.approx(1e-14 * math.cos(0.3), rel=1e-12)  # the still share: (J u)_0 = 1e-14 cos x0
    assert first[1] == pytest.approx(1e-19 * math.exp(0.3), rel=1e-12)  # the moved share: 1e-19 exp(x0)
    assert first[2] == pytest.approx(hidden / 1e-2, rel=1e-12)
    assert (second[0], second[1]) == (first[0], first[1])
    assert second[2] == pytest.approx(hidden / 1e-3, rel=1e-12)
    moving = torch.tensor([True, False, False, True])  # another set of moved elements: measured again
    third = still(1e-2)
    assert len(calls) == before + 2
    assert third is not None and third[0] == 0.0 and third[1] == pytest.approx(
        1e-14 * math.cos(0.3) + 1e-19 * math.exp(0.3), rel=1e-12)


class _OffLinear(torch.autograd.Function):
    """y = x w^T with dL/dw OFF times too large (relative); a float32 model's layer."""

    OFF = 3e-3

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w.t()

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w, (g.t() @ x) * (1 + _OffLinear.OFF)


class _F32Net(torch.nn.Module):
    """_OffLinear (3 -> 2), BatchNorm1d(2) (float32 running statistics), tanh; in float32 like most models."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([[0.5, -1.0, 2.0], [0.3, 0.2, -0.7]]))
        self.norm = torch.nn.BatchNorm1d(2)
        self.scale = torch.nn.Parameter(torch.tensor(1.5), requires_grad=False)  # frozen, float32

    def forward(self, x):
        return torch.tanh(self.norm(_OffLinear.apply(x, self.w)) * self.scale)


@pytest.mark.parametrize("input_dtype", [torch.float32, torch.float64])
def test_a_float32_model_is_checked_in_float64_with_its_buffers_and_inputs(input_dtype, monkeypatch):
    # the parameters ran in float64 but the inputs, buffers and frozen parameters stayed float32: the forward failed
    # (float != double), the check fell back to float32 evidence and passed a 0.3% bug (a fresh-eyes audit); a
    # float32 model given float64 inputs ended in an error verdict. Now the model runs as model.double() would
    torch.manual_seed(0)
    model, x = _F32Net(), torch.randn(4, 3).to(input_dtype)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    loss = lambda out: out.pow(2).sum()  # noqa: E731
    res = ga.check_module(model, (x,), loss)
    assert res.verdict == "fail" and res.records[0].evidence.precision == "float64"
    assert {m.input for m in res.mismatches} == {"w"}
    monkeypatch.setattr(_OffLinear, "OFF", 0.0)
    assert ga.check_module(model, (x,), loss).ok
    after = model.state_dict()  # the caller's model: float32 still, its running statistics unmoved
    assert all(after[k].dtype == v.dtype and torch.equal(after[k], v) for k, v in before.items())
    assert x.dtype == input_dtype


def test_a_pass_on_low_precision_evidence_says_how_large_a_difference_it_accepted(monkeypatch):
    # a function that refuses float64 (it closes over float32 data) is checked on float32 evidence, whose bound let a
    # backward 0.3% off pass, the report saying only "all within the allowance" (a fresh-eyes audit)
    torch.manual_seed(0)
    data = torch.randn(4, 3)  # float32, closed over
    w = torch.randn(2, 3, requires_grad=True)
    monkeypatch.setattr(_OffLinear, "OFF", 3e-3)
    res = ga.check(lambda w: torch.tanh(_OffLinear.apply(data, w)).pow(2).sum(), (w,))
    rec = res.records[0]
    assert rec.evidence.precision == "float32"
    assert res.ok  # float32 evidence cannot resolve 0.3% here (float64 evidence fails it: the test above)
    assert "differences up to 0.003 of an entry were accepted (rtol 1.3e-06" in rec.reason
    assert "give the function float64 inputs" in rec.reason


class _SquareSumOff(torch.autograd.Function):
    """sum(x^2) with the gradient of element 2 0.1% too large."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x * x).sum()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        d = 2 * x
        d[2] = d[2] * 1.001
        return g * d


def test_a_directional_failure_names_its_values_weighted_gradients():
    # directional mode's located values are (vᵀJ)_i, the gradient weighted by the random output weight (0.288 at
    # x = 3, whose gradient is 6); its table called them numeric and autograd, and a reader took them for the
    # gradient (a fresh-eyes audit). Full mode shows the entry itself: 6 against 6.006
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=F64, requires_grad=True)
    full = str(ga.check(_SquareSumOff.apply, (x,), mode="full"))
    assert "| numeric | autograd |" in full and "vᵀJ" not in full.split("evidence:")[1]
    assert "x | (2,) | 0 | () | 6 | 6.006 |" in full
    text = str(ga.check(_SquareSumOff.apply, (x,), mode="directional"))
    assert "element | numeric vᵀJ | autograd vᵀJ | abs | rel | allowed | verdict" in text
    assert "(vᵀJ: each element's gradient weighted by the random output weights v" in text


# -- check_module: what the report says of the model ------------------------------------------------------------

def test_check_module_names_a_modules_backward_hook():
    # register_full_backward_hook halving the gradient: the parameters fail (the gradient is not the loss's), and
    # the report said nothing of the hook (a fresh-eyes audit); now a note names the module
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1)).double()
    model[1].register_full_backward_hook(lambda m, gin, gout: (gin[0] * 0.5,))
    res = ga.check_module(model, (torch.linspace(-1, 1, 15, dtype=F64).reshape(5, 3),), lambda o: o.sum())
    assert res.verdict == "fail" and {r.input for r in res.records if r.verdict == "fail"} == {"0.weight", "0.bias"}
    assert "1 module (1) carries backward hooks" in str(res)
    # a hook on every module (register_module_full_backward_hook) is named too (a review)
    plain = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1)).double()
    import warnings

    handle = torch.nn.modules.module.register_module_full_backward_hook(lambda m, gin, gout: None)
    try:
        with warnings.catch_warnings():  # (torch's: the first Linear's hook cannot fire, its input needs no grad)
            warnings.simplefilter("ignore", UserWarning)
            res = ga.check_module(plain, (torch.linspace(-1, 1, 15, dtype=F64).reshape(5, 3),), lambda o: o.sum())
    finally:
        handle.remove()
    assert "every module: register_module_full_backward_hook" in str(res)


def test_check_module_refuses_a_lazy_module_that_has_not_run():
    # torch's ValueError ("uninitialized parameter in <method 'detach'>") escaped check_module (a fresh-eyes audit)
    lazy = torch.nn.LazyLinear(2).double()
    with pytest.raises(ga.SpecError, match=r"tensor\(s\) weight, bias belong to a lazy module that has not run"):
        ga.check_module(lazy, (torch.ones(4, 3, dtype=F64),), lambda o: o.sum())
    # and one whose lazy tensors are buffers alone (a review: "the function raised ValueError", the model blamed)
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.LazyBatchNorm1d(affine=False)).double()
    with pytest.raises(ga.SpecError, match=r"tensor\(s\) 1.running_mean, 1.running_var belong to a lazy module"):
        ga.check_module(model, (torch.ones(4, 3, dtype=F64),), lambda o: o.sum())


def test_check_module_refuses_a_model_on_the_meta_device_naming_its_tensors():
    model = torch.nn.Linear(4, 2, device="meta")
    with pytest.raises(ga.SpecError, match="model's 2 tensors weight, bias are on the meta device") as info:
        ga.check_module(model, (torch.randn(3, 4),))
    assert info.value.field == "model" and "to_empty" in str(info.value)


def test_check_module_names_a_parameter_the_forward_renormalizes_in_place():
    # Embedding(max_norm=0.5) rescales the rows it looks up, in place under no_grad: a different point at every
    # evaluation. The error names the parameter and the cause, not "work on a copy inside the function"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(5, 3, max_norm=0.5), torch.nn.Linear(3, 1))
    before = model[0].weight.detach().clone()
    res = ga.check_module(model, (torch.tensor([0, 2, 4]),), lambda o: o.sum())
    assert res.verdict == "error"
    message = res.records[0].error.message
    assert "'0.weight' in place" in message and "max_norm=0.5" in message and "max_norm=None" in message
    assert "inside the function" not in message
    assert torch.equal(model[0].weight, before)  # the caller's weight: the check ran on copies


def test_check_module_says_which_parameters_carry_hooks_it_does_not_run():
    # functional_call runs the model on copies of the parameters: a hook registered on a parameter (g * 1.5) does
    # not run, so the check judges the loss's gradient, not the .grad training sees; the report says so
    model = torch.nn.Linear(4, 2)
    model.weight.register_hook(lambda g: g * 1.5)
    res = ga.check_module(model, (torch.randn(3, 4),), lambda o: o.pow(2).sum())
    assert res.verdict == "pass"
    (note,) = [n for n in res.info["notes"] if "hooks" in n]
    assert note.startswith("1 parameter (weight) carries hooks") and "may differ" in note
    assert note in res.records[0].evidence.notes


def test_a_parameter_autograd_leaves_at_none_passes_saying_so():
    # d/d(b) of sum(a^2) is 0: autograd gives None, the numeric entries are 0, and the record says which
    a = torch.tensor([0.5, -1.0], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([2.0], dtype=torch.float64, requires_grad=True)
    res = ga.check(lambda a, b: (a * a).sum(), (a, b), names=["a", "b"])
    assert res.verdict == "pass"
    assert "autograd gives None for 'b'" in res.records[1].reason
    assert "None" not in res.records[0].reason


def test_the_same_tensor_passed_twice_is_checked_per_argument_and_said_so():
    # f(a, b) = a * b with a backward that gives b's share to a: at a = b = x the caller's x.grad is 2x, right, but
    # each argument's own gradient (b and a) is wrong; gradaudit checks the arguments apart, and the note says so
    class Lopsided(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * (a + b), torch.zeros_like(b)

    x = torch.tensor([0.5, -1.0], dtype=torch.float64, requires_grad=True)
    res = ga.check(Lopsided.apply, (x, x), names=["a", "b"])
    assert res.verdict == "fail"
    assert any("'b' is the same tensor as 'a'" in n for n in res.info["notes"])


def test_a_dtype_argument_is_written_into_the_re_run_line():
    x = torch.tensor([0.3, -0.2], dtype=torch.float64, requires_grad=True)
    res = ga.check(lambda x, dt: x.sin().to(dt), (x, torch.float64))
    assert "torch.float64))" in res.records[0].rerun and "inputs: the tensors checked" not in res.records[0].rerun


class _TanhInFloat32(torch.nn.Module):
    """tanh computed in float32 and returned in its input's dtype, as RMSNorm or softmax in float32 inside a model."""

    def forward(self, h):
        return torch.tanh(h.float()).to(h.dtype)


def _cast_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 6), _TanhInFloat32(), torch.nn.Linear(6, 2)), torch.randn(3, 4)


def _weighted_sum(o):
    return (o * torch.arange(o.numel(), dtype=o.dtype).reshape(o.shape)).sum()


@pytest.mark.parametrize("seed", [2, 4, 5])
def test_a_float32_model_computing_in_float32_inside_is_never_failed(seed):
    # check_module runs a float32 model as model.double() would, but h.float() inside keeps part of it in float32: the
    # function is a staircase at float32's steps (its central differences at 1e-5 wander by 1e-3), though its
    # backward is right (autograd's 0.2127092 at 0.weight[1, 1], seed 2, against 0.2127092 from the same model in
    # float64 without the cast). A tableau from steps of 1e-7 crossing a few stairs read 0.23352 +- 3e-7 and the
    # right backward FAILED. The cast is seen; the evidence has float32's precision, and the verdict says what it can
    model, x = _cast_model(seed)
    for mode in ("full", "directional"):
        res = ga.check_module(model, (x,), _weighted_sum, mode=mode)
        assert res.verdict in ("pass", "inconclusive"), (mode, str(res))
        assert any("computes in float32 inside" in n for n in res.info["notes"])


def test_a_one_percent_bug_in_a_model_computing_in_float32_inside_still_fails():
    class Off(torch.autograd.Function):  # the identity, its backward 1% off at feature 1
        @staticmethod
        def forward(ctx, h):
            return h.clone()

        @staticmethod
        def backward(ctx, g):
            g = g.clone()
            g[..., 1] *= 1.01
            return g

    class Bugged(torch.nn.Module):
        def forward(self, h):
            return Off.apply(h)

    model, x = _cast_model(2)
    model = torch.nn.Sequential(model[0], model[1], Bugged(), model[2])
    for mode in ("full", "directional"):
        res = ga.check_module(model, (x,), _weighted_sum, mode=mode)
        assert res.verdict == "fail", mode
        assert {c.location.input for c in res.mismatches if c.verdict == "fail"} & {"0.weight", "0.bias"}


def _opaque_float32(f, df, scale=1.0):
    """f computed in float32 inside a custom autograd.Function (the graph shows one node, float64 in and out), its
    backward the float64 derivative *df*, off by *scale* at flat element 1."""
    class Opaque(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return f(x.float()).to(x.dtype)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            d = (g * df(x)).clone()
            d.view(-1)[1] *= scale
            return d

    return Opaque.apply


@pytest.mark.parametrize("mode", ["full", "directional"])
@pytest.mark.parametrize("op,seed", [("erf_small", 0), ("log_small", 0), ("tanh_big", 0), ("tanh_big", 1)])
def test_a_float32_cast_inside_a_custom_function_is_found_from_its_values(op, seed, mode):
    # the cast does not show on the graph (one node, float64 in and out), so the evidence was float64's: on the
    # staircase at float32's steps a right backward FAILED (erf at [0.109, 0.158, 0.036, 0.044]: numeric 1.10269
    # against 1.10046, allowed 2.6e-9; tanh at 3 to 9, where float32's tanh is flat: numeric 0 against -1.7e-7).
    # Its values are float32's at the point and where every element is moved by 1.3e-5 of itself, which a float64
    # computation's never are: the evidence has float32's precision, as for a cast the graph shows
    f, df, lo, hi, n = {"erf_small": (torch.erf, lambda x: 2 / math.pi ** 0.5 * torch.exp(-x * x), 0.02, 0.2, 4),
                        "log_small": (torch.log, lambda x: 1 / x, 0.02, 0.2, 20),
                        "tanh_big": (torch.tanh, lambda x: 1 - torch.tanh(x) ** 2, 3.0, 9.0, 20)}[op]
    # (seed 1: of tanh's values at 3 to 9 only two move with the probe, 1 - 2912 2^-24 and 1 - 58424 2^-24, their
    # trailing zeros more than float32's by chance: read with the point's values, they are float32's)
    x = torch.rand(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float32) * (hi - lo) + lo
    res = ga.check(_opaque_float32(f, df), (x.double().requires_grad_(),), mode=mode)
    assert res.verdict in ("pass", "inconclusive"), str(res)
    assert any("the values of its output are float32's at the point and with every checked element moved" in note
               for note in res.info["notes"]), res.info.get("notes")


@pytest.mark.parametrize("mode", ["full", "directional"])
def test_a_one_percent_bug_behind_an_unseen_float32_cast_still_fails(mode):
    x = torch.linspace(0.5, 2.0, 4, dtype=torch.float64)
    for f, df in ((torch.tanh, lambda x: 1 - torch.tanh(x) ** 2), (torch.sin, torch.cos)):
        res = ga.check(_opaque_float32(f, df, 1.01), (x.clone().requires_grad_(),), mode=mode)
        assert res.verdict == "fail", str(res)
        assert any("are float32's at the point" in note for note in res.info["notes"])


@pytest.mark.parametrize("fn", [torch.relu, torch.abs, lambda x: x * 1.0, lambda x: torch.cat([x, x.max().reshape(1)])])
def test_inputs_made_in_float32_and_passed_through_are_not_taken_for_a_cast(fn):
    # values made in float32 and cast to float64 (torch.randn(5).double()) pass through relu on float32's grid; moved
    # by 1.3e-5 of themselves they leave it, as any float64 computation's values do: no cast, float64 evidence
    x = torch.randn(5, generator=torch.Generator().manual_seed(3)).double().requires_grad_()
    res = ga.check(fn, (x,))
    assert res.verdict == "pass", str(res)
    assert not any("float32" in n for n in res.info.get("notes", []))


def test_small_integer_values_are_a_staircase_of_their_own_not_a_cast():
    # floor's values are integers at every point (on bfloat16's grid too): no cast is inferred from them
    x = torch.tensor([0.3, 1.7, -2.2, 5.5], dtype=torch.float64, requires_grad=True)
    for fn in (torch.floor, lambda x: x * 0 + 1):
        res = ga.check(fn, (x,))
        assert not any("grid" in n or "float32" in n or "bfloat16" in n for n in res.info.get("notes", [])), fn


def test_on_grid_takes_only_values_with_float32s_own_precision_for_float32s():
    on_grid = ga_evaluate.on_grid
    made = torch.randn(8, generator=torch.Generator().manual_seed(0))  # float32 values, 24 significant bits
    assert on_grid(made.double()) == torch.float32
    assert on_grid(torch.cat([made.double(), torch.ones(3, dtype=torch.float64)])) == torch.float32  # 1.0: saturated
    assert on_grid(made.double() + 2 ** -40) is None  # moved off the grid, as a float64 computation's values are
    assert on_grid(torch.tensor([0.1], dtype=torch.float64)) is None  # 0.1 in float64 is not a float32
    assert on_grid(torch.tensor([1.0, 0.5, -2.0, 3.0], dtype=torch.float64)) is None  # round values say nothing
    # (1 + 1e-12 sin x) - 1: multiples of 2^-52, each a float32 of at most 13 significant bits (its own quantum)
    assert on_grid(torch.tensor([2166.0, 3632.0, -1136.5, -2717.0, 3584.0], dtype=torch.float64) * 2 ** -52) is None
    assert on_grid(torch.cat([made.double(), torch.tensor([math.inf], dtype=torch.float64)])) is None
    assert on_grid(torch.tensor([1e39], dtype=torch.float64)) is None  # beyond float32's range
    assert on_grid(made) is None  # only float64 values are asked about
    assert on_grid(torch.zeros(0, dtype=torch.float64)) is None
    assert on_grid(torch.zeros(3, dtype=torch.float64)) is None
    # over SMALL_GRID values the same rule on tensors: float32's own, moved off, a quantum's multiples, a 0.1 among them
    many = torch.randn(200, generator=torch.Generator().manual_seed(1)).double()
    assert many.numel() > ga_evaluate.SMALL_GRID
    assert on_grid(many) == torch.float32
    assert on_grid(torch.cat([torch.zeros(10, dtype=torch.float64), many])) == torch.float32  # (0 first: screened on)
    assert on_grid(many + 2 ** -40) is None
    assert on_grid(torch.arange(1, 201, dtype=torch.float64) * 2 ** -52) is None  # at most 8 significant bits
    assert on_grid(torch.cat([many, torch.tensor([0.1], dtype=torch.float64)])) is None
    assert on_grid(torch.cat([many, torch.tensor([math.nan], dtype=torch.float64)])) is None


def test_a_float64_function_without_a_cast_inside_keeps_float64_evidence():
    x = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64, requires_grad=True)
    res = ga.check(lambda x: torch.tanh(x) * (x > 0).float(), (x,))  # a float32 mask from a comparison: no value cast
    assert res.verdict == "pass"
    assert not any("inside" in n for n in res.info.get("notes", []))


@pytest.mark.parametrize("at", [1e300, 1e200, 1e160])
@pytest.mark.parametrize("mode", ["full", "directional"])
def test_a_gradient_below_float64s_range_is_not_failed(at, mode):
    # d/dx 1/x = -1/x^2: -1e-600, -1e-400 and -1e-320 at these points; float64 holds the first two as -0.0 and the
    # third as a subnormal, each correctly rounded (to within half of 2^-1074). Along u = max(1, |x|) the projection
    # scaled that floor by 1e300 and FAILED autograd's -0.0 against the evidence's 1e-300 ("abs 0, allowed 0")
    for values in ([at], [at, 3.0]):
        x = torch.tensor(values, dtype=torch.float64, requires_grad=True)
        assert ga.check(torch.reciprocal, (x,), mode=mode).verdict == "pass", values


def _off_at_1(scale):
    """The identity, its backward off by *scale* at flat element 1."""
    class Off(torch.autograd.Function):
        @staticmethod
        def forward(ctx, h):
            return h.clone()

        @staticmethod
        def backward(ctx, g):
            g = g.clone()
            g.view(-1)[1] *= scale
            return g

    return Off.apply


@pytest.mark.parametrize("mode", ["full", "directional"])
def test_a_float32_parameter_beside_the_checked_input_does_not_make_the_function_float32(mode):
    # tanh(x * alpha) with alpha a float32 nn.Parameter (not checked): x * alpha is float64 (type promotion), so the
    # function computes in float64 throughout; the float32 leaf made the check round its outputs to float32, and a
    # backward off by 1e-5 went from FAIL to inconclusive. Only what lies between the checked inputs and an output
    # counts
    alpha = torch.nn.Parameter(torch.tensor(0.5))
    x = torch.linspace(0.3, 1.7, 5, dtype=torch.float64)
    for scale, want in ((1.0, "pass"), (1 + 1e-5, "fail")):
        fn = (lambda b: lambda x: torch.tanh(b(x) * alpha))(_off_at_1(scale))
        res = ga.check(fn, (x.clone().requires_grad_(),), mode=mode)
        assert res.verdict == want, (scale, str(res))
        assert not any("inside" in n for n in res.info.get("notes", []))


def test_only_the_outputs_computed_in_float32_are_taken_in_float32():
    # (sin x, cos(x.float())): the first output is float64 all the way, and a backward off by 1e-6 there fails; the
    # second is float32's, and the note names it alone
    x = torch.linspace(0.3, 1.7, 5, dtype=torch.float64)
    b = _off_at_1(1 + 1e-6)
    res = ga.check(lambda x: (torch.sin(b(x)), torch.cos(x.float()).double()), (x.clone().requires_grad_(),),
                   mode="full")
    assert res.verdict == "fail"
    assert {(m.location.output, m.location.element) for m in res.mismatches if m.verdict == "fail"} == {(0, (1,))}
    assert any("output 1 were taken in float32" in n for n in res.info["notes"])


def _sort_with_indices(scale):
    """sort along dim 0 in float64, its indices returned marked non-differentiable (as torch.sort's); the backward
    scatters grad_output back to where each value came from, times *scale* at flat element 1 of the input."""
    class Sort(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y, i = torch.sort(x.detach(), dim=0)
            ctx.mark_non_differentiable(i)
            ctx.save_for_backward(i)
            return y, i

        @staticmethod
        def backward(ctx, gy, gi):
            (i,) = ctx.saved_tensors
            g = torch.zeros_like(gy).scatter_(0, i, gy)
            g.view(-1)[1] *= scale
            return g

    return Sort.apply


@pytest.mark.parametrize("mode", ["full", "directional"])
def test_an_autograd_function_with_non_differentiable_indices_keeps_float64_evidence(mode):
    # the node of a Function that returns indices marked non-differentiable holds, for them, placeholder entries
    # (float32 scalars) among its outputs' dtypes: the float64 sort read as computed in float32, and was
    # INCONCLUSIVE (float32 evidence, "coarse") where gradcheck passes; so were custom_op_db's NumpySortCustomOp
    # and NumpySplitCopyWithIntCustomOp. The gradient of a sort is a permutation of grad_output (exact), so a
    # backward off by 1e-8 at one element is wrong there by 1e-8 of it
    x = torch.tensor([[0.3, -1.2, 2.0], [1.1, 0.4, -0.7], [-0.2, 0.9, 1.6]], dtype=torch.float64)
    for scale, want in ((1.0, "pass"), (1 + 1e-6, "fail"), (1 + 1e-8, "fail" if mode == "full" else None)):
        res = ga.check(_sort_with_indices(scale), (x.clone().requires_grad_(),), mode=mode)
        if want is not None:
            assert res.verdict == want, (scale, str(res))
        assert not any("inside" in n for n in res.info.get("notes", [])), res.info.get("notes")
        assert any("int64 tensor, not differentiable" in n for n in res.info["notes"])


@pytest.mark.parametrize("mode", ["full", "directional"])
def test_a_float32_intermediate_returned_beside_float64_work_is_still_found(mode):
    # a Function that computes a = sin(x.float()) and returns (a, a.double() * x), of which the caller uses the
    # float64 one: on the graph its node holds a float32 output off the path. Counting only the path's output (a
    # first form of the change for placeholders, found by a review) missed the float32 work, and the right backward
    # FAILED full mode on float64 evidence; a real output off the path counts, as it did before, and is noted
    class AuxMain(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            a = torch.sin(x.float())
            ctx.save_for_backward(x)
            return a, a.double() * x

        @staticmethod
        def backward(ctx, ga_, gm):
            (x,) = ctx.saved_tensors
            g = gm * (torch.sin(x) + x * torch.cos(x))  # d/dx (x sin x), exact in float64
            return g if ga_ is None else g + ga_.double() * torch.cos(x)

    x = torch.linspace(0.3, 1.7, 6, dtype=torch.float64)
    res = ga.check(lambda x: AuxMain.apply(x)[1] + 0.37 * x, (x.clone().requires_grad_(),), mode=mode)
    assert res.verdict != "fail", str(res)
    assert any("AuxMainBackward in float32" in n for n in res.info["notes"]), res.info.get("notes")


@pytest.mark.parametrize("mode", ["full", "directional"])
def test_outputs_beyond_float32s_range_are_not_rounded_to_it(mode):
    # 1e40 x + tanh(x.float()) is right; rounded to float32 its outputs read inf (not checked), and
    # 1e-45 x (1 + 1e-3 tanh(x.float())) underflowed to subnormals and FAILED in directional mode
    x = torch.linspace(0.3, 1.7, 3, dtype=torch.float64)
    for fn in (lambda x: 1e40 * x + torch.tanh(x.float()), lambda x: 1e-45 * x * (1 + 1e-3 * torch.tanh(x.float()))):
        res = ga.check(fn, (x.clone().requires_grad_(),), mode=mode)
        assert res.verdict != "fail", str(res)
        assert not any("inside" in n for n in res.info.get("notes", []))


def test_a_float32_only_function_of_two_outputs_fails_a_bug_in_its_second():
    # 2x and sin x in float32 only, the backward of sin 20% off at element 1: the Richardson stage's estimates were
    # kept per column from the first output at which it went on, and read by output: an IndexError, not a FAIL
    class Two(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            if x.dtype != torch.float32:
                raise TypeError("float32 only")
            ctx.save_for_backward(x)
            return 2 * x, torch.sin(x)

        @staticmethod
        def backward(ctx, g0, g1):
            (x,) = ctx.saved_tensors
            d = g1 * torch.cos(x)
            d.view(-1)[1] *= 1.2
            return 2 * g0 + d

    x = torch.rand(6, generator=torch.Generator().manual_seed(0)) * 1.5 + 0.5
    res = ga.check(Two.apply, (x.requires_grad_(),), mode="full")
    assert res.verdict == "fail"
    assert {(m.location.output, m.location.element) for m in res.mismatches if m.verdict == "fail"} == {(1, (1,))}


def test_embedding_whose_max_norm_changes_nothing_is_checked():
    # F.embedding renormalizes the rows it looks up in place at every forward, which moves the weight's version
    # counter even where every norm is below max_norm (100 here, norms 0.7 to 2.7): nothing changes, and the
    # gradient is checked (it was an error naming an in-place write)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(5, 3, max_norm=100.0), torch.nn.Linear(3, 1))
    assert ga.check_module(model, (torch.tensor([0, 2, 4]),), lambda o: o.sum()).verdict == "pass"


def test_a_directional_pass_says_it_judged_projections():
    x = torch.linspace(0.3, 1.7, 6, dtype=torch.float64, requires_grad=True)
    res = ga.check(torch.sin, (x,), mode="directional")
    assert res.verdict == "pass" and "judged through projections" in res.records[0].reason


def test_the_evidence_header_states_float32_for_a_cast_inside_whatever_the_verdict():
    x = torch.tensor([0.3, 1.1, -0.7], dtype=torch.float64, requires_grad=True)
    res = ga.check(lambda x: torch.tanh(x.float()).double() * 3, (x,), mode="directional")
    assert res.records[0].evidence.precision == "float32", str(res)


def test_a_fallback_to_the_inputs_own_dtype_starts_without_the_first_attempts_float32():
    # the first attempt (float64 copies) saw x.float() inside and took the outputs in float32; the function then
    # refused float64 on its determinism call, and the check fell back to the float32 inputs, whose function is
    # float64-valued there (x.double() inside): nothing is coarser than the inputs, so nothing is rounded
    calls = []

    def fn(x):
        calls.append(x.dtype)
        if x.dtype == torch.float64 and len(calls) > 1:
            raise TypeError("float64 only once")
        return torch.tanh(x.float()).double() if x.dtype == torch.float64 else torch.tanh(x.double())

    x = torch.tensor([0.3, -0.8], dtype=torch.float32, requires_grad=True)
    res = ga.check(fn, (x,))
    assert res.verdict in ("pass", "inconclusive"), str(res)
    assert not any("computes in float32 inside" in n for n in res.info.get("notes", []))
    assert any("failed in float64" in n for n in res.info.get("notes", []))


def test_one_error_shared_by_every_parameter_prints_its_traceback_once():
    # a model given an input of the wrong shape raises once per check, and every parameter's record holds that
    # error: the report printed the same traceback for the weight and again for the bias
    model = torch.nn.Linear(3, 2).double()
    res = ga.check_module(model, (torch.ones(4, 5, dtype=torch.float64),))
    assert res.verdict == "error"
    assert [r.verdict for r in res.records] == ["error", "error"]
    from gradaudit.render.text import error_lines

    text = str(res)
    assert res.records[1].error == res.records[0].error
    shown = "\n".join(error_lines(res.records[0].error))  # the message and the traceback's last lines
    assert shown in text and text.count(shown) == 1
    assert text.count("shapes cannot be multiplied") == text.count(res.records[0].error.message) == shown.count(
        "shapes cannot be multiplied")
    assert "input 'bias' (vjp): ERROR" in text
    assert "the same RuntimeError as input 'weight' above" in text


def _squares_with_a_broken_backward(value_at_1, value_at_2):
    """x -> x * x, whose backward writes *value_at_1* and *value_at_2* at elements 1 and 2 (whatever grad_output)."""
    class Broken(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            out = (2 * x * g).clone()
            out[1], out[2] = value_at_1, value_at_2
            return out
    return Broken.apply


@pytest.mark.parametrize("mode", ["full", "directional"])
def test_an_infinite_difference_is_written_inf_not_as_the_largest_float(mode):
    # autograd's inf where the numeric derivative is 6 (and 0 elsewhere in its column): the difference is infinite.
    # The record said max_abs 1.7976931348623157e+308 and max_rel the same (nan_to_num's largest float), the
    # linearity comparison "differ by up to 1.8e+308", while the rows showed inf; directional mode divided that
    # largest float by the element's size (3) and reported a difference and an allowance of 5.99e+307
    fn = _squares_with_a_broken_backward(4.0, math.inf)  # element 1 right (2 x 2), element 2 infinite
    x = torch.tensor([1.0, 2.0, 3.0], dtype=F64, requires_grad=True)
    res = ga.check(fn, (x,), mode=mode)
    assert res.verdict == "fail"
    d = res.records[0].discrepancy
    assert d.max_abs == math.inf and d.max_rel == math.inf
    assert d.at.element == (2,)
    text = str(res)
    assert "e+308" not in text and "e+307" not in text
    assert "Greatest absolute difference: inf at 'x' element (2,)" in text
    linearity = [c for c in d.worst if c.kind == "grad-output-linearity"]
    assert linearity and "differ by up to inf" in linearity[0].reason
    body = res.records[0].to_dict()["discrepancy"]
    assert body["max_abs"] == "Infinity" and body["max_rel"] == "Infinity"


def test_a_nan_difference_is_the_greatest_one_reported():
    # autograd's NaN at element 1 and a wrong but finite 7 at element 2 (numeric 6): NaN compares false with every
    # number, so the greatest difference was whichever came first; the record counts a NaN as infinite, and the
    # report now names the NaN's place, with the value it has
    fn = _squares_with_a_broken_backward(math.nan, 7.0)
    x = torch.tensor([1.0, 2.0, 3.0], dtype=F64, requires_grad=True)
    res = ga.check(fn, (x,), mode="full")
    d = res.records[0].discrepancy
    assert d.max_abs == math.inf and d.at.element == (1,)
    line = next(line for line in str(res).splitlines() if "Greatest absolute difference" in line)
    assert line.strip().startswith("Greatest absolute difference: nan at 'x' element (1,)"), line


def test_an_error_shows_whole_frames_of_the_users_code_and_its_message_once():
    # the excerpt was the traceback's last 6 lines: it began with a frame's code line and no 'File' line above it,
    # ended with the message the first line had said, and for a backward of the wrong shape held only gradaudit's
    # evaluate.py and torch's graph.py
    model = torch.nn.Linear(3, 2).double()
    res = ga.check_module(model, (torch.ones(5, 4, dtype=F64),), loss_fn=lambda out: out.sum())
    lines = str(res).splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("error:"))
    assert lines[at + 1].strip().startswith("File "), lines[at:at + 3]
    assert str(res).count("shapes cannot be multiplied") == 1

    class WrongShape(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * x

        @staticmethod
        def backward(ctx, g):
            return g.sum()

    text = str(ga.check(WrongShape.apply, (torch.tensor([1.0, 2.0], dtype=F64, requires_grad=True),)))
    assert "returned an invalid gradient" in text
    assert "evaluate.py" not in text and "graph.py" not in text and "Traceback (most recent" not in text

    def helper(x):
        raise ValueError("boom in the user's helper")

    def user_function(x):
        return helper(x)

    text = str(ga.check(user_function, (torch.tensor([1.0], dtype=F64, requires_grad=True),)))
    assert "in user_function" in text and "in helper" in text
    assert text.count("ValueError: boom in the user's helper") == 1  # (the raise line shows the text once more)


def test_the_default_tolerance_says_the_evidence_term_once():
    # "plus 10 × the evidence's error bound (default: ...; plus 10 x the numeric evidence's own error bound)"
    text = str(ga.check(torch.sin, (torch.tensor([0.5], dtype=F64, requires_grad=True),)))
    line = next(line for line in text.splitlines() if line.startswith("tolerance:"))
    assert "plus 10 × the evidence's error bound" in line
    assert line.count("error bound") == 1


@pytest.mark.parametrize("mode", ["full", "directional"])
def test_an_infinite_gradient_where_the_true_one_is_finite_has_an_infinite_relative_difference(mode):
    # a reviewer's case: inf instead of 2 x = 6 at x = 3 (and no other entry in its column); the largest float the
    # judge keeps for an infinite difference, divided by |6|, read as a finite max_rel of 3e307 in full mode
    class InfiniteAtThree(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            d = torch.where(x > 1.0, torch.full_like(x, math.inf), 2 * x)
            return torch.where(g != 0, g * d, torch.zeros_like(g))

    res = ga.check(InfiniteAtThree.apply, (torch.tensor([0.5, 3.0], dtype=F64, requires_grad=True),), mode=mode)
    d = res.records[0].discrepancy
    assert res.verdict == "fail" and d.max_abs == math.inf and d.max_rel == math.inf


def test_an_error_excerpt_keeps_a_chained_cause_stays_short_and_says_the_message_once():
    # a reviewer's cases: the excerpt dropped a chained cause's message (its lines followed a filtered torch frame),
    # grew without limit from a frame boundary (a 40-line message: 46 lines), and repeated a message whose type
    # the traceback qualifies (torch._C._LinAlgError) or that is empty (a bare "ValueError" line)
    def chained(x):
        try:
            torch.autograd.grad(x.detach().sum(), x)
        except RuntimeError as exc:
            raise ValueError("my wrapper failed") from exc
        return x

    text = str(ga.check(chained, (torch.tensor([0.5], dtype=F64, requires_grad=True),)))
    assert "RuntimeError: element 0 of tensors does not require grad" in text
    assert "The above exception was the direct cause of the following exception:" in text
    assert "graph.py" not in text and text.count("ValueError: my wrapper failed") == 1

    def long_message(x):
        raise ValueError("\n".join(f"detail line {i}" for i in range(40)))

    lines = str(ga.check(long_message, (torch.tensor([0.5], dtype=F64, requires_grad=True),))).splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("error:"))
    shown = [line for line in lines[at + 1:] if not line.startswith("re-run:")]
    assert 0 < len(shown) <= 12 and not any(line.strip().startswith("detail line") for line in shown)

    def cholesky(a):
        return torch.linalg.cholesky(a) * 2

    text = str(ga.check(cholesky, (torch.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=F64, requires_grad=True),)))
    assert text.count("not positive-definite (the leading minor") == 1

    def bare(x):
        raise ValueError()

    text = str(ga.check(bare, (torch.tensor([0.5], dtype=F64, requires_grad=True),)))
    assert "error:      ValueError\n" in text and "\n    ValueError\n" not in text + "\n"


def test_a_non_finite_value_shows_no_allowance_carrying_its_inf():
    # a directional failure where autograd gives inf: the row said "up to inf allowed" (5.99e+307 before) and the
    # evidence line "error bound at most inf", though the numeric evidence is finite
    fn = _squares_with_a_broken_backward(4.0, math.inf)
    res = ga.check(fn, (torch.tensor([1.0, 2.0, 3.0], dtype=F64, requires_grad=True),), mode="directional")
    text = str(res)
    assert res.verdict == "fail"
    assert "inf allowed" not in text and "error bound at most inf" not in text
    assert "Greatest absolute difference: inf at 'x' element (2,)" in text


def test_the_message_of_an_exception_class_defined_in_a_function_is_said_once():
    # the traceback names it test_....<locals>.Local: the excerpt kept that line, repeating the message
    class Local(Exception):
        pass

    def f(x):
        raise Local("a local class's message")

    text = str(ga.check(f, (torch.tensor([1.0], dtype=F64, requires_grad=True),)))
    assert text.count("Local: a local class's message") == 1


def _float32_only(f, df=None, scale=1.0):
    """f(*xs) on float32 inputs only (float64 is refused: the check runs on float32 evidence), its backward the float64
    derivative *df* (one input) or autograd's in float64 (*df* None), rounded to float32; off by *scale* at flat
    element 1 of the first input's gradient."""
    class Float32Only(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *xs):
            if any(x.dtype != torch.float32 for x in xs):
                raise TypeError("float32 only")
            ctx.save_for_backward(*xs)
            return f(*xs)

        @staticmethod
        def backward(ctx, g):
            xs = [x.double().requires_grad_() for x in ctx.saved_tensors]
            if df is not None:
                grads = [g.double() * df(xs[0].detach())]
            else:
                with torch.enable_grad():
                    grads = list(torch.autograd.grad(f(*xs), xs, g.double()))
            grads[0] = grads[0].clone()
            grads[0].view(-1)[1] *= scale
            return tuple(d.to(torch.float32) for d in grads)

    return Float32Only.apply


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "erf", "sin"])
def test_a_one_percent_bug_of_a_float32_only_function_fails_directional_mode(name):
    # on float32 inputs the quick stage's step was float64's, 7e-4, and its rounding bound about 1e-3 of the value;
    # where it rejected, Ridders from 1e-2 accepted on a bound of 3e-4: a backward 1% off at one of 4 elements PASSED
    # directional mode 12 times of 12 (full mode failed 9). Now the step is 0.039 (Richardson's best for float32's
    # eps), and a rejection confirmed at half the steps stands against Ridders' coarser bound
    f, df = {"tanh": (torch.tanh, lambda x: 1 - torch.tanh(x) ** 2),
             "sigmoid": (torch.sigmoid, lambda x: torch.sigmoid(x) * (1 - torch.sigmoid(x))),
             "erf": (torch.erf, lambda x: 2 / math.pi ** 0.5 * torch.exp(-x * x)),
             "sin": (torch.sin, torch.cos)}[name]
    for seed in range(3):
        x = torch.rand(4, generator=torch.Generator().manual_seed(seed)) * 1.5 + 0.5
        right = ga.check(_float32_only(f, df, 1.0), (x.clone().requires_grad_(),), mode="directional")
        assert right.verdict == "pass", str(right)
        wrong = ga.check(_float32_only(f, df, 1.01), (x.clone().requires_grad_(),), mode="directional")
        assert wrong.verdict == "fail", str(wrong)


def test_a_float32_quick_stage_across_a_kink_or_a_period_does_not_fail_a_right_backward():
    # float32 inputs get quick steps of 0.039 max(1, |x|): across a kink the estimate moves as 1/h, and steps of a
    # whole period read a flat function. A rejection there stood against Ridders' coarser bound and FAILED right
    # backwards (a reviewer's counts: elu at 0.01-0.05 4 of 660, huber with delta 1e-3 18 of 96, cdist of points 5e-4
    # apart, sin at 161.107, where 0.039 x = 2 pi). Now a rejection stands only where a second quick stage at 3/4 of
    # the steps repeats it, converged, and what the float32 steps leave open goes the float64 step's way
    import torch.nn.functional as F

    cases = []
    for seed in range(3):
        x = torch.rand(5, generator=torch.Generator().manual_seed(seed)) * 0.04 + 0.01
        cases.append((_float32_only(F.elu), (x,)))
    x = (torch.rand(4, generator=torch.Generator().manual_seed(4)) - 0.5) * 0.06  # huber's kinks at +-1e-3
    cases.append((_float32_only(lambda x: F.huber_loss(x, torch.zeros_like(x), delta=1e-3, reduction="none")),
                  (x,)))
    g = torch.Generator().manual_seed(3)
    a = (torch.rand(4, generator=g) - 0.5) * 0.1
    torch.rand(4, generator=g)
    b = a + (torch.rand(4, generator=g) - 0.5) * 1e-3  # the cone's tip 5e-4 away
    cases.append((_float32_only(lambda a, b: torch.cdist(a.reshape(2, 2), b.reshape(2, 2))), (a, b)))
    cases.append((_float32_only(torch.sin), (torch.tensor([161.10731556870735]),)))
    for fn, xs in cases:
        res = ga.check(fn, tuple(x.clone().requires_grad_() for x in xs), mode="directional")
        assert res.verdict != "fail", str(res)


def test_unresolved_pair_is_the_two_passes_it_replaces():
    # full mode's two passes over the entries central differences leave open (without and with the evidence seen)
    # are made in one for small problems: the same floats, to the bit
    from gradaudit import full as ga_full

    calls = []
    real = ga_full._unresolved_pair

    def spy(problem, j, analytic, banded, tol, vs, base, seen):
        pair = real(problem, j, analytic, banded, tol, vs, base, seen)
        calls.append((pair, (ga_full._unresolved_terms(problem, j, analytic, banded, tol, vs, base),
                             ga_full._unresolved_terms(problem, j, analytic, banded, tol, vs, base, seen))))
        return pair

    ga_full._unresolved_pair = spy
    try:
        for seed in range(3):
            x = torch.randn(4, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) + 0.1
            for fn in (lambda x: (x ** 3).sum() * 460.0, torch.sigmoid, lambda x: torch.cumsum(x.sin(), 0) + 1e3):
                ga.check(fn, (x.clone().requires_grad_(),), mode="full")
    finally:
        ga_full._unresolved_pair = real
    assert len(calls) == 9
    assert any(pair[1] is not None for pair, _ in calls)  # (some pass leaves entries open: the comparison says so)
    for pair, separate in calls:
        assert [None if t is None else list(t) for t in pair] == [None if t is None else list(t) for t in separate]


def test_a_seeded_generator_draws_as_manual_seed_does():
    for seed in (0, 1, 12345, 2 ** 40):
        a, b = ga_evaluate.seeded_generator(seed), torch.Generator().manual_seed(seed)
        assert torch.equal(torch.rand(50, generator=a, dtype=torch.float64),
                           torch.rand(50, generator=b, dtype=torch.float64))
        assert torch.equal(torch.randn(7, generator=a), torch.randn(7, generator=b))  # (the normal cache too)
        assert a.initial_seed() == b.initial_seed() == seed


def test_kept_first_draws_are_what_rand_draws_call_after_call():
    """evaluate.first_draws stands in for a fresh seeded generator's first float64 rand draws (the output weights of
    a small check): the same values, split over several calls in turn, for seeds beyond those it keeps."""
    for seed in (0, 17, 2 ** 40, *range(100, 100 + 2 * ga_evaluate.SEEDED_KEPT)):
        gen = torch.Generator().manual_seed(seed)
        called = [torch.rand(shape, generator=gen, dtype=torch.float64).reshape(-1).tolist()
                  for shape in ((), (3,), (2, 5), (1,))]
        drawn = ga_evaluate.first_draws(seed, 15)
        assert drawn == [v for values in called for v in values]
        assert ga_evaluate.first_draws(seed, ga_evaluate.FIRST_DRAWS) == torch.rand(
            ga_evaluate.FIRST_DRAWS, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).tolist()
    assert ga_evaluate.first_draws(0, ga_evaluate.FIRST_DRAWS + 1) is None
    assert len(ga_evaluate._FIRST_DRAWS) <= ga_evaluate.SEEDED_KEPT


@pytest.mark.parametrize("mode", ["directional", "full"])
def test_directions_from_kept_draws_are_the_generators(mode):
    """directional's random directions (and the factors of several inputs) for a few elements come from the kept
    first draws of their stream: the same check with them and with the generator gives the same records and info,
    directional mode and full mode's confirmations alike (a function whose entries central differences leave open,
    so that they run, one input with two elements held still among them)."""
    def f(x, y, z):
        return torch.cat([(1e-9 * torch.sin(x)).reshape(-1), (x.sum() * y).reshape(-1), (z ** 3).reshape(-1)])

    x = torch.tensor([[0.3, -1.2], [2.0, 0.7]], dtype=F64, requires_grad=True)
    y = torch.tensor(0.9, dtype=F64, requires_grad=True)
    z = torch.tensor([1.5, -0.2, 0.01], dtype=F64, requires_grad=True)
    for inputs in ((x, y, z), (x,)):
        fn = f if len(inputs) == 3 else (lambda x: f(x, y.detach(), z.detach()))
        kept = ga.check(fn, inputs, seed=5, mode=mode)
        real = ga_evaluate.first_draws
        try:
            ga_evaluate.first_draws = lambda seed, count: None  # every draw from the generator
            drawn = ga.check(fn, inputs, seed=5, mode=mode)
        finally:
            ga_evaluate.first_draws = real
        assert kept.ok and [r.to_dict() for r in kept.records] == [r.to_dict() for r in drawn.records]
        assert repr(kept.info) == repr(drawn.info) and "directional" in kept.info


def test_kept_first_draws_from_many_threads():
    """Checks in threads share the kept draws: evicting seeds at once must not raise (popping one key each, two
    threads picked the same one: KeyError out of ga.check, a reviewer's find), and every thread reads its own
    seed's values."""
    import sys
    import threading

    want = {seed: torch.rand(3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).tolist()
            for seed in range(80)}
    errors: list[BaseException] = []

    def work(offset):
        try:
            for i in range(3000):
                seed = (offset * 7 + i) % 80
                assert ga_evaluate.first_draws(seed, 3) == want[seed]
        except BaseException as exc:  # (kept for the assertion below)
            errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors[:3]


def test_two_outputs_weights_continue_one_stream():
    """A small check's output weights come from kept draws; several outputs share one stream in turn, as the
    generator they stand for gives them: the same check with the kept draws and with generators for every draw
    (first_draws refusing: the weights, directional's directions and factors) gives the same records."""
    def f(x):
        return x.sin(), (x * x).sum(), x[:2].exp()

    x = torch.tensor([0.3, -1.2, 2.0], dtype=F64, requires_grad=True)
    kept = ga.check(f, (x,), seed=3, mode="directional")
    real = ga_evaluate.first_draws
    try:
        ga_evaluate.first_draws = lambda seed, count: None  # every weight drawn from the generator
        drawn = ga.check(f, (x,), seed=3, mode="directional")
    finally:
        ga_evaluate.first_draws = real
    assert [r.to_dict() for r in kept.records] == [r.to_dict() for r in drawn.records] and kept.info == drawn.info


@pytest.mark.parametrize("mode", ["full", "directional"])
def test_outputs_the_probe_does_not_move_do_not_make_a_float32_cast(mode):
    # nn.Linear at x = 0: its outputs are its bias, drawn in float32, and a relative probe moves nothing at 0; taken
    # for a float32 computation, a backward off by 1e-5 went from FAIL to inconclusive (a reviewer's find). A zero is
    # moved by the probe's size itself, and only values that moved count
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 4).double()
    w, bias = lin.weight.detach(), lin.bias.detach()
    for scale, want in ((1.0, "pass"), (1 + 1e-5, "fail")):
        fn = (lambda off: lambda x: torch.nn.functional.linear(off(x), w, bias))(_off_at_1(scale))
        res = ga.check(fn, (torch.zeros(3, dtype=torch.float64, requires_grad=True),), mode=mode)
        assert res.verdict == want, str(res)
        assert not any("float32" in n for n in res.info.get("notes", [])), res.info.get("notes")


@pytest.mark.parametrize("mode", ["full", "directional"])
def test_an_output_the_checked_inputs_do_not_reach_is_no_float32_cast(mode):
    # (sin x, b * 1.0) with b a parameter drawn in float32: the second output is float32's values at every point and
    # does not move, being no function of x; taken for a float32 cast, a backward of sin off by 1e-6 went from FAIL
    # to inconclusive in directional mode (a reviewer's find). Values that did not move count only for an output the
    # checked inputs reach on the graph
    torch.manual_seed(0)
    b = torch.nn.Parameter(torch.randn(3).double())
    x = torch.tensor([0.3, 0.7, 1.1], dtype=torch.float64)
    for scale, want in ((1.0, "pass"), (1 + 1e-6, "fail")):
        fn = (lambda off: lambda x: (torch.sin(off(x)), b * 1.0))(_off_at_1(scale))
        res = ga.check(fn, (x.clone().requires_grad_(),), mode=mode)
        assert res.verdict == want, str(res)
        assert not any("float32" in n for n in res.info.get("notes", [])), res.info.get("notes")


def test_a_directional_pass_on_float32_evidence_says_what_its_projections_resolved():
    # a function that only computes in float32, its backward off at one of 4 elements: directional mode passed a 1%
    # bug there (4 evaluations), the record saying "directional mode resolves about 1e-6 of an element's typical
    # term". That bug fails now (test_a_one_percent_bug_of_a_float32_only_function_fails_directional_mode); one of
    # 1e-6, a projection moved by about 2.5e-7 of its value, about float32's own eps, no float32 evidence resolves,
    # and it passes: its record says how large a difference the projections accepted, at least that much
    x = torch.rand(4, generator=torch.Generator().manual_seed(0)) * 1.5 + 0.5
    sigmoid = (torch.sigmoid, lambda x: torch.sigmoid(x) * (1 - torch.sigmoid(x)))
    res = ga.check(_float32_only(*sigmoid, 1 + 1e-6), (x.clone().requires_grad_(),), mode="directional")
    assert res.verdict == "pass", str(res)
    reason = res.records[0].reason
    assert "1e-6 of an element's typical term" not in reason
    assert "on float32 evidence the projections accepted differences up to" in reason
    shown = float(reason.split("accepted differences up to ")[1].split(" ")[0])
    assert shown >= 2e-7
    # float64 evidence keeps its statement
    right = ga.check(torch.sigmoid, (x.double().requires_grad_(),), mode="directional")
    assert right.ok and "1e-6 of an element's typical term" in right.records[0].reason


def test_a_report_of_many_failing_parameters_stays_short_and_its_first_line_names_them():
    # one Function 1% off shared by 12 layers: every parameter fails. The report showed every record's mismatch table
    # (666 lines at 60 parameters, all printed by pytest) and its first line, all that pytest -q shows, named none
    # (a fresh-eyes audit). The first DETAILED records' tables are shown, every record's line, and the first line
    # counts the records that do not pass and names the first three
    from gradaudit.render.text import DETAILED

    off = fn_class(torch.tanh, lambda g, x: g * (1 - torch.tanh(x) ** 2) * 1.01)

    class Layer(torch.nn.Linear):
        def forward(self, x):
            return off.apply(super().forward(x))

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Layer(3, 3) for _ in range(12)]).double()
    res = ga.check_module(model, (torch.linspace(-1, 1, 6, dtype=F64).reshape(2, 3),), lambda o: o.sum(),
                          mode="directional")
    text = str(res)
    lines = text.splitlines()
    assert res.verdict == "fail" and len(res.records) == 24
    assert lines[0].startswith("gradaudit.check Sequential parameters: FAIL (")
    assert " of 24 records not passing: '0.weight', '0.bias', '1.weight', ..." in lines[0]
    assert sum(line.startswith("input '") for line in lines) == 24  # every record's own line
    assert text.count("Greatest absolute difference") == DETAILED
    assert "left out here: see result.mismatches" in text


def test_an_inconclusive_report_says_what_to_do_next():
    # relu at 0: inconclusive with both slopes shown, and nothing said of what to do (a fresh-eyes audit)
    x = torch.tensor([1.0, 0.0, -1.0], dtype=F64, requires_grad=True)
    res = ga.check(torch.relu, (x,))
    assert res.verdict == "inconclusive"
    assert "next:       a kink lies within the steps" in str(res) and "check at a point away from it" in str(res)
    assert "next:" not in str(ga.check(torch.relu, (torch.tensor([1.0, -1.0], dtype=F64, requires_grad=True),)))


@pytest.mark.parametrize("mode", ["full", "directional"])
def test_an_input_the_function_does_not_use_passes_with_its_none_gradient_borne_out(mode):
    # f(a, b) = sum(sin a): autograd gives None for b, and every evaluation moving b reads exactly f's value. A draft
    # of a rule for projections of exactly 0 made b (and a module's unused parameter) inconclusive at some points,
    # "numeric 0, autograd 0" (a fresh-eyes audit's regression check): the evidence bears the None out
    for a0 in (0.3, 1.7, -2.2):
        a = torch.tensor([a0, 0.5, -0.4], dtype=F64, requires_grad=True)
        b = torch.tensor([1.0, 2.0], dtype=F64, requires_grad=True)
        res = ga.check(lambda a, b: a.sin().sum(), (a, b), mode=mode)
        assert [(r.input, r.verdict) for r in res.records] == [("a", "pass"), ("b", "pass")], res


    class Half(torch.nn.Module):  # a parameter the forward never reads
        def __init__(self):
            super().__init__()
            self.used = torch.nn.Linear(3, 1)
            self.spare = torch.nn.Parameter(torch.ones(2))

        def forward(self, x):
            return self.used(x)

    torch.manual_seed(0)
    res = ga.check_module(Half().double(), (torch.linspace(-1, 1, 6, dtype=F64).reshape(2, 3),), lambda o: o.sum(),
                          mode=mode)
    assert {r.input: r.verdict for r in res.records} == {"used.weight": "pass", "used.bias": "pass", "spare": "pass"}
