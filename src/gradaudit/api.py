"""The engineer's API: check any function, custom autograd.Function or nn.Module.

>>> import torch, gradaudit as ga
>>> x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
>>> res = ga.check(lambda x: torch.sin(x) * x, (x,))
>>> res.verdict, res.ok, res.mismatches
('pass', True, [])
"""

from __future__ import annotations

import functools
import math
import time
import traceback
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from . import evaluate as E
from . import judge as J
from .errors import (
    EvaluationError,
    GradientMismatch,
    InputMutated,
    NotDeterministic,
    OutputsChanged,
    SpecError,
    hide_spec_errors,
    said,
)
from .evaluate import TINY, Info, Problem, grad
from .findings import Findings
from .guard import (
    CheckTimeout,
    host_random,
    restore_host_random,
    time_limit,
    with_fresh_parametrizations,
    with_private_buffers,
)
from .naming import Described, describe, literal, rerun
from .record import Comparison, ErrorInfo, Evidence, InputMeta, Location, Record
from .render.common import plural
from .spec import check_seed, check_timeout
from .tolerances import (
    RESOLVE,
    SAFETY,
    STRUCTURE_ULPS,
    Tolerance,
    ToleranceUsed,
    plain,
    require_why,
    resolve,
    with_rtol,
)

if TYPE_CHECKING:
    import torch

Mode = Literal["auto", "full", "directional"]
MODES = ("auto", "full", "directional")
FULL_LIMIT = 1_000_000  # auto: full mode while the dense Jacobian has at most this many entries
KEEP = 20  # located comparisons kept in each record (result.mismatches holds every one)
SEED_STREAMS = {"weights": 0, "directional": 1, "full": 2, "forward_ad": 3, "second_order": 4}


@dataclass(frozen=True, repr=False)
class CheckResult(J.RecordsVerdict):
    """What ``ga.check`` found: a view over its records. ``str(result)`` is the readable report."""

    name: str
    mode: str
    records: tuple[Record, ...]
    info: Mapping[str, Any] = field(default_factory=dict)
    rerun: str = ""
    findings: tuple[Findings, ...] = field(default=(), compare=False)
    elapsed_s: float = field(default=0.0, compare=False)  # wall time; kept out of info and the report

    @property
    def mismatches(self) -> list[Comparison]:
        """Every located comparison that did not pass (failures, then inconclusive ones), all records."""
        out: list[Comparison] = []
        by_findings = {id(r): f for r, f in zip(self.records, self.findings)} if self.findings else {}
        for r in self.records:
            found = by_findings.get(id(r))
            if found is not None:
                out += found.comparisons()
            elif r.discrepancy is not None:
                out += list(r.discrepancy.worst)
        return [c for c in out if c.verdict != "pass"]

    def report(self) -> str:
        from .render.text import check_report

        return check_report(self)

    def __str__(self) -> str:
        return self.report()

    def __repr__(self) -> str:  # the report too: `assert res.ok, res` and a notebook cell show it
        return self.report()

    def __rich__(self) -> str:
        from .render.text import rich_text

        return rich_text(self.report())


# -- argument checks (before any evaluation) -----------------------------------------------------------

def _validate(fn: Any, mode: Any, order: Any, seed: Any, tolerance: Any, nondet_tol: Any, forward_ad: Any,
              name: Any, timeout: Any = None) -> None:
    __tracebackhide__ = _hide_spec_errors
    check_timeout(timeout)
    if not callable(fn):
        raise SpecError(f"fn must be callable (a function, MyFunction.apply or a module); got "
                        f"{type(fn).__name__}.", field="fn")
    if mode not in MODES:
        raise SpecError(f"mode must be 'auto', 'full' or 'directional'; got {mode!r}.", field="mode")
    if isinstance(order, bool) or order not in (1, 2):
        raise SpecError(f"order must be 1 or 2; got {order!r}.", field="order")
    check_seed(seed)
    for arg, value in (("tolerance", tolerance), ("nondet_tol", nondet_tol)):
        if value is not None and not isinstance(value, Tolerance):
            raise SpecError(f"{arg} must be a ga.Tolerance(atol, rtol, why=...) or None; got {value!r}. "
                            f"Write {arg}=ga.Tolerance(atol=1e-6, rtol=1e-5, why=\"...\").", field=arg)
    if nondet_tol is not None and not nondet_tol.why:
        raise SpecError("nondet_tol allows two backward passes to differ, which needs a reason: "
                        "ga.Tolerance(atol, rtol, why=\"atomic adds on the GPU reorder sums\").", field="nondet_tol")
    if not isinstance(forward_ad, bool):
        raise SpecError(f"forward_ad must be True or False; got {forward_ad!r}.", field="forward_ad")
    if forward_ad:
        import torch.autograd.forward_ad as fwad

        if getattr(fwad, "_current_level", -1) >= 0:
            raise SpecError("forward_ad=True cannot run inside torch.autograd.forward_ad.dual_level(): PyTorch does "
                            "not nest forward-mode AD levels. Call the check outside the dual_level block (or leave "
                            "forward_ad=False there).", field="forward_ad")
    if name is not None and not isinstance(name, str):
        raise SpecError(f"name must be a string; got {type(name).__name__}.", field="name")


def _as_list(inputs: Sequence[Any] | Any) -> list[Any]:
    return list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]


_hide_spec_errors = hide_spec_errors


def _problem(fn: Callable[..., Any], inputs: Sequence[Any] | Any, names: Sequence[str] | None,
             seed: int = 0, kwargs: Mapping[str, Any] | None = None, notes: Sequence[str] = ()) -> Problem:
    """The problem in float64 (or the inputs' own precision, if the function refuses float64, recorded).

    The inputs are flattened (nested tuples, lists and dicts of tensors); the tensors that require grad
    are checked, everything else (numbers, dims, tensors without requires_grad) is passed through
    unchanged. A complex input is checked as its real and imaginary parts (torch.view_as_real), and a
    complex output likewise, which is Wirtinger calculus as gradcheck does it: a backward missing a
    conj() fails."""
    __tracebackhide__ = _hide_spec_errors
    import torch
    from torch.utils._pytree import tree_unflatten

    xs, labels, spec = _arguments(fn, inputs, kwargs, names)
    for x in xs:
        if torch.is_tensor(x) and x.is_meta:
            raise SpecError("an input is on the meta device, which holds shapes but no values: finite differences "
                            "need values. Create it on a real device (torch.randn(..., device='cpu') or 'cuda'); "
                            "the check runs the function there.", field="inputs")
    diff = [i for i, x in enumerate(xs) if torch.is_tensor(x) and x.requires_grad]
    if not diff:
        raise SpecError("no input is a tensor with requires_grad=True, so there is no gradient to check; create "
                        "the inputs to check with requires_grad=True (other arguments pass through unchanged).",
                        field="inputs")
    for i in diff:
        if xs[i].layout != torch.strided:  # (a sparse argument that is not checked passes through, as gradcheck's)
            raise SpecError(f"input '{labels[i]}' is a {xs[i].layout} tensor that requires grad: gradaudit perturbs "
                            "dense tensors element by element. Pass x.to_dense() and, if the function needs it, "
                            "convert back inside.", field="inputs")
        if not (xs[i].is_floating_point() or xs[i].is_complex()):
            raise SpecError(f"input {i} has dtype {xs[i].dtype}; gradients exist only for floating-point and "
                            "complex tensors.", field="inputs")
    complex_in = [i for i in diff if xs[i].is_complex()]
    fn = with_fresh_parametrizations(with_private_buffers(fn))
    call: Callable[..., Any] = fn
    if spec is not None or complex_in:

        def call(*leaves: Any) -> Any:
            values = [torch.view_as_complex(v) if i in complex_in else v for i, v in enumerate(leaves)]
            if spec is None:
                return fn(*values)
            positional, named = tree_unflatten(values, spec)
            return fn(*positional, **named)

    generators = _argument_generators(xs)
    if generators:
        call = _from_their_states(call, generators)
    # copies: the function may write to its inputs, and the caller's tensors must stay as they were
    # (on the CPU, where all evidence is worked out: each call moves them to the caller's device and back); a
    # checked complex input as its real view, a complex tensor passed through as it is
    promoted, devices = E.on_cpu([_evidence_copy(x, real=i in complex_in) for i, x in enumerate(xs)])
    problem = Problem(call, promoted, labels, diff, rng_seed=seed, devices=devices,
                      rng_devices=tuple(sorted({x.device.index or 0 for x in xs if torch.is_tensor(x) and x.is_cuda})))
    problem.notes.extend(notes)
    problem.device_holder = getattr(torch, "_GLOBAL_DEVICE_CONTEXT", None)
    problem.device_context = getattr(problem.device_holder, "device_context", None)
    aliases: dict[int, int] = {}
    for i in diff:
        first = aliases.setdefault(id(xs[i]), i)
        if first != i:
            problem.notes.append(
                f"'{labels[i]}' is the same tensor as '{labels[first]}': each is checked as an input of its own (its "
                "partial derivative, the other held still), which is what the function's backward must give for "
                "each argument; the gradient the shared tensor receives is their sum")
    problem.given = [(tuple(x.shape), str(x.dtype).removeprefix("torch."))
                     if torch.is_tensor(x) and (x.dtype != p.dtype or x.shape != p.shape) else None
                     for x, p in zip(xs, promoted)]
    if complex_in:
        problem.notes.append("complex input(s) " + ", ".join(repr(labels[i]) for i in complex_in) + " checked as "
                             "their real and imaginary parts (element [..., 0] real, [..., 1] imaginary): "
                             "Wirtinger calculus, as gradcheck")
    try:
        _first_calls(problem)
    except EvaluationError as exc:  # the function refuses float64: check in the inputs' own precision, and say so
        if all(not torch.is_tensor(x) or p.dtype == x.dtype for p, x in zip(promoted, xs)) or isinstance(
                exc.original, (InputMutated, NotDeterministic, OutputsChanged)):
            raise
        problem.inputs = E.on_cpu([_evidence_copy(x, float64=False, real=i in complex_in)
                                   for i, x in enumerate(xs)])[0]
        problem.random = None
        _first_calls(problem)
        problem.notes.append(f"the function failed in float64 ({type(exc.original).__name__}: {said(exc.original)}); "
                             "checked in the inputs' own dtype")
    else:
        raised = [f"'{labels[i]}' ({str(xs[i].dtype).removeprefix('torch.')})" for i in diff
                  if xs[i].dtype not in (torch.float64, torch.complex128)]
        if raised:  # the evidence is float64's; the caller's own low-precision path never ran
            problem.notes.append(
                f"input(s) {', '.join(raised)} checked in float64 (complex128 for a complex input): the function ran "
                "on float64 copies, so this checks its gradient formula, not a code path it takes only in the lower "
                "precision; ga.compare checks a kernel at its own precision against float64")
    if generators:
        problem.notes.append(_generators_note(generators, "the function"))
    if problem.random:
        problem.notes.append(f"the function draws random numbers: every evaluation started from the same random "
                             f"state (torch generators seeded with {seed}, the caller's state restored), so it is "
                             "checked as one deterministic function")
    return problem


def _argument_generators(leaves: Sequence[Any]) -> list[Any]:
    """The torch.Generator objects among the function's arguments, each once; not torch's global ones (a
    ``generator=torch.default_generator`` argument), which every evaluation seeds with the check's *seed* already
    (resetting them to the caller's state undid that, and *seed* changed nothing: a review)."""
    import torch

    given = [x for x in leaves if isinstance(x, torch.Generator)]
    if not given:
        return []
    globals_ = {id(torch.random.default_generator)}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        globals_ |= {id(g) for g in torch.cuda.default_generators}
    return list({id(x): x for x in given if id(x) not in globals_}.values())


def _generators_note(generators: list[Any], given: str) -> str:
    """What the report says of the torch.Generator arguments *given* to the function or the forward."""
    return (f"torch.Generator argument(s) passed to {given} ({len(generators)}): every evaluation started them from "
            "their state at the check's start, where they are left, so it is checked as one deterministic function")


def _from_their_states(call: Callable[..., Any], generators: list[Any]) -> Callable[..., Any]:
    """*call*, every run of which starts the torch.Generator objects among the function's arguments from their
    states at the check's start and leaves them there, as the global generators are handled (Problem._call): a
    function drawing its noise from a generator it is given was NotDeterministic, blamed on Python's random or
    NumPy, and the caller's generator was left advanced by every evaluation (a fresh-eyes audit)."""
    states = [(g, g.get_state()) for g in generators]

    def from_their_states(*leaves: Any) -> Any:
        for g, state in states:
            g.set_state(state)
        try:
            return call(*leaves)
        finally:
            for g, state in states:
                g.set_state(state)
    return from_their_states


_PLAIN = (int, float, bool, complex, str, bytes, type(None))  # arguments that are never pytree containers


