"""The precision ladder (``gradaudit.ladder.compare``): planted kernels, each judged at every rung.

- correct kernels (softmax, log-softmax, layer norm, GELU, matmul, attention from matmuls, SDPA, and a
  candidate that *is* the reference) pass at every rung, for several seeds: a correct kernel must never fail;
- formula bugs fail at every rung (bfloat16, float16, float32 and the float64 top rung), blamed on the
  right quantity; a localized one (the tail row of a tile never written) is caught by the max guard at
  bfloat16, where the mean dilutes it;
- low-precision accumulation (split-K dB, a softmax normalizer summed in the low dtype) fails at the
  16-bit rungs and passes at float32 (split-K) and at the top;
- overflow (softmax without the max subtraction) is NaN at float16: a failure named non-finite;
- misuse is refused with SpecError naming the argument before anything runs; a candidate that raises
  gives the error verdict with its traceback; records validate against the shipped JSON Schema.

Expected verdicts come from analysis: a formula bug is wrong by O(|value|) (a relative error near 1,
thousands of times the rounding of any dtype); a sum accumulated in bfloat16 over K terms errs by about
sqrt(K) eps relative where a float32 accumulator errs by one final rounding; exp(x) overflows float16
(largest 65504) for x > 11.1, and inputs of scale 12 reach x = 40.
"""

from __future__ import annotations

import json
import math

import jsonschema
import pytest
import torch
import torch.nn.functional as F

import gradaudit as ga
from gradaudit.errors import SpecError
from gradaudit.ladder import LadderResult, LadderTolerance, compare
from gradaudit.record import Record, dumps, schema

F64 = torch.float64
F32 = torch.float32
LOW = ("bfloat16", "float16")
RUNGS = ("bfloat16", "float16", "float32", "float64")
SEEDS = range(4)


def _up(t):
    """float32 inside for the 16-bit dtypes (what a correct fused kernel does); float32/float64 unchanged."""
    return t.to(F32) if t.dtype in (torch.bfloat16, torch.float16) else t


def randn(gen, *shape, scale=1.0):
    return (torch.randn(*shape, generator=gen, dtype=F64) * scale).requires_grad_()


# -- correct kernels: autograd.Functions with hand-written backward, float32 inside ----------------------

class Softmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        xf = _up(x)
        e = torch.exp(xf - xf.amax(-1, keepdim=True))
        y = e / e.sum(-1, keepdim=True)
        ctx.save_for_backward(y)
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx, g):  # dx = y (g - sum(g y))
        (y,) = ctx.saved_tensors
        gf = _up(g)
        return (y * (gf - (gf * y).sum(-1, keepdim=True))).to(g.dtype)


class LogSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        xf = _up(x)
        m = xf.amax(-1, keepdim=True)
        y = xf - m - torch.log(torch.exp(xf - m).sum(-1, keepdim=True))
        ctx.save_for_backward(y)
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx, g):  # dx = g - exp(y) sum(g)
        (y,) = ctx.saved_tensors
        gf = _up(g)
        return (gf - torch.exp(y) * gf.sum(-1, keepdim=True)).to(g.dtype)


class LayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b):
        xf, wf, bf = _up(x), _up(w), _up(b)
        mu = xf.mean(-1, keepdim=True)
        rstd = torch.rsqrt(((xf - mu) ** 2).mean(-1, keepdim=True) + 1e-5)
        xhat = (xf - mu) * rstd
        ctx.save_for_backward(xhat, rstd, wf)
        return (xhat * wf + bf).to(x.dtype)

    @staticmethod
    def backward(ctx, g):  # dx = rstd (gw - mean(gw) - xhat mean(gw xhat)); dw = sum g xhat; db = sum g
        xhat, rstd, wf = ctx.saved_tensors
        gf = _up(g)
        gx = gf * wf
        dx = rstd * (gx - gx.mean(-1, keepdim=True) - xhat * (gx * xhat).mean(-1, keepdim=True))
        rows = tuple(range(gf.dim() - 1))
        return dx.to(g.dtype), (gf * xhat).sum(rows).to(g.dtype), gf.sum(rows).to(g.dtype)


def layer_norm_fused(x, w, b):
    return LayerNorm.apply(x, w, b)


def layer_norm_ref(x, w, b):
    return F.layer_norm(x, x.shape[-1:], w, b, 1e-5)


class Gelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        xf = _up(x)
        ctx.save_for_backward(xf)
        return (0.5 * xf * (1 + torch.erf(xf / math.sqrt(2)))).to(x.dtype)

    @staticmethod
    def backward(ctx, g):  # d/dx x Phi(x) = Phi(x) + x phi(x)
        (xf,) = ctx.saved_tensors
        cdf = 0.5 * (1 + torch.erf(xf / math.sqrt(2)))
        pdf = torch.exp(-0.5 * xf * xf) / math.sqrt(2 * math.pi)
        return (_up(g) * (cdf + xf * pdf)).to(g.dtype)


class Matmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return (_up(a) @ _up(b)).to(a.dtype)

    @staticmethod
    def backward(ctx, g):  # dA = g B^T, dB = A^T g
        a, b = ctx.saved_tensors
        gf = _up(g)
        return (gf @ _up(b).mT).to(a.dtype), (_up(a).mT @ gf).to(b.dtype)


def attention_ref(q, k, v):
    """Attention built from matmuls in the inputs' dtype (what PyTorch does unfused)."""
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ v


class Attention(torch.autograd.Function):
    """A fused attention: float32 inside, the backward written out (FlashAttention's formulas)."""

    @staticmethod
    def forward(ctx, q, k, v):
        qf, kf, vf = _up(q), _up(k), _up(v)
        scale = 1 / math.sqrt(q.shape[-1])
        p = torch.softmax(qf @ kf.transpose(-2, -1) * scale, -1)
        ctx.save_for_backward(qf, kf, vf, p)
        ctx.scale = scale
        return (p @ vf).to(q.dtype)

    @staticmethod
    def backward(ctx, g):
        qf, kf, vf, p = ctx.saved_tensors
        gf = _up(g)
        dv = p.transpose(-2, -1) @ gf
        dp = gf @ vf.transpose(-2, -1)
        ds = p * (dp - (dp * p).sum(-1, keepdim=True)) * ctx.scale
        return (ds @ kf).to(g.dtype), (ds.transpose(-2, -1) @ qf).to(g.dtype), dv.to(g.dtype)


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


def softmax_ref(x):
    return torch.softmax(x, -1)


# -- planted bugs ------------------------------------------------------------------------------------

class SoftmaxNoSum(Softmax):
    """Formula bug: the backward misses the (g·y).sum() term."""

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return (y * _up(g)).to(g.dtype)


class LayerNormNoProjection(LayerNorm):
    """Formula bug: dx = rstd g w, without the two mean terms."""

    @staticmethod
    def backward(ctx, g):
        xhat, rstd, wf = ctx.saved_tensors
        gf = _up(g)
        rows = tuple(range(gf.dim() - 1))
        return (rstd * gf * wf).to(g.dtype), (gf * xhat).sum(rows).to(g.dtype), gf.sum(rows).to(g.dtype)


class MatmulUntransposed(Matmul):
    """Formula bug: dA = g B (B square), where g B^T is right."""

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        gf = _up(g)
        return (gf @ _up(b)).to(a.dtype), (_up(a).mT @ gf).to(b.dtype)


class MatmulTail(Matmul):
    """Localized formula bug: the last row of dA (a tail tile) is never written."""

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        gf = _up(g)
        da = gf @ _up(b).mT
        da[-1] = 0
        return da.to(a.dtype), (_up(a).mT @ gf).to(b.dtype)


class MatmulSplitK(Matmul):
    """Precision bug: dB summed over chunks of 16 rows, the partial sums accumulated in the low dtype."""

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        gf = _up(g)
        db = torch.zeros_like(b)
        for i in range(0, a.shape[0], 16):
            db = db + (_up(a[i:i + 16]).mT @ gf[i:i + 16]).to(b.dtype)
        return (gf @ _up(b).mT).to(a.dtype), db


class SoftmaxLowSum(Softmax):
    """Precision bug: the normalizer summed term by term in the low dtype."""

    @staticmethod
    def forward(ctx, x):
        xf = _up(x)
        e = torch.exp(xf - xf.amax(-1, keepdim=True)).to(x.dtype)
        s = torch.zeros_like(e[..., :1])
        for i in range(e.shape[-1]):
            s = s + e[..., i:i + 1]
        y = _up(e) / _up(s)
        ctx.save_for_backward(y)
        return y.to(x.dtype)


class SoftmaxUnstable(torch.autograd.Function):
    """Overflow: exp(x) without subtracting the row's max, in the input dtype."""

    @staticmethod
    def forward(ctx, x):
        e = torch.exp(x)
        y = e / e.sum(-1, keepdim=True)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return y * (g - (g * y).sum(-1, keepdim=True))


def unstable_softmax(x):
    return SoftmaxUnstable.apply(x)


# -- the cases ---------------------------------------------------------------------------------------

