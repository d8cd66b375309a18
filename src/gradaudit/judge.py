"""The one judge: pure functions from evidence + reference + tolerance to verdicts.

Nothing here evaluates a function. Every path (ledgers, ``ga.check`` in every mode, jvp, double
backward, ``expected=``, modules) hands its values and their error bounds to :func:`judge`:

- ``pass``: ``|observed - reference| <= atol + rtol |reference| + SAFETY (bounds)``, with
  evidence precise enough to mean something;
- ``fail``: outside that allowance (or a non-finite observed value where the reference is finite);
- ``inconclusive``: the evidence cannot decide — a kink (one-sided slopes differ), a discontinuity
  inside the step, evidence that is not finite, an error bound too large against the value, or
  (for a tolerance the user set) against the tolerance asked for.

>>> import torch
>>> from gradaudit.tolerances import resolve
>>> tol = resolve("autograd_vs_evidence", "float64")
>>> j = judge(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5]), tol, reference_bound=1e-12)
>>> verdict_of(j.verdict), int((j.verdict == FAIL).sum())
('fail', 1)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .record import Allowance, Comparison, Discrepancy, Location, Outcome, Verdict
from .tolerances import KINK_REL, SAFETY, UNINFORMATIVE, ToleranceUsed

if TYPE_CHECKING:
    import torch

PASS, FAIL, INCONCLUSIVE = 0, 1, 2
NAMES: dict[int, Verdict] = {PASS: "pass", FAIL: "fail", INCONCLUSIVE: "inconclusive"}

# reason codes and their words (rendered with the values by :func:`comparison`)
OK, OUTSIDE, OBS_NONFINITE, EVIDENCE_NONFINITE, KINK, DISCONTINUITY, COARSE, BEYOND_TOL, CONVENTION = range(9)
KINDS = {OK: "value", OUTSIDE: "value", OBS_NONFINITE: "nonfinite", EVIDENCE_NONFINITE: "nonfinite", KINK: "kink",
         DISCONTINUITY: "discontinuity", COARSE: "coarse", BEYOND_TOL: "coarse", CONVENTION: "kink"}


@dataclass
class Judged:
    """Elementwise verdicts (int8: PASS, FAIL, INCONCLUSIVE), reason codes and the allowance's terms."""

    verdict: torch.Tensor
    reason: torch.Tensor
    diff: torch.Tensor
    atol: float
    rtol_term: torch.Tensor
    evidence: torch.Tensor
    allowed: torch.Tensor


def _t(value: torch.Tensor | float, like: torch.Tensor) -> torch.Tensor:
    import torch

    return torch.as_tensor(value, dtype=torch.float64).expand_as(like)


