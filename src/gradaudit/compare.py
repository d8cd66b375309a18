"""Dtype-keyed tolerances and elementwise comparison of gradients.

The rule is torch.testing's: ``|observed - expected| <= atol + rtol * |expected|``.

>>> import torch
>>> d = compare(torch.tensor([6.0]), torch.tensor([6.0]), atol=1e-7, rtol=1e-7)
>>> d["mismatched"], d["max_abs"]
(0, 0.0)
"""

from __future__ import annotations

from typing import Any

from .tolerances import AUTOGRAD_TOLERANCES, FD_TOLERANCES, default_tolerance

__all__ = ["AUTOGRAD_TOLERANCES", "FD_TOLERANCES", "compare", "default_tolerance", "unravel"]

MAX_WORST = 5


def compare(observed: Any, expected: Any, *, atol: float, rtol: float) -> dict[str, Any]:
    """Compare two tensors elementwise; return the discrepancy as JSON-ready data.

    NaN or infinity in *observed* where *expected* is finite counts as a mismatch.
    """
    import torch

    obs = observed.detach().to(device="cpu", dtype=torch.float64)
    exp = expected.detach().to(device="cpu", dtype=torch.float64)
    diff = (obs - exp).abs()
    both_equal = obs == exp  # also makes +inf == +inf agree
    diff = torch.where(both_equal, torch.zeros_like(diff), diff)
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    allowed = atol + rtol * exp.abs()
    bad = diff > allowed
    rel = diff / exp.abs().clamp_min(torch.finfo(torch.float64).tiny)
    rel = torch.where(diff == 0, torch.zeros_like(rel), rel)
    total = obs.numel()
    out: dict[str, Any] = {
        "max_abs": float(diff.max()) if total else 0.0,
        "max_rel": float(rel.max()) if total else 0.0,
        "index": list(unravel(int(diff.argmax()), tuple(obs.shape))) if total else [],
        "mismatched": int(bad.sum()),
        "total": total,
        "atol": atol,
        "rtol": rtol,
    }
    out["worst"] = _worst(obs, exp, diff, rel, bad)
    return out


def _worst(obs: Any, exp: Any, diff: Any, rel: Any, bad: Any) -> list[dict[str, Any]]:
    if not bool(bad.any()):
        return []
    flat = diff.reshape(-1)
    order = flat.argsort(descending=True)[:MAX_WORST]
    rows = []
    for i in order.tolist():
        if not bool(bad.reshape(-1)[i]):
            continue
        rows.append({
            "index": list(unravel(i, tuple(obs.shape))),
            "expected": float(exp.reshape(-1)[i]),
            "observed": float(obs.reshape(-1)[i]),
            "abs": float(flat[i]),
            "rel": float(rel.reshape(-1)[i]),
        })
    return rows


def unravel(flat_index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The multi-index of a flat (row-major) index."""
    out = []
    for size in reversed(shape):
        out.append(flat_index % size)
        flat_index //= size
    return tuple(reversed(out))
