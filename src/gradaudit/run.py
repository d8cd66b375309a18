"""Orchestration: Expectation -> evidence (channels) -> judge -> Records. Never raises on a mismatch;
every piece of evidence, passing or failing, becomes a record.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from . import expr as _expr
from . import judge as J
from .channels import CHANNELS, STORED_OR_RETURNED, Gathered
from .errors import EvaluationError, SpecError, said
from .findings import Findings
from .guard import CheckTimeout, expired, time_limit
from .numeric import RIDDERS_COLUMNS
from .record import ErrorInfo, Evidence, InputMeta, Record, Verdict
from .spec import Expectation, Matches, Probe
from .tolerances import TAYLOR_FAIL, TAYLOR_PASS, resolve

if TYPE_CHECKING:
    import torch

Progress = Callable[[Expectation | Probe], None]
KEEP = 20  # located comparisons kept in a record
DEFAULT_MAX_ELEMENTS = 100_000  # per check, summed over the inputs that require grad (see size_guard)


def written(value: Any) -> Any:
    """An expectation as written: the formula's text, a callable's name, or plain data."""
    if isinstance(value, _expr.Expr):
        return value.text
    if callable(value):
        return f"callable {getattr(value, '__qualname__', repr(value))}"
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


# -- the expectation part of a record (identical in plan and run) ----------------------------------

def expectation(check: Expectation, name: str | None, method: str) -> Record:
    """The planned record of one expectation x method x input."""
    inputs = tuple(InputMeta(n, s.written(), s.shape, s.dtype, s.device, s.requires_grad)
                   for n, s in check.inputs.items())
    protocol: tuple[str, ...] | None = None
    if method == "backward":
        protocol = tuple(check.protocol)
    elif method == "autograd.grad":
        protocol = ("forward", "autograd.grad")
    err = check.expect_error
    expected_value = None
    if name:
        try:
            expected_value = check.expected_tensor(name).tolist()
        except Exception:  # a formula that fails here fails again, with its traceback, when the check runs
            expected_value = None
    fd = method == "finite_difference"
    return Record(
        suite=check.suite, check=check.name, function=check.source_text(), inputs=inputs, input=name,
        analytical_gradient=written(check.expected[name]) if name else None, expected_value=expected_value,
        derivation=check.derivation, method=method, stored_or_returned=STORED_OR_RETURNED[method],
        protocol=protocol, step=check.step if fd else None, scheme=check.numeric_scheme if fd else None,
        convention=({n: written(v) for n, v in check.convention.items()} or None) if fd else None,
        tolerance=check.tolerance_for(name, method),
        expect=check.expect if check.expect == "pass" else {"outcome": "fail", "why": check.expect_why},
        expect_error=None if err is None else {"type": err.type, "match": err.match, "explanation": err.explanation},
        source=check.source, function_name=_function_name(check.function))


def _function_name(fn: Any) -> str | None:
    if isinstance(fn, _expr.Expr):
        return None
    from .naming import describe

    return describe(fn).name


def _names(check: Expectation) -> list[str | None]:
    return [None] if check.expect_error else list(check.grad_inputs)


def _written_fact(value: Any) -> Any:
    return {"matches": value.pattern} if isinstance(value, Matches) else written(value)


def _is_numeric(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    return isinstance(value, (list, tuple)) and bool(value) and all(_is_numeric(v) for v in value)


def probe_expectation(probe: Probe, fact: str) -> Record:
    """The planned record of one fact of a probe."""
    expected = probe.expected[fact]
    tol = None
    if _is_numeric(expected):
        tol = resolve("observation", probe.dtype or "float64", probe.tolerance)
    return Record(
        suite=probe.suite, check=probe.name, function=probe.source_text(), input=fact,
        expected_value=_written_fact(expected), derivation=probe.derivation, method="observation",
        stored_or_returned="observed", tolerance=tol,
        expect=probe.expect if probe.expect == "pass" else {"outcome": "fail", "why": probe.expect_why},
        source=probe.source)


def checks_of(checks: Any, what: str = "ga.run") -> list[Expectation | Probe]:
    """*checks* as a list, each an Expectation or a Probe; anything else a SpecError saying what was seen (a string,
    a number, None raised an AttributeError from inside the run)."""
    expected = (f"{what} takes a list of checks: ga.Expectation or ga.Probe objects, such as ga.read_ledger(path) "
                "returns")
    if isinstance(checks, (Expectation, Probe)):
        raise SpecError(f"{expected}; got one {type(checks).__name__}. Put it in a list: {what}([check]).",
                        field="checks")
    if isinstance(checks, (str, bytes, Mapping)) or not isinstance(checks, Iterable):
        hint = ""
        if isinstance(checks, str):
            hint = (f" To run a ledger file: {what}(ga.read_ledger({_shown(checks)}))."
                    if checks.lower().endswith((".json", ".toml")) else
                    f" An expression becomes a check as ga.Expectation(name, {_shown(checks)}, inputs={{...}}, "
                    "expected={...}); a Python function is checked by ga.check(fn, inputs).")
        raise SpecError(f"{expected}; got {type(checks).__name__} ({_shown(checks)}).{hint}", field="checks")
    out = list(checks)
    for i, c in enumerate(out):
        if not isinstance(c, (Expectation, Probe)):
            raise SpecError(f"{expected}; item {i} is {type(c).__name__} ({_shown(c)}). A ledger record as a dict "
                            "becomes checks through ga.read_ledger (a file) or gradaudit.ledger.parse_ledger(data, "
                            "where=...).", field="checks")
    return out


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def plan(checks: Iterable[Expectation | Probe], *, environment_id: str | None = None) -> list[Record]:
    """Records of what will be checked, without running any check (no backward, no finite differences)."""
    out = []
    for c in checks_of(checks, "ga.plan"):
        if isinstance(c, Probe):
            out += [dataclasses.replace(probe_expectation(c, fact), environment=environment_id) for fact in c.expected]
        else:
            out += [dataclasses.replace(expectation(c, n, m), environment=environment_id)
                    for m in c.methods for n in _names(c)]
    return out


def run(checks: Iterable[Expectation | Probe], *, environment_id: str | None = None,
        progress: Progress | None = None, timeout: float | None = None,
        max_elements: int | None = DEFAULT_MAX_ELEMENTS) -> list[Record]:
    """Execute every check through each of its methods; return all records.

    *timeout* (seconds) applies to each check without its own ``timeout``: on expiry the check gets
    the error verdict and the run goes on. *max_elements* refuses, before any work, a check whose
    inputs that require grad hold more elements than that (None: no limit); the cost model is in
    :func:`size_guard`.
    """
    from .spec import check_timeout

    checks = checks_of(checks)
    check_timeout(timeout)
    size_guard(checks, max_elements)
    records: list[Record] = []
    for check in checks:
        if isinstance(check, Probe):
            records.extend(_run_probe(check, environment_id, timeout))
        else:
            records.extend(_run_expectation(check, environment_id, timeout))
        if progress is not None:
            progress(check)
    return records


def size_guard(checks: Iterable[Expectation | Probe], max_elements: int | None) -> None:
    """Refuse a check with more than *max_elements* elements to differentiate, before any work.

    The cost model: finite differences estimate every element, 2·RIDDERS_COLUMNS evaluations of the
    function per element by default (Ridders), batched so that one call holds at most ~16 MB; for a
    function whose own cost grows with its N input elements (any sum), the time grows as N². backward
    and autograd.grad cost one forward and one backward each.
    """
    if max_elements is None:
        return
    if isinstance(max_elements, bool) or not isinstance(max_elements, int) or max_elements < 1:
        raise SpecError(f"max_elements must be a positive integer or None; got {max_elements!r}.",
                        field="max_elements")
    for check in checks:
        if isinstance(check, Probe):
            continue
        n = sum(math.prod(check.inputs[name].shape) for name in check.grad_inputs)
        if n > max_elements:
            evaluations = 2 * RIDDERS_COLUMNS * n
            raise SpecError(f"the check '{check.name}' differentiates {n} elements, more than the limit of "
                            f"{max_elements}: finite differences would evaluate its function about {evaluations:.2g} "
                            "times. Check a smaller input, or raise the limit (--max-elements N, or "
                            "ga.run(..., max_elements=N)) if that cost is intended.", field="max_elements")


def _run_expectation(check: Expectation, environment_id: str | None, timeout: float | None) -> list[Record]:
    """Every method of one check under its time limit; after a timeout the remaining methods get the
    error verdict without running."""
    limit = check.timeout if check.timeout is not None else timeout
    done: list[list[Record]] = []
    try:
        with time_limit(limit):
            for method in check.methods:
                done.append(_run_method(check, method, environment_id))
    except CheckTimeout as exc:
        for method in check.methods[len(done):]:
            done.append(_run_method(check, method, environment_id, raised=exc))
    return [r for part in done for r in part]


def error_info(exc: BaseException, where: str | None = None) -> ErrorInfo:
    if isinstance(exc, EvaluationError):
        where, exc = exc.where, exc.original
    return ErrorInfo(type(exc).__name__, said(exc),
                     "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip(), where)


def _done(base: Record, verdict: Verdict, expect: Any, **fields: Any) -> Record:
    return dataclasses.replace(base, executed=True, verdict=verdict,
                               outcome=J.outcome(verdict, expect if isinstance(expect, str) else "fail"), **fields)


# -- probes: observed facts ---------------------------------------------------------------------

def _run_probe(probe: Probe, environment_id: str | None, timeout: float | None = None) -> list[Record]:
    reason = probe.skip_unless() if probe.skip_unless else None
    if reason:
        return [dataclasses.replace(probe_expectation(probe, f), environment=environment_id, verdict="skipped",
                                    outcome="skipped", reason=reason) for f in probe.expected]
    start = time.perf_counter()
    raised: BaseException | None = None
    try:
        with time_limit(timeout):
            facts: Any = dict(probe.run())
    except (Exception, CheckTimeout) as exc:
        facts, raised = {}, exc
    elapsed = round(time.perf_counter() - start, 6)
    out = []
    for fact, expected in probe.expected.items():
        base = dataclasses.replace(probe_expectation(probe, fact), environment=environment_id, elapsed_s=elapsed)
        if raised is not None:
            where = "timeout" if isinstance(raised, CheckTimeout) else "probe"
            out.append(_done(base, "error", probe.expect, error=error_info(raised, where)))
        elif fact not in facts:
            out.append(_done(base, "error", probe.expect,
                             error=ErrorInfo("KeyError", f"the probe reported no '{fact}'", "", "probe")))
        else:
            out.append(_judge_fact(base, probe, expected, facts[fact]))
    return out


def _judge_fact(base: Record, probe: Probe, expected: Any, observed: Any) -> Record:
    import torch

    fields: dict[str, Any] = {"observed_value": observed.detach().cpu().tolist() if isinstance(observed, torch.Tensor)
                              else written(observed)}
    if isinstance(observed, torch.Tensor):
        fields.update(shape=tuple(observed.shape), dtype=str(observed.dtype).removeprefix("torch."),
                      device=str(observed.device))
    if isinstance(expected, Matches):
        ok = isinstance(observed, str) and re.search(expected.pattern, observed) is not None
        return _done(base, "pass" if ok else "fail", probe.expect, **fields)
    numeric_obs = isinstance(observed, torch.Tensor) or _is_numeric(fields["observed_value"])
    if base.tolerance is not None and numeric_obs:
        got = observed if isinstance(observed, torch.Tensor) else torch.tensor(observed, dtype=torch.float64)
        want = torch.tensor(expected, dtype=torch.float64)
        if tuple(got.shape) != tuple(want.shape):
            return _done(base, "fail", probe.expect, reason=f"shape {tuple(got.shape)} observed, "
                                                            f"{tuple(want.shape)} expected", **fields)
        # the declared dtype's, as planned (the expectation unchanged); else the observed one's
        tol = resolve("observation", probe.dtype or str(got.dtype).removeprefix("torch."), probe.tolerance)
        judged = J.judge(got, want, tol, numeric=None)
        f = Findings(-1, str(base.input), tuple(want.shape), [()], reference_kind="expected")
        f.add(judged, got, want, output=None, rows=torch.tensor(-1), cols=_flat_index(want))
        return _done(base, f.verdict, probe.expect, tolerance=tol, discrepancy=f.discrepancy(KEEP),  # type: ignore
                     **fields)
    same = type(observed) is type(expected) and observed == expected
    return _done(base, "pass" if same else "fail", probe.expect, **fields)


def _flat_index(t: torch.Tensor) -> torch.Tensor:
    import torch

    return torch.arange(t.numel()).reshape(t.shape)


# -- gradient expectations -----------------------------------------------------------------------

def _run_method(check: Expectation, method: str, environment_id: str | None,
                raised: BaseException | None = None) -> list[Record]:
    start = time.perf_counter()
    gathered: Gathered | None = None
    if raised is None:
        expired()
        try:
            gathered = CHANNELS[method](check)
        except (Exception, CheckTimeout) as exc:  # kept whole in the record, never re-raised
            raised = exc
    elapsed = round(time.perf_counter() - start, 6)
    if check.expect_error is not None:
        base = dataclasses.replace(expectation(check, None, method), environment=environment_id, elapsed_s=elapsed)
        return [_judge_error(base, check, raised)]
    out = []
    for name in check.grad_inputs:
        base = dataclasses.replace(expectation(check, name, method), environment=environment_id, elapsed_s=elapsed)
        if raised is not None:
            where = "timeout" if isinstance(raised, CheckTimeout) else "the function"
            out.append(_done(base, "error", check.expect, error=error_info(raised, where)))
            continue
        assert gathered is not None
        try:
            expected = check.expected_tensor(name)
        except Exception as exc:
            out.append(_done(base, "error", check.expect, error=error_info(exc, "the expectation")))
            continue
        out.append(_judge_gradient(base, check, name, method, gathered, expected))
    return out


def _judge_error(base: Record, check: Expectation, raised: BaseException | None) -> Record:
    err = check.expect_error
    assert err is not None
    original = raised.original if isinstance(raised, EvaluationError) else raised
    if original is None:
        verdict, note = "fail", f"expected {err.type} matching {err.match!r}, but nothing was raised"
    elif err.matches(original):
        verdict, note = "pass", f"raised {type(original).__name__} as expected"
        note += f": {err.explanation}" if err.explanation else ""
    else:
        verdict, note = "fail", f"expected {err.type} matching {err.match!r}, but {type(original).__name__} was raised"
    return _done(base, verdict, check.expect, reason=note,  # type: ignore[arg-type]
                 observed_error=None if raised is None else error_info(raised))


def _nonfinite_expectation(expected: torch.Tensor) -> str | None:
    import torch

    bad = (~torch.isfinite(expected)).reshape(-1).nonzero().flatten()
    if not bad.numel():
        return None
    from .findings import unravel

    i = int(bad[0])
    return (f"the expected gradient is {expected.reshape(-1)[i].item()} at element "
            f"{unravel(i, tuple(expected.shape))} ({len(bad)} non-finite element(s)): the formula is not finite "
            "at this point, so there is nothing to compare")


def _judge_gradient(base: Record, check: Expectation, name: str, method: str, ev: Gathered,
                    expected: torch.Tensor) -> Record:
    """Judge one channel's gradient against the expectation."""
    import torch

    if method == "taylor":
        return _judge_taylor(base, check, ev.info["per_input"][name])
    bad = _nonfinite_expectation(expected)
    if bad:
        return _done(base, "error", check.expect, error=ErrorInfo("ValueError", bad, "", "the expectation"))
    grad = ev.grads.get(name)
    fields: dict[str, Any] = {}
    tol = base.tolerance
    assert tol is not None
    if method == "finite_difference":
        per = ev.info["per_input"][name]
        tol = resolve("evidence_vs_expected", per["dtype"], check.tolerance, scheme=per["scheme"])
        bound = ev.bounds.get(name)
        notes = tuple(n for n in (ev.info.get("fallback"), per.get("fallback")) if n)
        fields["evidence"] = Evidence(
            "finite_difference", per["scheme"], per.get("step_rule"), tuple(per.get("step", ())), per["dtype"],
            None if bound is None else float(bound.max()) if bound.numel() else 0.0, per.get("evaluations"), notes,
            {"f": per["f"]})
        fields["tolerance"] = tol
    else:
        fields["evidence"] = Evidence(method, precision=check.inputs[name].dtype, details=ev.info)
    if grad is None:
        zero = bool((expected == 0).all())
        return _done(base, "pass" if zero else "fail", check.expect, **fields,
                     reason="no gradient (None): the output does not depend on this input"
                            + ("; the expectation is zero" if zero else ", but the expectation is not zero"))
    fields.update(observed_gradient=grad.to(torch.float64).tolist() if grad.dtype == torch.bfloat16 else grad.tolist(),
                  shape=tuple(grad.shape), dtype=str(grad.dtype).removeprefix("torch."),
                  # a finite-difference estimate is worked out on the CPU from evaluations on the input's device
                  device=ev.info["per_input"][name].get("device", str(grad.device)) if method == "finite_difference"
                  else str(grad.device))
    f = Findings(-1, name, tuple(expected.shape), [()], reference_kind="expected")
    cols = torch.arange(expected.numel()).reshape(expected.shape)
    if method != "finite_difference":
        judged = J.judge(grad, expected, tol, numeric=None)
        f.add(judged, grad, expected, output=None, rows=torch.tensor(-1), cols=cols)
        if method == "autograd.grad" and ev.info.get("stored_after_return", {}).get(name):
            # the returned channel's whole point: torch.autograd.grad returns the gradient and stores nothing, so a
            # .grad holding a value afterwards came from the function itself (a backward() inside it)
            return _done(base, "fail", check.expect, discrepancy=f.discrepancy(KEEP), **fields,
                         reason=f"torch.autograd.grad returned the gradient, but '{name}'.grad holds a value "
                                "afterwards: autograd.grad stores nothing, so the function itself wrote it (a "
                                "backward() inside the function?). Returned and stored gradients must stay apart")
        return _done(base, f.verdict, check.expect, discrepancy=f.discrepancy(KEEP), **fields)  # type: ignore
    spec = check.inputs[name]
    x = spec.tensor(requires_grad=False, dtype="float64").reshape(-1).abs().clamp_min(1.0)
    # the natural size a bound is judged against (J.judge: too large a bound cannot decide): for an expectation that is
    # not 0, the largest of the input's expectations; max(1, |f|) / max(1, |x|) for one that is 0 (a stationary point).
    # A function whose value a constant dominates, sum(x) + 1e10, made |f| / |x| 5e9 against a derivative of 1, and an
    # expectation 1% off passed on evidence that resolves 1e-3 of it; at sum(x) + 1e20 (x absorbed: the estimate is 0
    # within 4e8) an expectation of 1 passed as well as one of 0. (Each entry's own size made a right expectation of
    # 1e-3 beside one of 1 inconclusive, at (x*x).sum() + 1e8, where ga.check passes it.)
    largest = float(expected.abs().max()) if expected.numel() else 0.0
    scale = torch.where(expected != 0, largest, (max(1.0, abs(ev.info["per_input"][name]["f"])) / x).reshape(
        expected.shape))
    bound = ev.bounds.get(name)
    precision = ev.info["per_input"][name]["dtype"]
    judged = J.judge(grad, expected, tol, observed_bound=0.0 if bound is None else bound, numeric="observed",
                     scale=scale, precision=precision)
    pair = None
    if bool((judged.verdict != J.PASS).any()) and ev.slopes is not None:
        suspect = (judged.verdict != J.PASS).reshape(-1).nonzero().flatten()
        left, right, noise = ev.slopes(name, suspect)
        full_l = torch.full((expected.numel(),), float("nan"), dtype=torch.float64)
        full_r, full_n = full_l.clone(), full_l.clone()
        full_l[suspect], full_r[suspect], full_n[suspect] = left, right, noise
        pair = (full_l.reshape(expected.shape), full_r.reshape(expected.shape))
        conv = check.convention_tensor(name)
        judged = J.judge(grad, expected, tol, observed_bound=0.0 if bound is None else bound, numeric="observed",
                         scale=scale, slopes=(*pair, full_n.reshape(expected.shape)), convention=conv,
                         precision=precision)
    f.add(judged, grad, expected, output=None, rows=torch.tensor(-1), cols=cols, slopes=pair)
    fields["reason"] = _numeric_note(check, name, f)
    return _done(base, f.verdict, check.expect, discrepancy=f.discrepancy(KEEP), **fields)  # type: ignore[arg-type]