def _arguments(fn: Callable[..., Any], inputs: Sequence[Any] | Any, kwargs: Mapping[str, Any] | None,
               names: Sequence[str] | None, *, strict: bool = True) -> tuple[list[Any], list[str], Any]:
    """The arguments' leaves (nested tuples, lists and dicts flattened, the keyword arguments' after the positional
    ones), their labels (*names*; else a positional argument by its parameter's name, a keyword argument by its key,
    then the path inside), and the pytree spec that rebuilds (positional, keyword) from them (None where the
    positional arguments are the leaves). Not *strict*: labels input0, input1, ... where *names* do not fit."""
    __tracebackhide__ = _hide_spec_errors
    import torch
    from torch.utils._pytree import keystr, tree_flatten_with_path

    args = _as_list(inputs)
    if not args:
        raise SpecError("inputs must be a tensor or a tuple of arguments holding at least one tensor with "
                        "requires_grad=True, e.g. (x,) or (x, 0).", field="inputs")
    keywords = dict(kwargs or {})
    spec = None
    if not keywords and all(torch.is_tensor(a) or isinstance(a, _PLAIN) for a in args):
        xs = list(args)  # the arguments are the leaves (pytree's walk costs more than the rest)
    else:  # containers (also a deque, or a node the user registered with pytree), and the keyword arguments, whose
        # tensors are copied and checked as the positional ones are: the function gets them rebuilt. A torch.Size is
        # one argument (pytree would rebuild it as a plain tuple)
        paths, spec = tree_flatten_with_path((args, keywords), is_leaf=lambda a: isinstance(a, torch.Size))
        xs = [leaf for _, leaf in paths]
    if names is not None:
        if isinstance(names, str) or len(names) != len(xs) or not all(isinstance(n, str) for n in names):
            if strict:
                raise SpecError(f"names must be {len(xs)} strings, one per input"
                                f"{' (after flattening)' if spec is not None else ''}; got {names!r}.", field="names")
            return xs, [f"input{i}" for i in range(len(xs))], spec
        if len(set(names)) != len(names):  # a report naming two inputs alike cannot say which one is wrong
            if strict:
                twice = next(n for i, n in enumerate(names) if n in names[:i])
                raise SpecError(f"names must be distinct, one per input, so that a report says which input is wrong; "
                                f"{twice!r} names more than one in {list(names)!r}. Give each input its own name.",
                                field="names")
            return xs, [f"input{i}" for i in range(len(xs))], spec
        return xs, list(names), spec
    top = _arg_names(fn, len(args))
    if spec is None:
        return xs, top, spec
    return xs, [(top[path[1].idx] if path[0].idx == 0 else path[1].key)  # type: ignore[attr-defined]
                + keystr(path[2:]) for path, _ in paths], spec


def _evidence_copy(x: Any, *, float64: bool = True, real: bool = False) -> Any:
    """A private copy of one input: float64 (complex128) for evidence, a complex input as its real view where
    *real* (a checked one); non-tensors as they are."""
    import torch

    if not torch.is_tensor(x):
        return x
    t = x.detach()
    if float64 and t.dtype == torch.float64:
        t = t.clone()  # as .to(torch.float64, copy=True) makes it (the same strides), for less
    elif float64 and t.is_floating_point():
        t = t.to(torch.float64, copy=True)
    elif float64 and t.is_complex():
        t = t.to(torch.complex128, copy=True)
    else:
        t = t.clone()
    return torch.view_as_real(t).clone() if real and t.is_complex() else t


INNER_NOTE = "the function computes in "  # (the start of the note that says so)


def _first_calls(problem: Problem) -> None:
    """The first forward (its graph kept for the first backward), then a second at the same point (unless
    every checked input is empty): the outputs must be tensors, the same both times (deterministic), and the
    inputs unchanged (not in place)."""
    __tracebackhide__ = _hide_spec_errors
    import torch

    pristine = [x.clone() if torch.is_tensor(x) else None for x in problem.inputs]
    leaves = problem.leaves()
    problem.keep = problem.point = problem.returned = problem.shapes = None  # (every later call is held to them)
    # (found again below: a fallback to the inputs' own dtype starts afresh, its note too)
    problem.inner = None
    problem.notes[:] = [n for n in problem.notes if not n.startswith(INNER_NOTE)]
    problem.watch_moved = True
    try:
        with E.GradMode(True):  # with its graph: the first backward (metadata, vᵀJ) reuses it
            outs = problem.call(*leaves)
    finally:
        problem.watch_moved = False
    problem.keep, left_out = _kept_outputs(outs)
    problem.returned = len(outs)
    if not problem.keep:
        _outputs(outs)  # says what the function returned instead of floating-point tensors
    outs = problem.select(outs)
    # a float64 function that computes part of its work in a lower precision on the way from its inputs to its
    # outputs (x.float() inside: a float32 model run as model.double(), its RMSNorm or softmax in float32)
    precise = min((torch.finfo(problem.inputs[j].dtype).eps for j in problem.diff
                   if problem.inputs[j].is_floating_point()), default=None)
    inner = E.computed_in(outs, [leaves[j] for j in problem.diff], precise) if precise is not None else []
    if precise is not None and precise < E.EPS32:  # float64 evidence: a cast the graph does not show, from the values
        grids = [None if found is not None else E.on_grid(o) for o, found in zip(outs, inner)]
        if any(g is not None for g in grids):
            inner = _opaque_casts(problem, outs, inner, grids, [leaves[j] for j in problem.diff])
    low: list[Any] = []
    limits = E.NARROW_RANGE
    for o, found in zip(outs, inner):
        if found is None or not (torch.is_tensor(o) and o.is_floating_point()
                                 and torch.finfo(o.dtype).eps < torch.finfo(found[0]).eps):
            low.append(None)
            continue
        # (finite values within float32's normal range, far from its ends: rounding keeps them)
        size = o.detach().abs()
        size = size[torch.isfinite(size) & (size > 0)]
        fits = not size.numel() or (float(size.min()) >= limits[0] and float(size.max()) <= limits[1])
        low.append(found[0] if fits else None)
    if any(d is not None for d in low):
        # its values are that precision's, whatever dtype it returns: a staircase at its steps, which float64's
        # rounding model does not see (a float32 model's right backward FAILED on a tableau crossing a few stairs).
        # Those outputs are taken in that precision, as a function returning it is judged
        problem.inner = low
        outs = E.narrowed(outs, low)
        which = [k for k, d in enumerate(low) if d is not None]
        dtype, node = next(f for f, d in zip(inner, low) if f is not None and d is not None)
        name = str(dtype).removeprefix("torch.")
        outputs = ("its output" if len(outs) == 1
                   else f"output{'s' if len(which) > 1 else ''} {', '.join(map(str, which))}")
        seen = (f"its graph holds {node} in {name} between the checked inputs and {outputs}: a cast such as "
                "x.float()" if node != GRID else
                f"the values of {outputs} are {name}'s at the point and with every checked element moved by "
                f"{E.GRID_PROBE:g} of itself, which a float64 computation's are not: a cast the graph does not show, "
                "inside a custom autograd.Function or an extension, or a rounding to float32's grid")
        problem.notes.append(
            f"{INNER_NOTE}{name} inside ({seen}): those values have {name}'s precision, whatever dtype it "
            f"returns, so {outputs} were taken in {name} and the evidence has {name}'s precision (a staircase at "
            f"{name}'s steps: where finite differences cannot resolve an entry, it is inconclusive, not failed)")
    problem.outputs = _outputs(outs)
    problem.shapes = tuple(o.shape for o in problem.outputs)
    problem.point = (leaves, outs)  # its graph: the first backward (vᵀJ, twice) goes through it
    if left_out:
        problem.notes.append("left out of the check (as gradcheck does): " + "; ".join(left_out))
    moved, problem.moved = problem.moved, None  # the copies the function got on its device, if any
    for i, (name, x, before) in enumerate(zip(problem.names, problem.inputs, pristine)):
        if before is not None and not (_same(x, before) and (moved is None or _same(moved[i].detach().cpu(), before))):
            raise EvaluationError("the function", InputMutated(
                f"the function changes its input '{name}' in place (through .data, .copy_ or an in-place op under "
                "no_grad), so every evaluation sees a different point and its gradient there is not defined. "
                f"Work on a copy inside the function ({name} = {name}.clone()); the caller's tensor is untouched"))
        # and the tensor the first call got, whose data x.data = x.data * 2 replaces where x keeps its own: that was
        # inconclusive, "flat or dominated by a large constant" (a fresh-eyes audit). The same values in the same
        # dtype (x.data = x.data.clone()) change nothing; in another dtype they do: the later evaluations, which run on
        # the check's own tensors, ran in it (x.data = x.data.float() on a float32 input made float64 evidence
        # float32's and passed a backward 1e-4 off; to complex128, gradaudit's own code raised: a review)
        leaf = leaves[i]
        if (before is not None and leaf.layout == torch.strided and leaf.data_ptr() != x.data_ptr()
                and not (leaf.dtype == before.dtype and _same(leaf.detach(), before))):
            into = "" if leaf.dtype == before.dtype else f" with a {str(leaf.dtype).removeprefix('torch.')} tensor"
            why = (": autograd then differentiates the function at the new values, not at the input's, so its "
                   "gradient is not the function's there" if i in problem.diff and leaf.dtype == before.dtype else
                   ", so the check's evaluations would not all see the input it was given" + (
                       f" (it evaluates in {str(before.dtype).removeprefix('torch.')})" if into else ""))
            raise EvaluationError("the function", InputMutated(
                f"the function replaces the data of its input '{name}'{into} ({name}.data = ...){why}. Compute "
                f"from a new tensor instead ({name}2 = {name}.float() or {name} * 2 rather than {name}.data = ...); "
                "the caller's tensor is untouched"))
    if not any(problem.inputs[j].numel() for j in problem.diff):
        return  # nothing to perturb, so no evaluation but this one: whether another would agree decides nothing
    with E.GradMode(False):
        try:
            again = _outputs(problem.call(*problem.inputs))
        except EvaluationError as exc:  # with gradients off the function fails: perhaps it differentiates inside
            if problem.needs_grad:
                raise
            try:  # unless it does not fail again (a transient error PASSED, blamed on gradients off: an audit)
                problem.call(*problem.inputs)
            except EvaluationError:
                pass
            else:
                raise
            problem.needs_grad = True
            try:
                again = _outputs(problem.call(*problem.inputs))
            except EvaluationError:
                problem.needs_grad = False
                raise exc from None
            problem.notes.append(f"the function fails with gradients off ({type(exc.original).__name__}: "
                                 f"{said(exc.original).splitlines()[0][:120] if said(exc.original) else ''}): every "
                                 "evaluation ran with gradients on and fresh leaves, as gradcheck's do")
    for k, (a, b) in enumerate(zip(problem.outputs, again)):
        if _same(a, b):
            continue
        diff = (a.to(torch.float64) - b.to(torch.float64)).abs().nan_to_num(nan=math.inf, posinf=math.inf)
        # LAPACK and threaded reductions may differ by a few ulps from call to call: rounding, which the
        # measured noise covers; more than that is a function that is not one function of its inputs
        scale = float(a.abs().nan_to_num(nan=0.0, posinf=0.0).max()) if a.numel() else 0.0
        rounding = STRUCTURE_ULPS * float(torch.finfo(a.dtype).eps) * max(scale, float(torch.finfo(a.dtype).tiny))
        if float(diff.max()) > rounding:
            at = int(diff.reshape(-1).argmax())
            raise EvaluationError("the function", NotDeterministic(
                f"not deterministic: two evaluations at the same point differ by {float(diff.max()):.3g} (output {k}, "
                f"flat element {at}), although every evaluation started from the same torch random state (its "
                "global generators, and any torch.Generator passed as an argument). A gradient check needs a "
                "function of its inputs alone: remove other sources of randomness (Python's random, numpy, time, a "
                "torch.Generator the function holds itself) or fix them inside the function, or pass that "
                "generator as an argument"))


GRID = "its values"  # (in place of a graph node: the outputs found on a coarse grid, _opaque_casts)


def _reaches(out: Any, leaves: Sequence[Any]) -> bool:
    """Whether *out*'s autograd graph reaches one of the *leaves* (their AccumulateGrad nodes)."""
    return bool(E.graph_reach([out], leaves, range(len(leaves)))[0])


