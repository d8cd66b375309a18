"""Where a check's time goes: inside the checked function, or around its calls; gradaudit against gradcheck.

    python bench/calls.py                                  # 60 OpInfo cases drawn at random, directional mode
    python bench/calls.py --mode auto --cases 100 --seed 3
    python bench/calls.py --ops sin,mul --cases 0          # every case of those ops
    python bench/calls.py --mode auto --max-jac 100 --cases 0 --why   # and why full mode confirmed

Each case's function is wrapped to count its calls and time them; each tool (``ga.check`` in --mode, and the
anchor: gradcheck's fast mode for directional, its slow mode otherwise) checks it --repeat times, the calls of
the two interleaved (after one untimed check each), and the case's numbers are the medians of those. The totals
say how much of each tool's time is the function's own (evaluations: how many, and what they cost) and how much
is the tool's work around them (its Python, the backward passes, the bookkeeping): a tool that makes more calls
of an expensive function loses there, one with more work around cheap calls loses here. Wall time, on a possibly
shared machine: read the totals, not single cases.

With ``--why`` (full and auto mode) each case is checked once more, untimed, with full mode's rules watched, and the
tables say whether the directional confirmation ran and which rules asked for it: "unresolved" (central differences
could not resolve 1e-8 of an entry), "opened" (the evidence seen leaves an entry open: an accepted difference,
entries that cancel), "silent" (autograd gives an input no gradient at all: vᵀJ exactly 0 or None; named even
where every output is exactly 0, where it asks nothing), "disagree" (autograd's rows, weighted, differ from the
first backward), "band" (the Jacobian was taken as a band); "other" where none of these was seen (an entry passed
beyond the tolerance itself); "directional mode" where auto mode chose it. A summary groups the cases by them: how
many, their time, the median ratio and how many are over 1.5 times the anchor's time. The rules are watched by
wrapping functions of ``gradaudit.full`` for that one check.

Cases: the first two OpInfo samples of every op with autograd, as ``bench/opinfo.py`` builds them, where the
anchor passes; --cases of them drawn at random with --seed (0: all).
"""

from __future__ import annotations

import argparse
import math
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
    parser.add_argument("--why", action="store_true",
                        help="auto and full mode: which of full mode's rules asked for the directional confirmation")
    args = parser.parse_args(argv)
    if args.why and args.mode == "directional":
        print("error: --why says why full mode ran its directional confirmation, and --mode directional runs no full "
              "mode. Pass --mode auto or --mode full with --why.", file=sys.stderr)
        return 2
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
    asked: dict[str, str] = {}  # with --why: per case, whether the confirmation ran and what asked for it
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
        if args.why:
            asked[label] = _why(lambda _fn=fn, _xs=checked: ga.check(_fn, opinfo._fresh(_xs), mode=args.mode))
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
    why = " confirmation |" if args.why else ""
    print(f"| case | gradaudit µs | inside fn µs | calls | {anchor} µs | inside fn µs | calls |{why}")
    print("|---|---:|---:|---:|---:|---:|---:|" + ("---|" if args.why else ""))
    for label, got in rows:
        (t, f, c), (ta, fa, ca) = got["gradaudit"], got["anchor"]
        print(f"| `{label}` | {t * 1e6:.0f} | {f * 1e6:.0f} | {c} | {ta * 1e6:.0f} | {fa * 1e6:.0f} | {ca} |"
              + (f" {asked[label]} |" if args.why else ""))
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
    if args.why:
        _why_table(rows, asked, anchor)
    return 0


#: the rules of gradaudit.full that ask for the directional confirmation, as --why names them
RULES = ("unresolved", "opened", "silent", "disagree", "band")


def _why(check: Any) -> str:
    """Run *check* (one ga.check) once with full mode's rules watched: "not run", or "run: " and the rules that held
    ("other" where none of them was seen). The functions of gradaudit.full it wraps are restored after."""
    from gradaudit import full

    seen: set[str] = set()
    originals = {name: getattr(full, name) for name in ("_unresolved_pair", "_together", "_silent", "_banded")}

    def unresolved_pair(*a: Any, **k: Any) -> Any:
        got = originals["_unresolved_pair"](*a, **k)
        seen.update(name for name, part in zip(("unresolved", "opened"), got) if part is not None)
        return got

    def together(*a: Any, **k: Any) -> Any:
        got = originals["_together"](*a, **k)
        if not got:
            seen.add("disagree")
        return got

    def silent(*a: Any, **k: Any) -> Any:
        got = originals["_silent"](*a, **k)
        if got:
            seen.add("silent")
        return got

    def banded(*a: Any, **k: Any) -> Any:
        got = originals["_banded"](*a, **k)
        if got is not None:
            seen.add("band")
        return got

    for name, wrapper in zip(originals, (unresolved_pair, together, silent, banded)):
        setattr(full, name, wrapper)
    try:
        result = check()
    finally:
        for name, original in originals.items():
            setattr(full, name, original)
    if result.mode != "full":  # (auto mode chose directional mode: no full mode, nothing to confirm)
        return f"{result.mode} mode"
    if "directional" not in result.info:
        return "not run"
    return "run: " + ("+".join(rule for rule in RULES if rule in seen) or "other")


def _why_table(rows: list[tuple[str, dict[str, tuple[float, float, int]]]], asked: dict[str, str],
               anchor: str) -> None:
    """The cases grouped by whether the confirmation ran and what asked for it."""
    groups: dict[str, list[tuple[float, float]]] = {}
    for label, got in rows:
        groups.setdefault(asked[label], []).append((got["gradaudit"][0], got["anchor"][0]))
    print()
    print(f"| directional confirmation | cases | gradaudit ms | {anchor} ms | median {anchor} / gradaudit | "
          "cases over 1.5x |")
    print("|---|---:|---:|---:|---:|---:|")
    for key, times in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        median = statistics.median(a / t for t, a in times if t > 0) if any(t > 0 for t, _ in times) else math.nan
        over = sum(1 for t, a in times if t > 1.5 * a)
        print(f"| {key} | {len(times)} | {sum(t for t, _ in times) * 1e3:.1f} | {sum(a for _, a in times) * 1e3:.1f} "
              f"| {median:.3f} | {over} |")


if __name__ == "__main__":
    sys.exit(main())
