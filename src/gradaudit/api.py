"""The engineer's API: check any function, custom autograd.Function or nn.Module.

>>> import torch, gradaudit as ga
>>> x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
>>> res = ga.check(lambda x: torch.sin(x) * x, (x,))
>>> res.verdict, res.ok, res.mismatches
('pass', True, [])
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .compare import unravel
from .directional import directional
from .errors import GradientMismatch, SpecError
from .jacobian import Mismatch, Problem, classify_kinks, compare_blocks, full_blocks
from .record import Record
from .spec import Tolerance, source_of

Mode = Literal["auto", "full", "directional"]
FULL_LIMIT = 1_000_000  # auto: full mode while the dense Jacobian has at most this many entries
SHOWN = 5


@dataclass
class CheckResult:
    """What ``ga.check`` found: a verdict, located mismatches and the records behind them."""

    verdict: str
    records: list[Record]
    mismatches: list[Mismatch]
    name: str
    mode: str
    info: dict[str, Any] = field(default_factory=dict)
    repro: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict == "pass"

    def report(self) -> str:
        """The readable report: never whole Jacobians, at most five worst entries."""
        lines = [f"gradaudit.check {self.name}: {self.verdict.upper()} (mode {self.mode}; "
                 + "; ".join(f"{k} {v}" for k, v in self.info.items() if k in _SHOWN_INFO) + ")"]
        if "numeric" in self.info:  # full mode's evidence when it is not plain central differences
            lines.append(f"evidence: {self.info['numeric']}")
        failing = [m for m in self.mismatches if m.kind != "kink"]
        kinks = [m for m in self.mismatches if m.kind == "kink"]
        total = self.info.get("entries")
        if failing and total:
            pct = 100.0 * len(failing) / total
            lines.append(f"Mismatched elements: {len(failing)} / {total} ({pct:.2g}%)")
        valued = [m for m in failing if m.autograd is not None and m.numeric is not None]
        if valued:
            worst_abs = max(valued, key=lambda m: m.abs)
            worst_rel = max(valued, key=lambda m: m.rel)
            lines.append(f"Greatest absolute difference: {worst_abs.abs:.6g} at {_where(worst_abs)}")
            lines.append(f"Greatest relative difference: {worst_rel.rel:.6g} at {_where(worst_rel)}")
        for m in failing:
            if m.kind != "value" and m.note:
                lines.append(f"{m.kind}: {m.note}")
        if valued:
            lines.append("input | element | output | output element | autograd | numeric | abs | rel")
            for m in sorted(valued, key=lambda m: -m.abs)[:SHOWN]:
                lines.append(f"{m.input_name} | {_idx(m.element)} | {_idx_out(m.output)} | {_idx(m.output_element)} | "
                             f"{m.autograd:.6g} | {m.numeric:.6g} | {m.abs:.3g} | {m.rel:.3g}")
            if len(valued) > SHOWN:
                lines.append(f"… {len(valued) - SHOWN} more: see result.mismatches")
        for m in kinks:
            lines.append(f"inconclusive at {_where(m)}: kink, {m.note}")
        if self.repro and not self.ok:
            lines.append(f"re-run: {self.repro}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()

    def __rich__(self) -> str:
        from rich.markup import escape

        return escape(self.report())


_SHOWN_INFO = ("evaluation", "largest_chunk", "analytic", "structure", "evaluations", "backward_rows",
               "rechecked_columns", "elapsed_s")


def _idx(index: tuple[int, ...] | None) -> str:
    return "all" if index is None else "(" + ", ".join(map(str, index)) + ("," if len(index) == 1 else "") + ")"


def _idx_out(k: int | None) -> str:
    return "v-weighted" if k is None else str(k)


def _where(m: Mismatch) -> str:
    text = f"input {m.input} '{m.input_name}' element {_idx(m.element)}"
    if m.output is not None:
        text += f", output {m.output} element {_idx(m.output_element)}"
    return text


def check(fn: Callable[..., Any], inputs: Sequence[Any] | Any, *, mode: Mode = "auto", forward_ad: bool = False,
          order: int = 1, seed: int = 0, names: Sequence[str] | None = None, expected: Sequence[Any] | None = None,
          nondet_tol: Tolerance | None = None, name: str | None = None) -> CheckResult:
    """Check the backward of *fn* at *inputs* (those with ``requires_grad=True``).

    ``mode="full"`` compares every Jacobian entry and locates each mismatch; ``"directional"``
    compares v^T J u per input and localizes a failure by bisection; ``"auto"`` picks full
    while the Jacobian has at most 1e6 entries. Randomness comes only from *seed*.
    """
    import torch

    start = time.perf_counter()
    if mode not in ("auto", "full", "directional"):
        raise SpecError(f"mode must be 'auto', 'full' or 'directional'; got {mode!r}.", field="mode")
    if order not in (1, 2):
        raise SpecError(f"order must be 1 or 2; got {order!r}.", field="order")
    problem = _problem(fn, inputs, names)
    label = str(name or getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "function"))
    gen = torch.Generator().manual_seed(seed)
    n = sum(problem.inputs[j].numel() for j in problem.diff)
    m = sum(o.numel() for o in problem.outputs)
    chosen = mode if mode != "auto" else ("full" if n * m <= FULL_LIMIT else "directional")
    info: dict[str, Any] = {"dtype": str(problem.inputs[problem.diff[0]].dtype).removeprefix("torch.")}
    if problem.notes:
        info["notes"] = problem.notes
    # random, non-unit output weights of either sign, |v| in [0.5, 1.5): a backward must use grad_output
    vs = [(lambda s: s.sign() * (0.5 + s.abs()))(2 * torch.rand(o.shape, generator=gen, dtype=torch.float64) - 1)
          for o in problem.outputs]
    mismatches, first = _metadata(problem, inputs, nondet_tol, vs)
    problem.graph = None  # release the first forward's saved tensors before the numeric work
    same_precision = all(problem.inputs[j].dtype == _as_list(inputs)[j].dtype for j in problem.diff)
    if chosen == "full":
        blocks = full_blocks(problem, gen, info)
        found, info["entries"] = compare_blocks(problem, blocks)
        classify_kinks(problem, found)
        mismatches += found
    else:
        found, comparisons = directional(problem, gen, info, vs=vs, grads=first if same_precision else None)
        info["entries"] = sum(problem.inputs[j].numel() for j in problem.diff)
        info["directional"] = comparisons
        mismatches += found
    if forward_ad:
        mismatches += _forward_ad(problem, gen, info)
    if order == 2:
        mismatches += _second_order(problem, gen, info)
    if expected is not None:
        mismatches += _expected(problem, expected)
    info["elapsed_s"] = round(time.perf_counter() - start, 4)
    real = [mm for mm in mismatches if mm.kind != "kink"]
    verdict = "fail" if real else "inconclusive" if mismatches else "pass"
    result = CheckResult(verdict, [], mismatches, label, chosen, info,
                         repro=f"ga.check({label}, inputs, mode={chosen!r}, seed={seed})")
    result.records = _records(result, problem, fn)
    return result


def _as_list(inputs: Sequence[Any] | Any) -> list[Any]:
    return list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]


def _problem(fn: Callable[..., Any], inputs: Sequence[Any] | Any, names: Sequence[str] | None) -> Problem:
    import torch

    xs = _as_list(inputs)
    if not xs or not all(torch.is_tensor(x) for x in xs):
        raise SpecError("inputs must be a tensor or a tuple of tensors, e.g. (x,) with "
                        "x = torch.randn(3, dtype=torch.float64, requires_grad=True).", field="inputs")
    diff = [i for i, x in enumerate(xs) if x.requires_grad]
    if not diff:
        raise SpecError("no input has requires_grad=True, so there is no gradient to check; create the inputs "
                        "with requires_grad=True.", field="inputs")
    for i in diff:
        if not xs[i].is_floating_point():
            raise SpecError(f"input {i} has dtype {xs[i].dtype}; gradients exist only for floating-point tensors.",
                            field="inputs")
    labels = list(names) if names is not None else _arg_names(fn, len(xs))
    if len(labels) != len(xs):
        raise SpecError(f"{len(labels)} names for {len(xs)} inputs.", field="names")
    promoted = [x.detach().to(torch.float64) if x.is_floating_point() else x.detach() for x in xs]
    problem = Problem(fn, promoted, labels, diff)
    try:
        leaves = [x.requires_grad_(i in diff) for i, x in enumerate(promoted)]
        start = time.perf_counter()
        outs = problem.call(*leaves)  # with its graph: the metadata check's backward reuses it
        problem.forward_s = time.perf_counter() - start
        problem.outputs = [o.detach() for o in outs]
        problem.inputs = [x.detach() for x in leaves]
        problem.graph = (leaves, outs)
    except Exception as exc:  # the function refuses float64: check in the inputs' own precision, and say so
        problem.inputs = [x.detach() for x in xs]
        problem.outputs = [o.detach() for o in problem.call(*problem.inputs)]
        problem.notes.append(f"the function failed in float64 ({type(exc).__name__}: {exc}); "
                             "checked in the inputs' own dtype")
    if not problem.outputs or not all(torch.is_tensor(o) and o.is_floating_point() for o in problem.outputs):
        raise SpecError("the function must return a floating-point tensor or a tuple of them.", field="fn")
    return problem


def _arg_names(fn: Callable[..., Any], count: int) -> list[str]:
    import inspect

    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return params[:count] if len(params) >= count else [f"input{i}" for i in range(count)]


def _metadata(problem: Problem, inputs: Any, nondet_tol: Tolerance | None, vs: list[Any]
              ) -> tuple[list[Mismatch], tuple[Any, ...]]:
    """dtype/shape/device of gradients equal their inputs'; a second backward through the same graph
    gives the same gradients. Returns the mismatches and the first backward's gradients (for *vs*)."""
    import torch

    originals = _as_list(inputs)
    if problem.graph is not None and all(x.dtype == originals[i].dtype for i, x in enumerate(problem.graph[0])):
        xs, outs = problem.graph  # the inputs were float64 already: reuse the first forward's graph
    else:
        xs = [x.detach().requires_grad_(x.requires_grad) for x in originals]
        outs = problem.call(*xs)
    cot = [v.to(o.dtype) for v, o in zip(vs, outs)]
    wrt = [xs[i] for i in problem.diff]
    runs = [torch.autograd.grad(outs, wrt, cot, allow_unused=True, retain_graph=True),
            torch.autograd.grad(outs, wrt, cot, allow_unused=True)]
    found: list[Mismatch] = []
    for pos, j in enumerate(problem.diff):
        g, x, name = runs[0][pos], xs[j], problem.names[j]
        if g is None:
            continue  # reported by the value comparison when the numeric gradient is non-zero
        for what, got, want in (("dtype", g.dtype, x.dtype), ("shape", tuple(g.shape), tuple(x.shape)),
                                ("device", g.device, x.device)):
            if got != want:
                found.append(Mismatch(j, name, None, None, None, None, None, kind="metadata",
                                      note=f"the gradient of '{name}' has {what} {got}, its input {want}"))
        g2 = runs[1][pos]
        if g2 is None or g.shape != g2.shape:
            continue
        diff = float((g - g2).abs().max()) if g.numel() else 0.0
        limit = 0.0 if nondet_tol is None else nondet_tol.atol
        if diff > limit:
            found.append(Mismatch(j, name, None, None, None, None, None, kind="nondeterministic",
                                  note=f"two backward passes on the same inputs differ by up to {diff:.3g}"
                                       + ("" if nondet_tol is None else f" (allowed {limit:g}: {nondet_tol.why})")
                                       + "; pass nondet_tol=Tolerance(atol, 0, why=...) for a known "
                                         "nondeterministic op"))
    return found, runs[0]


