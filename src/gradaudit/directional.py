"""Directional checks: vᵀJu per input against the numeric derivative along u, from one batched
call; a disagreement is localized to the input, then to elements by bisection, without building
the Jacobian.

The evidence comes in stages, and only evidence with a full error bound can fail a check:

1. a quick Richardson extrapolation of central differences at h and 2h (4 evaluations, h near
   eps^(1/5) where its h^4 truncation meets rounding) accepts when autograd agrees to within the
   tolerance plus its rounding bound, and its truncation error, estimated from D(h) - D(2h)
   (:func:`gradaudit.numeric.truncation`), is within that allowance too; with several inputs, all of
   them are first moved at once (:func:`_together`; an input whose term that sum cannot resolve to RESOLVE
   is then checked on its own, and a failure there is its own). Where only that truncation estimate kept it from
   accepting, the stage is taken again at half its steps (2 evaluations each, up to HALVINGS times,
   :func:`halved`), its truncation then also read from the two stages' difference;
2. otherwise Ridders' tableau (8 more evaluations, with its own error estimate);
3. where Ridders disagrees, one-sided slopes along u at a small step (each extrapolated from t and
   t/2) tell a kink or a discontinuity inside the steps (inconclusive) from a wrong gradient (fail);
   after a jump, Ridders starts again from smaller steps;
4. where a projection passes, the elements whose terms its allowance cannot resolve (:func:`_split`)
   are projected again on their own.

The same judge (:func:`gradaudit.judge.judge`) decides every stage, in every mode.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

from . import evaluate as E
from . import judge as J
from .errors import said
from .evaluate import SMALL_BATCH, Info, Problem, batched_outputs
from .findings import Findings, unravel
from .numeric import extrapolate, ridders_tableau, truncation
from .record import Comparison, Location
from .render.common import WEIGHTED
from .tolerances import (
    KINK_REL,
    RESOLVE,
    ROUNDING_ULPS,
    SAFETY,
    SLOPE_CAP,
    SLOPE_FINER,
    SLOPE_REL,
    SLOPE_ROUNDING,
    UNINFORMATIVE,
    ToleranceUsed,
    with_rtol,
)

if TYPE_CHECKING:
    import torch

RIDDERS_COLUMNS = 4  # from h0 = 1e-2 * scale: extrapolation error far below rounding (eps|f|/h ~ 2e-13)
QUICK_STEP = 7e-4  # about eps^(1/5): Richardson's best step in float64 (BENCH_ANCHORS, section 4)
#: the same for inputs that are themselves float32 (a function that refuses float64 is checked in its inputs' dtype):
#: 7e-4 (eps32 / eps64)^(1/5). At float64's step the quick stage's rounding bound on float32 evidence was about 1e-3
#: of the value, and a backward 1% off at one element of a float32-only function passed directional mode (206 of 660
#: such bugs failed; 520 with this step and judge_along's confirmed rejection, and none of 660 right backwards).
#: Ridders' first step stays at 1e-2: larger ones cross the poles and kinks the one-sided slopes do not see (tan 0.02
#: from its pole, abs at 0.004: right backwards FAILED from 0.1)
QUICK_STEP_FLOAT32 = 0.039
CONVERGED = 1e-3  # how far apart (relative) the float32 quick stages at h and 3h/4 may be to stand against Ridders
HALVINGS = 4  # the quick stage's steps halved at most this many times (worth_halving) before Ridders
SPLIT = 1e-6  # a projection resolves an element when its allowance is at most this fraction of the element's term
#: how far the remainder of Richardson's extrapolation may exceed numeric.truncation's geometric model where one
#: term's own curvature is at issue (:func:`resolves`): for a term g(t) = (r + t)^p near its singularity, with
#: D(h) = g' (1 + a1 s + a2 s^2 + ...), s = (h / r)^2, the remainder is 4 |a2| s^2 |g'| and the model 4 a1^2 s^2 |g'|:
#: a2 / a1^2 is 1.8 for log, 3.5 for sqrt, 4.5 for |x|^1.5 (a reviewer's scan: a margin of 3 left one of its silent
#: 1e-8 bugs silent, 5 none). It is unbounded as p nears 1 or 2 (a1 -> 0), and several terms' truncations may cancel
CURVE_MARGIN = 5.0
SPLITS = 8  # elements a projection cannot resolve are judged again on their own, at most this many times
LOCATE = 32  # bisection locates at most this many elements per input; the count then says "at least"
EPS64 = 2.220446049250313e-16
_FLOAT_MAX = 1.7976931348623157e308  # the largest float64
#: Ridders' first step (times the scale), a projection's largest
RIDDERS_FIRST = 1e-2
#: elements a failing projection's steps carried across 0 are judged again (:func:`_uncross`) at steps whose largest
#: (Ridders' first) moves each by at most 1 / UNCROSS of its distance to 0: far enough from 0 that a singularity there
#: leaves Richardson's estimate within 1e-8 (at half that distance, |x|^1.5 at 1e-4 read 1.2e-8 of the projection off
#: on a bound of 2e-14, and the parts passed a backward 1e-8 off that the whole had failed), down to UNCROSS_FLOOR
UNCROSS = 20.0
UNCROSS_FLOOR = 1e-12
SHRINKS = 8  # Ridders restarted from h0/10, h0/100, ... while its evidence cannot decide (as full.SHRINKS)
UNDECIDED = (J.COARSE, J.DISCONTINUITY, J.EVIDENCE_NONFINITE)  # as full.UNDECIDED
#: the output weights' scalings whose backwards measure autograd's own rounding (:func:`own_rounding`): not powers of
#: two, which scale every rounding exactly (a backward is linear in its grad_output; only its rounding moves)
OWN_SCALINGS = (0.9, 1.1, 1.3)
#: the most that rounding in float64 is taken to move autograd's value by, in eps of the weighted outputs' size
#: (|f|, per unit of each moved element's step): what a float32 or bfloat16 backward moves by is far more
OWN_ULPS = 64.0


class Rounding(TypedDict):
    """The rounding terms of one projection (:func:`_rounding`), passed on to :func:`judge_along` as keywords."""

    perturbation: float
    dot_rounding: float


# values of phi at the steps, and the largest 2-norm of the terms summed into them: their
# rounding errors are independent, so eps * that norm is the typical rounding of phi
Batched = Callable[[list[float]], tuple[list[float], float]]


def ridders_steps(h0: float) -> list[float]:
    """The tableau's steps h0, h0/2, ...: +h and -h for each, evaluated in one batch."""
    hs = [h0 / 2**c for c in range(RIDDERS_COLUMNS)]
    return [t for h in hs for t in (h, -h)]


def ridders_scalar(phi_many: Batched, h0: float = 1e-2, perturbation: float = 0.0
                   ) -> tuple[float, float, int, float, float]:
    """Ridders' derivative at 0 of a scalar function, all points evaluated in one batch by
    *phi_many*: (value, error bound including the rounding of the last quotient, evaluations, that rounding
    times the step: a tableau from any step h has a bound of at least it / h, and that last step). *perturbation*
    is the rounding the moved inputs add to phi (eps |g x|_2: the points x + t u are rounded, and the quotients
    divide by t), as the quick stage and the slopes count it: near a pole it dominates (tan 1e-5 from pi/2, |g x|
    3e5 times |phi|), and without it Ridders from h0 = 1e-7 claimed a bound of 4e-13 of the value for an estimate
    6e-10 off, and a right backward failed. For a one-element input the steps are made exact instead
    (:func:`_snap`) and the term is 0."""
    h0, exact = _snap(phi_many, h0, RIDDERS_COLUMNS - 1)
    perturbation = 0.0 if exact else perturbation
    ts = ridders_steps(h0)
    values, size = phi_many(ts)
    scale = max([size] + [abs(v) for v in values])
    cols = [(values[2 * c] - values[2 * c + 1]) / (2 * ts[2 * c]) for c in range(RIDDERS_COLUMNS)]
    best, err, used = ridders_tableau(cols)
    rounding = 1.04 * (EPS64 * _unit(phi_many) * scale + perturbation)
    return best, err + rounding / ts[2 * (used - 1)], len(ts), rounding, ts[2 * (used - 1)]


def _unit(phi_many: Batched) -> float:
    """The rounding unit of phi's terms against float64's: the eps of its least precise output over float64's
    (set on phi_many by :func:`_with_unit`; 1 where every output is float64). A float32 or bfloat16 output of
    a float64 function rounds each term at its own eps, and judged at float64's the small steps' quotients
    of a step function (0, or a jump) were evidence fine enough to FAIL a right gradient."""
    return getattr(phi_many, "unit", 1.0)


def _with_unit(phi_many: Batched, problem: Problem) -> Batched:
    """*phi_many*, marked with the rounding unit of the problem's outputs (:func:`_unit`)."""
    import torch

    eps = max((torch.finfo(o.dtype).eps for o in problem.outputs if o.is_floating_point() or o.is_complex()),
              default=EPS64)
    if eps > EPS64:
        phi_many.unit = eps / EPS64  # type: ignore[attr-defined]
    return phi_many


def _with_noise(phi_many: Batched, problem: Problem, ws: list[Any], inputs: Sequence[int],
                moved: Callable[[], list[torch.Tensor | None]] | None = None) -> Batched:
    """*phi_many*, marked with how to measure its rounding (made only when asked, :func:`_measured`): the 2-norm
    of v_k times each output element's measured rounding (problem.noise: second differences when every input moves
    by a few ulps, 4 evaluations once per problem) where that exceeds SAFETY times its floor, ROUNDING_ULPS eps |f|
    (a function that rounds like its terms, far coarser than its value; below that the model of phi's rounding,
    eps times its terms, stands: counted there as well it widened every failure's bound tenfold, and bugs of 1e-7
    that only a projection's failure sent to Ridders passed), over the elements *moved* gives (per output a mask,
    None for all), or all of them. *ws*: the weights, tensors or Python floats of scalar outputs.

    And with whether any of the *inputs* phi moves shows rounding at moves from about 1e-9 to 1e-6 (problem.stairs: 20
    evaluations once per input, made only when asked) above SAFETY times problem.noise at some output element: only
    then does :func:`_stairs` measure phi's own, 21 evaluations per failing projection (a bisection's failing parts
    each took them where nothing rounds so)."""
    def rounds() -> bool:
        return any(bool((problem.stairs(j, k) > SAFETY * problem.noise(k)).any())
                   for j in inputs for k in range(len(problem.outputs)))

    def noise() -> float:
        import torch

        masks = None if moved is None else moved()
        total = 0.0
        for k, w in enumerate(ws):
            measured = problem.noise(k)
            out = problem.outputs[k]
            if out.is_floating_point():
                floor = ROUNDING_ULPS * torch.finfo(out.dtype).eps * out.detach().abs().reshape(-1).to(torch.float64)
                measured = torch.where(measured > SAFETY * floor, measured, 0.0)
            # (an output element not finite at the point has weight 0: 0 times its inf is left out)
            terms = (measured * (w if isinstance(w, float) else w.reshape(-1).to(torch.float64))).nan_to_num(nan=0.0)
            if masks is not None and masks[k] is not None:
                terms = terms[masks[k]]
            total += float(terms.square().sum())
        return math.sqrt(total)

    phi_many.noise = noise  # type: ignore[attr-defined]
    phi_many.rounds = rounds  # type: ignore[attr-defined]
    return phi_many


def _power_of_two(value: float) -> bool:
    """Whether |value| is a power of two (then t * value is exact for every t, barring underflow)."""
    return math.isfinite(value) and value != 0.0 and math.frexp(value)[0] in (0.5, -0.5)


def _with_exact(phi_many: Batched, xv: float, uv: float) -> Batched:
    """*phi_many* of a one-element input x moved along u, marked so that the steps are made exact (:func:`_snap`):
    where u is a power of two (:func:`_one_element_direction`) and x finite."""
    if math.isfinite(xv) and _power_of_two(uv):
        phi_many.exact = (xv, uv)  # type: ignore[attr-defined]
    return phi_many


def _snap(phi_many: Batched, t: float, halvings: int) -> tuple[float, bool]:
    """A step near *t* at which x + s t u is exact for s = +-1, +-1/2, ..., +-1/2^halvings (the points the
    quotients divide by, with no rounding of the moved input), and whether it is: for a one-element input marked by
    :func:`_with_exact`, t u rounded to a multiple of 2^halvings spacings of the floating-point numbers at |x| +
    |t u|. Elsewhere t as it is (and the moved inputs' rounding, *perturbation*, stays in the bounds). At 1 - 1e-7
    a step of 1e-10 lands up to half a spacing (5.6e-17) off, 5.6e-7 of the step, which near a singularity is far
    more than the tableau's own error: the bound that covered it (eps |g x| / t) let a backward off by 1e-6 pass."""
    grid = getattr(phi_many, "exact", None)
    if grid is None or not (t > 0.0 and math.isfinite(t)):
        return t, False
    xv, uv = grid
    size = abs(uv)
    spacing = math.ulp(abs(xv) + t * size) * 2.0 ** halvings
    snapped = max(round(t * size / spacing), 1) * spacing / size
    for i in range(halvings + 1):
        step = snapped / 2.0 ** i * uv
        if (xv + step) - xv != step or (xv - step) - xv != -step:
            return t, False  # (x + t u crosses a power of two upwards, where the spacing is coarser)
    return snapped, True


def _one_element_direction(xv: float, uv: float) -> float:
    """The direction of a one-element input: the sign of its draw times the power of two at most max(1, |x|) and
    above half of it (every step t u is then exact, and x + t u can be made exact: :func:`_snap`)."""
    return math.copysign(math.ldexp(0.5, math.frexp(max(abs(xv), 1.0))[1]), uv)


def scalar_batch(phi: Callable[[float], float]) -> Batched:
    def many(ts: list[float]) -> tuple[list[float], float]:
        values = [phi(t) for t in ts]
        return values, max(abs(v) for v in values)  # phi's terms are not visible: its value stands in
    return many


class Quick(NamedTuple):
    """One quick stage: Richardson's (4 D(h) - D(2h)) / 3 and what judging it needs, with what a stage at
    half its steps reuses (D(h), the steps, the terms' size, whether the moved inputs were exact)."""

    value: float  # the extrapolated derivative
    err: float  # its rounding bound
    natural: float  # the derivative's natural size (error bounds are judged against it)
    trunc: float  # the estimate of its truncation error (numeric.truncation)
    h: float
    d: float  # D(h), the central difference at h
    size: float  # the largest 2-norm of phi's terms at the points used
    exact: bool  # every point x +- t u exact (_snap): the moved inputs' rounding left out of err
    evaluations: int


def _richardson(d1: float, d2: float, h: float, size: float, perturbation: float, scale: float, unit: float,
                exact: bool, evaluations: int) -> Quick:
    """The quick stage's estimate from D(h) (*d1*) and D(2h) (*d2*); its rounding bound is (4 (1/h) + 1/(2h)) / 3
    ulps of phi (eps |phi's terms| + *perturbation*) per unit of phi's rounding."""
    err = 1.5 * (EPS64 * unit * size + perturbation) / h
    value = extrapolate(d1, d2, 4.0)  # (4 d1 - d2) / 3
    return Quick(value, err, max(1.0, size) / scale, float(truncation(d1 - d2, value)), h, d1, size, exact,
                 evaluations)


def quick_step(precision: str) -> float:
    """The quick stage's step (times the scale) for inputs of dtype *precision*."""
    return QUICK_STEP_FLOAT32 if precision in ("float32", "complex64") else QUICK_STEP


def quick_stage(phi_many: Batched, scale: float, perturbation: float, step: float = QUICK_STEP) -> Quick:
    """Richardson's (4 D(h) - D(2h)) / 3 of central differences at h = *step* * scale and 2h (4
    evaluations): the value, its rounding bound, the derivative's natural size (error bounds are judged
    against it) and the estimate of its truncation error (:func:`numeric.truncation`)."""
    double, exact = _snap(phi_many, 2 * step * scale, 1)
    h, perturbation = double / 2, 0.0 if exact else perturbation
    values, size = phi_many([h, -h, 2 * h, -2 * h])
    d1 = (values[0] - values[1]) / (2 * h)
    d2 = (values[2] - values[3]) / (4 * h)
    return _richardson(d1, d2, h, size, perturbation, scale, _unit(phi_many), exact, 4)


def halved(phi_many: Batched, quick: Quick, scale: float, perturbation: float) -> Quick:
    """The quick stage again at half its steps, (4 D(h/2) - D(h)) / 3 with D(h) kept (2 evaluations): where
    only its truncation estimate kept the stage from accepting (:func:`worth_halving`), that estimate falls by
    16 per halving while the rounding bound doubles, and 2 evaluations replace Ridders' 8 (pca_lowrank, whose
    random projections curve within 1e-3: 20 evaluations of a 2 ms function became 6). The moved inputs'
    rounding stays out of the bound only where the new points are exact too (:func:`_exact_at`)."""
    h = quick.h / 2
    exact = quick.exact and _exact_at(phi_many, h)
    values, size = phi_many([h, -h])
    d = (values[0] - values[1]) / (2 * h)
    finer = _richardson(d, quick.d, h, max(size, quick.size), 0.0 if exact else perturbation, scale, _unit(phi_many),
                        exact, quick.evaluations + 2)
    # where the h^4 term dominates, the two stages' values differ by 15/16 of the coarser one's: 1/15 of that
    # difference is this one's truncation, without numeric.truncation's model of geometric growth (next to
    # digamma's poles that read 11 times too small, at every step). And they must differ about as the coarser
    # stage's estimate said they would (at least 1/16 of it; that model reads up to 10/3 too large for sin or exp,
    # 8 times for pca_lowrank): a difference far below it means the estimates do not describe this function at
    # these steps (a polynomial built so that its h^4 and h^6 terms cancel there, a reviewer found, left both
    # stages 1e-8 off, their difference 4e-16 and both estimates near 0), and the stage does not accept
    ahead = abs(quick.value - finer.value)
    trunc = max(finer.trunc, ahead / 15) if ahead >= quick.trunc / 16 else math.inf
    return finer._replace(trunc=trunc)


def _exact_at(phi_many: Batched, t: float) -> bool:
    """Whether x +- t u is exact, for a one-element input marked by :func:`_with_exact` (as :func:`_snap` asks)."""
    grid = getattr(phi_many, "exact", None)
    if grid is None:
        return False
    xv, uv = grid
    step = t * uv
    return (xv + step) - xv == step and (xv - step) - xv == -step


class Stage(NamedTuple):
    """A quick stage's judgement: the judge's own where it passed, else None (a quick stage only accepts: what
    it does not accept is judged again on other evidence), and its disagreement and allowance as floats."""

    judged: J.Judged | None
    diff: float
    allowed: float


def _stage(observed: float, reference: float, tol: ToleranceUsed, *, observed_bound: float, reference_bound: float,
           scale: float, precision: str) -> Stage:
    """Judge one quick stage. A comparison of two finite, different values that the judge's own rule in Python
    floats (J._scalar_pass, what J.judge runs first) does not pass is not handed to the judge's tensor path: it
    cannot pass there either, and a quick stage's failure is never reported (about 0.3 ms saved per stage that
    does not accept: digamma's halvings, bisection's parts). Its difference and allowance are the terms the
    judge computes (|o - r|; atol + rtol |r| + SAFETY (both bounds))."""
    if (tol.default and observed != reference and math.isfinite(observed) and math.isfinite(reference)
            and J._scalar_pass(observed, reference, tol, observed_bound, reference_bound, scale,
                               UNINFORMATIVE.get(precision, UNINFORMATIVE["float64"])) is None):
        bound = SAFETY * (observed_bound + reference_bound)
        # as the judge's evidence term: bound.nan_to_num(nan=inf), which also makes +inf the largest float
        evidence = math.inf if bound != bound else _FLOAT_MAX if bound == math.inf else bound
        return Stage(None, abs(observed - reference), tol.atol + tol.rtol * abs(reference) + evidence)
    judged = J.judge(observed, reference, tol, observed_bound=observed_bound, reference_bound=reference_bound,
                     scale=scale, precision=precision)
    if judged.plain is not None:  # a pass judged in Python floats
        return Stage(judged, judged.plain[0], _allowed(judged))
    return Stage(judged if int(judged.verdict) == J.PASS else None, float(judged.diff.max()), _allowed(judged))


