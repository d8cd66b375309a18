"""The precision ladder's cost: ``compare`` against the candidate's own forward+backward, per rung.

Cases: (softmax) a fused softmax (float32 inside, hand-written backward) on 64 rows of 4096 against
``torch.softmax``; (matmul) a matmul with float32 accumulation on two 1024 x 1024 matrices against
``torch.matmul``. For each rung (bfloat16, float16, float32 and the float64 top rung) the candidate's
forward+backward alone is timed (autograd.grad with the same grad_output), and ``compare``'s time for
that rung is read from ``result.rung_seconds`` (truth in float64 + baseline + candidate + judging; the
top rung also runs the float32 reference for its scale when float32 is not a rung). Warm: one call of
each first; medians of the repeats. At each rung compare runs three forward+backward passes (truth,
baseline, candidate), so a ratio near 3-5 is the floor; more is the judging's overhead, or a float64
truth that is slower than the low-precision candidate.

Run:  python bench/bench_ladder.py                 (about a minute on 2 CPU cores; prints a Markdown table)
      python bench/bench_ladder.py --cases softmax --repeats 5
      python bench/bench_ladder.py --threads 1
      python bench/bench_ladder.py --device cuda     (candidate and baseline on the GPU, the truth on the CPU)
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from gradaudit.ladder import compare

RUNGS = ("bfloat16", "float16", "float32", "float64")


def _inside(t: torch.Tensor) -> torch.Tensor:
    return t.float() if t.dtype in (torch.bfloat16, torch.float16) else t


class FusedSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        xf = _inside(x)
        e = torch.exp(xf - xf.amax(-1, keepdim=True))
        y = e / e.sum(-1, keepdim=True)
        ctx.save_for_backward(y)
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        gf = _inside(g)
        return (y * (gf - (gf * y).sum(-1, keepdim=True))).to(g.dtype)


class Matmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(a, b)
        return (_inside(a) @ _inside(b)).to(a.dtype)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = ctx.saved_tensors
        gf = _inside(g)
        return (gf @ _inside(b).mT).to(a.dtype), (_inside(a).mT @ gf).to(b.dtype)


def case(name: str) -> tuple[Callable[..., Any], Callable[..., Any], tuple[torch.Tensor, ...], str]:
    gen = torch.Generator().manual_seed(0)
    if name == "softmax":
        x = (12 * torch.randn(64, 4096, generator=gen, dtype=torch.float64)).requires_grad_()
        return FusedSoftmax.apply, (lambda x: torch.softmax(x, -1)), (x,), "softmax 64 x 4096"
    a = torch.randn(1024, 1024, generator=gen, dtype=torch.float64).requires_grad_()
    b = torch.randn(1024, 1024, generator=gen, dtype=torch.float64).requires_grad_()
    return Matmul.apply, torch.matmul, (a, b), "matmul 1024 x 1024"


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def own_time(fn: Callable[..., Any], xs: tuple[torch.Tensor, ...], dtype: torch.dtype, device: str,
             repeats: int) -> float:
    """Median seconds of the candidate's forward + backward (autograd.grad) at *dtype*."""
    args = [x.detach().to(device=device, dtype=dtype).requires_grad_() for x in xs]
    with torch.no_grad():
        shape = fn(*args).shape
    g = torch.randn(shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(device=device,
                                                                                               dtype=dtype)
    times = []
    for i in range(repeats + 1):  # the first is the warm-up
        sync(device)
        t0 = time.perf_counter()
        out = fn(*args)
        torch.autograd.grad(out, args, g)
        sync(device)
        if i:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench(name: str, repeats: int, device: str) -> list[str]:
    cand, ref, xs, label = case(name)
    compare(cand, ref, xs, device=device)  # warm
    per_rung: dict[str, list[float]] = {r: [] for r in RUNGS}
    totals = []
    for _ in range(repeats):
        res = compare(cand, ref, xs, device=device)
        assert res.ok, res
        totals.append(res.elapsed_s)
        for r in RUNGS:
            per_rung[r].append(res.rung_seconds[r])
    rows = []
    own_total = 0.0
    for r in RUNGS:
        own = own_time(cand, xs, getattr(torch, r), device, repeats)
        own_total += own
        ladder = statistics.median(per_rung[r])
        rows.append(f"| {label} | {r}{' (top)' if r == 'float64' else ''} | {own * 1e3:.1f} | {ladder * 1e3:.1f} | "
                    f"{ladder / own:.1f} |")
    total = statistics.median(totals)
    rows.append(f"| {label} | all rungs | {own_total * 1e3:.1f} | {total * 1e3:.1f} | {total / own_total:.1f} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="softmax,matmul")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {args.device}, "
          f"median of {args.repeats} warm repeats\n")
    print("| case | rung | candidate fwd+bwd (ms) | compare, this rung (ms) | ratio |")
    print("|---|---|---|---|---|")
    for name in args.cases.split(","):
        for row in bench(name.strip(), args.repeats, args.device):
            print(row, flush=True)


if __name__ == "__main__":
    main()
