"""Orchestration: Check -> Records. Never raises on a mismatch; every piece of
evidence, passing or failing, becomes a record.
"""

from __future__ import annotations

import re
import time
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from . import expr as _expr
from .channels import CHANNELS, STORED_OR_RETURNED, Evidence
from .compare import AUTOGRAD_TOLERANCES, compare, default_tolerance, unravel
from .numeric import is_kink
from .record import Record
from .spec import Check, Matches, Probe
from .tolerances import DERIVED_BASIS, SAFETY

Progress = Callable[[Check | Probe], None]


def _written(value: Any) -> Any:
    if isinstance(value, _expr.Expr):
        return value.text
    if callable(value):
        return f"callable {getattr(value, '__qualname__', repr(value))}"
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def tolerance_for(check: Check, name: str | None, method: str) -> dict[str, Any] | None:
    """The tolerance that governs one comparison, with its basis and whether it is default."""
    if method == "taylor":
        return None  # tolerance-free: the verdict follows from the observed convergence order
    dtype = check.inputs[name].dtype if name else "float64"
    atol, rtol, basis = default_tolerance(method, dtype)
    derived = method == "finite_difference" and check.numeric_scheme in ("ridders", "complex_step")
    if check.tolerance is None and derived:
        return {"atol": None, "rtol": None, "why": None, "default": True, "derived": True, "basis": DERIVED_BASIS}
    if check.tolerance is None:
        return {"atol": atol, "rtol": rtol, "why": None, "default": True, "basis": basis}
    t = check.tolerance
    same = (t.atol, t.rtol) == (atol, rtol)
    return {"atol": t.atol, "rtol": t.rtol, "why": t.why, "default": same,
            "basis": basis if same else "set by the check (see why)"}


def expectation(check: Check, name: str | None, method: str) -> dict[str, Any]:
    """The expectation fields of one record; identical in plan and run."""
    inputs = {n: {"value": s.written(), "shape": list(s.shape), "dtype": s.dtype,
                  "device": s.device, "requires_grad": s.requires_grad}
              for n, s in check.inputs.items()}
    protocol: list[str] | None = None
    if method == "backward":
        protocol = list(check.protocol)
    elif method == "autograd.grad":
        protocol = ["forward", "autograd.grad"]
    err = check.expect_error
    return {
        "suite": check.suite, "check": check.name, "function": check.source_text(),
        "inputs": inputs, "input": name,
        "analytical_gradient": _written(check.expected[name]) if name else None,
        "expected_value": check.expected_tensor(name).tolist() if name else None,
        "derivation": check.derivation, "method": method,
        "stored_or_returned": STORED_OR_RETURNED[method], "protocol": protocol,
        "step": check.step if method == "finite_difference" else None,
        "scheme": check.numeric_scheme if method == "finite_difference" else None,
        "convention": ({n: _written(v) for n, v in check.convention.items()} or None)
        if method == "finite_difference" else None,
        "tolerance": tolerance_for(check, name, method) if name else None,
        "expect": check.expect if check.expect == "pass" else {"outcome": "fail", "why": check.expect_why},
        "expect_error": None if err is None else {"type": err.type, "match": err.match,
                                                  "explanation": err.explanation},
        "source": check.source,
    }


def _names(check: Check) -> list[str | None]:
    return [None] if check.expect_error else list(check.grad_inputs)


def plan(checks: Iterable[Check | Probe], *, environment_id: str | None = None) -> list[Record]:
    """Records of what will be checked, without calling any function."""
    obs = {"observed_gradient": None, "executed": False, "verdict": None, "outcome": None,
           "environment": environment_id}
    out = []
    for c in checks:
        if isinstance(c, Probe):
            out += [Record(probe_expectation(c, fact), dict(obs)) for fact in c.expected]
        else:
            out += [Record(expectation(c, n, m), dict(obs)) for m in c.methods for n in _names(c)]
    return out


def run(checks: Iterable[Check | Probe], *, environment_id: str | None = None,
        progress: Progress | None = None) -> list[Record]:
    """Execute every check through each of its methods; return all records."""
    records: list[Record] = []
    for check in checks:
        if isinstance(check, Probe):
            records.extend(_run_probe(check, environment_id))
        else:
            for method in check.methods:
                records.extend(_run_method(check, method, environment_id))
        if progress is not None:
            progress(check)
    return records


# -- probes: observed facts ---------------------------------------------------------

def _written_fact(value: Any) -> Any:
    return {"matches": value.pattern} if isinstance(value, Matches) else _written(value)


