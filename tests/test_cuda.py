"""On a CUDA device: ga.check (every mode, dense and structured Jacobians, randomness, float32 inputs),
ga.check_module, ga.audit_training and a ledger run with ``"device": "cuda"`` keep the tensors where the user
put them, judge as they do on the CPU and leave the user's world (inputs, buffers, both generators) as it was.

Skipped where torch sees no CUDA device (CI has none); run on a GPU machine with
``python -m pytest tests/test_cuda.py``. Expected values come from hand derivation, written beside each
assertion, as in the CPU tests these mirror (tests/test_api.py, tests/test_training.py).
"""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import gradaudit as ga

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device here: these run on a GPU machine")

F64 = torch.float64
MODES = ("full", "directional", "auto")


def cuda_leaf(*shape, seed=0, low=0.3, dtype=F64):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(*shape, generator=g, dtype=F64) + low).to("cuda", dtype).requires_grad_()


def fn_class(forward, backward):
    """An autograd.Function from a forward (saving its input) and a backward of (grad, input)."""

    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return forward(x)

        @staticmethod
        def backward(ctx, grad):
            return backward(grad, *ctx.saved_tensors)

    return F


def _matrix(n, seed=3):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, n, generator=g, dtype=F64).to("cuda")


def _square_wrong_at_3(g, x):  # y = x^2: dy/dx = 2x; the backward is 1.5 times too large at element 3
    out = 2 * x * g
    out[3] = out[3] * 1.5
    return out


def _cases():
    a = _matrix(12)
    return {
        # y = x^2 elementwise, dy/dx = 2x (diagonal Jacobian)
        "square": (fn_class(lambda x: x * x, lambda g, x: 2 * x * g).apply, (cuda_leaf(40),)),
        # y = sin(x) (torch's own backward, cos x)
        "sin": (torch.sin, (cuda_leaf(7, 5),)),
        # y = A x, dy/dx = A: dense and affine
        "matvec": (lambda x: a @ x, (cuda_leaf(12),)),
        # softmax over rows: dense blocks
        "softmax": (lambda x: torch.softmax(x, dim=-1), (cuda_leaf(4, 6),)),
        # a non-tensor positional argument passed through: cumsum(x, 0), dy_i/dx_j = [j <= i]
        "cumsum": (torch.cumsum, (cuda_leaf(9), 0)),
        # two inputs: d(x w)/dx = w, d(x w)/dw = x
        "product": (lambda x, w: (x * w).sum(0), (cuda_leaf(3, 5), cuda_leaf(3, 5, seed=1))),
    }


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", ["square", "sin", "matvec", "softmax", "cumsum", "product"])
def test_a_right_backward_passes_on_cuda_and_the_records_say_where_it_ran(mode, case):
    fn, inputs = _cases()[case]
    before = [x.detach().clone() if torch.is_tensor(x) else x for x in inputs]
    res = ga.check(fn, inputs, mode=mode)
    assert res.verdict == "pass", res.report()
    assert res.records and all(r.device.startswith("cuda") for r in res.records), [r.device for r in res.records]
    for x, b in zip(inputs, before):  # the caller's tensors: same values, same device, still leaves
        if torch.is_tensor(x):
            assert x.is_cuda and x.requires_grad and torch.equal(x.detach(), b)


@pytest.mark.parametrize("mode", ["full", "directional"])
def test_a_backward_wrong_at_one_element_fails_there_on_cuda(mode):
    f = fn_class(lambda x: x * x, _square_wrong_at_3)
    res = ga.check(f.apply, (cuda_leaf(40),), mode=mode)
    assert res.verdict == "fail" and {m.element for m in res.mismatches} == {(3,)}, res.report()


