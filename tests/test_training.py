"""ga.audit_training, the training-step doctor: each finding kind planted in a module + optimizer loop
and in a raw-tensor loop (found, with the right ``where``); correct loops of many shapes (no finding);
the audit leaves the user's world as their own steps leave it; records, reports, misuse.

Expected values come from reading the loops: the ``where`` of a parameter is its name in
``named_parameters()`` (or the key of ``params``); the ``where`` of an op is its name and shapes, worked
out from the shapes the loop builds (written beside each assertion).
"""

from __future__ import annotations

import gc
import json
import warnings

import jsonschema
import pytest
import torch
from torch import nn

import gradaudit as ga
from gradaudit.record import dumps, schema
from gradaudit.render.text import make_console, render
from gradaudit.training import KINDS, TrainingAudit, audit_training

N, D = 8, 3


def data(n_batches=4, *, target_shape=(N,), seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(N, D, generator=g), torch.randn(*target_shape, generator=g)) for _ in range(n_batches)]


class Net(nn.Module):
    """fc1 (3 -> 4), tanh, fc2 (4 -> 1); forward gives (N,) (the trailing 1 squeezed) unless keep=True."""

    def __init__(self, keep=False, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.fc1, self.fc2, self.keep = nn.Linear(D, 4), nn.Linear(4, 1), keep

    def forward(self, x):
        out = self.fc2(torch.tanh(self.fc1(x)))
        return out if self.keep else out.squeeze(-1)


NET = ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")


def raw_params(seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"w": (0.5 * torch.randn(D, generator=g)).requires_grad_(), "b": torch.zeros((), requires_grad=True)}


def mse(pred, y):
    return ((pred - y) ** 2).mean()


def module_loop(model, opt, *, zero=True, keep=None):
    def step(batch):
        x, y = batch
        if zero:
            opt.zero_grad()
        loss = mse(model(x), y)
        loss.backward()
        opt.step()
        if keep is not None:
            keep.append(loss)
        return loss.item()
    return step


def raw_loop(p, *, lr=0.1, zero=True):
    """The lesson's linear regression: forward, backward, update under no_grad, zero the grads."""
    def step(batch):
        x, y = batch
        loss = mse(x @ p["w"] + p["b"], y)
        loss.backward()
        with torch.no_grad():
            p["w"] -= lr * p["w"].grad
            p["b"] -= lr * p["b"].grad
            if zero:
                p["w"].grad.zero_()
                p["b"].grad.zero_()
        return loss.item()
    return step


def wheres(audit, kind):
    return {f.where for f in audit.findings if f.kind == kind}


def kinds(audit):
    return {f.kind for f in audit.findings}


# -- planted bugs: each kind in a module + optimizer loop and in a raw-tensor loop -------------------------------

def test_grad_accumulates_module_zero_grad_forgotten():
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    audit = audit_training(module_loop(model, opt, zero=False), data(), model=model, optimizer=opt)
    # every parameter gets a gradient each step and none is ever zeroed: all four carry from step 1 into step 2
    assert kinds(audit) == {"grad_accumulates"}
    assert wheres(audit, "grad_accumulates") == set(NET)
    assert {f.step for f in audit.findings} == {2}
    assert not audit.ok


def test_grad_accumulates_raw_loop_without_zeroing():
    p = raw_params()
    audit = audit_training(raw_loop(p, zero=False), data(), params=p)
    assert kinds(audit) == {"grad_accumulates"}
    assert wheres(audit, "grad_accumulates") == {"w", "b"}


def test_grad_accumulates_beyond_declared_accumulation():
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def step(batch):  # accumulates over 2 batches as declared, steps every 2, but never zeroes
        global_i = step.i
        step.i += 1
        loss = mse(model(batch[0]), batch[1]) / 2
        loss.backward()
        if global_i % 2 == 1:
            opt.step()
        return loss.item()

    step.i = 0
    audit = audit_training(step, data(4), model=model, optimizer=opt, steps=4, accumulate=2)
    # carried into steps 2, 3, 4: two running is already more than accumulate=2 allows (zeroing every 2 steps
    # leaves one carried step at most)
    assert wheres(audit, "grad_accumulates") == set(NET)
    assert "accumulate=2" in audit.findings[0].message


def test_broadcast_in_loss_module():
    model = Net(keep=True)  # (N, 1) predictions against (N,) targets
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    audit = audit_training(module_loop(model, opt), data(), model=model, optimizer=opt)
    # pred (8, 1) - y (8,): broadcast to the (8, 8) grid
    assert kinds(audit) == {"broadcast_in_loss"}
    assert wheres(audit, "broadcast_in_loss") == {"sub((8, 1), (8,)) -> (8, 8)"}
    assert "test_training.py:" in audit.findings[0].message  # where in the user's code


def test_broadcast_in_loss_raw_tensors():
    g = torch.Generator().manual_seed(1)
    p = {"w": torch.randn(D, 1, generator=g).requires_grad_(), "b": torch.zeros(1, requires_grad=True)}

    def step(batch):
        x, y = batch
        pred = x @ p["w"] + p["b"]  # (8, 3) @ (3, 1) -> (8, 1); + (1,) is an ordinary broadcast
        loss = ((y - pred) ** 2).mean()  # (8,) - (8, 1) -> (8, 8)
        loss.backward()
        with torch.no_grad():
            for t in p.values():
                t -= 0.1 * t.grad
                t.grad = None
        return loss.item()

    audit = audit_training(step, data(), params=p)
    assert kinds(audit) == {"broadcast_in_loss"}
    assert wheres(audit, "broadcast_in_loss") == {"sub((8,), (8, 1)) -> (8, 8)"}


def test_broadcast_in_loss_through_mse_loss():
    model = Net(keep=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def step(batch):
        opt.zero_grad()
        with warnings.catch_warnings():  # torch warns about the size mismatch; the user here ignores it
            warnings.simplefilter("ignore")
            loss = nn.functional.mse_loss(model(batch[0]), batch[1])
        loss.backward()
        opt.step()

    audit = audit_training(step, data(), model=model, optimizer=opt)
    assert wheres(audit, "broadcast_in_loss") == {"mse_loss((8, 1), (8,)) -> (8, 8)"}


def test_graph_kept_alive_module_losses_in_a_list():
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    kept = []
    audit = audit_training(module_loop(model, opt, keep=kept), data(), model=model, optimizer=opt)
    assert kinds(audit) == {"graph_kept_alive"}
    # the kept tensor is the loss: mean of the (8,) squared errors
    (f,) = audit.findings
    assert f.where == "mean((8,)) -> ()"
    # after step 3 the graphs of steps 1 and 2 are alive, each the same size
    per_step = f.details["alive_nodes_per_step"]
    assert set(per_step) == {"1", "2"} and per_step["1"] == per_step["2"] >= 4
    assert f.details["growth_per_step"] == per_step["1"]


def test_graph_kept_alive_raw_running_total():
    p = raw_params()
    running = {"total": 0.0}
    inner = raw_loop(p)

    def step(batch):
        inner(batch)
        loss = mse(batch[0] @ p["w"] + p["b"], batch[1])
        running["total"] = running["total"] + loss  # history chained across steps
        return None

    audit = audit_training(step, data(), params=p)
    # the newest kept part of step 2 is total (a 0-d tensor) + loss (0-d): add((), ()) -> ()
    assert kinds(audit) == {"graph_kept_alive"}
    assert wheres(audit, "graph_kept_alive") == {"add((), ()) -> ()"}


def test_param_not_in_optimizer_module():
    model = Net()
    opt = torch.optim.SGD(model.fc1.parameters(), lr=0.05)  # fc2 left out

    def step(batch):
        model.zero_grad()
        mse(model(batch[0]), batch[1]).backward()
        opt.step()

    audit = audit_training(step, data(), model=model, optimizer=opt)
    assert kinds(audit) == {"param_not_in_optimizer"}
    assert wheres(audit, "param_not_in_optimizer") == {"fc2.weight", "fc2.bias"}


def test_param_not_in_optimizer_raw_tensors():
    p = raw_params()
    opt = torch.optim.SGD([p["w"]], lr=0.1)  # b left out

    def step(batch):
        opt.zero_grad()
        p["b"].grad = None
        mse(batch[0] @ p["w"] + p["b"], batch[1]).backward()
        opt.step()

    audit = audit_training(step, data(), params=p, optimizer=opt)
    assert kinds(audit) == {"param_not_in_optimizer"}
    assert wheres(audit, "param_not_in_optimizer") == {"b"}


def test_param_not_in_optimizer_but_updated_by_hand_is_fine():
    p = raw_params()
    opt = torch.optim.SGD([p["w"]], lr=0.1)

    def step(batch):
        opt.zero_grad()
        p["b"].grad = None
        mse(batch[0] @ p["w"] + p["b"], batch[1]).backward()
        opt.step()
        with torch.no_grad():
            p["b"] -= 0.1 * p["b"].grad

    assert audit_training(step, data(), params=p, optimizer=opt).ok


class WithUnused(Net):
    def __init__(self):
        super().__init__()
        self.unused = nn.Linear(2, 2)


def test_param_no_grad_module():
    model = WithUnused()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    audit = audit_training(module_loop(model, opt), data(), model=model, optimizer=opt)
    # unused never reaches the loss: no gradient, hence (with SGD) never updated — reported once, as no grad
    assert kinds(audit) == {"param_no_grad"}
    assert wheres(audit, "param_no_grad") == {"unused.weight", "unused.bias"}


def test_param_no_grad_raw_detach_and_data():
    p = raw_params()
    p["c"] = torch.ones((), requires_grad=True)

    def step(batch):
        x, y = batch
        loss = mse(x @ p["w"] + p["b"].detach() + p["c"].data, y)  # b and c cut out of the graph
        loss.backward()
        with torch.no_grad():
            p["w"] -= 0.1 * p["w"].grad
            p["w"].grad = None

    audit = audit_training(step, data(), params=p)
    assert kinds(audit) == {"param_no_grad"}
    assert wheres(audit, "param_no_grad") == {"b", "c"}


def test_param_not_updated_zero_grad_between_backward_and_step():
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def step(batch):
        mse(model(batch[0]), batch[1]).backward()
        opt.zero_grad()  # misplaced: the gradient is gone before step()
        opt.step()

    audit = audit_training(step, data(), model=model, optimizer=opt)
    assert kinds(audit) == {"param_not_updated"}
    assert wheres(audit, "param_not_updated") == set(NET)
    assert "between backward() and step()" in audit.findings[0].message


def test_param_not_updated_lr_zero():
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=0.0)
    audit = audit_training(module_loop(model, opt), data(), model=model, optimizer=opt)
    assert wheres(audit, "param_not_updated") == set(NET)
    assert kinds(audit) == {"param_not_updated"}
    assert "lr is 0" in audit.findings[0].message


def test_param_not_updated_raw_update_written_to_a_copy():
    p = raw_params()

    def step(batch):
        x, y = batch
        w, b = p["w"], p["b"]
        mse(x @ w + b, y).backward()
        with torch.no_grad():
            w = w - 0.1 * w.grad  # rebinds the local name; p["w"] keeps its value
            b = b - 0.1 * b.grad
        p["w"].grad = None
        p["b"].grad = None

    audit = audit_training(step, data(), params=p)
    assert kinds(audit) == {"param_not_updated"}
    assert wheres(audit, "param_not_updated") == {"w", "b"}


def test_non_finite_grad_module_nan_in_the_batch():
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    batches = data()
    batches[0][0][2, 1] = float("nan")  # one nan input: every gradient of the first step is nan
    audit = audit_training(module_loop(model, opt), batches, model=model, optimizer=opt)
    # the nan reaches every parameter in step 1 (later steps only repeat it: not reported again)
    assert wheres(audit, "non_finite_grad") == set(NET)
    assert {f.step for f in audit.of_kind("non_finite_grad")} == {1}


def test_non_finite_grad_raw_sqrt_at_zero_names_the_op():
    p = raw_params()
    b0 = p["b"].detach().clone()

    def step(batch):
        x, y = batch
        # sqrt(b - b0) is sqrt(0) in step 1: its derivative 1/(2 sqrt(0)) is inf, and reaches b only
        loss = mse(x @ p["w"] + p["b"], y) + torch.sqrt(p["b"] - b0)
        loss.backward()
        with torch.no_grad():
            for t in p.values():
                t -= 0.01 * t.grad
                t.grad = None

    audit = audit_training(step, data(), params=p)
    (f,) = audit.of_kind("non_finite_grad")
    assert f.where == "b" and f.step == 1
    assert "sqrt((),) -> ()" not in f.message and "sqrt(()) -> ()" in f.message  # the op that produced it
    assert "inf" in f.observed


def test_inplace_leaf_update_raw_tensors():
    p = raw_params()
    w_before = p["w"].detach().clone()

    def step(batch):
        loss = mse(batch[0] @ p["w"] + p["b"], batch[1])
        loss.backward()
        p["w"] -= 0.1 * p["w"].grad  # no torch.no_grad(): RuntimeError

    audit = audit_training(step, data(), params=p)  # must not raise
    assert kinds(audit) == {"inplace_leaf_update"}
    (f,) = audit.findings
    assert f.where == "w" and f.step == 1
    assert "torch.no_grad()" in f.message and "leaf Variable" in f.message
    assert audit.steps_run == 0 and audit.stopped
    assert torch.equal(p["w"].detach(), w_before)


def test_inplace_leaf_update_module_weight_clipping():
    model = Net()
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3)

    def step(batch):
        opt.zero_grad()
        mse(model(batch[0]), batch[1]).backward()
        opt.step()
        model.fc2.weight.clamp_(-0.01, 0.01)  # weight clipping outside torch.no_grad()

    audit = audit_training(step, data(), model=model, optimizer=opt)
    assert kinds(audit) == {"inplace_leaf_update"}
    assert wheres(audit, "inplace_leaf_update") == {"fc2.weight"}


