"""Beside 0: right and wrong backwards of |x|^p (p = 1.1 ... 2.5, not an integer) at inputs with one or two
elements within 1e-8 ... 1e-5 of 0, checked by torch.autograd.gradcheck (slow mode) and ga.check in full and
directional mode.

A projection's largest steps (Ridders' first, 1e-2 of the direction) carry such an element across 0, where |x|^p is
not smooth: its quotients there carry terms of the element's own size that Ridders' h^2 error model does not see, and
its estimate can be off by more than its bound. Two layouts: (d, -2d, 0.5), and six uniform draws in [-1, 1] with one
of them set to +-d. Three backwards per point: torch's own (right), the same off by 1e-7 at every element, and off by
1e-6 at the last element (which is not near 0). A right backward should pass (or be inconclusive where no step
resolves it); a wrong one fail. Verdicts only, no timing.

    python bench/near_zero.py                  # about a minute on one core
    python bench/near_zero.py --powers 1.9 --distances 1e-7,1e-8 --seeds 4 --out near_zero.jsonl
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

POWERS = (1.1, 1.5, 1.9, 1.95, 2.5)
DISTANCES = (1e-8, 1e-7, 1e-6, 1e-5)
LAYOUTS = ("beside", "random")
BACKWARDS = {"right": (0.0, None), "off 1e-7": (1e-7, None), "off 1e-6 at the last": (1e-6, -1)}
TOOLS = ("gradcheck", "full", "directional")


def _bench(name: str) -> Any:
    """bench/<name>.py, loaded by its path (these scripts are not a package): singular's backward scaled by 1 + rel,
    rounding's verdict of one tool."""
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def point(layout: str, d: float, seed: int) -> list[float]:
    """The input: (d, -2d, 0.5), or six uniform draws in [-1, 1] (generator seeded 100 + *seed*) with element
    seed % 6 set to d, its sign alternating with the seed."""
    import torch

    if layout == "beside":
        return [d, -2 * d, 0.5]
    xs = (torch.rand(6, generator=torch.Generator().manual_seed(100 + seed), dtype=torch.float64) * 2 - 1).tolist()
    xs[seed % 6] = d if seed % 2 else -d
    return xs


def run(powers: list[float], distances: list[float], seeds: int, out: Path | None) -> list[dict[str, Any]]:
    import torch

    scaled, verdict = _bench("singular").scaled, _bench("rounding").verdict
    rows = []
    handle = out.open("w") if out else None
    try:
        for p in powers:
            def power(x: Any, p: float = p) -> Any:
                return x.abs() ** p

            for d in distances:
                for layout in LAYOUTS:
                    for seed in range(seeds):
                        xs = point(layout, d, seed)
                        row: dict[str, Any] = {"p": p, "d": d, "layout": layout, "seed": seed, "x": xs}
                        for name, (rel, at) in BACKWARDS.items():
                            fn = scaled(power, rel, at=at)
                            row[name] = {tool: verdict(tool, fn, torch.tensor(xs, dtype=torch.float64,
                                                                               requires_grad=True), seed)
                                         for tool in TOOLS}
                        rows.append(row)
                        if handle:
                            handle.write(json.dumps(row) + "\n")
                            handle.flush()
                        print(f"  |x|^{p:g}, {layout} {d:g}, seed {seed}: " + "; ".join(
                            f"{name} " + "/".join(row[name][t] for t in TOOLS) for name in BACKWARDS), flush=True)
    finally:
        if handle:
            handle.close()
    return rows


def summary(rows: list[dict[str, Any]]) -> str:
    lines = [f"{len(rows)} points; verdicts of gradcheck (slow) / ga.check full / ga.check directional", "",
             "| backward | tool | pass | inconclusive | fail | error |", "|---|---|---:|---:|---:|---:|"]
    for name in BACKWARDS:
        for tool in TOOLS:
            c = Counter(r[name][tool] for r in rows)
            lines.append(f"| {name} | {tool} | {c['pass']} | {c['inconclusive']} | {c['fail']} | {c['error']} |")
    lines.append("")
    for tool in ("full", "directional"):
        alarms = [r for r in rows if r["right"][tool] == "fail"]
        lines.append(f"{tool}: {len(alarms)} false alarm(s) in {len(rows)} checks of right backwards" + (
            ": " + ", ".join(f"|x|^{r['p']:g} {r['layout']} {r['d']:g} seed {r['seed']}" for r in alarms)
            if alarms else ""))
    return "\n".join(lines)


def _floats(text: str, what: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or not all(math.isfinite(v) and v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"--{what} takes comma-separated positive numbers (e.g. 1.9,2.5); "
                                         f"got {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--powers", type=lambda t: _floats(t, "powers"), default=list(POWERS),
                        help="comma-separated powers p of |x|^p (default: " + ",".join(map(str, POWERS)) + ")")
    parser.add_argument("--distances", type=lambda t: _floats(t, "distances"), default=list(DISTANCES),
                        help="comma-separated distances d from 0 (default: " + ",".join(map(str, DISTANCES)) + ")")
    parser.add_argument("--seeds", type=int, default=3, help="seeds (and random layouts) per point (default 3)")
    parser.add_argument("--out", type=Path, help="also write one JSON line per point")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        print(f"bench/near_zero.py: --seeds must be at least 1; got {args.seeds}.", file=sys.stderr)
        return 2
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gradcheck warns on some of these inputs; its verdict is what counts
            rows = run(args.powers, args.distances, args.seeds, args.out)
    finally:
        torch.set_num_threads(threads)
    print()
    print(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
