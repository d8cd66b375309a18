"""Seed 004 — "PyTorch Tensors and Autograd: Gradients You Can Verify by Hand".

Every expected value below is the lesson's own number, written as data before
anything runs; the derivation says where it came from. Gradients are checked
through the three evidence channels (:class:`Expectation`); everything else the lesson
claims — shapes, dtypes, grad_fn names, memory sharing, the regression's numbers,
the common bugs — is checked as observed facts (:class:`Probe`). Where the lesson's
own arithmetic is wrong, the check records the claim as an erratum (an expected
failure) beside the correct statement.
"""

from __future__ import annotations

from typing import Any

from ..spec import Expectation, InputSpec, Matches, Probe
from ..tolerances import Tolerance

DOC = "the autograd lesson"


def _src(section: str) -> str:
    return f"{DOC}, '{section}'"


def _const(name: str, value: Any) -> InputSpec:
    return InputSpec(name, value, requires_grad=False)


# -- the hand-derived graph ------------------------------------------------------------
# z = w*x + b = 3*2 + 1 = 7; L = (z - t)^2 = (7 - 10)^2 = 9; dL/dz = 2(z - t) = -6
# dL/dw = -6 * x = -12; dL/db = -6 * 1 = -6; dL/dx = -6 * w = -18

GRAPH = "(w*x + b - t)**2"
GRAPH_INPUTS = {"x": 2.0, "w": 3.0, "b": 1.0, "t": _const("t", 10.0)}
GRAPH_GRADS = {"w": -12, "b": -6, "x": -18}


def _graph() -> dict[str, Any]:
    import torch

    x = torch.tensor(2.0, requires_grad=True)
    w = torch.tensor(3.0, requires_grad=True)
    b = torch.tensor(1.0, requires_grad=True)
    t = torch.tensor(10.0)
    wx = w * x
    z = wx + b
    z.retain_grad()
    err = z - t
    loss = err**2
    loss.backward()
    assert z.grad is not None
    return {
        "z": z.item(), "error": err.item(), "L": loss.item(), "dL/dz": z.grad.item(),
        "grad_fn of w*x": type(wx.grad_fn).__name__, "grad_fn of z": type(z.grad_fn).__name__,
        "grad_fn of z - t": type(err.grad_fn).__name__, "grad_fn of L": type(loss.grad_fn).__name__,
        "grad_fn of leaf w": w.grad_fn, "grad_fn of leaf x": x.grad_fn,
    }


# -- finite differences: L(w) = (2w + 1 - 10)^2 with eps = 0.001 --------------------------
# L(3.001) = (6.002 - 9)^2 = (-2.998)^2 = 8.988004; L(2.999) = (-3.002)^2 = 9.012004
# difference = -0.024; central slope = -0.024 / (2 * 0.001) = -12
# the lesson says "divided by two point zero zero two": -0.024 / 2.002 = -0.0119880...

def _loss_at(w: float) -> float:
    import torch

    wt = torch.tensor(w, dtype=torch.float64)
    return float((wt * 2.0 + 1.0 - 10.0) ** 2)


def _fd() -> dict[str, Any]:
    up, down = _loss_at(3.001), _loss_at(2.999)
    return {"L(3.001)": up, "L(2.999)": down, "L(3.001) - L(2.999)": up - down,
            "slope with divisor 2*eps = 0.002": (up - down) / 0.002}


def _fd_at(dtype_name: str, eps: float) -> float:
    """The lesson's central difference of L(w) = (2w - 9)^2 at w = 3 with *eps*, computed in *dtype_name*."""
    import torch

    dtype = getattr(torch, dtype_name)
    w, e = torch.tensor(3.0, dtype=dtype), torch.tensor(eps, dtype=dtype)

    def loss(v: Any) -> Any:
        return (v * 2.0 + 1.0 - 10.0) ** 2

    return float((loss(w + e) - loss(w - e)) / (2 * e))


def _fd_float32() -> dict[str, Any]:
    slope = _fd_at("float32", 1e-6)
    return {"slope in float32, eps 1e-6": slope, "its relative error": abs(slope + 12.0) / 12.0}