# -- correct loops: no finding ------------------------------------------------------------------------------

def optimizer_loop(make_opt, **audit_kw):
    model = Net()
    opt = make_opt(model.parameters())
    return audit_training(module_loop(model, opt), data(), model=model, optimizer=opt, **audit_kw)


@pytest.mark.parametrize("make_opt", [
    lambda ps: torch.optim.SGD(ps, lr=0.05),
    lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4),
    lambda ps: torch.optim.Adam(ps, lr=1e-3),
    lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01),
    lambda ps: torch.optim.RMSprop(ps, lr=1e-3),
    lambda ps: torch.optim.Adagrad(ps, lr=1e-2),
    lambda ps: torch.optim.Adamax(ps, lr=1e-3),
    lambda ps: torch.optim.NAdam(ps, lr=1e-3),
], ids=["sgd", "sgd-momentum-nesterov-wd", "adam", "adamw", "rmsprop", "adagrad", "adamax", "nadam"])
def test_correct_module_loops_with_any_optimizer(make_opt):
    audit = optimizer_loop(make_opt)
    assert audit.ok, audit
    assert audit.steps_run == 3 and audit.params == NET
    assert "no findings" in str(audit)


def test_correct_lesson_linear_regression():
    p = raw_params()
    audit = audit_training(raw_loop(p), data(), params=p)
    assert audit.ok, audit
    assert audit.not_checked.keys() == {"param_not_in_optimizer"}  # no optimizer: manual updates