def _numeric_note(check: Expectation, name: str, f: Findings) -> str | None:
    """Why numeric evidence could not decide (kinks with autograd's choice, coarse evidence), or how a
    declared convention resolved a kink."""
    comps = [c for c in f.comparisons() if c.verdict != "fail" or c.kind != "value"]
    kinks = [c for c in comps if c.kind == "kink" and c.verdict == "inconclusive"]
    resolved = [c for c in comps if c.kind == "kink" and c.verdict == "pass"]
    coarse = [c for c in comps if c.kind in ("coarse", "discontinuity", "nonfinite") and c.verdict == "inconclusive"]
    chosen = None
    if kinks:
        from .channels import autograd_grad

        try:
            chosen = autograd_grad(check).grads.get(name)
        except Exception:
            chosen = None
    parts = []
    for c in kinks:
        assert c.slopes is not None and c.element is not None
        auto = None if chosen is None else float(chosen.reshape(-1)[_flat(c.element, chosen.shape)])
        parts.append(f"kink at {c.element}: left slope {c.slopes[0]:.6g}, right slope {c.slopes[1]:.6g}, "
                     f"autograd chose {auto}")
    parts += [f"{c.reason} at {c.element} (error bound allowance {c.allowance.evidence if c.allowance else 0:.3g})"
              for c in coarse]
    if parts:
        return ("the numeric evidence cannot decide here: " + "; ".join(parts)
                + ". Declare a subgradient convention (convention) or move the point.")
    if resolved:
        return (f"kink(s) at {len(resolved)} element(s) resolved by the declared convention, which lies between "
                "the one-sided slopes")
    return None