def correct_case(name, seed):
    gen = torch.Generator().manual_seed(seed)
    if name == "softmax":
        return Softmax.apply, softmax_ref, (randn(gen, 32, 256, scale=12.0),), ("x",)
    if name == "log_softmax":
        return LogSoftmax.apply, (lambda x: torch.log_softmax(x, -1)), (randn(gen, 32, 256, scale=12.0),), ("x",)
    if name == "layer_norm":
        w = (1 + 0.1 * torch.randn(256, generator=gen, dtype=F64)).requires_grad_()
        b = (0.1 * torch.randn(256, generator=gen, dtype=F64)).requires_grad_()
        return layer_norm_fused, layer_norm_ref, (randn(gen, 32, 256), w, b), ("x", "w", "b")
    if name == "gelu":
        return Gelu.apply, F.gelu, (randn(gen, 32, 256, scale=3.0),), ("x",)
    if name == "matmul":
        return Matmul.apply, torch.matmul, (randn(gen, 128, 96), randn(gen, 96, 64)), ("a", "b")
    if name == "attention":
        qkv = tuple(randn(gen, 2, 64, 32) for _ in range(3))
        return Attention.apply, attention_ref, qkv, ("q", "k", "v")
    if name == "sdpa":
        qkv = tuple(randn(gen, 2, 64, 32) for _ in range(3))
        return sdpa, attention_ref, qkv, ("q", "k", "v")
    if name == "identical":
        return softmax_ref, softmax_ref, (randn(gen, 16, 64, scale=4.0),), ("x",)
    raise KeyError(name)


CORRECT = ("softmax", "log_softmax", "layer_norm", "gelu", "matmul", "attention", "sdpa", "identical")


def verdicts(res: LadderResult) -> dict[tuple[str, str], str]:
    return {(row.rung, row.quantity): row.verdict for row in res.rows}


# -- correct kernels: pass at every rung, every seed --------------------------------------------------

@pytest.mark.parametrize("name", CORRECT)
def test_a_correct_kernel_passes_at_every_rung_for_every_seed(name):
    for seed in SEEDS:
        cand, ref, xs, names = correct_case(name, seed)
        res = compare(cand, ref, xs, names=names, seed=seed)
        assert res.ok, res
        rungs = {row.rung for row in res.rows}
        assert rungs == set(RUNGS)  # three rungs and the top, where the kernel accepts float64
        assert len(res.records) == 4 * (1 + len(names))  # per rung: the output and each input's gradient


def test_a_candidate_that_is_the_reference_has_ratio_one_and_no_error_at_the_top():
    cand, ref, xs, names = correct_case("identical", 0)
    res = compare(cand, ref, xs)
    for row in res.rows:
        if row.top:
            assert row.candidate_error == 0.0 and row.baseline_error is None
        else:  # the same computation on the same inputs: the same error, exactly
            assert row.candidate_error == row.baseline_error and row.ratio == 1.0


# -- formula bugs: fail at every rung -----------------------------------------------------------------

def test_softmax_backward_missing_the_sum_term_fails_at_every_rung():
    x = randn(torch.Generator().manual_seed(0), 32, 256, scale=12.0)
    res = compare(SoftmaxNoSum.apply, softmax_ref, (x,), names=("x",))
    v = verdicts(res)
    assert not res.ok
    assert all(v[(rung, "grad x")] == "fail" for rung in RUNGS)
    assert all(v[(rung, "output")] == "pass" for rung in RUNGS)  # the forward is right
    by = {(row.rung, row.quantity): row for row in res.rows}
    # loudest at the top: the error is O(|dx|) everywhere, the allowance shrinks with eps
    assert by[("bfloat16", "grad x")].ratio > 100 and by[("float32", "grad x")].ratio > 1e6
    assert "mean |error|" in by[("float64", "grad x")].reason


def test_layer_norm_backward_without_the_projection_blames_dx_only_at_every_rung():
    cand, ref, xs, names = correct_case("layer_norm", 1)
    res = compare(lambda x, w, b: LayerNormNoProjection.apply(x, w, b), ref, xs, names=names)
    v = verdicts(res)
    for rung in RUNGS:
        assert v[(rung, "grad x")] == "fail"
        assert v[(rung, "output")] == v[(rung, "grad w")] == v[(rung, "grad b")] == "pass"


def test_matmul_backward_with_an_untransposed_operand_fails_at_every_rung():
    gen = torch.Generator().manual_seed(2)
    res = compare(MatmulUntransposed.apply, torch.matmul, (randn(gen, 128, 96), randn(gen, 96, 96)),
                  names=("a", "b"))
    v = verdicts(res)
    assert all(v[(rung, "grad a")] == "fail" for rung in RUNGS)
    assert all(v[(rung, "grad b")] == "pass" and v[(rung, "output")] == "pass" for rung in RUNGS)


