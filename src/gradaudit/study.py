"""The step-size study: the error of central differences against the step, per dtype.

Truncation error falls as h^2 while rounding error grows as eps|f|/h, so the error
against h draws a V whose bottom sits near ``h* = (3 eps |f| / |f'''|)^(1/3)``. The
reference derivative is autograd's, in float64.

>>> s = study("sin(x)*exp(x)", {"x": 0.7}, dtypes=("float64",))
>>> 5e-6 < s["optimum"]["float64"]["h"] < 5e-5
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from . import expr as _expr
from .errors import SpecError

DECADES = {"float64": range(1, 14), "float32": range(1, 8), "bfloat16": range(1, 5), "float16": range(1, 6)}


def study(function: str, point: Mapping[str, float], *, wrt: str | None = None,
          dtypes: Sequence[str] = ("float64", "float32")) -> dict[str, Any]:
    """Errors of central differences for each step 10^-k and dtype, against autograd in float64."""
    import torch

    e = _expr.parse(function, allowed_names=tuple(point))
    missing = [n for n in e.names if n not in point]
    if missing:
        raise SpecError(f"give a value for {', '.join(missing)} with --at NAME=VALUE.", field="at")
    wrt = wrt or e.names[0]
    if wrt not in point:
        raise SpecError(f"'{wrt}' is not an input of {function!r}.", field="input")
    for d in dtypes:
        if d not in DECADES:
            raise SpecError(f"dtype {d!r} is not studied; use {', '.join(DECADES)}.", field="dtype")

    def f(x: Any, dtype: Any) -> Any:
        env = {n: torch.tensor(v, dtype=dtype) for n, v in point.items()}
        env[wrt] = x
        return e(env)

    x64 = torch.tensor(float(point[wrt]), dtype=torch.float64, requires_grad=True)
    y = f(x64, torch.float64)
    (d1,) = torch.autograd.grad(y, x64, create_graph=True)
    (d2,) = torch.autograd.grad(d1, x64, create_graph=True)
    third = torch.autograd.grad(d2, x64, allow_unused=True)[0] if d2.requires_grad else None
    exact, fx = float(d1.detach()), float(y.detach())
    if not (math.isfinite(exact) and math.isfinite(fx)):
        # (every error was inf, the optimum step nan: a table of nothing, exit 0)
        at = ", ".join(f"{n}={v:g}" for n, v in point.items())
        raise SpecError(f"at {at}, {function!r} is {fx:g} and its derivative in '{wrt}' is {exact:g}: a central "
                        "difference has nothing finite to estimate there. Study a point where the function and its "
                        "derivative are finite (near it, to see the steps fail as they approach it).", field="at")
    f3 = abs(float(third)) if third is not None else 0.0
    rows: list[dict[str, Any]] = []
    optimum: dict[str, Any] = {}
    for name in dtypes:
        dtype = getattr(torch, name)
        eps = torch.finfo(dtype).eps
        x = torch.tensor(float(point[wrt]), dtype=dtype)
        best: dict[str, Any] | None = None
        for k in DECADES[name]:
            h_asked = 10.0 ** -k
            h = float((x + h_asked) - x)  # the step the dtype can actually take
            if h == 0.0:
                continue
            with torch.no_grad():
                value = (float(f(x + h_asked, dtype)) - float(f(x - h_asked, dtype))) / (2 * h)
            err = abs(value - exact)
            rows.append({"dtype": name, "h": h_asked, "h_taken": h, "estimate": value, "abs_error": err,
                         "model": h * h * f3 / 6 + eps * abs(fx) / h})
            if best is None or err < best["abs_error"]:
                best = rows[-1]
        h_star = (3 * eps * abs(fx) / f3) ** (1 / 3) if f3 > 0 and fx != 0 else None
        optimum[name] = {"h": h_star, "model_error": h_star**2 * f3 / 6 + eps * abs(fx) / h_star if h_star else None,
                         "best_h": best["h"] if best else None, "best_error": best["abs_error"] if best else None}
    return {"function": function, "at": dict(point), "input": wrt, "exact": exact, "reference": "autograd, float64",
            "f": fx, "third_derivative": f3, "rows": rows, "optimum": optimum}
