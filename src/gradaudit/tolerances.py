"""The one tolerance policy: ``Tolerance``, the dtype tables, the evidence-derived allowance and
every named floor the judge uses. No other module holds a number for judging.

Every comparison allows ``atol + rtol * |reference| + SAFETY * (error bounds of the evidence)``:
the user's (or the default) tolerance plus what the evidence itself cannot resolve.

>>> resolve("autograd_vs_evidence", "float64").rtol
1e-10
>>> Tolerance(1e-6, 1e-5, why="float32 kernel").why
'float32 kernel'
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Literal

from .errors import SpecError, hide_spec_errors

Kind = Literal["autograd_vs_expected", "evidence_vs_expected", "autograd_vs_evidence", "observation", "nondeterminism"]


def plain(value: Any) -> Any:
    """A NumPy scalar (np.int64(3), np.float32(0.5): what arithmetic on arrays returns) as the Python number it
    holds, so that the checks of numbers below take it and records and re-run lines write 3, not np.int64(3);
    anything else unchanged (a NumPy bool stays one, and is refused where a number is wanted)."""
    kind = type(value)
    if kind.__module__ == "numpy" and getattr(value, "shape", None) == () and hasattr(value, "item"):
        import numbers

        if isinstance(value, numbers.Real):  # (Integral is Real)
            return value.item()  # type: ignore[attr-defined]
    return value


@dataclass(frozen=True)
class Tolerance:
    """An explicit tolerance: both atol and rtol, and why it differs from the default."""

    atol: float
    rtol: float
    why: str | None = None

    def __post_init__(self) -> None:
        for name in ("atol", "rtol"):
            value = plain(getattr(self, name))
            object.__setattr__(self, name, value)  # (a NumPy scalar as the Python number it holds)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise SpecError(f"{name} must be a finite number >= 0; got {value!r}.", field="tolerance")
        if self.why is not None and (not isinstance(self.why, str) or not self.why.strip()):
            raise SpecError("'why' must be a sentence saying why this tolerance is right.", field="tolerance.why")


@dataclass(frozen=True)
class ToleranceUsed:
    """The tolerance one comparison was judged against, with its basis (stored in every record)."""

    atol: float
    rtol: float
    why: str | None
    default: bool
    basis: str
    evidence_factor: float | None = None  # the allowance adds this many times the evidence's error bound


@lru_cache(maxsize=64)
def with_rtol(tol: ToleranceUsed, rtol: float) -> ToleranceUsed:
    """*tol* with its rtol set to *rtol* (dataclasses.replace, made once per pair: it costs 15 us a call)."""
    return replace(tol, rtol=rtol)


# -- the tables ------------------------------------------------------------------------------------

#: (atol, rtol) for an autograd gradient against an exact expectation, keyed by the gradient's dtype
#: (torch.testing.assert_close's table).
AUTOGRAD_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-5, 1.3e-6),
    "float16": (1e-5, 1e-3),
    "bfloat16": (1e-5, 1.6e-2),
}
AUTOGRAD_BASIS = "default for {dtype} gradients (torch.testing.assert_close's table)"

#: (atol, rtol) for autograd against numeric evidence (ga.check, every mode), keyed by the dtype the
#: function was checked in. The evidence's own error bound is added on top (SAFETY times it).
CHECK_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (0.0, 1e-10),
    "float32": (1e-5, 1.3e-6),
    "float16": (1e-5, 1e-3),
    "bfloat16": (1e-5, 1.6e-2),
}
CHECK_BASIS = {
    "float64": ("float64 autograd agrees with exact derivatives to about 1e-13 relative; rtol 1e-10 leaves three "
                "orders for cancellation, and a backward off by a relative 1e-8 (or rounded through float32) "
                "still fails; plus 10 x the numeric evidence's own error bound"),
}
CHECK_BASIS_LOW = ("the function runs in {dtype} only (it refused float64): torch.testing.assert_close's {dtype} "
                   "table, plus 10 x the numeric evidence's own error bound")

#: (atol, rtol) for finite-difference evidence without an error estimate (central, one-sided),
#: keyed by the evidence's dtype, with the reason.
FD_TOLERANCES: dict[str, tuple[float, float, str]] = {
    "float64": (1e-6, 1e-6, "central differences in float64 at h = cbrt(eps)*max(1,|x|) err by about 1e-10 "
                "relative (truncation h^2|f'''|/6 plus rounding eps|f|/h); 1e-6 leaves four orders of margin"),
    "float32": (1e-3, 1e-3, "central differences in float32 err by about 1e-6 relative at best (rounding "
                "eps32|f|/h with eps32 = 1.2e-7)"),
    "float16": (1e-1, 1e-1, "float16 evidence carries about three significant digits"),
    "bfloat16": (1e-1, 1e-1, "bfloat16 evidence carries about two significant digits"),
}

EPS = {"float64": 2.220446049250313e-16, "float32": 1.1920928955078125e-07, "float16": 0.0009765625,
       "bfloat16": 0.0078125}

# -- named floors ----------------------------------------------------------------------------------

#: the allowance adds this many times the evidence's own error bound (estimates are typical sizes)
SAFETY = 10.0
#: evidence whose bound (times SAFETY) exceeds this fraction of the quantity's scale cannot decide, keyed
#: by the evidence's dtype: float64 differences reach 1e-10 relative, so 1e-3 marks a pathology (a
#: singularity, a jump); float32 differences reach 1e-4 at best, so only 10% makes them mute
UNINFORMATIVE = {"float64": 1e-3, "float32": 1e-1, "float16": 0.5, "bfloat16": 0.5}
#: one-sided slopes that differ by more than this mark a kink (relative to the larger slope plus twice their
#: rounding bound where it is known, else to max(1, |slope|)); where the bound is not known, the same margin
#: says whether a large-step reference disagrees with the local slope (a discontinuity; else SLOPE_REL)
KINK_REL = 1e-3
#: one-sided slopes carry their own rounding bound (10 noise / t), which widens the kink margins; where it exceeds
#: this fraction of the discrepancy they are to explain, they are measured again from a larger step t, at most
#: SLOPE_CAP max(1, |x|) (Ridders' first step is 1e-2): without it a smooth function whose output is large against
#: its slope (|f| = 9e4, slope 1.4, slopes at t = 1.5e-8 blurred by 0.1) was called a kink, and a gradient 1% off
#: was inconclusive
SLOPE_ROUNDING = 0.1
SLOPE_CAP = 1e-3
#: ... and slopes that differ like a kink by no more than their own truncation estimate explains (a step too
#: coarse for the function) are measured again from a step this many times smaller: their truncation falls as
#: t^2, their t^3 terms, which differ between the sides, as t^3; their rounding grows as 1 / t
SLOPE_FINER = 16.0
#: ... and, with that bound known, slopes within it plus this fraction of their value (their extrapolation's
#: truncation, O(t^2) with t = sqrt(eps) max(1, |x|), far below it unless a singularity lies within 1e-5) say
#: where the large-step evidence is off instead (a jump or a singularity inside its steps: |x|^1.5 1e-6 from 0,
#: Ridders from 1e-2 off by 1e-4 on a bound of 2e-6, the slopes within 4e-8 of autograd), and Ridders is asked again
#: from smaller steps; KINK_REL of the value there let it fail a correct gradient
SLOPE_REL = 1e-6
#: the default tolerance's promise: a float64 backward off by this relative amount fails in every mode. Full
#: mode's central differences resolve about 3e-9 max(1, |f|) / max(1, |x|) (with SAFETY); where that is
#: coarser than RESOLVE times an entry, the directional confirmation (Richardson at steps 100 times larger)
#: decides whether the accepted entries stand (and it decides too where an entry passed beyond the rtol on
#: the evidence's bound alone: full._beyond); where Ridders passes on a bound coarser than that, it starts
#: again from smaller steps
RESOLVE = 1e-8
#: ulps of |f| one evaluation of the function may be off by (the rounding of a difference quotient)
ROUNDING_ULPS = 8.0
#: relative rounding allowed for an expectation evaluated from a formula (its own float64 rounding)
EXPECTATION_ULPS = 4.0
#: a structure hypothesis (diagonal, band, affine) holds when two evaluations agree to this many ulps
STRUCTURE_ULPS = 64.0
#: ... and, for a band, when two random draws of its entries agree to this relative size (central
#: differences at the band's step agree far better; a wrong band hypothesis misses by O(1))
STRUCTURE_REL = 1e-7
#: two backward passes on the same inputs must agree exactly unless nondet_tol says otherwise
NONDETERMINISM_DEFAULT = (0.0, 0.0)
#: Taylor test: median remainder order at least this passes, at most TAYLOR_FAIL fails
TAYLOR_PASS, TAYLOR_FAIL = 1.8, 1.2


def eps(dtype: str) -> float:
    """Machine epsilon of a floating dtype named as in torch ('float64', ...)."""
    return EPS.get(dtype, EPS["float64"])


def resolve(kind: Kind, dtype: str, user: Tolerance | None = None, *, scheme: str | None = None) -> ToleranceUsed:
    """The tolerance that governs one comparison: the user's (with its why) or the default for
    *kind* at *dtype*, with its basis and whether the evidence bound is added."""
    if user is None:
        return _resolved(kind, dtype, scheme)
    atol, rtol, basis, factor = _default(kind, dtype, scheme)
    same = (float(user.atol), float(user.rtol)) == (atol, rtol)
    return ToleranceUsed(float(user.atol), float(user.rtol), user.why, same,
                         basis if same else "set by the check (see why)", factor)


@lru_cache(maxsize=256)
def _resolved(kind: Kind, dtype: str, scheme: str | None) -> ToleranceUsed:
    """The default tolerance for *kind* at *dtype* (made once: it is immutable)."""
    atol, rtol, basis, factor = _default(kind, dtype, scheme)
    return ToleranceUsed(atol, rtol, None, True, basis, factor)


@lru_cache(maxsize=256)
def _default(kind: Kind, dtype: str, scheme: str | None) -> tuple[float, float, str, float | None]:
    dtype = dtype if dtype in EPS else "float64"
    if kind == "autograd_vs_expected" or kind == "observation":
        atol, rtol = AUTOGRAD_TOLERANCES[dtype]
        return atol, rtol, AUTOGRAD_BASIS.format(dtype=dtype), None
    if kind == "autograd_vs_evidence":
        atol, rtol = CHECK_TOLERANCES[dtype]
        return atol, rtol, CHECK_BASIS.get(dtype, CHECK_BASIS_LOW.format(dtype=dtype)), SAFETY
    if kind == "nondeterminism":
        return (*NONDETERMINISM_DEFAULT, "two backward passes through the same graph must agree exactly", None)
    # evidence_vs_expected: a scheme with its own error estimate gets a derived allowance
    if scheme in ("ridders", "complex_step"):
        rtol = EXPECTATION_ULPS * eps(dtype)
        return 0.0, rtol, (f"derived from the evidence: {SAFETY:g} x the scheme's error bound (its estimate plus the "
                           f"rounding eps|f|/h) per element, plus rtol {EXPECTATION_ULPS:g} eps for the expectation's "
                           "own rounding"), SAFETY
    atol, rtol, why = FD_TOLERANCES[dtype]
    return atol, rtol, why, None


def require_why(user: Tolerance | None, defaults: list[ToleranceUsed], *, field: str = "tolerance",
                labels: list[str] | None = None) -> None:
    """Refuse a tolerance that differs from every applicable default without a written why. *labels*: what each
    default is for (a method), said beside it."""
    __tracebackhide__ = hide_spec_errors
    if user is None or user.why:
        return
    if not isinstance(user, Tolerance):
        raise SpecError(f"'{field}' must be a ga.Tolerance(atol, rtol, why=...); got {type(user).__name__}.",
                        field=field)
    pairs = sorted({(d.atol, d.rtol) for d in defaults})
    if any((float(user.atol), float(user.rtol)) != p for p in pairs):
        names: dict[tuple[float, float], list[str]] = {}
        for d, label in zip(defaults, labels or []):
            if label not in names.setdefault((d.atol, d.rtol), []):
                names[(d.atol, d.rtol)].append(label)
        shown = "; ".join((f"{' and '.join(names[(a, r)])}: " if names.get((a, r)) else "") + f"atol={a:g}, rtol={r:g}"
                          for a, r in pairs)
        raise SpecError(
            f"the tolerance atol={user.atol:g}, rtol={user.rtol:g} differs from the default ({shown}) and has no "
            "'why'. Tolerances are never changed silently: add why=\"...\" saying what makes this tolerance right "
            "(precision, step, a known approximation), or remove the tolerance to use the default.",
            field=f"{field}.why")


# -- the training-step doctor (ga.audit_training) ----------------------------------------------------

#: param_not_updated is reported only where the gradient was large enough that an SGD step with this small
#: a learning rate would move the largest weight by more than one ulp (|g|max * lr > eps * |p|max). Below
#: that, an unchanged value can be honest rounding (a tiny gradient against a large weight), not a bug;
#: Adam-like optimizers move every weight by about lr whatever the gradient, so they are not held to it.
#: Where the optimizer's lr is known (its param group's, at each step()), that lr is used instead, with
#: lr min(|g|max, 1) as the smallest update (a warmup's lr of 1e-8 cannot move a LayerNorm weight of 1.0).
MIN_VISIBLE_LR = 1e-4

#: A graph of an earlier step is "kept alive" when at least this many of its autograd nodes are still
#: reachable after a later step ends: one is enough (a kept loss holds its whole graph).
MIN_KEPT_NODES = 1


# -- the precision ladder (ga.compare) --------------------------------------------------------------

#: the statistic judged (and reported first): the mean absolute error against the truth. The max-abs ratio
#: that hand-written kernel tests use false-alarms a correct softmax at float32 (2.7x, both errors a few ulps);
#: the mean separates every measured case (tests/test_ladder.py's kernels, 10 seeds each)
LADDER_STATISTIC = "mean_abs"
#: the candidate's mean |error| against the float64 truth may be this many times the reference's own mean
#: |error| in the same dtype (FlashAttention's 2): correct kernels <= 1.56x, formula bugs >= 32x, low-precision
#: accumulation >= 3.85x at 16 bits (measured)
LADDER_RATIO = 2.0
#: plus this many ulps of the values' scale, eps(dtype) x mean|truth| (max|truth| for the max guard): below one
#: correctly rounded output (about 0.18 eps x mean|truth|), so it never hides a precision bug
LADDER_FLOOR_ULPS = 0.125
#: the max guard: the largest |error| may be this many times the reference's largest (correct <= 4.1x; a tail
#: tile never written >= 132x at bfloat16, where the mean dilutes it)
LADDER_MAX_RATIO = 16.0
#: the top rung: the candidate in float64 against the float64 reference, in ulps of float64 at the values' scale
#: (correct kernels <= 5.3; formula bugs >= 1e12)
LADDER_TOP_ULPS = 1024.0