def _is_numeric(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    return isinstance(value, (list, tuple)) and bool(value) and all(_is_numeric(v) for v in value)


def probe_expectation(probe: Probe, fact: str) -> dict[str, Any]:
    """The expectation fields of one fact of a probe."""
    expected = probe.expected[fact]
    tol = None
    if _is_numeric(expected):
        tol = ({"atol": probe.tolerance.atol, "rtol": probe.tolerance.rtol, "why": probe.tolerance.why,
                "default": False, "basis": "set by the check (see why)"} if probe.tolerance else
               {"atol": None, "rtol": None, "why": None, "default": True,
                "basis": "default for the observed dtype (torch.testing.assert_close's table)"})
    return {
        "suite": probe.suite, "check": probe.name, "function": probe.source_text(), "inputs": {},
        "input": fact, "analytical_gradient": None, "expected_value": _written_fact(expected),
        "derivation": probe.derivation, "method": "observation", "stored_or_returned": "observed",
        "protocol": None, "step": None, "scheme": None, "convention": None, "tolerance": tol,
        "expect": probe.expect if probe.expect == "pass" else {"outcome": "fail", "why": probe.expect_why},
        "expect_error": None, "source": probe.source,
    }


def _run_probe(probe: Probe, environment_id: str | None) -> list[Record]:
    base: dict[str, Any] = {"executed": True, "environment": environment_id, "observed_gradient": None}
    reason = probe.skip_unless() if probe.skip_unless else None
    if reason:
        return [Record(probe_expectation(probe, f), {**base, "executed": False, "verdict": "skipped",
                                                     "outcome": "skipped", "note": reason})
                for f in probe.expected]
    start = time.perf_counter()
    try:
        facts: Any = dict(probe.run())
        raised = None
    except Exception as exc:
        facts, raised = {}, exc
    base["elapsed_s"] = round(time.perf_counter() - start, 6)
    out = []
    for fact, expected in probe.expected.items():
        exp = probe_expectation(probe, fact)
        if raised is not None:
            obs: dict[str, Any] = {"verdict": "error", "error": _error_info(raised)}
        elif fact not in facts:
            obs = {"verdict": "error", "error": {"type": "KeyError", "message": f"the probe reported no '{fact}'",
                                                 "traceback": ""}}
        else:
            obs = _judge_fact(expected, facts[fact], exp["tolerance"])
        obs["outcome"] = _outcome(obs["verdict"], probe)  # type: ignore[arg-type]
        out.append(Record(exp, {**base, **obs}))
    return out


def _judge_fact(expected: Any, observed: Any, tol: dict[str, Any] | None) -> dict[str, Any]:
    import torch

    obs: dict[str, Any] = {"observed_value": _written(observed) if not isinstance(observed, torch.Tensor)
                           else observed.detach().cpu().tolist()}
    if isinstance(observed, torch.Tensor):
        obs.update(shape=list(observed.shape), dtype=str(observed.dtype).removeprefix("torch."),
                   device=str(observed.device))
    if isinstance(expected, Matches):
        ok = isinstance(observed, str) and re.search(expected.pattern, observed) is not None
        return {**obs, "verdict": "pass" if ok else "fail"}
    if tol is not None and (_is_numeric(obs["observed_value"]) or isinstance(observed, torch.Tensor)):
        got = observed if isinstance(observed, torch.Tensor) else torch.tensor(observed, dtype=torch.float64)
        want = torch.tensor(expected, dtype=torch.float64)
        if tuple(got.shape) != tuple(want.shape):
            note = f"shape {tuple(got.shape)} observed, {tuple(want.shape)} expected"
            return {**obs, "verdict": "fail", "note": note}
        dtype = str(got.dtype).removeprefix("torch.")
        atol, rtol, basis = default_tolerance("observation", dtype if dtype in AUTOGRAD_TOLERANCES else "float64")
        if not tol["default"]:
            atol, rtol = tol["atol"], tol["rtol"]
        else:
            obs["tolerance_used"] = {"atol": atol, "rtol": rtol, "why": None, "default": True, "basis": basis}
        disc = compare(got, want, atol=atol, rtol=rtol)
        return {**obs, "discrepancy": disc, "verdict": "pass" if disc["mismatched"] == 0 else "fail"}
    same = type(observed) is type(expected) and observed == expected
    return {**obs, "verdict": "pass" if same else "fail"}


def _error_info(exc: BaseException) -> dict[str, Any]:
    return {"type": type(exc).__name__, "message": str(exc),
            "traceback": "".join(traceback.format_exception(exc)).rstrip()}


def _outcome(verdict: str, check: Check | Probe) -> str:
    if verdict == "error":
        return "errors"
    if verdict in ("inconclusive", "skipped"):
        return verdict
    if check.expect == "fail":
        return "expected failures" if verdict == "fail" else "unexpected passes"
    return "passed" if verdict == "pass" else "failed"


def _run_method(check: Check, method: str, environment_id: str | None) -> list[Record]:
    start = time.perf_counter()
    evidence: Evidence | None = None
    raised: BaseException | None = None
    try:
        evidence = CHANNELS[method](check)
    except Exception as exc:  # kept whole in the record, never re-raised
        raised = exc
    elapsed = time.perf_counter() - start
    base = {"executed": True, "environment": environment_id, "elapsed_s": round(elapsed, 6)}
    if check.expect_error is not None:
        return [Record(expectation(check, None, method), {**base, **_judge_error(check, raised)})]
    out = []
    for name in check.grad_inputs:
        exp = expectation(check, name, method)
        obs: dict[str, Any]
        if raised is not None:
            obs = {"observed_gradient": None, "verdict": "error", "error": _error_info(raised)}
        else:
            assert evidence is not None
            obs = _judge(exp, check, evidence)
        obs["outcome"] = _outcome(obs["verdict"], check)
        out.append(Record(exp, {**base, **obs}))
    return out


def _judge_error(check: Check, raised: BaseException | None) -> dict[str, Any]:
    err = check.expect_error
    assert err is not None
    if raised is None:
        verdict, note = "fail", f"expected {err.type} matching {err.match!r}, but nothing was raised"
    elif err.matches(raised):
        verdict, note = "pass", f"raised {type(raised).__name__} as expected"
        note += f": {err.explanation}" if err.explanation else ""
    else:
        verdict, note = "fail", (f"expected {err.type} matching {err.match!r}, but "
                                 f"{type(raised).__name__} was raised")
    obs: dict[str, Any] = {"observed_gradient": None, "verdict": verdict, "note": note,
                           "observed_error": None if raised is None else _error_info(raised)}
    obs["outcome"] = _outcome(verdict, check)
    return obs


def _judge(exp: dict[str, Any], check: Check, evidence: Evidence) -> dict[str, Any]:
    """Compare one channel's gradient with the expectation (already in *exp*)."""
    import torch

    name, method = exp["input"], exp["method"]
    if method == "taylor":
        return _judge_taylor(evidence.info["per_input"][name])
    grad = evidence.grads.get(name)
    expected = torch.tensor(exp["expected_value"], dtype=torch.float64)
    tol = exp["tolerance"]
    obs: dict[str, Any] = dict(evidence.info)
    atol: Any = tol["atol"]
    if method == "finite_difference":
        ev = evidence.info["per_input"][name]
        obs = {"evidence": ev, "fallback": evidence.info["fallback"] or ev["fallback"]}
        error = evidence.errors.get(name)
        if tol.get("derived") and error is not None:
            eps = torch.finfo(getattr(torch, ev["dtype"])).eps
            atol = SAFETY * error
            tol = obs["tolerance_used"] = {**tol, "atol": float(atol.max()), "rtol": 4 * eps}
        elif tol["default"] and (tol.get("derived") or evidence.info["fallback"]):
            # no error estimate (or evidence in the input's own dtype): the table for that dtype
            a, r, basis = default_tolerance(method, "float64", ev["dtype"])
            tol = obs["tolerance_used"] = {**tol, "atol": a, "rtol": r, "basis": basis}
            atol = a
    if grad is None:
        zero = bool((expected == 0).all())
        obs.update(observed_gradient=None, shape=None, dtype=None, device=None,
                   verdict="pass" if zero else "fail",
                   note="no gradient (None): the output does not depend on this input"
                        + ("; the expectation is zero" if zero else ", but the expectation is not zero"))
        return obs
    disc = compare(grad, expected, atol=atol, rtol=tol["rtol"])
    obs.update(
        observed_gradient=grad.to(torch.float64).tolist() if grad.dtype == torch.bfloat16 else grad.tolist(),
        shape=list(grad.shape), dtype=str(grad.dtype).removeprefix("torch."), device=str(grad.device),
        discrepancy=disc, verdict="pass" if disc["mismatched"] == 0 else "fail",
    )
    if method == "finite_difference":
        obs["dtype"] = obs["evidence"]["dtype"]
        obs["evidence_precision"] = _precision(obs["evidence"]["dtype"], evidence.errors.get(name))
        if disc["mismatched"]:
            obs.update(_explain_numeric(check, name, grad, expected, atol, tol, evidence))
    return obs


def _explain_numeric(check: Check, name: str, grad: Any, expected: Any, atol: Any, tol: dict[str, Any],
                     evidence: Evidence) -> dict[str, Any]:
    """Tell a wrong expectation from unreliable evidence at the mismatched elements.

    A kink (left and right slopes disagree) makes the numeric value meaningless there:
    ``inconclusive``, unless a declared subgradient convention matches the expectation
    and lies between the slopes. Evidence whose own error bound exceeds the tolerance,
    or is larger than 1e-3 of the value, is ``inconclusive`` too.
    """

    allowed = (atol + tol["rtol"] * expected.abs()).expand(expected.shape).reshape(-1)
    bad = ((grad - expected).abs().reshape(-1) > allowed).nonzero().flatten().tolist()
    error = evidence.errors.get(name)
    conv = check.convention_tensor(name)
    kinks: list[dict[str, Any]] = []
    noisy: list[dict[str, Any]] = []
    conventions: list[int] = []
    chosen = None
    for i in bad[:20]:
        left, right = evidence.slopes(name, i) if evidence.slopes else (float("nan"), float("nan"))
        exp_i = float(expected.reshape(-1)[i])
        if is_kink(left, right):
            lo, hi = min(left, right), max(left, right)
            if conv is not None and float(conv.reshape(-1)[i]) == exp_i and lo - 1e-6 <= exp_i <= hi + 1e-6:
                conventions.append(i)
                continue
            if chosen is None:
                chosen = _autograd_values(check, name)
            autograd = None if chosen is None else float(chosen.reshape(-1)[i])
            kinks.append({"index": list(unravel(i, tuple(expected.shape))), "left_slope": left,
                          "right_slope": right, "autograd": autograd, "expected": exp_i})
        elif error is not None and _undecidable(float(error.reshape(-1)[i]), float(grad.reshape(-1)[i]), exp_i):
            noisy.append({"index": list(unravel(i, tuple(expected.shape))),
                          "error_bound": float(error.reshape(-1)[i]), "allowed": float(allowed[i])})
    out: dict[str, Any] = {}
    if kinks:
        out["kinks"] = kinks
    if noisy:
        out["noisy"] = noisy
    explained = len(kinks) + len(conventions) + len(noisy)
    if len(bad) > 20 or explained < len(bad):
        return out  # a real mismatch remains: the verdict stays "fail"
    if kinks or noisy:
        parts = [f"kink at {tuple(k['index'])}: left slope {k['left_slope']:.6g}, right slope "
                 f"{k['right_slope']:.6g}, autograd chose {k['autograd']}" for k in kinks]
        parts += [f"numeric error bound {n['error_bound']:.3g} at {tuple(n['index'])} exceeds what the comparison "
                  f"allows ({n['allowed']:.3g})" for n in noisy]
        out.update(verdict="inconclusive", note="the numeric evidence cannot decide here: " + "; ".join(parts)
                   + ". Declare a subgradient convention (convention) or move the point.")
    else:
        out.update(verdict="pass", note=f"kink(s) at {len(conventions)} element(s) resolved by the declared "
                                        "convention, which lies between the one-sided slopes")
    return out


def _undecidable(error: float, numeric: float, expected: float) -> bool:
    """The evidence cannot settle this element: its own error bound explains the discrepancy,
    or it is too large (over 1e-3 of the value) to be evidence at all."""
    return abs(numeric - expected) <= SAFETY * error or error > 1e-3 * max(1.0, abs(expected))


def _precision(dtype: str, error: Any) -> str:
    """How precise the numeric evidence is, in words."""
    import math

    import torch

    eps = torch.finfo(getattr(torch, dtype)).eps
    text = f"{dtype} evidence (eps {eps:.1e}, about {int(-math.log10(eps))} significant digits)"
    if error is not None:
        text += f"; error bound at most {float(error.max()):.1e}"
    return text


def _autograd_values(check: Check, name: str) -> Any:
    from .channels import autograd_grad

    try:
        return autograd_grad(check).grads.get(name)
    except Exception:
        return None


def _judge_taylor(info: dict[str, Any]) -> dict[str, Any]:
    import math

    orders = [o for o in info["orders"] if not math.isnan(o)]
    obs: dict[str, Any] = {"observed_gradient": None, "evidence": info}
    if not orders:
        return {**obs, "verdict": "pass",
                "note": "every remainder is at rounding level: the expected gradient is exact along the direction"}
    median = sorted(orders)[len(orders) // 2]
    obs["order"] = median
    if median >= 1.8:
        return {**obs, "verdict": "pass", "note": f"remainder shrinks as O(h^{median:.2f}): the gradient is right"}
    if median <= 1.2:
        return {**obs, "verdict": "fail", "note": f"remainder shrinks only as O(h^{median:.2f}), not O(h^2): "
                                                  "the expected gradient is wrong along the direction"}
    return {**obs, "verdict": "inconclusive", "note": f"observed order {median:.2f} is neither 1 nor 2"}