def test_a_wrong_entry_of_a_dense_jacobian_is_located_on_cuda():
    a = _matrix(40)

    class WrongAt(torch.autograd.Function):  # y = A x, dy/dx = A; the backward is wrong at A[7, 5] by 0.5
        @staticmethod
        def forward(ctx, x):
            return a @ x

        @staticmethod
        def backward(ctx, g):
            wrong = a.clone()
            wrong[7, 5] += 0.5
            return wrong.T @ g

    res = ga.check(WrongAt.apply, (cuda_leaf(40),), mode="full")
    (m,) = res.mismatches
    assert (m.element, m.output_element) == ((5,), (7,))
    assert m.reference == pytest.approx(a[7, 5].item(), abs=1e-9)
    assert m.observed == pytest.approx(a[7, 5].item() + 0.5, abs=1e-9)


@pytest.mark.parametrize("mode", MODES)
def test_cuda_dropout_is_checked_with_one_mask_and_both_generators_are_left_as_they_were(mode):
    # y = dropout(x) * x = 2 m x^2 for the mask m dropout draws from the CUDA generator: dy/dx = 4 m x. The
    # check passes only if every evaluation (numeric and autograd) draws the same mask
    def f(x):
        return nn.functional.dropout(x, 0.5, training=True) * x

    torch.cuda.manual_seed(1234)
    torch.manual_seed(99)
    cuda_state, cpu_state = torch.cuda.get_rng_state(), torch.get_rng_state()
    res = ga.check(f, (cuda_leaf(30),), mode=mode)
    assert res.verdict == "pass", res.report()
    assert torch.equal(torch.cuda.get_rng_state(), cuda_state) and torch.equal(torch.get_rng_state(), cpu_state)


def test_forward_ad_and_second_order_on_cuda():
    # d(sin(x) x)/dx = cos(x) x + sin(x), checked with forward-mode AD too, and its derivative (order 2)
    x = cuda_leaf(5)
    res = ga.check(lambda x: torch.sin(x) * x, (x,), forward_ad=True, order=2)
    assert res.ok, res.report()
    bad2 = fn_class(lambda x: x * x, lambda g, x: 2 * x.detach() * g)  # first order right, no double backward
    for mode in ("full", "directional"):
        res = ga.check(bad2.apply, (x,), order=2, mode=mode)
        assert [(r.method, r.verdict) for r in res.records] == [("vjp", "pass"), ("double backward", "fail")], mode


def test_a_function_that_mutates_its_cuda_input_is_an_error_and_the_callers_tensor_is_untouched():
    x = torch.tensor([0.5, -1.0], dtype=F64, device="cuda", requires_grad=True)
    before = x.detach().clone()

    def mutates(x):
        x.data.mul_(2)
        return x * 3

    res = ga.check(mutates, (x,))
    assert torch.equal(x.detach(), before) and x.grad is None
    assert res.verdict == "error" and "in place" in res.records[0].error.message, res.report()


class Square(torch.autograd.Function):
    """z -> z^2: autograd's convention returns grad_output * conj(dz^2/dz) = g * conj(2 z)."""

    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return z * z

    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return g * (2 * z).conj()


class SquareNoConj(Square):
    @staticmethod
    def backward(ctx, g):
        (z,) = ctx.saved_tensors
        return g * 2 * z  # the conj() is missing


@pytest.mark.parametrize("mode", MODES)
def test_complex_inputs_on_cuda_by_wirtinger_calculus(mode):
    z = torch.complex(cuda_leaf(4).detach(), cuda_leaf(4, seed=1).detach()).requires_grad_()
    assert ga.check(Square.apply, (z,), mode=mode).ok
    assert ga.check(SquareNoConj.apply, (z,), mode=mode).verdict == "fail"


@pytest.mark.parametrize("mode", MODES)
def test_a_function_that_differentiates_inside_on_cuda_and_one_that_returns_to_the_cpu(mode):
    # the force -dE/dx of E = sum sin(x)^2 is -2 sin(x) cos(x) = -sin(2x), its derivative -2 cos(2x): autograd's
    # double backward is right; and x^2 moved to the CPU inside the function: d/dx = 2x on the CPU
    def force(x):
        energy = (x.sin() ** 2).sum()
        return -torch.autograd.grad(energy, x, create_graph=True)[0]

    res = ga.check(force, (cuda_leaf(40, seed=3),), mode=mode)
    assert res.ok and any("gradients on" in n for n in res.info["notes"]), res.report()
    res = ga.check(lambda x: x.cpu() ** 2, (cuda_leaf(10),), mode=mode)
    assert res.ok and res.records[0].device == "cuda:0", res.report()


