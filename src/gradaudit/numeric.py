"""Numeric evidence, evaluated in float64 by default; each scheme says what it knows of its error.

- ``central``: ``(f(x+h) - f(x-h)) / 2h`` with ``h_i = cbrt(eps) * max(1, |x_i|)`` (the
  optimum of ``h^2 |f'''| / 6 + eps |f| / h``) or a chosen h; steps are made exactly
  representable and recorded.
- ``ridders``: Ridders' extrapolation of central differences: a value *and* an error
  estimate per element (the default: tolerances are derived from it).
- ``complex_step``: ``Im f(x + ih) / h``, exact to rounding for holomorphic functions;
  detected, with a recorded fallback to Ridders when the function refuses complex input.
- ``forward`` / ``backward``: one-sided differences; together they expose kinks.

>>> import torch
>>> d, err, info = estimate(lambda t: (t ** 2).sum(), torch.tensor([3.0], dtype=torch.float64), scheme="central")
>>> round(float(d[0]), 8), info["evaluations"]
(6.0, 2)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any


def scalar_output(value: Any) -> Any:
    """Return *value* as a 0-d tensor, or raise ValueError saying how to reduce it."""
    import torch

    if not isinstance(value, torch.Tensor):
        raise ValueError(f"the function returned {type(value).__name__}, not a tensor.")
    if value.numel() != 1:
        raise ValueError(f"the function returns shape {tuple(value.shape)}, but a gradient check "
                         "of an expectation needs a scalar output; reduce it, e.g. sum(...) or "
                         "mean(...).")
    return value.reshape(())


# -- schemes with their own error estimates -----------------------------------------------

SCHEMES = ("ridders", "central", "complex_step", "forward", "backward")
CS_STEP = 1e-20


def _at(fn: Callable[[Any], Any], flat: Any, shape: Any, i: int, delta: float) -> float:
    """fn at the point *flat* (reshaped to *shape*) with element i moved by *delta*."""
    moved = flat.clone()
    moved[i] = moved[i] + delta
    return float(fn(moved.reshape(shape)).reshape(()).item())


def _exact_step(x_i: float, h: float) -> float:
    return (x_i + h) - x_i  # representable: the quotient divides by the step actually taken


def ridders_tableau(centrals: Iterable[float], *, con: float = 2.0, safe: float = 2.0) -> tuple[float, float, int]:
    """Ridders' extrapolation of central differences taken at steps shrinking by *con*.

    Consumes *centrals* lazily and stops once rounding takes over (the diagonal's change
    exceeds *safe* times the best error). Returns (value, error estimate, columns used).

    >>> ridders_tableau([3 + 0.5**(2 * k) for k in range(6)])[:2]  # D(h) = 3 + h^2, h = 1, 1/2, ...
    (3.0, 0.0)
    """
    it = iter(centrals)
    table = [[next(it)]]
    best, err = table[0][0], math.inf
    for col, value in enumerate(it, start=1):
        row = [value]
        fac = con * con
        for j in range(1, col + 1):
            row.append((row[j - 1] * fac - table[col - 1][j - 1]) / (fac - 1.0))
            fac *= con * con
            errt = max(abs(row[j] - row[j - 1]), abs(row[j] - table[col - 1][j - 1]))
            if errt <= err:
                err, best = errt, row[j]
        table.append(row)
        if abs(row[col] - table[col - 1][col - 1]) >= safe * err:
            break
    return best, err, len(table)


def _ridders(fn: Callable[[Any], Any], flat: Any, shape: Any, i: int, h: float, *, max_columns: int = 6
             ) -> tuple[float, float, int, float]:
    """Ridders for element i, evaluated column by column: (value, error estimate, evaluations, last step)."""
    steps = [h / 2**c for c in range(max_columns)]

    def centrals() -> Iterator[float]:
        for step in steps:
            yield (_at(fn, flat, shape, i, step) - _at(fn, flat, shape, i, -step)) / (2.0 * step)

    best, err, used = ridders_tableau(centrals())
    return best, err, 2 * used, steps[used - 1]


def _complex_step(fn: Callable[[Any], Any], flat: Any, shape: Any, i: int) -> float:
    import torch

    moved = flat.to(torch.complex128 if flat.dtype == torch.float64 else torch.complex64)
    moved[i] = moved[i] + complex(0.0, CS_STEP)
    value = fn(moved.reshape(shape))
    if not torch.is_tensor(value) or not value.is_complex():
        raise TypeError("the function returns a real result for complex input, so the imaginary part is lost")
    return float(value.reshape(()).imag) / CS_STEP


def estimate(fn: Callable[[Any], Any], x: Any, *, scheme: str = "ridders", step: float | None = None
             ) -> tuple[Any, Any, dict[str, Any]]:
    """d fn / dx per element by *scheme*, evaluated in x's dtype.

    Returns (derivative in float64, error bound per element or None, evidence). The error
    bound is the scheme's own estimate plus the rounding bound ``eps |f| / h`` (Ridders), or
    a few ulps of the value (complex step); central and one-sided schemes give None and are
    judged by the dtype-keyed table instead.

    >>> import torch
    >>> d, err, info = estimate(lambda t: torch.sin(t).sum(), torch.tensor([0.7], dtype=torch.float64))
    >>> abs(float(d[0]) - 0.7648421872844885) < 1e-13, float(err[0]) < 1e-12, info["evaluations"] <= 12
    (True, True, True)
    """
    import torch

    if scheme not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}; schemes: {', '.join(SCHEMES)}")
    flat = x.detach().reshape(-1).clone()
    eps = torch.finfo(flat.dtype).eps
    n = flat.numel()
    deriv = torch.empty(n, dtype=torch.float64)
    error = torch.full((n,), float("nan"), dtype=torch.float64)
    steps: list[float] = []
    evals, note = 0, None
    with torch.no_grad():
        f0 = float(fn(x.detach()).reshape(()).item())
        if scheme == "complex_step":
            try:
                for i in range(n):
                    deriv[i] = _complex_step(fn, flat, x.shape, i)
                    error[i] = 4 * eps * abs(float(deriv[i]))
                steps, evals = [CS_STEP] * n, 1
            except Exception as exc:  # detected and recorded: fall back to Ridders
                note = f"complex step unavailable ({type(exc).__name__}: {exc}); Ridders used instead"
                scheme = "ridders"
        for i in range(0 if scheme == "complex_step" else n):
            x_i = float(flat[i])
            if scheme == "ridders":
                h0 = (step or 0.1) * max(1.0, abs(x_i))
                deriv[i], est, used, h = _ridders(fn, flat, x.shape, i, _exact_step(x_i, h0))
                error[i], evals = est + eps * abs(f0) / h, max(evals, used)
            elif scheme == "central":
                h = _exact_step(x_i, step or eps ** (1 / 3) * max(1.0, abs(x_i)))
                deriv[i] = (_at(fn, flat, x.shape, i, h) - _at(fn, flat, x.shape, i, -h)) / (2 * h)
                evals = 2
            else:
                h = _exact_step(x_i, step or eps ** 0.5 * max(1.0, abs(x_i)))
                if scheme == "forward":
                    deriv[i] = (_at(fn, flat, x.shape, i, h) - f0) / h
                else:
                    deriv[i] = (f0 - _at(fn, flat, x.shape, i, -h)) / h
                evals = 1
            steps.append(h)
    info = {"scheme": scheme, "dtype": str(flat.dtype).removeprefix("torch."), "step_rule": _rule(scheme, step),
            "step": steps, "evaluations": evals, "f": f0, "fallback": note}
    has_error = scheme in ("ridders", "complex_step")
    return deriv.reshape(x.shape), (error.reshape(x.shape) if has_error else None), info


def _rule(scheme: str, step: float | None) -> str:
    if scheme == "complex_step":
        return "h = 1e-20 (imaginary)"
    if scheme == "ridders":
        return f"Ridders tableau from h0 = {step or 0.1:g} * max(1, |x|), halving per column (at most 6)"
    if step is not None:
        return f"chosen: h = {step:g}"
    return "h = cbrt(eps) * max(1, |x|)" if scheme == "central" else "h = sqrt(eps) * max(1, |x|)"


def one_sided(fn: Callable[[Any], Any], x: Any, i: int, *, h: float | None = None) -> tuple[float, float]:
    """(left slope, right slope) of fn along element i: they differ at a kink.

    >>> import torch
    >>> one_sided(lambda t: torch.relu(t).sum(), torch.tensor([0.0], dtype=torch.float64), 0)
    (0.0, 1.0)
    """
    import torch

    flat = x.detach().reshape(-1).clone()
    x_i = float(flat[i])
    step = _exact_step(x_i, h or torch.finfo(flat.dtype).eps ** 0.5 * max(1.0, abs(x_i)))
    with torch.no_grad():
        f0 = float(fn(x.detach()).reshape(()).item())
        right = (_at(fn, flat, x.shape, i, step) - f0) / step
        left = (f0 - _at(fn, flat, x.shape, i, -step)) / step
    return left, right


def is_kink(left: float, right: float) -> bool:
    """Slopes that disagree by more than one-sided truncation can explain (rel 1e-3)."""
    return abs(right - left) > 1e-3 * max(1.0, abs(left), abs(right))


def taylor_orders(fn: Callable[[Any], Any], x: Any, grad: Any, *, direction: Any = None,
                  h0: float = 1e-3, steps: int = 5) -> tuple[list[float], list[float]]:
    """Convergence orders of the remainder ``|f(x + h v) - f(x) - h grad.v|`` as h halves.

    Returns (orders, remainders). A correct gradient gives orders near 2, a wrong one
    near 1 (pyadjoint's taylor_test); remainders at rounding level give no order (nan).

    >>> import torch
    >>> x = torch.tensor([0.5, -1.0], dtype=torch.float64)
    >>> f = lambda t: (t.sin() * t).sum()
    >>> good = x.sin() + x * x.cos()
    >>> [round(o) for o in taylor_orders(f, x, good)[0]], [round(o) for o in taylor_orders(f, x, good * 1.01)[0]]
    ([2, 2, 2, 2], [1, 1, 1, 1])
    """
    import math

    import torch

    x64 = x.detach().to(torch.float64)
    if direction is None:
        gen = torch.Generator().manual_seed(0)
        direction = torch.rand(x64.shape, generator=gen, dtype=torch.float64) + 0.5
    v = direction.to(torch.float64)
    with torch.no_grad():
        f0 = float(fn(x64).reshape(()).item())
        slope = float((grad.detach().to(torch.float64) * v).sum())
        remainders = [abs(float(fn(x64 + h0 / 2**k * v).reshape(()).item()) - f0 - h0 / 2**k * slope)
                      for k in range(steps)]
    floor = 100 * torch.finfo(torch.float64).eps * max(1.0, abs(f0))
    orders = [math.log2(a / b) if a > floor and b > floor else float("nan")
              for a, b in zip(remainders, remainders[1:])]
    return orders, remainders