def test_a_localized_formula_bug_is_caught_by_the_max_guard_where_the_mean_dilutes_it():
    # one row of 1024 wrong by O(|dA|): the mean grows by about 1/1024 of |dA|, under 2 x the bfloat16
    # rounding (about 0.2 x 2^-7 relative), while the largest error is O(|dA|), far beyond 16 x a rounding
    for seed in range(3):
        gen = torch.Generator().manual_seed(seed)
        res = compare(MatmulTail.apply, torch.matmul, (randn(gen, 1024, 32), randn(gen, 32, 16)), names=("a", "b"),
                      seed=seed)
        by = {(row.rung, row.quantity): row for row in res.rows}
        assert all(by[(rung, "grad a")].verdict == "fail" for rung in RUNGS)
        bf16 = by[("bfloat16", "grad a")]
        assert bf16.ratio < 2.0 and bf16.max_ratio > 16.0
        assert bf16.reason.startswith("max |error|") and "(1023," in bf16.reason  # located at the tail row
        (rec,) = [r for r in res.records if r.details["rung"] == "bfloat16" and r.input == "a"]
        assert rec.discrepancy.worst[0].location.input == "a" and rec.discrepancy.worst[0].element[0] == 1023


# -- precision bugs: fail at the 16-bit rungs, pass at float32 ----------------------------------------

def test_split_k_accumulation_in_the_low_dtype_fails_at_16_bits_and_passes_at_float32():
    for seed in SEEDS:
        gen = torch.Generator().manual_seed(seed)
        res = compare(MatmulSplitK.apply, torch.matmul, (randn(gen, 512, 64), randn(gen, 64, 64)), names=("a", "b"),
                      seed=seed)
        v = verdicts(res)
        assert v[("bfloat16", "grad b")] == v[("float16", "grad b")] == "fail", res
        assert v[("float32", "grad b")] == v[("float64", "grad b")] == "pass", res
        assert all(v[(rung, q)] == "pass" for rung in RUNGS for q in ("output", "grad a"))


def test_a_normalizer_summed_in_the_low_dtype_fails_at_16_bits_and_passes_at_the_top():
    for seed in range(3):
        x = randn(torch.Generator().manual_seed(seed), 32, 256, scale=3.0)
        res = compare(SoftmaxLowSum.apply, softmax_ref, (x,), names=("x",), seed=seed)
        v = verdicts(res)
        assert all(v[(rung, q)] == "fail" for rung in LOW for q in ("output", "grad x")), res
        assert v[("float64", "output")] == v[("float64", "grad x")] == "pass"


# -- overflow -----------------------------------------------------------------------------------------

def test_an_unstable_softmax_overflows_to_nan_in_float16_named_as_non_finite():
    x = randn(torch.Generator().manual_seed(0), 32, 256, scale=12.0)
    res = compare(SoftmaxUnstable.apply, softmax_ref, (x,), names=("x",))
    by = {(row.rung, row.quantity): row for row in res.rows}
    for q in ("output", "grad x"):
        assert by[("float16", q)].verdict == "fail"
        assert by[("float16", q)].reason.startswith("non-finite:") and "NaN" in by[("float16", q)].reason
        assert by[("float32", q)].verdict == by[("float64", q)].verdict == "pass"
    rec = next(r for r in res.records if r.details["rung"] == "float16" and r.input is None)
    assert rec.discrepancy.worst[0].kind == "nonfinite" and rec.details["nonfinite_candidate"] > 0
    assert "fail (non-finite)" in str(res)


def test_a_reference_that_overflows_sets_no_bound_inconclusive_not_pass():
    x = randn(torch.Generator().manual_seed(0), 8, 64, scale=12.0)
    res = compare(Softmax.apply, unstable_softmax, (x,), names=("x",))
    v = verdicts(res)
    assert v[("float16", "output")] == "inconclusive" and v[("float32", "output")] == "pass"
    assert res.verdict == "inconclusive" and not res.ok


# -- the top rung ---------------------------------------------------------------------------------------

class Float16Only(Softmax):
    @staticmethod
    def forward(ctx, x):
        if x.dtype == F64:
            raise TypeError("this kernel supports bfloat16, float16 and float32")
        return Softmax.forward(ctx, x)


def test_a_candidate_that_refuses_float64_skips_the_top_rung_and_says_why():
    x = randn(torch.Generator().manual_seed(0), 8, 64, scale=4.0)
    res = compare(Float16Only.apply, softmax_ref, (x,), names=("x",))
    assert res.ok  # skipped is not a failure
    top = [r for r in res.records if r.details["top"]]
    assert top and all(r.verdict == "skipped" and "does not accept float64" in r.reason for r in top)
    assert top[0].error.type == "TypeError"
    # asked for explicitly, float64 is a rung like any other: the exception is an error
    res = compare(Float16Only.apply, softmax_ref, (x,), dtypes=(torch.float32, torch.float64))
    assert res.verdict == "error" and {row.rung for row in res.rows} == {"float32", "float64"}


