"""Accuracy of gradaudit's numeric evidence against exact derivatives (mpmath, 50 digits).

For each smooth function: the relative error of central differences (gradcheck's
eps = 1e-6 and gradaudit's cbrt(eps) step), Ridders (gradaudit's default) and complex
step, with evaluations per element, and whether Ridders' error bound covers its true
error. Then the anchor: a backward that is wrong by a relative 1e-4 or 1e-6 against
torch.autograd.gradcheck's defaults and against gradaudit's default checks.

Run:  python bench/bench_numeric.py        (about 10 s; prints Markdown tables)
"""

from __future__ import annotations

from typing import Any

import mpmath
import torch

from gradaudit import Expectation, check, run
from gradaudit.channels import finite_difference

mpmath.mp.dps = 50
F64 = torch.float64

CASES = [  # name, torch function of a 1-element tensor, mpmath function, point
    ("sin(x)·exp(x)", lambda t: (t.sin() * t.exp()).sum(), lambda x: mpmath.sin(x) * mpmath.exp(x), 0.7),
    ("log(x)", lambda t: t.log().sum(), mpmath.log, 2.5),
    ("tanh(x)", lambda t: t.tanh().sum(), mpmath.tanh, -0.3),
    ("exp(3x)", lambda t: (3 * t).exp().sum(), lambda x: mpmath.exp(3 * x), 1.2),
    ("x^5 - 2x", lambda t: (t**5 - 2 * t).sum(), lambda x: x**5 - 2 * x, 1.7),
    ("atan(x)/x", lambda t: (t.atan() / t).sum(), lambda x: mpmath.atan(x) / x, 0.9),
    ("(2w - 9)^2 (lesson)", lambda t: ((2 * t + 1 - 10) ** 2).sum(), lambda x: (2 * x + 1 - 10) ** 2, 3.0),
]


def rel(value: float, exact: float) -> float:
    return abs(value - exact) / abs(exact)


def estimate(f: Any, x: torch.Tensor, *, scheme: str, step: float | None = None) -> tuple[float, Any, Any]:
    """The ledger's finite-difference channel on f at x: (derivative, error bound, evidence facts)."""
    c = Expectation(name="f", function=lambda x: f(x), inputs={"x": x}, expected={"x": 0.0},
                    methods=["finite_difference"], scheme=scheme, step=step)
    ev = finite_difference(c)
    bound = ev.bounds["x"]
    return float(ev.grads["x"][0]), None if bound is None else float(bound[0]), ev.info["per_input"]["x"]


def accuracy_table() -> list[str]:
    rows = ["| function | x | central h=1e-6 (gradcheck) | central h=cbrt(eps) | Ridders | Ridders evals "
            "| Ridders bound covers error | complex step |",
            "|---|---|---|---|---|---|---|---|"]
    worst_r, worst_cs, most = 0.0, 0.0, 0
    for name, f, mf, x0 in CASES:
        exact = float(mpmath.diff(mf, mpmath.mpf(x0)))
        x = torch.tensor([x0], dtype=F64)
        c6 = estimate(f, x, scheme="central", step=1e-6)[0]
        cd = estimate(f, x, scheme="central")[0]
        r, err, info = estimate(f, x, scheme="ridders")
        cs = estimate(f, x, scheme="complex_step")[0]
        covered = abs(r - exact) <= 10 * err
        worst_r, worst_cs = max(worst_r, rel(r, exact)), max(worst_cs, rel(cs, exact))
        most = max(most, info["evaluations"])
        rows.append(f"| {name} | {x0} | {rel(c6, exact):.1e} | {rel(cd, exact):.1e} | {rel(r, exact):.1e} "
                    f"| {info['evaluations']} | {'yes' if covered else 'NO'} | {rel(cs, exact):.1e} |")
    rows.append("")
    rows.append(f"Worst relative error: Ridders {worst_r:.1e} (target <= 1e-12) with at most {most} evaluations "
                f"(target <= 12); complex step {worst_cs:.1e} (target <= 1e-15).")
    return rows


def planted(scale: float) -> type:
    class Scaled(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):  # type: ignore[no-untyped-def]
            ctx.save_for_backward(x)
            return x.sin() * x.exp()

        @staticmethod
        def backward(ctx, g):  # type: ignore[no-untyped-def]
            (x,) = ctx.saved_tensors
            return g * x.exp() * (x.sin() + x.cos()) * scale

    return Scaled


def detection_table() -> list[str]:
    rows = ["| relative error planted | torch.autograd.gradcheck, defaults (a backward off by it) "
            "| ga.check, every mode (the same backward) "
            "| gradaudit finite_difference, Ridders + derived tolerance (an expectation off by it) "
            "| gradaudit autograd.grad (the same expectation) |", "|---|---|---|---|---|"]
    x = torch.tensor([0.7, -0.4, 1.1], dtype=F64)
    for off in (1e-3, 1e-4, 1e-6, 1e-8, 0.0):
        gc = torch.autograd.gradcheck(planted(1 + off).apply, (x.clone().requires_grad_(),), raise_exception=False)
        ours = sorted({check(planted(1 + off).apply, (x.clone().requires_grad_(),), mode=m).verdict
                       for m in ("full", "directional", "auto")})
        expectation = Expectation(name="planted", function="sum(sin(x)*exp(x))", inputs={"x": x},
                                  expected={"x": f"exp(x)*(sin(x) + cos(x))*(1 + {off!r})"},
                                  methods=["autograd.grad", "finite_difference"])
        verdicts = {r.method: r.verdict for r in run([expectation])}
        missed = " (missed)" if gc and off else ""
        rows.append(f"| {off:g} | {'pass' if gc else 'fail'}{missed} | {' / '.join(ours)} "
                    f"| {verdicts['finite_difference']} | {verdicts['autograd.grad']} |")
    return rows


if __name__ == "__main__":
    print(f"torch {torch.__version__}, float64, exact derivatives from mpmath (50 digits)\n")
    print("\n".join(accuracy_table()))
    print()
    print("\n".join(detection_table()))