def _opaque_casts(problem: Problem, outs: list[Any], inner: list[Any], grids: list[Any], checked: Sequence[Any]
                  ) -> list[Any]:
    """:func:`evaluate.computed_in`'s findings, with the float64 outputs whose values are float32's, with float32's own
    precision (:func:`evaluate.on_grid`), at the point and where every checked element is moved by GRID_PROBE of
    itself (one more evaluation, only where the point's values are float32's): a cast to float32 inside a custom
    autograd.Function's forward, or in an extension, does not show on the graph, and its staircase FAILED a right
    backward (11 to 19 of 116 float32 functions) where the same cast seen on the graph is judged at float32's
    precision. A float64 computation's value is almost never a float32; inputs made in float32 and passed through
    (relu) are at the point, and leave float32's grid when moved. Where the function fails with gradients off,
    nothing is found. *grids*: on_grid of each output at the point; *checked*: the checked inputs' leaves."""
    import torch

    # every checked element moved by GRID_PROBE of itself (a zero by GRID_PROBE: it would not move)
    moved = [torch.where(x == 0, E.GRID_PROBE, x.detach() * (1.0 + E.GRID_PROBE))
             if i in problem.diff and torch.is_tensor(x) and x.is_floating_point() else x
             for i, x in enumerate(problem.inputs)]
    problem.side_evaluations += 1
    try:
        with E.GradMode(False):
            there = problem.call(*moved)
    except EvaluationError:
        return inner
    found = list(inner) if inner else [None] * len(outs)
    for k, (o, grid) in enumerate(zip(outs, grids)):
        if grid is None or k >= len(there) or not torch.is_tensor(there[k]) or there[k].shape != o.shape:
            continue
        # the values that moved are float32's there too (not a float64 computation's). Where none moved (float32's
        # stairs wider than the probe: tanh or erf saturated), the values are asked about only for an output the
        # checked inputs reach on the graph: a constant made in float32 (a bias, an output of other parameters) is no
        # float32 computation of them, and taken for one its bugs went from FAIL to inconclusive (a reviewer's find)
        b = there[k].detach()
        if b.dtype != torch.float64:
            continue
        a = o.detach()
        moved_values = b[(b != a) & torch.isfinite(b)]
        if moved_values.numel():
            # (with the point's values: a few that moved may carry trailing zeros by chance, tanh's 1 - 2912 2^-24)
            if E.on_grid(torch.cat([a.reshape(-1), moved_values])) is not None:
                found[k] = (grid, GRID)
        elif E.on_grid(b) is not None and _reaches(o, checked):
            found[k] = (grid, GRID)
    return found


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values, NaN equal to NaN."""
    import torch

    if a.shape != b.shape or a.dtype != b.dtype or a.layout != b.layout:
        return False
    if a.layout != torch.strided:  # a sparse argument passed through: its values
        a, b = a.to_dense(), b.to_dense()
    return bool(torch.equal(a, b) or (a.is_floating_point() and torch.allclose(a, b, rtol=0, atol=0, equal_nan=True)))


def _kept_outputs(outs: list[Any]) -> tuple[list[int], list[str]]:
    """Which outputs are checked: floating or complex tensors that require grad (all floating ones when none
    does, so a function that detaches its only output still fails); the others, and why they are left out."""
    import torch

    numeric = [k for k, o in enumerate(outs) if torch.is_tensor(o) and (o.is_floating_point() or o.is_complex())]
    keep = [k for k in numeric if outs[k].requires_grad] or numeric
    left = []
    for k, o in enumerate(outs):
        if k in keep:
            continue
        what = (f"{str(o.dtype).removeprefix('torch.')} tensor" if torch.is_tensor(o) else type(o).__name__)
        why = "does not require grad" if k in numeric else "not differentiable"
        left.append(f"output {k} ({what}, {why})")
    return keep, left if keep else []


def _outputs(outs: list[Any]) -> list[torch.Tensor]:
    """The outputs detached, or a SpecError saying what the function returned instead of tensors."""
    __tracebackhide__ = _hide_spec_errors
    import torch

    if not outs or not all(torch.is_tensor(o) and o.is_floating_point() for o in outs):
        got = ", ".join(type(o).__name__ if not torch.is_tensor(o) else f"a {o.dtype} tensor" for o in outs)
        tensors = bool(outs) and all(torch.is_tensor(o) for o in outs)
        fix = ("An integer or bool output (an index from argmax, a mask, a count) has no gradient: return a "
               "floating-point result of the inputs as well, e.g. the values that index selects." if tensors else
               "Return the tensors themselves, not Python numbers (.item()) or None.")
        raise SpecError(f"the function returned {got or 'nothing'} where floating-point tensors are needed (a "
                        f"tensor, or a tuple, list or dict of them). {fix}", field="fn")
    for k, o in enumerate(outs):
        if o.is_meta:
            raise SpecError(f"output {k} of the function is on the meta device, which holds shapes but no values: "
                            "finite differences compare values. Compute it on a real device.", field="fn")
        if o.layout != torch.strided:
            raise SpecError(f"output {k} of the function is a {o.layout} tensor: gradaudit compares dense outputs "
                            "element by element. Return out.to_dense() (the check then covers every element).",
                            field="fn")
    return [o.detach() for o in outs]


_ARG_NAMES: weakref.WeakKeyDictionary[Any, list[str]] = weakref.WeakKeyDictionary()


def _arg_names(fn: Callable[..., Any], count: int) -> list[str]:
    """The names of fn's first *count* positional parameters (for a torch builtin, those its docstring
    shows), or input0, input1, ... (read once per function object: inspect costs more than a small
    check's arithmetic)."""
    try:
        params = _ARG_NAMES.get(fn)
    except TypeError:  # not hashable or not weak-referenceable: read every time
        params = None
    if params is None:
        params = _parameters(fn)
        try:
            _ARG_NAMES[fn] = params
        except TypeError:
            pass
    return params[:count] if len(params) >= count else [f"input{i}" for i in range(count)]


def _parameters(fn: Callable[..., Any]) -> list[str]:
    import inspect
    import types

    import torch

    owner = getattr(fn, "__self__", None)
    target, skip = fn, 0
    if isinstance(owner, type) and issubclass(owner, torch.autograd.Function) and fn.__name__ == "apply":
        # MyFunction.apply(x, w): the names of forward(ctx, x, w), or of forward(x, w) where setup_context is
        # defined (a forward without ctx: dropping its first name blamed a wrong gradient of x on w)
        target = owner.forward
        skip = 0 if owner.setup_context is not torch.autograd.Function.setup_context else 1
    if type(target) is types.FunctionType and not hasattr(target, "__wrapped__") and not hasattr(
            target, "__signature__"):  # a plain function: its code names them (what inspect reads, cheaper)
        code = target.__code__
        return list(code.co_varnames[:code.co_argcount])[skip:]
    try:
        params = [p.name for p in inspect.signature(target).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][skip:]
    except (TypeError, ValueError):
        params = _documented_parameters(fn)
    return params


def _documented_parameters(fn: Callable[..., Any]) -> list[str]:
    """The positional parameters a builtin's docstring shows on its first line, as torch documents its
    operators ("atan2(input, other, *, out=None) -> Tensor" gives input, other); [] when it shows none.
    The line is read as text, never evaluated."""
    import re

    doc = getattr(fn, "__doc__", None)
    name = getattr(fn, "__name__", None)
    if not isinstance(doc, str) or not isinstance(name, str) or hasattr(fn, "__objclass__"):
        return []  # an unbound method (torch.Tensor.sum): its docstring leaves out self
    first = doc.strip().split("\n", 1)[0]
    found = re.match(r"([\w.]+)\((.*)\)", first)
    # its own name, or the name it is documented under in its namespace: torch.fft.fft (fft_fft) shows "fft(input,
    # ...)", torch.linalg.vector_norm (linalg_vector_norm) "linalg.vector_norm(x, ...)"
    if found is None:
        return []
    shown = found.group(1).replace(".", "_")
    if not (shown == name or name.endswith("_" + shown)):
        return []
    params, depth, part = [], 0, ""
    for ch in found.group(2) + ",":
        depth += (ch in "([{") - (ch in ")]}")  # a comma inside Tuple[int, int] does not split
        if ch == "," and depth == 0:
            item = part.split("=", 1)[0].split(":", 1)[0].strip()
            if item in ("*", "/") or item.startswith("*"):
                break
            if not item.isidentifier():
                return []
            params.append(item)
            part = ""
        else:
            part += ch
    return params


def _stream(seed: int, stream: str) -> E.Stream:
    """An independent random stream per use, its first draws kept (evaluate.Stream): the same call gives the same
    draws."""
    return E.Stream(seed * 16 + SEED_STREAMS[stream])


def _generator(seed: int, stream: str) -> torch.Generator:
    """:func:`_stream`'s generator."""
    return _stream(seed, stream).generator()


# -- the check -----------------------------------------------------------------------------------

def check(fn: Callable[..., Any], inputs: Sequence[Any] | Any, *, mode: Mode = "auto",
          tolerance: Tolerance | None = None, forward_ad: bool = False, order: int = 1, seed: int = 0,
          names: Sequence[str] | None = None, expected: Sequence[Any] | None = None,
          nondet_tol: Tolerance | None = None, name: str | None = None, timeout: float | None = None,
          kwargs: Mapping[str, Any] | None = None, **unknown: Any) -> CheckResult:
    """Check the backward of *fn* at *inputs* (those with ``requires_grad=True``) in float64.

    ``mode="full"`` judges every Jacobian entry and locates each mismatch; ``"directional"`` judges
    vᵀJu per input and localizes a failure by bisection; ``"auto"`` picks full while the Jacobian
    has at most 1e6 entries. Every mode runs the same judge with the same *tolerance*
    (``ga.Tolerance(atol, rtol, why=...)``; default: rtol 1e-10 plus the evidence's own error
    bound), so the verdict does not depend on the mode. Randomness comes only from *seed*.
    An exception from *fn* or its backward gives the ``error`` verdict with the traceback kept.

    *inputs* are fn's positional arguments and *kwargs* its keyword arguments, nested containers of
    tensors allowed: every tensor in either that requires grad is checked (named by its parameter or
    key), everything else reaches *fn* unchanged; *fn* always runs on private copies.

    *timeout* (seconds) gives the ``error`` verdict when the check takes longer: in the main thread of a
    POSIX process a timer interrupts *fn* itself; elsewhere the limit is checked between evaluations.
    """
    __tracebackhide__ = _hide_spec_errors
    _refuse_unknown(unknown, "ga.check")
    seed, timeout, order = plain(seed), plain(timeout), plain(order)
    _validate(fn, mode, order, seed, tolerance, nondet_tol, forward_ad, name, timeout)
    if kwargs is not None and not (isinstance(kwargs, Mapping) and all(isinstance(k, str) for k in kwargs)):
        raise SpecError(f"kwargs must be a dict of keyword arguments for fn, e.g. {{'dim': 1}}; got {kwargs!r}.",
                        field="kwargs")
    who = describe(fn)
    repro = rerun("ga.check", who, _as_list(inputs),
                  {**_options(mode, seed, forward_ad, order), "tolerance": tolerance, "nondet_tol": nondet_tol,
                   "expected": expected, "names": names, "name": name,
                   "timeout": timeout, "kwargs": None if not kwargs else dict(kwargs)})
    return _check(fn, inputs, who=who, repro=repro, mode=mode, tolerance=tolerance, forward_ad=forward_ad,
                  order=order, seed=seed, names=names, expected=expected, nondet_tol=nondet_tol, name=name,
                  timeout=timeout, kwargs=kwargs)


#: torch.autograd.gradcheck's arguments, and what gradaudit takes instead
GRADCHECK_ARGUMENTS = {
    "eps": "the step is chosen per element (Ridders' extrapolation with its own error bound); there is no eps",
    "atol": "pass tolerance=ga.Tolerance(atol=..., rtol=..., why=\"...\")",
    "rtol": "pass tolerance=ga.Tolerance(atol=..., rtol=..., why=\"...\")",
    "raise_exception": "ga.check returns a result (res.ok, str(res)); ga.assert_gradients raises",
    "nondet_tol": "pass nondet_tol=ga.Tolerance(atol=..., rtol=..., why=\"...\")",
    "fast_mode": "pass mode=\"directional\" (vᵀJu per input, localized by bisection) or mode=\"full\"",
    "check_undefined_grad": "a backward returning None where the numeric gradient is non-zero always fails",
    "check_batched_grad": "not needed: gradaudit checks the function's own backward",
    "check_grad_dtypes": "the gradient's dtype, shape and device are always checked",
    "check_forward_ad": "pass forward_ad=True",
    "check_backward_ad": "backward is always checked",
    "masked": "not supported",
}


def _refuse_unknown(unknown: Mapping[str, Any], api: str,
                    takes: str = "mode, tolerance, forward_ad, order, seed, names, expected, nondet_tol, name, "
                                 "timeout and kwargs") -> None:
    __tracebackhide__ = _hide_spec_errors
    if not unknown:
        return
    arg = sorted(unknown)[0]
    hint = GRADCHECK_ARGUMENTS.get(arg)
    if hint:
        raise SpecError(f"{api} has no argument {arg!r} (it is torch.autograd.gradcheck's): {hint}.", field=arg)
    raise SpecError(f"{api} has no argument {arg!r}; it takes {takes}.", field=arg)


def _options(mode: str, seed: int, forward_ad: bool, order: int) -> dict[str, Any]:
    """The options a re-run line repeats (defaults left out)."""
    return {"mode": mode if mode != "auto" else None, "seed": seed or None, "forward_ad": forward_ad or None,
            "order": order if order != 1 else None}


def _check(fn: Callable[..., Any], inputs: Sequence[Any] | Any, *, who: Described, repro: str, mode: str,
           tolerance: Tolerance | None, forward_ad: bool, order: int, seed: int, names: Sequence[str] | None,
           expected: Sequence[Any] | None, nondet_tol: Tolerance | None, name: str | None,
           timeout: float | None = None, kwargs: Mapping[str, Any] | None = None,
           notes: Sequence[str] = ()) -> CheckResult:
    """The check under its guards: gradients on (also inside the caller's no_grad or inference_mode), the
    caller's grad mode and random state (torch's, Python's and NumPy's) restored after, and the time limit."""
    __tracebackhide__ = _hide_spec_errors
    import torch

    start = time.perf_counter()
    label = name or who.name
    host = host_random()
    mine: object = None  # this check's time limit (its CheckTimeout carries it)
    try:
        if timeout is None and torch.is_grad_enabled() and not torch.is_inference_mode_enabled():
            # the guards' context managers would change nothing on the way in (they cost more than a small check's
            # arithmetic); on the way out the caller's grad mode is set again, whatever the function left
            try:
                return _checked(fn, inputs, who=who, repro=repro, mode=mode, tolerance=tolerance,
                                forward_ad=forward_ad, order=order, seed=seed, names=names, expected=expected,
                                nondet_tol=nondet_tol, label=label, start=start, kwargs=kwargs, notes=notes)
            finally:
                torch._C._set_grad_enabled(True)
        with torch.inference_mode(False), torch.enable_grad(), time_limit(timeout) as mine:
            return _checked(fn, inputs, who=who, repro=repro, mode=mode, tolerance=tolerance, forward_ad=forward_ad,
                            order=order, seed=seed, names=names, expected=expected, nondet_tol=nondet_tol,
                            label=label, start=start, kwargs=kwargs, notes=notes)
    except CheckTimeout as exc:
        if exc.limit is not None and exc.limit is not mine:
            # another limit's (a check whose function runs this one): not this check's timeout, and its own to report
            # (the inner check said "did not finish within 1 s (timeout=1)" for the outer's limit: a review)
            raise
        timed_out = EvaluationError("timeout", exc)
        return _errored(label, who, mode, repro, *_labelled(fn, inputs, kwargs, names), timed_out, start)
    finally:
        restore_host_random(host)


def _checked(fn: Callable[..., Any], inputs: Sequence[Any] | Any, *, who: Described, repro: str, mode: str,
             tolerance: Tolerance | None, forward_ad: bool, order: int, seed: int, names: Sequence[str] | None,
             expected: Sequence[Any] | None, nondet_tol: Tolerance | None, label: str, start: float,
             kwargs: Mapping[str, Any] | None = None, notes: Sequence[str] = ()) -> CheckResult:
    __tracebackhide__ = _hide_spec_errors
    if expected is not None:
        expected = _precheck_expected(fn, inputs, kwargs, expected)
    try:
        problem = _problem(fn, inputs, names, seed, kwargs, notes)
    except EvaluationError as exc:
        return _errored(label, who, mode, repro, *_labelled(fn, inputs, kwargs, names), exc, start)
    if expected is not None:
        _check_expected(problem)
    dtype = str(problem.inputs[problem.diff[0]].dtype).removeprefix("torch.")
    tol = resolve("autograd_vs_evidence", dtype, tolerance)
    require_why(tolerance, [resolve("autograd_vs_evidence", dtype)])
    n = sum(problem.inputs[j].numel() for j in problem.diff)
    m = sum(o.numel() for o in problem.outputs)
    chosen = mode if mode != "auto" else ("full" if n * m <= FULL_LIMIT else "directional")
    info: Info = {"dtype": dtype}
    if problem.notes:
        info["notes"] = problem.notes
    try:
        records, findings = _gather(problem, chosen, tol, info, seed, forward_ad=forward_ad, order=order,
                                    expected=expected, nondet_tol=nondet_tol, who=who, label=label, repro=repro)
    except EvaluationError as exc:
        return _errored(label, who, chosen, repro, problem.inputs, problem.names, exc, start, diff=problem.diff,
                        meta=_problem_meta(problem))
    return CheckResult(label, chosen, tuple(records), info, repro, tuple(findings),
                       round(time.perf_counter() - start, 4))


#: the output weights are divided by max(1, |f|) up to this size: beyond, vᵀJ could fall below float64's normal range
WEIGHT_SIZE = 1e100


def _gather(problem: Problem, mode: str, tol: ToleranceUsed, info: Info, seed: int, *, forward_ad: bool,
            order: int, expected: Sequence[Any] | None, nondet_tol: Tolerance | None, who: Described, label: str,
            repro: str) -> tuple[list[Record], list[Findings]]:
    """Every piece of evidence, judged: the records (one per input and method) and their findings."""
    import torch

    from .directional import directional, resolves
    from .full import full

    # random, non-unit output weights of either sign, |v| in [0.5, 1.5) / max(1, |f|) (a backward must use
    # grad_output): each output's term of vᵀf is of order one, so a large output neither hides a small one's
    # gradient inside a projection (y = x³ at [1e4, 1]: 1e12 against 1) nor sets the rounding of all of them.
    # A non-finite output keeps |v| in [0.5, 1.5); one above WEIGHT_SIZE is divided by that (vᵀJ stays normal)
    vs = []
    dead: list[torch.Tensor | None] = []  # per output, its elements not finite at the point (None: all finite)
    # a few output elements in all: rand's draws, one output after another, as kept Python floats (no generator)
    drawn = _stream(seed, "weights").first(sum(o.numel() for o in problem.outputs)) \
        if all(o.numel() <= TINY for o in problem.outputs) else None
    gen = _generator(seed, "weights") if drawn is None else None
    for k, o in enumerate(problem.outputs):
        if E.LEAN and o.numel() <= TINY:  # the same IEEE operations in Python floats: sign(s) (|s| + 0.5), s = 2 r - 1
            if drawn is not None:
                rs, drawn = drawn[:o.numel()], drawn[o.numel():]
            else:
                rs = E.flat_list(torch.rand(tuple(o.shape), generator=gen, dtype=torch.float64))  # (tuple: cheaper)
            raw = [max(abs(f), 1.0) for f in E.flat_list(o)]  # problem.f_size(k); NaN stays NaN
            sizes = [min(a, WEIGHT_SIZE) if a != math.inf else 1.0 for a in raw]
            values = [(1.0 if t > 0 else -1.0 if t < 0 else 0.0) * (abs(t) + 0.5) / (a if a == a else 1.0)  # NaN: 1
                      for t, a in zip((r * 2 - 1 for r in rs), sizes)]
            vs.append(E.fresh(values, o.shape))
            dead.append(None if all(a < math.inf for a in raw) else torch.tensor([not a < math.inf for a in raw]))
            continue
        # 2 r - 1 for r = torch.rand's draw, the same values and the same state after (uniform_ scales that draw, and
        # 2 r is exact): one tensor operation fewer than rand, mul_ and sub_
        s = torch.empty(o.shape, dtype=torch.float64).uniform_(-1.0, 1.0, generator=gen)
        s = s.add_(s.sign(), alpha=0.5)  # s + 0.5 sign(s): sign(s) (|s| + 0.5), rounded the same (exactly)
        size = problem.f_size(k)
        if math.isfinite(float(size.sum())):  # every element finite (each at least 1: a sum that overflows, or a
            vs.append(s.div_(size.clamp_max(WEIGHT_SIZE).reshape(o.shape)))  # NaN, takes the general path below)
            dead.append(None)
            continue
        finite = torch.isfinite(size)
        vs.append(s.div_(torch.where(finite, size.clamp_max(WEIGHT_SIZE), 1.0).reshape(o.shape)))
        dead.append(None if bool(finite.all()) else ~finite)
    if any(d is not None for d in dead):
        _leave_out_dead(problem, vs, dead)
    no_input = not any(problem.inputs[j].numel() for j in problem.diff)
    no_output = not any(o.numel() for o in problem.outputs)
    empty = no_input or no_output
    grads, extra = _metadata(problem, vs, nondet_tol, again=not empty, reach=mode == "full")
    if empty:  # no element to perturb, or no output element: the Jacobian has no entry to compare
        found = {j: Findings(j, problem.names[j], tuple(problem.inputs[j].shape),
                             [tuple(o.shape) for o in problem.outputs]) for j in problem.diff}
        if no_input:
            problem.notes.append("every checked input is empty: no element to perturb, so only the gradients' dtype, "
                                 "shape and device are checked")
        else:
            problem.notes.append("every output is empty: the Jacobian has no entry, so the gradients must be zero; "
                                 "they and their dtype, shape and device are checked")
            for pos, j in enumerate(problem.diff):
                _zero_gradient(problem, found[j], grads[pos])
        info["notes"] = problem.notes
    elif mode == "full":
        confirmed: dict[int, Findings] = {}
        # per input: u, the error its agreeing evidence allows, and the outputs' own rounding in it
        views: dict[int, tuple[torch.Tensor, float, float]] = {}
        # every agreeing projection's u, that error and its truncation (directional._curve)
        trail: dict[int, list[tuple[torch.Tensor, float, float]]] = {}

        # the reasons of a confirmation undecided by rounding the evidence cannot resolve: autograd's own
        # (J.OWN_ROUNDING), or the function's at moves its ulps do not show (J.STAIRS)
        rounding = tuple(J.reason_text(code, 0.0, 0.0, None) for code in (J.OWN_ROUNDING, J.STAIRS))

        def undecided_by_rounding(f: Findings) -> bool:
            return any(c.verdict == "inconclusive" and c.reason.startswith(rounding) for c in f.comparisons())

        # per input, its own projection's direction and the outputs its quick stage evaluated (directional's memos):
        # an input given no gradient, confirmed on its own first (confirm_alone), is not evaluated again there when the
        # whole confirmation follows and judges it on its own along the same direction
        memos: dict[int, tuple[torch.Tensor, dict[tuple[float, ...], Any]]] = {}
        lone: list[dict[str, Any]] = []  # the comparisons of those own projections, as listed

        def confirm(j: int) -> bool:  # the directional confirmation, run only where full mode needs it
            if not confirmed:
                listed = info.setdefault("directional", [])
                before = len(listed)
                confirmed.update(directional(problem, _stream(seed, "directional"), tol, info, vs=vs,
                                             grads=grads, localize=False, seen=views, trail=trail, memos=memos))
                for entry in lone:  # made again, the same, by the whole confirmation: listed once, there
                    if entry in listed[before:]:
                        listed.remove(entry)
            # undecided for autograd's own rounding: as a disagreement, every column is judged by Ridders, where each
            # entry's own rounding is measured alone. One element's residue times its large step (softmax(x + c)'s c
            # at 1e8) is the whole projection's rounding, and hid another element's leak of 1e-9 that no rounding
            # covers, whose columns the quick stage had accepted (a reviewer's cat(softmax(z + x0), ...)). So too for
            # the function's rounding at larger moves (J.STAIRS): one element's (K sin(x0 + 1e5), K = 1e7) hid a
            # backward 1% off at another, and the quick stage's pass stood (a review)
            return confirmed[j].verdict == "fail" or undecided_by_rounding(confirmed[j])

        def confirm_alone(j: int) -> bool:
            """Whether input j's own projection, as the confirmation makes it after the joint one, passes: then it
            decides for an input asking only for its silence. Otherwise its comparison is withdrawn (its evaluations
            stay counted) and the whole confirmation, which makes it again, decides."""
            listed = info.setdefault("directional", [])
            before = len(listed)
            if directional(problem, _stream(seed, "directional"), tol, info, vs=vs, grads=grads, localize=False,
                           alone=j, memos=memos)[j].verdict == "pass":
                lone.extend(listed[before:])
                return True
            del listed[before:]
            return False

        def along(j: int, still: torch.Tensor, which: str, judged_by: ToleranceUsed) -> Findings:
            """The confirmation of input j with its elements *still* held where they are."""
            return directional(problem, _stream(seed, "directional"), judged_by, info, vs=vs, grads=grads,
                               localize=False, only=(j, still.reshape(problem.inputs[j].shape), which), seen=views,
                               trail=trail)[j]

        def confirm_without(j: int, cols: torch.Tensor) -> bool:  # agrees with *cols* of j held still
            still = torch.zeros(problem.inputs[j].numel(), dtype=torch.bool)
            still[cols] = True
            return along(j, still, "the columns full mode's quick stage accepted", tol).verdict == "pass"

        disagreed: dict[int, Findings] = {}
        # a projection along columns whose entries central differences left open that finds a staircase (one-sided
        # slopes exactly 0, its estimate not: (1 + 1e-12 sin x) - 1, whose stairs of 2.2e-16 hold its slope) leaves
        # them undecided, not passed: a backward 50% off there passed full mode, its note saying only that a bug of
        # 1e-8 or more may pass. (Not every inconclusive projection: along gelu's tail the slopes of the few moved
        # elements differ by their rounding and read as a kink, where the entries are as the evidence shows.)
        undecided: dict[int, Findings] = {}

        def stairs(f: Findings) -> bool:
            return f.verdict == "inconclusive" and any(c.verdict == "inconclusive" and c.slopes == (0.0, 0.0)
                                                       and c.reference != 0.0 for c in f.extra)

        def confirm_along(j: int, terms: torch.Tensor | list[float], dense: bool = False) -> bool:
            """Whether the confirmation disagrees along the columns of j whose entries neither central differences
            (*terms*: per column, the smallest unresolved entry's |v_r J_rc|, 0 where none) nor the projection that
            agreed resolve to RESOLVE: RESOLVE |v_r J_rc u_c| within the error its evidence leaves possible
            (directional._consistent). None such, or, for a function of one input, every column it moved: nothing
            to confirm again (a projection along all of them resolves no finer). *dense* (one input and one output
            element, its every entry non-zero: any projection moves that output): none either where, for every
            such column, 1e-8 of its term along it alone, |v J_c| max(1, |x_c|), is below half the output's own
            rounding in the confirmation's bound ((|x|^1.5).sum() at 0.01 among 24 of order one: its 1e-8 bug there
            a projection along that element resolves, and fails)."""
            view = views.get(j)
            if view is None:  # (no projection of j agreed: every column central differences left unresolved)
                pick = E.fresh_mask([t > 0 for t in terms]) if isinstance(terms, list) else terms.reshape(-1) > 0
            else:
                u, possible, floor = view
                sizes = problem.x_size(j)  # max(1, |x_c|): the most a projection moves column c (u_c alone)
                if isinstance(terms, list):  # a few columns: in Python floats, the same IEEE products
                    us = u.tolist()
                    picked = [t > 0 and t * abs(c) * RESOLVE <= possible for t, c in zip(terms, us)]
                    count, moved = sum(picked), sum(c != 0 for c in us)
                    hopeless = dense and not any(p and t * s * RESOLVE > 0.5 * floor
                                                 for p, t, s in zip(picked, terms, sizes.tolist()))
                else:
                    flat = terms.reshape(-1)
                    pick = (flat > 0) & (flat * u.abs() * RESOLVE <= possible)
                    count, moved = int(pick.sum()), int((u != 0).sum())
                    hopeless = dense and not bool((pick & (flat * sizes * RESOLVE > 0.5 * floor)).any())
                if not count or hopeless or (count == moved and len(problem.diff) == 1):
                    # (with several inputs, the projection that agreed may have moved the others too: one along
                    # these columns alone, phi less phi(0), resolves finer; a reviewer's cat(sin(w x), a sin(y))
                    # passed a 1e-8 bug at dy/dy0 at 98 of 336 point/seed pairs without it)
                    return False
                if isinstance(terms, list):
                    pick = E.fresh_mask(picked)
            # it looks for the promise's 1e-8: a projection along such columns disagreeing by more than 1e-9 of
            # itself (RESOLVE / SAFETY, beyond its evidence) sends them to Ridders, where the default tolerance
            # judges each entry. At 1e-10 it would do so for a special function's own accuracy (torch's trigamma
            # is 2.9e-10 off mpmath at one entry of polygamma's OpInfo sample 0, which gradcheck passes)
            seeking = with_rtol(tol, max(tol.rtol, RESOLVE / SAFETY))
            f = along(j, ~pick, "the columns whose entries central differences could not resolve to 1e-8 (nor the "
                                "confirmation; rtol 1e-9)", seeking)
            if f.verdict == "fail":
                disagreed[j] = f
            elif stairs(f):
                undecided.setdefault(j, f)
            return f.verdict == "fail" or undecided_by_rounding(f)

        def _open(j: int, terms: torch.Tensor | list[float], curved: bool) -> torch.Tensor | list[bool]:
            """The columns of j whose *terms* (> 0: an entry open) no agreeing projection resolves, with *curved*
            its truncation taken for each term's own (directional.resolves), else as before found.seen. A few
            columns (*terms* a list) in Python floats, the same IEEE products: a list of bools."""
            if isinstance(terms, list):
                flags = [t > 0 for t in terms]
                for u, possible, curve in trail.get(j, []):
                    c = curve if curved else 0.0
                    flags = [o and not resolves(t * abs(a), possible, c) for o, t, a in zip(flags, terms, u.tolist())]
                return flags
            t = terms.reshape(-1)
            open_ = t > 0
            for u, possible, curve in trail.get(j, []):
                open_ &= ~resolves(t * u.abs(), possible, curve if curved else 0.0)
            return open_

        def confirm_open(j: int, terms: torch.Tensor | list[float]) -> bool:
            """Whether the projection along the columns of j the evidence seen leaves open (*terms*: full's
            _unresolved_terms with found.seen) that no agreeing projection resolves disagrees. None such, or exactly
            the columns a projection already moved: nothing to project (it would resolve no finer)."""
            found_open = _open(j, terms, True)
            if isinstance(found_open, list):
                if not any(found_open):
                    return False
                if any([a != 0 for a in u.tolist()] == found_open for u, _, _ in trail.get(j, [])):
                    return False
                open_ = E.fresh_mask(found_open)
            else:
                open_ = found_open
                if not bool(open_.any()):
                    return False
                if any(bool(torch.equal(u != 0, open_)) for u, _, _ in trail.get(j, [])):
                    return False
            f = along(j, ~open_, "the columns whose entries the evidence seen leaves open (differences accepted, "
                                 "entries that cancel, a term's own truncation; rtol 1e-9)",
                      with_rtol(tol, max(tol.rtol, RESOLVE / SAFETY)))
            if f.verdict == "fail":
                disagreed[j] = f
            elif stairs(f):
                undecided.setdefault(j, f)
            return f.verdict == "fail" or undecided_by_rounding(f)

        def left_open(j: int, terms: torch.Tensor | list[float], say: bool) -> int:
            """The columns of j holding an entry no evidence resolved to RESOLVE: *terms* (per column, the
            smallest such entry's |v_r J_rc| after central differences, 0 where none or judged by Ridders) that no
            projection that agreed resolves (RESOLVE |v_r J_rc u_c| within the error its evidence leaves possible).
            How many; with *say*, the record names them."""
            found_open = _open(j, terms, say)
            if isinstance(found_open, list):
                first = [i for i, o in enumerate(found_open) if o]
                count = len(first)
            else:
                count = int(found_open.sum())
            if not count or not say:
                return count
            from .findings import unravel

            if not isinstance(found_open, list):
                first = found_open.nonzero().flatten()[:4].tolist()
            where = [str(unravel(i, tuple(problem.inputs[j].shape))) for i in first[:4]]
            more = ", ..." if count > len(where) else ""
            problem.notes.append(
                f"{count} of {problem.inputs[j].numel()} columns of '{problem.names[j]}' (element(s) "
                f"{', '.join(where)}{more}) hold Jacobian entries of which neither central differences nor the "
                "directional confirmation resolve 1e-8 (the outputs' own rounding at usable steps, or the "
                "projection's allowance, is larger): they agree within the allowance, but a backward off there by "
                "1e-8, or by more, may pass")
            info["notes"] = problem.notes
            return count

        found = full(problem, lambda: _generator(seed, "full"), tol, info, confirm, grads, vs, confirm_without,
                     confirm_along, left_open, confirm_open, confirm_alone)
        for j, f in found.items():
            if j in disagreed and f.verdict == "pass":
                f.extra += disagreed[j].extra  # the projection along those columns disagrees though no entry does
            elif j in undecided and f.verdict == "pass":  # the projection along open columns could not decide them
                f.extra += [replace(c, reason=f"{c.reason} (along the columns whose entries central differences left "
                                    "open: they are not decided)") for c in undecided[j].extra]
            if j not in confirmed:
                continue
            if not any(part.kind == "none-gradient" for part in f.parts):  # else its entries already say so
                f.extra[:0] = [c for c in confirmed[j].extra if c.kind == "none-gradient"]
            if confirmed[j].verdict == "fail" and f.verdict == "pass":
                f.extra += confirmed[j].extra  # the projection disagrees though no single entry does
            elif confirmed[j].verdict == "inconclusive" and f.verdict == "pass":
                # the whole confirmation's evidence too coarse to decide (directional.judge_along: Ridders' larger
                # steps still above 1e-3 of its terms), as directional mode and a ledger say: x.sum() + 1e11, whose
                # values round at 1.5e-5, passed a backward 1% off in full mode alone
                coarse = [c for c in confirmed[j].comparisons() if c.verdict == "inconclusive"]
                said = tuple(J.reason_text(code, 0.0, 0.0, None)  # (a projection's comparison carries its words)
                             for code in (J.COARSE, J.OWN_ROUNDING, J.STAIRS))
                if coarse and all(c.kind == "coarse" or c.reason.startswith(said) for c in coarse):
                    f.extra += coarse
    else:
        found = directional(problem, _stream(seed, "directional"), tol, info, vs=vs, grads=grads)
    for pos, j in enumerate(problem.diff):
        found[j].gave_none = grads[pos] is None
        _say_held(problem, found[j], grads[pos])
        if any(d is not None for d in dead):
            _say_dead(problem, found[j], dead)
    if problem.side_evaluations:  # (the outputs' rounding measured, vmap's rows confirmed: evidence too)
        info["evaluations"] = info.get("evaluations", 0) + problem.side_evaluations
    records, findings = [], []
    for j in problem.diff:
        found[j].extra[:0] = extra.get(j, [])
        records.append(_vjp_record(problem, j, found[j], mode, tol, info, who, label, repro))
        findings.append(found[j])
    if forward_ad:
        from .directional import forward_mode

        for j, f in forward_mode(problem, _generator(seed, "forward_ad"), tol, info, vs=vs,
                                 tangents=lambda j, u: _jvp(problem, j, u.to(problem.inputs[j].dtype))).items():
            _say_held(problem, f, None, vjp=False)  # (their tangents are 0: they are not moved)
            if any(d is not None for d in dead):
                _say_dead(problem, f, dead)
            records.append(_method_record(problem, j, f, "jvp", "forward-mode jvp, each output alone, against the "
                                          "numeric directional derivative along a random direction (each element "
                                          "moved relative to max(1, |x|))", tol, mode, who, label, repro))
            findings.append(f)
    if order == 2:
        from .directional import second_order

        for j, f in second_order(problem, _generator(seed, "second_order"), tol, info, vs=vs).items():
            _say_held(problem, f, None, vjp=False)
            if any(d is not None for d in dead):
                _say_dead(problem, f, dead)
            records.append(_method_record(problem, j, f, "double backward", "the gradient of G = vᵀJ(x)·w against "
                                          "its numeric derivative along a random direction (each element moved "
                                          "relative to max(1, |x|))", tol, mode, who, label, repro))
            findings.append(f)
    if expected is not None:
        for j, (f, etol, want, got) in _expected(problem, expected).items():
            records.append(_method_record(problem, j, f, "autograd.grad", "autograd's gradient against the "
                                          "expectation given in expected=", etol, mode, who, label, repro,
                                          expected=expected[problem.diff.index(j)], compared=(want, got)))
            findings.append(f)
    return records, findings


def _zero_gradient(problem: Problem, f: Findings, g: torch.Tensor | None) -> None:
    """With no output element, vᵀJ is zero for every v: a gradient with a non-zero (or NaN) entry is wrong."""
    if g is None:
        return
    bad = (g.detach() != 0).reshape(-1)
    if not bool(bad.any()):
        return
    from .findings import unravel

    at = int(bad.nonzero()[0])
    f.extra.append(Comparison(Location(f.name, unravel(at, f.shape)), 0.0, float(g.detach().reshape(-1)[at]), None,
                              "fail", "value", f"autograd's gradient of '{f.name}' holds {int(bad.sum())} non-zero "
                              "value(s) although every output is empty (vᵀJ is zero for every v)"))


HELD_SHOWN = 4  # non-finite elements named in a record's reason; the count is always whole


def _leave_out_dead(problem: Problem, vs: list[torch.Tensor], dead: list[torch.Tensor | None]) -> None:
    """Output elements that are not finite at the point have no derivative there. Where some outputs are
    finite, the dead ones get weight 0 and are left out of every vᵀf (problem.dead): inside a weighted sum
    their inf or NaN would make every directional derivative undefined, and the finite outputs, whose rows
    full mode judges entry by entry, would go unchecked (sqrt at [-1, 2, 3] was a fail in full mode and
    inconclusive in directional). Every evaluation, and the outputs at the point, read 0 there (Problem.call),
    and full mode leaves their rows out of its entries (full._leave_out_dead): it judged each of their entries
    inconclusive, Ridders shrinking its steps at every column, which made log of 200 elements, half of them
    negative, take 23,219 evaluations (0.94 s against gradcheck's 0.10 s), and counted them twice. Their rows
    are reported as not checked (:func:`_say_dead`), with the values the function gave there."""
    if all(d is not None and bool(d.all()) for d in dead):
        return  # no output element is finite: nothing would be left to weigh (until 2026-12-06 this read "each output
        # wholly finite or wholly not": an output -inf everywhere beside a finite one was weighed, and made vᵀf NaN)
    problem.dead = dead
    problem.at_point = list(problem.outputs)
    problem.outputs = [o if d is None else o.masked_fill(d.reshape(o.shape), 0.0)
                       for o, d in zip(problem.outputs, dead)]
    for v, d in zip(vs, dead):
        if d is not None:
            v.view(-1).masked_fill_(d, 0.0)


def _say_dead(problem: Problem, f: Findings, dead: list[torch.Tensor | None]) -> None:
    """An inconclusive comparison naming the output elements that are not finite at the point: their
    derivatives do not exist, so their rows are not checked, in every mode."""
    from .findings import unravel

    shown: list[str] = []
    count = 0
    for k, d in enumerate(dead):
        if d is None:
            continue
        at = d.nonzero().flatten()
        count += len(at)
        values = (problem.outputs if problem.at_point is None else problem.at_point)[k].detach().reshape(-1)
        for i in at[:max(0, HELD_SHOWN - len(shown))].tolist():
            shown.append(f"output {k} element {unravel(i, tuple(problem.outputs[k].shape))} = {float(values[i])}")
    more = f", and {count - len(shown)} more" if count > len(shown) else ""
    which = (f"{count} output elements not finite at the point (no derivative there): their Jacobian rows are"
             if count != 1 else "1 output element not finite at the point (no derivative there): its Jacobian row is")
    f.extra.append(Comparison(Location(f.name), None, None, None, "inconclusive", "not-checked",
                              f"{which} not checked: " + "; ".join(shown) + more))


def _say_held(problem: Problem, f: Findings, first: torch.Tensor | None, *, vjp: bool = True) -> None:
    """Name the non-finite input elements that were held at their value and not checked (no derivative
    exists there), with autograd's vᵀJ at each (not for another method's record: *vjp* False); an input with
    nothing else is inconclusive."""
    from .findings import unravel

    if f.held is None or not len(f.held):
        return
    x = problem.inputs[f.input].detach().reshape(-1)
    g = None if first is None else first.detach().reshape(-1)
    shown = []
    for i in f.held[:HELD_SHOWN].tolist():
        there = "None" if g is None else f"{float(g[i]):.6g}"
        shown.append(f"{unravel(i, f.shape)} = {float(x[i])}" + (f" (autograd's vᵀJ there {there})" if vjp else ""))
    more = f", and {len(f.held) - HELD_SHOWN} more" if len(f.held) > HELD_SHOWN else ""
    count = len(f.held)
    which = f"{count} elements not finite, held at their" if count != 1 else "1 element not finite, held at its"
    f.not_checked = f"{which} value and not checked (no derivative exists there): " + "; ".join(shown) + more
    if len(f.held) == x.numel():
        f.extra.append(Comparison(Location(f.name), None, None, None, "inconclusive", "not-checked",
                                  f"every element of '{f.name}' is non-finite: nothing could be checked"))


def _metadata(problem: Problem, vs: list[torch.Tensor], nondet_tol: Tolerance | None, *, again: bool = True,
              reach: bool = False) -> tuple[tuple[torch.Tensor | None, ...], dict[int, list[Comparison]]]:
    """vᵀJ from the first backward; dtype/shape/device of the gradients against their inputs; a second
    backward through the same graph must agree (nondet_tol aside; not *again*: empty gradients, nothing
    to differ). With *reach* (full mode) and several outputs, problem.reached: the checked inputs each output's
    graph reaches. Returns vᵀJ and the comparisons."""
    import torch

    if problem.point is not None:
        (xs, outs), problem.point = problem.point, None  # the first forward's graph, released after these two
    else:
        xs, outs = problem.forward_with_graph()
    if reach and len(outs) > 1:  # (full mode's rule for an input one output gives no gradient: full._silent_output)
        problem.reached = E.graph_reach(outs, xs, problem.diff)
    cot = [v if v.dtype == o.dtype else v.to(o.dtype) for v, o in zip(vs, outs)]
    wrt = [xs[i] for i in problem.diff]
    differentiable = [(o, c) for o, c in zip(outs, cot) if o.requires_grad]
    if problem.dead is not None:
        # an output not finite anywhere at the point has weight 0 throughout (_leave_out_dead), and is left out of
        # the backward: its backward may still make NaN of that 0 (log(0 x): 0 / 0), which made every element's
        # vᵀJ NaN, and a wrong backward of the finite outputs beside it inconclusive in directional mode where
        # full mode, judging each output's rows, failed it
        live = [(o, c) for o, c, d in zip(outs, cot, problem.dead) if o.requires_grad and (d is None or not d.all())]
        differentiable = live or differentiable
    if not differentiable:
        return tuple(None for _ in wrt), {}
    o_list, c_list = [o for o, _ in differentiable], [c for _, c in differentiable]
    first = grad(o_list, wrt, c_list, allow_unused=True, retain_graph=again)
    # the second with the weights negated: a backward is linear in its grad_output, and IEEE rounding is
    # symmetric in sign, so it must give exactly -first; one that uses |grad_output| (or ignores its sign)
    # is caught whatever the sign of v (with v alone, on half of the seeds for a scalar output)
    second = (tuple(None if g is None else -g for g in grad(o_list, wrt, [-c for c in c_list], allow_unused=True,
                                                           retain_graph=nondet_tol is None))
              if again else first)
    ntol = resolve("nondeterminism", "float64", nondet_tol)
    found: dict[int, list[Comparison]] = {}
    repeated: list[tuple[torch.Tensor | None, ...] | None] = []

    def with_v_again() -> tuple[torch.Tensor | None, ...] | None:
        """A third backward through the same graph, with v again (once, only where v and -v disagree): whether the
        backward is deterministic. None where it cannot run a third time."""
        if not repeated:
            try:
                repeated.append(grad(o_list, wrt, c_list, allow_unused=True))
            except EvaluationError:
                repeated.append(None)
        return repeated[0]
    for pos, j in enumerate(problem.diff):
        g, x, name = first[pos], xs[j], problem.names[j]
        if g is None:
            continue  # judged by the value comparison when the numeric gradient is non-zero
        out = found.setdefault(j, [])
        for what, got, want in (("dtype", g.dtype, x.dtype), ("shape", tuple(g.shape), tuple(x.shape)),
                                ("device", g.device, x.device)):
            if got != want:
                out.append(Comparison(Location(name), None, None, None, "fail", "metadata",
                                      f"the gradient of '{name}' has {what} {got}, its input {want}"))
        g2 = second[pos]
        if g2 is None or g.shape != g2.shape or torch.equal(g, g2):
            continue
        held = None  # non-finite input elements are held and not checked (their record says so): nor is this there
        if x.is_floating_point() and g.shape == x.shape and not bool(torch.isfinite(x).all()):
            held = ~torch.isfinite(x.detach())
            g, g2 = g.masked_fill(held, 0.0), g2.masked_fill(held, 0.0)
            if torch.equal(g, g2):
                continue
        from .findings import unravel

        if torch.equal(g2, -g):  # backward(-v) = backward(v): the sign of grad_output is lost
            at = unravel(int((g != 0).reshape(-1).nonzero()[0]), tuple(g.shape)) if g.dim() else None
            out.append(Comparison(Location(name, at), None, None, None, "fail", "grad-output-sign",
                                  f"the backward gives '{name}' the same gradient for grad_outputs v and -v: it "
                                  "ignores the sign of its grad_output, or grad_output altogether (|grad_output|, "
                                  "a square, a clamp, a saved tensor returned as it is?), but a backward is linear "
                                  "in it"))
            continue
        pair = "grad_outputs v and -v"
        if nondet_tol is None:
            # v and -v may round differently in a right backward (complex logcumsumexp's takes the log of its
            # grad_output: log(-g) = log(g) + i pi, to an ulp): a third pass with v again tells nondeterminism (it
            # differs from the first) from that rounding, or from a backward not linear in its grad_output
            third = with_v_again()
            g3 = None if third is None else third[pos]
            if g3 is not None and held is not None and g3.shape == held.shape:
                # as the first two (KLDivLoss at NaN inputs: the first two held there, the third's NaN read as
                # a backward that differs from the first, "nondeterministic")
                g3 = g3.masked_fill(held, 0.0)
            if g3 is not None and g3.shape == g.shape and _same(g3, g):
                # (g is not empty: two empty gradients are equal, and were passed above)
                both = torch.isnan(g) & torch.isnan(g2)
                diff = (g2 - g).abs().masked_fill(both, 0.0).nan_to_num(nan=math.inf, posinf=math.inf)
                size = float(g.abs().masked_fill(both, 0.0).nan_to_num(nan=0.0, posinf=0.0).max())
                rounding = STRUCTURE_ULPS * torch.finfo(g.dtype).eps * max(size, torch.finfo(g.dtype).tiny)
                if float(diff.max()) <= rounding:
                    continue  # rounding that depends on the sign of grad_output
                at = unravel(int(diff.reshape(-1).argmax()), tuple(g.shape)) if g.dim() else None
                out.append(Comparison(Location(name, at), None, None, None, "fail", "grad-output-linearity",
                                      f"the backward gives '{name}' gradients for grad_outputs v and -v that are not "
                                      f"each other's negatives: they differ by up to {float(diff.max()):.3g}, at "
                                      f"{at if at is not None else 'the value'}, more than rounding ({rounding:.3g}: "
                                      f"{STRUCTURE_ULPS:g} ulps of its largest gradient), while a pass with v again "
                                      "gives exactly the first: a backward must be linear in its grad_output"))
                continue
            if g3 is not None and g3.shape == g.shape:
                g2, pair = g3, "the same grad_output v"
        both = torch.isnan(g) & torch.isnan(g2)  # NaN twice at the same place is not nondeterminism
        judged = J.judge(g2.masked_fill(both, 0.0), g.masked_fill(both, 0.0), ntol, numeric=None)
        if bool((judged.verdict != J.PASS).any()):
            worst = float(judged.diff.max())
            at = unravel(int(judged.diff.reshape(-1).argmax()), tuple(g.shape)) if g.dim() else None
            out.append(Comparison(Location(name, at), None, None, None, "fail", "nondeterministic",
                                  f"two backward passes on the same inputs, with {pair}, differ by "
                                  f"up to {worst:.3g}, at {at if at is not None else 'the value'} (a backward must be "
                                  "linear in its grad_output and the same every time)"
                                  + (f" (allowed atol {ntol.atol:g}, rtol {ntol.rtol:g}: {ntol.why})"
                                     if nondet_tol is not None else "")
                                  + "; pass nondet_tol=ga.Tolerance(atol, rtol, why=...) for a known "
                                    "nondeterministic op"))
    return first, found


def _jvp(problem: Problem, j: int, u: torch.Tensor) -> list[torch.Tensor]:
    """Forward-mode tangents J_j u of every output, with dual numbers (torch.autograd.forward_ad)."""
    import warnings

    import torch
    import torch.autograd.forward_ad as fwad

    from .guard import expired

    with fwad.dual_level():
        # a function that differentiates inside runs with gradients on and leaves that require grad, as every
        # evaluation of it does (Problem.call), but here on the dual numbers themselves, its outputs' tangents kept
        # (call() would put fresh leaves in place of the dual input and detach the outputs: the tangent read 0, and a
        # right force -dE/dx FAILED)
        inside = problem.needs_grad
        primal = problem.inputs[j].detach().requires_grad_(True) if inside else problem.inputs[j]
        try:
            with warnings.catch_warnings():
                # torch's first make_dual loads its jvp decompositions through torch.jit.script, which warns
                # that torch.jit.script is deprecated: torch's own internals, nothing the caller can act on
                warnings.filterwarnings("ignore", message="`torch.jit.script` is deprecated",
                                        category=DeprecationWarning)
                # (a copy: make_dual keeps the tangent it is given, and a jvp that writes into its tangent, t.mul_(3),
                # wrote into u, along which the numeric side then moved: a right jvp FAILED, 'rel 0.667')
                dual = fwad.make_dual(primal, u.clone())
        except Exception as exc:
            raise EvaluationError("forward-mode AD", exc) from exc
        xs = problem.with_input(j, dual)
        try:
            if inside:
                xs = [x if i == j or i not in problem.diff or not torch.is_tensor(x) or not x.is_floating_point()
                      else x.detach().requires_grad_(True) for i, x in enumerate(xs)]
                expired()
                with E.GradMode(True):
                    outs = problem._call(*xs)
            else:
                outs = problem.call(*xs)
        except EvaluationError as exc:  # (named for what ran: the report said "the function raised" for a jvp's error)
            raise EvaluationError("forward-mode AD (forward_ad=True: the function on dual numbers, or its jvp)",
                                  exc.original) from exc.original
        tangents = []
        for o in outs:
            t = fwad.unpack_dual(o).tangent
            tangents.append(torch.zeros_like(o) if t is None else t.detach().clone())
    return tangents


def _precheck_expected(fn: Callable[..., Any], inputs: Sequence[Any] | Any, kwargs: Mapping[str, Any] | None,
                       expected: Sequence[Any]) -> list[torch.Tensor]:
    """expected= against the inputs, before any evaluation: one finite value per input that requires grad (the leaves,
    in the order the check takes them), returned as float64 tensors; a complex input's as its real and imaginary
    parts (torch.view_as_real of the gradient torch stores in z.grad), as the check compares its gradient."""
    __tracebackhide__ = _hide_spec_errors
    import torch

    if isinstance(expected, (str, bytes)) or not isinstance(expected, Sequence):
        raise SpecError(f"expected= takes one value (or tensor) per input that requires grad; got "
                        f"{type(expected).__name__}.", field="expected")
    xs = [x for x in _arguments(fn, inputs, kwargs, None, strict=False)[0] if torch.is_tensor(x) and x.requires_grad]
    if len(expected) != len(xs):
        raise SpecError(f"expected= has {len(expected)} values for {len(xs)} inputs that require grad.",
                        field="expected")
    wanted = []
    for pos, x in enumerate(xs):
        try:
            if x.is_complex():
                want = torch.view_as_real(torch.as_tensor(expected[pos], dtype=torch.complex128).resolve_conj())
                want = want.expand(*x.shape, 2)
            elif torch.as_tensor(expected[pos]).is_complex():
                raise ValueError("a complex value for a real input (its gradient is real)")
            else:
                want = torch.as_tensor(expected[pos], dtype=torch.float64).expand(x.shape)
        except (TypeError, ValueError, RuntimeError, OverflowError) as exc:
            try:
                value = torch.as_tensor(expected[pos])
                given = None if value.is_complex() and not x.is_complex() else tuple(value.shape)
            except (TypeError, ValueError, RuntimeError, OverflowError):
                given = None
            # a Jacobian: the output's dimensions (more than one element) before the input's own shape
            if (given is not None and len(given) > x.dim() and given[len(given) - x.dim():] == tuple(x.shape)
                    and math.prod(given[:len(given) - x.dim()]) > 1):
                raise SpecError(f"expected[{pos}] has shape {given}, and the gradient of input {pos} has "
                                f"shape {tuple(x.shape)}: expected= takes the gradient of a function with one scalar "
                                "output, a value of the input's shape (or one that broadcasts to it), not a "
                                "Jacobian. For a function of several outputs, check a scalar of them (lambda x: "
                                "f(x).sum()) or leave expected= out.", field="expected") from None
            raise SpecError(f"expected[{pos}] cannot be compared with the gradient of input {pos} (shape "
                            f"{tuple(x.shape)}{', complex' if x.is_complex() else ''}): {exc}.",
                            field="expected") from None
        if not bool(torch.isfinite(want).all()):
            raise SpecError(f"expected[{pos}] holds NaN or infinity: a gradient expectation must be finite.",
                            field="expected")
        wanted.append(want)
    return wanted


def _check_expected(problem: Problem) -> None:
    __tracebackhide__ = _hide_spec_errors
    if len(problem.outputs) != 1 or problem.outputs[0].numel() != 1:
        raise SpecError("expected= applies to a function with one scalar output.", field="expected")


def _expected(problem: Problem, expected: Sequence[Any]
              ) -> dict[int, tuple[Findings, ToleranceUsed, torch.Tensor, torch.Tensor]]:
    """An analytical expectation per checked input (scalar output) against autograd, with the
    autograd-vs-expectation table; and the two gradients compared (expected, autograd's), for the record."""
    import torch

    xs = problem.leaves()
    with torch.enable_grad():
        out = problem.call(*xs)[0].reshape(())
    grads = grad(out, [xs[i] for i in problem.diff], allow_unused=True)
    found: dict[int, tuple[Findings, ToleranceUsed, torch.Tensor, torch.Tensor]] = {}
    for pos, j in enumerate(problem.diff):
        x = problem.inputs[j]
        etol = resolve("autograd_vs_expected", str(x.dtype).removeprefix("torch."))
        want = torch.as_tensor(expected[pos], dtype=torch.float64).expand(x.shape)
        got = torch.zeros_like(want) if grads[pos] is None else grads[pos].to(torch.float64)
        f = Findings(j, problem.names[j], tuple(x.shape), [()], reference_kind="expected")
        judged = J.judge(got, want, etol, numeric=None)
        f.add(judged, got, want, output=0, rows=torch.zeros((), dtype=torch.long),
              cols=torch.arange(x.numel()).reshape(x.shape))
        found[j] = (f, etol, want, got)
    return found


# -- records ---------------------------------------------------------------------------------------

def _problem_meta(problem: Problem) -> tuple[InputMeta, ...]:
    """The inputs' metadata, as every record of one check states it (made once per check)."""
    if problem.meta is None:
        meta = _inputs_meta(problem.inputs, problem.names, problem.diff,
                            [problem.device_of(j) for j in range(len(problem.inputs))])
        problem.meta = tuple(m if given is None else replace(m, shape=given[0], dtype=given[1])
                             for m, given in zip(meta, problem.given or [None] * len(meta)))
    return problem.meta  # type: ignore[no-any-return]


def _inputs_meta(problem_inputs: Sequence[Any], names: Sequence[str], diff: Sequence[int],
                 devices: Sequence[str] | None = None) -> tuple[InputMeta, ...]:
    import torch

    return tuple(InputMeta(n, None, tuple(t.shape), str(t.dtype).removeprefix("torch."),
                           str(t.device) if devices is None else devices[i], i in diff)
                 if torch.is_tensor(t) else InputMeta(n, repr(t), (), type(t).__name__, "", False)
                 for i, (n, t) in enumerate(zip(names, problem_inputs)))


_INFO = ("evaluation", "largest_chunk", "analytic", "structure", "numeric", "evaluations", "backward_rows",
         "pattern_draws", "richardson_groups", "richardson_columns", "ridders_columns", "confirmation", "vmap_error",
         "batched_grad_error", "notes", "forward_ad", "order")


def _evidence(info: Info, mode: str, dtype: str, bound: float | None) -> Evidence:
    if mode == "full":
        scheme = ("central differences; where they did not decide, Richardson (h, 2h) per column, then Ridders per "
                  "entry")
        if "numeric" in info:
            scheme = f"{info['numeric']}; elsewhere " + scheme
        if "structure" in info:
            scheme = f"{info['structure']}; " + scheme
        rule = "h = cbrt(eps) * max(1, |x|) (Richardson: h and 2h); Ridders from h0 = 1e-2 * max(1, |x|), halving"
    else:
        scheme = ("richardson (h, 2h), at h/2, h/4, ... where only its truncation estimate kept it from accepting, "
                  "then Ridders, along a random direction")
        rule = ("along u = r / |r| * max(1, |x_i|) per element (r uniform in [-1, 1]): h = 7e-4, halved up to 4 "
                "times; Ridders from h0 = 1e-2, halving")
    details = {k: info[k] for k in _INFO if k in info}
    if "directional" in info:
        details["directional"] = [{k: v for k, v in d.items() if k not in ("judged",)} for d in info["directional"]]
    return Evidence("finite_difference", scheme, rule, None, dtype, bound, info.get("evaluations"),
                    tuple(info.get("notes", ())), details)


#: what a directional pass promises, said beside it (directional.SPLIT): a reader took "2000 values compared" for
#: 2000 entries judged, and a 1e-7 bug at one of them passes there
DIRECTIONAL_PASS = ("judged through projections vᵀJu along random directions, all within the allowance (directional "
                    "mode resolves about 1e-6 of an element's typical term, not each entry to the tolerance: "
                    "mode='full' judges every entry)")


def _summary(f: Findings, mode: str = "full", coarse: tuple[str, float] | None = None) -> str:
    """The record's reason. *coarse*: directional mode on evidence below float64, its precision and the largest
    difference its projections accepted, relative to their value (it resolves that, not about 1e-6 of a term)."""
    held = f"; {f.not_checked}" if f.not_checked else ""
    if f.verdict == "pass" and f.gave_none:
        held = (f"; autograd gives None for '{f.name}' (no gradient: the output does not depend on it), which the "
                "evidence bears out") + held
    if f.verdict == "pass":
        if mode == "directional" and f.total and coarse is not None:
            return (f"{plural(f.total, 'value')} judged through projections vᵀJu along random directions, all within "
                    f"the allowance (on {coarse[0]} evidence the projections accepted differences up to "
                    f"{coarse[1]:.2g} of their value: a backward off by less than that may pass; mode='full' judges "
                    f"every entry){held}")
        if mode == "directional" and f.total and f.coarse is not None:
            count, ratio = f.coarse
            return (f"{plural(f.total, 'value')} judged through projections vᵀJu along random directions, all within "
                    f"the allowance; {count} of them no projection resolved to 1e-6 of an element's typical term (the "
                    f"finest allowance there was up to {ratio:.2g} of it: a backward off there by less than that may "
                    f"pass; mode='full' judges every entry){held}")
        if mode == "directional" and f.total:
            return f"{plural(f.total, 'value')} {DIRECTIONAL_PASS}{held}"
        return f"{plural(f.total, 'value')} compared, all within the allowance{held}"
    at_least = "" if f.exact else "at least "
    parts = []
    if not f.failed and not f.inconclusive and f.total:  # not decided by what the entries say: say it, then why
        decider = [c for c in f.extra if c.verdict != "pass" and c.reason]
        parts.append(f"{plural(f.total, 'value')} compared, each within its allowance"
                     + (f", but not a projection that judged them together ({decider[0].verdict})" if decider else ""))
    if f.failed:
        parts.append(f"{at_least}{f.failed} of {f.total} outside the allowance")
        if any(part.kind == "none-gradient" for part in f.parts):
            parts[-1] += f" (autograd gives None for '{f.name}', which requires grad)"
    if f.inconclusive:
        parts.append(f"{f.inconclusive} inconclusive")
    parts += [c.reason for c in f.extra if c.verdict != "pass" and c.reason][:3]
    return "; ".join(parts) + held


def _vjp_record(problem: Problem, j: int, f: Findings, mode: str, tol: ToleranceUsed, info: Info, who: Described,
                label: str, repro: str) -> Record:
    x = problem.inputs[j]
    kept = f.comparisons(KEEP)
    # (a non-finite value's comparison carries an infinite bound from autograd's own side: not the evidence's)
    bound = max((c.allowance.evidence for c in kept if c.allowance and c.kind != "nonfinite"), default=None)
    dtype = str(x.dtype).removeprefix("torch.")  # the evidence's; the record states the caller's (shape, given)
    shape, given = _given(problem, j)
    # the evidence has the precision of the least precise of the input's copy, the outputs and what the function
    # computes in inside (a float64 input, a float32 output or an x.float() inside: float32's)
    precision = _least_precise((x.dtype, *(problem.inner or ()), *(o.dtype for o in problem.outputs)))
    coarse = None
    if mode == "directional" and f.verdict == "pass" and precision not in ("float64", "complex128"):
        # what the projections resolved on this evidence (a float32-only function's 1% bug passed, the record saying
        # directional mode resolves about 1e-6 of a term)
        ratios = [d["allowed"] / max(abs(d["autograd"]), abs(d["numeric"]))
                  for d in info.get("directional", ())
                  if problem.names[j] in str(d.get("input", "")).split(" (")[0].split(", ")
                  and isinstance(d.get("allowed"), float) and isinstance(d.get("autograd"), float)
                  and isinstance(d.get("numeric"), float) and max(abs(d["autograd"]), abs(d["numeric"])) > 0]
        coarse = (precision, max(ratios)) if ratios else None
    reason = _summary(f, mode, coarse)
    if f.verdict == "pass" and precision not in ("float64", "complex128") and f.max_rel > tol.rtol:
        # evidence in a low precision: its bound, not the rtol, let the largest difference pass (a float32 kernel
        # 0.3% off passed, the report saying only "within the allowance")
        accepted = (f"; differences up to {f.max_rel:.2g} of an entry were accepted (rtol {tol.rtol:g}, but the "
                    f"{precision} evidence's own error bound is part of the allowance): a backward off by less than "
                    "that may pass")
        if dtype == precision:  # the function refused float64 inputs
            reason += accepted + ("; give the function float64 inputs (the tensors it closes over in float64, or "
                                  "cast inside) for float64 evidence")
        else:
            reason += accepted + (f"; the function's values have {precision}'s precision (its outputs, or its work "
                                  "inside), which no step can refine")
    dtype = precision
    return Record._make(
        suite="check", check=label, function=who.source, function_name=who.name,
        inputs=_problem_meta(problem), input=problem.names[j],
        derivation="autograd's backward (vᵀJ with random non-unit v) against finite differences",
        method="vjp", stored_or_returned="returned", tolerance=tol, source=repro, executed=True,
        verdict=f.verdict, outcome=J.outcome(f.verdict), reason=reason,  # type: ignore[arg-type]
        shape=shape, dtype=given, device=problem.device_of(j), mode=mode,
        evidence=_evidence(info, mode, dtype, bound), discrepancy=f.discrepancy(KEEP, kept), rerun=repro,
        elapsed_s=None)


@functools.lru_cache(maxsize=64)
def _least_precise(dtypes: tuple[Any, ...]) -> str:
    """The name of the least precise floating dtype among *dtypes* (None and non-floating ones left out; a complex
    one as its parts' real dtype would read, but named as itself). Once per combination of dtypes."""
    import torch

    best, worst = "float64", 0.0
    for d in dtypes:
        if d is None or not (d.is_floating_point or d.is_complex):
            continue
        eps = torch.finfo(d).eps
        if eps > worst:
            best, worst = str(d).removeprefix("torch."), eps
    return best


def _given(problem: Problem, j: int) -> tuple[tuple[int, ...], str]:
    """Input j's shape and dtype as the caller gave it (the evidence's copy may be float64, or a real view)."""
    given = problem.given[j] if problem.given else None
    x = problem.inputs[j]
    return given if given is not None else (tuple(x.shape), str(x.dtype).removeprefix("torch."))


def _method_record(problem: Problem, j: int, f: Findings, method: str, derivation: str, tol: ToleranceUsed, mode: str,
                   who: Described, label: str, repro: str, expected: Any = None,
                   compared: tuple[torch.Tensor, torch.Tensor] | None = None) -> Record:
    """A record of another method than the vjp; with *compared* (expected=): the expected gradient and autograd's,
    as the record's expected and observed values (the report showed None and None beside the expectation given)."""
    x = problem.inputs[j]
    dtype = str(x.dtype).removeprefix("torch.")
    shape, given = _given(problem, j)
    from .record import to_json

    evidence = Evidence("autograd.grad" if method == "autograd.grad" else "finite_difference",
                        None if method == "autograd.grad" else "richardson (h, 2h), then Ridders",
                        precision=dtype)
    return Record(
        suite="check", check=label, function=who.source, function_name=who.name,
        inputs=_problem_meta(problem), input=problem.names[j],
        analytical_gradient=None if expected is None else to_json(expected),
        expected_value=None if compared is None else to_json(compared[0].tolist()),
        observed_gradient=None if compared is None else to_json(compared[1].tolist()),
        derivation=derivation, method=method, stored_or_returned="returned", tolerance=tol, source=repro,
        executed=True, verdict=f.verdict, outcome=J.outcome(f.verdict), reason=_summary(f),  # type: ignore[arg-type]
        shape=shape, dtype=given, device=problem.device_of(j), mode=mode,
        evidence=evidence, discrepancy=f.discrepancy(KEEP), rerun=repro)


def _labelled(fn: Callable[..., Any], inputs: Sequence[Any] | Any, kwargs: Mapping[str, Any] | None,
              names: Sequence[str] | None) -> tuple[list[Any], list[str] | None]:
    """The arguments' leaves and labels as the check names them (:func:`_arguments`), for an error verdict before
    the problem was built (the leaves themselves, and no labels, where even that fails)."""
    try:
        xs, labels, _ = _arguments(fn, inputs, kwargs, names, strict=False)
    except Exception:  # (an error verdict is being written: never a second error)
        return _as_list(inputs), None
    return xs, labels


def _errored(label: str, who: Described, mode: str, repro: str, inputs: Sequence[Any], names: Sequence[str] | None,
             exc: EvaluationError, start: float, *, diff: Sequence[int] | None = None,
             meta: tuple[InputMeta, ...] | None = None) -> CheckResult:
    """The error verdict: the user's exception kept whole (type, message, traceback), one record per checked input
    (*diff*, the problem's once it was built: its inputs are detached copies; else those that require grad)."""
    import torch

    original = exc.original
    error = ErrorInfo(type(original).__name__, said(original),
                      "".join(traceback.format_exception(type(original), original, original.__traceback__)).rstrip(),
                      exc.where)
    labels = list(names) if names is not None and len(names) == len(inputs) else [f"input{i}" for i in
                                                                                    range(len(inputs))]
    if diff is None:
        diff = [i for i, x in enumerate(inputs) if torch.is_tensor(x) and x.requires_grad]
    if meta is None:
        meta = _inputs_meta(inputs, labels, diff)
    records = tuple(Record(suite="check", check=label, function=who.source, function_name=who.name, inputs=meta,
                           input=labels[i], method="vjp", stored_or_returned="returned", source=repro, executed=True,
                           verdict="error", outcome="errors", reason=f"{exc.where} raised {type(original).__name__}",
                           mode=mode, error=error, rerun=repro) for i in diff or [0])
    return CheckResult(label, mode, records, {}, repro, (), round(time.perf_counter() - start, 4))


def assert_gradients(fn: Callable[..., Any], inputs: Sequence[Any] | Any, **kwargs: Any) -> CheckResult:
    """``check`` that raises :class:`GradientMismatch` (an AssertionError) unless the verdict is pass."""
    __tracebackhide__ = True
    result = check(fn, inputs, **kwargs)
    if not result.ok:
        raise GradientMismatch(result.report(), result.records)
    return result


def check_module(model: Any, inputs: Sequence[Any] | Any, loss_fn: Callable[..., Any] | None = None, *,
                 mode: Mode = "auto", seed: int = 0, kwargs: Mapping[str, Any] | None = None,
                 **options: Any) -> CheckResult:
    """Check the gradients of *model*'s parameters (by name) via ``torch.func.functional_call``.

    With *loss_fn*, the checked function is ``loss_fn(model(*inputs, **kwargs))``; without it, the
    model's output itself. *kwargs* are keyword arguments of the forward (a mask, ``need_weights``),
    passed unchanged. Mismatches name the parameter and element, e.g. ``l1.weight[2, 1]``.
    """
    __tracebackhide__ = _hide_spec_errors
    import torch
    from torch.utils._pytree import tree_leaves, tree_map_only

    if not isinstance(model, torch.nn.Module):
        raise SpecError(f"check_module takes an nn.Module; got {type(model).__name__}. For a plain function use "
                        "ga.check(fn, inputs).", field="model")
    if loss_fn is not None and not callable(loss_fn):
        raise SpecError(f"loss_fn must be callable; got {type(loss_fn).__name__}.", field="loss_fn")
    args = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    if kwargs is not None and not (isinstance(kwargs, Mapping) and all(isinstance(k, str) for k in kwargs)):
        raise SpecError(f"kwargs must be a dict of keyword arguments for the model's forward, e.g. "
                        f"{{'need_weights': False}}; got {kwargs!r}.", field="kwargs")
    forward_kwargs = dict(kwargs or {})
    lazy = [n for n, t in (*model.named_parameters(), *model.named_buffers())
            if isinstance(t, (torch.nn.parameter.UninitializedParameter, torch.nn.parameter.UninitializedBuffer))]
    if lazy:  # (torch's own ValueError, about 'detach', escaped the check: a fresh-eyes audit)
        raise SpecError(f"tensor(s) {', '.join(lazy[:4])}{', ...' if len(lazy) > 4 else ''} belong to a lazy "
                        "module that has not run yet (torch.nn.LazyLinear and the like), so they have no shape and "
                        "no gradient to check. Run one forward first (model(*inputs)) so they exist, then check.",
                        field="model")
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    if not params:
        held = [n for n, _ in model.named_parameters()]
        seen = (f"its {plural(len(held), 'parameter')} ({', '.join(held[:4])}{', ...' if len(held) > 4 else ''}) all "
                "have requires_grad=False" if held else f"{type(model).__name__} has no parameters at all")
        raise SpecError(f"check_module checks the gradients of a module's parameters, and {seen}. "
                        + ("Unfreeze the ones to check (p.requires_grad_(True)) on a copy of the model, or check "
                           "the function with ga.check(fn, inputs) for its inputs' gradients." if held else
                           "For the gradient with respect to the inputs, use ga.check(model, inputs)."),
                        field="model")
    names = list(params)
    meta = [n for n, t in (*params.items(), *model.named_buffers()) if t.is_meta]
    if meta:
        listed = ", ".join(meta[:4]) + (", ..." if len(meta) > 4 else "")
        raise SpecError(f"the model's {plural(len(meta), 'tensor')} {listed} {'is' if len(meta) == 1 else 'are'} on "
                        "the meta device, which holds shapes but no values: the model cannot be evaluated, nor its "
                        "gradients checked. Build it on a real device, or materialize it first "
                        "(model.to_empty(device='cpu'), then initialize or load its weights).", field="model")
    hooked = [n for n, p in params.items() if p._backward_hooks or getattr(p, "_post_accumulate_grad_hooks", None)]
    listed = ", ".join(hooked[:4]) + (", ..." if len(hooked) > 4 else "")
    notes = [] if not hooked else [
        f"{plural(len(hooked), 'parameter')} ({listed}) {'carries' if len(hooked) == 1 else 'carry'} hooks of their "
        "own (register_hook, register_post_accumulate_grad_hook): the check runs the model on copies of its "
        "parameters, which carry none, so it checks the loss's gradient; the .grad that training sees has been "
        "through the hooks and may differ from it"]
    from torch.nn.modules import module as torch_module

    hooking = [n or type(model).__name__ for n, m in model.named_modules()
               if m._backward_hooks or m._backward_pre_hooks]
    if getattr(torch_module, "_global_backward_hooks", None) or getattr(torch_module, "_global_backward_pre_hooks",
                                                                         None):
        hooking.append("every module: register_module_full_backward_hook")
    if hooking:  # (a hook that halved the gradient failed the parameters, nothing said of it: a fresh-eyes audit)
        notes.append(f"{plural(len(hooking), 'module')} ({', '.join(hooking[:4])}{', ...' if len(hooking) > 4 else ''})"
                     f" {'carries' if len(hooking) == 1 else 'carry'} backward hooks (register_full_backward_hook, "
                     "register_full_backward_pre_hook): they run in the checked backward, and a gradient they change "
                     "is no longer the loss's, so a difference found there may be theirs")
    owners = {n: model.get_submodule(n.rpartition(".")[0]) for n in names}
    notes += _padding_notes(model, params, (args, forward_kwargs))

    buffers = dict(model.named_buffers())
    frozen = {n: p for n, p in model.named_parameters() if not p.requires_grad}
    own = {p.dtype for p in params.values()}  # the parameters' own dtypes (float32 for a float32 model)

    def private(t: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
        if dtype is not None and t.is_floating_point() and t.dtype != dtype:
            return t.detach().to(dtype).requires_grad_(t.requires_grad)  # (a copy)
        return t.detach().clone().requires_grad_(t.requires_grad)

    first = [True]  # (emptied by the first call)

    def fn(*values: torch.Tensor) -> Any:
        # fresh copies of the buffers at every evaluation: batch norm in train() mode updates its running
        # statistics in place, and neither the model nor the next evaluation may see that; of the inputs and
        # keyword tensors too (a first ReLU(inplace=True) writes to its input: the caller's tensor doubled at
        # every evaluation, and the check saw a different input each time). Where the check runs the parameters
        # in float64 (a float32 or bfloat16 model), the model runs as model.double() would, on its inputs in
        # float64: its floating buffers, frozen parameters, inputs and keyword tensors too (before, the forward
        # failed on float != double and the check fell back to float32 evidence, which passed a 0.3% bug)
        dtype = values[0].dtype if values and values[0].is_floating_point() and values[0].dtype not in own else None
        state = {**{n: private(b, dtype) for n, b in buffers.items()},
                 **({n: private(p, dtype) for n, p in frozen.items()} if dtype is not None else {}),
                 **dict(zip(names, values))}
        positional, named = tree_map_only(torch.Tensor, lambda t: private(t, dtype), (args, forward_kwargs))
        # at the first call, a parameter the forward writes in place is named with its cause (the check of the
        # function's inputs after that call would say it in general terms). Only a write that changes a value: the
        # version counter alone also moves where nothing changed (Embedding(max_norm=100) renormalizes every row it
        # looks up, in place, whatever their norms)
        watch = [(n, v, v._version, v.detach().clone()) for n, v in zip(names, values)] if first else []
        first.clear()
        out = torch.func.functional_call(model, state, positional, named)
        for n, v, version, before in watch:
            if v._version != version and not torch.equal(v.detach(), before):
                raise InputMutated(_mutated_parameter(n, owners[n]))
        return loss_fn(out) if loss_fn is not None else out

    fn._gradaudit_private_buffers = True  # type: ignore[attr-defined]  # (its buffers are private already)
    generators = _argument_generators(tree_leaves((args, forward_kwargs)))
    if generators:  # a forward that takes a torch.Generator: every evaluation starts it from its state, as ga.check
        fn = _from_their_states(fn, generators)
        fn._gradaudit_private_buffers = True  # type: ignore[attr-defined]
        notes.append(_generators_note(generators, "the forward"))
    tensors = tuple(p.detach().clone().requires_grad_(True) for p in params.values())
    known = ("tolerance", "forward_ad", "order", "expected", "nondet_tol", "name", "timeout")
    unknown = sorted(set(options) - set(known))
    _refuse_unknown({k: options[k] for k in unknown}, "ga.check_module",
                    "loss_fn, mode, seed, kwargs (for the forward), tolerance, forward_ad, order, expected, "
                    "nondet_tol, name and timeout")
    tolerance, nondet_tol = options.get("tolerance"), options.get("nondet_tol")
    forward_ad, order, name = options.get("forward_ad", False), plain(options.get("order", 1)), options.get("name")
    seed = plain(seed)
    if options.get("timeout") is not None:
        options["timeout"] = plain(options["timeout"])
    _validate(model, mode, order, seed, tolerance, nondet_tol, forward_ad, name, options.get("timeout"))
    who = describe(model)
    call = ("ga.check_module(model, inputs" + (", loss_fn" if loss_fn is not None else "")
            + (", kwargs=kwargs" if forward_kwargs else ""))
    extra = {k: v for k, v in {**_options(mode, seed, forward_ad, order), "tolerance": tolerance,
                                "nondet_tol": nondet_tol, "expected": options.get("expected"), "name": name,
                                "timeout": options.get("timeout")}.items() if v is not None}
    written = {k: literal(v) for k, v in extra.items()}  # (every option that can change the verdict)
    repro = (call + "".join(f", {k}={k if v is None else v}" for k, v in written.items()) + f")  # model: {who.name}"
             + "".join(f"; {k}: as given" for k, v in written.items() if v is None))
    # every module's own parameters and buffers, as objects: functional_call swaps them out and back, and a swap cut
    # short (timeout='s alarm lands anywhere: 5 of 30 timed-out checks of a 60-layer model left it holding the
    # check's private float64 copies, .grad and requires_grad gone) is undone here, once the check has ended
    # and their plain attributes: a forward that caches a tensor there (a causal mask built at the input's dtype on
    # first use) kept the check's float64 one, and the float32 model's next forward raised "expected scalar type
    # Double but found Float" (a fresh-eyes audit); every attribute the check's forwards bound is put back
    owned = [(m, {k: dict(v) for k, v in m.__dict__.items() if _restorable(k, v)}, dict(m.__dict__))
             for m in model.modules()]
    try:
        return _check(fn, tensors, who=who, repro=repro, mode=mode, tolerance=tolerance, forward_ad=forward_ad,
                      order=order, seed=seed, names=names, expected=options.get("expected"), nondet_tol=nondet_tol,
                      name=name or f"{who.name} parameters", timeout=options.get("timeout"), notes=notes)
    except SpecError as exc:
        if exc.field != "fn":
            raise
        # what "the function" returned is the model's output (or loss_fn's): said so, with check_module's own fix
        whose = "loss_fn" if loss_fn is not None else "the model's forward"
        fix = (" With a model whose output is not tensors (a dataclass, say), pass loss_fn= that takes it to the "
               "tensor(s) to check, e.g. loss_fn=lambda out: out.logits.sum()." if loss_fn is None else "")
        raise SpecError(exc.bare_message.replace("the function returned", f"{whose} returned", 1) + fix,
                        field="loss_fn" if loss_fn is not None else "model") from None
    finally:
        _restore_modules(owned)


def _padding_notes(model: Any, params: Mapping[str, Any], given: Any) -> list[str]:
    """A note per checked nn.Embedding weight with a padding_idx the integer inputs hold: torch gives that row no
    gradient by design (the forward reads it; training must not move it), so its entries fail against finite
    differences, as in gradcheck; a correct model that pads its batches FAILED with nothing said (a fresh-eyes
    audit)."""
    import torch
    from torch.utils._pytree import tree_leaves

    indices = [t for t in tree_leaves(given) if torch.is_tensor(t) and not t.is_floating_point()
               and not t.is_complex() and t.dtype != torch.bool]
    notes = []
    for name, module in model.named_modules():
        pad = getattr(module, "padding_idx", None)
        weight = f"{name}.weight" if name else "weight"
        if (isinstance(module, torch.nn.Embedding) and pad is not None  # (EmbeddingBag leaves padding out of the bag)
                and weight in params and any(bool((t == pad).any()) for t in indices if t.numel())):
            notes.append(f"'{weight}': {type(module).__name__}(padding_idx={pad}) gives row {pad} no gradient by "
                         f"design (the forward still reads it, so finite differences see it), and the inputs hold "
                         f"index {pad}: that row's entries fail here, as they do in gradcheck. Check without the "
                         "padding index in the inputs, or with padding_idx=None")
    return notes


def _mutated_parameter(name: str, owner: Any) -> str:
    """What to say where the model's forward writes to its parameter *name* (of module *owner*) in place."""
    import torch

    why = ""
    if isinstance(owner, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and owner.max_norm is not None:
        why = (f" ({type(owner).__name__}(max_norm={owner.max_norm:g}) renormalizes the rows it looks up in place, "
               "under no_grad, at every forward)")
    return (f"the model's forward changes its parameter '{name}' in place{why}, so every evaluation sees different "
            "parameters and the gradient at them is not defined (autograd does not see the change either). Check "
            "a copy of the model without it" + (" (max_norm=None), at the parameters the renormalization leaves"
                                                if why else " (the write moved out of the forward)")
            + "; the caller's model is untouched")


def _restorable(name: str, value: Any) -> bool:
    """A module's containers that a check puts back by their contents (the same dict objects): its parameters,
    buffers and submodules, and its hook dicts."""
    return isinstance(value, dict) and (name in ("_parameters", "_buffers", "_modules") or (
        name.startswith("_") and name.endswith(("hooks", "hooks_with_kwargs", "hooks_always_called"))))


def _restore_modules(held: list[tuple[Any, dict[str, dict[str, Any]], dict[str, Any]]]) -> None:
    """Put back every module as it was: its parameters, buffers, submodules and hooks (the same objects, in their
    order) where a check left others in their place, and its plain attributes (each bound to the object it was bound
    to; those the check's forwards added removed). All of them together, so that a module's state stays consistent:
    a head built on first use (self.head = nn.Linear(...) where it was None) goes with its attribute, a forward hook
    installed once behind a flag with the flag (a review: restoring the attributes alone left head None beside a
    registered Linear, and one hook more per check)."""
    for module, containers, attributes in held:
        now = module.__dict__
        for k in [k for k in now if k not in attributes]:
            del now[k]
        for k, v in attributes.items():
            if now.get(k, attributes) is not v:
                now[k] = v
        for k, saved in containers.items():
            own = now[k]
            if own.keys() != saved.keys() or any(own[x] is not v for x, v in saved.items()):
                own.clear()
                own.update(saved)


__all__ = ["CheckResult", "assert_gradients", "check", "check_module"]
