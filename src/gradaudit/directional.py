"""Directional checks: v^T J u per input against the numeric derivative along u, from one
batched call; a failure is localized to the input, then to elements by bisection, without
building the Jacobian.

Two stages: one Richardson extrapolation of central differences at h and 2h (4 evaluations,
h near eps^(1/5) where its h^4 truncation meets rounding) accepts when autograd agrees to
within its rounding bound; anything else goes to Ridders' tableau (8 more evaluations, with
its own error estimate), which alone can fail a check.
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
QUICK_STEP = 7e-4  # about eps^(1/5): Richardson's best step in float64 (BENCH_ANCHORS, section 4)
EPS64 = 2.220446049250313e-16

# values of phi at the steps, and the largest 2-norm of the terms summed into them: their
# rounding errors are independent, so eps * that norm is the typical rounding of phi
Batched = Callable[[list[float]], tuple[list[float], float]]


def ridders_steps(h0: float) -> list[float]:
    """The tableau's steps h0, h0/2, ...: +h and -h for each, evaluated in one batch."""
    steps = [h0 / 2**c for c in range(RIDDERS_COLUMNS)]
    return [t for h in steps for t in (h, -h)]


def _ridders_scalar(phi_many: Batched, h0: float = 1e-2) -> tuple[float, float, int]:
    """Ridders' derivative at 0 of a scalar function, all points evaluated in one batch by
    *phi_many*: (value, error bound including the rounding of the last quotient, evaluations)."""
    ts = ridders_steps(h0)
    values, size = phi_many(ts)
    scale = max([size] + [abs(v) for v in values])
    cols = [(values[2 * c] - values[2 * c + 1]) / (2 * ts[2 * c]) for c in range(RIDDERS_COLUMNS)]
    best, err, used = ridders_tableau(cols)
    return best, err + 1.04 * EPS64 * scale / ts[2 * (used - 1)], len(ts)


def scalar_batch(phi: Callable[[float], float]) -> Batched:
    def many(ts: list[float]) -> tuple[list[float], float]:
        values = [phi(t) for t in ts]
        return values, max(abs(v) for v in values)  # phi's terms are not visible: its value stands in
    return many


def judge(phi_many: Batched, analytic: float, scale: float, perturbation: float, dot_rounding: float
          ) -> dict[str, Any]:
    """Compare *analytic* with d phi/dt at 0: the quick Richardson stage, then Ridders.

    *scale* sets the steps (max(1, |x|)); *perturbation* is the rounding the moved inputs add
    to phi (eps |g x|_2); *dot_rounding* bounds the rounding of *analytic*. The quick stage's
    rounding estimate is a typical size, not a worst case: it can only make a check go on to
    Ridders, never fail it.
    """
    h = QUICK_STEP * scale
    values, size = phi_many([h, -h, 2 * h, -2 * h])
    d1 = (values[0] - values[1]) / (2 * h)
    d2 = (values[2] - values[3]) / (4 * h)
    quick = (4 * d1 - d2) / 3
    err = 1.5 * EPS64 * (size + perturbation) / h  # (4 (1/h) + 1/(2h)) / 3 ulps of phi
    allowed = _allowed(err, dot_rounding, quick)
    if abs(analytic - quick) <= allowed:
        return {"numeric": quick, "error_bound": err, "allowed": allowed, "ok": True,
                "scheme": "richardson (h, 2h)", "evaluations": 4}
    numeric, err, used = _ridders_scalar(phi_many, 1e-2 * scale)
    allowed = _allowed(err, dot_rounding, numeric)
    return {"numeric": numeric, "error_bound": err, "allowed": allowed, "ok": abs(analytic - numeric) <= allowed,
            "scheme": "ridders", "evaluations": 4 + used}


def _allowed(err: float, dot_rounding: float, numeric: float) -> float:
    return SAFETY * (err + dot_rounding) + 4 * EPS64 * abs(numeric) + 1e-300