def test_correct_declared_accumulation():
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    k = 2
    count = {"i": 0}

    def step(batch):
        i = count["i"]
        count["i"] += 1
        if i % k == 0:
            opt.zero_grad()
        (mse(model(batch[0]), batch[1]) / k).backward()
        if i % k == k - 1:
            opt.step()

    audit = audit_training(step, data(6), model=model, optimizer=opt, steps=6, accumulate=k)
    assert audit.ok, audit
    assert "grad_accumulates" in audit.checked and "param_not_updated" in audit.checked


def test_correct_frozen_parameters():
    model = Net()
    model.fc1.requires_grad_(False)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)  # frozen ones never get a grad; Adam skips them
    audit = audit_training(module_loop(model, opt), data(), model=model, optimizer=opt)
    assert audit.ok, audit
    assert audit.params == ("fc2.weight", "fc2.bias") and audit.frozen == ("fc1.weight", "fc1.bias")


@pytest.mark.parametrize("make_sched", [
    lambda opt: torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5),
    lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda e: min(1.0, e / 2)),  # warmup from lr 0
    lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=3),
], ids=["step", "warmup-from-zero", "cosine"])
def test_correct_with_lr_scheduler(make_sched):
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    sched = make_sched(opt)
    inner = module_loop(model, opt)

    def step(batch):
        loss = inner(batch)
        sched.step()
        return loss

    audit = audit_training(step, data(), model=model, optimizer=opt)
    assert audit.ok, audit


class Broadcasts(nn.Module):
    """Ordinary broadcasting only: a bias (D,) added to (N, D), a per-row scale (N, 1) times (N, D), scalar ops,
    and a deliberate pairwise grid x[:, None] - x[None, :] (same rank on both sides)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.bias = nn.Parameter(torch.randn(D))
        self.w = nn.Parameter(torch.randn(D, 1))

    def forward(self, x):
        h = (x + self.bias) * x.norm(dim=1, keepdim=True) * 0.5 + 1.0
        pair = (h[:, None, :] - h[None, :, :]).pow(2).sum(-1).mean()
        return (h @ self.w).squeeze(-1) + 0.01 * pair


def test_correct_ordinary_broadcasting():
    model = Broadcasts()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    audit = audit_training(module_loop(model, opt), data(), model=model, optimizer=opt)
    assert audit.ok, audit


def test_correct_adam_with_a_tiny_gradient():
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step(batch):
        opt.zero_grad()
        (1e-9 * mse(model(batch[0]), batch[1])).backward()  # Adam moves every weight by about lr anyway
        opt.step()

    assert audit_training(step, data(), model=model, optimizer=opt).ok


class Regularized(nn.Module):
    """Dropout and BatchNorm (random numbers drawn by the user's step; buffers updated), and a cache of the
    last output kept on the module (one step only: not a growing graph)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.fc1, self.bn, self.drop, self.fc2 = nn.Linear(D, 6), nn.BatchNorm1d(6), nn.Dropout(0.3), nn.Linear(6, 1)
        self.last = None

    def forward(self, x):
        out = self.fc2(self.drop(torch.relu(self.bn(self.fc1(x))))).squeeze(-1)
        self.last = out
        return out


def test_correct_dropout_batchnorm_clipping_and_logged_losses():
    model = Regularized()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.5)
    log = []

    def step(batch):
        opt.zero_grad(set_to_none=False)
        loss = mse(model(batch[0]), batch[1])
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        log.append(loss.item())
        return {"loss": loss.detach()}

    audit = audit_training(step, data(), model=model, optimizer=opt)
    assert audit.ok, audit