def worth_halving(stage: Stage, quick: Quick, halvings_left: int) -> bool:
    """Whether the quick stage at smaller steps could accept: it did not accept (:func:`settled`) only because
    its truncation estimate exceeds the allowance, that estimate divided by 16 per halving left would be within
    it, and the disagreement is no larger than the allowance plus 16 times that estimate (a larger one is not
    the steps' truncation: Ridders and the slopes judge it)."""
    allowed, trunc = stage.allowed, quick.trunc
    return (halvings_left > 0 and math.isfinite(trunc) and trunc > allowed
            and trunc <= allowed * 16.0 ** halvings_left and stage.diff <= allowed + 16 * trunc)


def settled(stage: Stage, trunc: float) -> bool:
    """The quick stage accepts: its judge passed and the truncation estimate is within the allowance (else
    a gradient error of that size could hide in the extrapolated value)."""
    return stage.judged is not None and trunc <= stage.allowed


def _scheme(quick: Quick) -> str:
    """The quick stage's scheme as a record names it: its steps, relative to the first stage's h."""
    halvings = (quick.evaluations - 4) // 2
    if not halvings:
        return "richardson (h, 2h)"
    return f"richardson (h/{2 ** halvings}, {'h' if halvings == 1 else f'h/{2 ** (halvings - 1)}'})"


def _one_sided(phi_many: Batched, t: float, perturbation: float, resolve: float, cap: float
               ) -> tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], int]:
    """The one-sided slopes of phi at 0, left and right, each extrapolated from steps t and t/2
    (2 D(t/2) - D(t)), with the rounding bound of each (10 (eps |phi's terms| + *perturbation*) / t), and the
    evaluations made: a smooth function's two agree to O(t^3) plus that bound, a kink's differ by the jump in
    slope. Plain one-sided quotients differ by t |phi''| on a smooth function, which near a singularity (sqrt at
    3e-6, t = 1.5e-8) exceeds KINK_REL of the slope: a correct gradient was called a kink. Where the bound
    exceeds *resolve* (SLOPE_ROUNDING of the discrepancy the slopes are to explain, or of the finest margin the
    judge uses with them, SLOPE_REL of the value, whichever is larger), they are measured once more
    from the step at which it would not, at most *cap* (as evaluate.slopes does in full mode). The fourth value
    estimates what the extrapolation leaves of the truncation error (as evaluate.slopes gives it); slopes that
    differ like a kink by no more than it explains are measured again from t / SLOPE_FINER, as there."""
    import torch

    given = perturbation

    def at(t: float) -> tuple[float, float, float, float, float]:
        """The two extrapolated slopes from exact steps near t, their truncation estimate (as evaluate.slopes:
        f''' t^2 / 8), their rounding bound, and the step taken."""
        t, exact = _snap(phi_many, t, 1)
        (right, half_right, zero, half_left, left), size = phi_many([t, t / 2, 0.0, -t / 2, -t])
        slope_left = 2 * ((zero - half_left) / (t / 2)) - (zero - left) / t
        slope_right = 2 * ((half_right - zero) / (t / 2)) - (right - zero) / t
        trunc = abs((right - left) / (2 * t) - (half_right - half_left) / t)
        noise = 10 * (EPS64 * _unit(phi_many) * size + (0.0 if exact else given)) / t
        return slope_left, slope_right, trunc, noise, t

    slope_left, slope_right, trunc, noise, t = at(t)
    used = 5
    if t < cap and noise > resolve:
        slope_left, slope_right, trunc, noise, t = at(min(t * noise / resolve, cap))  # the bound scales as 1 / t
        used += 5
    # slopes that differ like a kink by no more than their truncation explains: measured again from t / SLOPE_FINER,
    # and kept where they look like a smooth function's (as evaluate.slopes does in full mode)
    apart, margin = abs(slope_left - slope_right), KINK_REL * max(abs(slope_left), abs(slope_right))
    if margin + 2 * noise < apart <= margin + 2 * noise + 2 * trunc and 2 * SLOPE_FINER * noise < margin:
        left2, right2, trunc2, noise2, _ = at(t / SLOPE_FINER)
        used += 5
        moved = abs((left2 + right2) / 2 - (slope_left + slope_right) / 2)
        if 4 * trunc2 <= trunc and moved <= trunc + 2 * (noise + noise2):
            slope_left, slope_right, noise, trunc = left2, right2, noise2, trunc2
    as_tensor = [torch.tensor(v, dtype=torch.float64) for v in (slope_left, slope_right, noise, trunc)]
    return (as_tensor[0], as_tensor[1], as_tensor[2], as_tensor[3]), used


def judge_along(phi_many: Batched, analytic: float, tol: ToleranceUsed, *, scale: float, perturbation: float,
                dot_rounding: float, precision: str = "float64", split_early: bool = False,
                own: Callable[[float], float | None] | None = None) -> dict[str, Any]:
    """Judge *analytic* against d phi/dt at 0 in stages (see the module docstring).

    *scale* sets the steps (max(1, |x|)); *perturbation* is the rounding the moved inputs add to
    phi (eps |g x|_2; left out where the steps are exact, :func:`_snap`); *dot_rounding* bounds the rounding of
    *analytic*. Returns the verdict code,
    the reason code, the numeric value, its error bound, the allowance and the scheme. With *split_early* (a part
    of a bisection), a quick stage that disagrees by more than its truncation estimate can explain is not judged
    further: the verdict is then None (no verdict; :func:`_bisect` looks inside the part instead). A disagreement
    truncation explains (a part holding an element near a pole) gets the whole judgement, as every other does.
    """

    obs = float(analytic)
    shown = analytic  # the autograd value the verdict compares (the moved output elements' share: _still)
    clash = False  # Ridders from smaller steps disagreed with the larger ones' estimate beyond its bound
    pair = None  # the one-sided slopes, where measured
    first: tuple[float, float, float] | None = None  # Ridders' first tableau: its estimate, bound and first step
    def quick_halved(step: float) -> tuple[Quick, Stage]:
        """The quick stage at *step*, taken again at h/2, h/4, ... where only its truncation estimate kept it from
        accepting."""
        q = quick_stage(phi_many, scale, perturbation, step)
        st = _stage(obs, q.value, tol, observed_bound=dot_rounding, reference_bound=q.err, scale=q.natural,
                    precision=precision)
        for left in range(HALVINGS, 0, -1):
            if settled(st, q.trunc) or not worth_halving(st, q, left):
                break
            q = halved(phi_many, q, scale, perturbation)
            st = _stage(obs, q.value, tol, observed_bound=dot_rounding, reference_bound=q.err, scale=q.natural,
                        precision=precision)
        return q, st

    quick, stage = quick_halved(quick_step(precision))
    spent = 0  # the evaluations of a float32 quick stage set aside
    # (float32 inputs) a rejection at the float32 step, beyond 16 times its truncation estimate, that a second quick
    # stage at 3/4 of those steps repeats within both their bounds: finer evidence than Ridders' from 1e-2, whose
    # quotients round at float32's eps / h. A kink inside the steps moves the estimate as 1/h (huber's, 1e-3 wide:
    # halving the steps doubled it), and steps of a whole period read a flat function (sin at 161: 0.039 * 161 =
    # 2 pi) at h, h/2 and 2h alike, not at 3/4 of them. Anything else the float32 step leaves open goes the float64
    # step's way, as before it (cdist of points 5e-4 apart: its cone's tip inside the float32 steps, and Ridders from
    # 1e-2 across it FAILED a right backward). The two must also agree to CONVERGED of their value: across huber's
    # kinks at +-1e-3 a projection's estimates were 2e-4 and 25% apart, within their bounds of 4.5e-5
    confirmed: tuple[Quick, float] | None = None
    if precision in ("float32", "complex64") and not settled(stage, quick.trunc):
        if (stage.judged is None and math.isfinite(quick.trunc) and math.isfinite(quick.value)
                and stage.diff > stage.allowed + 16 * quick.trunc):
            three_quarters = quick_stage(phi_many, scale, perturbation, 0.75 * quick_step(precision))
            spent += three_quarters.evaluations
            bounds = []
            for stage_ in (quick, three_quarters):
                noise = _measured(phi_many, {"error_bound": stage_.err + stage_.trunc}, stage_.h)
                bounds.append(stage_.err + stage_.trunc if noise is None else noise)
            apart = abs(three_quarters.value - quick.value)
            if math.isfinite(apart) and apart <= sum(bounds) and apart <= CONVERGED * abs(quick.value):
                confirmed = (quick, max(bounds))
        if confirmed is None:
            spent += quick.evaluations
            quick, stage = quick_halved(QUICK_STEP)
    # the outputs' own rounding in the quick stage's bound, SAFETY times: what any projection moving the same
    # outputs at these steps carries, however it moves the inputs (full mode's confirmation along a few columns)
    floor = SAFETY * 1.5 * EPS64 * _unit(phi_many) * quick.size / quick.h
    still = getattr(phi_many, "still", None)  # (along part of an input: _still)
    moved_share: tuple[float, float, float] | None = None
    if stage.judged is None and still is not None:
        # a disagreement the output elements no step has moved may explain: their share of autograd's vᵀJu left
        # out where they can hold it, the moved elements' share is what the quick stage measures; it may accept
        # that (multi_head_attention_forward's sample 0: 4 projections, along columns of four of its inputs, whose
        # quick stages disagreed by up to 5e-16 there, each then judged by Ridders, 25 evaluations, before the same
        # share passed it)
        moved_share = still(2 * quick.h)
        if moved_share is not None:
            moved_stage = _stage(moved_share[1], quick.value, tol, observed_bound=dot_rounding,
                                 reference_bound=quick.err, scale=quick.natural, precision=precision)
            if settled(moved_stage, quick.trunc):
                stage, shown = moved_stage, moved_share[1]
            else:
                moved_share = None
    natural = quick.natural
    # ("reach": the largest step of the estimate the verdict rests on, in units of the direction: _uncross)
    result: dict[str, Any] = {"numeric": quick.value, "error_bound": quick.err, "scheme": _scheme(quick),
                              "evaluations": quick.evaluations + spent, "rounding_floor": floor, "reach": 2 * quick.h}
    if moved_share is not None:
        result.update(autograd_unmoved=moved_share[0], autograd_moved=moved_share[1], unmoved_bound=moved_share[2])
    # a quick stage that accepted on a bound coarser than the promise, along a whole input: Ridders may refute it
    # or refine it, never leave it undecided (below)
    coarse_quick = (stage.judged is not None and settled(stage, quick.trunc) and still is None
                    and _coarse_quick(quick, tol, precision, phi_many, dot_rounding))
    quick_result = dict(result) if coarse_quick else result  # (what the quick stage said, kept only where needed)
    if stage.judged is not None and settled(stage, quick.trunc) and not coarse_quick:
        judged = stage.judged
        result["curve"] = quick.trunc * abs(quick.value)
    elif split_early and math.isfinite(quick.trunc) and stage.diff > stage.allowed + 16 * quick.trunc:
        return {**result, "verdict": None}
    else:
        h0 = RIDDERS_FIRST * scale
        numeric, err, used, rounding, t_at = ridders_scalar(phi_many, h0, perturbation)
        h_at = h0  # the first step of the tableau the estimate comes from (t_at: its last quotient's)
        reproduced = False  # the estimate's noise measured at its own scale (a second tableau, exact steps)
        judged = J.judge(obs, numeric, tol, observed_bound=dot_rounding, reference_bound=err, scale=natural,
                         precision=precision)
        # (Ridders' larger steps round finer than the quick stage's: no floor is claimed from them)
        result = {"numeric": numeric, "error_bound": err, "scheme": "ridders",
                  "evaluations": quick.evaluations + used + spent, "rounding_floor": 0.0, "reach": h0}
        first = (numeric, err, h0)  # the largest steps' estimate: a staircase's quanta grow as 1 / h below them
        pair = None
        shrinks = 0
        while True:
            # near a singularity the large steps' truncation dominates (or they reach it): start smaller, as full
            # mode does (full._shrink), the finest bound kept
            # (a bound already at the rounding of the next, smaller first step cannot get finer there: stop)
            while shrinks < SHRINKS and (int(judged.reason) in UNDECIDED
                                         or _unresolved(judged, err, numeric, tol, precision)) \
                    and not (math.isfinite(rounding) and err <= rounding / (h0 / 10)):
                shrinks += 1
                h0 /= 10
                again, err2, used2, rounding2, t2 = ridders_scalar(phi_many, h0, perturbation)
                result["evaluations"] += used2
                twice = (getattr(phi_many, "exact", None) is not None and math.isfinite(again) and math.isfinite(err2)
                         and not (math.isfinite(err) and err2 >= err))
                if twice:
                    # exact steps (_snap) leave the moved inputs' rounding out of the bound, and with it what also
                    # covered a forward whose own rounding grows with its condition (digamma near a pole computes
                    # tan(pi x): its values are off by ~eps |x f'|, not by an ulp, and Ridders from 1e-10 claimed a
                    # bound 1,200 times too small). A second tableau from 3/4 of the first step sees the same
                    # truncation, nearly, and other rounding: their difference is the noise at this scale
                    other, err3, used3, _, _ = ridders_scalar(phi_many, 0.75 * h0, perturbation)
                    result["evaluations"] += used3
                    err2 = max(err2, err3, abs(again - other)) if math.isfinite(other) else math.inf
                if (((pair is not None and float(pair[0]) == 0.0 == float(pair[1])) or again == 0.0)
                        and math.isfinite(again) and math.isfinite(err) and err2 < err
                        and abs(again - numeric) > SAFETY * err):
                    # flat at the small step's scale (a staircase), or steps below its stairs (exactly 0, where the
                    # larger steps saw a slope): a finer estimate outside the coarser one's allowance is the smaller
                    # steps' error (full._shrink)
                    clash = True
                    continue
                # a finer estimate outside the coarser one's allowance, the coarser outside its own, stands though
                # its bound is larger: the larger steps' bound is the wrong one (full._shrink: sin at 1e4). Not on a
                # staircase (flat slopes, or an estimate of exactly 0 from steps below its stairs), as above
                flat = again == 0.0 or (pair is not None and float(pair[0]) == 0.0 == float(pair[1]))
                apart = not flat and abs(again - numeric) > SAFETY * (err + err2)
                if (not (math.isfinite(again) and math.isfinite(err2))
                        or (math.isfinite(err) and err2 >= err and not apart)):
                    continue  # (its rounding is not kept: steps that reach a pole see values far from phi's own)
                numeric, err, rounding, t_at, h_at, reproduced = again, err2, rounding2, t2, h0, twice
                judged = J.judge(obs, numeric, tol, observed_bound=dot_rounding, reference_bound=err, scale=natural,
                                 slopes=pair, precision=precision)
                result.update(numeric=numeric, error_bound=err, scheme=f"ridders from h0 = {h0:.1e}", reach=h0,
                              shrunk=True)
            if int(judged.verdict) == J.PASS or pair is not None:
                break
            # one-sided slopes at a small step tell a kink or a jump inside the steps from a wrong gradient; a
            # jump (the local slopes match autograd, the large steps do not) sends Ridders to smaller steps
            pair, used = _one_sided(phi_many, EPS64 ** 0.5 * scale, perturbation,
                                    SLOPE_ROUNDING * max(abs(obs - numeric), SLOPE_REL * max(abs(obs), abs(numeric))),
                                    SLOPE_CAP * scale)
            judged = J.judge(obs, numeric, tol, observed_bound=dot_rounding, reference_bound=err, scale=natural,
                             slopes=pair, precision=precision)
            result["slopes"] = (float(pair[0]), float(pair[1]))
            result["evaluations"] += used
        if (pair is not None and float(pair[0]) == 0.0 == float(pair[1]) and int(judged.verdict) == J.FAIL
                and first[0] != numeric and math.isfinite(first[1])):
            # flat at the small step's scale (a staircase: a lower-precision cast inside) and failed on an estimate
            # from smaller steps, taken before the slopes showed the staircase: judged on the largest steps'
            redo = J.judge(obs, first[0], tol, observed_bound=dot_rounding, reference_bound=first[1], scale=natural,
                           slopes=pair, precision=precision)
            if int(redo.verdict) != J.FAIL:
                judged, clash = redo, True
                result.update(numeric=first[0], error_bound=first[1], reach=first[2], shrunk=False,
                              scheme=f"ridders from h0 = {first[2]:.1e} "
                              "(smaller steps disagree with it beyond its bound: a staircase at their scale)")
        # a failure stands beyond phi's rounding as measured, and as a second tableau shows it at the estimate's scale
        # (not where the estimate already comes with that second tableau: digamma 1e-4 from its pole, where moves of a
        # few ulps read its rounding as 2e-8 (tan(pi x) inside), its largest, while two tableaus agree to 8e-6 of a
        # slope of 1.4e4 and a bug of 1e-8 (1.4e-4) fails; over the last step, that largest rounding passed it)
        checks = [] if reproduced else [lambda: _measured(phi_many, result, t_at),
                                        lambda: _reproduced(phi_many, result, h_at, perturbation)]
        if pair is not None and float(pair[0]) == 0.0 == float(pair[1]) and result["numeric"] != 0.0:
            checks.append(lambda: _quantized(phi_many, result, EPS64 ** 0.5 * scale, h_at, t_at))
        # along part of an input, phi is the moved output elements' change alone: where those no step moved hold no
        # more of autograd's vᵀJu than their rounding allows, autograd's share of the moved ones is what the estimate
        # measures (_still; first, as it costs no evaluation, and again on each wider bound)
        shares = still(h_at) if still is not None and int(judged.verdict) == J.FAIL else None
        for wider in [None, *checks]:  # each only where the failure still stands, judged again on its bound
            if int(judged.verdict) != J.FAIL:
                break
            if wider is not None:
                bound = wider()
                if bound is None:
                    continue
                result["error_bound"] = bound
                judged = J.judge(obs, result["numeric"], tol, observed_bound=dot_rounding, reference_bound=bound,
                                 scale=natural, slopes=pair, precision=precision)
            if int(judged.verdict) == J.FAIL and shares is not None and math.isfinite(result["error_bound"]):
                redo = J.judge(shares[1], result["numeric"], tol, observed_bound=dot_rounding,
                               reference_bound=result["error_bound"], scale=natural, slopes=pair, precision=precision)
                if int(redo.verdict) != J.FAIL:
                    judged, shown = redo, shares[1]
                    result.update(autograd_unmoved=shares[0], autograd_moved=shares[1], unmoved_bound=shares[2])
        if int(judged.verdict) == J.FAIL and "autograd_moved" not in result:
            judged = _stairs(phi_many, result, judged, obs, tol, dot_rounding, natural, precision, t_at, scale,
                             1.5 * (EPS64 * _unit(phi_many) * quick.size + perturbation))
    apart = abs(first[0] - result["numeric"]) if first is not None else 0.0
    if (int(judged.verdict) == J.FAIL and first is not None and h_at < first[2] and math.isfinite(first[1])
            and apart > SAFETY * (first[1] + result["error_bound"])
            and apart * h_at <= SAFETY * 1.5 * EPS64 * _unit(phi_many) * max(1.0, quick.size)):
        # the failure rests on smaller steps whose estimate disagrees with the largest steps' beyond both bounds, by no
        # more than stairs of the outputs' rounding at their natural size over the smaller steps would make it, and the
        # largest steps' agrees with autograd: the evidence contradicts itself, and which steps are right it does not
        # say (a staircase whose stairs the small steps fall between: the large ones). order=2 of softmax at logits of
        # std 30: G, from the first backward, holds a term absorbed in stairs of 1e-16 1e-4 apart; between them its
        # slope is half the true one, and a right double backward (2.37e-12 against 2.37e-12 to 6e-4, mpmath) FAILED
        # against 1.19e-12 on a bound of 2e-19, the first tableau reading 2.38e-12. (Without the stairs' limit a
        # backward dropping a fast term, sin x + 1e-6 sin(1e5 x) read right by the small steps and averaged away by
        # the large ones, 7% off, went from FAIL to inconclusive: a review of the rule)
        import torch

        redo = J.judge(obs, first[0], tol, observed_bound=dot_rounding, reference_bound=first[1], scale=natural,
                       slopes=pair, precision=precision)
        if int(redo.verdict) == J.PASS:
            # the evidence's error is at least the two estimates' difference: judged on that, undecided
            wide = result["error_bound"] + abs(first[0] - result["numeric"])
            judged = J.judge(obs, result["numeric"], tol, observed_bound=dot_rounding, reference_bound=wide,
                             scale=natural, slopes=pair, precision=precision).undecided(torch.tensor(True), J.COARSE)
            result["error_bound"] = wide
            result["scheme"] = (f"{result['scheme']}; the largest steps' estimate ({first[0]:.6g}, from h0 = "
                                f"{first[2]:.1e}) agrees with autograd and disagrees with it beyond both bounds")
    if (int(judged.verdict) == J.FAIL and pair is not None and float(pair[0]) == 0.0 == float(pair[1])
            and result["numeric"] == 0.0 and first is not None and first[0] == 0.0 and math.isfinite(first[2])):
        # no step saw the outputs move (flat at the small step's scale, exactly 0 at Ridders' largest): a function
        # computed to eps of its natural size (its weighted outputs', at least 1) hides there any slope whose change
        # over that step stays below that rounding. cross_entropy at logits (37, 0, 0): its loss, 37 + log(1 + 2e-37)
        # - 37, is exactly 0 around the point, and autograd's exact gradient of 8.5e-17 FAILED against a bound of
        # 1e-28, where gradcheck passes; undecided, not failed, within that floor (a slope above it still fails)
        import torch

        flat_floor = 1.5 * EPS64 * _unit(phi_many) * max(1.0, quick.size) / first[2]
        redo = J.judge(obs, 0.0, tol, observed_bound=dot_rounding, reference_bound=flat_floor, scale=natural,
                       slopes=pair, precision=precision)
        if int(redo.verdict) != J.FAIL:
            judged = redo.undecided(torch.tensor(True), J.COARSE)
            result["error_bound"] = flat_floor
            result["scheme"] = (f"{result['scheme']}; no step moved the outputs (the bound: their rounding at their "
                                "natural size over the largest step)")
    if coarse_quick and int(judged.verdict) not in (J.PASS, J.FAIL):
        # Ridders could not decide what the quick stage accepted (a staircase of terms absorbed into larger ones, at
        # its smaller steps): the quick stage's pass stands, as it did before Ridders was asked, with the
        # evaluations spent
        assert stage.judged is not None
        spent_more = result["evaluations"] - quick_result["evaluations"]
        judged, pair, clash = stage.judged, None, False
        result = {**quick_result, "curve": quick.trunc * abs(quick.value)}
        result["evaluations"] += spent_more
    elif (coarse_quick and int(judged.verdict) == J.PASS
          and SAFETY * result["error_bound"] > UNINFORMATIVE["float64"] * max(abs(obs), dot_rounding / (4 * EPS64))):
        # Ridders' larger steps still leave a bound above 1e-3 of the projection's terms: the evidence cannot decide
        # (x.sum() + 1e11, whose values round at 1.5e-5: a backward 1% off passed on a bound of 1%), as a ledger's
        # finite_difference channel says of the same function
        import torch

        judged = judged.undecided(torch.tensor(True), J.COARSE)
    if confirmed is not None and moved_share is None and int(judged.verdict) != J.FAIL and confirmed[1] < result[
            "error_bound"]:
        # the finer evidence decides: a backward 1% off at one of 4 elements of a float32-only sigmoid passed on
        # Ridders' bound of 3e-4, where the quick stages', 1e-5, rejected it
        rejecting, bound = confirmed
        judged = J.judge(obs, rejecting.value, tol, observed_bound=dot_rounding, reference_bound=bound, scale=natural,
                         slopes=pair, precision=precision)
        result.update(numeric=rejecting.value, error_bound=bound, reach=2 * rejecting.h,
                      scheme=f"{_scheme(rejecting)}, and again at 3/4 of the steps (finer than Ridders' from 1e-2 on "
                             "float32 inputs)")
    if ("autograd_moved" not in result
            and _blurred(judged, result["error_bound"], result["numeric"], obs, dot_rounding, tol, precision)
            # (and where slopes from their largest step could resolve 1e-3 of autograd's value: else they are not
            # measured, as for a value that is the backward's own rounding, 3e-16 beside outputs of order one, where
            # multi_head_attention_forward's ten inputs spent 160 evaluations on slopes that could decide nothing)
            and KINK_REL * abs(obs) > 10 * (EPS64 * _unit(phi_many) * quick.size + perturbation) / (SLOPE_CAP * scale)):
        # a pass on an estimate that cannot tell the derivative from 0, nor autograd's value: the one-sided slopes,
        # from steps far smaller than Ridders' (sqrt(eps) of the scale), are the evidence where they agree with each
        # other (no kink at their scale) and are not flat (a staircase). x|x| with its gradient's sign flipped at ten
        # elements within 1e-5 of 0 passed both modes on Ridders' -6.9e-5 +- 7.1e-5 (the truth -9.9e-6, autograd's
        # +9.9e-6; gradcheck fails it); the slopes read -9.9e-6 to 1e-16. Only a failure is taken from them
        judged, pair = _by_slopes(phi_many, result, judged, obs, tol, dot_rounding, natural, precision, scale,
                                  perturbation, pair, 1.5 * (EPS64 * _unit(phi_many) * quick.size + perturbation))
    coarse = _unresolved(judged, result["error_bound"], result["numeric"], tol, precision)
    # a pass whose bound holds the value itself, which is not 0: judged absolutely, against the derivative's natural
    # size, unless the slopes show a staircase
    held = not coarse and result["numeric"] != 0.0 and _unresolved(judged, result["error_bound"], result["numeric"],
                                                                      tol, precision, within=True)
    flat = pair is not None and float(pair[0]) == 0.0 == float(pair[1])
    if (coarse or held) and (result["scheme"] != "richardson (h, 2h)" or flat):
        # a pass of Ridders coarser than the promise stands only where the slopes show a smooth function (J.rough),
        # as in full mode (full._shrink): a staircase is not differentiable at the small step's scale. Where the
        # bound holds the whole value, a staircase (flat slopes) leaves it undecided too: a float64 sum that absorbs
        # most of a term of 1e-12 beside 1, (1 + 1e-12 sin x) - 1, moves in stairs of 2.2e-16, Ridders' bound on
        # them held the value, and a backward 50% off at one element PASSED on that allowance, absolute against a
        # derivative of natural size 1
        import torch

        if pair is None:
            pair, used = _one_sided(phi_many, EPS64 ** 0.5 * scale, perturbation, math.inf, SLOPE_CAP * scale)
            result["slopes"] = (float(pair[0]), float(pair[1]))
            result["evaluations"] += used
        value = torch.tensor(result["numeric"], dtype=torch.float64)
        rough = (J.rough(*pair[:3], value) if coarse else
                 (pair[0] == 0) & (pair[1] == 0) & (value.abs() > pair[2]))  # (J.rough's flat alone)
        if bool(rough):
            judged = judged.undecided(rough, J.DISCONTINUITY)
    if (_unit(phi_many) > 1 or clash) and _unresolved(judged, result["error_bound"], result["numeric"], tol, precision):
        # an output less precise than float64: no step resolves the default tolerance's promise (a backward
        # off by 1e-8 fails), and full mode's entries say coarse there; a pass would promise it
        import torch

        judged = judged.undecided(torch.tensor(True), J.COARSE)
    if (own is not None and int(judged.verdict) == J.FAIL and "autograd_moved" not in result and math.isfinite(obs)
            and abs(result["numeric"]) <= SAFETY * result["error_bound"]):
        # autograd's value may be nothing but its own rounding: a backward whose terms cancel (softmax(x + c)'s shift
        # c, whose exact gradient is 0 and autograd's the residue, about 1e-16, of terms of about 0.2) rounds at the
        # terms' size, which neither the outputs nor vᵀJu show, and FAILED against evidence that reads exactly 0 on
        # a finer bound (gradcheck passes it). Where the evidence allows 0 (a wrong backward's usual failure, against
        # evidence that resolves a slope, measures nothing), *own* measures that rounding (:func:`own_rounding`);
        # where autograd's value is no larger than it, and the difference lies within it and the evidence's bound,
        # the evidence cannot decide: inconclusive, never a pass. A slope the backward adds or drops beyond its
        # rounding still fails (a leak linear in the grad_output does not move with the scalings), and so does a
        # backward rounded through float32 or bfloat16, whose rounding is more than float64's (own_rounding)
        measured = own(obs)
        if measured is not None and abs(obs) <= SAFETY * measured:
            redo = J.judge(obs, result["numeric"], tol, observed_bound=dot_rounding + measured,
                           reference_bound=result["error_bound"], scale=natural, slopes=pair, precision=precision)
            if int(redo.verdict) != J.FAIL:
                import torch

                judged = redo.undecided(torch.tensor(True), J.OWN_ROUNDING)
                result["autograd_rounding"] = measured
                result["scheme"] = (f"{result['scheme']}; autograd's own rounding measured at {measured:.3g} (the "
                                    "output weights scaled)")
    result.update(verdict=int(judged.verdict), reason=int(judged.reason), allowed=_allowed(judged),
                  judged=judged, observed=shown)
    return result


