"""Arguments and outputs as a user passes them (issue #11, item 2), from a hostile-input audit of ga.check: each test
failed before the twenty-second session's change, as its comment says."""
from __future__ import annotations

import pytest
import torch

import gradaudit as ga


def _x(values=(0.5, -1.0, 2.0)) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64, requires_grad=True)


class _ScaledMul(torch.autograd.Function):
    """x * w with a backward 1% off for w (forward with ctx: the old style)."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x * 1.01


def test_a_raising_function_with_a_non_tensor_argument_gets_the_error_verdict():
    # before: gradaudit itself raised AttributeError ('int' object has no attribute 'dtype') when the function
    # raised and any argument was not a tensor; the README's own example with a bad dim hit it
    def f(x, dim):
        raise ValueError("user bug inside f")

    res = ga.check(f, (_x(), 0))
    assert res.verdict == "error"
    assert [r.input for r in res.records] == ["x"]
    assert res.records[0].error.type == "ValueError"
    bad_dim = ga.check(torch.cumsum, (_x(), 5))  # dim 5 of a 1-d tensor
    assert bad_dim.verdict == "error" and bad_dim.records[0].error.type == "IndexError"


def test_an_error_record_names_the_input_by_its_parameter():
    # before: every error record was labelled input0 where the pass/fail records said 'x'
    def mutates(x):
        x.data.add_(1.0)
        return x.sin()

    res = ga.check(mutates, (_x(),))
    assert res.verdict == "error" and [r.input for r in res.records] == ["x"]


@pytest.mark.parametrize("fn, expected", [(torch.fft.fft, "input"), (torch.special.expit, "input"),
                                          (torch.linalg.vector_norm, "x")])
def test_namespaced_torch_functions_are_named_by_their_documented_parameters(fn, expected):
    # torch.fft.fft's __name__ is fft_fft while its docstring shows fft(input, ...): before, input0
    assert [r.input for r in ga.check(fn, (_x(),)).records] == [expected]


def test_a_complex_argument_that_is_not_checked_reaches_the_function_as_it_is():
    # before: it arrived as its float64 real view, shape (2, 2), and the check passed on another function
    seen = []
    c = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex128)

    def f(x, c):
        seen.append((c.dtype, tuple(c.shape)))
        return x * c.abs()

    x = _x((0.5, -1.0))
    res = ga.check(f, (x, c))
    assert res.ok and set(seen) == {(torch.complex128, (2,))}
    assert res.records[0].discrepancy.total == 4  # a 2 x 2 Jacobian: one output of 2 elements, not 2 x 2


def test_a_torch_size_argument_stays_a_torch_size():
    # before: pytree rebuilt it as a plain tuple
    seen = set()

    def f(x, shape):
        seen.add(type(shape))
        return x.reshape(shape) / shape.numel()

    res = ga.check(f, (torch.randn(2, 3, dtype=torch.float64, requires_grad=True), torch.Size([3, 2])))
    assert res.ok and seen == {torch.Size}


def test_a_sparse_argument_that_is_not_checked_passes_through_as_gradcheck_takes_it():
    # before: refused with "gradaudit perturbs dense tensors element by element", though it is never perturbed
    adj = torch.tensor([[0.0, 1.0], [2.0, 0.0]], dtype=torch.float64).to_sparse()
    x = torch.tensor([[0.5, -1.0], [2.0, 0.25]], dtype=torch.float64, requires_grad=True)
    with torch.sparse.check_sparse_tensor_invariants(enable=True):  # (gradcheck warns that they are off)
        assert torch.autograd.gradcheck(torch.sparse.mm, (adj, x))
    res = ga.check(torch.sparse.mm, (adj, x))
    assert res.ok and [r.input for r in res.records] == ["input1"]  # (its docstring shows no signature)
    with pytest.raises(ga.SpecError, match="requires grad"):
        ga.check(torch.sparse.mm, (adj.clone().requires_grad_(), x))


def test_keyword_tensors_are_copied_and_a_write_to_one_is_the_error_verdict():
    # before: kwargs= tensors reached the function uncopied: the caller's w became [512, 1024, 1536] and it passed
    w = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)

    def f(x, *, w):
        w.mul_(2.0)
        return x * w

    res = ga.check(f, (_x(),), kwargs={"w": w})
    assert res.verdict == "error" and res.records[0].error.type == "InputMutated"
    assert w.tolist() == [1.0, 2.0, 3.0]


def test_a_keyword_tensor_that_requires_grad_is_checked_and_named_by_its_key():
    # before: left out silently: a backward 1% off for it passed, with no note
    x, w = _x(), torch.tensor([1.5, 2.0, -0.7], dtype=torch.float64, requires_grad=True)
    res = ga.check(lambda x, *, w: _ScaledMul.apply(x, w), (x,), kwargs={"w": w})
    assert res.verdict == "fail"
    assert {r.input: r.verdict for r in res.records} == {"x": "pass", "w": "fail"}
    nested = ga.check(lambda x, *, opts, **rest: x * opts["w"], (x,), kwargs={"opts": {"w": w}, "unused": 3})
    assert nested.ok and [r.input for r in nested.records] == ["x", "opts['w']"]


def test_a_forward_without_ctx_names_the_inputs_of_forward():
    # a Function with setup_context has forward(x, w): before, its first name was dropped as if it were ctx, and
    # a backward wrong for x was reported as wrong for w
    class Mul(torch.autograd.Function):
        @staticmethod
        def forward(x, w, scale=1.0):
            return x * w * scale

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, w, scale = inputs
            ctx.save_for_backward(x, w)
            ctx.scale = scale

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            return g * w * ctx.scale * 1.01, g * x * ctx.scale, None

    res = ga.check(Mul.apply, (_x(), torch.tensor([1.5, 2.0, -0.7], dtype=torch.float64, requires_grad=True)))
    assert {r.input: r.verdict for r in res.records} == {"x": "fail", "w": "pass"}
    assert {c.location.input for c in res.mismatches} == {"x"}


@pytest.mark.parametrize("mode", ["full", "directional"])
def test_outputs_whose_shape_or_number_changes_give_the_error_verdict(mode):
    # before: bare RuntimeError (size mismatch) or IndexError from inside gradaudit
    calls = [0]

    def shorter_later(x):
        calls[0] += 1
        return x.sin() if calls[0] <= 2 else x[:2].sin()

    def fewer_later(x):
        calls[0] += 1
        return (x.sin(), x.cos()) if calls[0] <= 2 else x.sin()

    for fn, says in ((shorter_later, "has shape (3,) at its first call and (2,)"),
                     (fewer_later, "returned 2 output(s) at its first call and 1")):
        calls[0] = 0
        res = ga.check(fn, (_x(),), mode=mode)
        assert res.verdict == "error"
        assert res.records[0].error.type == "OutputsChanged" and says in res.records[0].error.message


def test_a_sparse_or_meta_output_is_refused_with_the_fix():
    # before: torch's dispatcher error from inside the determinism check (torch.equal on a sparse tensor)
    with pytest.raises(ga.SpecError, match=r"to_dense\(\)"):
        ga.check(lambda x: (x * 2).to_sparse(), (_x(),))
    with pytest.raises(ga.SpecError, match="meta device"):
        ga.check(lambda x: torch.empty(3, device="meta", dtype=torch.float64), (_x(),))


def test_the_refusal_of_a_number_output_says_containers_of_tensors_are_fine():
    # before: "Return the tensor itself (not .item(), a list or a dict)", though lists and dicts of tensors are checked
    assert ga.check(lambda x: {"a": x.sin(), "b": [x.cos()]}, (_x(),)).ok
    with pytest.raises(ga.SpecError, match="a tuple, list or dict of them"):
        ga.check(lambda x: {"a": float(x.detach().sum())}, (_x(),))


def test_an_expectation_for_a_complex_input_is_compared_as_torch_stores_its_gradient():
    # d/dz of sum |z|^2 as torch stores it in z.grad: 2z (the conjugate Wirtinger derivative times 2). Before, the
    # expectation was cast to real (a warning from gradaudit's own code) and this right value FAILED
    z = torch.tensor([1 + 2j, -0.5 + 0.3j], dtype=torch.complex128, requires_grad=True)

    def f(z):
        return (z * z.conj()).real.sum()

    assert ga.check(f, (z,), expected=[2 * z.detach()]).ok
    assert ga.check(f, (z,), expected=[2 * z.detach().conj()]).verdict == "fail"  # imaginary parts of the wrong sign
    with pytest.raises(ga.SpecError, match="complex value for a real input"):
        ga.check(lambda x: x.sum(), (_x(),), expected=[1 + 1j])


def test_an_expectation_for_a_nested_input_counts_the_checked_leaves():
    # before: "expected= has 1 values for 0 inputs that require grad" (top-level tensors only); [] gave IndexError
    x = _x()

    def f(d):
        return (d["x"] ** 2).sum()

    assert ga.check(f, ({"x": x},), expected=[2 * x.detach()]).ok
    assert ga.check(f, ({"x": x},), expected=[3 * x.detach()]).verdict == "fail"
    with pytest.raises(ga.SpecError, match="0 values for 1 inputs"):
        ga.check(f, ({"x": x},), expected=[])


def test_seeds_beyond_torchs_range_are_refused():
    # before: 2**60 raised a bare ValueError (Overflow when unpacking long long); 2**64 was blamed on the function
    assert ga.check(torch.sin, (_x(),), seed=2**59 - 1).ok
    for seed in (2**59, 2**64):
        with pytest.raises(ga.SpecError, match="below 2\\*\\*59"):
            ga.check(torch.sin, (_x(),), seed=seed)


def test_the_rerun_line_repeats_keyword_arguments_expectations_and_tolerances():
    # before: kwargs=, expected= and tolerance= were dropped (pasting the line raised TypeError, or passed a check
    # that had failed), and a dict input was written with repr() (tensor([0.1235, ...]), neither Python nor exact)
    x = _x((0.123456789, -1.0, 2.0))

    def power(x, *, p):
        return x ** p

    def square_sum(x):
        return (x ** 2).sum()

    def of_dict(d):
        return d["x"].sin()

    names = {"ga": ga, "torch": torch, "fn": None}
    for fn, kwargs in ((power, {"kwargs": {"p": 3}}),
                       (square_sum, {"expected": [3 * x.detach()]}),  # wrong: d/dx sum x^2 = 2x, so it fails
                       (square_sum, {"tolerance": ga.Tolerance(atol=0.0, rtol=1e-6, why="a looser promise")}),
                       (of_dict, {})):
        res = ga.check(fn, ({"x": x},) if fn is of_dict else (x,), **kwargs)
        line = res.rerun.split("  #")[0]
        for key in kwargs:
            assert f"{key}=" in line
        again = eval(line, {**names, "fn": fn, fn.__name__: fn})  # (the line names fn where it can)
        assert again.verdict == res.verdict
        assert [r.inputs[0].shape for r in again.records] == [r.inputs[0].shape for r in res.records]
    assert "0.123456789" in ga.check(of_dict, ({"x": x},)).rerun


def test_check_module_gives_the_forward_private_copies_of_its_inputs_and_keyword_tensors():
    # before: the model's forward got the caller's tensors: a first ReLU(inplace=True) zeroed the caller's negative
    # inputs, and a forward writing to its input or a keyword tensor changed it at every evaluation (x * 2 per call:
    # the caller's ones summed to 48 after the check instead of 12) and the check saw another input each time
    torch.manual_seed(0)
    relu_first = torch.nn.Sequential(torch.nn.ReLU(inplace=True), torch.nn.Linear(3, 2)).double()
    x = torch.tensor([[-1.0, 0.5, 2.0], [0.25, -0.75, 1.5]], dtype=torch.float64)
    before = x.clone()
    assert ga.check_module(relu_first, (x,), lambda y: y.sum()).ok
    assert torch.equal(x, before)

    class Writes(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 2).double()

        def forward(self, x, mask):
            x.mul_(2.0)
            mask.add_(1.0)
            return self.lin(x) * mask.sum()  # the same function at every evaluation only on fresh copies

    ones, mask = torch.ones(4, 3, dtype=torch.float64), torch.zeros(2, dtype=torch.float64)
    assert ga.check_module(Writes(), (ones,), lambda y: y.sum(), kwargs={"mask": mask}).ok
    assert ones.sum().item() == 12.0 and mask.sum().item() == 0.0


# -- forward_ad, order=2 and errors after the first calls (a second audit) ---------------------------------------------

def _force(a):
    """-dE/da for E = sum(a^3): -3 a^2, computed by autograd inside (a function that needs gradients on)."""
    energy = (a ** 3).sum()
    return -torch.autograd.grad(energy, a, create_graph=True)[0]


def test_forward_ad_on_a_function_that_differentiates_inside_passes():
    # before: the dual input was replaced by a fresh leaf and the outputs detached: the tangent read 0 and this
    # right force FAILED its jvp record (J u = -6 a u, nowhere 0)
    res = ga.check(_force, (_x((0.3, -1.2, 2.0)),), forward_ad=True)
    assert res.ok and [(r.method, r.verdict) for r in res.records] == [("vjp", "pass"), ("jvp", "pass")]


def test_forward_ad_inside_a_dual_level_is_refused_with_the_fix():
    # before: torch's "Nested forward mode AD is not supported" from inside gradaudit
    import torch.autograd.forward_ad as fwad

    with fwad.dual_level(), pytest.raises(ga.SpecError, match="outside the dual_level"):
        ga.check(torch.sin, (_x(),), forward_ad=True)


def test_order_2_on_a_missing_gradient_fails_both_records_instead_of_an_error():
    # before: the whole check became an error ("the backward raised ... does not require grad"). The backward gives
    # None for d sin(a) = cos(a) da (fail), and the double backward claims 0 for sᵀJu, which the function's own
    # derivative along u says is sᵀ cos(a) u, not 0 (fail)
    res = ga.check(lambda a: a.detach().sin(), (_x(),), order=2)
    assert res.verdict == "fail"
    assert [(r.method, r.verdict) for r in res.records] == [("vjp", "fail"), ("double backward", "fail")]


class _SinBackward(torch.autograd.Function):
    """g cos x, Sin's backward, with a backward of its own: d/dg scaled by *scale* (1.5: 50% off), d/dx right."""

    scale = 1.0

    @staticmethod
    def forward(ctx, g, x):
        ctx.save_for_backward(g, x)
        return g * torch.cos(x)

    @staticmethod
    def backward(ctx, gg):
        g, x = ctx.saved_tensors
        return gg * torch.cos(x) * _SinBackward.scale, -gg * g * torch.sin(x)


