"""Evidence for a ledger expectation, one channel at a time, each from its own fresh forward on
fresh leaves: ``.grad`` stored by ``backward()``, values returned by ``torch.autograd.grad``, and
finite differences (vectorized across elements on the evaluation substrate). Channels gather;
they never judge (that is :mod:`gradaudit.judge`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import EvaluationError, said
from .evaluate import (
    Problem,
    batched_outputs,
    halving_steps,
    numeric_columns,
    on_cpu,
    ridders_columns,
    slopes,
    steps,
    unit_rows,
)
from .numeric import CS_STEP, RIDDERS_BASE, RIDDERS_COLUMNS, taylor_orders
from .spec import Expectation

if TYPE_CHECKING:
    import torch


@dataclass
class Gathered:
    """What one channel observed: a gradient (or None) per input, error bounds where the scheme has
    them, facts about how, and (numeric channels) ``slopes(name, cols)`` to examine suspected kinks."""

    grads: dict[str, torch.Tensor | None] = field(default_factory=dict)
    bounds: dict[str, torch.Tensor | None] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    slopes: Callable[[str, torch.Tensor], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] | None = None


def scalar_output(value: Any) -> torch.Tensor:
    """Return *value* as a 0-d tensor, or raise ValueError saying how to reduce it."""
    import torch

    if not isinstance(value, torch.Tensor):
        raise ValueError(f"the function returned {type(value).__name__}, not a tensor.")
    if value.numel() != 1:
        raise ValueError(f"the function returns shape {tuple(value.shape)}, but a gradient check "
                         "of an expectation needs a scalar output; reduce it, e.g. sum(...) or "
                         "mean(...).")
    return value.reshape(())


def finite_output(out: Any, tensors: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Return the scalar output, or raise ValueError if it is not finite."""
    import torch

    value = scalar_output(out)
    if not bool(torch.isfinite(value.detach())):
        at = ", ".join(f"{n}={_short(t)}" for n, t in tensors.items())
        raise ValueError(f"the function's output is {float(value.detach())} at {at}: a gradient there is "
                         "meaningless. Choose inputs inside the function's domain (log and sqrt "
                         "need positive values, division a non-zero divisor).")
    return value


def _short(t: torch.Tensor) -> str:
    return repr(t.detach().item()) if t.numel() == 1 else f"<{tuple(t.shape)} tensor>"


def backward(check: Expectation) -> Gathered:
    """Run the check's protocol (default: forward, backward) and read ``.grad``."""
    leaves = {n: s.tensor() for n, s in check.inputs.items()}
    out = None
    for step in check.protocol:
        if step == "forward":
            out = finite_output(check.call(leaves), leaves)
        elif step in ("backward", "backward_retain"):
            assert out is not None  # protocols start with forward (validated in spec)
            out.backward(retain_graph=step == "backward_retain")
        elif step == "reset_none":
            for n in check.grad_inputs:
                leaves[n].grad = None
        elif step == "reset_zero":
            for n in check.grad_inputs:
                g = leaves[n].grad
                if g is not None:
                    g.zero_()
    return Gathered({n: _detached(leaves[n].grad) for n in check.grad_inputs},
                    info={"protocol": list(check.protocol), "grad_before": None,
                          "is_leaf": {n: leaves[n].is_leaf for n in check.grad_inputs}})


def autograd_grad(check: Expectation) -> Gathered:
    """One fresh forward, then ``torch.autograd.grad``; ``.grad`` must stay None."""
    import torch

    leaves = {n: s.tensor() for n, s in check.inputs.items()}
    out = finite_output(check.call(leaves), leaves)
    wrt = [leaves[n] for n in check.grad_inputs]
    returned = torch.autograd.grad(out, wrt, allow_unused=True)
    return Gathered({n: _detached(g) for n, g in zip(check.grad_inputs, returned)},
                    info={"protocol": ["forward", "autograd.grad"],
                          "stored_after_return": {n: leaves[n].grad is not None for n in check.grad_inputs}})


