"""Where a check's time goes: inside the checked function, or around its calls; gradaudit against gradcheck.

    python bench/calls.py                                  # 60 OpInfo cases drawn at random, directional mode
    python bench/calls.py --mode auto --cases 100 --seed 3
    python bench/calls.py --ops sin,mul --cases 0          # every case of those ops

Each case's function is wrapped to count its calls and time them; each tool (``ga.check`` in --mode, and the
anchor: gradcheck's fast mode for directional, its slow mode otherwise) checks it --repeat times, the calls of
the two interleaved (after one untimed check each), and the case's numbers are the medians of those. The totals
say how much of each tool's time is the function's own (evaluations: how many, and what they cost) and how much
is the tool's work around them (its Python, the backward passes, the bookkeeping): a tool that makes more calls
of an expensive function loses there, one with more work around cheap calls loses here. Wall time, on a possibly
shared machine: read the totals, not single cases.

Cases: the first two OpInfo samples of every op with autograd, as ``bench/opinfo.py`` builds them, where the
anchor passes; --cases of them drawn at random with --seed (0: all).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", default="directional", choices=["auto", "full", "directional"])
    parser.add_argument("--cases", type=int, default=60, help="cases drawn at random (default 60; 0: every one)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the draw (default 1)")
    parser.add_argument("--repeat", type=int, default=7, help="checks per tool and case (default 7)")
    parser.add_argument("--ops", default=None, help="comma-separated OpInfo names (default: every op)")
    parser.add_argument("--max-jac", type=float, default=1e6, help="largest N*M of a case (default 1e6)")
    args = parser.parse_args(argv)
    if args.cases < 0 or args.repeat < 1:
        print(f"error: --cases must be 0 or more and --repeat 1 or more; got --cases {args.cases} and --repeat "
              f"{args.repeat}. Pass e.g. --cases 60 --repeat 7.", file=sys.stderr)
        return 2

    import torch

    threads = torch.get_num_threads()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # OpInfo's samples warn (deprecations, TF32 notes): not ours to show
        torch.set_num_threads(1)
        sys.path.insert(0, str(ROOT))
        try:
            return _run(args)
        finally:  # leave the calling process as it was (the tests call main())
            torch.set_num_threads(threads)
            sys.path.remove(str(ROOT))


def _run(args: argparse.Namespace) -> int:
    import opinfo
    from torch.autograd import gradcheck
    from torch.testing._internal.common_methods_invocations import op_db

    import gradaudit as ga

    fast = args.mode == "directional"
    builder = opinfo.CaseBuilder(op_db, 2)
    found = opinfo.built_cases(builder, args.ops, args.max_jac)
    if args.cases and args.cases < len(found):
        found = random.Random(args.seed).sample(found, args.cases)
    calls = [0]
    inside = [0.0]
    rows: list[tuple[str, dict[str, tuple[float, float, int]]]] = []
    left: list[str] = []  # cases a tool raised on
    for op_index, index, label in found:
        fn, checked, _ = builder.case(op_index, index)

        def counted(*a: Any, _fn: Any = fn, **kw: Any) -> Any:
            calls[0] += 1
            start = time.perf_counter()
            try:
                return _fn(*a, **kw)
            finally:
                inside[0] += time.perf_counter() - start

        try:
            if not gradcheck(fn, opinfo._fresh(checked), fast_mode=fast):
                continue
        except Exception:  # noqa: BLE001 - the anchor does not pass: not a case to time
            continue
        tools = {"gradaudit": lambda xs: ga.check(counted, xs, mode=args.mode),
                 "anchor": lambda xs: gradcheck(counted, xs, fast_mode=fast)}
        times: dict[str, list[tuple[float, float, int]]] = {name: [] for name in tools}
        try:
            for name in tools:  # once untimed: a tool's first check in a process pays for its own first use
                tools[name](opinfo._fresh(checked))
        except Exception as exc:  # noqa: BLE001 - a refusal (a sparse input) is no time to compare
            left.append(f"{label} ({name}: {type(exc).__name__})")
            continue
        for r in range(args.repeat):
            for name in (("gradaudit", "anchor") if r % 2 else ("anchor", "gradaudit")):
                xs = opinfo._fresh(checked)
                calls[0], inside[0] = 0, 0.0
                start = time.perf_counter()
                tools[name](xs)
                times[name].append((time.perf_counter() - start, inside[0], calls[0]))
        rows.append((label, {name: (statistics.median(t for t, _, _ in got), statistics.median(f for _, f, _ in got),
                                    got[-1][2]) for name, got in times.items()}))
    anchor = "gradcheck fast" if fast else "gradcheck slow"
    if not rows:
        print(f"error: no case to time: --ops {args.ops!r} and --max-jac {args.max_jac:g} leave no OpInfo sample "
              f"whose Jacobian is not empty and where {anchor} passes. Name ops with autograd (as in "
              "`python bench/opinfo.py --ops`), or leave --ops out.", file=sys.stderr)
        return 2
    print(f"{len(rows)} cases (the anchor, {anchor}, passes; N*M <= {args.max_jac:g}); gradaudit mode {args.mode}; "
          f"medians of {args.repeat} checks each, wall time")
    if left:
        print(f"left out, a tool raised: {', '.join(left)}")
    print()
    print(f"| case | gradaudit µs | inside fn µs | calls | {anchor} µs | inside fn µs | calls |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, got in rows:
        (t, f, c), (ta, fa, ca) = got["gradaudit"], got["anchor"]
        print(f"| `{label}` | {t * 1e6:.0f} | {f * 1e6:.0f} | {c} | {ta * 1e6:.0f} | {fa * 1e6:.0f} | {ca} |")
    total = {name: (sum(got[name][0] for _, got in rows), sum(got[name][1] for _, got in rows))
             for name in ("gradaudit", "anchor")}
    print()
    print(f"| total over {len(rows)} cases, ms | gradaudit | {anchor} |")
    print("|---|---:|---:|")
    for what, pick in (("in all", lambda t, f: t), ("inside the function", lambda t, f: f),
                       ("around its calls", lambda t, f: t - f)):
        print(f"| {what} | {pick(*total['gradaudit']) * 1e3:.1f} | {pick(*total['anchor']) * 1e3:.1f} |")
    if total["gradaudit"][0] > 0:
        print(f"\n{anchor} / gradaudit, in all: {total['anchor'][0] / total['gradaudit'][0]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