class _Sin(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sin(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _SinBackward.apply(g, x)


@pytest.mark.parametrize("mode", ["full", "directional"])
def test_order_2_judges_the_double_backward_with_respect_to_grad_output(mode, monkeypatch):
    # before: G = vᵀJ(x)·w was differentiated with respect to x alone, and a backward whose own backward is 50% off
    # with respect to its grad_output passed in both modes (torch.autograd.gradgradcheck fails it)
    x = _x((0.3, -1.2, 2.0))
    assert ga.check(_Sin.apply, (x,), order=2, mode=mode).ok
    monkeypatch.setattr(_SinBackward, "scale", 1.5)
    res = ga.check(_Sin.apply, (x,), order=2, mode=mode)
    assert [(r.input, r.method, r.verdict) for r in res.records] == [("x", "vjp", "pass"),
                                                                    ("x", "double backward", "fail")]


def test_an_error_after_the_first_calls_is_recorded_against_each_checked_input():
    # before: one record against argument 0 (here the integer n), its metadata saying nothing requires grad
    class BadBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            raise RuntimeError("bug in my backward")

    def f(n, a, b):
        return BadBackward.apply(a, b) * n

    res = ga.check(f, (2, _x(), _x((1.0, 2.0, 3.0))))
    assert res.verdict == "error"
    assert [r.input for r in res.records] == ["a", "b"]
    assert [(m.name, m.requires_grad) for m in res.records[0].inputs] == [("n", False), ("a", True), ("b", True)]


def test_check_modules_rerun_line_repeats_the_tolerance_and_the_expectation():
    # before: ga.check_module(model, inputs, loss_fn) whatever the options: pasted, a failing check passed
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1).double()
    x = torch.randn(2, 3, dtype=torch.float64)
    zeros = [torch.zeros(1, 3, dtype=torch.float64), torch.zeros(1, dtype=torch.float64)]
    wrong = ga.check_module(model, (x,), lambda y: y.sum(), expected=zeros)  # d sum(Wx + b) / db = 2, not 0
    assert wrong.verdict == "fail" and "expected=[torch.tensor([[0.0, 0.0, 0.0]]" in wrong.rerun
    loose = ga.check_module(model, (x,), lambda y: y.sum(), tolerance=ga.Tolerance(0.0, 1e-6, why="a reason"))
    assert "tolerance=ga.Tolerance(atol=0.0, rtol=1e-06, why='a reason')" in loose.rerun


def test_numpy_scalars_are_taken_as_the_numbers_they_hold():
    # np.int64(3) is what arithmetic on arrays returns; before, seed=np.int64(3) was refused as "not a non-negative
    # integer", np.float32 rtol as "not a finite number", ratio=np.float64(3) likewise, steps=np.int64(2) too
    np = pytest.importorskip("numpy")
    x = torch.tensor([0.3, 0.7], dtype=torch.float64, requires_grad=True)
    res = ga.check(lambda x: (x * x).sum(), (x,), seed=np.int64(3), timeout=np.float32(30.0))
    assert res.ok
    assert "requires_grad=True),), seed=3, timeout=30.0)  # fn: <lambda>" in res.records[0].rerun  # pasteable
    tol = ga.Tolerance(atol=np.float64(0.0), rtol=np.float32(0.5), why="a float32 kernel")
    assert type(tol.rtol) is float and tol.rtol == 0.5  # (0.5 is exact in float32)
    assert ga.LadderTolerance(ratio=np.float32(3.0), why="measured").ratio == 3.0
    assert ga.compare(torch.exp, torch.exp, (x,), ratio=np.float64(3.0), seed=np.int64(2)).ok
    model = torch.nn.Linear(2, 1).double()
    assert ga.check_module(model, (torch.ones(3, 2, dtype=torch.float64),), seed=np.int32(1), order=np.int64(1)).ok
    steps = []
    audit = ga.audit_training(steps.append, [1, 2, 3], params={"w": torch.zeros(1, requires_grad=True)},
                              steps=np.int64(2))
    assert len(steps) == 2 and audit.steps_run == 2


def test_a_numpy_bool_or_array_is_still_not_a_seed():
    np = pytest.importorskip("numpy")
    x = torch.tensor([0.3], dtype=torch.float64, requires_grad=True)
    for bad in (np.bool_(True), np.array([1, 2]), np.float64(3.0)):
        with pytest.raises(ga.SpecError, match="seed must be a non-negative integer"):
            ga.check(lambda x: x.sum(), (x,), seed=bad)


class _SparseGradDouble(torch.autograd.Function):
    """y = 2 x, its backward returned as a sparse tensor (as Embedding(sparse=True) does): FACTOR times g."""

    FACTOR = 2.0

    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, g):
        return (_SparseGradDouble.FACTOR * g).to_sparse()