def test_correct_two_backward_passes_in_one_step_and_no_return():
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def step(batch):
        opt.zero_grad()
        out = model(batch[0])
        mse(out, batch[1]).backward(retain_graph=True)
        (1e-3 * out.pow(2).mean()).backward()  # a second loss accumulated within the step
        opt.step()

    assert audit_training(step, data(), model=model, optimizer=opt).ok


def test_correct_lbfgs_with_a_closure():
    model = Net()
    opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)

    def step(batch):
        def closure():
            opt.zero_grad()
            loss = mse(model(batch[0]), batch[1])
            loss.backward()
            return loss
        return opt.step(closure)

    assert audit_training(step, data(), model=model, optimizer=opt).ok


def test_correct_autograd_grad_and_manual_update():
    p = raw_params()

    def step(batch):
        loss = mse(batch[0] @ p["w"] + p["b"], batch[1])
        gw, gb = torch.autograd.grad(loss, [p["w"], p["b"]])
        with torch.no_grad():
            p["w"].sub_(0.1 * gw)
            p["b"].sub_(0.1 * gb)

    assert audit_training(step, data(), params=p).ok


# -- the audit changes nothing but what the user's steps change ------------------------------------------------

def _dropout_setup():
    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(D, 5), nn.Dropout(0.5), nn.Linear(5, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def step(batch):
        opt.zero_grad()
        loss = mse(model(batch[0]).squeeze(-1) + 0.01 * torch.randn(N), batch[1])
        loss.backward()
        opt.step()
        return loss.item()
    return model, opt, step


def test_the_audit_leaves_params_and_rng_as_the_plain_steps_do():
    batches = data()
    model, _, step = _dropout_setup()
    torch.manual_seed(11)
    plain_losses = [step(b) for b in batches[:3]]
    plain_rng = torch.get_rng_state()
    plain_params = [t.detach().clone() for t in model.parameters()]

    model, opt, step = _dropout_setup()
    torch.manual_seed(11)
    audit = audit_training(step, batches, model=model, optimizer=opt)
    assert audit.ok, audit
    assert torch.equal(torch.get_rng_state(), plain_rng)  # the audit drew no random number of its own
    assert all(torch.equal(a, b) for a, b in zip(plain_params, model.parameters()))  # bit for bit
    assert list(audit.losses) == plain_losses
    # nothing left installed: parameter hooks, optimizer hooks, function modes, node probes
    assert all(not t._backward_hooks for t in model.parameters())
    assert not opt._optimizer_step_pre_hooks
    assert torch._C._len_torch_function_stack() == 0


def test_nothing_left_installed_when_graphs_are_kept_or_the_step_raises():
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    kept = []
    audit_training(module_loop(model, opt, keep=kept), data(), model=model, optimizer=opt)
    gc.collect()
    assert not [o for o in gc.get_objects() if type(o).__name__ == "_Probe"]  # removed from the kept graphs
    assert all(not t._backward_hooks for t in model.parameters())

    def boom(batch):
        mse(model(batch[0]), batch[1]).backward()
        raise ValueError("planted")

    with pytest.raises(ValueError, match="planted"):
        audit_training(boom, data(), model=model, optimizer=opt)
    assert all(not t._backward_hooks for t in model.parameters())
    assert not opt._optimizer_step_pre_hooks
    assert torch._C._len_torch_function_stack() == 0


def test_only_steps_batches_are_drawn():
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    it = iter(data(5))
    audit = audit_training(module_loop(model, opt), it, model=model, optimizer=opt, steps=2)
    assert audit.steps_run == 2 and len(list(it)) == 3


# -- records, report, misuse ---------------------------------------------------------------------------------

def test_records_one_per_finding_and_one_per_clean_kind():
    model = Net(keep=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    audit = audit_training(module_loop(model, opt, zero=False), data(), model=model, optimizer=opt)
    # 4 grad_accumulates + 1 broadcast_in_loss failing; the other 6 kinds pass
    assert [r.verdict for r in audit.records].count("fail") == 5 == len(audit.findings)
    assert sorted(r.check for r in audit.records if r.verdict == "pass") == sorted(
        set(KINDS) - {"grad_accumulates", "broadcast_in_loss"})
    fail = next(r for r in audit.records if r.check == "grad_accumulates" and r.input == "fc2.weight")
    assert fail.suite == "training" and fail.outcome == "failed" and fail.shape == (1, 4)
    assert fail.reason == next(f.message for f in audit.findings if f.where == "fc2.weight")
    validator = jsonschema.Draft202012Validator(schema())
    for r in audit.records:
        validator.validate(json.loads(dumps(r.to_dict())))


def test_records_skip_what_could_not_be_checked():
    p = raw_params()
    audit = audit_training(raw_loop(p), data(1), params=p, steps=1)
    skipped = {r.check: r.reason for r in audit.records if r.verdict == "skipped"}
    assert set(skipped) == {"grad_accumulates", "graph_kept_alive", "param_not_in_optimizer"}
    assert all(r.verdict in ("pass", "skipped") for r in audit.records)


def test_write_results_and_the_text_renderer_take_an_audit(tmp_path):
    model = Net(keep=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    audit = audit_training(module_loop(model, opt), data(), model=model, optimizer=opt)
    path = ga.write_results(tmp_path / "r.jsonl", [audit])
    _, back = ga.read_results(path)
    assert back == list(audit.records)
    import io

    buf = io.StringIO()
    render(audit.records, make_console(buf, width=200))
    text = buf.getvalue()
    assert "FAIL: broadcast_in_loss — sub((8, 1), (8,)) -> (8, 8) (observed)" in text  # the intact account
    assert "7 passed, 1 failed" in text


def test_report_text():
    p = raw_params()
    audit = audit_training(raw_loop(p, zero=False), data(), params=p)
    text = str(audit)
    assert text.splitlines()[0].startswith("gradaudit.audit_training ")
    assert "2 findings" in text and "3 of 3 steps completed" in text and "2 parameters audited" in text
    assert "grad_accumulates: w (step 2)" in text and "grad_accumulates: b (step 2)" in text
    assert "not checked: param_not_in_optimizer" in text
    assert repr(audit) == text and isinstance(audit, TrainingAudit)


def test_control_characters_in_names_do_not_reach_the_terminal():
    w = torch.zeros(D, requires_grad=True)
    evil = "w\x1b[2J\x07"

    def step(batch):
        mse(batch[0] @ w, batch[1]).backward()  # never zeroed, never updated

    audit = audit_training(step, data(), params={evil: w})
    text = str(audit)
    assert "\x1b" not in text and "\x07" not in text and "\\x1b[2J" in text
    assert wheres(audit, "grad_accumulates") == {evil}  # the finding keeps the name as given


@pytest.mark.parametrize("kwargs, field", [
    ({"steps": 0}, "steps"), ({"accumulate": 0}, "accumulate"), ({"steps": True}, "steps"),
    ({"model": "net"}, "model"), ({"params": [1]}, "params"), ({"optimizer": object()}, "optimizer"),
    ({"params": {"w": torch.ones(2, requires_grad=True) * 2}}, "params"), ({}, "model"),
])
def test_misuse_is_refused_before_any_step(kwargs, field):
    ran = []
    with pytest.raises(ga.SpecError) as exc:
        audit_training(ran.append, [1, 2], **kwargs)
    assert exc.value.field == field and not ran


def test_no_batches_is_refused():
    p = raw_params()
    with pytest.raises(ga.SpecError, match="no batch"):
        audit_training(raw_loop(p), [], params=p)


def test_inplace_leaf_update_caught_by_the_step_is_still_found():
    p = raw_params()

    def step(batch):
        mse(batch[0] @ p["w"] + p["b"], batch[1]).backward()
        try:
            p["b"].add_(-0.1 * p["b"].grad)  # raises; the step swallows it and b never trains
        except RuntimeError:
            pass
        with torch.no_grad():
            p["w"] -= 0.1 * p["w"].grad
        p["w"].grad = None
        p["b"].grad = None

    audit = audit_training(step, data(), params=p)
    # found at step 1 (the first attempt); b also never changes although its gradient is non-zero
    assert wheres(audit, "inplace_leaf_update") == {"b"}
    assert audit.of_kind("inplace_leaf_update")[0].step == 1 and audit.steps_run == 3
    assert kinds(audit) == {"inplace_leaf_update", "param_not_updated"}
    assert wheres(audit, "param_not_updated") == {"b"}


# -- from a hostile-input audit (twenty-second session): each failed before it --------------------------------------

def test_a_parameter_the_optimizer_holds_outside_the_model_is_audited():
    # a learnable loss scale the optimizer holds and the model does not, its zero_grad forgotten by hand: with
    # model= it went unaudited ("4 parameters audited, no findings"); given the optimizer alone it was found
    model = Net()
    scale = torch.ones((), requires_grad=True)
    opt = torch.optim.SGD([*model.parameters(), scale], lr=0.01)

    def step(batch):
        x, y = batch
        for p in model.parameters():
            p.grad = None  # the model's own gradients zeroed, the scale's never
        loss = mse(model(x), y) * scale
        loss.backward()
        opt.step()
        return loss.item()

    audit = audit_training(step, data(), model=model, optimizer=opt)
    assert wheres(audit, "grad_accumulates") == {"param_groups[0][4]"}


def test_a_model_with_nothing_to_audit_is_refused():
    # before: every per-parameter check was recorded as passing on 0 parameters
    with pytest.raises(ga.SpecError, match="nothing could be audited"):
        audit_training(lambda batch: 0.0, data(), model=nn.ReLU())


def test_a_lazy_module_that_has_not_run_is_refused_and_leaves_no_hook():
    # before: a bare ValueError from register_hook, after the hooks on the first layer were installed for good
    model = nn.Sequential(nn.Linear(D, 4), nn.Tanh(), nn.LazyLinear(1))
    with pytest.raises(ga.SpecError, match="lazy module"):
        audit_training(lambda batch: 0.0, data(), model=model)
    assert all(not p._backward_hooks for p in model[0].parameters())


def test_hooks_installed_before_a_failure_are_removed(monkeypatch):
    # install() ran before the try that removes them: one that failed part-way left the first hooks on the user's
    # parameters, running (and holding tensors) at every later backward of the user's own training
    from gradaudit import training

    real = training._Auditor.install

    def half(self):
        self.handles.append(self.params[0].tensor.register_hook(lambda g: None))
        raise RuntimeError("install failed part-way")

    monkeypatch.setattr(training._Auditor, "install", half)
    model = Net()
    with pytest.raises(RuntimeError, match="part-way"):
        audit_training(lambda batch: 0.0, data(), model=model)
    assert not model.fc1.weight._backward_hooks
    monkeypatch.setattr(training._Auditor, "install", real)


def test_batches_that_are_not_iterable_are_a_spec_error():
    # before: TypeError: 'NoneType' object is not iterable, from inside gradaudit
    model = Net()
    with pytest.raises(ga.SpecError, match="batches must be an iterable"):
        audit_training(module_loop(model, torch.optim.SGD(model.parameters(), lr=0.1)), None, model=model)


def _gan(zero_d=True):
    torch.manual_seed(0)
    gen, disc = nn.Linear(4, 4), nn.Linear(4, 1)
    opt_g, opt_d = torch.optim.SGD(gen.parameters(), lr=0.01), torch.optim.SGD(disc.parameters(), lr=0.01)

    def step(batch):
        x = batch[0]
        opt_g.zero_grad()
        fake = gen(x)
        nn.functional.softplus(-disc(fake)).mean().backward()  # reaches D too: D.grad gets G's loss
        opt_g.step()
        if zero_d:
            opt_d.zero_grad()
        (nn.functional.softplus(disc(fake.detach())).mean() + nn.functional.softplus(-disc(x)).mean()).backward()
        opt_d.step()

    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(16, 4, generator=g),) for _ in range(3)]
    return step, batches, nn.ModuleDict({"G": gen, "D": disc}), [opt_g, opt_d]


def test_a_gan_that_zeroes_each_optimizer_before_its_own_backward_has_no_finding():
    # the generator's backward reaches D while D.grad still holds the step before's; D is zeroed before its own
    # backward and step, so nothing stale reaches D's optimizer. Before: grad_accumulates on every D parameter
    step, batches, model, opts = _gan()
    assert audit_training(step, batches, model=model, optimizer=opts).findings == ()
    step, batches, model, opts = _gan(zero_d=False)  # D never zeroed: carried into every D step
    audit = audit_training(step, batches, model=model, optimizer=opts)
    assert wheres(audit, "grad_accumulates") == {"D.weight", "D.bias"}


def test_gradients_assigned_to_grad_by_hand_are_not_a_dead_parameter():
    # DP-SGD: per-sample gradients from torch.func, clipped, averaged and assigned to p.grad, then optimizer.step().
    # No gradient arrives through autograd's hooks, but the parameters train: before, param_no_grad on each, with
    # the advice to freeze them
    from torch.func import functional_call, grad, vmap

    torch.manual_seed(0)
    model = nn.Linear(D, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def per_sample_loss(params, x, y):
        return (functional_call(model, params, (x[None],)).squeeze() - y) ** 2

    def step(batch):
        x, y = batch
        per = vmap(grad(per_sample_loss), in_dims=(None, 0, 0))(
            {k: v.detach() for k, v in model.named_parameters()}, x, y)
        for name, p in model.named_parameters():
            norms = per[name].flatten(1).norm(dim=1).clamp(min=1.0)
            p.grad = (per[name] / norms.view(-1, *[1] * (per[name].dim() - 1))).mean(0)
        opt.step()
        opt.zero_grad()

    assert audit_training(step, data(), model=model, optimizer=opt).findings == ()


@pytest.mark.parametrize("steps", [3, 6])
def test_gradscalers_skipped_overflow_steps_are_not_a_non_finite_gradient(steps):
    # the mixed-precision recipe: GradScaler's first scale (2**16) overflows float16 gradients, and scaler.step skips
    # those updates by design, lowering the scale. Before: non_finite_grad on every parameter, blaming the loss.
    # Here the first five steps overflow (16 * 64 float16 products of ~100): in 3 steps no update ran at all, so the
    # audit cannot tell a recovering scaler from a loop that never trains, and says so (inconclusive); in 6, step 6
    # updates, and the skips before it are by design
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(64, 16, generator=g), torch.randn(64, generator=g) * 100) for _ in range(steps)]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu")

    def step(batch):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = ((model(batch[0]).squeeze(-1) - batch[1]) ** 2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    audit = audit_training(step, batches, model=model, optimizer=opt, steps=steps)
    assert scaler.get_scale() < 2.0 ** 16  # (it did skip: the scale came down)
    assert audit.findings == ()
    said = [r for r in audit.records if r.check == "non_finite_grad"]
    if steps == 3:
        assert audit.verdict == "inconclusive" and not audit.ok
        assert said[0].verdict == "skipped" and "none of the 3 steps trained" in said[0].reason
    else:
        assert audit.verdict == "pass" and audit.ok
        assert said[0].verdict == "pass" and "where no optimizer stepped" in said[0].reason


def test_non_finite_gradients_with_no_step_at_all_and_no_finite_check_are_a_finding():
    # NaN gradients every step and a forgotten optimizer.step(): no update ran, and nothing checked finiteness, so no
    # skip was by design; before, the GradScaler excuse made this loop clean
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(batch):
        opt.zero_grad()
        loss = torch.sqrt(model(batch) - 10.0).mean()  # sqrt of a negative: nan, and its gradient nan
        loss.backward()

    audit = audit_training(step, [torch.randn(4, 3) for _ in range(3)], model=model, optimizer=opt)
    assert {f.kind for f in audit.findings} == {"non_finite_grad"}
    assert {f.where for f in audit.findings} == {"weight", "bias"}


def test_a_pairwise_loss_built_from_one_tensor_is_not_a_broadcast_finding():
    # RankNet's pairwise differences s[:, None] - s: a grid from one tensor, on purpose. Before: broadcast_in_loss,
    # while the identical s[:, None] - s[None, :] was left alone; the (N,1) - (N,) bug (two tensors) still is one
    torch.manual_seed(0)
    model = nn.Linear(D, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch):
        x, y = batch
        opt.zero_grad()
        s = model(x).squeeze(-1)
        loss = nn.functional.softplus(-(s[:, None] - s) * torch.sign(y[:, None] - y)).mean()
        loss.backward()
        opt.step()

    assert audit_training(step, data(), model=model, optimizer=opt).findings == ()


class Fourier(nn.Module):
    """Learned frequencies w (K,) expand a time column t (B, 1) into features sin(t w) (B, K): an outer product on
    purpose, then a linear head; forward gives (B,)."""

    def __init__(self, k):
        super().__init__()
        torch.manual_seed(0)
        self.w = nn.Parameter(torch.randn(k))
        self.register_buffer("fixed", torch.arange(1.0, k + 1))
        self.head = nn.Linear(k, 1)

    def forward(self, t, scale=False):
        if scale == "buffer":  # fixed frequencies, a buffer, scaled: no autograd history at all
            w = 2 * torch.pi * self.fixed
        else:
            w = 2 * torch.pi * self.w if scale else self.w  # (K,) from the parameter alone
        return self.head(torch.sin(t * w)).squeeze(-1)


@pytest.mark.parametrize("scale", [False, True, "buffer"])
def test_learned_features_broadcast_against_a_parameter_are_not_a_finding_when_the_batch_equals_k(scale):
    # t (8, 1) * w (8,) -> (8, 8) has the shapes of the (N,1) - (N,) bug when the batch happens to be K = 8; w is
    # the model's own parameter (or 2 pi w, made from it alone), not a per-sample value: before, broadcast_in_loss
    model = Fourier(N)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch):
        x, y = batch
        opt.zero_grad()
        loss = mse(model(x[:, :1], scale), y)
        loss.backward()
        opt.step()

    audit = audit_training(step, data(), model=model, optimizer=opt)
    # (with the buffer's frequencies, w is unused: that is the one finding)
    assert kinds(audit) == ({"param_no_grad"} if scale == "buffer" else set())


