"""The ledger language's softmax, log_softmax, logsumexp, clamp and reductions over one dimension.

Each function is checked two ways: on random float64 inputs against torch called directly (value and,
via torch.autograd.grad, the gradient written into a ledger record that ``gradaudit.run.run`` checks by
every method), and on small inputs whose gradients are derived by hand in the comments.
"""

from __future__ import annotations

import math

import pytest
import torch

from gradaudit.errors import SpecError
from gradaudit.expr import FUNCTIONS, parse
from gradaudit.ledger import parse_ledger
from gradaudit.run import run

F64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _normal(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    return torch.randn(shape, dtype=F64, generator=_gen(seed))


def _spaced(shape: tuple[int, int], seed: int) -> torch.Tensor:
    """Rows whose values are at least 0.4 apart (each row a permutation of 0, 0.5, 1, ... plus noise below
    0.1), so that the max and min of a row stay the same element within any finite-difference step."""
    g = _gen(seed)
    rows = [torch.randperm(shape[1], generator=g).to(F64) * 0.5 for _ in range(shape[0])]
    return torch.stack(rows) - 1.0 + 0.1 * torch.rand(shape, dtype=F64, generator=g)


def _off_bounds(shape: tuple[int, ...], seed: int, bounds: tuple[float, ...]) -> torch.Tensor:
    """Normal values moved at least 0.1 away from each clamp bound (a kink there would be inconclusive)."""
    x = 1.5 * _normal(shape, seed)
    for b in bounds:
        near = (x - b).abs() < 0.1
        x = torch.where(near, x + 0.25, x)
    assert all(bool(((x - b).abs() >= 0.1).all()) for b in bounds)
    return x


# text, torch's own computation of the same scalar, x, the weights w (shape of the inner result)
CASES = [
    ("sum(w*softmax(x, dim=-1))", lambda x, w: (w * torch.softmax(x, -1)).sum(),
     _normal((3, 4), 1), _normal((3, 4), 2)),
    ("sum(w*softmax(x, 0))", lambda x, w: (w * torch.softmax(x, 0)).sum(), _normal((3, 4), 3), _normal((3, 4), 4)),
    ("sum(w*log_softmax(x, dim=1))", lambda x, w: (w * torch.log_softmax(x, 1)).sum(),
     _normal((3, 4), 5), _normal((3, 4), 6)),
    ("sum(w*log_softmax(x, -2))", lambda x, w: (w * torch.log_softmax(x, -2)).sum(),
     _normal((3, 4), 7), _normal((3, 4), 8)),
    ("w*logsumexp(x)", lambda x, w: w * torch.logsumexp(x.reshape(-1), 0), _normal((3, 4), 9), _normal((), 10)),
    ("sum(w*logsumexp(x, dim=1))", lambda x, w: (w * torch.logsumexp(x, 1)).sum(), _normal((3, 4), 11),
     _normal((3,), 12)),
    ("sum(w*logsumexp(x, 0, True))", lambda x, w: (w * torch.logsumexp(x, 0, keepdim=True)).sum(),
     _normal((3, 4), 13), _normal((1, 4), 14)),
    ("sum(w*clamp(x, -1, 1))", lambda x, w: (w * torch.clamp(x, -1.0, 1.0)).sum(),
     _off_bounds((3, 4), 15, (-1.0, 1.0)), _normal((3, 4), 16)),
    ("sum(w*clamp(x, min=0))", lambda x, w: (w * torch.clamp(x, min=0.0)).sum(),
     _off_bounds((3, 4), 17, (0.0,)), _normal((3, 4), 18)),
    ("sum(w*clamp(x, max=0.5))", lambda x, w: (w * torch.clamp(x, max=0.5)).sum(),
     _off_bounds((3, 4), 19, (0.5,)), _normal((3, 4), 20)),
    ("sum(w*clamp(x, max=1.5, min=-0.5))", lambda x, w: (w * torch.clamp(x, -0.5, 1.5)).sum(),
     _off_bounds((3, 4), 21, (-0.5, 1.5)), _normal((3, 4), 22)),
    ("sum(w*sum(x, 1))", lambda x, w: (w * x.sum(1)).sum(), _normal((3, 4), 23), _normal((3,), 24)),
    ("sum(w*sum(x*x, dim=0, keepdim=True))", lambda x, w: (w * (x * x).sum(0, keepdim=True)).sum(),
     _normal((3, 4), 25), _normal((1, 4), 26)),
    ("sum(w*mean(x, dim=1))", lambda x, w: (w * x.mean(1)).sum(), _normal((3, 4), 27), _normal((3,), 28)),
    ("sum(w*mean(sin(x), -1, keepdim=True))", lambda x, w: (w * x.sin().mean(-1, keepdim=True)).sum(),
     _normal((3, 4), 29), _normal((3, 1), 30)),
    ("sum(w*amax(x, dim=1))", lambda x, w: (w * x.amax(1)).sum(), _spaced((3, 4), 31), _normal((3,), 32)),
    ("sum(w*amax(x, 0))", lambda x, w: (w * x.amax(0)).sum(), _spaced((4, 3), 33).T.contiguous(),
     _normal((4,), 34)),
    ("sum(w*amin(x, dim=-1))", lambda x, w: (w * x.amin(-1)).sum(), _spaced((3, 4), 35), _normal((3,), 36)),
    ("sum(w*prod(x, dim=1))", lambda x, w: (w * x.prod(1)).sum(),
     0.5 + torch.rand((3, 4), dtype=F64, generator=_gen(37)), _normal((3,), 38)),
]


@pytest.mark.parametrize("text, reference, x, w", CASES, ids=[c[0] for c in CASES])
def test_value_and_gradient_agree_with_torch(text, reference, x, w):
    xr, wr = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    want = reference(xr, wr)
    gx, gw = torch.autograd.grad(want, (xr, wr))
    # the value: the expression evaluates to what torch computes
    got = parse(text, allowed_names=("x", "w"))({"x": x, "w": w})
    torch.testing.assert_close(got, want.detach(), rtol=1e-14, atol=1e-14)
    # the gradient: written into a ledger record, checked by backward, autograd.grad and finite differences
    (check,) = parse_ledger({"name": text, "function": text, "x": x.tolist(), "w": w.tolist(),
                             "analytical_gradient": {"x": gx.tolist(), "w": gw.tolist()}}, where="test")
    records = run([check])
    assert {(r.method, r.input) for r in records} == {(m, n) for m in ("backward", "autograd.grad",
                                                                         "finite_difference") for n in ("x", "w")}
    assert [r.verdict for r in records if r.verdict != "pass"] == [], [(r.method, r.input, r.reason) for r in records]


LOG2 = math.log(2.0)

# hand-derived: text, inputs, expected gradient, expected value
HAND = [
    # s = softmax([0, 0]) = [1/2, 1/2]; d/dx_j sum_i w_i s_i = s_j (w_j - s.w) with s.w = 1/2:
    # [1/2 (1 - 1/2), 1/2 (0 - 1/2)] = [0.25, -0.25]; d/dw = s = [0.5, 0.5]; value s.w = 0.5
    ("sum(w*softmax(x, dim=0))", {"x": [0.0, 0.0], "w": [1.0, 0.0]}, {"x": [0.25, -0.25], "w": [0.5, 0.5]}, 0.5),
    # log_softmax_i = x_i - log(e^0 + e^0) = -log 2; d/dx_j sum_i w_i (x_i - lse) = w_j - (sum w) s_j
    # = [1 - 1/2, 0 - 1/2]; d/dw = log_softmax = [-log 2, -log 2]; value 1 * (-log 2)
    ("sum(w*log_softmax(x, -1))", {"x": [0.0, 0.0], "w": [1.0, 0.0]}, {"x": [0.5, -0.5], "w": [-LOG2, -LOG2]},
     -LOG2),
    # logsumexp([0, log 3]) = log(1 + 3) = log 4; its gradient is softmax: [1/4, 3/4]
    ("logsumexp(x)", {"x": [0.0, math.log(3.0)]}, {"x": [0.25, 0.75]}, math.log(4.0)),
    # row-wise logsumexp of [[0, 0], [log 3, 0]] = [log 2, log 4]; with w = [1, 2] the gradient is
    # w_i softmax(row i) = [[1/2, 1/2], [2 * 3/4, 2 * 1/4]]; value log 2 + 2 log 4 = 5 log 2
    ("sum(w*logsumexp(x, dim=1))", {"x": [[0.0, 0.0], [math.log(3.0), 0.0]], "w": {"value": [1.0, 2.0],
                                                                                  "requires_grad": False}},
     {"x": [[0.5, 0.5], [1.5, 0.5]]}, 5 * LOG2),
    # clamp to [-1, 1]: -2 -> -1 (slope 0), 0.5 -> 0.5 (slope 1), 3 -> 1 (slope 0); value -1 + 0.5 + 1
    ("sum(clamp(x, -1, 1))", {"x": [-2.0, 0.5, 3.0]}, {"x": [0.0, 1.0, 0.0]}, 0.5),
    # clamp(x, min=0) is relu away from 0: slopes [0, 1]; value 0 + 2
    ("sum(clamp(x, min=0))", {"x": [-1.0, 2.0]}, {"x": [0.0, 1.0]}, 2.0),
    # sum over dim 1 of a 2x3 x, weighted by w = [1, 2]: each row's elements get that row's weight;
    # value 1 * (1 + 2 + 3) + 2 * (4 + 5 + 6) = 36
    ("sum(w*sum(x, 1))", {"x": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], "w": {"value": [1.0, 2.0],
                                                                         "requires_grad": False}},
     {"x": [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]}, 36.0),
    # mean over dim 0 of a 2x3 x, weighted by w = [1, 2, 3]: each element gets w_j / 2;
    # value 1 * 2.5 + 2 * 3.5 + 3 * 4.5 = 23
    ("sum(w*mean(x, dim=0))", {"x": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], "w": {"value": [1.0, 2.0, 3.0],
                                                                              "requires_grad": False}},
     {"x": [[0.5, 1.0, 1.5], [0.5, 1.0, 1.5]]}, 23.0),
    # amax over dim 1 of [[1, 3, 2], [0, -1, -2]]: maxima 3 (column 1) and 0 (column 0); with w = [1, 2]
    # the gradient is w_i at the row's maximum, 0 elsewhere; value 1 * 3 + 2 * 0 = 3
    ("sum(w*amax(x, dim=1))", {"x": [[1.0, 3.0, 2.0], [0.0, -1.0, -2.0]], "w": {"value": [1.0, 2.0],
                                                                                 "requires_grad": False}},
     {"x": [[0.0, 1.0, 0.0], [2.0, 0.0, 0.0]]}, 3.0),
]