def own_rounding(problem: Problem, j: int, weights: list[torch.Tensor | None], given: torch.Tensor | None
                 ) -> Callable[[torch.Tensor, float], float | None]:
    """along(d, value): how far autograd's vᵀJ_j d (*value*; the outputs weighted by *weights*, None for an output left
    out; *given* its vᵀJ_j, as the check computed it) moves by autograd's own rounding in float64: the backward taken
    again with the weights scaled by each of OWN_SCALINGS, its vᵀJ_j d divided by the scaling, against vᵀJ_j d
    unscaled, the largest difference. A backward is linear in its grad_output: only its rounding moves so. None where
    it can not be trusted or could not excuse *value*: unless the backward taken again gives *given* exactly (not
    nondeterministic), and the weights doubled give twice that exactly (a power of two scales every rounding exactly:
    a backward that is not linear in its grad_output, one that ignores it, or adds a constant, shows there); where the
    difference is more than float64's rounding at the weighted outputs' size, OWN_ULPS eps sum_r |w_r| |f_r| per unit
    of d's elements (a reviewer's softmax backward in float32 or bfloat16 moved by 1e-8 to 1e-3 of its terms,
    bit-exact when doubled too, and its zero entries read inconclusive where they fail; the outputs' own size, not
    max(1, |f|): at outputs of 1e-7 a floor of 1 let float32's rounding through again); and, before anything is
    measured, where *value* exceeds SAFETY times that (a wrong backward's usual failure: a 50 x 50 elementwise
    backward leaking into every entry took 43 s instead of 5). Measured where it is first asked (one forward and 5
    backwards for input j). None too for complex outputs or gradients."""
    import torch

    made: list[list[torch.Tensor] | None] = []
    sizes: list[float] = []

    def along(d: torch.Tensor, value: float) -> float | None:
        if not sizes:  # the weighted outputs' size, sum_r |w_r| |f_r| (an output weighted 0, one not finite at the
            # point among them, adds nothing: its NaN made the bound NaN, and a right backward failed in directional
            # mode that full mode, whose rows leave it out, found inconclusive)
            sizes.append(math.fsum(float(torch.where(w != 0, w.abs().to(torch.float64)
                                                     * problem.f_scale(k).reshape(w.shape), 0.0).sum())
                                   for k, w in enumerate(weights) if w is not None))
        flat = d.reshape(-1).to(torch.float64)
        moved = flat != 0
        cap = OWN_ULPS * EPS64 * sizes[0] * float(torch.where(moved, flat.abs(), 0.0).sum())
        if not abs(value) <= SAFETY * cap:
            return None
        if not made:
            made.append(_scaled_backwards(problem, j, weights, given))
        gs = made[0]
        if gs is None:
            return None

        def projected(g: torch.Tensor) -> float:
            return float(torch.where(moved, g * flat, 0.0).sum())  # (a held element's NaN is not moved)

        base = projected(gs[0])
        spread = max(abs(projected(g) / a - base) for a, g in zip(OWN_SCALINGS, gs[1:]))
        return spread if spread <= cap else None  # (NaN: None)

    return along


def _scaled_backwards(problem: Problem, j: int, weights: list[torch.Tensor | None], given: torch.Tensor | None
                      ) -> list[torch.Tensor] | None:
    """vᵀJ_j, flat, float64, at the weights and at them scaled by each of OWN_SCALINGS, from one fresh forward; None
    where they cannot measure autograd's rounding (see :func:`own_rounding`)."""
    import torch

    from .evaluate import grad

    if given is None or given.is_complex():
        return None
    xs, outs = problem.forward_with_graph()
    dead = problem.dead or [None] * len(outs)  # (an output not finite anywhere is left out, as api._metadata's)
    taken = [(o, w) for o, w, d in zip(outs, weights, dead)
             if w is not None and o.requires_grad and (d is None or not bool(d.all()))]
    if not taken or any(o.is_complex() or not o.is_floating_point() for o, _ in taken):
        return None
    scalings = (1.0, 2.0, *OWN_SCALINGS)
    got: list[torch.Tensor] = []
    for i, a in enumerate(scalings):
        (g,) = grad([o for o, _ in taken], [xs[j]], [w * a for _, w in taken], allow_unused=True,
                    retain_graph=i < len(scalings) - 1)
        if g is None or g.is_complex():
            return None
        got.append(g.detach().reshape(-1).to(torch.float64))

    def same(a: torch.Tensor, b: torch.Tensor) -> bool:
        return a.shape == b.shape and bool(((a == b) | (a.isnan() & b.isnan())).all())

    if not (same(got[0], given.detach().reshape(-1).to(torch.float64)) and same(got[1], 2 * got[0])):
        return None
    return [got[0], *got[2:]]


def _measured(phi_many: Batched, result: dict[str, Any], step: float) -> float | None:
    """For a failure of Ridders' estimate (*result*'s numeric and error bound, its last quotient at *step*): the bound
    with phi's rounding as measured (:func:`_with_noise`) added, where it is known (None: no change). The bound
    counts phi's rounding at eps of its terms, and a function whose terms cancel rounds like the terms, not like its
    value: a mean of squares less a squared mean (an output of 3e-5 from squares of 1e4, off by 2e-12), log(1 + x) -
    x at 1e-4, (x + 1e-3)^2 - x^2 at 50; their right backwards FAILED, in full mode's confirmation too, where full
    mode's own entries count the measured noise (evaluate.ridders_columns). A failure stands beyond it."""
    measure = getattr(phi_many, "noise", None)
    if measure is None or not math.isfinite(result["error_bound"]):
        return None
    extra = 1.04 * measure() / step
    return result["error_bound"] + extra if extra > 0.0 else None


def _stairs(phi_many: Batched, result: dict[str, Any], judged: J.Judged, obs: float, tol: ToleranceUsed,
            dot_rounding: float, natural: float, precision: str, step: float, scale: float,
            rounding: float) -> J.Judged:
    """For a failure of Ridders' estimate (*result*'s numeric and error bound, its last quotient at *step*) that stands
    after every other measure of phi's rounding: inconclusive (J.STAIRS), never a pass, where the difference lies within
    the bound with the rounding phi shows at moves from about 1e-9 to 1e-6 along its own direction added, over *step*
    (:func:`evaluate.stair_rounding` of phi at STAIR_NODES times STAIR_BASE *scale* at each of STAIR_SCALES, 21
    evaluations); only where that rounding exceeds SAFETY times the one the bound counts (*rounding*: phi's at eps of
    its terms and the moved inputs', and as measured at moves of a few ulps). A function that rounds its inputs coarser
    than their dtype (softmax(x + 1e5): x held to 1.5e-11) puts that rounding into every quotient, and a right
    backward FAILED on one element of five, on a bound of 4e-13 (gradcheck passes it), where full mode's entries are
    inconclusive. A difference beyond it still fails. Measured along phi's own direction: the rounding of elements it
    does not move is not its own. Not measured where a difference is beyond what any such rounding could explain."""
    if not math.isfinite(result["error_bound"]):
        return judged
    import torch

    from .evaluate import STAIR_BASE, STAIR_NODES, STAIR_SCALES, STAIR_WEIGHTS, stair_reading, stair_rounding

    base = STAIR_BASE * scale
    # nothing measured where no such rounding could explain the difference: it is at most about 2 |phi'| base per
    # evaluation (stairs as wide as the moves, each evaluation off by half a stair; wider ones read flat at the slopes'
    # steps), so a wrong backward's usual failure measures nothing (a bisection's failing parts each took 13 more, 21
    # now)
    slope = max(abs(obs), abs(result["numeric"]))
    if not abs(obs - result["numeric"]) <= SAFETY * (result["error_bound"] + 2.08 * slope * base / step):
        return judged
    rounds = getattr(phi_many, "rounds", None)  # (and only where the inputs moved show such rounding at all)
    if rounds is None or not rounds():
        return judged
    values, _ = phi_many([0.0] + [node * s * base for s in STAIR_SCALES for node in STAIR_NODES])
    result["evaluations"] += 1 + len(STAIR_NODES) * len(STAIR_SCALES)
    weights = STAIR_WEIGHTS
    sums = [torch.tensor(abs(weights[0] * values[0] + sum(w * values[1 + 4 * s + i]
                                                          for i, w in enumerate(weights[1:]))))
            for s in range(len(STAIR_SCALES))]
    # the pairs' reading a quotient at this step uses (evaluate.stair_reading: moves within a few steps, at most half a
    # stair times the slope per evaluation; beyond, the function's own shape at the larger moves)
    noise = getattr(phi_many, "noise", None)
    floor = SAFETY * max(rounding, 0.0 if noise is None else noise())
    measured = float(stair_reading(stair_rounding(sums), torch.tensor(base), torch.tensor(slope), torch.tensor(step),
                                   torch.tensor(floor)))
    if not measured > floor:
        return judged
    extra = 1.04 * measured / step
    wide = result["error_bound"] + extra
    # (the bound with the rounding alone: the slopes' kink or jump, judged against a wider bound, made a difference far
    # beyond it "not failed", a review)
    redo = J.judge(obs, result["numeric"], tol, observed_bound=dot_rounding, reference_bound=wide, scale=natural,
                   precision=precision)
    if int(redo.verdict) == J.FAIL:
        return judged
    result["error_bound"] = wide
    result["scheme"] = (f"{result['scheme']}; the function's rounding at moves of 1e-9 to 1e-6 along the direction "
                        f"measured at {measured:.3g}")
    return redo.undecided(torch.tensor(True), J.STAIRS)


def _reproduced(phi_many: Batched, result: dict[str, Any], h0: float, perturbation: float) -> float | None:
    """For a failure of Ridders' estimate (*result*'s numeric and error bound, from first step *h0*) that stands after
    :func:`_measured`: the bound a second tableau from 3/4 of that step shows, where it disagrees with the first
    beyond its bound (None: no change). The measured rounding moves the inputs by whole ulps of their order-one
    size, and a function that rounds on a grid of that period (log(1 + x) - x at 1e-4: 1 + x rounds at eps, the same
    error after a move of 2 eps) shows none there; a float64 sum that absorbs most of a term of 1e-12 beside 1 is a
    staircase of 2.2e-16 in f, flat at every such move. The second tableau sees the same truncation, nearly, and
    other rounding: their difference is the noise at this scale (as digamma's exact steps measure it). Where they
    differ by more than the first's allowance term, SAFETY times its bound, that bound does not describe the
    evidence, and the failure stands only beyond their difference; within it the failure stands as it was (as it
    does where the second is not finite)."""
    numeric, err = result["numeric"], result["error_bound"]
    if not (math.isfinite(numeric) and math.isfinite(err)):
        return None
    other, err2, used, _, _ = ridders_scalar(phi_many, 0.75 * h0, perturbation)
    result["evaluations"] += used
    if not (math.isfinite(other) and math.isfinite(err2)):
        return None
    noise = max(err2, abs(other - numeric))
    # within the first's allowance (near a kink of a higher derivative, |x|^2.5 at 0.01, the two differ by their
    # truncation: widened by that, bugs of 1e-8 passed that fail) the failure stands as it was
    return noise if noise > SAFETY * err else None


def _quantized(phi_many: Batched, result: dict[str, Any], t: float, h0: float, step: float) -> float | None:
    """The bound for a failure where the one-sided slopes at *t* are exactly 0 while Ridders' estimate (from first step
    *h0*, its last quotient at *step*) is not: phi is a staircase at the slopes' scale (a float64 sum that absorbs
    most of a small term, 1 + 1e-12 sin x less 1, moves in quanta of 2.2e-16; a float16 cast inside), and each value
    Ridders divides by its step is off by up to a quantum, which its bound (phi's rounding at eps of its terms) does
    not count, and which a second tableau misses where the columns of both quantize to the same values. The quantum
    is measured: phi at 2t, 4t, ... below *h0*, whose first change from phi(0) is one or two quanta; the failure
    stands only beyond twice that over *step*. Where phi moves at none of them, nothing below the first step shows a
    slope, and the bound is the estimate's own size (inconclusive)."""
    ts: list[float] = []
    probe = 2 * t
    while probe < h0 and len(ts) < 64:
        ts.append(probe)
        probe *= 2
    if not ts:
        return None
    values, _ = phi_many([0.0] + ts)
    result["evaluations"] += len(ts) + 1
    start = values[0]
    moved = [abs(v - start) for v in values[1:] if v != start and math.isfinite(v)]
    extra = 2 * moved[0] / step if moved and math.isfinite(start) else abs(result["numeric"])
    return result["error_bound"] + extra


