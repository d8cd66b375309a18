"""The one judge, on hand-made numbers: the allowance's terms, and when evidence cannot decide.

Every expected allowance below is computed by hand in the comment beside it.
"""

import math

import pytest
import torch

from gradaudit import judge as J
from gradaudit.record import Location
from gradaudit.tolerances import SAFETY, Tolerance, resolve

F64 = torch.float64
CHECK = resolve("autograd_vs_evidence", "float64")  # atol 0, rtol 1e-10, plus 10 x the bounds


def t(*values):
    return torch.tensor(values, dtype=F64)


def verdicts(j):
    return [J.NAMES[int(v)] for v in j.verdict]


def test_the_allowance_is_atol_plus_rtol_times_reference_plus_ten_bounds():
    # reference 2, bound 1e-12: allowed = 0 + 1e-10 * 2 + 10 * 1e-12 = 2.1e-10
    j = J.judge(t(2.0 + 2.0e-10, 2.0 + 2.2e-10), t(2.0, 2.0), CHECK, reference_bound=1e-12)
    assert float(j.allowed[0]) == pytest.approx(2.1e-10, rel=1e-12)
    assert float(j.rtol_term[0]) == pytest.approx(2e-10) and float(j.evidence[0]) == pytest.approx(1e-11)
    assert verdicts(j) == ["pass", "fail"]


def test_a_relative_error_of_1e_8_fails_where_the_evidence_resolves_it():
    # the evidence is good to 1e-13 (10 x that = 1e-12); a gradient off by 1e-8 relative is far outside
    ref = t(0.3, -5.0, 1e3)
    j = J.judge(ref * (1 + 1e-8), ref, CHECK, reference_bound=1e-13 * ref.abs())
    assert verdicts(j) == ["fail", "fail", "fail"]


def test_evidence_too_coarse_to_decide_is_inconclusive_never_a_pass():
    # a bound of 1e-3 of the value (x 10 = 1e-2) exceeds the float64 threshold 1e-3: inconclusive
    j = J.judge(t(1.0), t(1.0 + 1e-6), CHECK, reference_bound=1e-3)
    assert verdicts(j) == ["inconclusive"] and int(j.reason[0]) == J.COARSE
    # the same bound on float32 evidence (threshold 10%) still decides
    assert verdicts(J.judge(t(1.0), t(1.0 + 1e-6), CHECK, reference_bound=1e-3, precision="float32")) == ["pass"]


def test_a_tolerance_the_user_set_tighter_than_the_evidence_is_inconclusive_in_between():
    tight = resolve("autograd_vs_evidence", "float64", Tolerance(1e-15, 0.0, why="tighter than the evidence"))
    # |diff| = 1e-12: beyond the user's 1e-15, within 10 x the bound 1e-12: the evidence cannot say
    assert verdicts(J.judge(t(1.0 + 1e-12), t(1.0), tight, reference_bound=1e-12)) == ["inconclusive"]
    assert verdicts(J.judge(t(1.0 + 1e-6), t(1.0), tight, reference_bound=1e-12)) == ["fail"]  # far beyond both
    assert verdicts(J.judge(t(1.0), t(1.0), tight, reference_bound=1e-12)) == ["pass"]


def test_kinks_and_discontinuities_are_inconclusive_never_fail():
    # relu at 0: one-sided slopes 0 and 1, numeric 0.5, autograd 0: a kink
    kink = J.judge(t(0.0), t(0.5), CHECK, slopes=(t(0.0), t(1.0)))
    assert verdicts(kink) == ["inconclusive"] and int(kink.reason[0]) == J.KINK
    # floor near a jump: local slopes 0 and 0, autograd 0, a large-step reference 3.2: a discontinuity
    jump = J.judge(t(0.0), t(3.2), CHECK, slopes=(t(0.0), t(0.0)))
    assert verdicts(jump) == ["inconclusive"] and int(jump.reason[0]) == J.DISCONTINUITY
    # a wrong gradient where slopes agree with the reference stays a failure
    wrong = J.judge(t(2.0), t(1.0), CHECK, slopes=(t(1.0), t(1.0)))
    assert verdicts(wrong) == ["fail"]


def test_a_staircase_at_the_small_steps_scale_is_inconclusive_and_a_gradient_matching_nothing_fails():
    """3 x rounded through float32, seen in float64: flat between float32 values (local slopes 0 and 0 at a step
    of 1e-8), slope 3.00003 over large steps (the rounding averaged out), autograd 3. The evidence disagrees
    with itself and autograd matches the large-step value to 1e-5 (KINK_REL 1e-3): inconclusive, with words
    saying which. An autograd value of 5 matches neither the slopes nor the large steps: a failure."""
    stair = J.judge(t(3.0), t(3.00003), CHECK, slopes=(t(0.0), t(0.0)))
    assert verdicts(stair) == ["inconclusive"] and int(stair.reason[0]) == J.DISCONTINUITY
    assert "not differentiable at the small step's scale" in J.reason_text(J.DISCONTINUITY, 3.0, 3.00003, (0.0, 0.0))
    assert verdicts(J.judge(t(5.0), t(3.00003), CHECK, slopes=(t(0.0), t(0.0)))) == ["fail"]


