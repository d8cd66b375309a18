"""ga.check against torch.autograd.gradcheck, side by side in one process.

Cases (as in the anchors): (a) sin(x)*x, R^N -> R^N; (b) A @ x with A fixed (N, N);
(c) the MSE loss of a tanh MLP (8 inputs, N/10 hidden units, 32 samples) as a function of
its N parameters. float64, one thread, warm: one call first, then the median of at least 5
calls (more, up to 51, until 1 s has passed). gradcheck slow mode is skipped when one call
is estimated above 60 s (A @ x at N = 3000; about 73 s measured in the anchors).

Run:  python bench/bench_check.py              (a few minutes; prints a Markdown table)
      python bench/bench_check.py --mem        (adds peak RSS at N = 3000, one fresh process each)
      python bench/bench_check.py --sizes 10,100
      python bench/bench_check.py --threads 2 --cases b --sizes 1000,3000
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

import gradaudit as ga
import gradaudit.jacobian


def case(name: str, n: int) -> tuple[Callable[..., Any], Any]:
    g = torch.Generator().manual_seed(0)
    if name == "a":
        return (lambda x: torch.sin(x) * x), torch.randn(n, generator=g, dtype=torch.float64)
    if name == "b":
        a = torch.randn(n, n, generator=g, dtype=torch.float64) / n**0.5
        return (lambda x: a @ x), torch.randn(n, generator=g, dtype=torch.float64)
    hidden = max(1, n // 10)
    data = torch.randn(32, 8, generator=g, dtype=torch.float64)
    target = torch.randn(32, generator=g, dtype=torch.float64)

    def mlp(p: Any) -> Any:
        w1 = p[: 8 * hidden].reshape(hidden, 8)
        b1 = p[8 * hidden: 9 * hidden]
        w2 = p[9 * hidden: 10 * hidden]
        return ((torch.tanh(data @ w1.T + b1) @ w2 - target) ** 2).mean()

    return mlp, 0.3 * torch.randn(10 * hidden, generator=g, dtype=torch.float64)


NAMES = {"a": "a sin(x)*x", "b": "b A@x", "c": "c mlp-loss"}


def median_time(call: Callable[[], Any], budget: float = 1.0) -> tuple[float, int]:
    call()  # warm
    times: list[float] = []
    while len(times) < 5 or (sum(times) < budget and len(times) < 51):
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    return statistics.median(times), len(times)


def methods(fn: Any, x0: Any) -> dict[str, Callable[[], Any]]:
    def fresh() -> Any:
        return x0.clone().requires_grad_()

    return {
        "gc_slow": lambda: torch.autograd.gradcheck(fn, (fresh(),)),
        "gc_fast": lambda: torch.autograd.gradcheck(fn, (fresh(),), fast_mode=True),
        "ga_full": lambda: _ok(ga.check(fn, (fresh(),), mode="full")),
        "ga_directional": lambda: _ok(ga.check(fn, (fresh(),), mode="directional")),
    }


def _ok(res: Any) -> Any:
    assert res.ok, res.report()
    return res


def run_table(sizes: list[int], cases: str) -> list[str]:
    rows = ["| case | N | gradcheck slow s | ga full s | full speed-up | gradcheck fast s | ga directional s "
            "| directional vs fast | ga full structure / evaluation |",
            "|---|---|---|---|---|---|---|---|---|"]
    for c in cases:
        for n in sizes:
            fn, x0 = case(c, n)
            m = methods(fn, x0)
            t_fast, _ = median_time(m["gc_fast"])
            t_full, _ = median_time(m["ga_full"])
            t_dir, _ = median_time(m["ga_directional"])
            res = ga.check(fn, (x0.clone().requires_grad_(),), mode="full")
            how = (res.info.get("structure", "dense") + "; " + res.info.get("evaluation", "loop (cheap function)")
                   + (f", largest chunk {res.info['largest_chunk']}" if "largest_chunk" in res.info else ""))
            if c == "b" and n >= 3000:
                slow, speed = "skipped (est. > 60 s)", "-"
            else:
                t_slow, _ = median_time(m["gc_slow"], budget=0.0 if n >= 1000 else 1.0)
                slow, speed = f"{t_slow:.3g}", f"{t_slow / t_full:.0f}x"
            rows.append(f"| {NAMES[c]} | {n} | {slow} | {t_full:.3g} | {speed} | {t_fast:.3g} | {t_dir:.3g} "
                        f"| {t_fast / t_dir:.2f}x | {how} |")
            print(rows[-1], file=sys.stderr, flush=True)
    return rows


def peak(c: str, method: str, n: int) -> str:
    """Peak RSS above the base for one call, in a fresh process (VmHWM, reset before the call)."""
    code = (f"import re, sys, torch; sys.path.insert(0, 'bench'); import bench_check as b; "
            f"torch.set_num_threads(1); fn, x0 = b.case({c!r}, {n}); m = b.methods(fn, x0); "
            f"b.ga.check(lambda x: x * x, (torch.ones(2, dtype=torch.float64, requires_grad=True),)); "
            f"status = lambda key: int(re.search(key + r':\\s+(\\d+)', open('/proc/self/status').read()).group(1)); "
            f"open('/proc/self/clear_refs', 'w').write('5'); base = status('VmRSS'); "
            f"m[{method!r}](); print(base, status('VmHWM'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    if out.returncode:
        return "error: " + out.stderr.strip().splitlines()[-1][:80]
    base, top = (int(v) for v in out.stdout.split())
    return f"{(top - base) / 1024:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000,3000")
    parser.add_argument("--cases", default="abc")
    parser.add_argument("--mem", action="store_true")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for both tools (default 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads={args.threads}, float64; median seconds of warm calls\n")
    print("\n".join(run_table([int(s) for s in args.sizes.split(",")], args.cases)))
    if args.mem:
        print("\nPeak RSS above the base (MB), one call at N = 3000 in a fresh process "
              f"(chunks bounded by {ga.jacobian.CHUNK_BYTES // 2**20} MB per batched call):\n")
        print("| case | gradcheck slow | gradcheck fast | ga full | ga directional |\n|---|---|---|---|---|")
        for c in args.cases:
            cells = [("skipped" if (c == "b" and meth == "gc_slow") else peak(c, meth, 3000))
                     for meth in ("gc_slow", "gc_fast", "ga_full", "ga_directional")]
            print(f"| {NAMES[c]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