def _still(problem: Problem, j: int, u: torch.Tensor, ws: list[torch.Tensor],
           moved: Callable[[], list[torch.Tensor | None]]) -> Callable[[float], tuple[float, float, float] | None]:
    """For a projection along part of input j (direction *u*, weights *ws*), given the largest step h0: autograd's
    vᵀJu split into the share of the output elements no step has moved (per output a mask of those moved, from
    *moved*) and the share of those moved, each from its own backward (the other elements' weights set to 0), and
    the most the still ones can hold; None where no element stayed still, or where their share is more than that.
    phi there is the moved elements' change alone (_weighted_moving), and an element a move of h0 left bitwise where
    it was has a slope of at most twice its rounding (ROUNDING_ULPS eps max(1, |f|)) over h0, not 0:
    multi_head_attention_forward's attention output, of order 100, holds entries below 1e-13 along columns of its
    query, autograd's vᵀJu held 7.5e-16 of them that no step of Ridders could see beside 5.1e-17 that they do, and a
    right backward FAILED full mode's projection along those columns. Where the still elements' share is within
    sum |v_r| 2 ROUNDING_ULPS eps max(1, |f_r|) / h0, a failure is judged again on the moved elements' share against
    the estimate of the same (judge_along): 5.12216812e-17 against 5.12216809e-17 there, and that bound is added to
    the error the projection leaves possible (_consistent: the still elements' entries are not resolved by it). A
    bug in what the steps see still shows; one in the still elements' share is below what any step resolves, and a
    share beyond what they can hold (a backward leaking gradient into an output that does not depend on these
    columns) fails."""
    shares: dict[tuple[bytes | None, ...], list[float | None]] = {}  # per set of moved elements: the two shares

    def still(h0: float) -> tuple[float, float, float] | None:
        import torch

        from .evaluate import grad

        masks = moved()
        hidden, still_weights, moved_weights = 0.0, [], []
        for k, w in enumerate(ws):
            out, mask = problem.outputs[k], masks[k]
            if mask is None or not out.is_floating_point():
                still_weights.append(torch.zeros_like(w))
                moved_weights.append(w)
                continue
            # each value may be off by its rounding, ROUNDING_ULPS eps max(1, |f|) (not one spacing of |f|: gelu at
            # -8.6 computes x (1 + erf(x / sqrt 2)) / 2, exactly -0.0, in stairs of about 5e-16 from 1 + erf)
            rounding = 2 * ROUNDING_ULPS * torch.finfo(out.dtype).eps * problem.f_size(k)
            terms = (rounding * w.reshape(-1).to(torch.float64).abs()).nan_to_num(nan=0.0, posinf=0.0)
            hidden += float(terms[~mask].sum())
            shaped = mask.reshape(w.shape)
            still_weights.append(torch.where(shaped, 0.0, w))
            moved_weights.append(torch.where(shaped, w, 0.0))
        if not hidden > 0.0:
            return None
        # the shares depend on the moved elements alone, not on h0: a second call after as many moves (Ridders'
        # failure after the quick stage's, multi_head_attention_forward's sample 0 three times) reuses them, the
        # same numbers a forward and backwards of their own would give
        key = tuple(None if m is None else m.numpy().tobytes() for m in masks)
        known = shares.get(key)
        if known is not None and known[0] is not None:
            if not abs(known[0]) <= hidden / h0:
                return None
            if known[1] is not None:
                return known[0], known[1], hidden / h0
        xs, outs = problem.forward_with_graph()
        direction = u.reshape(-1).to(torch.float64)

        def along(weights: list[torch.Tensor], retain: bool) -> float:
            g = grad(outs, [xs[j]], weights, allow_unused=True, retain_graph=retain)[0]
            return 0.0 if g is None else float((g.detach().to(torch.float64).reshape(-1) * direction).sum())

        share = along(still_weights, True)
        shares[key] = [share, None]
        if not abs(share) <= hidden / h0:
            return None
        shares[key][1] = moved_share = along(moved_weights, False)
        return share, moved_share, hidden / h0

    return still


def _consistent(out: dict[str, Any]) -> float:
    """The largest error of a passing projection's vᵀJu its evidence leaves possible: the disagreement seen plus
    the whole allowance. Not without its rtol term: the quick stage accepts Richardson where its truncation
    estimate is within the allowance, rtol term included, so the numeric value may be off by that much, and a
    backward's error of about the same size cancels it (a reviewer's sin(w x) with a linear term beside it: a bug
    of 1e-8 to 2.5e-8 at one entry left a disagreement of 5e-12 and passed, at 7 of 1,008 point/seed pairs). An
    error in one term larger than this would have shown (barring errors in other terms, or an underestimated
    truncation, that cancel it); a 1e-8 error of a term below it might not. *out*: judge_along's result; where it
    judged the moved output elements' share (_still), the still elements' share is known only to within what they
    can hold, which is added: their entries are not resolved by it."""
    judged: J.Judged = out["judged"]
    return float(judged.diff) + _allowed(judged) + out.get("unmoved_bound", 0.0)


def _curve(out: dict[str, Any]) -> float:
    """A passing projection's truncation estimate times |vᵀJu|: 4 delta^2 / 9 for Richardson's D(h) - D(2h) = delta
    (:func:`numeric.truncation`), 0 where Ridders decided. Its model takes the curvature for the whole sum's; where it
    is one term's (t, an element of (|x|^1.5) 0.01 from its kink among others of order one), the error in that term
    is 4 delta^2 / (9 t), this over t: a term t is resolved only where RESOLVE t exceeds the error possible
    (:func:`_consistent`) plus CURVE_MARGIN times that (:func:`resolves`)."""
    return float(out.get("curve", 0.0))


def resolves(term: Any, possible: float, curve: float) -> Any:
    """Whether a projection whose evidence leaves *possible* error and the truncation *curve* (:func:`_curve`)
    resolves RESOLVE of a term |v_r J_rc u_c| = *term* (a float or a tensor): term (RESOLVE term - possible) >
    CURVE_MARGIN curve (a term of 0 is never resolved)."""
    return term * (term * RESOLVE - possible) > CURVE_MARGIN * curve


def _coarse_quick(quick: Quick, tol: ToleranceUsed, precision: str, phi_many: Batched, dot_rounding: float) -> bool:
    """Whether a quick stage that accepted did so on a bound above RESOLVE of its value (float64, the default
    tolerance, float64 outputs): judged against the projection's natural size (its weighted outputs', about 1), such
    a bound passes a value far below that size whatever it is. A function whose value a constant dominates
    (x.sum() + 1e10: a projection of 3e-10 beside weighted outputs of 1) passed a backward 1% off, and full mode's
    confirmation with it; Ridders' larger steps round finer against it (1e-4 of it there), and judge it. Only along
    a whole input (a projection along part of one, the columns central differences left open, is about terms
    absorbed into larger ones: Ridders sees stairs there, 64 of 926 OpInfo cases took more evaluations and
    scaled_dot_product_attention's turned inconclusive); and Ridders may refute or refine the pass, not undecide it.
    Against the terms' size as well as the value's (*dot_rounding*, the bound on autograd's vᵀJu, is 4 eps
    sqrt(n) sum |g_i u_i|): a projection small by cancellation between terms the quick stage resolves is not coarse
    (|x|_2's confirmations went to Ridders at some draws, 4 evaluations becoming 17). A quick stage that read exactly
    0 is exempt (floor, sign: a staircase). Exempting it only where autograd's projection is 0 too was tried
    (2026-12-06) and taken back: it made x.sum() + 1e14 inconclusive, whose right backward and one 1% off pass on
    that 0, but also exp at (709, 1) in directional mode, whose split along the small element sees its change
    absorbed in the large output's weighted term (Known limits)."""
    terms = dot_rounding / (4 * EPS64)
    return (tol.default and precision == "float64" and _unit(phi_many) <= 1 and quick.value != 0.0
            and math.isfinite(quick.err) and SAFETY * quick.err > RESOLVE * max(abs(quick.value), terms))


def _unresolved(judged: J.Judged, err: float, value: float, tol: ToleranceUsed, precision: str, *,
                within: bool = False) -> bool:
    """A pass whose evidence is coarser than the default tolerance's promise: SAFETY times Ridders' error bound
    above RESOLVE |value| (a backward off by 1e-8 could pass within it), in float64 at the default tolerance, as
    full mode asks of every entry (full._unresolved_terms). Ridders then starts again from smaller steps, and
    the finest bound is kept: tan 0.05 from its pole, along a direction mixing it with 19 other elements, has
    a bound of 1.4e-8 from h0 = 1e-2 and a backward off by 1e-8 passed within it. A value within its own bound
    is exempt (it may be zero, and is judged against the derivative's natural size), unless *within*."""
    wide = SAFETY * err
    return (int(judged.verdict) == J.PASS and tol.default and precision == "float64"
            and (within or abs(value) > wide)  # below its own bound a relative error means nothing (*within*: it
            and wide > RESOLVE * abs(value))  # does, as the caller knows: a staircase's slope is not zero)


def _blurred(judged: J.Judged, err: float, value: float, obs: float, dot_rounding: float, tol: ToleranceUsed,
             precision: str) -> bool:
    """A pass on an estimate within its own bound (SAFETY times it at least |value|: the evidence cannot tell the
    derivative from 0, nor its sign) that does not resolve RESOLVE of autograd's value either, which is more than its
    own rounding (*dot_rounding*): :func:`_unresolved` exempts it (the derivative may be 0), and so it is not refined
    from smaller steps."""
    wide = SAFETY * err
    return (int(judged.verdict) == J.PASS and tol.default and precision == "float64" and abs(value) <= wide
            and abs(obs) > dot_rounding and wide > RESOLVE * abs(obs))


#: the one-sided slopes decide a blurred pass (:func:`_by_slopes`) only where they see at least this share of autograd's
#: value: a term absorbed whole into a large constant leaves them about 0
SLOPES_SEEN = 0.1
#: ... and where slopes from steps this many times larger agree with them
SLOPES_AGAIN = 16.0


def _by_slopes(phi_many: Batched, result: dict[str, Any], judged: J.Judged, obs: float, tol: ToleranceUsed,
               dot_rounding: float, natural: float, precision: str, scale: float, perturbation: float,
               pair: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None, rounding: float
               ) -> tuple[J.Judged, tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None]:
    """A pass that :func:`_blurred` holds, judged again on the one-sided slopes (their mean, its bound their
    rounding and truncation and half their difference) where they agree with each other within those and are not
    both 0; a failure there is the verdict (the result's value, bound and scheme then the slopes'), anything else
    leaves the pass as it was. The slopes are measured (or taken, *pair*) at sqrt(eps) of the scale, from larger
    steps where their rounding exceeds a tenth of autograd's value. A failure there stands only beyond the rounding
    phi shows at larger moves (:func:`_stairs`, over the slopes' step): slopes across stairs agree exactly where the
    stairs fall alike on both sides ((x|x| + 100) - 100: 184 stairs of 100's ulp per step on each side, 0.06% off the
    true slope, their rounding model blind to the 100 inside; a right backward FAILED, a review). Returns the
    judgement and the slopes where they decided, else *pair* as it was (what follows in judge_along reads the slopes
    it measured itself). *rounding*: phi's rounding the bound counts, as _stairs takes it."""
    given = pair
    if pair is None:
        pair, used = _one_sided(phi_many, EPS64 ** 0.5 * scale, perturbation, SLOPE_ROUNDING * abs(obs),
                                SLOPE_CAP * scale)
        result["evaluations"] += used
    left, right, noise, trunc = (float(v) for v in pair[:4])
    if not (math.isfinite(left) and math.isfinite(right) and math.isfinite(noise) and math.isfinite(trunc)):
        return judged, given
    if (left == 0.0 and right == 0.0) or abs(left - right) > 2 * (noise + trunc):
        return judged, given  # (a staircase, or a kink at the slopes' scale: they decide nothing)
    mid, bound = (left + right) / 2, noise + trunc + abs(left - right) / 2
    if not (abs(obs - mid) > KINK_REL * max(abs(obs), abs(mid)) and abs(mid) >= SLOPES_SEEN * abs(obs)):
        # only a gross disagreement (beyond 1e-3 of the value: a sign, a factor), with a slope of autograd's size
        # seen: stairs of a constant inside ((x|x| + 100) - 100) left the slopes 6e-4 off, and a term absorbed whole
        # (x|x| + 1e8 - 1e8, its values never moving) reads a slope of about 0 (a review: right backwards FAILED)
        return judged, given
    redo = J.judge(obs, mid, tol, observed_bound=dot_rounding, reference_bound=bound, scale=natural,
                   precision=precision)
    if int(redo.verdict) != J.FAIL:
        return judged, given
    # and the same from steps 16 times larger, within both bounds: slopes across stairs of a constant inside ((x|x| + 1)
    # - 1 at 1e-6: 136 stairs of 1's ulp per step) are off by a stair over the step, which their rounding model, blind
    # to the constant, does not count, and which the larger steps divide by 16 (a right backward FAILED, a review)
    again, used = _one_sided(phi_many, SLOPES_AGAIN * EPS64 ** 0.5 * scale, perturbation, SLOPE_ROUNDING * abs(obs),
                             SLOPE_CAP * scale)
    result["evaluations"] += used
    left2, right2, noise2, trunc2 = (float(v) for v in again[:4])
    bound2 = noise2 + trunc2 + abs(left2 - right2) / 2
    if not (math.isfinite(left2) and math.isfinite(right2) and math.isfinite(bound2)
            and abs(left2 - right2) <= 2 * (noise2 + trunc2)
            and abs((left2 + right2) / 2 - mid) <= SAFETY * (bound + bound2)):
        return judged, given
    result.update(numeric=mid, error_bound=bound, slopes=(left, right),
                  scheme=f"{result['scheme']}; its estimate within its own bound, the one-sided slopes ({left:.6g}, "
                         f"{right:.6g}) decide")
    # (over the smallest step the slopes take: their rounding there is the largest, and a stair is read as such)
    return _stairs(phi_many, result, redo, obs, tol, dot_rounding, natural, precision, EPS64 ** 0.5 * scale, scale,
                   rounding), pair


def _scalar_preamble(x: torch.Tensor, u: torch.Tensor, g: torch.Tensor | None
                     ) -> tuple[torch.Tensor, float, Rounding]:
    """The direction, vᵀJu and the rounding terms of a one-element input, as the tensor path computes them:
    u / |u|_2 * max(1, |x|), g u, and :func:`_rounding`'s eps |g x|_2 and 4 eps |g u| (a one-element 2-norm
    is sqrt(v * v), torch's as well)."""
    import torch

    uv, xv = u.item(), x.item()
    uv = _one_element_direction(xv, uv)
    direction = torch.tensor(uv, dtype=torch.float64).reshape(x.shape)
    if g is None:
        return direction, 0.0, {"perturbation": 0.0, "dot_rounding": 0.0}
    analytic, rounding = _scalar_rounding(g.item(), xv, uv)
    return direction, analytic, rounding


def _scalar_rounding(gv: float, xv: float, uv: float) -> tuple[float, Rounding]:
    """g u of one element and :func:`_rounding`'s terms for it, eps |g x|_2 and 4 eps |g u|, in Python floats as
    the tensor path computes them (a one-element 2-norm is sqrt(v * v), torch's as well)."""
    gu, product = gv * uv, gv * xv
    perturbation = EPS64 * math.sqrt(product * product)
    if perturbation == math.inf:  # the square overflowed: _scaled_norm of one value is its magnitude
        perturbation = EPS64 * abs(product)
    # torch's sum starts from +0.0 (a sum of -0.0 is +0.0)
    return 0.0 + gu, {"perturbation": perturbation, "dot_rounding": 4 * EPS64 * abs(gu) * 1.0 + SUBNORMAL * abs(uv)}


def _keeps(memo: dict[tuple[float, ...], Any], ts: list[float]) -> bool:
    """Whether a phi's *memo* keeps the outputs at the steps *ts*: the quick stage's batch (the first asked for) and
    its halvings' (:func:`halved`: 2 steps each), no more (each output's own check asks for the same steps)."""
    return not memo or (len(ts) == 2 and len(memo) <= HALVINGS)


def _scalar_phi(problem: Problem, j: int, xv: float, uv: float, ws: list[float],
                memo: dict[tuple[float, ...], Any] | None, evals: list[int], info: Info) -> Batched:
    """phi_many for a one-element input and scalar outputs, in Python floats: the points x + t u, the calls
    in order (batched_outputs' loop), sum_k v_k f_k in order and the largest sqrt(sum_k (v_k f_k)^2), as the
    tensor path sums them (in order, for at most 4 terms). *memo* keeps the quick stages' outputs (:func:`_keeps`)."""
    import torch

    shape = problem.inputs[j].shape

    def phi_many(ts: list[float]) -> tuple[list[float], float]:
        rows = None if memo is None else memo.get(tuple(ts))
        if rows is None:
            evals[0] += len(ts)
            info.setdefault("evaluation", "loop")
            xs, call, rows = list(problem.inputs), problem.call, []
            with E.GradMode(False):
                for t in ts:
                    single = torch.scalar_tensor(xv + t * uv, dtype=torch.float64)
                    xs[j] = single if not shape else single.reshape(shape)
                    rows.append([o.item() for o in call(*xs)])
            rows = _without_dead_scalars(problem, rows)
            if memo is not None and _keeps(memo, ts):
                memo[tuple(ts)] = rows
        return _scalar_weighted(rows, ws)
    return _with_exact(_with_noise(_with_unit(phi_many, problem), problem, ws, (j,)), xv, uv)


def _scalar_weighted(rows: list[list[float]], ws: list[float]) -> tuple[list[float], float]:
    """:func:`_weighted` for scalar outputs (*rows*: the outputs at each step), in Python floats: sum_k v_k f_k in
    order and the largest sqrt(sum_k (v_k f_k)^2), as the tensor path sums them (in order, for at most 4 terms)."""
    import torch

    totals, largest = [], 0.0
    for row in rows:
        terms = [f * w for f, w in zip(row, ws)]
        total, squares = 0.0 + terms[0], terms[0] * terms[0]  # torch's sums start from +0.0
        for term in terms[1:]:
            total, squares = total + term, squares + term * term
        totals.append(total)
        if squares != squares or largest != largest:  # NaN wins, as in torch's max
            largest = math.nan
        elif squares > largest:
            largest = squares
    size = largest ** 0.5
    if size == math.inf:  # the squares overflowed: _scaled_norm on the same terms, as tensors
        size = _scaled_norm([torch.tensor([[r[k] * ws[k]] for r in rows], dtype=torch.float64)
                             for k in range(len(ws))])
    return totals, size


def _without_dead(problem: Problem, outs: list[torch.Tensor]) -> list[torch.Tensor]:
    """The outputs at each step (rows), with the elements that are not finite at the point read as 0: they
    have no derivative there and their weight is 0, but 0 times their inf or NaN at a step is NaN
    (problem.dead, set where some outputs are finite)."""
    if problem.dead is None:
        return outs
    return [o if d is None else o.masked_fill(d.reshape(1, -1), 0.0) for o, d in zip(outs, problem.dead)]


def _without_dead_scalars(problem: Problem, rows: list[list[float]]) -> list[list[float]]:
    """:func:`_without_dead` for scalar outputs, one list of values per step."""
    if problem.dead is None:
        return rows
    dead = [d is not None for d in problem.dead]
    return [[0.0 if gone else v for v, gone in zip(row, dead)] for row in rows]


def _as_float64(t: torch.Tensor) -> torch.Tensor:
    import torch

    return t if t.dtype == torch.float64 else t.to(torch.float64)


_FLAGS: list[torch.Tensor] = []  # (1, 1) bool tensors False and True, shared (never written)


def _flag(value: bool) -> torch.Tensor:
    """A (1, 1) bool tensor holding *value*: one output element's mask of moved elements (read, never written)."""
    if not _FLAGS:
        import torch

        with torch.inference_mode(False):
            _FLAGS.extend([torch.zeros((1, 1), dtype=torch.bool), torch.ones((1, 1), dtype=torch.bool)])
    return _FLAGS[int(value)]