def test_slopes_with_their_rounding_bound_judge_at_their_own_precision():
    """A third tensor is each slope's rounding bound. Slopes 1.40 and 1.397 differ by 3e-3, more than KINK_REL of 1.4:
    a kink with a bound of 1e-5, none with a bound of 0.1 (blurred slopes of a smooth function), where autograd
    1.414 against a reference of 1.4 fails. A jump is told at the slopes' own precision (bound plus SLOPE_REL of
    the value), not at KINK_REL: slopes 0.5513934 that match autograd to 4e-8 (bound 1e-9) against a large-step
    reference 1e-4 off, on a bound of 2e-7 (SAFETY times it: 2e-6), are a discontinuity; with KINK_REL (5.5e-4 of
    the value) as the margin they were a failure. Tiny slopes count: relu scaled by 1e-5 (slopes 0 and 1e-5, bound
    1e-12) is a kink, which max(1, |slope|) hid."""
    smooth = J.judge(t(1.414), t(1.4), CHECK, reference_bound=1e-9, slopes=(t(1.400), t(1.397), t(0.1)))
    assert verdicts(smooth) == ["fail"]
    kink = J.judge(t(1.414), t(1.4), CHECK, reference_bound=1e-9, slopes=(t(1.400), t(1.397), t(1e-5)))
    assert verdicts(kink) == ["inconclusive"] and int(kink.reason[0]) == J.KINK
    jump = J.judge(t(0.5513934), t(0.5513934 - 1e-4), CHECK, reference_bound=2e-7,
                   slopes=(t(0.5513934 + 4e-8), t(0.5513934 + 4e-8), t(1e-9)))
    assert verdicts(jump) == ["inconclusive"] and int(jump.reason[0]) == J.DISCONTINUITY
    without = J.judge(t(0.5513934), t(0.5513934 - 1e-4), CHECK, reference_bound=2e-7,
                      slopes=(t(0.5513934 + 4e-8), t(0.5513934 + 4e-8)))
    assert verdicts(without) == ["fail"]
    tiny = J.judge(t(0.0), t(5e-6), CHECK, reference_bound=1e-13, slopes=(t(0.0), t(1e-5), t(1e-12)))
    assert verdicts(tiny) == ["inconclusive"] and int(tiny.reason[0]) == J.KINK
    assert verdicts(J.judge(t(0.0), t(5e-6), CHECK, reference_bound=1e-13, slopes=(t(0.0), t(1e-5)))) == ["fail"]


def test_a_declared_convention_between_the_slopes_resolves_a_kink():
    exp = resolve("evidence_vs_expected", "float64", scheme="ridders")
    # ledger: observed = numeric 0.5, reference = the expectation 0 (relu'(0) = 0 declared)
    j = J.judge(t(0.5), t(0.0), exp, numeric="observed", slopes=(t(0.0), t(1.0)), convention=t(0.0))
    assert verdicts(j) == ["pass"] and int(j.reason[0]) == J.CONVENTION
    outside = J.judge(t(0.5), t(2.0), exp, numeric="observed", slopes=(t(0.0), t(1.0)), convention=t(2.0))
    assert verdicts(outside) == ["inconclusive"]


def test_non_finite_values_are_judged_explicitly():
    nan, inf = math.nan, math.inf
    # autograd NaN where the evidence is finite: fail; the evidence NaN: it cannot decide; inf against evidence of
    # inf: it cannot decide either (an overflowed difference quotient confirms nothing; it passed until
    # 2026-12-06, and x**400 at 5.855 passed full mode while directional mode said inconclusive)
    j = J.judge(t(nan, 1.0, inf, inf), t(1.0, nan, 1.0, inf), CHECK)
    assert verdicts(j) == ["fail", "inconclusive", "fail", "inconclusive"]
    assert [int(r) for r in j.reason] == [J.OBS_NONFINITE, J.EVIDENCE_NONFINITE, J.OBS_NONFINITE,
                                          J.EVIDENCE_NONFINITE]


def test_outcomes_read_the_verdict_against_the_expectation():
    assert J.outcome("fail") == "failed" and J.outcome("fail", "fail") == "expected failures"
    assert J.outcome("pass", "fail") == "unexpected passes" and J.outcome("error", "fail") == "errors"
    assert J.outcome("inconclusive") == "inconclusive" and J.outcome("planned") == "planned"
    assert J.verdict_of(["pass", "inconclusive", "fail"]) == "fail"
    assert J.verdict_of(["pass", "error", "fail"]) == "error" and J.verdict_of([]) == "pass"


