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
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .record import Allowance, Comparison, Discrepancy, Location, Outcome, Record, Verdict
from .tolerances import KINK_REL, SAFETY, SLOPE_REL, UNINFORMATIVE, ToleranceUsed

if TYPE_CHECKING:
    import torch

PASS, FAIL, INCONCLUSIVE = 0, 1, 2
NAMES: dict[int, Verdict] = {PASS: "pass", FAIL: "fail", INCONCLUSIVE: "inconclusive"}

# reason codes and their words (rendered with the values by :func:`comparison`)
(OK, OUTSIDE, OBS_NONFINITE, EVIDENCE_NONFINITE, KINK, DISCONTINUITY, COARSE, BEYOND_TOL, CONVENTION,
 OWN_ROUNDING, STAIRS) = range(11)
VERDICT_OF = (PASS, FAIL, FAIL, INCONCLUSIVE, INCONCLUSIVE, INCONCLUSIVE, INCONCLUSIVE, INCONCLUSIVE, PASS,
              INCONCLUSIVE, INCONCLUSIVE)
KINDS = {OK: "value", OUTSIDE: "value", OBS_NONFINITE: "nonfinite", EVIDENCE_NONFINITE: "nonfinite", KINK: "kink",
         DISCONTINUITY: "discontinuity", COARSE: "coarse", BEYOND_TOL: "coarse", CONVENTION: "kink",
         OWN_ROUNDING: "coarse", STAIRS: "coarse"}


@dataclass
class Judged:
    """Elementwise verdicts (int8: PASS, FAIL, INCONCLUSIVE) and reason codes, with what the allowance's
    terms are computed from (on demand: most entries pass, and their terms are never printed)."""

    verdict: torch.Tensor
    reason: torch.Tensor
    diff: torch.Tensor
    atol: float
    rtol: float
    ref: torch.Tensor  # the reference, float64, broadcast to the verdicts' shape
    evidence: torch.Tensor  # SAFETY times the error bounds (inf where a bound is NaN)
    all_pass: bool = False  # known without looking at the verdicts (the common case)
    plain: tuple[float, float, float] | None = None  # one passing value judged in Python floats: diff, ref, evidence

    @property
    def rtol_term(self) -> torch.Tensor:
        return self.rtol * self.ref.abs().nan_to_num(posinf=0.0)

    @property
    def allowed(self) -> torch.Tensor:
        return self.atol + self.rtol_term + self.evidence

    def undecided(self, where: torch.Tensor, reason: int) -> Judged:
        """These judgements, inconclusive for *reason* where *where* holds (a mask that broadcasts to the verdicts)."""
        import torch

        shape = self.verdict.shape
        return Judged(torch.where(where, INCONCLUSIVE, self.verdict.expand(shape)).to(torch.int8),
                      torch.where(where, reason, self.reason.expand(shape)).to(torch.int8), self.diff, self.atol,
                      self.rtol, self.ref, self.evidence)

    def take(self, index: torch.Tensor) -> Judged:
        """The judged entries at *index* (a boolean mask or flat indices), flattened."""
        def pick(t: torch.Tensor) -> torch.Tensor:
            return t.expand_as(self.verdict).reshape(-1)[index.reshape(-1)]

        return Judged(pick(self.verdict), pick(self.reason), pick(self.diff), self.atol, self.rtol, pick(self.ref),
                      pick(self.evidence), self.all_pass)

    def columns(self, keep: torch.Tensor) -> Judged:
        """The columns *keep* (a boolean mask) of a 2-D judged block."""
        def cols(t: torch.Tensor) -> torch.Tensor:
            return t.expand_as(self.verdict)[:, keep]

        return Judged(cols(self.verdict), cols(self.reason), cols(self.diff), self.atol, self.rtol, cols(self.ref),
                      cols(self.evidence), self.all_pass)


_ZERO: list[torch.Tensor] = []  # PASS and OK as one 0-dim int8 tensor, shared by the judged scalars (never written)