def _weighted(outs: list[torch.Tensor], ws: list[torch.Tensor]) -> tuple[list[float], float]:
    """sum_k v_k . f_k per row of the outputs (one row per step), and the largest 2-norm of the terms."""
    import torch

    if len(outs) == 1 and outs[0].shape[1] == 1 and E.LEAN:  # one output element: as a scalar output's
        return _scalar_weighted([[f] for f in E.flat_list(outs[0])], [ws[0].item()])
    terms = [o * v.reshape(1, -1) for o, v in zip(outs, ws)]
    if len(terms) == 1:  # one output: stacking and summing one tensor changes nothing
        total = terms[0].sum(1)
        size = float(terms[0].square().sum(1).max()) ** 0.5
    else:
        total = torch.stack([term.sum(1) for term in terms]).sum(0)
        size = float(torch.stack([term.square().sum(1) for term in terms]).sum(0).max()) ** 0.5
    if size == math.inf:  # the squares overflowed (|terms| above 1e154): the same norm, scaled first
        size = _scaled_norm(terms)
    return total.tolist(), size


def _weighted_moving(outs: list[torch.Tensor], ws: list[torch.Tensor], base: list[torch.Tensor],
                     moving: list[torch.Tensor] | None = None) -> tuple[list[float], float]:
    """:func:`_weighted` of the outputs' changes from the point, sum_k v_k . (f_k(x + t u) - f_k(x)) per row
    (phi less the constant phi(0): the same derivative), and the largest 2-norm of the terms v_k f_k of the
    output elements that change at some step: an element the steps leave bitwise where it was (a direction
    along a few elements of an elementwise function leaves the rest unchanged) adds exactly 0 to every row,
    and nothing to its rounding. Full mode's confirmation along a few small columns: |x|^1.5 at 0.001 among
    24 elements of order one, whose other outputs' rounding (eps |f| / h of a sum of order one) hid 1e-8 of
    its entry."""
    import torch

    if len(outs) == 1 and outs[0].shape[1] == 1 and E.LEAN:  # one output element: in Python floats
        w, at = ws[0].item(), base[0].item()
        values = E.flat_list(outs[0])
        changes = [o - at for o in values]
        stirred = any(c != 0 for c in changes)  # (NaN != 0: changed, as the tensor path)
        if moving is not None:
            moving[:] = [_flag(stirred or (bool(moving[0]) if moving else False))]
        # the changes weighted (phi less phi(0)), and the size of the terms of an output element that moved
        totals = _scalar_weighted([[c] for c in changes], [w])[0]
        return totals, _scalar_weighted([[f] for f in values], [w * (1.0 if stirred else 0.0)])[1]
    moved = [o - b for o, b in zip(outs, base)]
    weights = [v.reshape(1, -1) for v in ws]
    changed = [(m != 0).any(0, keepdim=True) for m in moved]
    if moving is not None:  # the elements moved at any step so far, for phi's measured rounding (_with_noise)
        moving[:] = changed if not moving else [a | c for a, c in zip(moving, changed)]
    terms = [o * (w * c) for o, c, w in zip(outs, changed, weights)]
    if len(outs) == 1:  # one output: stacking and summing one tensor changes nothing
        total = (moved[0] * weights[0]).sum(1)
        size = float(terms[0].square().sum(1).max()) ** 0.5
    else:
        total = torch.stack([(m * w).sum(1) for m, w in zip(moved, weights)]).sum(0)
        size = float(torch.stack([t.square().sum(1) for t in terms]).sum(0).max()) ** 0.5
    if size == math.inf:
        size = _scaled_norm(terms)
    return total.tolist(), size


def _allowed(judged: J.Judged) -> float:
    """float(judged.allowed) of one judged value: atol + rtol |reference| (0 for an infinite one) + the
    evidence term, in that order, in Python floats where the value passed (its terms are plain then)."""
    if judged.plain is not None:  # (diff, ref, evidence) as the judge's Python floats had them
        size = abs(judged.plain[1])
        return judged.atol + judged.rtol * (0.0 if size == math.inf else size) + judged.plain[2]
    if not (E.LEAN and judged.all_pass and judged.ref.dim() == 0):
        return float(judged.allowed)
    size = abs(float(judged.ref))
    return judged.atol + judged.rtol * (0.0 if size == math.inf else size) + float(judged.evidence)


def _loop_along(problem: Problem, j: int, x: torch.Tensor, u: torch.Tensor, ts: list[float],
                info: Info) -> list[torch.Tensor]:
    """batched_outputs' loop at the points x + t u (t in *ts*): each point made on its own, contiguous, with
    the values a row of the batch x + t u holds; the calls in the same order."""
    import torch

    info.setdefault("evaluation", "loop")
    xs, call, rows = list(problem.inputs), problem.call, []
    if E.LEAN and x.numel() <= E.TINY and x.dtype == torch.float64 and u.dtype == torch.float64:
        # a few float64 elements: x_i + t u_i in Python floats, the same IEEE operations, each point a fresh tensor
        xl, ul = E.flat_list(x), E.flat_list(u)
        for t in ts:
            xs[j] = E.fresh([a + t * b for a, b in zip(xl, ul)], x.shape)
            rows.append(call(*xs))
        return [torch.stack([r[k] for r in rows]) for k in range(len(problem.outputs))]
    inplace = torch.promote_types(u.dtype, x.dtype) == u.dtype  # x + t u has u's dtype: computed into t u
    for t in ts:
        if inplace:
            point = u * t  # x + t u, the same two roundings, one tensor fewer (in place on the product, ours)
            point += x
        else:
            point = x + t * u
        xs[j] = (point if point.dtype == x.dtype else point.to(x.dtype)).contiguous()
        rows.append(call(*xs))
    return [torch.stack([r[k] for r in rows]) for k in range(len(problem.outputs))]


def _projected(tol: ToleranceUsed, u: torch.Tensor, vs: list[torch.Tensor]) -> ToleranceUsed:
    """An elementwise atol projected onto vᵀJu: atol * |u|_1 * |v|_1 (the worst case of aligned errors)."""
    if not tol.atol:
        return tol
    weight = float(u.abs().sum()) * sum(float(v.abs().sum()) for v in vs)
    return dataclasses.replace(tol, atol=tol.atol * weight)


def _phi_along(problem: Problem, j: int, u: torch.Tensor, ws: list[torch.Tensor],
               memo: dict[tuple[float, ...], list[torch.Tensor]] | None, evals: list[int], info: Info, scalars: bool,
               base: list[torch.Tensor] | None = None) -> Batched:
    """phi(t) = sum_k v_k . f_k(x + t u) for input j along u, the outputs weighted by *ws* (a Batched: phi at
    several t at once). With *memo* (one per input and direction u), the outputs at the first set of steps asked
    for (the quick stage's) are kept and reused by every choice of weights; one batch of outputs, no more, is held.
    *evals* counts the evaluations; *scalars* (float64 scalar outputs, at most 4) takes Python floats for a
    one-element input; *base* (along part of an input: the outputs at the point) makes phi the moved output
    elements' change alone (:func:`_still`)."""
    import torch

    x = problem.inputs[j].detach()
    if scalars and x.numel() == 1 and x.dtype == torch.float64 and u.dtype == torch.float64:
        return _scalar_phi(problem, j, x.item(), u.item(), [v.item() for v in ws], memo, evals, info)

    def phi_many(ts: list[float]) -> tuple[list[float], float]:
        outs = None if memo is None else memo.get(tuple(ts))
        if outs is None:
            evals[0] += len(ts)
            with E.GradMode(False):
                if E.LEAN and len(ts) <= SMALL_BATCH:  # batched_outputs' loop, on the same points, no batch
                    got = _loop_along(problem, j, x, u, ts, info)
                else:
                    t = torch.tensor(ts, dtype=torch.float64).reshape(-1, *([1] * x.dim()))
                    got = batched_outputs(problem, j, (x + t * u).to(x.dtype), info)
            outs = _without_dead(problem, [o.reshape(len(ts), -1) if o.dtype == torch.float64
                                           else o.to(torch.float64).reshape(len(ts), -1) for o in got])
            if memo is not None and _keeps(memo, ts):
                memo[tuple(ts)] = outs
        return _weighted(outs, ws) if base is None else _weighted_moving(outs, ws, base, moving)
    moving: list[torch.Tensor] = []  # (along part of an input) the output elements some step has moved so far

    def moved() -> list[torch.Tensor | None]:
        return [m.reshape(-1) for m in moving] if moving else [None] * len(ws)
    marked = _with_noise(_with_unit(phi_many, problem), problem, ws, (j,), moved if base is not None else None)
    if base is not None:
        marked.still = _still(problem, j, u, ws, moved)  # type: ignore[attr-defined]
    if x.numel() == 1 and x.dtype == torch.float64 and u.dtype == torch.float64:  # as _scalar_phi
        marked = _with_exact(marked, x.item(), u.item())
    return marked


def _outputs_alone(problem: Problem, vs: list[torch.Tensor]) -> Callable[[int], tuple[torch.Tensor | None, ...] | None]:
    """output_alone(k): vₖᵀJₖ for every checked input, output k alone receiving a gradient (None: k does not
    require grad): at the first call, one forward and then one backward per output through its graph (retained
    until the last), for all inputs at once; the same backwards as a forward of their own each, with one
    forward instead of one per output (a forward right before its backwards, as every batch of them gets)."""
    alone: dict[int, tuple[torch.Tensor | None, ...] | None] = {}

    def output_alone(k: int) -> tuple[torch.Tensor | None, ...] | None:
        from .evaluate import grad

        if not alone:
            xs, outs = problem.forward_with_graph()
            wrt = [xs[i] for i in problem.diff]
            last = max((i for i, o in enumerate(outs) if o.requires_grad), default=-1)
            for i, o in enumerate(outs):
                alone[i] = (grad([o], wrt, [vs[i]], allow_unused=True, retain_graph=i < last)
                            if o.requires_grad else None)
        return alone[k]

    return output_alone


def directional(problem: Problem, stream: E.Stream, tol: ToleranceUsed, info: Info, *, vs: list[torch.Tensor],
                grads: tuple[torch.Tensor | None, ...], localize: bool = True,
                only: tuple[int, torch.Tensor, str] | None = None,
                seen: dict[int, tuple[torch.Tensor, float, float]] | None = None,
                trail: dict[int, list[tuple[torch.Tensor, float, float]]] | None = None,
                alone: int | None = None,
                memos: dict[int, tuple[torch.Tensor, dict[tuple[float, ...], Any]]] | None = None
                ) -> dict[int, Findings]:
    """Judge vᵀJ_j u_j against the numeric derivative along u_j per input; localize disagreements by
    bisection (when *localize*). *vs* are the output weights, *grads* vᵀJ at these inputs. With *only*
    (j, still, which): input j alone, its elements where *still* is True left where they are (u is 0 there, as
    at a held element): full mode's confirmation along some of its columns (*which*, for the record). Into
    *seen*, for each input whose projection agreed: its direction u_j (flat, float64), the largest error of
    vᵀJ_j u_j its evidence leaves possible (:func:`_consistent`; for full mode, which confirms again the columns
    whose 1e-8 that does not exclude) and the outputs' own rounding in its bound (judge_along's
    "rounding_floor"). Into *trail*, for each input, every projection that agreed (a split's parts too): its u, that
    possible error and its truncation (:func:`_curve`), from which full mode says which entries no evidence resolved
    to 1e-8. With *alone* (one input of several): that input's own check only, as it follows the joint projection
    of every input (the same direction, the same steps), without that projection or the other inputs' checks:
    full mode's confirmation of an input autograd gives no gradient, whose other inputs nothing asked to confirm.
    With *memos* (shared by the calls of one check): per input, the direction of its own projection and the outputs
    its quick stage evaluated there; a later call projecting that input along the same direction reads them, not
    evaluating them again (the function is deterministic: the check's re-run proved it)."""
    import torch

    evals = [0]

    def phi_for(j: int, u: torch.Tensor, weights: list[torch.Tensor] | None = None,
                memo: dict[tuple[float, ...], list[torch.Tensor]] | None = None, changes: bool = False) -> Batched:
        """phi along u for input j (:func:`_phi_along`), the outputs weighted by *vs* or *weights*; with *changes*,
        phi less phi(0) (as along a part of one input, *only*: the moved output elements' change alone)."""
        if changes and base is None and not at_point:
            at_point.append(_without_dead(problem, [_as_float64(o).reshape(1, -1) for o in problem.outputs]))
        return _phi_along(problem, j, u, vs if weights is None else weights, memo, evals, info, scalars,
                          at_point[0] if changes and base is None else base)

    # along a part of one input (*only*), phi less phi(0), whose unchanged outputs add nothing to its rounding
    base = None if only is None else _without_dead(problem, [_as_float64(o).reshape(1, -1) for o in problem.outputs])
    at_point: list[list[torch.Tensor]] = []  # (the same, made where a projection asks for the changes alone)
    output_alone = _outputs_alone(problem, vs)

    found: dict[int, Findings] = {}
    # the inputs the joint projection accepted but did not resolve, with the findings of that agreement
    joint: dict[int, Findings] | None = None
    comparisons = info.setdefault("directional", [])
    # one-element inputs of functions with at most 4 scalar float64 outputs: in Python floats (_scalar_preamble,
    # _scalar_phi), the same IEEE operations as the tensor path
    scalars = E.LEAN and len(problem.outputs) <= 4 and all(
        o.dtype == torch.float64 and o.numel() == 1 for o in problem.outputs)
    # uniform: randn costs 3x more
    # (along part of one input, *only*: the draws up to its own, which the ones before it set; none after it)
    drawn = problem.diff if only is None else problem.diff[:problem.diff.index(only[0]) + 1]
    several = len(problem.diff) > 1 and only is None  # (then a factor per input is drawn after the directions)
    counts = [problem.inputs[j].numel() for j in drawn]
    kept = stream.first(sum(counts) + (len(problem.diff) if several else 0))
    several = several and alone is None  # (alone: the same draws, the factors not used)
    if kept is not None:  # a few elements: the stream's first draws, as the generator below gives them
        draws, offset = [], 0
        for j, count in zip(drawn, counts):
            draws.append(E.fresh([r * 2 - 1 for r in kept[offset:offset + count]], problem.inputs[j].shape))
            offset += count
    else:
        gen = stream.generator()
        draws = [torch.empty(problem.inputs[j].shape, dtype=torch.float64).uniform_(-1.0, 1.0, generator=gen)
                 for j in drawn]  # 2 r - 1 for torch.rand's r, exactly (see api._gather)
    if several:
        # each input's direction scaled by its own random factor in [0.5, 1.5) when moved with the others: a
        # one-element input's u is ±max(1, |x|), and two of them at unit scale cancel errors of opposite sign
        # on half of the seeds ((x - y)^2 with both partials halved); at independent continuous scales, never.
        # Drawn after the directions, which the inputs' own checks use unchanged
        # (r + 0.5 for torch.rand's r, exactly)
        factors = ([r + 0.5 for r in kept[offset:]] if kept is not None else
                   torch.empty(len(problem.diff), dtype=torch.float64).uniform_(0.5, 1.5, generator=gen).tolist())
        together = _together(problem, draws, factors, vs, grads, tol, output_alone, evals, info, seen, trail)
        if together is not None:  # every input agrees at once: only the inputs whose terms it left open remain
            entries, again = together
            comparisons += entries
            for j in problem.diff:
                x = problem.inputs[j]
                f = found[j] = Findings(j, problem.names[j], tuple(x.shape), [tuple(o.shape) for o in problem.outputs])
                f.total = x.numel()
            if not again:
                info["evaluations"] = info.get("evaluations", 0) + evals[0]
                return found
            joint = {j: found[j] for j in again}  # judged on their own below, as they would be without the others
    for pos, j in enumerate(problem.diff):
        if (only is not None and j != only[0]) or (joint is not None and j not in joint) or alone not in (None, j):
            continue
        x = problem.inputs[j].detach()
        f = found[j] = Findings(j, problem.names[j], tuple(x.shape), [tuple(o.shape) for o in problem.outputs])
        if not x.numel():  # an empty input beside others: no element to move, nothing to compare (as full mode's 0
            continue  # columns); its projection along an empty u read NaN, and bisecting it raised IndexError
        u = draws[pos]
        if only is not None:  # |r_i| in [0.5, 1.5): an element's term is small by its gradient only, not by its
            u = u.add_(u.sign(), alpha=0.5)  # draw, and is split out (by its own term, _split) for that alone
        # each element moves relative to its own magnitude, max(1, |x_i|): a tensor holding 400 and 0.3
        # is not probed with the step of 400 for both
        f.held = problem.held(j)
        given = grads[pos]
        g = None if given is None else given if given.dtype == torch.float64 else given.to(torch.float64)
        tiny = (scalars and x.numel() == 1 and x.dtype == torch.float64 and f.held is None
                and (g is None or g.numel() == 1))
        memo: dict[tuple[float, ...], Any] | None = {} if len(problem.outputs) > 1 else None
        measure = own_rounding(problem, j, list(vs), given)  # (measured only where a projection would fail)
        if tiny:  # one element, scalar outputs: the same arithmetic in Python floats (see _scalar_preamble)
            u, analytic, rounding = _scalar_preamble(x, u, g)
            mine, memo = _own_memo(memos, j, u, memo, alone is not None)
            out = judge_along(phi_for(j, u, memo=mine), analytic, _projected(tol, u, vs), scale=1.0,
                              **rounding, precision="float64", own=partial(measure, u))
            gu = None
            if out["verdict"] == J.PASS and g is not None and only is None:  # (as _left_coarse: u is +-max(1, |x|))
                typical = max(abs(g.item()) * max(abs(x.item()), 1.0), 1.0)
                if typical * SPLIT < float(out["allowed"]):
                    f.coarse = (1, float(out["allowed"]) / typical)
        elif f.held is None:
            sizes = x.abs()  # every element finite: _sizes(x)
            x_seen, sizes = x, (sizes if sizes.dtype == torch.float64 else sizes.to(torch.float64)).clamp_min_(1.0)
        else:  # non-finite elements stay where they are, and their gradient is not judged
            g, x_seen = _without_held(g, x)
            u, sizes = u.masked_fill(~torch.isfinite(x), 0.0), _sizes(x)
        if only is not None and not tiny:  # these stay where they are too: the caller judges them on their own
            still = only[1]
            u, x_seen = u.masked_fill(still, 0.0), x_seen.masked_fill(still, 0.0)
            g = None if g is None else g.masked_fill(still, 0.0)
        if not tiny:
            norm = max(float(torch.linalg.vector_norm(u)), 1e-300)
            if x.numel() == 1 and x.dtype == torch.float64 and f.held is None:  # as _scalar_preamble
                u = torch.full_like(u, _one_element_direction(x.item(), u.item()))
            else:
                u = u.div_(norm).mul_(sizes)  # u / |u| * sizes: u is ours
            gu = None if g is None else g * u
            analytic = 0.0 if gu is None else float(gu.sum())
            mine, memo = _own_memo(memos, j, u, memo, alone is not None) if only is None else (memo, memo)
            out = judge_along(phi_for(j, u, memo=mine), analytic, _projected(tol, u, vs), scale=1.0,
                              **_rounding(g, u, x_seen, gu), precision=str(x.dtype).removeprefix("torch."),
                              own=partial(measure, u))
        scale = 1.0
        comparisons.append(_entry(problem.names[j], analytic, out) if only is None else
                           {**_entry(problem.names[j], analytic, out), "along": only[2]})
        f.total = x.numel() - (0 if f.held is None else len(f.held))
        index = None
        crossed = False  # (every element the projection moved lies within its largest step of 0: judged by _uncross)
        if out["verdict"] == J.FAIL and g is not None and not tiny:
            uncrossed = _uncross(problem, j, g, u, x_seen, phi_for, tol, vs, out, comparisons, measure)
            if uncrossed is not None:  # (the parts pass, and contradict the whole's estimate)
                u, out, scale = uncrossed
                crossed = scale != 1.0
        if out["verdict"] == J.PASS and g is not None and not tiny and not crossed:
            # elements whose terms are too small against the allowance to be resolved by it: judged on their own
            passed: list[tuple[torch.Tensor, float]] = []  # (the parts that passed: elements, allowance)
            split = _split(problem, j, g, u, norm, sizes, x_seen, phi_for, tol, vs, out, comparisons,
                           terms=only is not None, trail=None if trail is None else trail.setdefault(j, []),
                           measure=measure, passed=passed)
            if split is not None:
                u, index, out = split
            else:  # a pass too coarse for elements far from 0, whose smaller neighbours shrank its steps: those alone
                far = _far_from_0(problem, j, g, u, norm, sizes, x_seen, phi_for, tol, vs, out, comparisons, measure,
                                  None if trail is None else trail.setdefault(j, []), passed)
                if far is not None:
                    u, index, out = far
                elif only is None:  # the pass stands: where it, and its parts, resolve an element coarser than the
                    f.coarse = _left_coarse(g, sizes, norm, u, float(out["allowed"]), passed)  # promise, say so
        if out["verdict"] == J.PASS:
            if seen is not None:  # the whole projection's (elements a split judged again were resolved finer)
                seen[j] = (u.reshape(-1), _consistent(out), out.get("rounding_floor", 0.0))  # (float64 u)
            if trail is not None:
                trail.setdefault(j, []).append((u.reshape(-1), _consistent(out), _curve(out)))
            # each output alone: a backward may mishandle one output's gradient (not along a part of an input, for
            # full mode, whose confirmation before it judged each output alone)
            if memo is not None and only is None and not crossed:
                _per_output(problem, pos, u, vs, phi_for, memo, output_alone, tol, f)
            continue
        if memo is not None and only is None and out["reason"] in (J.OWN_ROUNDING, J.STAIRS):
            # undecided for autograd's own rounding, or the function's at larger moves, alone: each output alone still
            # (a backward may mishandle one output's gradient, whose own projection that rounding need not cover)
            _per_output(problem, pos, u, vs, phi_for, memo, output_alone, tol, f)
        memo = None  # the kept evaluations go before any bisection
        if g is None and out["verdict"] == J.FAIL:
            f.extra.append(_projection(f, out, "none-gradient",
                                       f"'{problem.names[j]}' requires grad but autograd gives None, while the "
                                       f"numeric directional derivative is {out['numeric']:.6g}"))
            continue
        if not localize or g is None or (joint is not None and out["verdict"] != J.FAIL
                                         and abs(out["numeric"] - analytic) <= out["error_bound"]):
            # (an input the joint projection accepted, inconclusive on its own, whose evidence does not even lean
            # towards a disagreement: the joint agreement stands below, and bisecting it would spend evaluations on
            # parts of the same noise, 12 per part, 340 in all for the biases before batch norm of a small model, a
            # reviewer found. Leaning, it is bisected as alone: a part, moved further than in the whole, may resolve a
            # zero backward's error, 1e-11 x.sum() + 1.5 at seed 5)
            moved = (u.reshape(-1) != 0).nonzero().flatten() if index is None else index
            # a projection that moved one element alone names it: that element's gradient (its column of vᵀJ) is off
            at = unravel(int(moved[0]), tuple(x.shape)) if len(moved) == 1 and x.dim() else None
            unresolved = "" if index is None else " the whole projection could not resolve"
            f.extra.append(_projection(f, out, "projection", (
                f"vᵀJu along a random direction u, restricted to {len(index)} elements{unresolved}"
                if at is None and index is not None else "vᵀJu along a random direction u" if at is None
                else f"vᵀJu along element {at} of '{problem.names[j]}' alone{unresolved and ', which' + unresolved}: "
                     "its gradient (vᵀJ there) is off"), at))
            continue
        _bisect(problem, j, g, u, phi_for, scale, tol, vs, f, out, index, measure)
    if joint is not None:
        # an input the joint projection could not resolve, judged on its own: a disagreement there beyond its own
        # evidence is a failure the joint sum hid, and an agreement is finer evidence than the sum's. Where its own
        # projection cannot decide (inconclusive: its evidence too coarse against a term of about 0), the joint
        # agreement stands, as before: a bias before batch norm in train mode, whose gradient is 0 by the
        # normalization and whose projection reads the outputs' rounding, passes beside the other parameters, as
        # gradcheck passes it (alone it is inconclusive)
        restored = [j for j in joint if found[j].verdict == "inconclusive"]
        for j in restored:
            found[j] = joint[j]
        if restored:
            one = len(restored) == 1
            error, term = max(again[j][0] for j in restored), max(again[j][1] for j in restored)
            names = ", ".join(repr(problem.names[j]) for j in restored)
            info.setdefault("notes", problem.notes).append(
                f"{names} {'passes' if one else 'pass'} on the projection of every input at once, whose possible "
                f"error (up to {error:.3g}) does not resolve 1e-8 of {'its term' if one else 'their terms'} (|vᵀJu| up "
                f"to {term:.3g}); "
                f"{'its own projection' if one else 'their own projections'} could not decide (inconclusive, in the "
                "directional comparisons)")
    info["evaluations"] = info.get("evaluations", 0) + evals[0]
    return found