@pytest.mark.parametrize("text, inputs, gradient, value", HAND, ids=[h[0] for h in HAND])
def test_hand_derived(text, inputs, gradient, value):
    (check,) = parse_ledger({"name": text, "function": text, **inputs, "analytical_gradient": gradient},
                            where="hand")
    env = {n: s.tensor(requires_grad=False) for n, s in check.inputs.items()}
    assert float(check.function(env)) == pytest.approx(value, rel=1e-15, abs=1e-15)
    records = run([check])
    assert records and all(r.verdict == "pass" for r in records), [(r.method, r.input, r.reason) for r in records]


def test_keepdim_keeps_the_reduced_dimension():
    x = torch.zeros(2, 3, dtype=F64)
    # a 2x3 input reduced over dim 1: shape (2,) without keepdim, (2, 1) with it; over dim 0: (1, 3)
    assert tuple(parse("sum(x, 1)")({"x": x}).shape) == (2,)
    assert tuple(parse("sum(x, dim=1, keepdim=True)")({"x": x}).shape) == (2, 1)
    assert tuple(parse("amax(x, 0, True)")({"x": x}).shape) == (1, 3)
    assert tuple(parse("logsumexp(x, -1, keepdim=False)")({"x": x}).shape) == (2,)
    # softmax keeps the shape; logsumexp without dim reduces every element, as sum(x) does
    assert tuple(parse("softmax(x, dim=0)")({"x": x}).shape) == (2, 3)
    assert tuple(parse("logsumexp(x)")({"x": x}).shape) == ()