class SilentlyFloat32(Softmax):
    @staticmethod
    def forward(ctx, x):
        return Softmax.forward(ctx, x.to(F32)).to(x.dtype)


def test_the_top_rung_catches_a_kernel_that_computes_in_float32_when_given_float64():
    x = randn(torch.Generator().manual_seed(0), 8, 64, scale=4.0)
    res = compare(SilentlyFloat32.apply, softmax_ref, (x,), names=("x",))
    by = {(row.rung, row.quantity): row for row in res.rows}
    assert by[("float32", "output")].verdict == "pass" and by[("float64", "output")].verdict == "fail"
    assert "float32 level" in by[("float64", "output")].reason
    assert "top rung" in str(res) and "cannot hide behind rounding" in str(res)


# -- errors, shapes ---------------------------------------------------------------------------------

def boom(x):
    raise ValueError("planted in the forward")


class BackwardBoom(Softmax):
    @staticmethod
    def backward(ctx, g):
        raise RuntimeError("planted in the backward")


def test_a_candidate_that_raises_gives_the_error_verdict_with_its_traceback():
    x = randn(torch.Generator().manual_seed(0), 4, 8)
    res = compare(boom, softmax_ref, (x,))
    assert res.verdict == "error" and not res.ok
    low = [r for r in res.records if not r.details["top"]]
    assert low and all(r.verdict == "error" and r.outcome == "errors" for r in low)
    top = [r for r in res.records if r.details["top"]]  # it ran at no rung: not "does not accept float64"
    assert top and all(r.verdict == "error" for r in top)
    err = low[0].error
    assert err.type == "ValueError" and err.message == "planted in the forward"
    assert "boom" in err.traceback and "candidate forward in bfloat16" in err.where
    res = compare(BackwardBoom.apply, softmax_ref, (x,))
    assert res.verdict == "error"
    assert {r.error.where for r in res.records if r.verdict == "error"} >= {"the candidate backward in bfloat16"}
    text = str(res)
    assert "planted in the backward" in text and "RuntimeError" in text


def test_a_candidate_output_of_the_wrong_shape_fails_as_such():
    x = randn(torch.Generator().manual_seed(0), 4, 8)
    res = compare(lambda x: torch.softmax(x, -1).T.contiguous(), softmax_ref, (x,))
    out = [r for r in res.records if r.input is None]
    assert all(r.verdict == "fail" and "shape (8, 4)" in r.reason for r in out)


def test_integer_inputs_pass_through_and_several_outputs_are_judged_each():
    gen = torch.Generator().manual_seed(0)
    x, bias = randn(gen, 16, 32, scale=4.0), torch.randn(32, generator=gen, dtype=F64)  # bias: no gradient
    idx = torch.tensor([3, 0, 7, 7, 15])

    def rows(x, bias, idx):  # a float input without grad is cast like the others; the index stays an integer
        assert idx.dtype == torch.int64
        y = Softmax.apply(x + bias)
        return y.index_select(0, idx), y.sum(0)

    def rows_ref(x, bias, idx):
        y = torch.softmax(x + bias, -1)
        return y.index_select(0, idx), y.sum(0)

    res = compare(rows, rows_ref, (x, bias, idx))
    assert res.ok, res
    assert {row.quantity for row in res.rows} == {"output 0", "output 1", "grad x"}  # no gradient for bias, idx


# -- misuse: SpecError naming the argument, before anything runs ---------------------------------------

class Counter:
    def __init__(self):
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        return torch.softmax(x, -1)