def _fd_float64() -> dict[str, Any]:
    return {"slope in float64, eps 1e-6": _fd_at("float64", 1e-6)}


def _fd_erratum() -> dict[str, Any]:
    up, down = _loss_at(3.001), _loss_at(2.999)
    return {"(L(3.001) - L(2.999)) / 2.002": (up - down) / 2.002}


# -- gradient controls -------------------------------------------------------------------

def _controls() -> dict[str, Any]:
    import torch

    w = torch.tensor(3.0, requires_grad=True)
    x = torch.tensor(2.0)
    ((w * x + 1.0 - 10.0) ** 2).backward()
    assert w.grad is not None
    w.grad.zero_()
    after_zero = w.grad.item()
    w.grad = None
    after_none = w.grad
    with torch.no_grad():
        y = w * x
    d = w.detach()
    d_grad_fn, d_requires_grad = d.grad_fn, d.requires_grad
    d.mul_(10.0)  # in place on the detached view: the original changes too
    return {
        "w.grad after grad.zero_()": after_zero, "w.grad after grad = None": after_none,
        "no_grad result grad_fn": y.grad_fn, "no_grad result requires_grad": y.requires_grad,
        "detach() grad_fn": d_grad_fn, "detach() requires_grad": d_requires_grad,
        "original w after detached.mul_(10)": w.item(),
    }


# -- a custom Function ---------------------------------------------------------------------

def _square_function() -> Any:
    import torch

    class Square(torch.autograd.Function):
        """forward: y = x^2 (saves x); backward: grad * 2x."""

        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            (x,) = ctx.saved_tensors
            return grad * 2 * x

    return Square


def custom_square(x: Any) -> Any:
    """x^2 through the lesson's custom autograd.Function."""
    return _square_function().apply(x)


def _custom_backward() -> dict[str, Any]:
    import torch

    x = torch.tensor(3.0, requires_grad=True)
    y = custom_square(x)
    (g,) = torch.autograd.grad(y, x, grad_outputs=torch.tensor(1.0))
    return {"backward at x=3, incoming gradient 1": g.item(), "output grad_fn": type(y.grad_fn).__name__}


# -- linear regression from raw tensors ------------------------------------------------------
# x = 0..3, y = 1, 3, 5, 7; w = b = 0: predictions 0, errors -1, -3, -5, -7,
# MSE = (1 + 9 + 25 + 49) / 4 = 21; dL/dw = (2/4) sum(err * x) = 0.5 * (0 - 3 - 10 - 21) = -17;
# dL/db = 0.5 * sum(err) = 0.5 * (-16) = -8. Step lr 0.1: w = 1.7, b = 0.8; predictions
# 0.8, 2.5, 4.2, 5.9; errors -0.2, -0.5, -0.8, -1.1; loss (0.04 + 0.25 + 0.64 + 1.21) / 4 = 0.535.
# Second-step gradients: dL/dw = 0.5 * (0 - 0.5 - 1.6 - 3.3) = -2.7; dL/db = 0.5 * (-2.6) = -1.3.

REG_X, REG_Y = [0.0, 1.0, 2.0, 3.0], [1.0, 3.0, 5.0, 7.0]
REG = "mean((w*x + b - y)**2)"
REG_INPUTS = {"w": 0.0, "b": 0.0, "x": _const("x", REG_X), "y": _const("y", REG_Y)}


def _params() -> tuple[Any, Any, Any, Any]:
    import torch

    x, y = torch.tensor(REG_X), torch.tensor(REG_Y)  # float32, as in the lesson
    w = torch.zeros((), requires_grad=True)
    b = torch.zeros((), requires_grad=True)
    return x, y, w, b


def _loss(x: Any, y: Any, w: Any, b: Any) -> Any:
    return ((w * x + b - y) ** 2).mean()