def judge(observed: torch.Tensor, reference: torch.Tensor, tol: ToleranceUsed, *,
          observed_bound: torch.Tensor | float = 0.0, reference_bound: torch.Tensor | float = 0.0,
          scale: torch.Tensor | float | None = None, numeric: Literal["observed", "reference", None] = "reference",
          slopes: tuple[torch.Tensor, torch.Tensor] | None = None, convention: torch.Tensor | None = None,
          precision: str = "float64") -> Judged:
    """Judge *observed* against *reference* elementwise (see the module docstring).

    *numeric* names the side that is numeric evidence: a non-finite value there is inconclusive,
    on the other side a failure. *scale* is the quantity's natural magnitude (at least |values|)
    against which an error bound is "too large"; *slopes* are one-sided slopes (NaN where not
    measured) that reveal kinks and discontinuities; *convention* a declared subgradient.
    """
    import torch

    obs = observed.detach().to(torch.float64)
    ref = reference.detach().to(torch.float64)
    obs, ref = torch.broadcast_tensors(obs, ref)
    bound = SAFETY * (_t(observed_bound, obs) + _t(reference_bound, obs))
    same = obs == ref  # also makes +inf == +inf agree
    diff = torch.where(same, torch.zeros_like(obs), (obs - ref).abs())
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, math.inf), diff)
    rtol_term = tol.rtol * ref.abs().nan_to_num(posinf=0.0)
    tolerance = tol.atol + rtol_term
    evidence = bound.nan_to_num(nan=math.inf)
    allowed = tolerance + evidence
    within = diff <= allowed
    magnitude = torch.maximum(ref.abs(), obs.abs()).nan_to_num(nan=0.0, posinf=0.0)
    if scale is not None:
        magnitude = torch.maximum(magnitude, _t(scale, obs))
    coarse = ~(bound <= UNINFORMATIVE.get(precision, UNINFORMATIVE["float64"]) * magnitude) & (bound > 0)

    verdict = torch.full(obs.shape, FAIL, dtype=torch.int8)
    reason = torch.full(obs.shape, OUTSIDE, dtype=torch.int8)

    def put(mask: torch.Tensor, v: int, r: int) -> None:
        verdict[mask] = v
        reason[mask] = r

    put(within & ~coarse, PASS, OK)
    put(within & coarse, INCONCLUSIVE, COARSE)
    if not tol.default:  # a tolerance the user asked for: evidence coarser than it cannot confirm it
        put(within & ~coarse & (diff > tolerance) & (bound > tolerance), INCONCLUSIVE, BEYOND_TOL)
    if slopes is not None:
        num, other = (obs, ref) if numeric == "observed" else (ref, obs)
        _slopes(put, within, num, other, ref, slopes, convention)
    finite_obs, finite_ref = torch.isfinite(obs), torch.isfinite(ref)
    evidence_side = finite_obs if numeric == "observed" else finite_ref
    other_side = finite_ref if numeric == "observed" else finite_obs
    put(~same & ~evidence_side, INCONCLUSIVE, EVIDENCE_NONFINITE)
    put(~same & evidence_side & ~other_side, FAIL, OBS_NONFINITE)
    put(same, PASS, OK)
    return Judged(verdict, reason, diff, tol.atol, rtol_term, evidence, allowed)


def _slopes(put: Callable[[torch.Tensor, int, int], None], within: torch.Tensor, num: torch.Tensor,
            other: torch.Tensor, ref: torch.Tensor, slopes: tuple[torch.Tensor, torch.Tensor],
            convention: torch.Tensor | None) -> None:
    """Kinks and discontinuities among the comparisons that fail: inconclusive, never fail. *num* is the
    large-step numeric evidence, *other* the value it is compared with, *ref* the reference side."""
    import torch

    left, right = (s.to(torch.float64).expand_as(num) for s in slopes)
    measured = torch.isfinite(left) & torch.isfinite(right)
    size = torch.maximum(left.abs(), right.abs()).clamp_min(1.0)
    kink = measured & ((left - right).abs() > KINK_REL * size)
    mid = (left + right) / 2
    near = KINK_REL * mid.abs().clamp_min(1.0)
    # the large-step evidence disagrees with the local slope, which the other side matches
    jump = measured & ~kink & ((num - mid).abs() > near) & ((other - mid).abs() <= near)
    put(~within & kink, INCONCLUSIVE, KINK)
    put(~within & jump, INCONCLUSIVE, DISCONTINUITY)
    if convention is not None:
        conv = convention.to(torch.float64).expand_as(num)
        lo, hi = torch.minimum(left, right), torch.maximum(left, right)
        margin = KINK_REL * size
        ok = kink & (conv == ref) & (ref >= lo - margin) & (ref <= hi + margin)
        put(ok, PASS, CONVENTION)


def verdict_of(codes: torch.Tensor | Sequence[str]) -> Verdict:
    """fail if anything failed, else inconclusive if anything was, else pass (empty: pass)."""
    if not isinstance(codes, (list, tuple)):
        tensor: torch.Tensor = codes  # type: ignore[assignment]
        if bool(tensor.eq(FAIL).any()):
            return "fail"
        return "inconclusive" if bool(tensor.eq(INCONCLUSIVE).any()) else "pass"
    for v in ("error", "fail", "inconclusive"):
        if v in codes:
            return v  # type: ignore[return-value]
    if codes and all(c == "skipped" for c in codes):
        return "skipped"
    return "pass"


def outcome(verdict: Verdict, expect: str = "pass") -> Outcome:
    """The outcome counted in summaries: a verdict read against what the check expected."""
    if verdict == "error":
        return "errors"
    if verdict in ("inconclusive", "skipped", "planned"):
        return verdict  # type: ignore[return-value]
    if expect == "fail":
        return "expected failures" if verdict == "fail" else "unexpected passes"
    return "passed" if verdict == "pass" else "failed"