def _forward_ad(problem: Problem, gen: Any, info: dict[str, Any]) -> list[Mismatch]:
    """jvp (forward-mode AD) against the numeric directional derivative, per input."""
    import torch

    from .directional import _ridders_scalar, scalar_batch

    found = []
    for j in problem.diff:
        x = problem.inputs[j]
        u = torch.randn(x.shape, generator=gen, dtype=torch.float64).to(x.dtype)
        try:
            tangents = torch.func.jvp(lambda t, j=j: tuple(problem.call(*problem.with_input(j, t))), (x,), (u,))[1]
        except Exception as exc:
            found.append(Mismatch(j, problem.names[j], None, None, None, None, None, kind="jvp",
                                  note=f"forward-mode AD failed: {type(exc).__name__}: {str(exc).splitlines()[0]}"))
            continue
        for k, tan in enumerate(tangents):
            w = torch.rand(tan.shape, generator=gen, dtype=torch.float64) + 0.5
            analytic = float((tan.to(torch.float64) * w).sum())

            def phi(t: float, j: int = j, k: int = k, w: Any = w, u: Any = u, x: Any = x) -> float:
                with torch.no_grad():
                    return float((problem.call(*problem.with_input(j, x + t * u))[k].to(torch.float64) * w).sum())

            numeric, err, _ = _ridders_scalar(scalar_batch(phi), 1e-2 * max(1.0, float(x.abs().max())))
            if abs(analytic - numeric) > 10 * err + 1e-7 * max(1.0, abs(numeric)):
                found.append(Mismatch(j, problem.names[j], None, k, None, analytic, numeric, kind="jvp",
                                      note="forward-mode jvp disagrees with the numeric directional derivative"))
    info["forward_ad"] = "checked"
    return found