@pytest.mark.parametrize("kwargs, field", [
    ({"candidate": 3}, "candidate"),
    ({"reference": "softmax"}, "reference"),
    ({"inputs": (1.0,)}, "inputs"),
    ({"inputs": [torch.ones(3, requires_grad=True), 2.0]}, "inputs"),
    ({"inputs": (torch.ones(3),)}, "inputs"),  # nothing requires grad
    ({"inputs": ()}, "inputs"),
    ({"dtypes": (torch.int32,)}, "dtypes"),
    ({"dtypes": ("float8",)}, "dtypes"),
    ({"dtypes": (torch.complex64,)}, "dtypes"),
    ({"dtypes": ()}, "dtypes"),
    ({"dtypes": (torch.float16, torch.float16)}, "dtypes"),
    ({"ratio": 0}, "ratio"),
    ({"ratio": -2.0}, "ratio"),
    ({"ratio": float("nan")}, "ratio"),
    ({"ratio": float("inf")}, "ratio"),
    ({"ratio": True}, "ratio"),
    ({"ratio": "2"}, "ratio"),
    ({"seed": -1}, "seed"),
    ({"tolerance": 1e-3}, "tolerance"),
    ({"tolerance": ga.Tolerance(1e-3, 0.0)}, "tolerance.why"),
    ({"device": 7}, "device"),
    ({"device": "nonsense"}, "device"),
    ({"names": ("a", "b")}, "names"),
    ({"inputs": (torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)), "names": ("a", "a")}, "names"),
])
def test_misuse_is_refused_naming_the_argument_before_anything_runs(kwargs, field):
    cand, ref = Counter(), Counter()
    args = {"candidate": cand, "reference": ref, "inputs": (torch.ones(2, 3, requires_grad=True),)}
    args.update(kwargs)
    with pytest.raises(SpecError) as info:
        compare(args.pop("candidate"), args.pop("reference"), args.pop("inputs"), **args)
    assert info.value.field == field, info.value
    assert field.split(".")[0] in str(info.value)
    assert cand.calls == 0 and ref.calls == 0


def test_a_ladder_tolerance_needs_a_why_and_is_validated():
    with pytest.raises(SpecError) as info:
        LadderTolerance(ratio=3.0)
    assert info.value.field == "tolerance.why"
    with pytest.raises(SpecError) as info:
        LadderTolerance(ratio=0.0, why="x")
    assert info.value.field == "tolerance.ratio"
    with pytest.raises(SpecError) as info:
        LadderTolerance(floor_ulps=-1.0, why="x")
    assert info.value.field == "tolerance.floor_ulps"


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without CUDA")
def test_cuda_on_a_machine_without_it_is_refused_before_anything_runs():
    cand = Counter()
    with pytest.raises(SpecError) as info:
        compare(cand, softmax_ref, (torch.ones(2, 3, requires_grad=True),), device="cuda")
    assert info.value.field == "device" and cand.calls == 0


# -- tolerance overrides ----------------------------------------------------------------------------------

def test_a_tolerance_override_is_recorded_with_its_why_and_changes_the_verdict():
    gen = torch.Generator().manual_seed(0)
    xs = (randn(gen, 512, 64), randn(gen, 64, 64))
    strict = compare(MatmulSplitK.apply, torch.matmul, xs, names=("a", "b"))
    loose = compare(MatmulSplitK.apply, torch.matmul, xs, names=("a", "b"),
                    tolerance=LadderTolerance(ratio=8.0, why="split-K in bf16 is the documented design of this kernel"))
    assert not strict.ok and loose.ok
    tol = loose.records[0].tolerance
    assert tol.default is False and tol.why.startswith("split-K") and tol.evidence_factor == 8.0
    assert strict.records[0].tolerance.default is True and strict.records[0].tolerance.evidence_factor == 2.0
    assert "changed from the default: split-K" in str(loose)
    # a ga.Tolerance replaces the floor: a huge absolute floor passes everything below the top
    floor = compare(MatmulSplitK.apply, torch.matmul, xs, names=("a", "b"),
                    tolerance=ga.Tolerance(1e3, 0.0, why="only the top rung matters here"))
    assert floor.ok
    with pytest.raises(SpecError):  # the ratio given twice, differently
        compare(MatmulSplitK.apply, torch.matmul, xs, ratio=3.0, tolerance=LadderTolerance(ratio=4.0, why="x"))


def test_the_ratio_argument_is_the_mean_ratio():
    gen = torch.Generator().manual_seed(0)
    xs = (randn(gen, 512, 64), randn(gen, 64, 64))
    # split-K's bfloat16 dB errs about 4.5 x the baseline (measured 4.4-4.7); ratio 8 lets it pass
    assert compare(MatmulSplitK.apply, torch.matmul, xs, ratio=8.0).ok


# -- determinism, records, rendering -------------------------------------------------------------------

def test_the_same_seed_gives_the_same_records_and_another_seed_other_grad_outputs():
    cand, ref, xs, names = correct_case("layer_norm", 0)
    one = compare(cand, ref, xs, names=names, seed=3)
    two = compare(cand, ref, xs, names=names, seed=3)
    assert [r.to_dict() for r in one.records] == [r.to_dict() for r in two.records]
    other = compare(cand, ref, xs, names=names, seed=4)
    grad = [(r.details["candidate_error"]) for r in one.records if r.input == "w"]
    assert grad != [(r.details["candidate_error"]) for r in other.records if r.input == "w"]