def test_the_bug_is_still_found_next_to_a_parameter_broadcast():
    # the same model, its (B,) prediction unsqueezed to (B, 1) against y (B,): the (8, 1) - (8,) grid is the bug
    model = Fourier(N)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch):
        x, y = batch
        opt.zero_grad()
        loss = mse(model(x[:, :1]).unsqueeze(-1), y)
        loss.backward()
        opt.step()

    audit = audit_training(step, data(), model=model, optimizer=opt)
    assert wheres(audit, "broadcast_in_loss") == {"sub((8, 1), (8,)) -> (8, 8)"}


def test_zero_grad_between_backward_and_step_is_found_with_weight_decay():
    # AdamW's default weight decay (and SGD's weight_decay) moved the weights, so "the value never changed" missed
    # opt.zero_grad(set_to_none=False) between backward() and step(); each step saw .grad zero (fresh-eyes audit)
    torch.manual_seed(0)
    model = nn.Linear(D, 1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def step(batch):
        x, y = batch
        loss = mse(model(x).squeeze(-1), y)
        loss.backward()
        opt.zero_grad(set_to_none=False)  # the bug
        opt.step()

    audit = audit_training(step, data(), model=model, optimizer=opt)
    assert wheres(audit, "param_not_updated") == {"weight", "bias"}
    assert "zero_grad() ran between backward() and step()" in audit.findings[0].message


def test_a_wgan_critics_bias_with_an_exactly_zero_gradient_is_not_a_finding():
    # D(fake).mean() - D(real).mean() gives the critic's last bias a gradient of exactly 0; G's backward reached it
    # first and D's zero_grad() cleared that, as it should: "param_not_updated D.bias ... zero_grad() ran between
    # backward() and step()" was a false alarm with a false cause (fresh-eyes audit)
    torch.manual_seed(0)
    gen, critic = nn.Linear(2, 3), nn.Linear(3, 1)
    opt_g = torch.optim.RMSprop(gen.parameters(), 1e-3)
    opt_d = torch.optim.RMSprop(critic.parameters(), 1e-3)

    def step(real):
        opt_g.zero_grad()
        fake = gen(torch.randn(8, 2))
        (-critic(fake).mean()).backward()
        opt_g.step()
        opt_d.zero_grad()
        (critic(fake.detach()).mean() - critic(real).mean()).backward()
        opt_d.step()

    batches = [torch.randn(8, 3) for _ in range(3)]
    audit = audit_training(step, batches, model=nn.ModuleDict({"G": gen, "D": critic}), optimizer=[opt_g, opt_d])
    assert audit.findings == ()


def test_a_nan_in_an_accumulation_micro_batch_is_found():
    # a micro-batch step has no optimizer.step(), and its nan gradient was read as GradScaler's skip; the nan carried
    # in .grad into the next update and the weights turned nan, the audit clean (fresh-eyes audit)
    torch.manual_seed(0)
    model = nn.Linear(D, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = data()
    batches[0][0][0, 0] = float("nan")
    calls = [0]

    def step(batch):
        x, y = batch
        (mse(model(x).squeeze(-1), y) / 2).backward()
        calls[0] += 1
        if calls[0] % 2 == 0:
            opt.step()
            opt.zero_grad()

    audit = audit_training(step, batches, model=model, optimizer=opt, accumulate=2)
    assert wheres(audit, "non_finite_grad") == {"weight", "bias"}
    assert {f.step for f in audit.findings} == {1}  # where it first arrived


def test_one_scalers_skip_of_one_of_two_optimizers_is_not_a_finding():
    # two optimizers sharing one GradScaler: D's step skipped for inf (by design), G's taken; the exemption was per
    # step, so D's non-finite (scaled) gradients were a non_finite_grad finding (fresh-eyes audit)
    torch.manual_seed(0)
    gen, critic = nn.Linear(3, 3), nn.Linear(3, 1)
    opt_g, opt_d = torch.optim.SGD(gen.parameters(), 1e-2), torch.optim.SGD(critic.parameters(), 1e-2)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 100)
    batches = [torch.randn(8, 3) * 1e6 for _ in range(3)]  # the critic's scaled gradients overflow, G's do not

    def step(real):
        fake = gen(torch.randn(8, 3))
        opt_d.zero_grad()
        scaler.scale(critic(real).pow(2).mean() + critic(fake.detach()).mean()).backward()
        scaler.step(opt_d)
        opt_g.zero_grad()
        scaler.scale(-critic(fake).mean()).backward()
        scaler.step(opt_g)
        scaler.update()

    audit = audit_training(step, batches, model=nn.ModuleDict({"G": gen, "D": critic}), optimizer=[opt_g, opt_d])
    assert "non_finite_grad" not in kinds(audit)


# -- the third fresh-eyes audit (2026-12-06): misses, false alarms and messages of the doctor ------------------------

@pytest.mark.parametrize("loss", ["gaussian_nll_loss", "kl_div", "hinge_embedding_loss", "multilabel_soft_margin_loss"])
def test_losses_that_broadcast_their_target_silently_are_watched(loss):
    # each builds the (8, 8) grid from a (8, 1) prediction and a (8,) target without a warning from torch, and the
    # function mode sees the loss, not the sub/mul inside it: they were not in BROADCASTING and the bug passed
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    f = getattr(nn.functional, loss)

    def step(batch):
        x, y = batch
        opt.zero_grad()
        pred = model(x)  # (8, 1)
        extra = {"gaussian_nll_loss": (torch.ones(8, 1),), "kl_div": (None, None, "batchmean")}.get(loss, ())
        out = f(pred, y, *extra)
        out.backward()
        opt.step()

    batches = [(torch.randn(8, 3), torch.rand(8).sign()) for _ in range(3)]
    audit = audit_training(step, batches, model=model, optimizer=opt)
    assert [f.where for f in audit.of_kind("broadcast_in_loss")] == [f"{loss}((8, 1), (8,)) -> (8, 8)"]


def test_step_before_backward_is_named_as_such():
    # zero_grad, step, then backward: every step() sees .grad None or zero, as with zero_grad between backward and
    # step, but the step's gradient arrives after the call; the message named the misplaced zero_grad the loop had
    # right
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        opt.step()
        model(x).pow(2).mean().backward()

    audit = audit_training(step, [torch.randn(4, 3) for _ in range(3)], model=model, optimizer=opt)
    found = audit.of_kind("param_not_updated")
    assert {f.where for f in found} == {"weight", "bias"}
    assert all("optimizer.step() ran before backward()" in f.message for f in found)
    assert not any("zero_grad() ran between" in f.message for f in found)


def test_zero_grad_between_backward_and_step_keeps_its_own_message():
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(x):
        model(x).pow(2).mean().backward()
        opt.zero_grad()
        opt.step()

    audit = audit_training(step, [torch.randn(4, 3) for _ in range(3)], model=model, optimizer=opt)
    found = audit.of_kind("param_not_updated")
    assert {f.where for f in found} == {"weight", "bias"}
    assert all("zero_grad() ran between backward() and step()" in f.message for f in found)


def test_an_update_below_the_values_resolution_at_a_warmups_lr_is_not_an_update_to_a_copy():
    # Adam moves a weight by about lr: at a linear warmup's lr of 1e-8 (step 2; 0 at step 1), LayerNorm's weight of
    # exactly 1.0 stays 1.0 in float32 (half an ulp of 1.0 is 6e-8); it was named an update to a copy
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: s / 10_000)

    def step(x):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
        sched.step()

    audit = audit_training(step, [torch.randn(8, 4) for _ in range(3)], model=model, optimizer=opt)
    assert audit.of_kind("param_not_updated") == ()
    said = [r.reason for r in audit.records if r.check == "param_not_updated"][0]
    assert "not judged" in said and "'1.weight'" in said