def _zero() -> torch.Tensor:
    import torch

    with torch.inference_mode(False):  # a normal tensor even if first asked for inside inference mode
        _ZERO.append(torch.zeros((), dtype=torch.int8))
    return _ZERO[0]


class _Plain(Judged):
    """One value that passed, judged in Python floats (:func:`_scalar_pass`): its diff, ref and evidence as 0-dim
    float64 tensors are made on first use (a quick stage's pass reads the floats, *plain*, only)."""

    def __init__(self, zero: torch.Tensor, tol: ToleranceUsed, plain: tuple[float, float, float]) -> None:
        self.verdict, self.reason, self.atol, self.rtol, self.all_pass, self.plain = zero, zero, tol.atol, tol.rtol, \
            True, plain

    def __getattr__(self, name: str) -> torch.Tensor:  # (only for an attribute not yet set)
        if name not in _PLAIN:
            raise AttributeError(name)
        import torch

        assert self.plain is not None
        value = torch.full((), self.plain[_PLAIN.index(name)], dtype=torch.float64)
        setattr(self, name, value)
        return value


_PLAIN = ("diff", "ref", "evidence")


def judge(observed: torch.Tensor | float, reference: torch.Tensor | float, tol: ToleranceUsed, *,
          observed_bound: torch.Tensor | float = 0.0, reference_bound: torch.Tensor | float = 0.0,
          scale: torch.Tensor | float | None = None, numeric: Literal["observed", "reference", None] = "reference",
          slopes: tuple[torch.Tensor, ...] | None = None, convention: torch.Tensor | None = None,
          precision: str = "float64") -> Judged:
    """Judge *observed* against *reference* elementwise (see the module docstring).

    *numeric* names the side that is numeric evidence: a non-finite value there is inconclusive,
    on the other side a failure. *scale* is the quantity's natural magnitude (at least |values|)
    against which an error bound is "too large"; *slopes* are one-sided slopes (NaN where not
    measured) that reveal kinks and discontinuities, (left, right) or (left, right, rounding bound of each);
    *convention* a declared subgradient.
    """
    import torch

    limit = UNINFORMATIVE.get(precision, UNINFORMATIVE["float64"])
    one = ((isinstance(observed, float) or observed.dim() == 0)
           and (isinstance(reference, float) or reference.dim() == 0))
    if one and tol.default and slopes is None:
        passed = _scalar_pass(float(observed), float(reference), tol, float(observed_bound), float(reference_bound),
                              0.0 if scale is None else float(scale), limit)
        if passed is not None:  # the same rule as below, in Python floats: one comparison costs few tensor ops
            return _Plain(_ZERO[0] if _ZERO else _zero(), tol, passed)
    if isinstance(observed, float):
        observed = torch.tensor(observed, dtype=torch.float64)
    if isinstance(reference, float):
        reference = torch.tensor(reference, dtype=torch.float64)
    obs = observed.detach()
    ref = reference.detach()
    obs = obs if obs.dtype == torch.float64 else obs.to(torch.float64)
    ref = ref if ref.dtype == torch.float64 else ref.to(torch.float64)
    if obs.shape != ref.shape:
        obs, ref = torch.broadcast_tensors(obs, ref)
    if isinstance(observed_bound, float) and observed_bound == 0.0:  # the common case: one side is exact
        bound = torch.as_tensor(reference_bound, dtype=torch.float64) * SAFETY
    else:
        bound = SAFETY * (torch.as_tensor(observed_bound, dtype=torch.float64)
                          + torch.as_tensor(reference_bound, dtype=torch.float64))
    # the common case first, in a few passes: every entry within its allowance, finite, and evidence
    # fine enough (its largest bound is small against the smallest natural size)
    diff = torch.sub(obs, ref).abs_()  # in place where possible: fresh large tensors are costly
    if tol.default and bool((diff <= ref.abs().mul_(tol.rtol).add_(tol.atol).add_(bound)).all()):
        top = float(bound.max()) if bound.numel() else 0.0
        size = torch.as_tensor(scale if scale is not None else 0.0, dtype=torch.float64)
        floor = float(size.min()) if size.numel() else 0.0
        # an infinite (or NaN) bound allows anything: it never accepts, whatever the scale (below: COARSE)
        if math.isfinite(top) and (top <= limit * floor or top == 0.0):
            zeros = torch.zeros(obs.shape, dtype=torch.int8)
            return Judged(zeros, zeros, diff, tol.atol, tol.rtol, ref, bound.expand_as(obs), True)
    bound = bound.expand_as(obs)
    evidence = bound.nan_to_num(nan=math.inf)
    same = obs == ref  # also makes +inf == +inf agree
    diff = torch.where(same, 0.0, diff).nan_to_num(nan=math.inf)
    tolerance = tol.atol + tol.rtol * ref.abs().nan_to_num(posinf=0.0)
    within = diff <= tolerance + evidence
    magnitude = torch.maximum(ref.abs(), obs.abs()).nan_to_num(nan=0.0, posinf=0.0)
    if scale is not None:
        magnitude = torch.maximum(magnitude, torch.as_tensor(scale, dtype=torch.float64))
    # a bound that is not finite (overflow, NaN) can decide nothing, even against an infinite scale
    coarse = (evidence > 0) & ~(torch.isfinite(bound) & (bound <= limit * magnitude))
    beyond = (within & (diff > tolerance) & (bound > tolerance)) if not tol.default else None
    if (bool(within.all()) and bool(torch.isfinite(diff).all()) and not bool(coarse.any())
            and (beyond is None or not bool(beyond.any()))
            and (numeric is None or bool(torch.isfinite(ref if numeric == "reference" else obs).all()))):
        zeros = torch.zeros(obs.shape, dtype=torch.int8)
        return Judged(zeros, zeros, diff, tol.atol, tol.rtol, ref, evidence, True)
    # the reason decides the verdict (VERDICT_OF); later rules take precedence over earlier ones
    reason = torch.where(within, torch.where(coarse, COARSE, OK), OUTSIDE).to(torch.int8)
    if beyond is not None:  # a tolerance the user asked for: evidence coarser than it cannot confirm it
        reason = torch.where(beyond & ~coarse, BEYOND_TOL, reason)
    if slopes is not None:
        num, other = (obs, ref) if numeric == "observed" else (ref, obs)
        reason = _slopes(reason, within, num, other, ref, slopes, convention, evidence)
    finite_obs, finite_ref = torch.isfinite(obs), torch.isfinite(ref)
    evidence_side = finite_obs if numeric == "observed" else finite_ref
    other_side = finite_ref if numeric == "observed" else finite_obs
    reason = torch.where(~evidence_side, EVIDENCE_NONFINITE, reason)
    reason = torch.where(evidence_side & ~other_side, OBS_NONFINITE, reason)
    # equal values agree, but equal infinities only where neither side is numeric evidence: an overflowed
    # difference quotient confirms nothing (x**400 at 5.855: autograd's inf "passed" full mode on two evaluations
    # that overflowed, directional mode said inconclusive)
    reason = torch.where(same if numeric is None else same & evidence_side, OK, reason).to(torch.int8)
    verdict = torch.tensor(VERDICT_OF, dtype=torch.int8)[reason.long()]
    return Judged(verdict, reason, diff, tol.atol, tol.rtol, ref, evidence)