def _second_order(problem: Problem, gen: Any, info: dict[str, Any]) -> list[Mismatch]:
    """Double backward: the gradient of G(x) = v^T J(x) w.r.t. x against G's numeric derivative."""
    import torch

    from .directional import _ridders_scalar, scalar_batch

    vs = [torch.rand(o.shape, generator=gen, dtype=torch.float64).to(o.dtype) + 0.5 for o in problem.outputs]

    def grad_of(xs: list[Any], create: bool) -> tuple[Any, ...]:
        outs = problem.call(*xs)
        return torch.autograd.grad(outs, [xs[i] for i in problem.diff], vs, create_graph=create, allow_unused=True)

    found = []
    xs = [x.detach().requires_grad_(i in problem.diff) for i, x in enumerate(problem.inputs)]
    first = grad_of(xs, True)
    ws = [None if g is None else torch.rand(g.shape, generator=gen, dtype=torch.float64).to(g.dtype) + 0.5
          for g in first]
    scalar = sum((g * w).sum() for g, w in zip(first, ws) if g is not None and g.requires_grad)
    # a first derivative with no graph back to the inputs claims a second derivative of zero
    second = (torch.autograd.grad(scalar, [xs[i] for i in problem.diff], allow_unused=True)
              if torch.is_tensor(scalar) else [None] * len(problem.diff))
    for pos, j in enumerate(problem.diff):
        x = problem.inputs[j]
        u = torch.randn(x.shape, generator=gen, dtype=torch.float64).to(x.dtype)
        d2 = second[pos]
        analytic = 0.0 if d2 is None else float((d2 * u).sum())

        def phi(t: float, j: int = j, u: Any = u, x: Any = x) -> float:
            shifted = problem.with_input(j, x + t * u)
            moved = [y.detach().requires_grad_(i in problem.diff) for i, y in enumerate(shifted)]
            gs = grad_of(moved, False)
            return float(sum((g * w).sum() for g, w in zip(gs, ws) if g is not None and w is not None))

        numeric, err, _ = _ridders_scalar(scalar_batch(phi), 1e-2 * max(1.0, float(x.abs().max())))
        if abs(analytic - numeric) > 10 * err + 1e-7 * max(1.0, abs(numeric)):
            found.append(Mismatch(j, problem.names[j], None, None, None, analytic, numeric, kind="second-order",
                                  note="double backward disagrees with the numeric derivative of the gradient"))
    info["order"] = 2
    return found


