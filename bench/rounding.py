"""Functions that round like their terms, not like their values: right backwards (autograd's own) of functions
that compute small outputs from large intermediates, checked by torch.autograd.gradcheck (slow mode) and ga.check
in full and directional mode, at several points and seeds.

A cancellation (a naive variance, mean(x^2) - mean(x)^2, at 100 +- 0.01: an output of 3e-5 from squares of 1e4,
off by about 2e-12), a sum that absorbs a small term (1 + 1e-12 sin x, less 1: a staircase of 2.2e-16 in f), a
lower-precision cast inside a float64 function (tanh(x.half())), gelu's tail (x (1 + erf(x / sqrt 2)) / 2, whose
1 + erf rounds in stairs), and outputs far below one or large against their slope (1e-12 sin x, 1000 + 1e-6 sin x,
exp(c x) with c up to 60), whose entries full mode judges below its rounding floor, and a small input added to a
large constant inside (sin(x + 1e5): x held to the constant's spacing): each is differentiable in the mathematics and
its backward is right, but no finite difference of its float64 evaluation sees that derivative to the default
tolerance's 1e-8. A right backward should pass or be inconclusive; a failure here is a false alarm. With --off, the
backward is wrong instead, its element 0 off by that relative amount: a pass there is a miss (it should fail, or be
inconclusive where the evidence cannot decide). Verdicts only, no timing.

    python bench/rounding.py                   # about two minutes on one core
    python bench/rounding.py --off 0.5         # a backward 50% off at one element: the misses per mode
    python bench/rounding.py --families variance,log1p --seeds 5 --out rounding.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

TOOLS = ("gradcheck", "full", "directional")
POINTS = 4


def families() -> dict[str, tuple[str, Callable[..., Any], Callable[[int], Any]]]:
    """name: (what it is, the function, the point k of POINTS)."""
    import torch

    f64 = torch.float64

    def around(centre: float, seed: int) -> Callable[[int], Any]:
        return lambda k: centre + 0.01 * torch.randn(6, generator=torch.Generator().manual_seed(seed + k), dtype=f64)

    def uniform(lo: float, hi: float, n: int, seed: int) -> Callable[[int], Any]:
        return lambda k: lo + (hi - lo) * torch.rand(n, generator=torch.Generator().manual_seed(seed + k), dtype=f64)

    def variance(a: Any) -> Any:
        return (a * a).mean() - a.mean() ** 2

    return {
        "variance": ("mean(x^2) - mean(x)^2 at 100 +- 0.01", variance, around(100.0, 100)),
        "variance-1000": ("the same at 1000 +- 0.01", variance, around(1000.0, 100)),
        "variance-mean": ("[the same, mean(x)] at 100 +- 0.01",
                          lambda a: torch.stack([variance(a), a.mean()]), around(100.0, 100)),
        "square-difference": ("(x + 1e-3)^2 - x^2 at 50 ... 51", lambda a: (a + 1e-3) ** 2 - a ** 2,
                              uniform(50.0, 51.0, 5, 300)),
        "log1p": ("log(1 + x) - x at 5e-5 ... 1.5e-4", lambda a: torch.log(1 + a) - a, uniform(5e-5, 1.5e-4, 5, 300)),
        "absorbed": ("(1 + 1e-12 sin x) - 1 at -1 ... 1", lambda a: (1 + 1e-12 * torch.sin(a)) - 1,
                     uniform(-1.0, 1.0, 5, 200)),
        "float16": ("tanh(x.half()) in float64 at -1 ... 1", lambda a: torch.tanh(a.half().float()).double(),
                    uniform(-1.0, 1.0, 5, 400)),
        "float32": ("exp(x.float()) in float64 at -1 ... 1", lambda a: torch.exp(a.float()).double(),
                    uniform(-1.0, 1.0, 5, 400)),
        # outputs far below one, or large against their slope: entries full mode opens below its rounding floor
        "gelu-tail": ("gelu(x) at -12 ... 3 (1 + erf rounds in stairs)", lambda a: torch.nn.functional.gelu(a),
                      uniform(-12.0, 3.0, 6, 0)),
        "tiny": ("1e-12 sin x at -1 ... 1", lambda a: 1e-12 * torch.sin(a), uniform(-1.0, 1.0, 5, 500)),
        "large": ("1000 + 1e-6 sin x at -1 ... 1", lambda a: 1e3 + 1e-6 * torch.sin(a), uniform(-1.0, 1.0, 5, 500)),
        "exp-wide": ("exp(c x), c = 1 ... 60, at -1 ... 1",
                     lambda a: torch.exp(torch.linspace(1.0, 60.0, 6, dtype=f64) * a), uniform(-1.0, 1.0, 6, 600)),
        # a small input added to a large constant inside: x is held to the constant's spacing (1.5e-11 at 1e5, 1.9e-9
        # at 1e7), which moves of a few ulps of x do not show
        "sin-1e5": ("sin(x + 1e5) at -2 ... 2", lambda a: torch.sin(a + 1e5), uniform(-2.0, 2.0, 5, 700)),
        "softmax-1e5": ("softmax(x + 1e5) at -2 ... 2", lambda a: torch.softmax(a + 1e5, 0),
                        uniform(-2.0, 2.0, 5, 700)),
        "sin-1e7": ("sin(x + 1e7) at -2 ... 2", lambda a: torch.sin(a + 1e7), uniform(-2.0, 2.0, 5, 700)),
        "softmax-1e7": ("softmax(x + 1e7) at -2 ... 2", lambda a: torch.softmax(a + 1e7, 0),
                        uniform(-2.0, 2.0, 5, 700)),
        "tanh-1e7": ("tanh((x + 1e7) - 1e7) at -2 ... 2", lambda a: torch.tanh((a + 1e7) - 1e7),
                     uniform(-2.0, 2.0, 5, 700)),
        # and stairs as wide as 1.5e-8 (1e8) and 1.2e-7 (1e9), which moves of up to 4e-8 read nothing of (gradcheck,
        # whose steps of 1e-6 cross them, fails these too)
        "sin-1e8": ("sin(x + 1e8) at -2 ... 2", lambda a: torch.sin(a + 1e8), uniform(-2.0, 2.0, 5, 700)),
        "softmax-1e8": ("softmax(x + 1e8) at -2 ... 2", lambda a: torch.softmax(a + 1e8, 0),
                        uniform(-2.0, 2.0, 5, 700)),
        "tanh-1e9": ("tanh((x + 1e9) - 1e9) at -2 ... 2", lambda a: torch.tanh((a + 1e9) - 1e9),
                     uniform(-2.0, 2.0, 5, 700)),
        "exp-1e9": ("exp((x + 1e9) - 1e9) at -1 ... 1", lambda a: torch.exp((a + 1e9) - 1e9),
                    uniform(-1.0, 1.0, 5, 700)),
    }


def off_at_zero(fn: Callable[..., Any], off: float) -> Callable[..., Any]:
    """*fn* with torch's own backward, the gradient of input element 0 times 1 + *off* (bench/singular.py's
    scaled, loaded by its path: these scripts are not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_bench_singular", Path(__file__).with_name("singular.py"))
    assert spec is not None and spec.loader is not None
    singular = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(singular)
    return singular.scaled(fn, off, at=0)  # type: ignore[no-any-return]