def _flat(index: tuple[int, ...], shape: Any) -> int:
    flat = 0
    for i, size in zip(index, tuple(shape)):
        flat = flat * size + i
    return flat


def _judge_taylor(base: Record, check: Expectation, info: dict[str, Any]) -> Record:
    import math

    orders = [o for o in info["orders"] if not math.isnan(o)]
    evidence = Evidence("taylor", "taylor remainder", "h0 = 1e-4 * max(1, |x|), halving", None, "float64",
                        details=info)
    if not orders:
        return _done(base, "pass", check.expect, evidence=evidence,
                     reason="every remainder is at rounding level: the expected gradient is exact along the direction")
    median = sorted(orders)[len(orders) // 2]
    details = {"order": median}
    if median >= TAYLOR_PASS:
        return _done(base, "pass", check.expect, evidence=evidence, details=details,
                     reason=f"remainder shrinks as O(h^{median:.2f}): the gradient is right")
    if median <= TAYLOR_FAIL:
        return _done(base, "fail", check.expect, evidence=evidence, details=details,
                     reason=f"remainder shrinks only as O(h^{median:.2f}), not O(h^2): the expected gradient is "
                            "wrong along the direction")
    return _done(base, "inconclusive", check.expect, evidence=evidence, details=details,
                 reason=f"observed order {median:.2f} is neither 1 nor 2")


__all__ = ["error_info", "expectation", "plan", "probe_expectation", "run"]