def _one_step() -> dict[str, Any]:
    import torch

    x, y, w, b = _params()
    loss = _loss(x, y, w, b)
    loss.backward()
    initial = loss.detach().clone()
    with torch.no_grad():
        w -= 0.1 * w.grad
        b -= 0.1 * b.grad
    assert w.grad is not None and b.grad is not None
    w.grad.zero_()
    b.grad.zero_()
    with torch.no_grad():
        pred = w * x + b
    # float32 tensors, not Python floats: the comparison then uses float32's tolerance
    return {"initial MSE": initial, "w after one step": w.detach().clone(), "b after one step": b.detach().clone(),
            "predictions": pred, "errors": pred - y, "loss after one step": _loss(x, y, w, b).detach(),
            "w.grad after zeroing": w.grad.clone(), "b.grad after zeroing": b.grad.clone()}


def _sgd_step(x: Any, y: Any, w: Any, b: Any, *, lr: float) -> Any:
    """One training step: loss, backward, update under no_grad, zero the gradients."""
    import torch

    loss = _loss(x, y, w, b)
    loss.backward()
    with torch.no_grad():
        w -= lr * w.grad
        b -= lr * b.grad
        w.grad.zero_()
        b.grad.zero_()
    return loss


def _converge() -> dict[str, Any]:
    x, y, w, b = _params()
    for _ in range(500):
        _sgd_step(x, y, w, b, lr=0.1)
    return {"w after 500 steps": w.detach(), "b after 500 steps": b.detach()}


# -- the common bugs -------------------------------------------------------------------------

def _error_text(action: Any) -> str:
    try:
        action()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return "no error"


def _scalar_loss() -> dict[str, Any]:
    import torch

    v = torch.tensor([1.0, 2.0], requires_grad=True)

    def vector() -> None:
        (v * 2).backward()

    def reduced() -> None:
        (v * 2).sum().backward()

    return {"backward() on a vector": _error_text(vector), "backward() on its sum": _error_text(reduced),
            "v.grad after the sum": v.grad.tolist() if v.grad is not None else None}


def _inplace_saved() -> dict[str, Any]:
    import torch

    a = torch.tensor(2.0, requires_grad=True)

    def changed() -> None:
        s = a * 1.0
        q = s ** 2  # pow saves s for its backward
        s.add_(1.0)  # in place on the saved intermediate
        q.backward()

    def untouched() -> None:
        s = a * 1.0
        (s ** 2).backward()

    return {"backward after s.add_(1)": _error_text(changed), "backward without it": _error_text(untouched),
            "a.grad": float(a.grad) if a.grad is not None else None}


def _bug_inplace_leaf() -> dict[str, Any]:
    import torch

    w = torch.tensor(1.0, requires_grad=True)

    def update() -> None:
        nonlocal w
        w -= 0.1

    def update_in_no_grad() -> None:
        with torch.no_grad():
            w.sub_(0.1)

    return {"w -= 0.1 outside no_grad": _error_text(update),
            "the same update inside no_grad": _error_text(update_in_no_grad)}


def _bug_forgot_zero_grad() -> dict[str, Any]:
    import torch

    x, y, w, b = _params()
    _loss(x, y, w, b).backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
        b -= 0.1 * b.grad
    assert w.grad is not None and b.grad is not None
    stale_w, stale_b = w.grad.clone(), b.grad.clone()
    _loss(x, y, w, b).backward()  # no zeroing: the new gradient is added to -17 and -8
    pile_w, pile_b = w.grad.clone(), b.grad.clone()
    w.grad, b.grad = None, None
    _loss(x, y, w, b).backward()
    return {"stale w.grad": stale_w, "stale b.grad": stale_b, "new w gradient alone": w.grad,
            "new b gradient alone": b.grad, "w.grad without zero_grad": pile_w,
            "b.grad without zero_grad": pile_b}


def _bug_second_backward() -> dict[str, Any]:
    x, y, w, b = _params()
    loss = _loss(x, y, w, b)
    loss.backward()
    second = _error_text(loss.backward)
    x, y, w, b = _params()
    loss = _loss(x, y, w, b)
    loss.backward(retain_graph=True)
    loss.backward()
    return {"second backward on the same loss": second, "w.grad after two backward with retain_graph": w.grad.item()}


def _graph_nodes(roots: list[Any]) -> int:
    """Distinct autograd nodes reachable from the grad_fn of each kept value."""
    seen: set[int] = set()
    stack = [getattr(r, "grad_fn", None) for r in roots]
    keep = []  # hold the nodes so ids stay unique while counting
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        keep.append(node)
        stack.extend(n for n, _ in node.next_functions)
    return len(seen)