def verdict(tool: str, fn: Callable[..., Any], x: Any, seed: int) -> str:
    import torch
    from torch.autograd.gradcheck import GradcheckError

    import gradaudit as ga

    if tool == "gradcheck":
        try:
            return "pass" if torch.autograd.gradcheck(fn, (x,)) else "fail"
        except GradcheckError:
            return "fail"
        except Exception:  # noqa: BLE001 - a crash is a verdict here
            return "error"
    return str(ga.check(fn, (x,), mode=tool, seed=seed).verdict)


def cases(names: list[str], seeds: int, off: float = 0.0) -> Iterator[tuple[str, int, int, Any, Callable[..., Any]]]:
    table = families()
    for name in names:
        _, fn, point = table[name]
        fn = off_at_zero(fn, off) if off else fn
        for k in range(POINTS):
            x = point(k)
            for seed in range(seeds):
                yield name, k, seed, x, fn


def run(names: list[str], seeds: int, out: Path | None, off: float = 0.0) -> list[dict[str, Any]]:
    rows = []
    handle = out.open("w") if out else None
    try:
        for name, k, seed, x, fn in cases(names, seeds, off):
            # gradcheck draws nothing at random: its verdict is the same at every seed
            row = {"family": name, "point": k, "seed": seed, "off": off,
                   **{tool: (rows[-1][tool] if tool == "gradcheck" and seed else
                             verdict(tool, fn, x.clone().requires_grad_(True), seed)) for tool in TOOLS}}
            rows.append(row)
            if handle:
                handle.write(json.dumps(row) + "\n")
                handle.flush()
    finally:
        if handle:
            handle.close()
    return rows


def summary(rows: list[dict[str, Any]], off: float = 0.0) -> str:
    table = families()
    what = f"backwards off by {off:g} at element 0" if off else "right backwards"
    lines = [f"{what}: pass / inconclusive / fail (error) per tool, over points x seeds", "",
             "| function | checks | gradcheck (slow) | full | directional |", "|---|---:|---|---|---|"]
    for name in dict.fromkeys(r["family"] for r in rows):
        mine = [r for r in rows if r["family"] == name]
        cells = []
        for tool in TOOLS:
            c = Counter(r[tool] for r in mine)
            errors = f" ({c['error']})" if c["error"] else ""
            cells.append(f"{c['pass']} / {c['inconclusive']} / {c['fail']}{errors}")
        lines.append(f"| {table[name][0]} | {len(mine)} | " + " | ".join(cells) + " |")
    for tool in ("full", "directional"):
        if off:
            misses = sum(r[tool] == "pass" for r in rows)
            lines.append(f"\n{tool}: {misses} miss(es) (a pass) in {len(rows)} checks of wrong backwards")
        else:
            alarms = sum(r[tool] == "fail" for r in rows)
            lines.append(f"\n{tool}: {alarms} false alarm(s) in {len(rows)} checks of right backwards")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    known = list(families())
    parser.add_argument("--families", help="comma-separated names (default: all): " + ", ".join(known))
    parser.add_argument("--seeds", type=int, default=3, help="seeds per point (default 3)")
    parser.add_argument("--out", type=Path, help="also write one JSON line per check")
    parser.add_argument("--off", type=float, default=0.0,
                        help="plant a relative error of this size at element 0 of the backward (default 0: right "
                             "backwards); a pass is then a miss")
    args = parser.parse_args(argv)
    names = known if not args.families else [n.strip() for n in args.families.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or args.seeds < 1 or not math.isfinite(args.off) or args.off <= -1:
        print(f"bench/rounding.py: unknown family {unknown[0]!r}; known: {', '.join(known)}." if unknown else
              f"bench/rounding.py: --seeds must be at least 1; got {args.seeds}." if args.seeds < 1 else
              f"bench/rounding.py: --off must be a finite relative error above -1 (0.5: 50% too large); "
              f"got {args.off}.", file=sys.stderr)
        return 2
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gradcheck warns on some of these; its verdict is what counts
            rows = run(names, args.seeds, args.out, args.off)
    finally:
        torch.set_num_threads(threads)
    print(summary(rows, args.off))
    return 0


if __name__ == "__main__":
    sys.exit(main())
