"""Autograd evidence: ``.grad`` stored by ``backward()`` and values returned by
``torch.autograd.grad``, each from its own fresh forward on fresh leaves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .numeric import estimate, one_sided, scalar_output, taylor_orders
from .spec import Check


@dataclass
class Evidence:
    """What one channel observed: a gradient (or None) per input, plus how.

    Numeric channels add an error bound per input (None where the scheme has none) and
    ``slopes(name, flat_index) -> (left, right)`` to examine a suspected kink.
    """

    grads: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, Any] = field(default_factory=dict)
    slopes: Callable[[str, int], tuple[float, float]] | None = None


def finite_output(check: Check, out: Any, tensors: Mapping[str, Any]) -> Any:
    """Return the scalar output, or raise ValueError if it is not finite."""
    import torch

    value = scalar_output(out)
    if not bool(torch.isfinite(value.detach())):
        at = ", ".join(f"{n}={_short(t)}" for n, t in tensors.items())
        raise ValueError(f"the function's output is {float(value.detach())} at {at}: a gradient there is "
                         "meaningless. Choose inputs inside the function's domain (log and sqrt "
                         "need positive values, division a non-zero divisor).")
    return value


def _short(t: Any) -> str:
    return repr(t.detach().item()) if t.numel() == 1 else f"<{tuple(t.shape)} tensor>"


def backward(check: Check) -> Evidence:
    """Run the check's protocol (default: forward, backward) and read ``.grad``."""
    leaves = {n: s.tensor() for n, s in check.inputs.items()}
    before = {n: leaves[n].grad for n in check.grad_inputs}
    assert all(g is None for g in before.values()), "fresh leaves start with .grad None"
    out = None
    for step in check.protocol:
        if step == "forward":
            out = finite_output(check, check.call(leaves), leaves)
        elif step in ("backward", "backward_retain"):
            assert out is not None  # protocols start with forward (validated in spec)
            out.backward(retain_graph=step == "backward_retain")
        elif step == "reset_none":
            for n in check.grad_inputs:
                leaves[n].grad = None
        elif step == "reset_zero":
            for n in check.grad_inputs:
                if leaves[n].grad is not None:
                    leaves[n].grad.zero_()
    grads = {n: _detached(leaves[n].grad) for n in check.grad_inputs}
    return Evidence(grads, {"grad_before": None, "protocol": list(check.protocol),
                            "is_leaf": {n: leaves[n].is_leaf for n in check.grad_inputs}})


def autograd_grad(check: Check) -> Evidence:
    """One fresh forward, then ``torch.autograd.grad``; ``.grad`` must stay None."""
    import torch

    leaves = {n: s.tensor() for n, s in check.inputs.items()}
    out = finite_output(check, check.call(leaves), leaves)
    wrt = [leaves[n] for n in check.grad_inputs]
    returned = torch.autograd.grad(out, wrt, allow_unused=True)
    grads = {n: _detached(g) for n, g in zip(check.grad_inputs, returned)}
    stored = {n: leaves[n].grad is not None for n in check.grad_inputs}
    return Evidence(grads, {"protocol": ["forward", "autograd.grad"],
                            "stored_after_return": stored})


def _numeric_setup(check: Check) -> tuple[Callable[[Mapping[str, Any]], Any], dict[str, Any], str | None]:
    """The function for numeric evidence and its float64 inputs (or the native ones, recorded)."""
    tensors = {n: s.tensor(requires_grad=False, dtype=_evidence_dtype(s.dtype)) for n, s in check.inputs.items()}

    def fn(env: Mapping[str, Any]) -> Any:
        return finite_output(check, check.call(env), env)

    try:
        fn(tensors)
        return fn, tensors, None
    except Exception as exc:  # fall back to the inputs' own precision, and say so
        native = {n: s.tensor(requires_grad=False) for n, s in check.inputs.items()}
        if all(str(t.dtype) == str(tensors[n].dtype) for n, t in native.items()):
            raise
        fn(native)
        return fn, native, (f"the function failed in float64 ({type(exc).__name__}: {exc}); "
                            "evidence in the inputs' own dtype")


def _along(fn: Callable[[Mapping[str, Any]], Any], tensors: Mapping[str, Any], name: str) -> Callable[[Any], Any]:
    return lambda t: fn({**tensors, name: t})


def finite_difference(check: Check) -> Evidence:
    """Numeric derivative per element by the check's scheme (Ridders unless chosen), in float64."""
    fn, tensors, note = _numeric_setup(check)
    ev = Evidence(info={"per_input": {}, "fallback": note})
    for name in check.grad_inputs:
        ev.grads[name], ev.errors[name], ev.info["per_input"][name] = estimate(
            _along(fn, tensors, name), tensors[name], scheme=check.numeric_scheme, step=check.step)
    ev.slopes = lambda name, i: one_sided(_along(fn, tensors, name), tensors[name], i)
    return ev


def taylor(check: Check) -> Evidence:
    """Taylor remainders of the *expected* gradient along a seeded random direction, per input."""
    fn, tensors, note = _numeric_setup(check)
    ev = Evidence(info={"per_input": {}, "fallback": note})
    for name in check.grad_inputs:
        h0 = 1e-4 * max(1.0, float(tensors[name].abs().max()) if tensors[name].numel() else 1.0)
        orders, remainders = taylor_orders(_along(fn, tensors, name), tensors[name], check.expected_tensor(name),
                                           h0=h0)
        ev.info["per_input"][name] = {"orders": orders, "remainders": remainders, "h0": h0,
                                      "direction": "uniform [0.5, 1.5) per element, seed 0", "halvings": 4}
        ev.grads[name] = None
    return ev


def _evidence_dtype(dtype: str) -> str:
    return "float64" if dtype in ("float32", "float16", "bfloat16", "float64") else dtype


def _detached(g: Any) -> Any:
    return None if g is None else g.detach().clone()


CHANNELS = {"backward": backward, "autograd.grad": autograd_grad, "finite_difference": finite_difference,
            "taylor": taylor}
STORED_OR_RETURNED = {"backward": "stored", "autograd.grad": "returned", "finite_difference": "estimated",
                      "taylor": "remainder"}