def every_kind_of_record():
    x = randn(torch.Generator().manual_seed(0), 8, 64, scale=12.0)
    gen = torch.Generator().manual_seed(1)
    out = {
        "pass": compare(Softmax.apply, softmax_ref, (x,)),
        "formula": compare(SoftmaxNoSum.apply, softmax_ref, (x,)),
        "nonfinite": compare(SoftmaxUnstable.apply, softmax_ref, (x,)),
        "inconclusive": compare(Softmax.apply, unstable_softmax, (x,)),
        "error": compare(boom, softmax_ref, (x,)),
        "skipped": compare(Float16Only.apply, softmax_ref, (x,)),
        "shape": compare(lambda x: torch.softmax(x, -1).T.contiguous(), softmax_ref, (x,)),
        "multi": compare(lambda a, b: (a @ b, a.sum(-1)), lambda a, b: (a @ b, a.sum(-1)),
                         (randn(gen, 8, 4), randn(gen, 4, 3))),
    }
    return {k: list(v.records) for k, v in out.items()}


def test_every_ladder_record_validates_against_the_shipped_schema():
    validator = jsonschema.Draft202012Validator(schema())
    for kind, records in every_kind_of_record().items():
        assert records, kind
        for r in records:
            data = json.loads(dumps(r.to_dict()))  # through JSON text: NaN and Infinity must be strings
            errors = sorted(validator.iter_errors(data), key=str)
            assert not errors, f"{kind}: {r.check}: {errors[0].message} at {list(errors[0].path)}"
            json.dumps(r.to_dict(), allow_nan=False)
            back = Record.from_dict(data)
            assert back.to_dict() == r.to_dict(), kind
            assert r.suite == "ladder" and r.method == "ladder" and r.executed


def test_records_read_back_from_json_render_the_same_table():
    from gradaudit.render.ladder import ladder_report

    res = compare(SoftmaxNoSum.apply, softmax_ref, (randn(torch.Generator().manual_seed(0), 8, 64, scale=12.0),))
    back = [Record.from_dict(json.loads(dumps(r.to_dict()))) for r in res.records]
    assert ladder_report(back, name=res.name, rerun=res.rerun) == str(res)
    assert [row.verdict for row in res.rows] == [r.verdict for r in back]


def test_the_report_is_a_table_of_rungs_by_quantities_with_the_worst_elements_located():
    gen = torch.Generator().manual_seed(2)
    res = compare(MatmulUntransposed.apply, torch.matmul, (randn(gen, 16, 12), randn(gen, 12, 12)), names=("a", "b"))
    text = str(res)
    assert text.startswith("gradaudit.compare MatmulUntransposed.apply vs torch.matmul: FAIL")
    header = next(line for line in text.splitlines() if line.startswith("rung"))
    for column in ("quantity", "candidate", "baseline", "ratio", "allowed", "max ratio", "verdict"):
        assert column in header
    for rung in ("bfloat16", "float16", "float32", "float64*"):
        for q in ("output", "grad a", "grad b"):
            assert any(line.startswith(rung + " ") and f"  {q}  " in line for line in text.splitlines()), (rung, q)
    assert "FAIL bfloat16 grad a:" in text and "    a[" in text  # a located worst element
    assert text.rstrip().endswith("8 passed, 4 failed")
    assert "re-run: ga.compare(" in text and repr(res) == text


def test_user_text_is_escaped_in_the_report():
    x = randn(torch.Generator().manual_seed(0), 4, 8)
    res = compare(boom, softmax_ref, (x,), name="evil\x1b[2J", names=("x\x07",))
    text = str(res)
    assert "\x1b" not in text and "\x07" not in text and "\\x1b[2J" in text


def test_ladder_records_go_into_every_renderer():
    from gradaudit.render.html import render_html
    from gradaudit.render.junit import junit_xml
    from gradaudit.render.markdown import markdown
    from gradaudit.render.text import detail_lines

    records = [r for rs in every_kind_of_record().values() for r in rs]
    assert render_html(records, plots=False).count('class="record"') == len(records)
    assert "ladder" in junit_xml(records) and "| fail |" in markdown(records)
    failed = next(r for r in records if r.verdict == "fail")
    assert any("atol" in line for line in detail_lines(failed))


def test_write_results_round_trips_ladder_records(tmp_path):
    res = compare(Softmax.apply, softmax_ref, (randn(torch.Generator().manual_seed(0), 4, 8),))
    path = ga.write_results(tmp_path / "ladder.jsonl", list(res.records))
    _, back = ga.read_results(path)
    assert [r.to_dict() for r in back] == [r.to_dict() for r in res.records]


# -- another device -------------------------------------------------------------------------------------

@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="no CUDA device on this machine: the ladder's device path (candidate and baseline on the "
                    "GPU, the float64 truth on the CPU) is tested where there is one")