def test_positional_and_keyword_forms_are_the_same_call():
    x = _normal((3, 4), 40)
    for a, b in [("sum(x, 1)", "sum(x, dim=1)"), ("softmax(x, -1)", "softmax(x, dim=-1)"),
                 ("clamp(x, -1, 1)", "clamp(x, min=-1, max=1)"), ("clamp(x, -1, 1)", "clamp(x, max=1, min=-1)"),
                 ("mean(x, 0, True)", "mean(x, keepdim=True, dim=0)"), ("clamp(x, 0)", "clamp(x, min=0)")]:
        assert torch.equal(parse(a)({"x": x}), parse(b)({"x": x})), (a, b)


def test_parameters_are_not_inputs_or_functions():
    e = parse("sum(softmax(x, dim=-1) * clamp(y, min=0, max=1), 0)", allowed_names=("x", "y"))
    assert e.names == ("x", "y")
    assert e.functions == ("sum", "softmax", "clamp")


def test_the_new_functions_are_known():
    assert {"softmax", "log_softmax", "logsumexp", "clamp"} <= set(FUNCTIONS)


@pytest.mark.parametrize("text, words", [
    # keywords other than dim, keepdim, min, max: refused, named
    ("sum(x, axis=0)", "the keyword 'axis' is not allowed"),
    ("softmax(x, dim=-1, dtype=1)", "the keyword 'dtype' is not allowed"),
    ("sum(x, dimm=0)", "Did you mean 'dim'"),
    ("clamp(x, out=x)", "the keyword 'out' is not allowed"),
    ("sum(x, **x)", "keyword unpacking (**) is not allowed"),
    # a known keyword on a function that does not take it
    ("amax(x, min=0)", "amax() takes no keyword 'min'"),
    ("clamp(x, dim=0)", "clamp() takes no keyword 'dim'"),
    ("sin(x, dim=0)", "positional arguments only"),
    # values that are not constants written out
    ("sum(x, dim=y)", "'dim' is 'y', not a constant"),
    ("softmax(x, dim=1+0)", "'dim' is '1+0', not a constant"),
    ("clamp(x, min=y)", "'min' is 'y', not a constant"),
    ("clamp(x, max=-y)", "'max' is '-y', not a constant"),
    ("clamp(x, min=pi)", "'min' is 'pi', not a constant"),
    ("sum(x, dim=x.ndim)", "not a constant"),
    ("sum(x, dim=len(x))", "not a constant"),
    ("sum(x, -(-1))", "not a constant"),
    ("sum(x, y)", "'dim' is 'y', not a constant"),
    # dim must be an integer (not a float, a bool, a string), in [-64, 63]
    ("sum(x, dim=1.0)", "dim must be an integer"),
    ("sum(x, dim=0.5)", "dim must be an integer"),
    ("softmax(x, True)", "dim must be an integer"),
    ("mean(x, dim='0')", "dim must be an integer"),
    ("sum(x, dim=None)", "dim must be an integer"),
    ("sum(x, dim=64)", "from -64 to 63"),
    ("sum(x, dim=-65)", "from -64 to 63"),
    ("sum(x, dim=" + "9" * 40 + ")", "from -64 to 63"),
    # keepdim must be True or False, and needs a dim
    ("sum(x, 0, 1)", "keepdim must be True or False"),
    ("sum(x, dim=0, keepdim=true)", "not a constant"),
    ("sum(x, keepdim=True)", "keepdim without dim"),
    # clamp's bounds: finite numbers, at least one, min not above max
    ("clamp(x, min=1e400)", "finite number"),
    ("clamp(x, max=True)", "max must be a finite number"),
    ("clamp(x)", "clamp() needs min, max or both"),
    ("clamp(x, 2, 1)", "min 2 above max 1"),
    # softmax and log_softmax need their dimension
    ("softmax(x)", "softmax() needs 'dim'"),
    ("log_softmax(x)", "log_softmax() needs 'dim'"),
    # too many arguments, a parameter twice
    ("sum(x, 0, True, 1)", "takes 1 to 3 arguments"),
    ("softmax(x, 0, 1)", "takes 1 to 2 arguments"),
    ("sum(x, 0, dim=0)", "'dim' twice"),
    ("clamp(x, 0, min=0)", "'min' twice"),
])
def test_refusals_are_spec_errors_naming_the_problem(text, words):
    with pytest.raises(SpecError) as info:
        parse(text, allowed_names=("x", "y"))
    assert words in str(info.value), str(info.value)