def _bug_keep_loss_tensors() -> dict[str, Any]:
    counts = {}
    for label, keep in (("tensor", lambda t: t), ("item", lambda t: t.item())):
        x, y, w, b = _params()
        history = []
        for _ in range(20):
            history.append(keep(_sgd_step(x, y, w, b, lr=0.01)))
        counts[label] = _graph_nodes(history)
    return {"autograd nodes kept alive by 20 stored loss tensors": counts["tensor"],
            "autograd nodes kept alive by 20 stored loss.item()": counts["item"]}


def _bug_broadcast() -> dict[str, Any]:
    import torch

    pred = torch.tensor([1.0, 2.0, 3.0])
    target = torch.tensor([[1.0], [2.0], [4.0]])
    wrong = pred - target
    right = pred - target.squeeze(1)
    return {"shape of (3) - (3,1)": list(wrong.shape), "wrong MSE": (wrong**2).mean(),
            "shape after squeezing the target": list(right.shape), "right MSE": (right**2).mean()}


def _doctor() -> dict[str, Any]:
    """Each common bug planted in the lesson's own linear-regression loop, and what ga.audit_training
    finds there (kind: where), three steps each."""
    import torch

    from ..training import audit_training

    def audit(bug: str) -> str:
        x, y, w, b = _params()
        if bug == "broadcast":
            y = y.reshape(-1, 1)  # targets as a column: (4) - (4,1) -> (4,4)
        kept = []

        def step(batch: Any) -> float:
            loss = _loss(x, y, w, b)
            loss.backward()
            if bug == "inplace":
                w.sub_(0.01 * w.grad)  # in place on a leaf, outside torch.no_grad()
            with torch.no_grad():
                w.sub_(0.01 * w.grad)
                b.sub_(0.01 * b.grad)
            if bug != "zero_grad":
                w.grad, b.grad = None, None
            if bug == "keep":
                kept.append(loss)  # the tensor, not loss.item()
            return loss.item()

        found = audit_training(step, range(3), params={"w": w, "b": b}).findings
        return "; ".join(f"{f.kind}: {f.where}" for f in found) or "no findings"

    return {"bug 1, w.sub_(lr * w.grad) outside no_grad": audit("inplace"),
            "bug 2, no zeroing between steps": audit("zero_grad"),
            "bug 3, the loss tensors kept": audit("keep"),
            "the broadcasting bug, targets as (4,1)": audit("broadcast"),
            "the lesson's loop as written": audit("none")}


# -- tensor basics ------------------------------------------------------------------------------

def _dtypes() -> dict[str, Any]:
    import torch

    return {"torch.tensor([1.0, 2.0]).dtype": str(torch.tensor([1.0, 2.0]).dtype),
            "torch.tensor([1, 2]).dtype": str(torch.tensor([1, 2]).dtype),
            "requires_grad on an integer tensor": _error_text(lambda: torch.tensor([1, 2]).requires_grad_()),
            "int64 * float32 dtype": str((torch.tensor([1, 2]) * torch.tensor([0.5, 0.5])).dtype),
            "int64 * float32 values": (torch.tensor([1, 2]) * torch.tensor([0.5, 0.5])).tolist(),
            "in-place int64.mul_(float32)": _error_text(lambda: torch.tensor([1, 2]).mul_(torch.tensor([0.5, 0.5]))),
            "torch.zeros(2, 3).shape": list(torch.zeros(2, 3).shape)}


def _ready_accelerator() -> str | None:
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return None


def _no_accelerator() -> str | None:
    if _ready_accelerator():
        return None
    return "no accelerator on this machine (see `gradaudit env`): the same-device rule needs a second device"


def _same_device() -> dict[str, Any]:
    import torch

    dev = _ready_accelerator()
    a, b = torch.ones(3), torch.ones(3, device=dev)
    return {"cpu tensor + accelerator tensor": _error_text(lambda: a + b)}