def _expected(problem: Problem, expected: Sequence[Any]) -> list[Mismatch]:
    """An analytical expectation per checked input (scalar output) against autograd."""
    import torch

    if len(problem.outputs) != 1 or problem.outputs[0].numel() != 1:
        raise SpecError("expected= applies to a function with one scalar output.", field="expected")
    if len(expected) != len(problem.diff):
        raise SpecError(f"expected= has {len(expected)} values for {len(problem.diff)} inputs that require grad.",
                        field="expected")
    xs = [x.detach().requires_grad_(i in problem.diff) for i, x in enumerate(problem.inputs)]
    grads = torch.autograd.grad(problem.call(*xs)[0].reshape(()), [xs[i] for i in problem.diff], allow_unused=True)
    found = []
    for pos, j in enumerate(problem.diff):
        want = torch.as_tensor(expected[pos], dtype=torch.float64).expand(problem.inputs[j].shape)
        got = torch.zeros_like(want) if grads[pos] is None else grads[pos].to(torch.float64)
        bad = (got - want).abs() > 1e-7 + 1e-7 * want.abs()
        for i in bad.reshape(-1).nonzero().flatten().tolist()[:SHOWN]:
            found.append(Mismatch(j, problem.names[j], unravel(i, tuple(want.shape)), 0, (), float(got.reshape(-1)[i]),
                                  None, expected=float(want.reshape(-1)[i]), kind="expected",
                                  note=f"autograd {float(got.reshape(-1)[i]):.6g} vs the expectation "
                                       f"{float(want.reshape(-1)[i]):.6g}"))
    return found