def test_a_refusal_in_a_ledger_names_the_file_and_record():
    with pytest.raises(SpecError, match=r"my\.json record 1.*the keyword 'axis' is not allowed"):
        parse_ledger({"function": "sum(x, axis=0)", "x": [1.0, 2.0], "analytical_gradient": 1}, where="my.json")


def test_a_refusal_quotes_a_long_value_shortened():
    text = "sum(x, dim=" + "-" * 100 + "1)"
    with pytest.raises(SpecError, match=r"'dim' is '-{37}\.\.\.', not a constant"):
        parse(text)


def test_an_out_of_range_dim_is_an_error_verdict_not_a_crash():
    # dim 1 of a 1-d input parses (the shape is known only at run time) and gets the error verdict
    (check,) = parse_ledger({"function": "sum(softmax(x, dim=1))", "x": [1.0, 2.0], "analytical_gradient": 0},
                            where="t")
    records = run([check])
    assert {r.verdict for r in records} == {"error"}
    assert all(r.error is not None and r.error.type == "IndexError" for r in records)


# -- fuzzing: expressions built from the new functions raise nothing but SpecError at parse ----------------------

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

NEW = ["softmax", "log_softmax", "logsumexp", "clamp", "sum", "mean", "amax", "amin", "prod"]
KEYS = ["dim", "keepdim", "min", "max", "out", "dtype", "axis", "Dim", "__class__", "x", "input"]
VALUES = st.one_of(
    st.integers(-100, 100).map(str),
    st.integers(-10**40, 10**40).map(str),
    st.floats().map(repr),  # includes nan, inf: names, refused
    st.sampled_from(["True", "False", "None", "x", "y", "'0'", "-1", "+1", "-(1)", "(0)", "[0]", "(0, 1)",
                     "lambda: 0", "x.T", "1e400", "-1e400", "-True", "pi", "{}", "*x", "0j", "...", "b'1'"]),
)
LEAVES = st.sampled_from(["x", "y", "1", "2.5", "-x", "pi", "z"])