def test_a_comparison_keeps_every_term_and_its_location():
    j = J.judge(t(1.25), t(1.0), CHECK, reference_bound=1e-13)
    c = J.comparison(j, 0, t(1.25), t(1.0), Location("x", (3,), 0, (3,)))
    assert (c.input, c.element, c.output, c.output_element) == ("x", (3,), 0, (3,))
    assert (c.observed, c.reference, c.abs, c.rel, c.verdict) == (1.25, 1.0, 0.25, 0.25, "fail")
    # atol 0 + rtol 1e-10 * 1 + 10 * 1e-13
    assert c.allowance.total == pytest.approx(1e-10 + SAFETY * 1e-13, rel=1e-12)
    assert c.allowance.rtol_term == pytest.approx(1e-10) and c.allowance.atol == 0.0


def test_judging_never_touches_autograd_state():
    x = torch.ones(3, dtype=F64, requires_grad=True)
    y = x * 2  # requires grad: the judge detaches, so no warning, no graph
    j = J.judge(y, t(2.0, 2.0, 2.0), CHECK)
    assert not j.diff.requires_grad and verdicts(j) == ["pass"] * 3


def test_an_infinite_or_nan_error_bound_never_accepts():
    # an overflowed bound allows everything: |1 - 3.5| = 2.5 is "within" inf, so it must not pass, even
    # against an infinite natural scale (inf <= 1e-3 * inf holds in float arithmetic) or a NaN bound
    for bound, scale in ((math.inf, math.inf), (math.inf, 1.0), (math.nan, 1.0), (math.nan, math.inf)):
        j = J.judge(t(1.0), t(3.5), CHECK, reference_bound=bound, scale=scale)
        assert verdicts(j) == ["inconclusive"] and int(j.reason[0]) == J.COARSE, (bound, scale)
    # the same on one scalar (the Python-float path) and on a block whose other entries are fine
    assert J.NAMES[int(J.judge(1.0, 3.5, CHECK, reference_bound=math.inf, scale=math.inf).verdict)] == "inconclusive"
    j = J.judge(t(1.0, 2.0), t(3.5, 2.0), CHECK, reference_bound=t(math.inf, 1e-15), scale=t(math.inf, 2.0))
    assert verdicts(j) == ["inconclusive", "pass"]


SPECIAL = (0.0, -0.0, 1.0, -2.5, 1e-300, 3e-12, 1e154, 1e308, -1e308, math.inf, -math.inf, math.nan)


