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