def test_on_cuda_the_candidate_and_baseline_run_on_the_device_and_the_truth_on_the_cpu():
    seen = set()

    def candidate(x):
        seen.add((x.device.type, x.dtype))
        return Softmax.apply(x)

    x = randn(torch.Generator().manual_seed(0), 32, 256, scale=12.0)
    res = compare(candidate, softmax_ref, (x,), device="cuda")
    assert res.ok, res
    assert {d for d, _ in seen} == {"cuda"} and len(seen) == 4  # three rungs and the top, all on the GPU
    assert all(r.device.startswith("cuda") for r in res.records)
    res = compare(SoftmaxNoSum.apply, softmax_ref, (x,), device="cuda")
    assert all(row.verdict == "fail" for row in res.rows if row.quantity == "grad x")


def test_the_html_report_plots_the_ratios_across_the_ladder():
    pytest.importorskip("matplotlib")
    from gradaudit.render.html import render_html

    class MissingTerm(torch.autograd.Function):  # softmax backward without the (g·y).sum() term
        @staticmethod
        def forward(ctx, x):
            y = torch.softmax(x.float(), -1).to(x.dtype)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(0)).requires_grad_(True)
    res = compare(MissingTerm.apply, lambda x: torch.softmax(x, -1), (x,), name="softmax")
    html = render_html(res.records, {})
    section = html[html.index('<section class="ladders"'):html.index("</section>", html.index('class="ladders"'))]
    assert "precision ladder" in section and section.count("<svg") == 1
    assert "bfloat16" in section and "float32" in section  # the rungs on the x axis


# -- from a hostile-input audit (twenty-second session): each failed before it --------------------------------------

def test_compare_gives_the_functions_private_copies_and_a_write_is_their_error():
    # inputs already in a rung's dtype reached the functions as the caller's own tensors: a reference starting with
    # ReLU(inplace=True) clamped the caller's x, a candidate clamping its mask changed the caller's mask
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 8, dtype=torch.float64, generator=g, requires_grad=True)
    before = x.detach().clone()
    reference = torch.nn.Sequential(torch.nn.ReLU(inplace=True), torch.nn.Softmax(-1))
    res = ga.compare(lambda x: torch.softmax(x.clamp(min=0), -1), reference, (x,))
    assert torch.equal(x.detach(), before)
    assert {r.verdict for r in res.records} == {"error"}  # (torch refuses an in-place op on a leaf that requires grad)
    mask = torch.rand(4, 8, generator=g)
    kept = mask.clone()

    def candidate(x, mask):
        mask.clamp_(min=0.5)
        return x * mask

    res = ga.compare(candidate, lambda x, mask: x * mask, (x, mask))
    assert torch.equal(mask, kept)
    errors = {r.error.type for r in res.records if r.error is not None}
    assert errors == {"InputMutated"} and {r.verdict for r in res.records} == {"error"}


def test_compare_leaves_a_modules_buffers_and_the_random_state_as_they_were():
    # a BatchNorm1d in train() mode: its running statistics moved at every evaluation (num_batches_tracked 0 -> 4)
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm1d(3)
    x = torch.randn(6, 3, requires_grad=True)
    stats = [b.clone() for b in bn.buffers()]
    state = torch.random.get_rng_state()
    ga.compare(bn, lambda x: torch.nn.functional.batch_norm(x, None, None, training=True), (x,),
               dtypes=("float32",))
    assert all(torch.equal(a, b) for a, b in zip(stats, bn.buffers()))
    assert torch.equal(torch.random.get_rng_state(), state)


def test_an_identical_candidate_that_overflows_where_the_reference_does_is_not_a_failure():
    # exp(12) = 162755 exceeds float16's largest value in the candidate and the reference alike: the baseline sets
    # no bound there, and the candidate (the same function) FAILED on it
    res = ga.compare(torch.exp, torch.exp, (torch.tensor([0.5, 1.0, 12.0], requires_grad=True),))
    assert "fail" not in {r.verdict for r in res.records}
    assert {r.verdict for r in res.records if "@ float16:" in r.check} == {"inconclusive"}


def test_a_random_function_compared_with_itself_passes_as_ga_check_passes_it():
    # each call drew a new dropout mask: the top rung failed, "at float32 level", where ga.check (whose evaluations
    # start from one seeded state) passes the same function; the caller's generator is left as it was
    torch.manual_seed(0)
    x = torch.randn(8, 64, dtype=torch.float64, requires_grad=True)
    state = torch.random.get_rng_state()

    def drop(t):
        return torch.nn.functional.dropout(t, 0.5)

    assert ga.compare(drop, drop, (x,)).verdict == "pass"
    assert ga.check(drop, (x,)).verdict == "pass"
    assert torch.equal(torch.random.get_rng_state(), state)
