"""Directional checks: v^T J u per input against Ridders along u, from one batched call; a
failure is localized to the input, then to elements by bisection, without building the Jacobian.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .compare import unravel as _unravel
from .jacobian import Mismatch, Problem, batched_outputs
from .numeric import ridders_tableau
from .tolerances import SAFETY

RIDDERS_COLUMNS = 4  # from h0 = 1e-2 * scale: extrapolation error far below rounding (eps|f|/h ~ 2e-13)


def ridders_steps(h0: float) -> list[float]:
    """The tableau's steps h0, h0/2, ...: +h and -h for each, evaluated in one batch."""
    steps = [h0 / 2**c for c in range(RIDDERS_COLUMNS)]
    return [t for h in steps for t in (h, -h)]


def _ridders_scalar(phi_many: Callable[[list[float]], list[float]], h0: float = 1e-2) -> tuple[float, float, int]:
    """Ridders' derivative at 0 of a scalar function, all points evaluated in one batch by
    *phi_many*: (value, error bound including the rounding of the last quotient, evaluations)."""
    ts = ridders_steps(h0)
    values = phi_many(ts)
    scale = max(abs(v) for v in values)
    cols = [(values[2 * c] - values[2 * c + 1]) / (2 * ts[2 * c]) for c in range(RIDDERS_COLUMNS)]
    best, err, used = ridders_tableau(cols)
    return best, err + 2.3e-16 * scale / ts[2 * (used - 1)], len(ts)


def scalar_batch(phi: Callable[[float], float]) -> Callable[[list[float]], list[float]]:
    return lambda ts: [phi(t) for t in ts]


def directional(problem: Problem, gen: Any, info: dict[str, Any], *, vs: list[Any], grads: Any = None,
                localize: bool = True, max_located: int = 10) -> tuple[list[Mismatch], list[dict[str, Any]]]:
    """Compare v^T J_j u_j with Ridders along u_j per input; localize failures by bisection.

    *vs* are the output weights; *grads*, if given, are v^T J already computed at these inputs.
    """
    import torch

    if grads is None:
        xs = [x.detach().requires_grad_(i in problem.diff) for i, x in enumerate(problem.inputs)]
        outs = problem.call(*xs)
        grads = torch.autograd.grad(outs, [xs[i] for i in problem.diff], [v.to(o.dtype) for v, o in zip(vs, outs)],
                                    allow_unused=True)
    evals = [0]

    def phi_for(j: int, u: Any) -> Callable[[list[float]], list[float]]:
        x = problem.inputs[j].detach()

        def phi_many(ts: list[float]) -> list[float]:
            evals[0] += len(ts)
            t = torch.tensor(ts, dtype=torch.float64).reshape(-1, *([1] * x.dim()))
            with torch.no_grad():
                outs = batched_outputs(problem, j, (x + t * u).to(x.dtype), info)
            total = sum((o.to(torch.float64) * v).reshape(len(ts), -1).sum(1) for o, v in zip(outs, vs))
            return [float(value) for value in total]  # type: ignore[union-attr]
        return phi_many

    mismatches: list[Mismatch] = []
    comparisons = []
    for pos, j in enumerate(problem.diff):
        x = problem.inputs[j]
        u = torch.randn(x.shape, generator=gen, dtype=torch.float64)
        u = u / u.norm().clamp_min(1e-300)
        g = grads[pos]
        h0 = 1e-2 * max(1.0, float(x.detach().abs().max()) if x.numel() else 1.0)
        numeric, err, _ = _ridders_scalar(phi_for(j, u), h0)
        analytic = None if g is None else float((g.to(torch.float64) * u).sum())
        allowed = _allowed(err, g, u, numeric)
        ok = analytic is not None and abs(analytic - numeric) <= allowed
        if g is None:
            ok = abs(numeric) <= allowed
        comparisons.append({"input": problem.names[j], "autograd": analytic, "numeric": numeric,
                            "error_bound": err, "allowed": allowed, "ok": ok})
        if ok:
            continue
        if g is None:
            mismatches.append(Mismatch(j, problem.names[j], None, None, None, None, numeric, kind="none-gradient",
                                       note=f"'{problem.names[j]}' requires grad but autograd gives None, while "
                                            f"the numeric directional derivative is {numeric:.6g}"))
            continue
        if not localize:
            mismatches.append(Mismatch(j, problem.names[j], None, None, None, analytic, numeric))
            continue
        mismatches += _bisect(problem, j, g.to(torch.float64), u, phi_for, h0, max_located)
    info["evaluations"] = evals[0]
    return mismatches, comparisons


def _allowed(err: float, g: Any, u: Any, numeric: float) -> float:
    import torch

    eps = torch.finfo(torch.float64).eps
    dot_rounding = 0.0 if g is None else 4 * eps * float((g.to(torch.float64) * u).abs().sum()) * math.sqrt(u.numel())
    return SAFETY * (err + dot_rounding) + 4 * eps * abs(numeric) + 1e-300


Batched = Callable[[list[float]], list[float]]


def _bisect(problem: Problem, j: int, g: Any, u: Any, phi_for: Callable[[int, Any], Batched], h0: float,
            max_located: int) -> list[Mismatch]:
    """Split the perturbed elements in halves, keep the halves that disagree, down to elements."""
    import torch

    flat_u, flat_g = u.reshape(-1), g.reshape(-1)
    pending = [(0, flat_u.numel())]
    located: list[Mismatch] = []
    shape = tuple(problem.inputs[j].shape)
    while pending and len(located) < max_located:
        lo, hi = pending.pop(0)
        mask = torch.zeros_like(flat_u)
        mask[lo:hi] = 1.0
        if hi - lo == 1:  # an element: use the unit direction, report d(v^T f)/dx_i
            e = torch.zeros_like(flat_u)
            e[lo] = 1.0
            sub = e.reshape(u.shape)
            analytic = float(flat_g[lo])
        else:
            sub = (flat_u * mask).reshape(u.shape)
            analytic = float((flat_g * flat_u * mask).sum())
        numeric, err, _ = _ridders_scalar(phi_for(j, sub), h0)
        if abs(analytic - numeric) <= _allowed(err, g.reshape(-1)[lo:hi], flat_u[lo:hi], numeric):
            continue
        if hi - lo == 1:
            located.append(Mismatch(j, problem.names[j], _unravel(lo, shape), None, None, analytic, numeric,
                                    note="v^T J at this element (v: the random output weights)"))
        else:
            mid = (lo + hi) // 2
            pending += [(lo, mid), (mid, hi)]
    if not located:  # the parts agree but the whole did not (cancellation): report the input
        located.append(Mismatch(j, problem.names[j], None, None, None, float((g * u).sum()), None,
                                note="the directional check failed but no single element could be isolated"))
    return located
