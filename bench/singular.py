"""Near singularities: right and slightly wrong backwards of twelve functions at points approaching a pole, a
branch point or the edge of the domain (sqrt and log at 1e-1 ... 1e-8, tan at pi/2 - 1e-1 ... 1e-6, asin and atanh
at 1 - 1e-1 ... 1e-8, digamma and lgamma next to their poles, ...), checked by torch.autograd.gradcheck (slow mode)
and ga.check in full and directional mode.

For each point three backwards: torch's own (right: its relative error against mpmath, where mpmath is installed,
is printed beside it), and the same scaled by 1 + 1e-6 and by 1 + 1e-8 (wrong). A right backward should pass (or be
inconclusive where no step can resolve it), a wrong one fail; gradaudit's promise at its default tolerance is that a
backward off by 1e-8 fails wherever the evidence resolves it. Verdicts only, no timing.

    python bench/singular.py                 # about 3 minutes on one core
    python bench/singular.py --functions tan,asin --out singular.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

RELS = (0.0, 1e-6, 1e-8)
TOOLS = ("gradcheck", "full", "directional")


def functions() -> dict[str, tuple[Callable[[Any], Any], list[float], Callable[[Any], Any] | None]]:
    """name: (torch function, points, its derivative in mpmath or None)."""
    import torch

    def mp(name: str) -> Callable[[Any], Any] | None:
        try:
            import mpmath
        except ImportError:
            return None
        return {
            "sqrt": lambda x: 1 / (2 * mpmath.sqrt(x)), "log": lambda x: 1 / x, "rsqrt": lambda x: -x ** -1.5 / 2,
            "reciprocal": lambda x: -1 / x ** 2, "tan": lambda x: 1 / mpmath.cos(x) ** 2,
            "asin": lambda x: 1 / mpmath.sqrt(1 - x * x), "atanh": lambda x: 1 / (1 - x * x),
            "digamma": lambda x: mpmath.psi(1, x), "lgamma": lambda x: mpmath.psi(0, x),
            "abs^1.5": lambda x: 1.5 * mpmath.sqrt(x), "logit": lambda x: 1 / (x * (1 - x)),
            "erfinv": lambda x: mpmath.sqrt(mpmath.pi) / 2 * mpmath.exp(mpmath.erfinv(x) ** 2),
        }[name]

    table = {
        "sqrt": (torch.sqrt, [10.0 ** -k for k in range(1, 9)]),
        "log": (torch.log, [10.0 ** -k for k in range(1, 9)]),
        "rsqrt": (torch.rsqrt, [10.0 ** -k for k in range(1, 7)]),
        "reciprocal": (torch.reciprocal, [10.0 ** -k for k in range(1, 7)]),
        "tan": (torch.tan, [math.pi / 2 - 10.0 ** -k for k in range(1, 7)]),
        "asin": (torch.asin, [1 - 10.0 ** -k for k in range(1, 9)]),
        "atanh": (torch.atanh, [1 - 10.0 ** -k for k in range(1, 9)]),
        "digamma": (torch.digamma, [-1 + 10.0 ** -k for k in range(1, 7)]),
        "lgamma": (torch.lgamma, [-2 + 10.0 ** -k for k in range(1, 7)]),
        "abs^1.5": (lambda x: x.abs() ** 1.5, [10.0 ** -k for k in range(1, 9)]),
        "logit": (torch.logit, [10.0 ** -k for k in range(1, 8)]),
        "erfinv": (torch.erfinv, [1 - 10.0 ** -k for k in range(1, 8)]),
    }
    return {name: (fn, points, mp(name)) for name, (fn, points) in table.items()}


def scaled(fn: Callable[[Any], Any], rel: float, at: int | None = None) -> Callable[[Any], Any]:
    """*fn* whose backward is torch's own times 1 + *rel* (the right one for rel = 0); with *at*, at that flat
    element of the gradient alone (bench/rounding.py's --off)."""
    import torch

    if rel == 0.0:
        return fn

    class Scaled(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return fn(x)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            with torch.enable_grad():
                y = x.detach().requires_grad_(True)
                (d,) = torch.autograd.grad(fn(y), y, g)
            if at is None:
                return d * (1 + rel)
            d = d.detach().clone()
            d.reshape(-1)[at] *= 1 + rel
            return d

    return Scaled.apply


def verdict(tool: str, fn: Callable[[Any], Any], x: Any) -> str:
    import torch
    from torch.autograd.gradcheck import GradcheckError

    import gradaudit as ga

    if tool == "gradcheck":
        try:
            return "pass" if torch.autograd.gradcheck(fn, (x,)) else "fail"
        except GradcheckError:
            return "fail"
        except Exception:  # noqa: BLE001 - a crash is a verdict here
            return "error"
    return str(ga.check(fn, (x,), mode=tool).verdict)


def autograd_error(fn: Callable[[Any], Any], at: float, exact: Callable[[Any], Any] | None) -> float | None:
    """The right backward's relative error against mpmath at 50 digits (None without mpmath)."""
    if exact is None:
        return None
    import mpmath
    import torch

    mpmath.mp.dps = 50
    x = torch.tensor([at], dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(fn(x).sum(), x)
    truth = exact(mpmath.mpf(at))
    return float((mpmath.mpf(float(g)) - truth) / truth)


def run(names: list[str], out: Path | None) -> list[dict[str, Any]]:
    import torch

    rows = []
    table = functions()
    handle = out.open("w") if out else None
    try:
        for name in names:
            fn, points, exact = table[name]
            for at in points:
                x = torch.tensor([at], dtype=torch.float64, requires_grad=True)
                row: dict[str, Any] = {"function": name, "at": at, "autograd_rel_error": autograd_error(fn, at, exact)}
                for rel in RELS:
                    row[f"{rel:g}"] = {tool: verdict(tool, scaled(fn, rel), x) for tool in TOOLS}
                rows.append(row)
                if handle:
                    handle.write(json.dumps(row) + "\n")
                    handle.flush()
                print(f"  {name} at {at!r}: " + "; ".join(
                    f"{'right' if rel == 0 else f'off {rel:g}'} " + "/".join(row[f"{rel:g}"][t] for t in TOOLS)
                    for rel in RELS), flush=True)
    finally:
        if handle:
            handle.close()
    return rows


def summary(rows: list[dict[str, Any]]) -> str:
    lines = [f"{len(rows)} points; verdicts of gradcheck (slow) / ga.check full / ga.check directional", "",
             "| backward | tool | pass | inconclusive | fail | error |", "|---|---|---:|---:|---:|---:|"]
    for rel in RELS:
        for tool in TOOLS:
            c = Counter(r[f"{rel:g}"][tool] for r in rows)
            what = "right" if rel == 0 else f"off by {rel:g}"
            lines.append(f"| {what} | {tool} | {c['pass']} | {c['inconclusive']} | {c['fail']} | {c['error']} |")
    lines.append("")
    for rel in RELS:
        differ = [r for r in rows if r[f"{rel:g}"]["full"] != r[f"{rel:g}"]["directional"]]
        what = "right" if rel == 0 else f"off by {rel:g}"
        lines.append(f"{what}: full and directional differ at {len(differ)} of {len(rows)} points"
                     + (": " + ", ".join(f"{r['function']} {r['at']:.10g} ({r[f'{rel:g}']['full']}/"
                                         f"{r[f'{rel:g}']['directional']})" for r in differ) if differ else ""))
    errors = [abs(r["autograd_rel_error"]) for r in rows if r["autograd_rel_error"] is not None]
    if errors:
        lines.append(f"\nthe right backward's largest relative error against mpmath: {max(errors):.2g}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--functions", help="comma-separated names (default: all): " + ", ".join(
        ["sqrt", "log", "rsqrt", "reciprocal", "tan", "asin", "atanh", "digamma", "lgamma", "abs^1.5", "logit",
         "erfinv"]))
    parser.add_argument("--out", type=Path, help="also write one JSON line per point")
    args = parser.parse_args(argv)
    known = list(functions())
    names = known if not args.functions else [n.strip() for n in args.functions.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"bench/singular.py: unknown function {unknown[0]!r}; known: {', '.join(known)}.", file=sys.stderr)
        return 2
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gradcheck warns on some of these inputs; its verdict is what counts
            rows = run(names, args.out)
    finally:
        torch.set_num_threads(threads)
    print()
    print(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