@pytest.mark.parametrize("seed", range(8))
def test_the_python_float_judge_gives_the_tensor_judges_verdict_value_by_value(seed):
    """judge.passes (a few values in Python floats, for small problems) against judge itself: the same pass or
    not for every value, and the same difference where it passes, on random values mixed with zeros of both
    signs, tiny and huge values, infinities and NaN, in the observed value, the evidence, its bound and the
    scale; float64 and float32 thresholds."""
    g = torch.Generator().manual_seed(seed)
    n = 400

    def draw(scale):
        values = (torch.randn(n, generator=g, dtype=F64) * scale).tolist()
        for i in torch.randint(n, (n // 5,), generator=g).tolist():
            values[i] = SPECIAL[int(torch.randint(len(SPECIAL), (1,), generator=g))]
        return values

    ref = draw(3.0)
    noise = [1e-9, 1e-11, 1e-13, 0.0, 1e-3][seed % 5]
    obs = [r * (1 + noise * float(torch.randn(1, generator=g, dtype=F64))) for r in ref]
    for i in torch.randint(n, (n // 5,), generator=g).tolist():
        obs[i] = SPECIAL[int(torch.randint(len(SPECIAL), (1,), generator=g))]
    bound = [abs(b) for b in draw(1e-12)]
    scale = [abs(s) + 1.0 for s in draw(2.0)]
    for precision in ("float64", "float32"):
        flags, diffs = J.passes(obs, ref, bound, scale, CHECK, precision)
        j = J.judge(t(*obs), t(*ref), CHECK, reference_bound=t(*bound), scale=t(*scale), precision=precision)
        assert flags == [int(v) == J.PASS for v in j.verdict]
        assert [d for d, ok in zip(diffs, flags) if ok] == [float(d) for d, ok in zip(j.diff, flags) if ok]
    assert J.passes(obs, ref, bound, scale, resolve("autograd_vs_evidence", "float64",
                                                    Tolerance(1e-9, 1e-9, why="a user's own"))) is None


@pytest.mark.parametrize("seed", range(4))
def test_a_quick_stage_is_judged_as_the_judge_judges_it(seed):
    """directional._stage (a quick stage's judgement; its failures skip the judge's tensor path) against judge
    itself, one comparison at a time: the same pass or not, the judged record where it passes, and the judge's
    own difference and allowance (atol + rtol |reference| + SAFETY both bounds) where it does not, on random
    values mixed with zeros, tiny and huge values, infinities and NaN in either value, both bounds and the
    scale; float64 and float32 thresholds, the default tolerance and one a user set."""
    from gradaudit.directional import _allowed, _stage

    g = torch.Generator().manual_seed(100 + seed)
    n = 300

    def pick(values, scale):
        out = (torch.randn(n, generator=g, dtype=F64) * scale).tolist()
        for i in torch.randint(n, (n // 5,), generator=g).tolist():
            out[i] = values[int(torch.randint(len(values), (1,), generator=g))]
        return out

    ref = pick(SPECIAL, 3.0)
    noise = [1e-9, 1e-11, 1e-13, 1e-3][seed]
    obs = [r * (1 + noise * float(torch.randn(1, generator=g, dtype=F64))) for r in ref]
    for i in torch.randint(n, (n // 5,), generator=g).tolist():
        obs[i] = SPECIAL[int(torch.randint(len(SPECIAL), (1,), generator=g))]
    bounds = [0.0, 1e-300, math.inf, math.nan, 1e-3]
    ob = [abs(b) for b in pick(bounds, 1e-13)]
    rb = [abs(b) for b in pick(bounds, 1e-12)]
    scale = [abs(s) + 1.0 for s in pick((0.0, math.inf, 1e300), 2.0)]
    user = resolve("autograd_vs_evidence", "float64", Tolerance(1e-9, 1e-9, why="a user's own"))
    for tol in (CHECK, user):
        for precision in ("float64", "float32"):
            for o, r, b1, b2, s in zip(obs, ref, ob, rb, scale):
                stage = _stage(o, r, tol, observed_bound=b1, reference_bound=b2, scale=s, precision=precision)
                j = J.judge(o, r, tol, observed_bound=b1, reference_bound=b2, scale=s, precision=precision)
                assert (stage.judged is not None) == (int(j.verdict) == J.PASS), (o, r, b1, b2, s)
                diff, allowed = float(j.diff), _allowed(j)
                assert stage.diff == diff or (math.isnan(stage.diff) and math.isnan(diff)), (o, r, stage, diff)
                assert stage.allowed == allowed or (math.isnan(stage.allowed) and math.isnan(allowed)), \
                    (o, r, b1, b2, stage, allowed)


def test_a_staircase_reason_says_the_slopes_are_flat():
    """One-sided slopes exactly 0 beside a large-step estimate that is not: the function moves in stairs at the small
    step's scale, and the reason says so whatever autograd chose, near 0 (1.7e-12 beside an estimate of 1.3e-12, which
    the old text said matched the slopes) or near the estimate; where autograd chose exactly 0, the local slope, it is
    a jump inside the large steps (floor's backward), and the reason says that."""
    for observed in (1.7e-12, 3.0):
        text = J.reason_text(J.DISCONTINUITY, observed, 1.3e-12, (0.0, 0.0))
        assert "not differentiable at the small step's scale" in text and "exactly 0" in text, text
    text = J.reason_text(J.DISCONTINUITY, 0.0, 0.5, (0.0, 0.0))
    assert "a discontinuity within the step" in text and "exactly 0" not in text, text
    assert "exactly 0" not in J.reason_text(J.DISCONTINUITY, 1.0, 2.0, (1.0, 1.0))


def test_equal_infinities_confirm_nothing_where_one_side_is_numeric_evidence():
    # autograd's inf against a difference quotient that overflowed to inf: "equal", so it passed, on no evidence
    inf = torch.tensor([math.inf, -math.inf, 2.0], dtype=torch.float64)
    judged = J.judge(inf, inf.clone(), CHECK)  # numeric="reference"
    assert [J.NAMES[int(v)] for v in judged.verdict] == ["inconclusive", "inconclusive", "pass"]
    assert "cannot confirm inf" in J.reason_text(int(judged.reason[0]), math.inf, math.inf, None)
    # where neither side is numeric evidence (an expected value against autograd), equal is equal
    exact = J.judge(inf, inf.clone(), CHECK, numeric=None)
    assert [J.NAMES[int(v)] for v in exact.verdict] == ["pass", "pass", "pass"]
    # the same rule in Python floats
    flags, _ = J.passes([math.inf, 2.0], [math.inf, 2.0], [0.0, 0.0], [1.0, 1.0], CHECK)
    assert flags == [False, True]
