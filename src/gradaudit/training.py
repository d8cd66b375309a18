"""The training-step doctor: run the user's own ``step(batch)`` a few times and say what is wrong
with the loop around the gradients, each finding named by parameter (or op and shapes), with the
evidence and the fix.

``ga.audit_training(step, batches, model=..., optimizer=...)`` watches the steps it runs and
nothing else:

- hooks on every trainable parameter see each gradient arrive, and what ``.grad`` already held
  (``grad_accumulates``, ``param_no_grad``, ``non_finite_grad``);
- the parameters' values before and after each step (``param_not_updated``), and what the optimizer
  holds and sees when its ``step()`` runs (``param_not_in_optimizer`` and the cause of a missing update);
- a ``TorchFunctionMode`` sees every torch call of the step: elementwise ops that broadcast two
  different shapes into a grid (``broadcast_in_loss``, confirmed on the path of a backward pass),
  the in-place update of a leaf that raised (``inplace_leaf_update``), and one liveness probe per
  autograd node, so that graphs of earlier steps still alive are counted (``graph_kept_alive``) and
  the op whose backward first produced a non-finite gradient can be named.

Everything installed is removed before the audit returns (also when the step raises); the audit
draws no random numbers and writes to no tensor of the user's.

>>> import torch, gradaudit.training as T
>>> torch.manual_seed(0) and None
>>> model = torch.nn.Linear(3, 1)
>>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
>>> x, y = torch.randn(8, 3), torch.randn(8, 1)
>>> def step(batch):
...     opt.zero_grad()
...     loss = ((model(batch[0]) - batch[1]) ** 2).mean()
...     loss.backward()
...     opt.step()
...     return loss.item()
>>> audit = T.audit_training(step, [(x, y)] * 3, model=model, optimizer=opt)
>>> audit.ok, audit.findings
(True, ())
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import math
import os
import sys
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from . import judge as J
from .errors import SpecError
from .record import Record
from .tolerances import MIN_KEPT_NODES, MIN_VISIBLE_LR, plain

KINDS: tuple[str, ...] = (
    "grad_accumulates", "broadcast_in_loss", "graph_kept_alive", "param_not_in_optimizer", "param_no_grad",
    "param_not_updated", "non_finite_grad", "inplace_leaf_update",
)

def _n(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def _n_steps(count: int) -> str:
    return _n(count, "step")


# why param_not_in_optimizer is not checked without an optimizer: it does not apply (not a want of evidence)
NO_OPTIMIZER = "no optimizer given: manual updates"

# what torch says when a leaf that requires grad is modified in place outside torch.no_grad()
LEAF_INPLACE = "leaf Variable that requires grad"

# elementwise ops of two tensors whose broadcasting can build the (N,1)-(N,) grid; pointwise losses broadcast
# their input against their target the same way before reducing
BROADCASTING = frozenset({
    "add", "sub", "mul", "div", "true_divide", "floor_divide", "rsub", "radd", "rmul", "rdiv", "rtruediv",
    "pow", "rpow", "remainder", "fmod", "atan2", "hypot", "maximum", "minimum", "fmax", "fmin", "xlogy",
    "copysign", "subtract", "multiply", "divide", "squared_difference", "mse_loss", "l1_loss",
    "smooth_l1_loss", "huber_loss", "binary_cross_entropy_with_logits", "poisson_nll_loss", "where",
    # (these broadcast (N, 1) against (N,) without a warning, and the mode sees them, not the ops inside)
    "gaussian_nll_loss", "kl_div", "hinge_embedding_loss", "multilabel_soft_margin_loss",
})

_SKIP_DIRS = (os.path.dirname(torch.__file__) + os.sep, os.path.dirname(os.path.abspath(__file__)) + os.sep)


@dataclass(frozen=True)
class Finding:
    """One thing wrong with the training loop: its kind, where (parameter name, or op and shapes),
    what happened with the evidence and the fix, and the step (1-based) where it was first seen."""

    kind: str
    where: str
    message: str
    step: int | None = None
    expected: str = ""
    observed: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, repr=False)
class TrainingAudit:
    """What ``audit_training`` found: ``.ok``, ``.findings``, ``.records`` (one failing record per
    finding, one passing or skipped record per kind without findings); ``str()`` is the report."""

    name: str
    findings: tuple[Finding, ...]
    records: tuple[Record, ...]
    steps_run: int
    steps: int
    params: tuple[str, ...]
    frozen: tuple[str, ...] = ()
    optimizer: str | None = None
    accumulate: int = 1
    losses: tuple[float | None, ...] = ()
    checked: tuple[str, ...] = ()
    not_checked: Mapping[str, str] = field(default_factory=dict)
    stopped: str | None = None
    elapsed_s: float = field(default=0.0, compare=False)

    @property
    def verdict(self) -> str:
        """fail where something was found; inconclusive where nothing was but a kind could not be checked for want
        of steps (a forgotten zero_grad needs accumulate + 1 of them to show); pass otherwise (a kind that does
        not apply, param_not_in_optimizer without an optimizer, leaves it a pass)."""
        if self.findings:
            return "fail"
        return "inconclusive" if self.undecided else "pass"

    @property
    def ok(self) -> bool:
        return self.verdict == "pass"

    @property
    def undecided(self) -> dict[str, str]:
        """The kinds not checked for want of evidence, and why (not_checked, less those that do not apply)."""
        return {k: why for k, why in self.not_checked.items() if why != NO_OPTIMIZER}

    def of_kind(self, kind: str) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.kind == kind)

    def report(self) -> str:
        from .render.training import report

        return report(self)

    def __str__(self) -> str:
        return self.report()

    def __repr__(self) -> str:
        return self.report()

    def __rich__(self) -> str:
        from .render.text import rich_text

        return rich_text(self.report())


# -- small helpers ---------------------------------------------------------------------------------------------

def _shape(shape: Iterable[int]) -> str:
    s = tuple(int(d) for d in shape)
    return "(" + ", ".join(map(str, s)) + ("," if len(s) == 1 else "") + ")"


def _numel(shape: Sequence[int]) -> int:
    return math.prod(int(d) for d in shape)


def _num(v: float) -> str:
    return f"{v:.3g}"


def _steps_text(steps: Sequence[int]) -> str:
    s = [str(i) for i in steps]
    if len(s) <= 1:
        return "step " + "".join(s)
    return "steps " + ", ".join(s[:-1]) + " and " + s[-1]


def _dense(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    if t.is_sparse:
        t = t.coalesce().values()
    if t.is_complex():
        t = torch.view_as_real(t)
    return t


def _amax(t: torch.Tensor) -> torch.Tensor:
    """max |t| as a 0-d float64 tensor, without a sync (nan if any element is nan). One pass
    (aminmax; torch.linalg.vector_norm(t, inf) is many times slower on CPU)."""
    t = _dense(t)
    if t.numel() == 0 or not (t.is_floating_point() or t.is_complex()):
        return torch.zeros((), dtype=torch.float64, device=t.device)
    lo, hi = torch.aminmax(t)
    return torch.maximum(hi, -lo).to(torch.float64)


def _total(t: torch.Tensor) -> torch.Tensor:
    """sum of t (finite exactly when every element is, short of an overflow that only huge gradients reach)."""
    t = _dense(t)
    if not t.is_floating_point():
        return torch.zeros((), dtype=torch.float64, device=t.device)
    if t.element_size() < 4:
        return t.sum(dtype=torch.float32)
    return t.sum()


def _values(items: Sequence[torch.Tensor]) -> list[float]:
    """0-d tensors to floats, one transfer per device."""
    out: list[float] = [0.0] * len(items)
    by_device: dict[torch.device, list[int]] = {}
    for i, t in enumerate(items):
        by_device.setdefault(t.device, []).append(i)
    for idxs in by_device.values():
        vals = torch.stack([items[i].reshape(()) for i in idxs]).tolist()
        for i, v in zip(idxs, vals):
            out[i] = float(v)
    return out


def _user_location() -> str | None:
    """file:line of the innermost frame outside torch and gradaudit (the user's code)."""
    f = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        if not name.startswith(_SKIP_DIRS):
            return f"{os.path.basename(name)}:{f.f_lineno}"
        f = f.f_back  # type: ignore[assignment]
    return None


def _op_name(func: Any) -> str:
    name = getattr(func, "__name__", None) or type(func).__name__
    if name == "__get__":
        name = getattr(getattr(func, "__self__", None), "__name__", name)
    if name.startswith("__") and name.endswith("__") and len(name) > 4:
        name = name[2:-2]
    return str(name)


# -- what is watched -------------------------------------------------------------------------------------------

class _Op:
    """One torch call of the step that produced a tensor with autograd history."""

    __slots__ = ("name", "inputs", "output", "step", "index", "location", "reached", "grid", "learned_grid")

    def __init__(self, name: str, inputs: tuple[tuple[int, ...], ...], output: tuple[int, ...], step: int,
                 index: int, location: str | None):
        self.name, self.inputs, self.output = name, inputs, output
        self.step, self.index, self.location = step, index, location
        self.reached = False  # its backward ran
        self.grid: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None = None
        # a grid against the model's own values (learned features): not judged, and said so
        self.learned_grid: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None = None

    @property
    def signature(self) -> str:
        return f"{self.name}({', '.join(_shape(s) for s in self.inputs)}) -> {_shape(self.output)}"

    @property
    def grid_text(self) -> str:
        """The op with the two shapes it broadcast and the grid they made (a loss's grid, not its reduction)."""
        assert self.grid is not None
        a, b, g = self.grid
        return f"{self.name}({_shape(a)}, {_shape(b)}) -> {_shape(g)}"

    @property
    def at(self) -> str:
        return f" at {self.location}" if self.location else ""


class _Probe:
    """Registered on an autograd node: alive exactly as long as the node; marks the op as reached by a
    backward pass, and keeps the finiteness of the gradients through it."""

    __slots__ = ("aud", "op", "__weakref__")

    def __init__(self, aud: _Auditor, op: _Op):
        self.aud, self.op = aud, op

    def __call__(self, grad_inputs: Sequence[Any], grad_outputs: Sequence[Any]) -> None:
        self.aud.node_backward(self.op, grad_inputs, grad_outputs)


class _Param:
    __slots__ = ("name", "tensor", "held", "arrived", "gmax", "carried", "changed", "before", "at_step",
                 "first_step", "lazy_g", "lazy_pre", "lazy_reset", "pmax", "last", "stepped", "early")

    def __init__(self, name: str, tensor: torch.Tensor, held: bool | None):
        self.name, self.tensor, self.held = name, tensor, held
        self.arrived: set[int] = set()  # steps in which a gradient arrived
        self.gmax: dict[int, float] = {}  # step -> max |gradient| (summed over arrivals: max of maxes)
        self.carried: dict[int, float] = {}  # step -> max |.grad| already there when the step's first gradient came
        self.changed = False  # the value changed in some step
        self.before: torch.Tensor | None = None
        self.pmax = 0.0  # max |value| before the first step
        self.at_step: list[tuple[int, Any, float | None]] = []  # optimizer.step(): (step, grad max or None, lr)
        self.first_step = -1  # the last step whose first gradient was seen
        self.lazy_g: list[torch.Tensor] = []
        self.lazy_pre: torch.Tensor | None = None
        # after a carried .grad was seen this step: .grad at each later arrival (None: set to None in between)
        self.lazy_reset: list[torch.Tensor | None] = []
        self.last: torch.Tensor | None = None  # max |gradient| of the latest arrival (read lazily)
        # at each optimizer.step() that held it: max |.grad| it used (None: no .grad) and the latest arrival's before it
        self.stepped: list[tuple[int, torch.Tensor | None, torch.Tensor | None]] = []  # (step, used, latest)
        self.early: list[bool] = []  # at each such call: whether a gradient had arrived in its step before it


# a finiteness check the step makes (GradScaler's unscale_, an isfinite guard): a step that then skips its update
# where the gradients are not finite does so by design
_FINITE_CHECKS = frozenset(f for f in (
    getattr(torch, "_amp_foreach_non_finite_check_and_unscale_", None), torch.isfinite, torch.isnan, torch.isinf,
    torch.Tensor.isfinite, torch.Tensor.isnan, torch.Tensor.isinf) if f is not None)


class _Watch(TorchFunctionMode):
    """Sees every torch call of the step (and nothing of ours)."""

    def __init__(self, aud: _Auditor):
        super().__init__()
        self.aud = aud

    def __torch_function__(self, func: Any, types: Any, args: Sequence[Any] = (),
                           kwargs: Mapping[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        aud = self.aud
        if aud.busy:
            return func(*args, **kwargs)
        if not aud.guarded:
            try:
                aud.guarded = func in _FINITE_CHECKS
            except TypeError:  # (an unhashable callable: not one of them)
                pass
        try:
            out = func(*args, **kwargs)
        except RuntimeError as exc:
            if LEAF_INPLACE in str(exc):
                aud.note_inplace(func, args)
            raise
        if isinstance(out, torch.Tensor):
            aud.made(args, kwargs, (out,), func)
            if out.grad_fn is not None:
                aud.track(func, args, kwargs, (out,))
        elif isinstance(out, (tuple, list)) and out:
            aud.made(args, kwargs, out)
            outs = tuple(o for o in out if isinstance(o, torch.Tensor) and o.grad_fn is not None)
            if outs and torch.is_grad_enabled():
                aud.track(func, args, kwargs, outs)
        return out


# -- the auditor ---------------------------------------------------------------------------------------------

class _Auditor:
    def __init__(self, params: list[_Param], optimizers: Sequence[Any], accumulate: int):
        self.params = params
        self.by_id = {id(p.tensor): p for p in params}
        self.own: set[int] = set()  # the model's other values: frozen parameters, buffers (see learned)
        self.optimizers = optimizers
        self.accumulate = accumulate
        self.busy = False
        self.step = -1
        self.ops: list[_Op] = []
        self.probes: dict[int, list[weakref.ref[_Probe]]] = {}
        self.handles: list[Any] = []
        self.grids: dict[str, _Op] = {}
        self.learned_grids: set[str] = set()  # grids against the model's own values a backward went through
        # the step's tensors made from the parameters alone (see learned), by id; weak, so none is kept alive
        self.params_only: dict[int, weakref.ref[torch.Tensor]] = {}
        self.inplace: tuple[str, str, str | None, int] | None = None  # leaf, op, location, step
        # per node run in backward, in order: its op, the sums of its incoming and of its outgoing gradients
        self.backward_log: list[tuple[_Op, list[torch.Tensor], list[torch.Tensor]]] = []
        self.nonfinite: dict[str, tuple[int, float, str | None]] = {}  # param -> (step, max |g|, op text)
        self.skipped_nonfinite: list[int] = []  # steps with non-finite gradients in which no optimizer stepped
        self.first_skipped: dict[str, int] = {}  # parameter -> the first such step where its gradient was not finite
        self.skipped_detail: dict[str, tuple[int, float, str | None]] = {}  # as nonfinite, for those steps
        self.at_update: list[tuple[_Param, torch.Tensor]] = []  # this step's optimizer.step(): max |.grad| it used
        self.updated: set[str] = set()  # the parameters an optimizer.step() of this step updated
        self.opt_steps: dict[int, int] = {}  # step -> optimizer.step() calls
        self.guarded = False  # the steps checked finiteness (GradScaler, an isfinite guard): see _FINITE_CHECKS

    # hooks ---------------------------------------------------------------------------------------------
    def install(self) -> None:
        for p in self.params:
            self.handles.append(p.tensor.register_hook(self._grad_hook(p)))
        for opt in self.optimizers:
            if hasattr(opt, "register_step_pre_hook"):
                self.handles.append(opt.register_step_pre_hook(self._opt_hook(opt)))

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()

    def _grad_hook(self, p: _Param) -> Callable[[torch.Tensor], None]:
        def hook(grad: torch.Tensor) -> None:
            busy, self.busy = self.busy, True
            try:
                s = self.step
                if p.first_step != s:
                    p.first_step = s
                    pre = p.tensor.grad
                    if pre is not None and s > 0:
                        p.lazy_pre = _amax(pre)
                elif p.lazy_pre is not None:  # zeroed since (a GAN's D: reached by G's backward first, then zeroed
                    # before its own): what the step's optimizer sees carries nothing
                    now = p.tensor.grad
                    p.lazy_reset.append(None if now is None else _amax(now))
                p.arrived.add(s)
                p.lazy_g.append(_amax(grad))
                p.last = p.lazy_g[-1]
            finally:
                self.busy = busy
        return hook

    def _opt_hook(self, opt: Any) -> Callable[..., None]:
        def hook(*_: Any) -> None:
            busy, self.busy = self.busy, True
            try:
                s = self.step
                self.opt_steps[s] = self.opt_steps.get(s, 0) + 1
                for group in opt.param_groups:
                    lr = group.get("lr")
                    lr_value = float(lr) if isinstance(lr, (int, float, torch.Tensor)) else None
                    for t in group["params"]:
                        p = self.by_id.get(id(t))
                        if p is not None:
                            self.updated.add(p.name)
                            used = None if t.grad is None else _amax(t.grad)
                            if used is not None:  # what this update uses (read lazily, after_step)
                                self.at_update.append((p, used))
                            p.stepped.append((s, used, p.last))
                            p.early.append(s in p.arrived)
                        if p is not None and not p.changed:  # evidence only needed while it never moved
                            g = t.grad
                            p.at_step.append((s, None if g is None else _amax(g), lr_value))
            finally:
                self.busy = busy
        return hook

    # the function mode's callbacks ------------------------------------------------------------------
    def track(self, func: Any, args: Sequence[Any], kwargs: Mapping[str, Any], outs: tuple[torch.Tensor, ...]) -> None:
        name = _op_name(func)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if name in BROADCASTING and len(tensors) < 2:
            tensors += [v for v in kwargs.values() if isinstance(v, torch.Tensor)]
        inputs = tuple(tuple(t.shape) for t in tensors)
        op = _Op(name, inputs, tuple(outs[0].shape), self.step, len(self.ops), _user_location())
        if name in BROADCASTING and len(inputs) >= 2:
            pair = (0, 1) if name != "where" else (1, 2)
            if len(inputs) > pair[1] and not _one_storage(tensors[pair[0]], tensors[pair[1]]):
                grid = _grid(inputs[pair[0]], inputs[pair[1]])
                if self.learned(tensors[pair[0]]) or self.learned(tensors[pair[1]]):
                    op.learned_grid = grid
                else:
                    op.grid = grid
        self.ops.append(op)
        nodes: list[Any] = []
        for o in outs:
            node = o.grad_fn
            if node is None or any(node is n for n in nodes):
                continue
            nodes.append(node)
            probe = _Probe(self, op)
            self.handles.append(node.register_hook(probe))
            self.probes.setdefault(self.step, []).append(weakref.ref(probe))

    def made(self, args: Sequence[Any], kwargs: Mapping[str, Any], outs: Sequence[Any], func: Any = None) -> None:
        """Outputs of an op whose tensor operands (positional, or in a list, or keywords) are all the model's own
        values are too (see learned); and torch.arange's, an index range (the frequencies k of sin(pi x k), made in
        the forward, broadcast a batch column against them on purpose, and a batch of as many rows as there are
        frequencies was a broadcast_in_loss finding). Other factories' are not: a target built in the step
        (torch.tensor of the batch's numbers) is a per-sample value."""
        some = False
        for a in itertools.chain(args, kwargs.values()):
            for t in a if isinstance(a, (tuple, list)) else (a,):
                if isinstance(t, torch.Tensor):
                    if not self.learned(t):
                        return
                    some = True
        if not some and func is not None and _op_name(func) == "arange":
            some = True
        if some:
            for o in outs:
                if isinstance(o, torch.Tensor):
                    self.params_only[id(o)] = weakref.ref(o)

    def learned(self, t: torch.Tensor) -> bool:
        """Whether *t* is made from the model's own values alone (a parameter, a buffer, a view of one, or an op's
        output whose tensor operands all are), not a per-sample one. Learned features t (B, 1) *
        w (K,) broadcast a batch column against such a tensor on purpose, and had the (N, 1) - (N,) bug's shapes
        when the batch happened to equal K; the bug compares two per-sample values."""
        base = t if t._base is None else t._base
        if id(base) in self.by_id or id(base) in self.own:
            return True
        ref = self.params_only.get(id(t))  # (by identity: a tensor's == is elementwise)
        return ref is not None and ref() is t

    def note_inplace(self, func: Any, args: Sequence[Any]) -> None:
        if self.inplace is not None or not args or not isinstance(args[0], torch.Tensor):
            return
        t = args[0]
        base = t if t._base is None else t._base
        p = self.by_id.get(id(base))
        leaf = p.name if p is not None else f"leaf tensor of shape {_shape(base.shape)}"
        self.inplace = (leaf, _op_name(func), _user_location(), self.step)

    def node_backward(self, op: _Op, grad_inputs: Sequence[Any], grad_outputs: Sequence[Any]) -> None:
        busy, self.busy = self.busy, True
        try:
            op.reached = True
            if op.grid is not None and op.grid_text not in self.grids:
                self.grids[op.grid_text] = op
            elif op.learned_grid is not None and len(self.learned_grids) < 3:
                a, b, g = op.learned_grid
                self.learned_grids.add(f"{op.name}({_shape(a)}, {_shape(b)}) -> {_shape(g)}")
            self.backward_log.append((op, [_total(g) for g in grad_outputs if isinstance(g, torch.Tensor)],
                                      [_total(g) for g in grad_inputs if isinstance(g, torch.Tensor)]))
        finally:
            self.busy = busy

    # per step ----------------------------------------------------------------------------------------------
    def before_step(self, s: int) -> None:
        self.step = s
        self.backward_log = []
        self.params_only = {}  # (a tensor kept from an earlier step and used again is then a per-sample one: found)
        self.at_update = []
        self.updated = set()
        for p in self.params:
            p.lazy_g, p.lazy_pre, p.lazy_reset = [], None, []
            if not p.changed:
                p.before = p.tensor.detach().clone()
                if s == 0:
                    p.pmax = _values([_amax(p.before)])[0]

    def after_step(self, s: int) -> None:
        lazy: list[torch.Tensor] = []
        for p in self.params:
            lazy += (p.lazy_g + ([p.lazy_pre] if p.lazy_pre is not None else [])
                     + [r for r in p.lazy_reset if r is not None])
        vals = iter(_values(lazy)) if lazy else iter(())
        bad: list[_Param] = []
        for p in self.params:
            gs = [next(vals) for _ in p.lazy_g]
            if p.lazy_pre is not None:
                pre = next(vals)
                reset = [None if r is None else next(vals) for r in p.lazy_reset]
                if pre != 0.0 and not any(r is None or r == 0.0 for r in reset):
                    p.carried[s] = pre
            if gs:
                m = max(gs, key=lambda v: (math.isnan(v), v))
                p.gmax[s] = m
                if not math.isfinite(m) and p.name not in self.nonfinite:
                    bad.append(p)
            p.lazy_g, p.lazy_pre, p.lazy_reset = [], None, []
            if not p.changed and p.before is not None:
                if not _same_values(p.before, p.tensor.detach()):
                    p.changed = True
                    p.before = None
                    p.at_step = []
        # (per optimizer: two optimizers sharing one GradScaler, D's step skipped and G's taken, read as a finding on D)
        if bad and not self.nonfinite and self.optimizers and not any(p.name in self.updated for p in bad):
            # no optimizer stepped: the update was skipped where the gradients were not finite, as GradScaler skips an
            # overflow of its scale by design (the mixed-precision recipe's first steps; a non_finite_grad finding
            # there pointed at the loss), or a step guarded by isfinite
            self.skipped_nonfinite.append(s)
            origin = self._origin() if any(p.name not in self.skipped_detail for p in bad) else None
            for p in bad:
                self.first_skipped.setdefault(p.name, s)
                self.skipped_detail.setdefault(p.name, (s, p.gmax[s], origin))
        elif bad and not self.nonfinite:  # later ones follow from the first (the update spreads nan to the weights)
            origin = self._origin()
            for p in bad:
                self.nonfinite[p.name] = (s, p.gmax[s], origin)
        # an optimizer.step() that ran on a non-finite .grad (GradScaler and an isfinite guard call none there):
        # a nan of an earlier micro-batch, carried in .grad under accumulation, went unreported while the weights
        # turned nan (its step had no optimizer step, read as a skip)
        if self.at_update and not self.nonfinite:
            used = _values([m for _, m in self.at_update])
            for (p, _), m in zip(self.at_update, used):
                if not math.isfinite(m) and p.name not in self.nonfinite:
                    self.nonfinite[p.name] = (self.first_skipped.get(p.name, s), m, None)
        self.at_update = []
        self.backward_log = []

    def _origin(self) -> str | None:
        """The op whose backward first (in backward order) turned finite incoming gradients into
        non-finite outgoing ones."""
        for op, outs, ins in self.backward_log:
            if not ins or all(math.isfinite(v) for v in _values(ins)):
                continue
            if not outs or all(math.isfinite(v) for v in _values(outs)):
                return f"{op.signature}{op.at}"
        return None

    def alive(self, s: int) -> int:
        return sum(1 for r in self.probes.get(s, ()) if r() is not None)


_BITS = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.int8}


def _same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether *a* and *b* hold the same bits: torch.equal, but a NaN is equal to the same NaN (an uninitialised
    parameter holding one, torch.empty, counted as changed by every step, and the findings that need "never changed"
    skipped it). One pass, as torch.equal's: a NaN-aware comparison after torch.equal made the audit of a 1M-parameter
    MLP 20% slower, every parameter changing in the first step."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    bits = _BITS.get(a.element_size()) if a.is_floating_point() else None
    return torch.equal(a.view(bits), b.view(bits)) if bits is not None else torch.equal(a, b)


def _one_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether a and b are views of one storage: s[:, None] - s builds its grid from one tensor on purpose (a
    pairwise loss), where the (N,1) - (N,) bug meets a prediction and a target; it was a broadcast_in_loss finding,
    and the same s[:, None] - s[None, :] was not."""
    try:
        return a.numel() > 0 and b.numel() > 0 and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # (a tensor without storage: sparse, functional, meta)
        return False


def _grid(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None:
    """(a, b, broadcast shape) when broadcasting a against b builds a grid: both non-scalar, different shapes,
    the result larger than each, the grid grown along dimensions one of them lacked (implicitly prepended),
    and the two holding the same values apart from size-1 dimensions — the (N,1) - (N,) -> (N,N) bug.
    Deliberate outer constructions (x[:, None] - x[None, :], bias adds, (N,D) + (D,)) are left alone."""
    na, nb = _numel(a), _numel(b)
    if a == b or na <= 1 or nb <= 1 or len(a) == 0 or len(b) == 0:
        return None
    try:
        out = tuple(torch.broadcast_shapes(a, b))
    except RuntimeError:
        return None
    if _numel(out) <= max(na, nb):
        return None
    lead = abs(len(a) - len(b))
    if lead == 0 or _numel(out[:lead]) <= 1:
        return None
    if tuple(d for d in a if d != 1) != tuple(d for d in b if d != 1):
        return None
    return a, b, out


# -- the findings ----------------------------------------------------------------------------------------------

_EXPECTED = {
    "grad_accumulates": ".grad None or zero when a step's backward starts",
    "broadcast_in_loss": "operands of one shape (or a broadcast that adds no elements)",
    "graph_kept_alive": "each step's autograd graph freed by the next step",
    "param_not_in_optimizer": "every trainable parameter held by the optimizer",
    "param_no_grad": "a gradient for every trainable parameter",
    "param_not_updated": "a parameter with a gradient changed by the step",
    "non_finite_grad": "finite gradients",
    "inplace_leaf_update": "parameter updates under torch.no_grad()",
}


def _findings(aud: _Auditor, steps_run: int, stopped: bool, accumulate: int, have_optimizer: bool,
              last_alive: dict[int, int]) -> tuple[list[Finding], list[str], dict[str, str], dict[str, str]]:
    """The findings, the kinds checked, those not checked (and why), and what a kind checked without a finding
    says beside its pass (what it could not tell)."""
    out: list[Finding] = []
    checked: list[str] = []
    skipped: dict[str, str] = {}
    params = aud.params
    k = accumulate
    all_skipped = bool(aud.skipped_nonfinite) and not any(aud.opt_steps.values())
    if all_skipped and not aud.guarded:
        # no optimizer.step() ran in the whole audit, and no step checked finiteness: nothing skipped an update by
        # design. NaN gradients with a forgotten step() passed as skips
        for name, detail in aud.skipped_detail.items():
            aud.nonfinite.setdefault(name, detail)
        aud.skipped_nonfinite.clear()
        all_skipped = False

    # grad_accumulates: .grad carried from one audited step into the next, more than accumulate - 1 steps running
    if steps_run >= k + 1:
        checked.append("grad_accumulates")
        for p in params:
            run: list[int] = []
            for s in range(1, steps_run):
                if s in p.carried:
                    run.append(s)
                    if len(run) >= k:
                        break
                elif s in p.arrived:
                    run = []
            if len(run) >= k:
                first = run[-1]
                carried = p.carried[first]
                declared = (f"accumulate={k} was declared, but .grad was carried into {k} steps running "
                            f"({_steps_text([s + 1 for s in run])}): it is zeroed less often than every {k} steps. "
                            if k > 1 else "")
                out.append(Finding(
                    "grad_accumulates", p.name,
                    f"{declared}When step {first + 1}'s backward reached '{p.name}', its .grad still held the "
                    f"gradient of the step before (max |grad| {_num(carried)}), so this step's gradient was added "
                    f"to it: zero_grad() is missing or misplaced. Call optimizer.zero_grad() (or set p.grad = None) "
                    f"once per step before backward(), or, if the accumulation is deliberate, declare it with "
                    f"accumulate=k.",
                    step=first + 1, expected=_EXPECTED["grad_accumulates"],
                    observed=f".grad held max |grad| {_num(carried)} at step {first + 1}'s backward",
                    details={"carried_max_abs": carried, "steps": [s + 1 for s in run]}))
    else:
        skipped["grad_accumulates"] = (f"needs {k + 1} completed steps to see .grad carried past "
                                       f"accumulate={k}; {steps_run} ran")

    # broadcast_in_loss
    checked.append("broadcast_in_loss")
    for sig, op in aud.grids.items():
        assert op.grid is not None
        a, b, g = op.grid
        out.append(Finding(
            "broadcast_in_loss", sig,
            f"{op.name}{op.at} broadcast {_shape(a)} against {_shape(b)} into a {_shape(g)} grid "
            f"({_numel(g)} elements from {max(_numel(a), _numel(b))}) on the way to the loss (a backward pass went "
            f"through it), so every prediction is compared with every target. Make the shapes agree first: "
            f"squeeze the (N, 1) side (pred.squeeze(-1)) or reshape the other (y.view(-1, 1)). If every pair is "
            f"intended (a pairwise loss between two sets), write both axes out, a[:, None] - b[None, :]: shapes "
            f"alone cannot tell it from the bug, and the explicit form is not reported.",
            step=op.step + 1, expected=_EXPECTED["broadcast_in_loss"],
            observed=f"{_shape(a)} with {_shape(b)} -> {_shape(g)}",
            details={"op": op.name, "shapes": [list(a), list(b)], "result": list(g), "location": op.location}))

    # graph_kept_alive: nodes of steps before the last one still alive after the last one
    if steps_run >= 2:
        checked.append("graph_kept_alive")
        kept = {s: n for s, n in last_alive.items() if s < steps_run - 1 and n >= MIN_KEPT_NODES}
        if kept:
            earlier = sorted(kept)
            per = [kept[s] for s in earlier]
            growth = sum(per) / len(per)
            alive_ops = [op for op in aud.ops if op.step == earlier[-1]]
            root = _kept_root(aud, earlier[-1]) or (alive_ops[-1] if alive_ops else None)
            where = root.signature if root is not None else "autograd graph"
            made = f" (the {root.name} made{root.at})" if root is not None else ""
            out.append(Finding(
                "graph_kept_alive", where,
                f"After step {steps_run}, the autograd graphs of {_steps_text([s + 1 for s in earlier])} are still "
                f"alive: {', '.join(str(n) for n in per)} autograd nodes, about {_num(growth)} more per step, so "
                f"memory grows with every step. A tensor with history{made} is kept past its step — typically "
                f"losses.append(loss) or total += loss. Keep loss.item() (or loss.detach()) instead.",
                step=earlier[0] + 1, expected=_EXPECTED["graph_kept_alive"],
                observed=f"{sum(per)} nodes of {len(per)} earlier step(s) alive after step {steps_run}",
                details={"alive_nodes_per_step": {str(s + 1): kept[s] for s in earlier}, "growth_per_step": growth}))
    else:
        skipped["graph_kept_alive"] = f"needs 2 completed steps; {steps_run} ran"

    judged_params = steps_run >= 1 and not stopped
    why_not = "the step raised before the audit could finish" if stopped else "no step completed"

    # param_not_in_optimizer: trainable, not held by any optimizer, and never moved by anything else
    if not have_optimizer:
        skipped["param_not_in_optimizer"] = NO_OPTIMIZER
    elif not judged_params:
        skipped["param_not_in_optimizer"] = why_not
    else:
        checked.append("param_not_in_optimizer")
        for p in params:
            if p.held is False and not p.changed:
                out.append(Finding(
                    "param_not_in_optimizer", p.name,
                    f"'{p.name}' requires grad but is in none of the optimizer's param groups, and nothing else "
                    f"changed it in {_n_steps(steps_run)}: it never trains. Build the optimizer from "
                    f"model.parameters() (or add it: optimizer.add_param_group({{'params': [...]}})), or freeze it "
                    f"with requires_grad_(False) if that is intended.",
                    step=1, expected=_EXPECTED["param_not_in_optimizer"], observed="in no param group",
                    details={"shape": list(p.tensor.shape)}))

    # param_no_grad
    if judged_params:
        checked.append("param_no_grad")
        for p in params:
            # a .grad there at optimizer.step(), or a value that changed, is a gradient set by hand (per-sample
            # gradients clipped and averaged, DP-SGD, and assigned to p.grad): before, its parameter was "unused"
            by_hand = p.changed or any(g is not None for _, g, _ in p.at_step)
            if not p.arrived and p.tensor.requires_grad and not by_hand:
                out.append(Finding(
                    "param_no_grad", p.name,
                    f"'{p.name}' requires grad but received no gradient in {_n_steps(steps_run)}: it is not used "
                    f"on the way to the loss, or only through .data / .detach() (which cut it out of the graph). "
                    "Use the parameter itself in the forward, or freeze it with requires_grad_(False) if it is "
                    "unused.",
                    step=1, expected=_EXPECTED["param_no_grad"], observed=f"no gradient in {_n_steps(steps_run)}",
                    details={"shape": list(p.tensor.shape)}))
    else:
        skipped["param_no_grad"] = why_not

    # param_not_updated: a visible gradient in >= accumulate steps, and the value never changed
    invisible: list[str] = []  # unchanged, with updates that may lie below the value's resolution
    if judged_params and steps_run >= k:
        checked.append("param_not_updated")
        for p in params:
            if p.held is False or not p.tensor.requires_grad:
                continue
            meant, zeroed, zero_last = _at_steps(p)
            if p.changed:
                if zeroed:  # weight decay moved it, and no gradient: zero_grad() between backward() and step()
                    cause = (STEP_FIRST if _step_first(p) else
                             "zero_grad() ran between backward() and step(), and only the optimizer's weight decay "
                             "(or momentum) moved it. Call optimizer.zero_grad() before the forward (or after step()), "
                             "never between backward() and step().")
                    out.append(Finding(
                        "param_not_updated", p.name,
                        f"'{p.name}' had a non-zero gradient after backward (max |grad| "
                        f"{_num(max(meant.values()))}, in {_steps_text([s + 1 for s in sorted(meant)])}), but every "
                        f"optimizer.step() after it saw its .grad zero or None: {cause}",
                        step=min(meant) + 1, expected=_EXPECTED["param_not_updated"],
                        observed=".grad zero at every optimizer.step() after a non-zero gradient",
                        details={"grad_max_abs": max(meant.values()), "steps_with_grad": sorted(s + 1 for s in meant)}))
                continue
            if zero_last:  # every optimizer.step() came after a gradient of exactly 0 (a WGAN critic's last bias,
                continue  # reached by G's backward and then zeroed): nothing to apply, not a dropped gradient
            with_grad = sorted(s for s, m in p.gmax.items() if math.isfinite(m) and m > 0.0)
            if len(with_grad) < k or set(with_grad) <= set(aud.skipped_nonfinite):
                continue  # (every such step one whose update was skipped for non-finite gradients: GradScaler's)
            gmax = max(p.gmax[s] for s in with_grad)
            eps = torch.finfo(p.tensor.dtype).eps if p.tensor.is_floating_point() else 0.0
            lrs = [lr for _, _, lr in p.at_step if lr is not None]
            # the smallest update the step may have made: SGD's lr |g|, Adam's about lr (its normalized step); the
            # lr the optimizer used where known (a warmup's 1e-8 left LayerNorm's 1.0 as it was in float32, and that
            # was named an update to a copy), else one assumed; an lr of 0 at every step is a finding (below)
            lr = max(lrs) if lrs else MIN_VISIBLE_LR
            smallest = lr * min(gmax, 1.0) if lrs else gmax * MIN_VISIBLE_LR
            if lr > 0.0 and smallest <= eps * p.pmax:
                invisible.append(f"'{p.name}' (lr up to {_num(lr)}, max |grad| {_num(gmax)}, max |value| "
                                 f"{_num(p.pmax)})")
                continue
            out.append(Finding(
                "param_not_updated", p.name,
                f"'{p.name}' had a non-zero gradient after backward (max |grad| {_num(gmax)}, in "
                f"{_steps_text([s + 1 for s in with_grad])}) but its value was identical after every step: "
                + _not_updated_cause(aud, p, steps_run, have_optimizer),
                step=with_grad[0] + 1, expected=_EXPECTED["param_not_updated"],
                observed=f"unchanged after {_n_steps(steps_run)}, max |grad| {_num(gmax)}",
                details={"grad_max_abs": gmax, "steps_with_grad": [s + 1 for s in with_grad]}))
    elif not judged_params:
        skipped["param_not_updated"] = why_not
    else:
        skipped["param_not_updated"] = (f"needs {k} completed steps (accumulate={k}: an update every {k} steps); "
                                         f"{steps_run} ran")

    # non_finite_grad
    if all_skipped:  # by design (GradScaler's first steps, an isfinite guard), but no update ran to show it recovers
        skipped["non_finite_grad"] = (
            f"the gradients were not finite in {_steps_text([s + 1 for s in aud.skipped_nonfinite])} and every "
            f"update was skipped (a finiteness check ran: GradScaler, or a guard), so none of the {steps_run} steps "
            "trained; run more steps (steps=) to see the updates resume")
    else:
        checked.append("non_finite_grad")
    for name, (s, m, origin) in aud.nonfinite.items():
        what = "nan" if math.isnan(m) else "inf"
        src = (f"The first non-finite gradient came out of the backward of {origin}." if origin else
               "The op that produced it could not be identified (it was not a torch call of the step).")
        out.append(Finding(
            "non_finite_grad", name,
            f"'{name}' received a gradient holding {what} at step {s + 1}. {src} Look for log/sqrt/division at 0 "
            f"or overflow there (clamp the argument, add an epsilon, use a stable form such as log_softmax), and "
            f"check the batch for nan/inf.",
            step=s + 1, expected=_EXPECTED["non_finite_grad"], observed=f"{what} in the gradient at step {s + 1}",
            details={"op": origin}))

    # inplace_leaf_update
    checked.append("inplace_leaf_update")
    if aud.inplace is not None or stopped:
        # the step that raised (the audit stops there), or one that caught the error and went on without the update
        leaf, opname, loc, s = aud.inplace or ("unknown leaf", "an in-place op", None, steps_run)
        at = f" at {loc}" if loc else ""
        out.append(Finding(
            "inplace_leaf_update", leaf,
            f"RuntimeError: a leaf Variable that requires grad is being used in an in-place operation — "
            f"'{leaf}' was modified in place ({opname}{at}) while autograd was recording, at step {s + 1}"
            + ("" if stopped else " (the step caught the error and went on without that update)")
            + ". An update of a parameter is not part of the model: wrap it in `with torch.no_grad():` "
            "(w -= lr * w.grad inside it), or let an optimizer do it.",
            step=s + 1, expected=_EXPECTED["inplace_leaf_update"],
            observed=f"RuntimeError at step {s + 1}", details={"op": opname, "location": loc}))
    said: dict[str, str] = {}
    if aud.learned_grids:
        said["broadcast_in_loss"] = (
            f"broadcasts against the model's own values not judged ({'; '.join(sorted(aud.learned_grids))}): learned "
            "features (t (B, 1) * w (K,)) broadcast so on purpose, and a prediction made from the parameters alone "
            "(a full-batch factorisation) meeting its (N,) target as (N, 1) cannot be told from them by shapes; "
            "make the shapes of a prediction and its target agree")
    if invisible:
        said["param_not_updated"] = (
            f"{len(invisible)} unchanged parameter(s) not judged: the update the optimizer may have made lies below "
            f"the resolution of their values ({'; '.join(invisible[:3])}{'; …' if len(invisible) > 3 else ''})")
    return out, checked, skipped, said


def _kept_root(aud: _Auditor, s: int) -> _Op | None:
    """The last op of step s whose node is still alive (the kept tensor, or the newest part of its graph)."""
    alive_ops = {id(r().op) for r in aud.probes.get(s, ()) if r() is not None}  # type: ignore[union-attr]
    ops = [op for op in aud.ops if op.step == s and id(op) in alive_ops]
    return ops[-1] if ops else None


def _at_steps(p: _Param) -> tuple[dict[int, float], bool, bool]:
    """What p's optimizer.step() calls saw: the steps (their order) whose latest gradient before the call was
    non-zero and finite, with its max |grad|; whether every such call saw .grad zero or None (zero_grad() between
    backward() and step()); whether every call came after a latest gradient of exactly 0 (or none)."""
    if not p.stepped:
        return {}, False, False
    lazy = [t for _, used, last in p.stepped for t in (used, last) if t is not None]
    values = iter(_values(lazy)) if lazy else iter(())
    pairs = [(s, None if used is None else next(values), None if last is None else next(values))
             for s, used, last in p.stepped]
    seen = [(s, used, last) for s, used, last in pairs if last is not None and math.isfinite(last) and last > 0]
    meant: dict[int, float] = {}
    for s, _, last in seen:
        meant[s] = max(meant.get(s, 0.0), last)
    zeroed = bool(seen) and all(used in (None, 0.0) for _, used, _ in seen)
    zero_last = all(last is not None and last == 0.0 for _, _, last in pairs)
    return meant, zeroed, zero_last


#: the cause of a missing update where every optimizer.step() ran before its step's gradient arrived
STEP_FIRST = ("optimizer.step() ran before backward(): at every call the step's own gradient had not arrived yet (and "
              "the one before it was zeroed or never there), so each gradient came after the update it was meant "
              "for. Call loss.backward() before optimizer.step().")


def _step_first(p: _Param) -> bool:
    """Whether every optimizer.step() that held p ran before a gradient arrived in its step, while gradients did
    arrive (step() before backward()): it was read as zero_grad() between backward() and step()."""
    return bool(p.early) and bool(p.arrived) and not any(p.early)


def _not_updated_cause(aud: _Auditor, p: _Param, steps_run: int, have_optimizer: bool) -> str:
    if not have_optimizer:
        return ("the update was computed but never written into the tensor. `w = w - lr * w.grad` makes a new "
                "tensor and leaves the parameter as it was; zeroing .grad before the update makes it zero. Update "
                "in place under torch.no_grad(): `w -= lr * w.grad`, then zero the gradient.")
    if not p.at_step:
        if not aud.opt_steps:
            return (f"optimizer.step() was never called in {_n_steps(steps_run)}. Call it after backward() "
                    f"(every accumulate steps when accumulating).")
        return "no optimizer.step() call saw it. Check which optimizer holds it."
    grads = [g for _, g, _ in p.at_step]
    values = iter(_values([g for g in grads if g is not None]))
    states = ["None" if g is None else ("zero" if next(values) == 0.0 else "non-zero") for g in grads]
    if "non-zero" not in states:
        if _step_first(p):
            return STEP_FIRST
        state = "None" if set(states) == {"None"} else "zero" if set(states) == {"zero"} else "None or zero"
        return (f"at every optimizer.step() its .grad was {state}: zero_grad() ran between backward() and step(). "
                f"Call optimizer.zero_grad() before the forward (or after step()), never between backward() and "
                f"step().")
    lrs = [lr for _, _, lr in p.at_step]
    if lrs and all(lr == 0.0 for lr in lrs):
        return ("its param group's lr is 0 at every optimizer.step(). Set a positive learning rate (a warmup that "
                "starts at 0 explains the first step only).")
    return ("optimizer.step() saw a non-zero gradient and a non-zero lr and left the value as it was: the update "
            "went to a copy of the parameter (an optimizer built on clones, or a .data that is not this tensor's). "
            "Build the optimizer from the parameters themselves.")


def _record(f: Finding, name: str, source: str, params: Mapping[str, _Param]) -> Record:
    p = params.get(f.where) if f.kind in ("grad_accumulates", "param_not_in_optimizer", "param_no_grad",
                                          "param_not_updated", "non_finite_grad", "inplace_leaf_update") else None
    return Record(suite="training", check=f.kind, function=name, input=f.where, method="observation",
                  expected_value=f.expected, source=source, executed=True, verdict="fail",
                  outcome=J.outcome("fail"), reason=f.message, observed_value=f.observed,
                  shape=tuple(p.tensor.shape) if p is not None else None,
                  dtype=str(p.tensor.dtype).removeprefix("torch.") if p is not None else None,
                  device=str(p.tensor.device) if p is not None else None,
                  details={"kind": f.kind, "where": f.where, "step": f.step, **f.details})


# -- the entry point ---------------------------------------------------------------------------------------------

def _named(model: Any, params: Any, optimizers: Sequence[Any]) -> tuple[list[tuple[str, torch.Tensor]], list[str]]:
    named: list[tuple[str, torch.Tensor]] = []
    seen: set[int] = set()
    if model is not None:
        for n, t in model.named_parameters():
            if id(t) not in seen:
                seen.add(id(t))
                named.append((n, t))
    if params is not None:
        for n, t in params.items():
            if not isinstance(t, torch.Tensor):
                raise SpecError(f"params[{n!r}] must be a tensor; got {type(t).__name__}.", field="params")
            if not t.is_leaf:
                raise SpecError(f"params[{n!r}] is not a leaf tensor (it was computed from others), so .grad is "
                                f"never filled: pass the tensors created with requires_grad=True.", field="params")
            if id(t) not in seen:
                seen.add(id(t))
                named.append((str(n), t))
    # the optimizers' own parameters too (where model= or params= leave some out, as a learnable loss scale the model
    # does not hold: its forgotten zero_grad passed unseen, "2 parameters audited")
    for i, opt in enumerate(optimizers):
        for g, group in enumerate(opt.param_groups):
            for j, t in enumerate(group["params"]):
                if id(t) not in seen:
                    seen.add(id(t))
                    prefix = f"optimizer[{i}]." if len(optimizers) > 1 else ""
                    named.append((f"{prefix}param_groups[{g}][{j}]", t))
    lazy = [n for n, t in named if isinstance(t, torch.nn.parameter.UninitializedParameter)]
    if lazy:
        raise SpecError(f"parameter(s) {', '.join(lazy[:4])} belong to a lazy module that has not run yet "
                        "(torch.nn.LazyLinear and the like), so they have no shape and no gradient to watch. Run one "
                        "forward first (model(batch)) so they exist, then audit.", field="model")
    trainable = [(n, t) for n, t in named if t.requires_grad]
    frozen = [n for n, t in named if not t.requires_grad]
    if not trainable:
        raise SpecError("no parameter that requires grad was found in model=, params= or the optimizer, so nothing "
                        "could be audited (every per-parameter check would pass on nothing). Pass the tensors the "
                        "loop trains: params={'w': w} for raw tensors.", field="model")
    return trainable, frozen


def _validate(step: Any, model: Any, params: Any, optimizer: Any, steps: Any, accumulate: Any) -> list[Any]:
    if not callable(step):
        raise SpecError(f"step must be callable as step(batch); got {type(step).__name__}.", field="step")
    for name, value in (("steps", steps), ("accumulate", accumulate)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SpecError(f"{name} must be a positive integer; got {value!r}.", field=name)
    if model is not None and not isinstance(model, torch.nn.Module):
        raise SpecError(f"model must be a torch.nn.Module; got {type(model).__name__}.", field="model")
    if params is not None and not isinstance(params, Mapping):
        raise SpecError(f"params must be a dict of name -> leaf tensor; got {type(params).__name__}.",
                        field="params")
    optimizers = list(optimizer) if isinstance(optimizer, (list, tuple)) else ([] if optimizer is None
                                                                                else [optimizer])
    for opt in optimizers:
        if not hasattr(opt, "param_groups"):
            raise SpecError(f"optimizer must be a torch.optim optimizer (or a list of them); got "
                            f"{type(opt).__name__}.", field="optimizer")
    if model is None and params is None and not optimizers:
        raise SpecError("give model= (an nn.Module) or params= (a dict of leaf tensors) so that findings can name "
                        "the parameters.", field="model")
    return optimizers


def _batches(batches: Any) -> Iterator[Any]:
    """An iterator over *batches*, or a SpecError saying what was given instead of an iterable."""
    try:
        return iter(batches)
    except TypeError:
        raise SpecError(f"batches must be an iterable of batches (a DataLoader, a list, a generator); got "
                        f"{type(batches).__name__}.", field="batches") from None


def _loss_of(ret: Any) -> float | None:
    if isinstance(ret, torch.Tensor) and ret.numel() == 1:
        return float(ret.detach().reshape(()).item())
    if isinstance(ret, (int, float)) and not isinstance(ret, bool):
        return float(ret)
    return None


def audit_training(step: Callable[[Any], Any], batches: Iterable[Any], *, model: torch.nn.Module | None = None,
                   params: Mapping[str, torch.Tensor] | None = None, optimizer: Any = None, steps: int | None = None,
                   accumulate: int = 1) -> TrainingAudit:
    """Run ``step(batch)`` (the user's forward, backward and update) on the first *steps* batches and
    return what is wrong with the loop: ``grad_accumulates``, ``broadcast_in_loss``, ``graph_kept_alive``,
    ``param_not_in_optimizer``, ``param_no_grad``, ``param_not_updated``, ``non_finite_grad``,
    ``inplace_leaf_update``.

    *model*: an ``nn.Module`` (findings name ``named_parameters()``); *params*: a dict of leaf tensors
    (raw-tensor loops; findings name its keys); *optimizer*: any ``torch.optim`` optimizer (or a list,
    or None for manual updates); *accumulate*: deliberate gradient accumulation over that many steps;
    *steps*: how many batches to run (default max(3, accumulate + 1): a forgotten zero_grad shows only
    once .grad is carried into accumulate steps running). Fewer steps than a kind needs leave it not
    checked, and the audit inconclusive (``audit.verdict``; ``audit.ok`` is False) unless it found something.
    A step that raises the in-place leaf RuntimeError ends the audit with that finding; any other
    exception of the step propagates (after everything installed is removed).
    """
    steps, accumulate = plain(steps), plain(accumulate)  # (NumPy integers as the ints they hold)
    if steps is None and isinstance(accumulate, int) and not isinstance(accumulate, bool):
        steps = max(3, accumulate + 1)
    optimizers = _validate(step, model, params, optimizer, steps, accumulate)
    trainable, frozen = _named(model, params, optimizers)
    held = {id(t) for opt in optimizers for g in opt.param_groups for t in g["params"]}
    plist = [_Param(n, t, (id(t) in held) if optimizers else None) for n, t in trainable]
    aud = _Auditor(plist, optimizers, accumulate)
    if model is not None:
        aud.own = {id(t) for t in itertools.chain(model.parameters(), model.buffers())}
    name = str(getattr(step, "__qualname__", None) or type(step).__name__)
    code = getattr(step, "__code__", None)
    source = f"{code.co_filename}:{code.co_firstlineno}" if code is not None else ""

    t0 = time.perf_counter()
    losses: list[float | None] = []
    stopped: str | None = None
    steps_run = 0
    last_alive: dict[int, int] = {}
    watch = _Watch(aud)
    loader = _batches(batches)
    # a torch.compile'd step runs eagerly under the audit: Dynamo traced the audit's function mode (a warning from
    # our code, recompile-limit logs, and an internal error under -W error); eager, the mode sees the ops the graph
    # computes. Only where Dynamo is imported already (nothing can be compiled otherwise; importing it costs ~1 s)
    eager = (torch.compiler.set_stance("force_eager") if "torch._dynamo" in sys.modules
             and hasattr(torch.compiler, "set_stance") else contextlib.nullcontext())
    try:
        eager.__enter__()
        aud.install()  # (inside: a hook that cannot be installed leaves none of the others behind)
        for s, batch in enumerate(itertools.islice(loader, steps)):
            aud.before_step(s)
            try:
                with watch:
                    ret = step(batch)
            except RuntimeError as exc:
                if LEAF_INPLACE not in str(exc):
                    raise
                stopped = f"step {s + 1} raised RuntimeError: {exc}"
                del exc
                break
            finally:
                batch = None
            losses.append(_loss_of(ret))
            del ret
            aud.after_step(s)
            steps_run += 1
        if steps_run >= 2:
            last_alive = {s: aud.alive(s) for s in range(steps_run - 1)}
            if any(last_alive.values()):
                gc.collect()  # a reference cycle the collector has not reached yet is not a kept graph
                last_alive = {s: aud.alive(s) for s in range(steps_run - 1)}
        found, checked, skipped, said = _findings(aud, steps_run, stopped is not None, accumulate,
                                                  bool(optimizers), last_alive)
    finally:
        eager.__exit__(None, None, None)
        aud.remove()
        aud.probes.clear()
        for p in plist:
            p.before = None
            p.lazy_g, p.lazy_pre, p.lazy_reset = [], None, []
    if steps_run == 0 and stopped is None:
        raise SpecError("batches gave no batch: pass an iterable of at least one batch.", field="batches")

    by_name = {p.name: p for p in plist}
    records = [_record(f, name, source, by_name) for f in found]
    scope = f"{_n(len(plist), 'parameter')}, {_n_steps(steps_run)}"
    kinds_found = {f.kind for f in found}
    for kind in KINDS:
        if kind in kinds_found:
            continue
        if kind in skipped:
            records.append(Record(suite="training", check=kind, function=name, input=scope, method="observation",
                                  expected_value=_EXPECTED[kind], source=source, executed=False, verdict="skipped",
                                  outcome=J.outcome("skipped"), reason=f"not checked: {skipped[kind]}",
                                  details={"kind": kind}))
        else:
            skips = aud.skipped_nonfinite if kind == "non_finite_grad" else []
            note = said.get(kind, "") if not skips else (
                f"non-finite gradients in {_steps_text([s + 1 for s in skips])}, where no optimizer stepped "
                "(GradScaler skips an overflow of its scale by design): not a finding")
            records.append(Record(suite="training", check=kind, function=name, input=scope, method="observation",
                                  expected_value=_EXPECTED[kind], source=source, executed=True, verdict="pass",
                                  outcome=J.outcome("pass"), observed_value="no finding", reason=note,
                                  details={"kind": kind}))
    opt_name = ", ".join(type(o).__name__ for o in optimizers) or None
    return TrainingAudit(name=name, findings=tuple(found), records=tuple(records), steps_run=steps_run, steps=steps,
                         params=tuple(p.name for p in plist), frozen=tuple(frozen), optimizer=opt_name,
                         accumulate=accumulate, losses=tuple(losses), checked=tuple(checked),
                         not_checked=dict(skipped), stopped=stopped, elapsed_s=time.perf_counter() - t0)


__all__ = ["KINDS", "Finding", "TrainingAudit", "audit_training"]