def _own_memo(memos: dict[int, tuple[torch.Tensor, dict[tuple[float, ...], Any]]] | None, j: int, u: torch.Tensor,
              memo: dict[tuple[float, ...], Any] | None, keep: bool
              ) -> tuple[dict[tuple[float, ...], Any] | None, dict[tuple[float, ...], Any] | None]:
    """The memo input j's own projection along *u* evaluates through, and *memo* after it (several outputs: the
    same one, which each output alone reads too): with *memos* (:func:`directional`), the one an earlier call of the
    check filled along the same u, else, with *keep* (the input's own check alone, *alone*), a new one kept there
    (only such a check's outputs are kept for the check's life: they are the ones read again); else *memo*."""
    import torch

    if memos is None:
        return memo, memo
    entry = memos.get(j)
    if entry is not None and entry[0].shape == u.shape and bool(torch.equal(entry[0], u)):
        mine = entry[1]
    elif keep:
        mine = memo if memo is not None else {}
        memos[j] = (u.clone(), mine)
    else:
        return memo, memo
    return mine, (mine if memo is not None else None)


def _entry(name: str, analytic: float, out: dict[str, Any]) -> dict[str, Any]:
    """One directional comparison as info["directional"] lists it."""
    return {"input": name, "autograd": analytic,
            **{k: v for k, v in out.items()
               if k not in ("judged", "observed", "verdict", "reason", "rounding_floor", "curve", "reach", "shrunk")},
            "verdict": J.NAMES[out["verdict"]],
            "reason": J.reason_text(out["reason"], analytic, out["numeric"], out.get("slopes"))}


def _unresolved_elements(g: torch.Tensor, sizes: torch.Tensor, norm: float, allowed: float,
                         active: torch.Tensor, u: torch.Tensor | None = None) -> torch.Tensor:
    """The elements (flat, among *active*) that a projection with allowance *allowed* cannot resolve to
    SPLIT of their typical term max(|g_i| max(1, |x_i|), 1) / |r| (u_i = r_i max(1, |x_i|) / |r|, r uniform
    in [-1, 1]; with output weights of order one, 1 / max(1, |x_i|) is the natural size of a gradient, so an
    element whose gradient is near zero is measured against that). With *u* (full mode's confirmation along
    the columns central differences could not resolve, whose promise is RESOLVE of each entry): those whose
    own term |g_i u_i|, not zero, is below allowed / RESOLVE. (Not also where the projection's truncation could
    hide it, :func:`resolves`: that flagged every element of a reviewer's projection along three columns, two of
    them of large terms, so none was split off, and a 1e-8 bug at the small one passed that the split fails; such
    columns are named in the record, full mode's left_open.)"""
    if u is not None:
        term = (g.reshape(-1) * u.reshape(-1)).abs()
        return active & (term > 0) & (term * RESOLVE < allowed)
    typical = (g.reshape(-1).abs() * sizes.reshape(-1)).clamp_min_(1.0).div_(norm)
    return active & (typical * SPLIT < allowed)


def _none_to_split(g: torch.Tensor, u: torch.Tensor, sizes: torch.Tensor, norm: float, allowed: float,
                   terms: bool) -> bool:
    """Whether :func:`_split`'s first step finds nothing to judge again (no element unresolved, or every moved
    one), for a few elements in Python floats: :func:`_unresolved_elements`' comparisons on the same IEEE
    products (NaN compares False in both; clamp_min keeps a NaN)."""
    us, gs = E.flat_list(u), E.flat_list(g)
    active = [c != 0 for c in us]
    if terms:
        flags = [a and abs(d * c) > 0 and abs(d * c) * RESOLVE < allowed for a, d, c in zip(active, gs, us)]
    else:
        typical = [abs(d) * s for d, s in zip(gs, E.flat_list(sizes))]
        flags = [a and (1.0 if t < 1.0 else t) / norm * SPLIT < allowed for a, t in zip(active, typical)]
    count = sum(flags)
    return not count or count == sum(active)


def _split(problem: Problem, j: int, g: torch.Tensor, u: torch.Tensor, norm: float, sizes: torch.Tensor,
           seen: torch.Tensor, phi_for: Callable[..., Batched], tol: ToleranceUsed, vs: list[torch.Tensor],
           whole: dict[str, Any], comparisons: list[dict[str, Any]], terms: bool = False,
           trail: list[tuple[torch.Tensor, float, float]] | None = None,
           measure: Callable[[torch.Tensor, float], float | None] | None = None,
           passed: list[tuple[torch.Tensor, float]] | None = None
           ) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]] | None:
    """A passing projection vᵀJu is a sum; its allowance (rtol of the sum plus the evidence's bound) can
    exceed what an element with a small term contributes, which may then be wrong by far more than the
    tolerance (y = x³ at [1e4, 1] with the second gradient 1e-3 off; sqrt at [3e-6, 1], whose first element
    leaves Ridders a bound of 1e-3, with the second 1e-4 off). The elements it cannot resolve
    (:func:`_unresolved_elements`) are judged again, alone, along u restricted to them, and so on, up to
    SPLITS times, while they are a proper part of the elements judged. With *terms* (full mode's confirmation
    along columns it could not resolve), an element is unresolved when RESOLVE of its own term |g_i u_i| is
    below the allowance. Returns the restricted u, its elements (flat indices) and the judgement where one
    disagreed, else None. Into *trail*: each part that agreed, its u and the error its evidence leaves possible; into
    *passed*: its elements (a flat mask) and its allowance (:func:`_left_coarse`)."""
    import torch

    allowed = float(whole["allowed"])
    if not terms and SPLIT / norm >= allowed:  # every element's typical term is at least 1 / norm: none is unresolved
        return None
    if E.LEAN and u.numel() <= E.TINY and _none_to_split(g, u, sizes, norm, allowed, terms):
        return None
    active = u.reshape(-1) != 0
    name = problem.names[j]
    for _ in range(SPLITS):
        flagged = _unresolved_elements(g, sizes, norm, allowed, active, u if terms else None)
        count = int(flagged.sum())
        if not count or count == int(active.sum()):
            return None
        mask = flagged.reshape(u.shape)
        part = torch.where(mask, u, 0.0)
        g_part = torch.where(mask, g, 0.0)
        gu = g_part * part
        analytic = float(gu.sum())
        out = judge_along(phi_for(j, part), analytic, _projected(tol, part, vs), scale=1.0,
                          **_rounding(g_part, part, seen, gu),
                          precision=str(problem.inputs[j].dtype).removeprefix("torch."),
                          own=None if measure is None else partial(measure, part))
        comparisons.append(_entry(f"{name} ({count} of {int(active.sum())} elements, unresolved by the projection "
                                  "before)", analytic, out))
        if out["verdict"] != J.PASS:
            return part, flagged.nonzero().flatten(), out
        if trail is not None:
            trail.append((part.reshape(-1), _consistent(out), _curve(out)))
        if passed is not None:
            passed.append((flagged, float(out["allowed"])))
        active, allowed = flagged, float(out["allowed"])
    return None


def _together(problem: Problem, draws: list[torch.Tensor], factors: list[float], vs: list[torch.Tensor],
              grads: tuple[torch.Tensor | None, ...], tol: ToleranceUsed,
              output_alone: Callable[[int], tuple[torch.Tensor | None, ...] | None], evals: list[int],
              info: Info, seen: dict[int, tuple[torch.Tensor, float, float]] | None = None,
              trail: dict[int, list[tuple[torch.Tensor, float, float]]] | None = None
              ) -> tuple[list[dict[str, Any]], dict[int, tuple[float, float]]] | None:
    """Every input moved at once, each along its own direction u_j (the one its own check would use): the
    quick stage's numeric derivative of phi is sum_j vᵀJ_j u_j, 4 evaluations for all inputs instead of 4 per
    input. It only accepts, and only what every input's own check would accept: the disagreement of the sums
    must lie within the evidence bound of the sum (and atol projected on u_j; no rtol term, which a sum of
    terms that cancel would make too generous), for all outputs together and for each output alone. Each
    u_j is scaled by its own random factor (*factors*, in [0.5, 1.5)), so the directions are independent
    continuous draws even for one-element inputs, and signed so that every input's term vᵀJ_j u_j is not
    negative: a relative error shared by the inputs (f(x - y) with both partials scaled by 1 + 1e-8, which
    cancelled on about 1% of the seeds, a reviewer found) then adds up. For one output alone, whose terms may
    have either sign, terms that cancel to less than half their total size send the inputs to their own
    checks. Anything else returns
    None and the inputs are checked one by one (gradcheck's fast mode checks input by input; so does the
    fallback, with the same directions). The comparisons when every input agrees, the inputs whose own term (for
    all outputs, or for one output alone) the sum's possible error could hide RESOLVE of (their own checks follow),
    each with the largest such error and term, else None; into *seen*,
    then, each input's u_j and the largest error of the sum the evidence leaves possible (its disagreement plus
    the smallest input's allowance, which has no rtol term here, and which bounds the truncation accepted)."""
    import torch

    parts = []
    norms: list[float] = []  # u_j = r_j max(1, |x_j|) / norms[j], as _unresolved_elements takes it
    # the joint direction's length, over the factors: one input's own direction has length one (relative to its
    # elements' sizes), and so has the joint one. Longer, its steps would carry a truncation error (length)^4 times
    # an input's own (x / y with 5 and 1 elements: 7 times, outside the evidence bound)
    length = math.sqrt(math.fsum(f * f for f in factors))
    # one-element float64 inputs of at most 4 scalar float64 outputs: the directions, vᵀJ_j u_j, the rounding terms,
    # the points and phi in Python floats (_scalar_preamble, _scalar_rounding, _scalar_weighted), the same IEEE
    # operations as the tensor path; *points* holds (x_j, u_j) as floats there
    scalars = E.LEAN and len(problem.outputs) <= 4 and all(
        o.dtype == torch.float64 and o.numel() == 1 for o in problem.outputs) and all(
        problem.inputs[j].dtype == torch.float64 and problem.inputs[j].numel() == 1 for j in problem.diff)
    points: list[tuple[float, float]] = []
    for pos, j in enumerate(problem.diff):
        x = problem.inputs[j].detach()
        if (grads[pos] is None or not x.numel() or not x.is_floating_point() or problem.held(j) is not None
                or x.dtype != problem.inputs[problem.diff[0]].dtype):
            return None  # None gradients, empty or non-finite inputs: their own checks say what they find
        u = draws[pos]
        if scalars:  # u * (factor / length / |u|_2) * max(1, |x|), in that order
            xv, uv = x.item(), u.item()
            drawn = max(math.sqrt(uv * uv), 1e-300)
            uv = uv * (factors[pos] / length / drawn) * max(abs(xv), 1.0)
            u = E.fresh([uv], x.shape)
            points.append((xv, uv))
        else:
            size = x.abs().to(torch.float64).clamp_min(1.0)
            drawn = max(float(torch.linalg.vector_norm(u)), 1e-300)
            u = u * (factors[pos] / length / drawn) * size
        norms.append(drawn * length / factors[pos])
        parts.append((j, x, u))
    # each direction's sign chosen so that autograd's vᵀJ_j u_j is not negative: a backward whose inputs'
    # terms are all off by the same relative amount (f(x - y) with both partials scaled) then adds its errors
    # up instead of cancelling them
    for pos, (j, x, u) in enumerate(parts):
        g = grads[pos]
        if g is None:
            continue
        if scalars and g.numel() == 1:  # (a gradient of another shape is a metadata failure, said elsewhere)
            if 0.0 + g.item() * points[pos][1] < 0:  # torch's sum of one product starts from +0.0
                parts[pos] = (j, x, -u)
                points[pos] = (points[pos][0], -points[pos][1])
        elif float((g.detach().to(torch.float64) * u).sum()) < 0:
            parts[pos] = (j, x, -u)
    precision = str(parts[0][1].dtype).removeprefix("torch.")
    exact = with_rtol(tol, 0.0)  # the sum's agreement within the evidence's bound (and atol) only
    memo: dict[tuple[float, ...], Any] = {}

    def phi_for(ws: list[torch.Tensor]) -> Batched:
        def phi_many(ts: list[float]) -> tuple[list[float], float]:
            got: Any = memo.get(tuple(ts))
            if got is None:
                evals[0] += len(ts)
                info.setdefault("evaluation", "loop")
                xs = list(problem.inputs)
                rows: list[Any] = []  # per step: the outputs (their values, for scalars)
                with E.GradMode(False):
                    for t in ts:
                        for pos, (j, x, u) in enumerate(parts):
                            if scalars:  # x + t u in Python floats, a fresh one-element tensor
                                xv, uv = points[pos]
                                single = torch.scalar_tensor(xv + t * uv, dtype=torch.float64)
                                xs[j] = single if not x.shape else single.reshape(x.shape)
                            else:
                                point = x + t * u
                                xs[j] = (point if point.dtype == x.dtype else point.to(x.dtype)).contiguous()
                        out = problem.call(*xs)
                        rows.append([o.item() for o in out] if scalars else out)
                got = memo[tuple(ts)] = _without_dead_scalars(problem, rows) if scalars else _without_dead(problem, [
                    _as_float64(torch.stack([r[k] for r in rows]).reshape(len(ts), -1))
                    for k in range(len(problem.outputs))])
            return _scalar_weighted(got, [v.item() for v in ws]) if scalars else _weighted(got, ws)
        return _with_noise(_with_unit(phi_many, problem), problem, ws, [j for j, _, _ in parts])

    names = ", ".join(problem.names[j] for j, _, _ in parts)
    found = []
    agreed = curve = 0.0  # the largest error of the sum the evidence leaves possible, and its truncation (_curve)
    again: dict[int, tuple[float, float]] = {}  # inputs whose terms such an error leaves open: (error, |term|), largest
    checks: list[tuple[int | None, list[torch.Tensor], tuple[torch.Tensor | None, ...] | None]] = [(None, vs, grads)]
    if len(problem.outputs) > 1:  # and each output alone, as _per_output does
        checks += [(k, [v if i == k else torch.zeros_like(v) for i, v in enumerate(vs)], None)
                   for k in range(len(problem.outputs))]
    for k, weights, gs in checks:
        if gs is None:
            gs = output_alone(k) if k is not None else None
            if gs is None:  # output k does not require grad
                continue
        analytic, perturbations, dot = [], [], 0.0
        for pos, ((_, x, u), g) in enumerate(zip(parts, gs)):
            if g is None:  # no gradient reaches x_j from this output alone: vᵀJ_j u_j is 0 by autograd
                analytic.append(0.0)
                continue
            if scalars and g.numel() == 1:
                gu_sum, r = _scalar_rounding(g.item(), *points[pos])
                analytic.append(gu_sum)
            else:
                g = g.detach().to(torch.float64)
                gu = g * u
                analytic.append(float(gu.sum()))
                r = _rounding(g, u, x, gu)
            perturbations.append(r["perturbation"])
            dot += r["dot_rounding"]
        total = math.fsum(analytic)
        if abs(total) < 0.5 * math.fsum(abs(a) for a in analytic):
            return None  # the inputs' terms cancel (for one output alone, where the signs were not chosen)
        phi, perturbation = phi_for(weights), math.hypot(*perturbations)
        quick = quick_stage(phi, 1.0, perturbation, quick_step(precision))
        for left in range(HALVINGS, -1, -1):
            # within every input's own allowance, without its rtol term
            stages = [_stage(a + (total - quick.value), a, _projected(exact, u, weights), observed_bound=dot,
                             reference_bound=quick.err, scale=quick.natural, precision=precision)
                      for (_, _, u), a in zip(parts, analytic)]
            unsettled = [stage for stage in stages if not settled(stage, quick.trunc)]
            if not unsettled:
                break
            if not all(worth_halving(stage, quick, left) for stage in unsettled):
                return None
            quick = halved(phi, quick, 1.0, perturbation)
        numeric, err = quick.value, quick.err
        allowed = min(stage.allowed for stage in stages)
        if k is None:
            # an element whose term this allowance cannot resolve is judged by its input's own check (_split)
            for (_, x, u), g, norm in zip(parts, gs, norms):
                if g is None or SPLIT / norm >= allowed:  # (each element's typical term is at least 1 / norm)
                    continue
                if bool(_unresolved_elements(g.detach().to(torch.float64), _sizes(x), norm, allowed,
                                             u.reshape(-1) != 0).any()):
                    return None
            agreed, curve = allowed + abs(total - numeric), quick.trunc * abs(numeric)
            # an input whose own term the sum's possible error could hide RESOLVE of (a term of exactly 0 always: a
            # backward giving an input 0 where its true slope, 1e-11, is below the joint allowance passed on 16 of 20
            # seeds beside an unrelated input, and failed alone on every seed) is judged again on its own
            for (j, _, _), a in zip(parts, analytic):
                if not agreed <= RESOLVE * abs(a):
                    _leave_open(again, j, agreed, a)
            found.append({"input": f"{names} (together)", "autograd": total, "numeric": numeric, "error_bound": err,
                          "scheme": f"{_scheme(quick)}, every input along its own u at once",
                          "evaluations": quick.evaluations,
                          "allowed": allowed, "verdict": "pass", "reason": J.reason_text(J.OK, total, numeric, None)})
        else:
            # and so for one output alone (a backward dropping x's 1e-11 slope from the second of two outputs passed
            # beside w on 15 of 20 seeds, x alone failing 18: a reviewer), a None gradient as a term of 0: a backward
            # that returns None where that output's gradient is None (set_materialize_grads(False)) drops the slope
            # the same way, a second review found (and an output that does not reach the input reads exactly 0 alone)
            possible = allowed + abs(total - numeric)
            for (j, _, _), a in zip(parts, analytic):
                if not possible <= RESOLVE * abs(a) and problem.outputs[k].numel():  # (an empty output has no term)
                    _leave_open(again, j, possible, a)
    if seen is not None:  # every check agreed
        for j, _, u in parts:
            seen[j] = (u.reshape(-1), agreed, 0.0)  # (float64: made so above; several inputs: no floor used)
            if trail is not None:
                trail.setdefault(j, []).append((u.reshape(-1), agreed, curve))
    return found, again