def _records(result: CheckResult, problem: Problem, fn: Callable[..., Any]) -> list[Record]:
    """One record per checked input: the evidence summary, mismatches and verdict (JSON-ready)."""
    records = []
    for j in problem.diff:
        mine = [m for m in result.mismatches if m.input == j]
        real = [m for m in mine if m.kind != "kink"]
        verdict = "fail" if real else "inconclusive" if mine else "pass"
        x = problem.inputs[j]
        expectation = {"suite": "check", "check": result.name, "function": source_of(fn),
                       "inputs": {problem.names[i]: {"value": None, "shape": list(t.shape),
                                                     "dtype": str(t.dtype).removeprefix("torch."),
                                                     "device": str(t.device), "requires_grad": i in problem.diff}
                                  for i, t in enumerate(problem.inputs)},
                       "input": problem.names[j], "analytical_gradient": None, "expected_value": None,
                       "derivation": "autograd's backward against numeric evidence", "method": result.mode,
                       "stored_or_returned": "returned", "protocol": None, "step": None, "scheme": None,
                       "convention": None, "tolerance": None, "expect": "pass", "expect_error": None,
                       "source": result.repro}
        observation = {"observed_gradient": None, "executed": True, "verdict": verdict,
                       "outcome": {"pass": "passed", "fail": "failed", "inconclusive": "inconclusive"}[verdict],
                       "shape": list(x.shape), "dtype": str(x.dtype).removeprefix("torch."), "device": str(x.device),
                       "mismatches": [m.to_dict() for m in mine[:100]], "mismatch_count": len(mine),
                       "evidence": {k: v for k, v in result.info.items() if k != "directional"},
                       "note": "; ".join(m.note for m in mine[:3] if m.note) or None}
        records.append(Record(expectation, observation))
    return records


def assert_gradients(fn: Callable[..., Any], inputs: Sequence[Any] | Any, **kwargs: Any) -> CheckResult:
    """``check`` that raises :class:`GradientMismatch` (an AssertionError) unless the verdict is pass."""
    __tracebackhide__ = True
    result = check(fn, inputs, **kwargs)
    if not result.ok:
        raise GradientMismatch(result.report(), result.records)
    return result


def check_module(model: Any, inputs: Sequence[Any] | Any, loss_fn: Callable[..., Any] | None = None, *,
                 mode: Mode = "auto", seed: int = 0, **kwargs: Any) -> CheckResult:
    """Check the gradients of *model*'s parameters (by name) via ``torch.func.functional_call``.

    With *loss_fn*, the checked function is ``loss_fn(model(*inputs))``; without it, the
    model's output itself. Mismatches name the parameter and element, e.g. ``l1.weight[2, 1]``.
    """
    import torch

    args = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    if not params:
        raise SpecError("the module has no parameters that require grad.", field="model")
    names = list(params)

    def fn(*values: Any) -> Any:
        out = torch.func.functional_call(model, dict(zip(names, values)), args)
        return loss_fn(out) if loss_fn is not None else out

    tensors = tuple(p.detach().clone().requires_grad_(True) for p in params.values())
    label = kwargs.pop("name", None) or f"{type(model).__name__} parameters"
    result = check(fn, tensors, mode=mode, seed=seed, names=names, name=label, **kwargs)
    for m in result.mismatches:
        if m.element is not None:
            m.note = (m.note + "; " if m.note else "") + f"{m.input_name}[{', '.join(map(str, m.element))}]"
    return result


__all__ = ["CheckResult", "Mismatch", "assert_gradients", "check", "check_module"]