def unbounded(value: float) -> float:
    """A difference or bound of :func:`judge` as reported: inf where it holds the largest float (judge makes NaN and
    +inf that with nan_to_num, so that they sort and compare). No difference of two float64 values is that large but
    an infinite one (1e308 - (-0.8e308) overflows to inf), so it is read back as inf: records said
    1.7976931348623157e+308 where the rows said inf."""
    return math.inf if value >= sys.float_info.max else value


def unbounded_tensor(t: torch.Tensor) -> torch.Tensor:
    """:func:`unbounded` for a tensor of them (divided by an element's size, the largest float read as 6e307)."""
    return t.masked_fill(t >= sys.float_info.max, math.inf)


#: blocks of at most this many values may be judged in Python floats (:func:`passes`)
SMALL = 256


def passes(observed: Sequence[float], reference: Sequence[float], reference_bound: Sequence[float],
           scale: Sequence[float], tol: ToleranceUsed, precision: str = "float64"
           ) -> tuple[list[bool], list[float]] | None:
    """:func:`judge`'s verdict, value by value, in Python floats, for a few values of numeric evidence
    (*reference*) judged at the default tolerance without slopes: whether each passes, and its difference
    as judge reports it for a pass (0 where the two are equal). judge's own rule in the same IEEE
    operations and order: equal finite values pass; otherwise both must be finite, within atol + rtol |reference|
    + SAFETY bound, with a finite bound at most UNINFORMATIVE times max(|reference|, |observed|, scale) (or
    zero). None for a tolerance the user set: judge decides."""
    if not tol.default:
        return None
    limit = UNINFORMATIVE.get(precision, UNINFORMATIVE["float64"])
    rtol, atol = tol.rtol, tol.atol
    inf = math.inf
    flags: list[bool] = []
    diffs: list[float] = []
    for o, r, b, s in zip(observed, reference, reference_bound, scale):
        if o == r and -inf < r < inf:  # (not +inf == +inf: the evidence overflowed, judge says inconclusive)
            flags.append(True)
            diffs.append(0.0)
            continue
        d = abs(o - r)
        if not (-inf < o < inf and -inf < r < inf):
            flags.append(False)
            diffs.append(d)
            continue
        b = b * SAFETY
        evidence = b if b == b else inf
        size = max(abs(r), abs(o))
        size = s if s != s or s > size else size  # NaN wins, as in torch.maximum
        fine = evidence == 0.0 or (-inf < b < inf and b <= limit * size)
        flags.append(fine and d <= (atol + rtol * abs(r)) + evidence)
        diffs.append(d)
    return flags, diffs