def _call(children):
    arg = st.one_of(children, VALUES)
    return st.builds(lambda f, args, kws: f"{f}({', '.join(args + [f'{k}={v}' for k, v in kws])})",
                     st.sampled_from(NEW), st.lists(arg, max_size=4), st.lists(st.tuples(st.sampled_from(KEYS),
                                                                                         VALUES), max_size=3))


EXPRESSIONS = st.recursive(
    LEAVES,
    lambda kids: _call(kids) | st.builds(lambda a, op, b: f"({a}{op}{b})", kids, st.sampled_from(["+", "-", "*", "/"]),
                                         kids),
    max_leaves=10)
SOUP = st.lists(st.sampled_from(NEW + KEYS + ["x", "(", ")", ",", "=", "-", "1", "0", "True", "2.5", " ", "**",
                                              "*", "."]), max_size=24).map("".join)


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(EXPRESSIONS, SOUP))
def test_fuzz_the_new_functions_raise_only_spec_error_at_parse(text):
    try:
        e = parse(text, allowed_names=("x", "y"))
    except SpecError:
        return
    assert set(e.names) <= {"x", "y"} and set(e.functions) <= set(FUNCTIONS)
    # what parses evaluates; a shape or dim error is an ordinary exception (an error verdict in a check)
    x = torch.rand(2, 3, dtype=F64, generator=_gen(0)) + 0.5
    try:
        e({"x": x, "y": x})
    except (RuntimeError, IndexError, ValueError, TypeError, SpecError):
        pass