def test_an_update_to_a_copy_is_still_found_at_an_ordinary_lr():
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = torch.optim.Adam([p.detach().clone().requires_grad_() for p in model.parameters()], lr=1e-3)

    def step(x):
        for p in model.parameters():
            p.grad = None
        model(x).pow(2).mean().backward()
        for p, q in zip(model.parameters(), opt.param_groups[0]["params"]):
            q.grad = p.grad
        opt.step()

    audit = audit_training(step, [torch.randn(4, 3) for _ in range(3)], model=model)
    assert {f.where for f in audit.of_kind("param_not_updated")} == {"weight", "bias"}


def test_a_parameter_holding_nan_that_never_changes_is_not_counted_as_changed():
    # NaN != NaN: torch.equal called an untouched parameter holding one changed by every step, and the findings
    # that need "never changed" skipped it
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    unused = nn.Parameter(torch.full((2,), float("nan")))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()

    params = {**dict(model.named_parameters()), "unused": unused}
    audit = audit_training(step, [torch.randn(4, 3) for _ in range(3)], params=params, optimizer=opt)
    assert sorted(f.kind for f in audit.findings if f.where == "unused") == ["param_no_grad", "param_not_in_optimizer"]


def test_a_prediction_made_from_parameters_alone_is_said_not_judged():
    # a full-batch factorisation: (U * V).sum(-1, keepdim=True) is (N, 1) and made from the parameters alone, which
    # shapes cannot tell from learned features; the record said nothing and passed
    torch.manual_seed(0)
    U, V = nn.Parameter(torch.randn(8, 4)), nn.Parameter(torch.randn(8, 4))
    opt = torch.optim.SGD([U, V], lr=0.01)

    def step(y):
        opt.zero_grad()
        (((U * V).sum(-1, keepdim=True) - y) ** 2).mean().backward()
        opt.step()

    audit = audit_training(step, [torch.randn(8) for _ in range(3)], params={"U": U, "V": V}, optimizer=opt)
    assert audit.of_kind("broadcast_in_loss") == ()
    said = [r.reason for r in audit.records if r.check == "broadcast_in_loss"][0]
    assert "not judged" in said and "sub((8, 1), (8,)) -> (8, 8)" in said