def test_a_float32_cuda_input_is_checked_in_float64_and_the_report_says_so():
    # a backward wrong only in float32 (x g instead of 2 x g for y = x^2) is not exercised: the note says so
    f = fn_class(lambda x: x * x, lambda g, x: (x if x.dtype != F64 else 2 * x) * g)
    x = torch.tensor([0.5, -1.25], device="cuda", requires_grad=True)
    res = ga.check(f.apply, (x,))
    notes = [n for n in res.records[0].evidence.notes if "checked in float64" in n]
    assert res.verdict == "pass" and "'x' (float32)" in notes[0], res.report()
    assert x.dtype == torch.float32 and x.is_cuda


class Scaled(torch.autograd.Function):
    """y = 3 x with a backward that returns 3 g except at element [1, 2] of the weight's gradient (4 g)."""

    @staticmethod
    def forward(ctx, w):
        return 3 * w

    @staticmethod
    def backward(ctx, g):
        out = 3 * g
        out[1, 2] = 4 * g[1, 2]
        return out


class WrongWeight(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        return x @ Scaled.apply(self.lin.weight).T + self.lin.bias


def test_check_module_on_cuda_passes_a_right_model_fails_a_wrong_one_and_leaves_its_buffers():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.BatchNorm1d(5), nn.Linear(5, 2)).to("cuda", F64)
    x = torch.randn(6, 4, dtype=F64).to("cuda")
    state = {k: v.clone() for k, v in model.state_dict().items()}
    res = ga.check_module(model, (x,), lambda out: (out ** 2).sum())
    assert res.verdict == "pass", res.report()
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())  # running stats untouched
    assert all(p.is_cuda for p in model.parameters())

    wrong = WrongWeight().to("cuda", F64)
    res = ga.check_module(wrong, (x,), lambda out: (out ** 2).sum())
    # d/dW of 3 W: the gradient at [1, 2] is 4/3 of the right one; the mismatch is named by parameter and element
    assert res.verdict == "fail" and {(m.input, m.element) for m in res.mismatches} == {("lin.weight", (1, 2))}, \
        res.report()


def _cuda_loop(model, opt, *, zero):
    def step(batch):
        x, y = (t.to("cuda") for t in batch)
        if zero:
            opt.zero_grad()
        loss = ((model(x).squeeze(-1) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.item()
    return step


def _batches():
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(8, 3, generator=g), torch.randn(8, generator=g)) for _ in range(4)]


@pytest.mark.parametrize("zero", [True, False])
def test_audit_training_on_cuda_finds_a_forgotten_zero_grad_and_nothing_in_a_right_loop(zero):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).to("cuda")
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    audit = ga.audit_training(_cuda_loop(model, opt, zero=zero), _batches(), model=model, optimizer=opt)
    if zero:
        assert audit.ok and not audit.findings, audit
    else:  # every parameter carries its gradient from step 1 into step 2
        assert {f.kind for f in audit.findings} == {"grad_accumulates"}
        assert {f.where for f in audit.findings} == {"0.weight", "0.bias", "2.weight", "2.bias"}


def test_a_ledger_input_on_cuda_is_run_there(cli, ledger, tmp_path):
    # x*x at x = 3: d/dx = 2x = 6
    out = tmp_path / "results.jsonl"
    res = cli("run", str(ledger('{"function": "x*x", "x": 3, "device": "cuda", "analytical_gradient": 6}')),
              "--json", str(out))
    assert res.code == 0, res.out + res.err
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    # every channel (.grad, autograd.grad, finite differences) ran there and its record says so
    devices = [r["device"] for r in rows if r.get("method")]
    assert len(devices) == 3 and set(devices) == {"cuda:0"}, rows
    assert all(r["verdict"] == "pass" for r in rows if r.get("method")), rows