def _leave_open(again: dict[int, tuple[float, float]], j: int, possible: float, term: float) -> None:
    """Mark input j as one the joint projection leaves open (:func:`_together`), keeping the largest error possible
    and the largest |term| that left it open."""
    before = again.get(j, (0.0, 0.0))
    again[j] = (max(before[0], possible), max(before[1], abs(term)))


def _per_output(problem: Problem, pos: int, u: torch.Tensor, vs: list[torch.Tensor],
                phi_for: Callable[..., Batched], memo: dict[tuple[float, ...], list[torch.Tensor]],
                output_alone: Callable[[int], tuple[torch.Tensor | None, ...] | None], tol: ToleranceUsed,
                f: Findings) -> None:
    """vₖᵀJₖu for each output k alone (the others weighted 0): gradcheck back-propagates each output on
    its own, and a backward that returns None when only a secondary output (a mean, an rstd) receives a
    gradient is wrong there though the outputs together agree. The numeric side reuses the evaluations
    of the check of all outputs along the same u (*memo*): each output's term of them."""
    import torch

    j = problem.diff[pos]
    x = problem.inputs[j].detach()
    for k in range(len(problem.outputs)):
        dead = None if problem.dead is None else problem.dead[k]
        if dead is not None and bool(dead.all()):
            # not finite anywhere at the point: weighted 0 and left out of every backward (api._metadata), its rows
            # not checked. Its own backward at weight 0 may still make NaN of it (inf * 0), and that FAILED here
            # ((sin x, (exp(x + 1e5) * 0).sum()): "the observed value is nan") where full mode is inconclusive
            continue
        weights = [v if i == k else torch.zeros_like(v) for i, v in enumerate(vs)]
        grads = output_alone(k)
        if grads is None:
            continue
        g = grads[pos]
        gk, seen = _without_held(None if g is None else g.detach().to(torch.float64), x)  # u is 0 at held elements
        analytic = 0.0 if gk is None else float((gk * u).sum())
        alone = own_rounding(problem, j, [v if i == k else None for i, v in enumerate(vs)], g)
        out = judge_along(phi_for(j, u, weights, memo), analytic, _projected(tol, u, [weights[k]]), scale=1.0,
                          **_rounding(gk, u, seen), precision=str(x.dtype).removeprefix("torch."),
                          own=partial(alone, u))
        if out["verdict"] == J.PASS:
            continue
        kind = "none-gradient" if gk is None and out["verdict"] == J.FAIL else "projection"
        f.extra.append(_projection(f, out, kind, f"output {k} alone: vₖᵀJₖu along a random direction u"
                                   + (" (autograd gives None)" if gk is None else "")))


def forward_mode(problem: Problem, gen: torch.Generator, tol: ToleranceUsed, info: Info, *, vs: list[torch.Tensor],
                 tangents: Callable[[int, torch.Tensor], list[torch.Tensor]]) -> dict[int, Findings]:
    """Forward-mode AD (``forward_ad=True``), judged as directional mode judges the backward: per checked input j,
    a direction u drawn as directional mode draws its own (each element moved relative to its own magnitude,
    max(1, |x_i|), a non-finite element held where it is), the tangents Jₖu of every output from *tangents(j, u)*,
    and for each output k alone vₖᵀ(Jₖu) against the numeric derivative of vₖᵀfₖ along u (*vs*: the backward's
    output weights, 0 at output elements not finite at the point, whose tangents are left out too), the evaluations
    shared by the outputs (one memo per direction). Until the twenty-first session it drew u from a normal
    distribution with one step scale for the whole tensor, max(1, max |x|), weighed the outputs by U[0.5, 1.5)
    whatever their size and moved non-finite inputs: on OpInfo's samples, where gradcheck's forward-AD check
    passes, it was inconclusive on round (steps of the largest element's size across its jumps) and on
    _safe_softmax (-inf inputs), where the backward's check passes both, and exp(x / 500) at [1e4, 0.01] with a jvp
    100% off at the small element passed (output 0, 4.9e8, held the projection). (It fails logcumsumexp's sample 1
    and hardsigmoid's, before and now: torch's float64 jvps there are off by 3e-6 and 3e-8.) A failure of
    forward-mode AD itself (no formula) is a failure of that input."""
    import torch

    from .evaluate import EvaluationError

    found: dict[int, Findings] = {}
    evals = [0]
    scalars = E.LEAN and len(problem.outputs) <= 4 and all(
        o.dtype == torch.float64 and o.numel() == 1 for o in problem.outputs)
    output_alone = _outputs_alone(problem, vs)  # vₖᵀJₖ: the rounding that moving the inputs adds to each phi
    for pos, j, x, f, u in _directions(problem, gen, found):
        if u is None:
            continue
        try:
            got = tangents(j, u)
        except EvaluationError as exc:  # no forward-mode formula: a finding, not an error of the whole check
            if not _no_forward_formula(exc.original):
                raise  # the user's own jvp (or the function on dual numbers) raised: the error verdict, traceback kept
            first = said(exc.original).splitlines()[0] if said(exc.original) else ""
            f.extra.append(Comparison(Location(problem.names[j]), None, None, None, "fail", "jvp",
                                      f"forward-mode AD failed: {type(exc.original).__name__}: {first}"))
            continue
        memo: dict[tuple[float, ...], Any] = {}
        precision = str(x.dtype).removeprefix("torch.")
        for k, tangent in enumerate(got):
            weights = [v if i == k else torch.zeros_like(v) for i, v in enumerate(vs)]
            w = vs[k].reshape(-1).to(torch.float64)
            t = tangent.detach().reshape(-1).to(torch.float64)
            dead = None if problem.dead is None else problem.dead[k]
            if dead is not None:
                t = t.masked_fill(dead, 0.0)
            terms = w * t
            grads = output_alone(k)
            g = None if grads is None else grads[pos]
            # (a NaN there is the backward's, checked in its own record: sqrt's at -1, weighted 0, is NaN; the
            # rounding that moving the inputs adds to phi is taken as 0 there)
            g = None if g is None else g.detach().to(torch.float64).nan_to_num(nan=0.0, posinf=math.inf,
                                                                              neginf=-math.inf)
            gk, seen = _without_held(g, x)
            rounding = _rounding(gk, u, seen)
            # the rounding of the jvp's own sum vₖᵀ(Jₖu) (as _rounding bounds that of g . u)
            rounding["dot_rounding"] = 4 * EPS64 * float(terms.abs().sum()) * math.sqrt(max(terms.numel(), 1))
            out = judge_along(_phi_along(problem, j, u, weights, memo, evals, info, scalars), float(terms.sum()),
                              _projected(tol, u, [weights[k]]), scale=1.0, **rounding, precision=precision)
            add_projection(f, out, k, f"output {k}: vₖᵀ(Jₖu) by forward-mode AD along a random direction u")
    info["forward_ad_evaluations"] = evals[0]
    return found


def element_direction(x: torch.Tensor, draw: torch.Tensor, held: bool) -> torch.Tensor:
    """Directional mode's direction for input *x* from a *draw* uniform in [-1, 1) (float64, made into u): each
    element moved relative to its own magnitude, draw / |draw|_2 * max(1, |x_i|), and not at all where *x* is not
    finite (*held*: some element is); one float64 element of a finite input moves by a power of two
    (:func:`_one_element_direction`)."""
    import torch

    if held:
        draw = draw.masked_fill(~torch.isfinite(x), 0.0)
    if x.numel() == 1 and x.dtype == torch.float64 and not held:
        return torch.full_like(draw, _one_element_direction(x.item(), draw.item()))
    return draw.div_(max(float(torch.linalg.vector_norm(draw)), 1e-300)).mul_(_sizes(x))


def _directions(problem: Problem, gen: torch.Generator, found: dict[int, Findings]
                ) -> list[tuple[int, int, torch.Tensor, Findings, torch.Tensor | None]]:
    """Per checked input j (at position pos), drawn from *gen* for every input first: (pos, j, x, its Findings, put
    in *found* with its held elements, and its direction u (:func:`element_direction`), None where every element is
    held: nothing moves, nothing is compared, and the record says so)."""
    import torch

    draws = [torch.empty(problem.inputs[j].shape, dtype=torch.float64).uniform_(-1.0, 1.0, generator=gen)
             for j in problem.diff]
    made = []
    for pos, j in enumerate(problem.diff):
        x = problem.inputs[j].detach()
        f = found[j] = Findings(j, problem.names[j], tuple(x.shape), [tuple(o.shape) for o in problem.outputs])
        f.held = problem.held(j)
        every = f.held is not None and len(f.held) == x.numel()
        made.append((pos, j, x, f, None if every else element_direction(x, draws[pos], f.held is not None)))
    return made


def second_order(problem: Problem, gen: torch.Generator, tol: ToleranceUsed, info: Info, *,
                 vs: list[torch.Tensor]) -> dict[int, Findings]:
    """Double backward (``order=2``): G(x) = sum_i (vᵀJ(x))_i . w_i over the checked inputs, with *vs* the backward's
    output weights (0 at output elements not finite at the point) and w_i of either sign, |w| in [0.5, 1.5) /
    max(1, |vᵀJ|) (each term of order one; 0 where vᵀJ is not finite at the point, as a dead output's), is
    differentiated by a double backward and judged, per input j, along a direction drawn as directional mode draws
    its own (:func:`element_direction`) against G's numeric derivative, with the rounding of both sides in the
    bound. Until the twenty-first session it drew u from a normal distribution with one step scale for the whole
    tensor, max(1, max |x|), weighed the outputs and the gradient's terms by U[0.5, 1.5) and left rounding out: on
    OpInfo's samples, where gradgradcheck passes, it was inconclusive on topk (steps of the largest element's size
    across a change of the selection) and on _safe_softmax (-inf inputs), and a second derivative 100% off at the
    small element of exp(x / 500) at [1e4, 0.01] passed. Still open: logcumsumexp's sample 0 (elements of 1e4)
    fails, before and now: torch's double backward there is -4.4e-12 where the true value is about 5e-15, its
    rounding at inputs of 1e4, and the bound on autograd's side covers only its last sum. Per input, the double
    backward's derivative with respect to the grad_output is judged too (:func:`_along_grad_output`)."""
    import torch

    from .evaluate import EvaluationError, grad

    def grad_of(xs: list[Any], create: bool) -> tuple[torch.Tensor | None, ...]:
        with E.GradMode(True):
            outs = problem.call(*xs)
            pairs = [(o, v) for o, v in zip(outs, vs) if o.requires_grad]
            if not pairs:  # no output has a graph back to the inputs: vᵀJ is None (the backward's record fails that;
                # asked of autograd, it raised, and the check became an error)
                return tuple(None for _ in problem.diff)
            return grad([o for o, _ in pairs], [xs[i] for i in problem.diff], [v for _, v in pairs],
                        create_graph=create, allow_unused=True)

    xs = problem.leaves()
    found: dict[int, Findings] = {}
    try:
        first = grad_of(xs, True)
    except EvaluationError as exc:  # no double-backward formula: a finding, not an error of the whole check
        return _no_double_backward(problem, gen, found, exc)
    ws: list[torch.Tensor | None] = []
    for g in first:
        if g is None:
            ws.append(None)
            continue
        at = g.detach().to(torch.float64)
        s = torch.empty(at.shape, dtype=torch.float64).uniform_(-1.0, 1.0, generator=gen)
        s = s.add_(s.sign(), alpha=0.5)
        finite = torch.isfinite(at)
        ws.append(torch.where(finite, s / at.abs().nan_to_num(nan=1.0, posinf=1.0).clamp_min(1.0), 0.0))

    def terms_of(gs: tuple[torch.Tensor | None, ...]) -> list[torch.Tensor]:
        # (a term whose weight is 0, not finite at the point, is 0 wherever it goes)
        return [torch.where(w != 0, g.to(torch.float64) * w, 0.0).reshape(-1)
                for g, w in zip(gs, ws) if g is not None and w is not None]

    present = [t for t in terms_of(first) if t.requires_grad]
    # a first derivative with no graph back to the inputs claims a second derivative of zero
    try:
        second = (grad(sum(t.sum() for t in present), [xs[i] for i in problem.diff], allow_unused=True) if present
                  else tuple(None for _ in problem.diff))
    except EvaluationError as exc:
        return _no_double_backward(problem, gen, found, exc)
    evals = [0]
    for pos, j, x, f, u in _directions(problem, gen, found):
        if u is None:
            continue
        d2 = second[pos]
        gu = None if d2 is None else d2.detach().to(torch.float64).nan_to_num(nan=0.0) * u
        d2k, seen = _without_held(None if d2 is None else d2.detach().to(torch.float64), x)
        rounding = _rounding(d2k, u, seen, gu)
        step = u.to(x.dtype)

        def phi_many(ts: list[float], j: int = j, step: torch.Tensor = step, x: torch.Tensor = x
                     ) -> tuple[list[float], float]:
            values, size = [], 0.0
            for t in ts:
                moved = [y.detach().requires_grad_(i in problem.diff) if torch.is_tensor(y) else y
                         for i, y in enumerate(problem.with_input(j, x + t * step))]
                terms = torch.cat(terms_of(grad_of(moved, False)) or [torch.zeros(1, dtype=torch.float64)])
                values.append(float(terms.sum()))
                size = max(size, float(torch.linalg.vector_norm(terms)))
            evals[0] += len(ts)
            return values, size

        out = judge_along(phi_many, 0.0 if gu is None else float(gu.sum()),
                          _projected(tol, u, [w for w in ws if w is not None]), scale=1.0,
                          **rounding, precision=str(x.dtype).removeprefix("torch."))
        add_projection(f, out, None, "uᵀ∇G, G = vᵀJ·w, by double backward along a random direction u" + (
            "" if d2 is not None or out.get("verdict") != J.FAIL else
            f" (autograd's 0: the first derivative has no graph back to '{problem.names[j]}', as where the backward "
            "runs under torch.no_grad(), detaches, leaves torch (numpy) or is @once_differentiable)"))
        add_projection(f, _along_grad_output(problem, j, x, f.held is not None, vs, gen, tol, info, evals), None,
                       "sᵀ∂(vᵀJ·u)/∂v = sᵀJu, by double backward along a direction s of the grad_output v, against "
                       "the function's own derivative along u")
    info["order"] = 2
    info["second_order_evaluations"] = evals[0]
    return found


#: words of torch's own errors for an op or Function that forward-mode AD cannot go through
_NO_FORWARD_WORDS = ("forward ad", "forward-mode", "forward mode", "jvp", "dual", "fw_grad", "forward grad")


def _no_forward_formula(original: BaseException) -> bool:
    """Whether an exception raised while computing a jvp says forward-mode AD has no formula there (torch's
    NotImplementedError for an op or a Function without jvp, or an error about dual tensors), a finding of that
    input; anything else the user's jvp or function raised is an error of the check, with its traceback (a ValueError
    from a custom jvp was a FAIL, "forward-mode AD failed", its traceback dropped: a fresh-eyes audit)."""
    if isinstance(original, NotImplementedError):
        return True
    text = said(original).lower()
    return isinstance(original, RuntimeError) and any(word in text for word in _NO_FORWARD_WORDS)


def _no_double_backward(problem: Problem, gen: torch.Generator, found: dict[int, Findings],
                        exc: E.EvaluationError) -> dict[int, Findings]:
    """order=2 where the double backward raises (no formula for a backward's own derivative: torch.cdist's, a custom
    Function's backward built on one without a backward): each input's double-backward record fails and says so, as
    forward_mode does for a missing jvp, and the first-order records stand (it made the whole check an error, filed
    under the vjp record as "the backward raised", which had passed)."""
    first = said(exc.original).splitlines()[0] if said(exc.original) else ""
    for _, j, _, f, _ in _directions(problem, gen, found):
        f.extra.append(Comparison(Location(problem.names[j]), None, None, None, "fail", "double backward",
                                  f"the double backward failed (differentiating the backward itself): "
                                  f"{type(exc.original).__name__}: {first}"))
    return found


def _along_grad_output(problem: Problem, j: int, x: torch.Tensor, held: bool, vs: list[torch.Tensor],
                       gen: torch.Generator, tol: ToleranceUsed, info: Info, evals: list[int]) -> dict[str, Any]:
    """The double backward's derivative with respect to the grad_output, for input j (judge_along's result). The
    backward vᵀJ_j is linear in its grad_output v, so the derivative of H(v) = (vᵀJ_j)·u with respect to v is J_j u,
    which autograd gives by differentiating the backward along its grad_output input (gradgradcheck's Jacobian with
    respect to grad_outputs): projected on a direction s of v (each weight moved relative to itself, |s| in
    [0.5, 1.5) |v|; 0 where v is, at an output not finite at the point), it is judged against sᵀf's numeric derivative
    along u (drawn as directional mode draws its directions), the forward function itself. With G = vᵀJ·w
    differentiated with respect to x alone, a backward whose own backward is 50% off with respect to its grad_output
    passed both modes, where gradgradcheck fails it."""
    import torch

    from .evaluate import grad

    draw = torch.empty(x.shape, dtype=torch.float64).uniform_(-1.0, 1.0, generator=gen)
    u = element_direction(x, draw, held)
    directions = []
    for v in vs:
        r = torch.empty(v.shape, dtype=torch.float64).uniform_(-1.0, 1.0, generator=gen)
        directions.append(v.to(torch.float64) * r.add_(r.sign(), alpha=0.5))
    leaves = [v.detach().to(torch.float64).clone().requires_grad_(True) for v in vs]
    xs = problem.leaves()
    with E.GradMode(True):
        outs = problem.call(*xs)
        pairs = [(o, c, d) for o, c, d in zip(outs, leaves, directions) if o.requires_grad]
        g = (grad([o for o, _, _ in pairs], [xs[j]], [c.to(o.dtype) for o, c, _ in pairs], create_graph=True,
                  allow_unused=True)[0] if pairs else None)
        gs = (grad([o for o, _, _ in pairs], [xs[j]], [d.to(o.dtype) for o, _, d in pairs], retain_graph=True,
                   allow_unused=True)[0] if pairs else None)  # sᵀJ_j: what moving x rounds phi by (perturbation)
        h = None if g is None else (torch.where(u != 0, g.to(torch.float64) * u, 0.0)).sum()
        dv = (grad([h], leaves, allow_unused=True) if h is not None and h.requires_grad
              else tuple(None for _ in leaves))  # (no graph to v: J_j u claimed 0)
    d = torch.cat([torch.zeros(v.numel(), dtype=torch.float64) if t is None else t.detach().to(torch.float64)
                   .reshape(-1) for t, v in zip(dv, vs)])
    s = torch.cat([t.reshape(-1) for t in directions])
    gs_seen, x_seen = _without_held(None if gs is None else gs.detach().to(torch.float64), x)
    rounding = _rounding(gs_seen, u, x_seen, None)
    rounding["dot_rounding"] = 4 * EPS64 * float((d * s).abs().sum()) * math.sqrt(max(s.numel(), 1))
    phi = _phi_along(problem, j, u, directions, None, evals, info, False)
    return judge_along(phi, float((d * s).sum()), _projected(tol, u, directions), scale=1.0, **rounding,
                       precision=str(x.dtype).removeprefix("torch."))