@pytest.mark.parametrize("n", [16, 17])
def test_frequencies_made_with_arange_in_the_forward_are_not_a_per_sample_target(n):
    # sin(pi x k), k = arange(1, K + 1) made in the forward, x (N, 1): a batch of N == K rows had the bug's shapes
    torch.manual_seed(0)
    head = nn.Linear(16, 1)
    opt = torch.optim.SGD(head.parameters(), lr=0.01)

    def step(x):
        opt.zero_grad()
        k = torch.arange(1, 17)
        features = torch.sin(torch.pi * x * k)  # (N, 16)
        head(features).pow(2).mean().backward()
        opt.step()

    audit = audit_training(step, [torch.rand(n, 1) for _ in range(3)], model=head, optimizer=opt)
    assert audit.findings == ()


def test_a_target_built_in_the_step_is_still_a_per_sample_value():
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch):
        x, ys = batch
        opt.zero_grad()
        y = torch.tensor(ys)  # (8,), from the batch's numbers
        ((model(x) - y) ** 2).mean().backward()
        opt.step()

    audit = audit_training(step, [(torch.randn(8, 3), [float(i) for i in range(8)])] * 3, model=model, optimizer=opt)
    assert [f.where for f in audit.of_kind("broadcast_in_loss")] == ["sub((8, 1), (8,)) -> (8, 8)"]