def _scalar_pass(obs: float, ref: float, tol: ToleranceUsed, obs_bound: float, ref_bound: float, scale: float,
                 limit: float) -> tuple[float, float, float] | None:
    """(diff, reference, evidence term) when one comparison passes by the rule of :func:`judge`; else None."""
    bound = SAFETY * (obs_bound + ref_bound)
    diff = abs(obs - ref)
    if not (math.isfinite(diff) and math.isfinite(bound)) or diff > tol.atol + tol.rtol * abs(ref) + bound:
        return None
    if bound > 0 and not bound <= limit * max(abs(ref), abs(obs), scale):
        return None
    return diff, ref, bound


def _slopes(reason: torch.Tensor, within: torch.Tensor, num: torch.Tensor, other: torch.Tensor, ref: torch.Tensor,
            slopes: tuple[torch.Tensor, ...], convention: torch.Tensor | None, evidence: torch.Tensor) -> torch.Tensor:
    """Kinks and discontinuities among the comparisons that fail: inconclusive, never fail. *num* is the
    large-step numeric evidence (*evidence*: SAFETY times its bound), *other* the value it is compared with, *ref*
    the reference side. A fourth tensor in *slopes* estimates the truncation error the slopes' extrapolation leaves
    (evaluate.slopes): the local slope and the large-step evidence differ by a jump only beyond it too.

    With the slopes' own rounding bound (a third tensor), the margins are relative to the values themselves
    (KINK_REL between the two slopes, SLOPE_REL between them and another value) plus what rounding and the
    large-step evidence's bound allow, however small the slopes: a kink in a term small against its output
    (9e4 + 0.01 relu(x), or along a direction weighted by 1 / |f|: slopes of 1e-5) is found. Without it, the
    margins are KINK_REL of max(1, |value|)."""
    import torch

    left, right = (s.to(torch.float64).expand_as(num) for s in slopes[:2])
    mid = (left + right) / 2
    measured = torch.isfinite(left) & torch.isfinite(right)
    if len(slopes) > 2:
        # each slope's rounding bound: on a smooth function the two differ by up to twice it (their extrapolation's
        # truncation is O(t^3)), and their midpoint is off by up to it
        noise = slopes[2].to(torch.float64).expand_as(num).nan_to_num(nan=math.inf)
        size = torch.maximum(left.abs(), right.abs())
        near = SLOPE_REL * mid.abs() + noise + evidence
        if len(slopes) > 3:  # near a singularity the slopes are off by their own truncation: not a jump
            near = near + slopes[3].to(torch.float64).expand_as(num).nan_to_num(nan=math.inf)
        num_near = KINK_REL * num.abs() + evidence
    else:
        noise = torch.zeros((), dtype=torch.float64)
        size = torch.maximum(left.abs(), right.abs()).clamp_min(1.0)
        near = KINK_REL * mid.abs().clamp_min(1.0)
        num_near = KINK_REL * num.abs().clamp_min(1.0)
    kink = measured & ((left - right).abs() > KINK_REL * size + 2 * noise)
    # the large-step evidence disagrees with the local slope, and the other side matches one of them: a jump
    # inside the large steps (the other side matches the local slope), or a function that is not
    # differentiable at the small step's scale, a staircase (a lower-precision cast inside: flat at 1e-8, the
    # intended slope over 1e-2, which the other side matches). Matching neither, it fails
    matches = ((other - mid).abs() <= near) | ((other - num).abs() <= num_near)
    jump = measured & ~kink & ((num - mid).abs() > near) & matches
    reason = torch.where(~within & kink, KINK, reason)
    reason = torch.where(~within & jump, DISCONTINUITY, reason)
    if convention is not None:
        conv = convention.to(torch.float64).expand_as(num)
        lo, hi = torch.minimum(left, right), torch.maximum(left, right)
        margin = KINK_REL * size + noise
        reason = torch.where(kink & (conv == ref) & (ref >= lo - margin) & (ref <= hi + margin), CONVENTION, reason)
    return reason


