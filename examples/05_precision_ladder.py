"""The precision ladder: judge a fused bfloat16/float16 kernel against a reference implementation.

Finite differences cannot judge a 16-bit kernel (the step drowns in rounding). Instead, run a plain
reference in float64 as the truth and the same reference in the low dtype as the baseline; the
kernel's error against the truth may be at most 2 x the baseline's (FlashAttention's rule, on the
mean error), for the output and every input gradient, at bfloat16, float16, float32 and, where the
kernel accepts it, float64 (against the float64 reference directly, where a formula bug cannot hide
behind rounding).

Here: a fused layer norm written as an autograd.Function (statistics and backward in float32, one
rounding at the end), then the same kernel with a planted backward bug (dx without its two mean terms).

Run:  python examples/05_precision_ladder.py
"""

import torch
import torch.nn.functional as F

from gradaudit import compare


def inside(t):
    """The precision to compute in: float32 for the 16-bit dtypes, the tensor's own otherwise. (Calling
    .float() on everything would compute in float32 even when given float64: the top rung catches that.)"""
    return t.float() if t.dtype in (torch.bfloat16, torch.float16) else t


class FusedLayerNorm(torch.autograd.Function):
    """y = (x - mean) / sqrt(var + eps) * w + b over the last dimension, in float32 inside for 16-bit inputs."""

    @staticmethod
    def forward(ctx, x, w, b):
        xf, wf, bf = inside(x), inside(w), inside(b)
        mu = xf.mean(-1, keepdim=True)
        rstd = torch.rsqrt(((xf - mu) ** 2).mean(-1, keepdim=True) + 1e-5)
        xhat = (xf - mu) * rstd
        ctx.save_for_backward(xhat, rstd, wf)
        return (xhat * wf + bf).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        # dx = rstd (g w - mean(g w) - xhat mean(g w xhat)); dw = sum over rows of g xhat; db = sum of g
        xhat, rstd, wf = ctx.saved_tensors
        gf = inside(g)
        gw = gf * wf
        dx = rstd * (gw - gw.mean(-1, keepdim=True) - xhat * (gw * xhat).mean(-1, keepdim=True))
        return dx.to(g.dtype), (gf * xhat).sum(0).to(g.dtype), gf.sum(0).to(g.dtype)


class BuggyLayerNorm(FusedLayerNorm):
    """The same kernel with a planted formula bug: dx = rstd g w (the two mean terms forgotten)."""

    @staticmethod
    def backward(ctx, g):
        xhat, rstd, wf = ctx.saved_tensors
        gf = inside(g)
        return (rstd * gf * wf).to(g.dtype), (gf * xhat).sum(0).to(g.dtype), gf.sum(0).to(g.dtype)


def fused(x, w, b):
    return FusedLayerNorm.apply(x, w, b)


def buggy(x, w, b):
    return BuggyLayerNorm.apply(x, w, b)


def reference(x, w, b):
    return F.layer_norm(x, x.shape[-1:], w, b, 1e-5)


gen = torch.Generator().manual_seed(0)
x = torch.randn(64, 512, generator=gen, dtype=torch.float64).requires_grad_()
w = (1 + 0.1 * torch.randn(512, generator=gen, dtype=torch.float64)).requires_grad_()
b = (0.1 * torch.randn(512, generator=gen, dtype=torch.float64)).requires_grad_()

good = compare(fused, reference, (x, w, b))
print(good)
assert good.ok, "the fused layer norm must pass at every rung"

print()
bad = compare(buggy, reference, (x, w, b))
print(bad)
# the formula bug fails at every rung, loudest at the top; the output and dw, db still pass
assert not bad.ok and all(row.verdict == "fail" for row in bad.rows if row.quantity == "grad x")
