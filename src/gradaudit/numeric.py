"""Finite-difference schemes as arithmetic: Ridders' extrapolation (scalar and vectorized over any
number of elements, each with its own error estimate) and the Taylor remainder test.

- ``central``: ``(f(x+h) - f(x-h)) / 2h`` with ``h_i = cbrt(eps) * max(1, |x_i|)`` (the optimum of
  ``h^2 |f'''| / 6 + eps |f| / h``) or a chosen h; steps are made exactly representable.
- ``ridders``: Ridders' extrapolation of central differences at steps halving from
  ``h0 = 1e-2 * max(1, |x_i|)``: a value *and* an error estimate per element.
- ``complex_step``: ``Im f(x + ih) / h``, exact to rounding for holomorphic functions.
- ``forward`` / ``backward``: one-sided differences; together they expose kinks.

Evaluation (batching, vmap or loop) lives in :mod:`gradaudit.evaluate`.

>>> ridders_tableau([3 + 0.5**(2 * k) for k in range(6)])[:2]  # D(h) = 3 + h^2, h = 1, 1/2, ...
(3.0, 0.0)
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

SCHEMES = ("ridders", "central", "complex_step", "forward", "backward")
CS_STEP = 1e-20
RIDDERS_BASE = 1e-2  # h0 = RIDDERS_BASE * max(1, |x|)
RIDDERS_COLUMNS = 6  # steps h0, h0/2, ..., h0/32
CON = 2.0  # the tableau's step ratio
SAFE = 2.0  # stop once the diagonal's change exceeds SAFE times the best error


def truncation(delta: torch.Tensor | float, value: torch.Tensor | float) -> torch.Tensor | float:
    """An estimate of the truncation error of Richardson's R = (4 D(h) - D(2h)) / 3 from *delta* = D(h) - D(2h)
    (floats or tensors, elementwise): 4 delta^2 / (9 |R|).

    Where the derivative's Taylor coefficients grow geometrically at the rate of the nearest singularity
    (distance r, s = (h / r)^2: D(h) = f' / (1 - s)), D(h) - D(2h) = -3 s f' and R = f' (1 - 4 s^2 + ...),
    so R is off by 4 s^2 |f'|, exactly this; for sin or exp it is 10/3 of the true h^4 f^(5) / 30. A zero
    *delta* gives 0 (no curvature seen), a zero R with a non-zero *delta* infinity (nothing to compare with).

    >>> f"{truncation(-3e-4, 1.0):.3g}"  # s = 1e-4: 4 s^2
    '4e-08'
    """
    if isinstance(delta, float) and isinstance(value, float):
        if delta == 0.0:
            return 0.0
        size = 9 * abs(value)
        return 4 * delta * delta / size if size else math.inf
    import torch

    d, r = torch.as_tensor(delta, dtype=torch.float64), torch.as_tensor(value, dtype=torch.float64)
    return torch.where(d == 0, 0.0, 4 * d.square() / (9 * r.abs()))


def extrapolate(near: Any, far: Any, fac: float, guard: bool = True) -> Any:
    """(fac near - far) / (fac - 1), Richardson's and Ridders' step, for floats or tensors: where that overflows on
    finite values (exp(709) = 8.2e307 times 4), near + (near - far) / (fac - 1), the same value without the
    overflow (elsewhere the plain form, to the bit: the numbers every other check has stay as they were). Not
    *guard*: the caller knows the values are too small to overflow (:func:`may_overflow`)."""
    plain = (near * fac - far) / (fac - 1.0)
    if isinstance(plain, float):
        if math.isfinite(plain) or not (math.isfinite(near) and math.isfinite(far)):
            return plain
        return near + (near - far) / (fac - 1.0)
    import torch

    if not guard or not plain.numel() or bool(torch.isfinite(plain).all()):
        return plain
    return torch.where(torch.isfinite(plain) | ~(torch.isfinite(near) & torch.isfinite(far)), plain,
                       near + (near - far) / (fac - 1.0))


def may_overflow(values: torch.Tensor, fac: float) -> bool:
    """Whether a finite one of *values* times *fac* (and a little more: a tableau's values grow by up to about
    fac / (fac - 1) per column, about twice in all) may overflow float64."""
    if not values.numel():
        return False
    return float(values.abs().nan_to_num(nan=0.0, posinf=0.0).max()) > sys.float_info.max / (2.0 * fac)


def ridders_tableau(centrals: Iterable[float], *, con: float = CON, safe: float = SAFE) -> tuple[float, float, int]:
    """Ridders' extrapolation of central differences taken at steps shrinking by *con*.

    Consumes *centrals* lazily and stops once rounding takes over (the diagonal's change
    exceeds *safe* times the best error). Returns (value, error estimate, columns used).
    """
    it = iter(centrals)
    table = [[next(it)]]
    best, err = table[0][0], math.inf
    for col, value in enumerate(it, start=1):
        row = [value]
        fac = con * con
        for j in range(1, col + 1):
            row.append(extrapolate(row[j - 1], table[col - 1][j - 1], fac))
            fac *= con * con
            errt = max(abs(row[j] - row[j - 1]), abs(row[j] - table[col - 1][j - 1]))
            if errt <= err:
                err, best = errt, row[j]
        table.append(row)
        if abs(row[col] - table[col - 1][col - 1]) >= safe * err:
            break
    return best, err, len(table)


def ridders_tensor(centrals: torch.Tensor, *, con: float = CON, safe: float = SAFE
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`ridders_tableau` for every element at once: *centrals* holds central differences at
    K steps shrinking by *con* along dim 0. Steps whose difference is not finite (a large step
    left the function's domain) are dropped from the front, so each element extrapolates from the
    steps where it is defined, up to the first non-finite one after them (a step too small to move
    its input). Returns (value, error estimate, index of the step used last).

    >>> import torch
    >>> h = torch.tensor([0.5 ** k for k in range(6)], dtype=torch.float64).reshape(6, 1)
    >>> d = torch.cat([3 + h * h, torch.where(h > 0.3, float("nan"), 1 + h * h)], 1)  # NaN at large steps
    >>> value, err, used = ridders_tensor(d)
    >>> value.tolist(), (err < 1e-12).tolist()
    ([3.0, 1.0], [True, True])
    """
    import torch

    k = centrals.shape[0]
    finite = torch.isfinite(centrals)
    steps = torch.arange(k).reshape(-1, *([1] * (centrals.dim() - 1))).expand_as(centrals)
    # the first finite run: from one past the last non-finite step that a finite one follows (the large steps left
    # the domain) to the first non-finite after it (the small steps did not move the input: its spacing, float16's,
    # is coarser than they are), whose NaNs the tableau passes over
    later = torch.flip(torch.cummax(torch.flip(finite.to(torch.int8), [0]), 0).values, [0])  # a finite at i or after
    followed = torch.cat([later[1:], torch.zeros_like(later[:1])]).bool()  # a finite after i
    start = torch.where(~finite & followed, steps + 1, torch.zeros_like(steps)).amax(0)
    index = (start.unsqueeze(0) + steps).clamp_max(k - 1)
    shifted = torch.where(start.unsqueeze(0) + steps < k, centrals.gather(0, index),
                          torch.full_like(centrals, math.nan))
    best = shifted[0].clone()
    err = torch.full_like(best, math.inf)
    used = start.clone()
    active = torch.ones_like(best, dtype=torch.bool)
    prev = [shifted[0]]
    guard = may_overflow(shifted, (con * con) ** (k - 1))  # (one test for the tableau: values near float64's end)
    for col in range(1, k):
        row = [shifted[col]]
        fac = con * con
        for j in range(1, col + 1):
            row.append(extrapolate(row[j - 1], prev[j - 1], fac, guard))
            fac *= con * con
            errt = torch.maximum((row[j] - row[j - 1]).abs(), (row[j] - prev[j - 1]).abs())
            better = active & (errt <= err)
            err = torch.where(better, errt, err)
            best = torch.where(better, row[j], best)
            used = torch.where(better, start + col, used)
        active = active & ~((row[col] - prev[col - 1]).abs() >= safe * err)
        prev = row
    return best, err, used


def taylor_orders(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, grad: torch.Tensor, *,
                  direction: torch.Tensor | None = None, h0: float = 1e-3, steps: int = 5
                  ) -> tuple[list[float], list[float]]:
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
