"""Numeric evidence: central finite differences, evaluated in float64 by default.

The step for element i is ``h_i = cbrt(eps) * max(1, |x_i|)`` (the optimum of the
central-difference error ``h^2 |f'''| / 6 + eps |f| / h``), rounded so that
``x_i + h_i`` is exactly representable; every step is recorded.

>>> import torch
>>> g, info = central_difference(lambda t: (t["x"] ** 2).sum(), {"x": torch.tensor([3.0], dtype=torch.float64)}, "x")
>>> round(float(g[0]), 8)
6.0
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def step_for(x: Any, chosen: float | None = None) -> Any:
    """The per-element central-difference step for *x* (or the *chosen* h), exactly representable."""
    import torch

    if chosen is None:
        eps = torch.finfo(x.dtype).eps
        h = eps ** (1.0 / 3.0) * x.abs().clamp_min(1.0)
    else:
        h = torch.full_like(x, chosen)
    return (x + h) - x  # exact: x + h - x is representable, so the division is by the true step


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


def central_difference(fn: Callable[[Mapping[str, Any]], Any], tensors: Mapping[str, Any],
                       name: str, *, step: float | None = None) -> tuple[Any, dict[str, Any]]:
    """d fn / d tensors[name] by central differences in the tensors' own dtype.

    *fn* maps a dict of tensors to a scalar tensor. Returns the gradient (float64)
    and the evidence: scheme, dtype, steps and number of evaluations.
    """
    import torch

    base = {k: v.detach() for k, v in tensors.items()}
    x = base[name]
    steps = step_for(x, step)
    grad = torch.empty(x.shape, dtype=torch.float64)
    flat_x = x.reshape(-1)
    flat_h = steps.reshape(-1)
    flat_g = grad.reshape(-1)
    with torch.no_grad():
        for i in range(flat_x.numel()):
            values = []
            for sign in (1.0, -1.0):
                shifted = flat_x.clone()
                shifted[i] = flat_x[i] + sign * flat_h[i]
                env = dict(base)
                env[name] = shifted.reshape(x.shape)
                values.append(scalar_output(fn(env)).to(torch.float64))
            flat_g[i] = (values[0] - values[1]) / (2.0 * float(flat_h[i]))
    steps_list = steps.to(torch.float64).tolist()
    evidence = {
        "scheme": "central",
        "dtype": str(x.dtype).removeprefix("torch."),
        "step_rule": "h = cbrt(eps) * max(1, |x|)" if step is None else f"chosen: h = {step:g}",
        "step": steps_list,
        "evaluations": 2 * flat_x.numel(),
    }
    return grad, evidence


# -- methods with their own error estimates (issue: numeric evidence) --------------------------

def _along(fn: Callable[[Any], Any], x: Any, i: int, delta: Any) -> Any:
    """fn at x with element i moved by delta (real or complex)."""
    import torch

    shifted = x.reshape(-1)
    if torch.is_tensor(delta) and delta.is_complex():
        shifted = shifted.to(torch.complex128)
    shifted = shifted.clone()
    shifted[i] = shifted[i] + delta
    return fn(shifted.reshape(x.shape))


def ridders(fn: Callable[[Any], Any], x: Any, *, h0: float = 0.1, con: float = 2.0, max_columns: int = 6,
            safe: float = 2.0) -> tuple[Any, Any, int]:
    """Ridders' extrapolation of central differences, per element of *x*.

    Returns (derivative, error estimate, evaluations per element). The tableau starts at
    ``h0 * max(1, |x_i|)`` and shrinks the step by *con*; it stops when the estimate's
    change exceeds *safe* times the best error seen (rounding has taken over).

    >>> import torch
    >>> d, err, n = ridders(lambda t: torch.sin(t).sum(), torch.tensor([0.7], dtype=torch.float64))
    >>> abs(float(d[0]) - 0.7648421872844885) < 1e-13, n <= 12
    (True, True)
    """
    import torch

    flat = x.detach().reshape(-1).to(torch.float64)
    deriv = torch.empty_like(flat)
    error = torch.empty_like(flat)
    used = 0
    with torch.no_grad():
        for i in range(flat.numel()):
            h = h0 * max(1.0, abs(float(flat[i])))
            table = [[_central(fn, flat, i, h)]]
            best, err, evals = table[0][0], float("inf"), 2
            for col in range(1, max_columns):
                h /= con
                row = [_central(fn, flat, i, h)]
                evals += 2
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
            deriv[i], error[i] = best, err
            used = max(used, evals)
    return deriv.reshape(x.shape), error.reshape(x.shape), used


def _central(fn: Callable[[Any], Any], flat: Any, i: int, h: float) -> float:
    up = float(_along(fn, flat, i, h))
    down = float(_along(fn, flat, i, -h))
    return (up - down) / (2.0 * h)


def one_sided(fn: Callable[[Any], Any], x: Any, *, h: float | None = None) -> tuple[Any, Any]:
    """Forward and backward differences per element: (right slope, left slope).

    Where the two disagree beyond their truncation error, *fn* has a kink at *x*.

    >>> import torch
    >>> right, left = one_sided(lambda t: torch.relu(t).sum(), torch.tensor([0.0], dtype=torch.float64))
    >>> float(right[0]), float(left[0])
    (1.0, 0.0)
    """
    import torch

    flat = x.detach().reshape(-1).to(torch.float64)
    right = torch.empty_like(flat)
    left = torch.empty_like(flat)
    with torch.no_grad():
        f0 = float(fn(flat.reshape(x.shape)))
        for i in range(flat.numel()):
            step = h if h is not None else torch.finfo(torch.float64).eps ** 0.5 * max(1.0, abs(float(flat[i])))
            right[i] = (float(_along(fn, flat, i, step)) - f0) / step
            left[i] = (f0 - float(_along(fn, flat, i, -step))) / step
    return right.reshape(x.shape), left.reshape(x.shape)


def complex_step(fn: Callable[[Any], Any], x: Any, *, h: float = 1e-20) -> tuple[Any | None, str]:
    """``Im f(x + ih) / h`` per element, exact to rounding for holomorphic *fn*.

    Returns (derivative, note). The derivative is None, with the reason in the note, when
    *fn* does not run on complex input or returns a real result (abs, relu, clamp do).
    It cannot tell a non-holomorphic *fn* (one that uses conj) from a holomorphic one:
    use it only for analytic functions.

    >>> import torch
    >>> d, note = complex_step(lambda t: (t ** 3).sum(), torch.tensor([2.0], dtype=torch.float64))
    >>> float(d[0]), note
    (12.0, 'complex step, h = 1e-20')
    >>> complex_step(lambda t: torch.relu(t).sum(), torch.tensor([2.0], dtype=torch.float64))[0] is None
    True
    """
    import torch

    flat = x.detach().reshape(-1).to(torch.float64)
    out = torch.empty_like(flat)
    step = torch.tensor(complex(0.0, h), dtype=torch.complex128)
    with torch.no_grad():
        for i in range(flat.numel()):
            try:
                value = _along(fn, flat, i, step)
            except Exception as exc:  # the function refuses complex input: say so, fall back
                return None, f"the function does not run on complex input ({type(exc).__name__}: {exc})"
            if not torch.is_tensor(value) or not value.is_complex():
                return None, "the function returns a real result for complex input: the imaginary part is lost"
            out[i] = value.imag / h
    return out.reshape(x.shape), f"complex step, h = {h:g}"


def taylor_orders(fn: Callable[[Any], Any], x: Any, grad: Any, *, direction: Any = None,
                  h0: float = 1e-3, steps: int = 5) -> list[float]:
    """Observed convergence orders of ``|f(x + h v) - f(x) - h grad.v|`` as h halves.

    A correct gradient gives orders near 2; a wrong one, near 1 (pyadjoint's taylor_test).

    >>> import torch
    >>> x = torch.tensor([0.5, -1.0], dtype=torch.float64)
    >>> f = lambda t: (t.sin() * t).sum()
    >>> good = x.sin() + x * x.cos()
    >>> [round(o) for o in taylor_orders(f, x, good)], [round(o) for o in taylor_orders(f, x, good * 1.01)]
    ([2, 2, 2, 2], [1, 1, 1, 1])
    """
    import math

    import torch

    x64 = x.detach().to(torch.float64)
    g = grad.detach().to(torch.float64)
    if direction is None:
        gen = torch.Generator().manual_seed(0)
        direction = torch.rand(x64.shape, generator=gen, dtype=torch.float64) + 0.5
    v = direction.to(torch.float64)
    with torch.no_grad():
        f0 = float(fn(x64))
        slope = float((g * v).sum())
        remainders = []
        for k in range(steps):
            h = h0 / 2**k
            remainders.append(abs(float(fn(x64 + h * v)) - f0 - h * slope))
    return [math.log2(a / b) if a > 0 and b > 0 else float("inf") for a, b in zip(remainders, remainders[1:])]