def add_projection(f: Findings, out: dict[str, Any], output: int | None, note: str) -> None:
    """One judged projection (judge_along's *out*) counted in *f* as a comparison of output *output*."""
    import torch

    pair = out.get("slopes")
    f.add(out["judged"], torch.tensor(out["observed"], dtype=torch.float64),
          torch.tensor(out["numeric"], dtype=torch.float64), output=output, rows=torch.tensor(-1),
          cols=torch.tensor(-1), slopes=None if pair is None else (torch.tensor(pair[0]), torch.tensor(pair[1])),
          note=note)


def _projection(f: Findings, out: dict[str, Any], kind: str, note: str, at: tuple[int, ...] | None = None
                ) -> Comparison:
    judged: J.Judged = out["judged"]
    pair = out.get("slopes")  # (the one-sided slopes, where measured: a kink's or a staircase's reason names them)
    sides = None if pair is None else (judged.diff.new_tensor(pair[0]), judged.diff.new_tensor(pair[1]))
    c = J.comparison(judged, 0, judged.diff.new_tensor(out["observed"]), judged.diff.new_tensor(out["numeric"]),
                     Location(f.name, at), slopes=sides, kind=kind)
    if kind == "none-gradient":  # the note says it all: what autograd gave and what the evidence shows
        return dataclasses.replace(c, reason=note)
    return dataclasses.replace(c, reason=f"{c.reason}; {note}" if c.reason else note)


def _without_held(g: torch.Tensor | None, x: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
    """g and x with their values at non-finite elements of x (held, never judged) set to 0, so that
    g . u and the rounding terms stay finite."""
    import torch

    mask = ~torch.isfinite(x)
    if not bool(mask.any()):
        return g, x
    return (None if g is None else g.masked_fill(mask, 0.0)), x.masked_fill(mask, 0.0)


def _sizes(x: torch.Tensor) -> torch.Tensor:
    """max(1, |x_i|) per element, float64: the scale of each element's step."""
    import torch

    return x.detach().abs().to(torch.float64).nan_to_num(nan=1.0, posinf=1.0).clamp_min(1.0)


#: float64's smallest spacing, that of its subnormal numbers (2^-1074)
SUBNORMAL = 2.0 ** -1074


def _scaled_norm(terms: list[torch.Tensor]) -> float:
    """The largest 2-norm over rows (dim 1) of the terms together, computed without overflow: the terms
    divided by their largest magnitude first (inf only where a term itself is not finite)."""
    import torch

    peak = max((float(t.abs().max()) for t in terms if t.numel()), default=0.0)
    if not (math.isfinite(peak) and peak > 0):
        return math.inf if peak != 0.0 else 0.0
    return peak * float(torch.stack([(t / peak).square().sum(1) for t in terms]).sum(0).max()) ** 0.5


def _rounding(g: torch.Tensor | None, u: torch.Tensor, x: torch.Tensor,
              gu: torch.Tensor | None = None) -> Rounding:
    """The typical rounding the moved inputs add to phi, and a bound on the rounding of g . u (*gu*: g * u,
    where the caller has it)."""
    import torch

    if g is None:
        return {"perturbation": 0.0, "dot_rounding": 0.0}
    product = g * (x if x.dtype == g.dtype else x.to(g.dtype))
    perturbation = EPS64 * float(torch.linalg.vector_norm(product))
    if perturbation == math.inf:  # |g x| above 1e154: the same norm without overflow
        perturbation = EPS64 * _scaled_norm([product.reshape(1, -1)])
    dot = 4 * EPS64 * float((g * u if gu is None else gu).abs().sum()) * math.sqrt(max(u.numel(), 1))
    # and float64's own floor: a gradient below its range is 0 (or a subnormal) to within half its smallest spacing,
    # which u scales (1 / x at 1e300: autograd's -0.0 is -1e-600 correctly rounded, and along u = 1e300 its vᵀJu of 0
    # against the evidence's 1e-300 FAILED, "abs 0, allowed 0")
    dot += SUBNORMAL * float(u.abs().sum())
    return {"perturbation": perturbation, "dot_rounding": dot}


def _bisect(problem: Problem, j: int, g: torch.Tensor, u: torch.Tensor, phi_for: Callable[[int, torch.Tensor], Batched],
            scale: float, tol: ToleranceUsed, vs: list[torch.Tensor], f: Findings, whole: dict[str, Any],
            index: torch.Tensor | None = None,
            measure: Callable[[torch.Tensor, float], float | None] | None = None) -> None:
    """Split the perturbed elements (all, or the flat indices *index*) in halves, keep the halves that
    disagree, down to elements (*whole* is the judgement of all of them together, which disagreed)."""
    import torch

    flat_u, flat_g = u.reshape(-1), g.reshape(-1)
    flat_x = problem.inputs[j].detach().reshape(-1)
    sizes = _sizes(flat_x)
    finite = torch.isfinite(flat_x)
    seen = flat_x.masked_fill(~finite, 0.0)  # held elements: neither moved nor judged
    if index is not None:  # the elements of the index, in its order: bisected as if they were the whole input
        flat_u, flat_g, sizes, finite, seen = (t[index] for t in (flat_u, flat_g, sizes, finite, seen))
    n = flat_u.numel()
    pending = [(0, n)] if n == 1 else [(0, n // 2), (n // 2, n)]
    located = 0
    last = whole
    while pending:
        if located >= LOCATE:
            f.exact = False
            f.why_inexact = (f"localization stopped after {LOCATE} elements (the bisection budget); "
                             "mode='full' locates every one")
            break
        lo, hi = pending.pop(0)
        part = torch.zeros_like(flat_u)
        if hi - lo == 1:  # an element: its own direction, scaled to its magnitude: d(vᵀf)/dx_i max(1, |x_i|)
            if not bool(finite[lo]):
                continue
            part[lo] = sizes[lo]
        else:
            part[lo:hi] = flat_u[lo:hi]
        analytic = float((flat_g[lo:hi] * part[lo:hi]).sum())  # the slice only: NaN * 0 elsewhere is NaN
        moved = part if index is None else torch.zeros(u.numel(), dtype=part.dtype).index_copy_(0, index, part)
        # a part of several elements whose quick stages disagree beyond what their truncation explains is split at
        # once: Ridders and the slopes, which a reported disagreement needs, are left to its elements (where many
        # elements are wrong, the parts' own whole judgements cost as much again: hardsigmoid's 20, 406
        # evaluations). A part the quick stages cannot resolve for truncation (near a pole) is judged whole, and
        # a pass there ends its descent (else every element near the pole was judged: 1/x on 4,096 elements
        # between 1e-4 and 1e-2 took 49,501 evaluations instead of 662, a reviewer found)
        out = judge_along(phi_for(j, moved.reshape(u.shape)), analytic, _projected(tol, part, vs), scale=scale,
                          **_rounding(flat_g[lo:hi], part[lo:hi], seen[lo:hi]),
                          precision=str(flat_x.dtype).removeprefix("torch."), split_early=hi - lo > 1,
                          own=None if measure is None else partial(measure, moved))
        if out["verdict"] == J.PASS:
            if hi - lo > 1 and f.exact:  # its elements agree as a sum, within the sum's allowance, not each
                f.exact = False
                f.why_inexact = ("a part of the elements agreed as a whole, within an allowance coarser than each "
                                 "element's, so it may hold an element wrong by less; mode='full' judges every entry")
            continue
        if out["verdict"] is not None:  # (None: a part split early, without a verdict)
            last = out
        if hi - lo > 1:
            mid = (lo + hi) // 2
            pending += [(lo, mid), (mid, hi)]
            continue
        located += 1
        # judged along max(1, |x_i|) e_i; reported per unit of x_i (every term divided by that size)
        size = float(sizes[lo])
        j0: J.Judged = out["judged"]
        # (an infinite difference or bound is the judge's largest float: divided, it read as a finite 6e307)
        judged = J.Judged(j0.verdict, j0.reason, J.unbounded_tensor(j0.diff) / size, j0.atol / size, j0.rtol,
                          j0.ref / size, J.unbounded_tensor(j0.evidence) / size, j0.all_pass)
        pair = out.get("slopes")
        slopes = None if pair is None else (torch.tensor(pair[0] / size), torch.tensor(pair[1] / size))
        f.add(judged, torch.tensor(analytic / size, dtype=torch.float64),
              torch.tensor(out["numeric"] / size, dtype=torch.float64),
              output=None, rows=torch.tensor(-1), cols=torch.tensor(lo if index is None else int(index[lo])),
              slopes=slopes,
              note=WEIGHTED)
        f.total -= 1  # f.total is the element count, set by the caller; add() counted this element again
    if not f.failed and not f.inconclusive:
        f.extra.append(_projection(f, last, "projection",
                                   "the directional check disagreed but no single element could be isolated"))


def _far_from_0(problem: Problem, j: int, g: torch.Tensor, u: torch.Tensor, norm: float, sizes: torch.Tensor,
                x: torch.Tensor, phi_for: Callable[..., Batched], tol: ToleranceUsed, vs: list[torch.Tensor],
                whole: dict[str, Any], comparisons: list[dict[str, Any]],
                measure: Callable[[torch.Tensor, float], float | None],
                trail: list[tuple[torch.Tensor, float, float]] | None, passed: list[tuple[torch.Tensor, float]]
                ) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]] | None:
    """A projection along *u* that PASSED (*whole*) coarser than the directional promise (its allowance above SPLIT
    of some element's typical term, :func:`_unresolved_elements`) on Ridders restarted from smaller steps ("shrunk")
    while it moved elements that Ridders' first step carries across 0 (|x_i| < RIDDERS_FIRST |u_i|, 0 included): the
    moved elements far from 0 (|x_i| at least UNCROSS RIDDERS_FIRST |u_i|, where the usual steps stay a twentieth of
    their distance from 0 or less), judged again alone at the usual steps, where those unresolved by it are among
    them. Steps that cross an element near 0 (|x|^p at 1e-8: not smooth there) leave Ridders undecided until they
    shrink below that element's distance, where the outputs' rounding makes the bound coarse: |x|^1.1 at (1e-8, -2e-8,
    0.5) passed on a bound of 6.6e-6 of its value, and a backward 1e-6 off at 0.5 with it (and one off by 1e-7
    everywhere). Along the far elements alone no step comes near 0, so their projection is an ordinary one: where it
    FAILS, and Ridders from a first step ten times smaller fails too on an estimate within both bounds, that failure
    is the input's (its u, the elements' flat indices and its judgement, for the bisection); where it passes, its u
    and the error it leaves possible go into *trail* (and its elements and allowance into *passed*); else the whole's
    pass stands (None), as it does where nothing is near 0 or far from it."""
    import torch

    if not whole.get("shrunk"):
        return None  # (the whole's estimate is from Ridders' usual first step, or the quick stage: nothing shrank it)
    flat_u, flat_x = u.reshape(-1), x.reshape(-1)
    moved = flat_u != 0
    near = moved & (flat_x.abs() < RIDDERS_FIRST * flat_u.abs())
    if not bool(near.any()):
        return None
    far = moved & (flat_x.abs() >= UNCROSS * RIDDERS_FIRST * flat_u.abs())
    if not bool(_unresolved_elements(g, sizes, norm, float(whole["allowed"]), far).any()):
        return None  # (nothing far from 0, or the whole resolves each far element to the promise already)
    part = torch.where(far.reshape(u.shape), u, 0.0)
    g_part = torch.where(part != 0, g, 0.0)
    gu = g_part * part
    analytic = float(gu.sum())
    precision = str(problem.inputs[j].dtype).removeprefix("torch.")
    out = judge_along(phi_for(j, part), analytic, _projected(tol, part, vs), scale=1.0,
                      **_rounding(g_part, part, x, gu), precision=precision, own=partial(measure, part))
    count = int(far.sum())
    comparisons.append(_entry(f"{problem.names[j]} (the {count} element{'' if count == 1 else 's'} far from 0, "
                              "alone: the projection before was coarse, its steps shrunk by elements near 0)",
                              analytic, out))
    if out["verdict"] == J.FAIL:
        # the same at steps ten times smaller: a function twice but not three times differentiable at a point the
        # usual steps cross (|t|^2.1 at t = 1e-7 from it: Ridders' bound at 1e-2 to 1e-5 is 2 to 300 times too small)
        # gives another estimate there, a wrong backward the same failure (a review: beside elements near 0, right
        # backwards of |x|^1.1 + |x - 1|^2.1 at 1 + 1e-7 FAILED on the far part alone, 56 of 450)
        again = judge_along(phi_for(j, part), analytic, _projected(tol, part, vs),
                            scale=0.1 * float(out["reach"]) / RIDDERS_FIRST,  # (its Ridders from h0 / 10)
                            **_rounding(g_part, part, x, gu), precision=precision, own=partial(measure, part))
        comparisons.append(_entry(f"{problem.names[j]} (the same elements, from steps ten times smaller)", analytic,
                                  again))
        if (again["verdict"] == J.FAIL
                and abs(again["numeric"] - out["numeric"]) <= SAFETY * (again["error_bound"] + out["error_bound"])):
            return part, far.nonzero().flatten(), out
        return None  # (the two estimates disagree, or the smaller steps do not fail: the whole's pass stands)
    if out["verdict"] == J.PASS:
        passed.append((far, float(out["allowed"])))
        if trail is not None:
            trail.append((part.reshape(-1), _consistent(out), _curve(out)))
    return None


def _left_coarse(g: torch.Tensor, sizes: torch.Tensor, norm: float, u: torch.Tensor, allowed: float,
                 passed: list[tuple[torch.Tensor, float]]) -> tuple[int, float] | None:
    """After a pass along *u* with allowance *allowed* (and the parts of it that passed, *passed*: their elements as
    flat masks and their allowances): the moved elements that no passing projection resolved to SPLIT of their
    typical term (:func:`_unresolved_elements`), where the directional promise does not hold. Their count and the
    largest of their finest allowances over their typical terms (a backward off there by less may pass), or None."""
    import torch

    if SPLIT / norm >= allowed and all(SPLIT / norm >= a for _, a in passed):
        return None  # (every element's typical term is at least 1 / norm: each is resolved by every projection)
    moved = u.reshape(-1) != 0
    finest = torch.full(moved.shape, math.inf, dtype=torch.float64).masked_fill_(moved, allowed)
    for mask, a in passed:
        finest = torch.where(mask, finest.clamp_max(a), finest)
    typical = (g.reshape(-1).abs() * sizes.reshape(-1)).clamp_min_(1.0).div_(norm)
    left = moved & (typical * SPLIT < finest)
    count = int(left.sum())
    return (count, float((finest / typical)[left].max())) if count else None


def _uncross(problem: Problem, j: int, g: torch.Tensor, u: torch.Tensor, x: torch.Tensor,
             phi_for: Callable[..., Batched], tol: ToleranceUsed, vs: list[torch.Tensor], whole: dict[str, Any],
             comparisons: list[dict[str, Any]], measure: Callable[[torch.Tensor, float], float | None]
             ) -> tuple[torch.Tensor, dict[str, Any], float] | None:
    """A projection along *u* that FAILED (*whole*) on an estimate whose largest steps (its "reach", times u) carry
    elements across 0 (x_i not 0, |x_i| < reach |u_i|), judged again in two parts: the elements that Ridders' first
    step (RIDDERS_FIRST u) does not carry across 0, at the usual steps (A); the others at steps that stay far from 0
    (B: scale min |x_i / u_i| / (UNCROSS RIDDERS_FIRST), phi less phi(0)). At 0 an elementwise function is often not
    smooth (|x|^p, sqrt, x |x|), and quotients whose steps cross it carry terms of the element's own size that an h^2
    error model does not see: |x|^1.9 at (1e-7, -2e-7, 0.5), whose projection's Ridders read 7e-7 of itself off on a
    bound of 2e-8, and a right backward FAILED in both modes, where gradcheck passes it.

    Only where both parts pass, each on evidence that resolves the default promise (SAFETY times its bound within
    RESOLVE of its value: :func:`_unresolved`) and not on a share of autograd's value (steps that move no output by
    an ulp: "autograd_moved"), their values together agree with autograd's total, and their estimates together
    contradict the whole's (they differ by more than SAFETY times their bounds and its own) is that one wrong: the
    check passes on the parts ((A's u, A's judgement, 1.0), or B's where A is empty, for a function of one output:
    each output alone is judged along u at the usual steps, not along B at its small ones). Anywhere else the
    whole's failure stands, localized as before (None). Each condition is a reviewer's finding. A part that cannot
    decide contradicts nothing (log(1 + x) - x at 1e-4, a backward 50% off: B's small steps read 1 + x's rounding,
    and an undecided B made that failure inconclusive); a part that fails is localized by the bisection at the usual
    steps (bisected at B's small steps, x |x| with its gradient's sign flipped near 0 was inconclusive on elements
    too coarse to decide, where the whole had located it); a coarse part decides nothing (|x|^1.1 + 1e4 at (1e-7,
    -2e-7, 0.5), 10% off at the two elements near 0, passed on B's allowance of 26% of its value); nor one that
    moved no output (sign flips near 0 of the sum of |x|^1.9 passed); B's error was 13 times its bound on a sum of
    sin x; and a B-only pass of (|x|^1.9, sin x) skipped each output alone, where a backward dropping one output's
    gradient passed. A backward wrong where the crossing steps are right (sin x) keeps its failure, the parts
    agreeing with the whole's estimate; and so does one whose estimate came from steps that crossed nothing (Ridders
    shrunk to 1e-5: |x|^1.5 at (0.01, 0.001, 1e-4, 0.003), a backward 1e-8 off at 0.003)."""
    import torch

    flat_u, flat_x = u.reshape(-1), x.reshape(-1)
    if not bool(((flat_x != 0) & (flat_x.abs() < whole["reach"] * flat_u.abs())).any()):
        return None  # (the estimate the failure rests on crossed nothing: it stands)
    crossing = (flat_x != 0) & (flat_x.abs() < RIDDERS_FIRST * flat_u.abs())  # (what A's own steps would cross)
    if not bool(crossing.any()):  # (a reach beyond Ridders' first step: float32's quick stage, 0.078 u)
        return None
    scale_b = float((flat_x.abs() / flat_u.abs())[crossing].min()) / (UNCROSS * RIDDERS_FIRST)
    if not scale_b > UNCROSS_FLOOR:  # (steps that small resolve nothing: the whole's evidence stands)
        return None
    precision = str(problem.inputs[j].dtype).removeprefix("torch.")
    name = problem.names[j]
    parts: list[tuple[torch.Tensor, dict[str, Any], float, float]] = []
    for part_mask, scale, words in ((~crossing & (flat_u != 0), 1.0, "its steps do not carry across 0"),
                                    (crossing, scale_b, "its steps carry across 0, at steps that do not")):
        count = int(part_mask.sum())
        if not count:
            continue
        part = torch.where(part_mask.reshape(u.shape), u, 0.0)
        g_part = torch.where(part != 0, g, 0.0)
        gu = g_part * part
        analytic = float(gu.sum())
        out = judge_along(phi_for(j, part, changes=scale != 1.0), analytic, _projected(tol, part, vs), scale=scale,
                          **_rounding(g_part, part, x, gu), precision=precision, own=partial(measure, part))
        comparisons.append(_entry(f"{name} (the {count} element{'' if count == 1 else 's'} {words})", analytic, out))
        if (out["verdict"] != J.PASS or out["numeric"] == 0.0 or "autograd_moved" in out
                or _unresolved(out["judged"], out["error_bound"], out["numeric"], tol, precision, within=True)):
            # a part that fails, cannot decide, passes coarser than the promise, or on a share of autograd's value
            # (its steps moving no output by an ulp) decides nothing
            return None
        parts.append((part, out, scale, analytic))
    if len(problem.outputs) > 1 and all(scale != 1.0 for _, _, scale, _ in parts):
        return None  # (each output alone is judged at the usual steps, along u: not along B's alone)
    numeric = sum(out["numeric"] for _, out, _, _ in parts)
    bounds = SAFETY * sum(out["error_bound"] for _, out, _, _ in parts)
    if (abs(sum(a for _, _, _, a in parts) - numeric) > tol.atol + tol.rtol * abs(numeric) + bounds
            or not abs(whole["numeric"] - numeric) > bounds + SAFETY * whole["error_bound"]):
        return None  # (the parts together must agree with autograd's total, and contradict the whole's estimate)
    return parts[0][0], parts[0][1], parts[0][2]