def numeric_problem(check: Expectation) -> tuple[Problem, str | None]:
    """The check as a Problem in float64 (or in the inputs' own dtype when the function refuses
    float64, with the note that says so); the output is checked finite at the point only."""
    import torch

    names = list(check.inputs)
    specs = [check.inputs[n] for n in names]

    def fn(*ts: torch.Tensor) -> torch.Tensor:
        return scalar_output(check.call(dict(zip(names, ts))))

    diff = [i for i, s in enumerate(specs) if s.requires_grad]
    note = None
    tensors = [s.tensor(requires_grad=False, dtype="float64" if s.dtype in ("float32", "float16", "bfloat16")
                        else None) for s in specs]
    # the evidence on the CPU, each evaluation on the inputs' own device (Problem.devices)
    tensors, devices = on_cpu(tensors)
    problem = Problem(fn, tensors, names, diff, devices=devices)

    def first() -> torch.Tensor:  # the user's exception itself, as the other channels raise it
        try:
            with torch.no_grad():
                (value,) = problem.call(*tensors)
        except EvaluationError as exc:
            raise exc.original from None
        return finite_output(value, dict(zip(names, tensors)))

    try:
        out = first()
    except Exception as exc:  # fall back to the inputs' own precision, and say so
        native = [s.tensor(requires_grad=False) for s in specs]
        if all(a.dtype == b.dtype for a, b in zip(native, tensors)):
            raise
        problem.inputs = tensors = on_cpu(native)[0]
        out = first()
        note = f"the function failed in float64 ({type(exc).__name__}: {exc}); evidence in the inputs' own dtype"
    problem.outputs = [out.detach()]
    return problem, note