def _shapes() -> dict[str, Any]:
    import torch

    t = torch.arange(12)
    m = t.reshape(3, 4)
    return {"reshape(3, 4)": list(m.shape), "reshape(2, 6)": list(t.reshape(2, 6).shape),
            "reshape(4, -1)": list(t.reshape(4, -1).shape), "reshape(3, 4) reshape(5, -1)":
            _error_text(lambda: t.reshape(5, -1)),
            "transpose(0, 1) of (3, 4)": list(m.transpose(0, 1).shape),
            "unsqueeze(0) of (3,)": list(torch.zeros(3).unsqueeze(0).shape),
            "squeeze() of (1, 3, 1)": list(torch.zeros(1, 3, 1).squeeze().shape),
            "(3,1) + (1,4)": list((torch.zeros(3, 1) + torch.zeros(1, 4)).shape)}


def _numpy_bridge() -> dict[str, Any]:
    import numpy as np
    import torch

    a = np.zeros(3)
    shared = torch.from_numpy(a)
    copy = torch.from_numpy(a).clone()
    a[0] = 5.0
    return {"from_numpy after the array changes": shared.tolist(), "clone after the array changes": copy.tolist(),
            "from_numpy dtype of a float64 array": str(shared.dtype)}


def checks() -> list[Expectation | Probe]:
    """The lesson's checks, in the lesson's order."""
    return [
        Probe("default dtypes, integer gradients and promotion", _dtypes, {
            "torch.tensor([1.0, 2.0]).dtype": "torch.float32", "torch.tensor([1, 2]).dtype": "torch.int64",
            "requires_grad on an integer tensor": Matches(r"RuntimeError: only Tensors of floating point dtype"),
            "int64 * float32 dtype": "torch.float32", "int64 * float32 values": [0.5, 1.0],
            "in-place int64.mul_(float32)": Matches(r"result type Float can't be cast to .*Long"),
            "torch.zeros(2, 3).shape": [2, 3]},
            derivation="floats default to float32, whole numbers to int64; gradients exist only for floating "
                       "point; [1, 2] * [0.5, 0.5] = [0.5, 1.0] promoted to float32, but an in-place integer "
                       "result cannot hold it", source=_src("dtype: Numbers Have Types")),
        Probe("the same-device rule", _same_device,
              {"cpu tensor + accelerator tensor": Matches(r"same device")},
              derivation="every tensor in an operation must live on the same device",
              source=_src("Device: CPU or GPU"), skip_unless=_no_accelerator),
        Probe("shape operations and broadcasting", _shapes, {
            "reshape(3, 4)": [3, 4], "reshape(2, 6)": [2, 6], "reshape(4, -1)": [4, 3],
            "reshape(3, 4) reshape(5, -1)": Matches(r"RuntimeError: shape '\[5, -1\]' is invalid"),
            "transpose(0, 1) of (3, 4)": [4, 3], "unsqueeze(0) of (3,)": [1, 3], "squeeze() of (1, 3, 1)": [3],
            "(3,1) + (1,4)": [3, 4]},
            derivation="12 elements fit 3x4 and 2x6; -1 is inferred as 12/4 = 3 and 12 is not a multiple of 5; "
                       "transpose swaps axes; broadcasting aligns from the right: (3,1)+(1,4) -> (3,4)",
            source=_src("Shape Operations")),
        Probe("NumPy bridge: from_numpy shares memory, clone does not", _numpy_bridge, {
            "from_numpy after the array changes": [5.0, 0.0, 0.0], "clone after the array changes": [0.0, 0.0, 0.0],
            "from_numpy dtype of a float64 array": "torch.float64"},
            derivation="from_numpy views the array's memory, so a[0] = 5 shows in the tensor; clone copies first",
            source=_src("Bridge to NumPy")),
        Expectation(name="hand-derived graph", function=GRAPH, inputs=GRAPH_INPUTS, expected=GRAPH_GRADS,
              derivation="z = wx + b = 7, L = (z - t)^2 = 9, dL/dz = 2(z - t) = -6; dL/dw = -6x = -12, "
                         "dL/db = -6, dL/dx = -6w = -18", source=_src("Backward by Hand")),
        Probe("hand-derived graph: values and grad_fn", _graph, {
            "z": 7, "error": -3, "L": 9, "dL/dz": -6, "grad_fn of w*x": "MulBackward0",
            "grad_fn of z": "AddBackward0", "grad_fn of z - t": "SubBackward0", "grad_fn of L": "PowBackward0",
            "grad_fn of leaf w": None, "grad_fn of leaf x": None},
            derivation="z = 3*2 + 1 = 7, error 7 - 10 = -3, L = 9, dL/dz = 2*(-3) = -6; each result names the "
                       "operation that made it; leaves have grad_fn None", source=_src("Our Hand-Derived Graph")),
        Probe("finite-difference check of dL/dw", _fd, {
            "L(3.001)": 8.988004, "L(2.999)": 9.012004, "L(3.001) - L(2.999)": -0.024,
            "slope with divisor 2*eps = 0.002": -12},
            tolerance=Tolerance(1e-9, 1e-9, why="float64 evaluation of (2w - 9)^2 near w = 3 rounds at about "
                                "1e-15; the difference quotient divides that by 0.002, about 1e-12; the claim "
                                "itself is exact (f is quadratic, so the central difference has no truncation)"),
            derivation="L(3.001) = (-2.998)^2 = 8.988004, L(2.999) = (-3.002)^2 = 9.012004; -0.024 / (2 * 0.001) "
                       "= -12", source=_src("Finite-Difference Check")),
        Probe("thirty-two bit floats swamp a tiny epsilon", _fd_float32, {
            "slope in float32, eps 1e-6": -11.444092, "its relative error": 0.046326},
            derivation="float32 numbers near 3 are 2^-22 apart, so 3 + 1e-6 is stored as 3 + 2^-20 (and 3 - 1e-6 as "
                       "3 - 2^-20): the difference L(3 + 2^-20) - L(3 - 2^-20) = -24 * 2^-20 is exact, but it is "
                       "divided by 2e-6, not by the step taken, 2 * 2^-20; the slope reads -12 * 2^-20 / 1e-6 = "
                       "-11.444092, 1 - 2^-20 / 1e-6 = 4.6326% off -12",
            dtype="float32", source=_src("Why Bother Checking?")),
        Probe("sixty-four bit floats keep the same epsilon", _fd_float64, {"slope in float64, eps 1e-6": -12},
            tolerance=Tolerance(1e-8, 0.0, why="float64 rounds L near 9 at about 2.2e-16 * 9 = 2e-15, and its steps "
                                "3 +- 1e-6 at about 4.4e-16; divided by 2e-6 that is about 1e-9 of the slope, and "
                                "1e-8 leaves a margin; the quotient of a quadratic has no truncation"),
            derivation="the central difference of a quadratic is its exact slope, 2 * 2 * (2 * 3 - 9) = -12, up to "
                       "float64 rounding", source=_src("Why Bother Checking?")),
        Probe('erratum: "divided by two point zero zero two gives minus twelve"', _fd_erratum,
              {"(L(3.001) - L(2.999)) / 2.002": -12},
              expect="fail", expect_why="the lesson divides -0.024 by 2.002, which gives -0.011988; the central "
              "difference divides by 2*eps = 0.002 (see 'finite-difference check of dL/dw'), which gives -12",
              derivation="the document's claim, kept as written", source=_src("Finite-Difference Check")),
        Expectation(name="second backward on a fresh loss accumulates", function=GRAPH, inputs=GRAPH_INPUTS,
              expected=dict(GRAPH_GRADS, w=-24, b=-12, x=-36), methods=["backward"],
              protocol=["forward", "backward", "forward", "backward"],
              derivation="backward adds into .grad: -12 + -12 = -24 for w (and -12 for b, -36 for x)",
              source=_src("Gradients Accumulate")),
        Expectation(name="grad.zero_() resets", function=GRAPH, inputs=GRAPH_INPUTS, expected=GRAPH_GRADS,
              methods=["backward"], protocol=["forward", "backward", "reset_zero", "forward", "backward"],
              derivation="zeroing between passes leaves one pass's gradient: -12, -6, -18",
              source=_src("zero_grad: Reset Between Steps")),
        Expectation(name="grad = None resets", function=GRAPH, inputs=GRAPH_INPUTS, expected=GRAPH_GRADS,
              methods=["backward"], protocol=["forward", "backward", "reset_none", "forward", "backward"],
              derivation="setting .grad to None between passes leaves one pass's gradient: -12, -6, -18",
              source=_src("zero_grad: Reset Between Steps")),
        Probe("no_grad and detach", _controls, {
            "w.grad after grad.zero_()": 0, "w.grad after grad = None": None,
            "no_grad result grad_fn": None, "no_grad result requires_grad": False,
            "detach() grad_fn": None, "detach() requires_grad": False,
            "original w after detached.mul_(10)": 30},
            derivation="zero_ makes the gradient 0 and None removes it; under no_grad nothing is recorded; "
                       "detach keeps the values (shared memory: 3 * 10 = 30 shows in w) without history",
            source=_src("torch.no_grad: Stop Recording / detach: Cut the Graph")),
        Expectation(name="custom Function: square", function=custom_square, inputs={"x": 3.0}, expected={"x": 6},
              derivation="forward y = x^2 saves x; backward returns grad * 2x = 1 * 2 * 3 = 6",
              source=_src("Example: A Custom Square")),
        Probe("custom Function: backward with incoming gradient 1", _custom_backward, {
            "backward at x=3, incoming gradient 1": 6, "output grad_fn": "SquareBackward"},
            derivation="grad * 2x = 1 * 2 * 3 = 6; the output's grad_fn is the Function's own backward node, "
                       "named after the class: SquareBackward",
            source=_src("Example: A Custom Square")),
        Expectation(name="linear regression: gradients at w = b = 0", function=REG, inputs=REG_INPUTS,
              expected={"w": -17, "b": -8},
              derivation="errors -1, -3, -5, -7; dL/dw = (2/4) sum(err x) = 0.5 * (-34) = -17; "
                         "dL/db = (2/4) sum(err) = 0.5 * (-16) = -8", source=_src("Gradients: Hand and Autograd")),
        Probe("linear regression: loss and one update", _one_step, {
            "initial MSE": 21, "w after one step": 1.7, "b after one step": 0.8,
            "predictions": [0.8, 2.5, 4.2, 5.9], "errors": [-0.2, -0.5, -0.8, -1.1],
            "loss after one step": 0.535, "w.grad after zeroing": 0, "b.grad after zeroing": 0},
            derivation="MSE = (1 + 9 + 25 + 49)/4 = 21; w = 0 - 0.1 * -17 = 1.7, b = 0 - 0.1 * -8 = 0.8; "
                       "loss (0.04 + 0.25 + 0.64 + 1.21)/4 = 0.535; the update runs under no_grad, then the "
                       "gradients are zeroed", dtype="float32", source=_src("The Loss by Hand / One Update Step")),
        Probe("linear regression: a few hundred steps recover y = 2x + 1", _converge, {
            "w after 500 steps": 2, "b after 500 steps": 1},
            tolerance=Tolerance(1e-4, 0.0, why="the loss's Hessian is [[7, 3], [3, 2]] (eigenvalues about 0.595 "
                                "and 8.405), so with lr 0.1 the error shrinks by 1 - 0.0595 per step: after 500 "
                                "steps by a factor of about 5e-14; what remains is float32 rounding, about 1e-6, "
                                "and 1e-4 is that with a margin"),
            derivation="gradient descent converges to the least-squares line, which is exactly y = 2x + 1",
            source=_src("The Update Under no_grad")),
        Probe("the loss must be a single number", _scalar_loss, {
            "backward() on a vector": Matches(r"RuntimeError: grad can be implicitly created only for scalar outputs"),
            "backward() on its sum": "no error", "v.grad after the sum": [2, 2]},
            derivation="backward needs one output to differentiate: on a vector it raises; reduced first (a sum), "
                       "d/dv_i sum(2 v) = 2 for each element",
            source=_src("Calling backward()")),
        Probe("an in-place change of a saved intermediate breaks backward", _inplace_saved, {
            "backward after s.add_(1)": Matches(r"RuntimeError: one of the variables needed for gradient computation "
                                                r"has been modified by an inplace operation"),
            "backward without it": "no error", "a.grad": 4},
            derivation="q = s^2 saves s = a * 1 for its backward (dq/ds = 2s); changing s in place afterwards makes "
                       "the saved value stale, and backward raises; left alone, dq/da = 2a = 4 at a = 2",
            source=_src("Bug One: In-Place on Leaf")),
        Probe("bug 1: in-place update of a leaf", _bug_inplace_leaf, {
            "w -= 0.1 outside no_grad": Matches(r"RuntimeError: a leaf Variable that requires grad is being used "
                                                r"in an in-place operation"),
            "the same update inside no_grad": "no error"},
            derivation="an in-place change of a recorded leaf would corrupt the history; under no_grad it is allowed",
            source=_src("Bug One: In-Place on Leaf")),
        Probe("bug 2: forgetting zero_grad", _bug_forgot_zero_grad, {
            "stale w.grad": -17, "stale b.grad": -8, "new w gradient alone": -2.7, "new b gradient alone": -1.3,
            "w.grad without zero_grad": -19.7, "b.grad without zero_grad": -9.3},
            derivation="after one step (w = 1.7, b = 0.8) the errors are -0.2, -0.5, -0.8, -1.1, so the new "
                       "gradients are 0.5 * (-5.4) = -2.7 and 0.5 * (-2.6) = -1.3; without zeroing, .grad holds "
                       "-17 + -2.7 = -19.7 and -8 + -1.3 = -9.3", dtype="float32",
            source=_src("Bug Two: Forgetting zero_grad")),
        Probe("bug 3: backward twice on one loss", _bug_second_backward, {
            "second backward on the same loss": Matches(r"RuntimeError: Trying to backward through the graph a "
                                                        r"second time"),
            "w.grad after two backward with retain_graph": -34},
            derivation="backward frees the graph, so a second call raises; retain_graph=True keeps it and the "
                       "second call adds another -17: -34", source=_src("Bug Three: Graph Retention")),
        Probe("bug 3: stored loss tensors keep their graphs alive", _bug_keep_loss_tensors, {
            "autograd nodes kept alive by 20 stored loss tensors": 102,
            "autograd nodes kept alive by 20 stored loss.item()": 0},
            derivation="each loss = mean(pow(sub(add(mul(w, x), b), y), 2)) owns 5 nodes (Mean, Pow, Sub, Add, "
                       "Mul) and shares the 2 AccumulateGrad nodes of w and b: 20 * 5 + 2 = 102; a float has none",
            source=_src("Bug Three: Graph Retention")),
        Probe("the silent broadcasting bug", _bug_broadcast, {
            "shape of (3) - (3,1)": [3, 3], "wrong MSE": 7 / 3, "shape after squeezing the target": [3],
            "right MSE": 1 / 3},
            derivation="pred [1, 2, 3] minus targets [[1], [2], [4]] gives the 3x3 grid of p_j - t_i, squares "
                       "summing to 5 + 2 + 14 = 21, mean 21/9 = 7/3; matched shapes give errors 0, 0, -1, mean 1/3",
            dtype="float32", source=_src("The Silent Broadcasting Bug")),
        Probe("the common bugs, found by ga.audit_training in the lesson's loop", _doctor, {
            "bug 1, w.sub_(lr * w.grad) outside no_grad": "inplace_leaf_update: w",
            "bug 2, no zeroing between steps": "grad_accumulates: w; grad_accumulates: b",
            "bug 3, the loss tensors kept": "graph_kept_alive: mean((4,)) -> ()",
            "the broadcasting bug, targets as (4,1)": "broadcast_in_loss: sub((4,), (4, 1)) -> (4, 4)",
            "the lesson's loop as written": "no findings"},
            derivation="the in-place update raises on w, the first leaf it touches, which ends the audit; without "
                       "zeroing both w.grad and b.grad carry the previous step's gradient; a kept loss keeps its "
                       "graph, whose root is the mean of the 4 squared errors; w*x + b has shape (4) and the "
                       "targets (4,1), so their difference is the (4,4) grid; the lesson's loop zeroes, updates "
                       "under no_grad and keeps loss.item()",
            source=_src("Common Bugs")),
    ]