# -- located comparisons -------------------------------------------------------------------------

def reason_text(code: int, obs: float, ref: float, slopes: tuple[float, float] | None, *,
                reference_kind: str = "numeric") -> str:
    other = "the numeric evidence" if reference_kind == "numeric" else "the expectation"
    if code == OBS_NONFINITE:
        return f"the observed value is {obs} where {other} is finite"
    if code == EVIDENCE_NONFINITE:
        return "the numeric evidence is not finite here (the function is undefined within the step)"
    if code in (KINK, CONVENTION) and slopes is not None:
        text = f"kink: left slope {slopes[0]:.6g}, right slope {slopes[1]:.6g}"
        if reference_kind == "numeric":
            text += f", autograd chose {obs:.6g}"
        return text + (", resolved by the declared convention" if code == CONVENTION else "")
    if code == DISCONTINUITY and slopes is not None:
        return (f"a discontinuity within the step: the local one-sided slopes ({slopes[0]:.6g}, {slopes[1]:.6g}) "
                f"match the observed value, the large-step evidence ({ref:.6g}) does not")
    if code == COARSE:
        return "the evidence's error bound is too large against the value to decide"
    if code == BEYOND_TOL:
        return "the evidence's error bound exceeds the tolerance asked for, so it cannot confirm it"
    if code == OUTSIDE:
        return "outside the allowance"
    return ""


def comparison(j: Judged, flat: int, observed: torch.Tensor, reference: torch.Tensor, location: Location, *,
               reference_kind: str = "numeric", slopes: tuple[torch.Tensor, torch.Tensor] | None = None,
               kind: str | None = None) -> Comparison:
    """The located :class:`Comparison` of element *flat* of a judged block."""
    obs = float(observed.reshape(-1)[flat]) if observed.numel() > 1 else float(observed.reshape(()))
    ref = float(reference.reshape(-1)[flat]) if reference.numel() > 1 else float(reference.reshape(()))
    code = int(j.reason.reshape(-1)[flat])
    pair = None
    if slopes is not None:
        left, right = (float(s.expand_as(j.verdict).reshape(-1)[flat]) for s in slopes)
        pair = (left, right) if math.isfinite(left) and math.isfinite(right) else None
    rtol_term = float(j.rtol_term.reshape(-1)[flat])
    evidence = float(j.evidence.reshape(-1)[flat])
    allowance = Allowance(j.atol, rtol_term, evidence, float(j.allowed.reshape(-1)[flat]))
    return Comparison(location, ref, obs, allowance, NAMES[int(j.verdict.reshape(-1)[flat])],
                      kind or KINDS[code], reason_text(code, obs, ref, pair, reference_kind=reference_kind),
                      reference_kind, pair)


def summary(j: Judged, observed: torch.Tensor, reference: torch.Tensor, locate: Callable[[int], Location], *,
            keep: int, reference_kind: str = "numeric",
            slopes: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[Discrepancy, list[int]]:
    """Exact counts and the greatest differences of a judged block, and the flat indices of every
    comparison that did not pass, worst first (fail before inconclusive, larger difference first);
    the Discrepancy keeps the first *keep* of them as Comparisons."""
    import torch

    flat_v = j.verdict.reshape(-1)
    diff = j.diff.reshape(-1)
    ref = reference.detach().to(torch.float64).expand_as(j.verdict).reshape(-1)
    rel = torch.where(diff == 0, torch.zeros_like(diff), diff / ref.abs())
    total = int(flat_v.numel())
    bad = (flat_v != PASS).nonzero().flatten()
    order = sorted(bad.tolist(), key=lambda i: (int(flat_v[i]) != FAIL, -float(diff[i])))
    worst = tuple(comparison(j, i, observed.expand_as(j.verdict), reference.expand_as(j.verdict), locate(i),
                             reference_kind=reference_kind, slopes=slopes) for i in order[:keep])
    if total:
        at = int(diff.argmax())
        max_abs, max_rel, where = float(diff[at]), float(rel.nan_to_num(nan=math.inf).max()), locate(at)
    else:
        max_abs, max_rel, where = 0.0, 0.0, None
    disc = Discrepancy(total, int((flat_v == FAIL).sum()), int((flat_v == INCONCLUSIVE).sum()), True, None,
                       max_abs, max_rel, where, worst)
    return disc, order