def finite_difference(check: Expectation) -> Gathered:
    """The numeric gradient of every element by the check's scheme (Ridders unless chosen), batched."""
    import torch

    problem, note = numeric_problem(check)
    scheme = check.numeric_scheme
    ev = Gathered(info={"per_input": {}, "fallback": note})
    for j in problem.diff:
        name = problem.names[j]
        x = problem.inputs[j]
        cols = torch.arange(x.numel())
        info: dict[str, Any] = {}
        used = scheme
        if scheme == "complex_step":
            value, why = _complex_step(problem, j, cols, info)
            if value is None:
                used, info["fallback"] = "ridders", f"complex step unavailable ({why}); Ridders used instead"
            else:
                ev.grads[name] = value.reshape(x.shape)
                ev.bounds[name] = (4 * torch.finfo(x.dtype).eps * value.abs()).reshape(x.shape)
                info.update(step=[CS_STEP] * x.numel(), step_rule="h = 1e-20 (imaginary)", evaluations=1)
        if used == "ridders":
            ((value, bound),) = ridders_columns(problem, j, cols, info)
            ev.grads[name], ev.bounds[name] = value.reshape(x.shape), bound.reshape(x.shape)
            info.update(step=halving_steps(x, RIDDERS_BASE, RIDDERS_COLUMNS).reshape(-1).tolist(),
                        evaluations=2 * RIDDERS_COLUMNS,
                        step_rule=f"Ridders tableau from h0 = {RIDDERS_BASE:g} * max(1, |x|), halving per column "
                                  f"({RIDDERS_COLUMNS} columns)")
        elif used in ("central", "forward", "backward"):
            value, h = _simple(problem, j, cols, used, check.step, info)
            ev.grads[name], ev.bounds[name] = value.reshape(x.shape), None
            info.update(step=h.tolist(), step_rule=_rule(used, check.step))
        info.pop("evaluation", None)
        info.pop("largest_chunk", None)
        ev.info["per_input"][name] = {"scheme": used, "dtype": str(x.dtype).removeprefix("torch."),
                                      "device": problem.device_of(j),
                                      "f": float(problem.outputs[0]), **info}

    def side_slopes(name: str, cols: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        ((left, right, noise, _),) = slopes(problem, problem.names.index(name), cols, {})
        return left.reshape(-1), right.reshape(-1), noise.reshape(-1)

    ev.slopes = side_slopes
    return ev


def _simple(problem: Problem, j: int, cols: torch.Tensor, scheme: str, step: float | None,
            info: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """Central or one-sided differences with a chosen step, or the scheme's rule per element."""
    import torch

    x = problem.inputs[j]
    eps = torch.finfo(x.dtype).eps
    base = step if step is not None else eps ** (1 / 3 if scheme == "central" else 1 / 2)
    h = steps(x, base).reshape(-1) if step is None else ((x.detach() + step) - x.detach()).reshape(-1)
    if scheme == "central":
        (value,) = numeric_columns(problem, j, unit_rows(x, cols), h[cols], info)
        info["evaluations"] = 2
        return value.reshape(-1), h
    sign = 1.0 if scheme == "forward" else -1.0
    batch = x.detach().reshape(1, -1).repeat(len(cols), 1)
    batch[torch.arange(len(cols)), cols] += sign * h[cols]
    with torch.no_grad():
        (out,) = batched_outputs(problem, j, batch.reshape(len(cols), *x.shape), info)
    f0 = problem.outputs[0].to(torch.float64)
    value = sign * (out.reshape(-1).to(torch.float64) - f0) / h[cols].to(torch.float64)
    info["evaluations"] = 1
    return value, h


def _complex_step(problem: Problem, j: int, cols: torch.Tensor, info: dict[str, Any]
                  ) -> tuple[torch.Tensor | None, str]:
    """Im f(x + i h e_c) / h for every column, or None and why the function refuses complex input."""
    import torch

    x = problem.inputs[j]
    ctype = torch.complex128 if x.dtype == torch.float64 else torch.complex64
    batch = x.detach().to(ctype).reshape(1, -1).repeat(len(cols), 1)
    batch[torch.arange(len(cols)), cols] += complex(0.0, CS_STEP)
    moved = Problem(problem.fn, [t.to(ctype) if i == j else t for i, t in enumerate(problem.inputs)],
                    problem.names, problem.diff, outputs=problem.outputs, devices=problem.devices)
    try:
        with torch.no_grad():
            (out,) = batched_outputs(moved, j, batch.reshape(len(cols), *x.shape), info)
    except EvaluationError as exc:
        return None, f"{type(exc.original).__name__}: {said(exc.original)}"
    if not out.is_complex():
        return None, "the function returns a real result for complex input, so the imaginary part is lost"
    return out.imag.reshape(-1).to(torch.float64) / CS_STEP, ""


def _rule(scheme: str, step: float | None) -> str:
    if step is not None:
        return f"chosen: h = {step:g}"
    return "h = cbrt(eps) * max(1, |x|)" if scheme == "central" else "h = sqrt(eps) * max(1, |x|)"


def taylor(check: Expectation) -> Gathered:
    """Taylor remainders of the *expected* gradient along a seeded random direction, per input."""
    problem, note = numeric_problem(check)
    ev = Gathered(info={"per_input": {}, "fallback": note})
    for j in problem.diff:
        name = problem.names[j]
        x = problem.inputs[j]

        def along(t: torch.Tensor, j: int = j) -> torch.Tensor:
            return problem.call(*problem.with_input(j, t))[0]

        h0 = 1e-4 * max(1.0, float(x.abs().max()) if x.numel() else 1.0)
        orders, remainders = taylor_orders(along, x, check.expected_tensor(name), h0=h0)
        ev.info["per_input"][name] = {"orders": orders, "remainders": remainders, "h0": h0,
                                      "direction": "uniform [0.5, 1.5) per element, seed 0", "halvings": 4}
        ev.grads[name] = None
    return ev


def _detached(g: torch.Tensor | None) -> torch.Tensor | None:
    return None if g is None else g.detach().clone()


CHANNELS: dict[str, Callable[[Expectation], Gathered]] = {
    "backward": backward, "autograd.grad": autograd_grad, "finite_difference": finite_difference, "taylor": taylor}
STORED_OR_RETURNED = {"backward": "stored", "autograd.grad": "returned", "finite_difference": "estimated",
                      "taylor": "remainder"}