def rough(left: torch.Tensor, right: torch.Tensor, noise: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """Where one-sided slopes (each with its rounding bound *noise*) show a function that is not smooth at their
    step: both exactly 0 while a smooth function of slope *value* would have moved by more than their rounding
    (flat: a staircase, a lower-precision cast inside), or differing like a kink (KINK_REL plus twice that
    bound). A pass on evidence coarser than the default tolerance's promise stands only on a smooth function
    (full._shrink, directional.judge_along: the same rule in every mode); on a staircase, Ridders' steps of
    1e-2 average the stairs, and the estimate's bound, from float64's rounding, does not see them."""
    import torch

    left, right, noise = (t.to(torch.float64).expand_as(value) for t in (left, right, noise))
    measured = torch.isfinite(left) & torch.isfinite(right)
    flat = (left == 0) & (right == 0) & (value.abs() > noise)
    kink = (left - right).abs() > KINK_REL * torch.maximum(left.abs(), right.abs()) + 2 * noise
    return measured & (flat | kink)


class RecordsVerdict:
    """The verdict of a result that is a view over its records (``ga.check``, ``ga.compare``)."""

    records: Sequence[Record]

    @property
    def verdict(self) -> str:
        return verdict_of([r.verdict for r in self.records])

    @property
    def ok(self) -> bool:
        return self.verdict == "pass"


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
        if ref in (math.inf, -math.inf):
            return (f"the numeric evidence is {ref} here (the function overflows, or is undefined, within the step): "
                    f"it cannot confirm {obs}")
        return "the numeric evidence is not finite here (the function is undefined within the step)"
    if code in (KINK, CONVENTION) and slopes is not None:
        text = f"kink: left slope {slopes[0]:.6g}, right slope {slopes[1]:.6g}"
        if reference_kind == "numeric":
            text += f", autograd chose {obs:.6g}"
        return text + (", resolved by the declared convention" if code == CONVENTION else "")
    if code == DISCONTINUITY and slopes is not None:
        if slopes[0] == 0.0 == slopes[1] and ref != 0.0 and obs != 0.0:  # (autograd's exact 0: a jump's text)
            return (f"not differentiable at the small step's scale: the local one-sided slopes are exactly 0, the "
                    f"large-step evidence {ref:.6g} (a staircase: a lower-precision cast inside, or a small term "
                    "absorbed into a large one), so nothing decides")
        mid = (slopes[0] + slopes[1]) / 2
        if abs(obs - mid) > KINK_REL * max(1.0, abs(mid)):  # the observed value matches the large steps instead
            return (f"not differentiable at the small step's scale: the local one-sided slopes ({slopes[0]:.6g}, "
                    f"{slopes[1]:.6g}) differ from the large-step evidence ({ref:.6g}), which the observed value "
                    "matches (a step function at that scale, such as a lower-precision cast inside)")
        return (f"a discontinuity within the step: the local one-sided slopes ({slopes[0]:.6g}, {slopes[1]:.6g}) "
                f"match the observed value, the large-step evidence ({ref:.6g}) does not")
    if code == COARSE:
        return "the evidence's error bound is too large against the value to decide"
    if code == BEYOND_TOL:
        return "the evidence's error bound exceeds the tolerance asked for, so it cannot confirm it"
    if code == OWN_ROUNDING:
        return ("autograd's value is no larger than its own rounding (measured: it moves that much when the output "
                "weights are scaled by 0.9, 1.1 and 1.3; terms that cancel inside the backward), and the difference "
                "lies within that rounding and the evidence's bound: the evidence cannot decide below it")
    if code == STAIRS:
        return ("the function rounds its inputs far coarser than their dtype inside (measured: moves of 1e-9 to 1e-6 "
                "of them show a rounding of its values that moves of a few ulps do not; a small input added to a large "
                "constant, x + 1e5, is held to that constant's spacing), every finite difference carries that "
                "rounding over its step, and the difference lies within it: the evidence cannot decide below it")
    if code == OUTSIDE:
        return "outside the allowance"
    return ""


def comparison(j: Judged, flat: int, observed: torch.Tensor, reference: torch.Tensor, location: Location, *,
               reference_kind: str = "numeric", slopes: tuple[torch.Tensor, torch.Tensor] | None = None,
               kind: str | None = None) -> Comparison:
    """The located :class:`Comparison` of element *flat* of a judged block."""
    import torch

    obs = float(observed.reshape(-1)[flat]) if observed.numel() > 1 else float(observed.reshape(()))
    ref = float(reference.reshape(-1)[flat]) if reference.numel() > 1 else float(reference.reshape(()))
    code = int(j.reason.reshape(-1)[flat])
    pair = None
    if slopes is not None:
        left, right = (float(s.expand_as(j.verdict).reshape(-1)[flat]) for s in slopes)
        pair = (left, right) if math.isfinite(left) and math.isfinite(right) else None
    one = j.take(torch.tensor([flat]))
    allowance = Allowance(j.atol, float(one.rtol_term[0]), unbounded(float(one.evidence[0])),
                          unbounded(float(one.allowed[0])))
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
    rel = torch.where(diff == 0, torch.zeros_like(diff), unbounded_tensor(diff) / ref.abs())
    total = int(flat_v.numel())
    bad = (flat_v != PASS).nonzero().flatten()
    order = sorted(bad.tolist(), key=lambda i: (int(flat_v[i]) != FAIL, -float(diff[i])))
    worst = tuple(comparison(j, i, observed.expand_as(j.verdict), reference.expand_as(j.verdict), locate(i),
                             reference_kind=reference_kind, slopes=slopes) for i in order[:keep])
    if total:
        at = int(diff.argmax())
        max_rel, where = float(rel.nan_to_num(nan=math.inf, posinf=math.inf).max()), locate(at)
        max_abs = unbounded(float(diff[at]))
    else:
        max_abs, max_rel, where = 0.0, 0.0, None
    disc = Discrepancy(total, int((flat_v == FAIL).sum()), int((flat_v == INCONCLUSIVE).sum()), True, None,
                       max_abs, max_rel, where, worst)
    return disc, order