def directional(problem: Problem, gen: Any, info: dict[str, Any], *, vs: list[Any], grads: Any = None,
                localize: bool = True, max_located: int = 10) -> tuple[list[Mismatch], list[dict[str, Any]]]:
    """Compare v^T J_j u_j with the numeric derivative along u_j per input (see ``judge``);
    localize failures by bisection.

    *vs* are the output weights; *grads*, if given, are v^T J already computed at these inputs.
    """
    import torch

    if grads is None:
        xs = [x.detach().requires_grad_(i in problem.diff) for i, x in enumerate(problem.inputs)]
        outs = problem.call(*xs)
        grads = torch.autograd.grad(outs, [xs[i] for i in problem.diff], [v.to(o.dtype) for v, o in zip(vs, outs)],
                                    allow_unused=True)
    evals = [0]

    def phi_for(j: int, u: Any) -> Batched:
        x = problem.inputs[j].detach()

        def phi_many(ts: list[float]) -> tuple[list[float], float]:
            evals[0] += len(ts)
            t = torch.tensor(ts, dtype=torch.float64).reshape(-1, *([1] * x.dim()))
            with torch.no_grad():
                outs = batched_outputs(problem, j, (x + t * u).to(x.dtype), info)
            terms = [(o.to(torch.float64) * v).reshape(len(ts), -1) for o, v in zip(outs, vs)]
            total = sum(term.sum(1) for term in terms)
            size = float(sum(term.square().sum(1) for term in terms).max()) ** 0.5  # type: ignore[union-attr]
            return [float(value) for value in total], size  # type: ignore[union-attr]
        return phi_many

    mismatches: list[Mismatch] = []
    comparisons = []
    for pos, j in enumerate(problem.diff):
        x = problem.inputs[j].detach()
        u = 2 * torch.rand(x.shape, generator=gen, dtype=torch.float64) - 1  # uniform: randn costs 3x more
        u = u / u.norm().clamp_min(1e-300)
        g = None if grads[pos] is None else grads[pos].to(torch.float64)
        scale = max(1.0, float(x.abs().max()) if x.numel() else 1.0)
        analytic = None if g is None else float((g * u).sum())
        verdict = judge(phi_for(j, u), 0.0 if analytic is None else analytic, scale, *_rounding(g, u, x))
        comparisons.append({"input": problem.names[j], "autograd": analytic, **verdict})
        if verdict["ok"]:
            continue
        numeric = verdict["numeric"]
        if g is None:
            mismatches.append(Mismatch(j, problem.names[j], None, None, None, None, numeric, kind="none-gradient",
                                       note=f"'{problem.names[j]}' requires grad but autograd gives None, while "
                                            f"the numeric directional derivative is {numeric:.6g}"))
            continue
        if not localize:
            mismatches.append(Mismatch(j, problem.names[j], None, None, None, analytic, numeric))
            continue
        mismatches += _bisect(problem, j, g, u, phi_for, scale, max_located)
    info["evaluations"] = evals[0]
    return mismatches, comparisons


def _rounding(g: Any, u: Any, x: Any) -> tuple[float, float]:
    """(typical rounding the moved inputs add to phi, bound on the rounding of the dot product g . u)."""
    if g is None:
        return 0.0, 0.0
    perturbation = EPS64 * float((g * x.to(g.dtype)).norm())
    dot = 4 * EPS64 * float((g * u).abs().sum()) * math.sqrt(max(u.numel(), 1))
    return perturbation, dot


def _bisect(problem: Problem, j: int, g: Any, u: Any, phi_for: Callable[[int, Any], Batched], scale: float,
            max_located: int) -> list[Mismatch]:
    """Split the perturbed elements in halves, keep the halves that disagree, down to elements."""
    import torch

    flat_u, flat_g = u.reshape(-1), g.reshape(-1)
    flat_x = problem.inputs[j].detach().reshape(-1)
    pending = [(0, flat_u.numel())]
    located: list[Mismatch] = []
    shape = tuple(problem.inputs[j].shape)
    while pending and len(located) < max_located:
        lo, hi = pending.pop(0)
        part = torch.zeros_like(flat_u)
        if hi - lo == 1:  # an element: use the unit direction, report d(v^T f)/dx_i
            part[lo] = 1.0
        else:
            part[lo:hi] = flat_u[lo:hi]
        analytic = float((flat_g[lo:hi] * part[lo:hi]).sum())  # the slice only: NaN * 0 elsewhere is NaN
        verdict = judge(phi_for(j, part.reshape(u.shape)), analytic, scale,
                        *_rounding(flat_g[lo:hi], part[lo:hi], flat_x[lo:hi]))
        if verdict["ok"]:
            continue
        if hi - lo == 1:
            located.append(Mismatch(j, problem.names[j], _unravel(lo, shape), None, None, analytic,
                                    verdict["numeric"], note="v^T J at this element (v: the random output weights)"))
        else:
            mid = (lo + hi) // 2
            pending += [(lo, mid), (mid, hi)]
    if not located:  # the parts agree but the whole did not (cancellation): report the input
        located.append(Mismatch(j, problem.names[j], None, None, None, float((g * u).sum()), None,
                                note="the directional check failed but no single element could be isolated"))
    return located
