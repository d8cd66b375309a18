"""ga.check against torch.autograd.gradcheck, side by side in one process.

Cases (as in the anchors): (a) sin(x)*x, R^N -> R^N; (b) A @ x with A fixed (N, N);
(c) the MSE loss of a tanh MLP (8 inputs, N/10 hidden units, 32 samples) as a function of
its N parameters; and, only when asked for (--cases d), (d) an LSTM's last hidden states as a
function of its parameters (N = 4h² + 24h, at most the size asked for). float64, one thread,
warm: one call of each first. This machine is shared and its speed drifts, so each tool and its
anchor are sampled across the same stretch of time: full mode and gradcheck's slow mode in five
alternating rounds (a block of warm full-mode calls, then one slow gradcheck), the directional
check and gradcheck's fast mode (both about a millisecond) call by call, in pairs, up to 101,
until 2 s have passed. Medians throughout.
gradcheck slow mode is skipped when one call is estimated above 60 s (A @ x at N = 3000;
about 73 s measured in the anchors).

The "N forwards" column times only N batched evaluations at one-hot perturbations, the fewest
any finite-difference Jacobian of a dense function needs; gradcheck slow divided by it is the
most any such full check could gain (structure, like a diagonal, can need fewer).

Run:  python bench/bench_check.py              (a few minutes; prints a Markdown table)
      python bench/bench_check.py --mem        (adds peak RSS at N = 3000, one fresh process each)
      python bench/bench_check.py --sizes 10,100
      python bench/bench_check.py --threads 2 --cases b --sizes 1000,3000
      python bench/bench_check.py --cases d --sizes 100,1000     (the LSTM)
      python bench/bench_check.py --device cuda --sizes 10,100,1000 --cases ab   (on a GPU machine)
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
import gradaudit.evaluate


def case(name: str, n: int, device: str = "cpu") -> tuple[Callable[..., Any], Any]:
    """The function and its point, drawn on the CPU (the same numbers on every device), then moved to *device*."""
    g = torch.Generator().manual_seed(0)
    if name == "a":
        return (lambda x: torch.sin(x) * x), torch.randn(n, generator=g, dtype=torch.float64).to(device)
    if name == "b":
        a = (torch.randn(n, n, generator=g, dtype=torch.float64) / n**0.5).to(device)
        return (lambda x: a @ x), torch.randn(n, generator=g, dtype=torch.float64).to(device)
    if name == "d":
        return lstm_case(n, g, device)
    hidden = max(1, n // 10)
    data = torch.randn(32, 8, generator=g, dtype=torch.float64).to(device)
    target = torch.randn(32, generator=g, dtype=torch.float64).to(device)

    def mlp(p: Any) -> Any:
        w1 = p[: 8 * hidden].reshape(hidden, 8)
        b1 = p[8 * hidden: 9 * hidden]
        w2 = p[9 * hidden: 10 * hidden]
        return ((torch.tanh(data @ w1.T + b1) @ w2 - target) ** 2).mean()

    return mlp, (0.3 * torch.randn(10 * hidden, generator=g, dtype=torch.float64)).to(device)


def lstm_case(n: int, g: torch.Generator, device: str = "cpu") -> tuple[Callable[..., Any], Any]:
    """(d) an LSTM (4 inputs, h hidden units, 3 sequences of 5 steps) as a function of its 4h² + 24h
    parameters, h the largest with at most n of them (at least 1); the output is the last hidden
    state of each sequence (3h values): a dense Jacobian, and a module torch.func.vmap cannot batch."""
    h = 1
    while 4 * (h + 1) ** 2 + 24 * (h + 1) <= n:
        h += 1
    lstm = torch.nn.LSTM(4, h, batch_first=True).double().to(device)
    names = [name for name, _ in lstm.named_parameters()]
    shapes = [p.shape for _, p in lstm.named_parameters()]
    sizes = [p.numel() for _, p in lstm.named_parameters()]
    data = torch.randn(3, 5, 4, generator=g, dtype=torch.float64).to(device)

    def run(p: Any) -> Any:
        params = {k: t.reshape(shape) for k, t, shape in zip(names, p.split(sizes), shapes)}
        out, _ = torch.func.functional_call(lstm, params, (data,))
        return out[:, -1]

    return run, (0.3 * torch.randn(sum(sizes), generator=g, dtype=torch.float64)).to(device)


NAMES = {"a": "a sin(x)*x", "b": "b A@x", "c": "c mlp-loss", "d": "d lstm"}


def median_time(call: Callable[[], Any], budget: float = 1.0) -> tuple[float, int]:
    call()  # warm
    times: list[float] = []
    while len(times) < 5 or (sum(times) < budget and len(times) < 51):
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    return statistics.median(times), len(times)


def paired_times(first: Callable[[], Any], second: Callable[[], Any], budget: float = 1.0,
                 at_least: int = 5) -> tuple[float, float]:
    """Medians of two calls timed alternately (one warm call each first), so that both see the same
    load on a shared machine: at least *at_least* pairs, more (up to 101) until *budget* s is spent."""
    first()
    second()
    a: list[float] = []
    b: list[float] = []
    while len(a) < at_least or (sum(a) + sum(b) < budget and len(a) < 101):
        for call, times in ((first, a), (second, b)):
            t = time.perf_counter()
            call()
            times.append(time.perf_counter() - t)
    return statistics.median(a), statistics.median(b)


def interleaved_blocks(ours: Callable[[], Any], anchor: Callable[[], Any], rounds: int = 5,
                       budget: float = 0.3) -> tuple[float, float]:
    """Medians of *ours* and *anchor* timed in alternating blocks: each round times *ours* for at least
    3 calls (more until *budget* s), then *anchor* once. Both are sampled across the same stretch of
    time, and *ours* is timed warm (runs right after a slow anchor would catch it with cold caches)."""
    ours()
    anchor()
    mine: list[float] = []
    theirs: list[float] = []
    for _ in range(rounds):
        block: list[float] = []
        while len(block) < 3 or (sum(block) < budget and len(block) < 25):
            t = time.perf_counter()
            ours()
            block.append(time.perf_counter() - t)
        mine += block[1:]  # the first call of a block follows the anchor
        t = time.perf_counter()
        anchor()
        theirs.append(time.perf_counter() - t)
    return statistics.median(mine), statistics.median(theirs)


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


def floor_time(fn: Any, x0: Any) -> float:
    """N evaluations at one-hot perturbations, vmapped in chunks (the faster of 256 and 1024 per call),
    or a loop of plain calls for a function vmap cannot batch (the LSTM): the fewest forwards any
    finite-difference Jacobian of a dense function needs (one-sided, f(x) known)."""
    n = x0.numel()

    def run(chunk: int, batched: bool = True) -> None:
        with torch.no_grad():
            for a in range(0, n, chunk):
                b = min(n, a + chunk)
                batch = x0.reshape(1, -1).repeat(b - a, 1)
                batch[torch.arange(b - a), torch.arange(a, b)] += 1e-3
                if batched:
                    torch.func.vmap(fn)(batch)
                else:
                    for row in batch:
                        fn(row)

    try:
        return min(median_time(lambda c=c: run(c), budget=0.3)[0] for c in (256, 1024))
    except RuntimeError:  # no batching rule
        return median_time(lambda: run(n, batched=False), budget=0.3)[0]


def run_table(sizes: list[int], cases: str, device: str = "cpu") -> list[str]:
    rows = ["| case | N | gradcheck slow s | ga full s | full speed-up | N forwards s (floor) | floor speed-up "
            "| gradcheck fast s | ga directional s | directional vs fast "
            "| ga full: structure / evidence / evaluation |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cases:
        for n in sizes:
            fn, x0 = case(c, n, device)
            m = methods(fn, x0)
            t_fast, t_dir = paired_times(m["gc_fast"], m["ga_directional"], budget=2.0)
            t_floor = floor_time(fn, x0)
            res = ga.check(fn, (x0.clone().requires_grad_(),), mode="full")
            evidence = "one-sided (affine)" if res.info.get("numeric", "").startswith("affine") else "central"
            how = (res.info.get("structure", "dense") + "; " + evidence + "; "
                   + res.info.get("evaluation", "loop (cheap function)")
                   + (f", largest chunk {res.info['largest_chunk']}" if "largest_chunk" in res.info else ""))
            if c == "b" and n >= 3000:
                t_full, _ = median_time(m["ga_full"])
                slow, speed, floor_speed = "skipped (est. > 60 s)", "-", "-"
            else:
                t_full, t_slow = interleaved_blocks(m["ga_full"], m["gc_slow"])
                slow, speed, floor_speed = f"{t_slow:.3g}", f"{t_slow / t_full:.0f}x", f"{t_slow / t_floor:.0f}x"
            rows.append(f"| {NAMES[c]} | {x0.numel()} | {slow} | {t_full:.3g} | {speed} | {t_floor:.3g} "
                        f"| {floor_speed} | {t_fast:.3g} | {t_dir:.3g} | {t_fast / t_dir:.2f}x | {how} |")
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
    parser.add_argument("--device", default="cpu", help="where the function and its inputs live, e.g. cuda "
                        "(ga.check evaluates there and works out its evidence on the CPU; gradcheck does both there)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads={args.threads}, float64, device {args.device}; "
          "median seconds of warm calls\n")
    print("\n".join(run_table([int(s) for s in args.sizes.split(",")], args.cases, args.device)))
    if args.mem:
        print("\nPeak RSS above the base (MB), one call at N = 3000 in a fresh process "
              f"(chunks bounded by {gradaudit.evaluate.CHUNK_BYTES // 2**20} MB per batched call):\n")
        print("| case | gradcheck slow | gradcheck fast | ga full | ga directional |\n|---|---|---|---|---|")
        for c in args.cases:
            cells = [("skipped" if (c == "b" and meth == "gc_slow") else peak(c, meth, 3000))
                     for meth in ("gc_slow", "gc_fast", "ga_full", "ga_directional")]
            print(f"| {NAMES[c]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