@pytest.mark.parametrize("mode", ["full", "directional"])
def test_a_sparse_gradient_is_judged_by_its_values(mode, monkeypatch):
    # comparing a sparse gradient raised NotImplementedError ('aten::equal' on SparseCPU) from gradaudit's own code;
    # its values are now judged: Embedding(sparse=True) passes (dL/dW[i] = 2 W[i] times the times row i is looked up,
    # for L = sum(W[idx]^2)), and a sparse 2.5 g for y = 2 x fails
    idx = torch.tensor([[1, 2], [2, 4]])
    emb = torch.nn.Embedding(6, 3, sparse=True).double()
    assert ga.check_module(emb, (idx,), lambda o: o.pow(2).sum(), mode=mode).ok
    res = ga.check(_SparseGradDouble.apply, (_x(),), mode=mode)
    assert res.ok
    monkeypatch.setattr(_SparseGradDouble, "FACTOR", 2.5)
    res = ga.check(_SparseGradDouble.apply, (_x(),), mode=mode)
    assert res.verdict == "fail"


def test_records_state_the_callers_dtype_and_shape_and_the_expectation_compared():
    # a float32 input was recorded (and shown) as float64, a complex (2,) one as (2, 2) float64: the evidence copies';
    # an expected= record showed None and None beside the expectation given (fresh-eyes audit)
    x32 = torch.tensor([0.5, 1.5], dtype=torch.float32, requires_grad=True)
    res = ga.check(lambda x: (x ** 3).sum(), (x32,), expected=[[0.75, 6.75]])  # 3 x^2
    for rec in res.records:
        assert (rec.dtype, rec.shape) == ("float32", (2,))
        assert [(m.dtype, m.shape) for m in rec.inputs] == [("float32", (2,))]
    vjp, by_hand = res.records
    assert vjp.evidence.precision == "float64"  # the evidence's own precision, beside it
    assert by_hand.method == "autograd.grad" and by_hand.expected_value == [0.75, 6.75]
    assert by_hand.observed_gradient == pytest.approx([0.75, 6.75], rel=1e-6)
    z = torch.tensor([0.5 + 1j, -1.0 + 0.25j], dtype=torch.complex128, requires_grad=True)
    rec = ga.check(lambda z: (z * z.conj()).real.sum(), (z,)).records[0]
    assert (rec.dtype, rec.shape) == ("complex128", (2,))