def test_too_few_steps_for_a_kind_make_the_audit_inconclusive_not_ok():
    # a forgotten zero_grad needs two completed steps to show; audit.ok was True after one, and the pytest fixture
    # passed the buggy loop
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(x):  # no zero_grad
        model(x).pow(2).mean().backward()
        opt.step()

    one = audit_training(step, [torch.randn(4, 3)], model=model, optimizer=opt, steps=1)
    assert one.findings == () and one.verdict == "inconclusive" and not one.ok
    assert set(one.undecided) == {"grad_accumulates", "graph_kept_alive"}
    assert str(one).splitlines()[0].endswith(": inconclusive: no findings, but 2 kinds not checked (too few steps) "
                                              "(1 of 1 step completed; 2 parameters audited; optimizer SGD)")
    manual = audit_training(step, [torch.randn(4, 3)] * 3, model=model)  # no optimizer: not applicable, not wanting
    assert "param_not_in_optimizer" in manual.not_checked and "param_not_in_optimizer" not in manual.undecided


def test_the_default_steps_cover_a_declared_accumulation():
    # accumulate=4 needs 5 steps to see .grad carried past it: the default of 3 left the forgotten zero_grad unseen
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(x):  # zero_grad never called, step every time
        model(x).pow(2).mean().backward()
        opt.step()

    audit = audit_training(step, [torch.randn(4, 3)] * 10, model=model, optimizer=opt, accumulate=4)
    assert audit.steps == 5 and audit.steps_run == 5
    assert {f.where for f in audit.of_kind("grad_accumulates")} == {"weight", "bias"}


def test_a_compiled_step_is_audited_eagerly_without_warnings_and_its_bugs_found():
    # Dynamo traced the audit's function mode: a warning from our code, recompile-limit logs, and under -W error an
    # internal Dynamo error instead of an audit. Run eagerly, the mode sees the ops the graph computes
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    compiled = torch.compile(model, backend="eager")
    loss_of = torch.compile(lambda p, y: ((p - y) ** 2).mean(), backend="eager")  # the (8, 1) - (8,) grid

    def step(batch):
        opt.zero_grad()
        loss_of(compiled(batch[0]), batch[1]).backward()
        opt.step()

    batches = [(torch.randn(8, 3), torch.randn(8)) for _ in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        audit = audit_training(step, batches, model=model, optimizer=opt)
    assert [f.where for f in audit.findings] == ["sub((8, 1), (8,)) -> (8, 8)"]
    from torch._dynamo.eval_frame import _stance

    assert _stance.stance == "default"  # the compiler's stance put back
