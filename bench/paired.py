"""Two versions of gradaudit side by side on OpInfo cases: same verdicts and evaluations, and which is faster.

    python bench/paired.py --base cb00477                   # the working tree against a commit, auto mode
    python bench/paired.py --base HEAD --mode directional --max-jac 1e4
    python bench/paired.py --base HEAD --new HEAD           # A/A: the harness's own bias (reads about 1.00)
    python bench/paired.py --base HEAD --slow               # and list the cases over 1.5x the anchor's time

A sweep (``bench/opinfo.py``) measures one version at a time, and the millisecond calls of small cases
spread by several percent from sweep to sweep on a shared machine: a change worth 5% cannot be told from
the noise. Here both versions are imported into one process as separate packages (``git archive`` of
``src/gradaudit`` for a revision, a copy for the working tree), and each case calls the anchor
(gradcheck slow for auto/full, fast for directional), the base and the new version in turn, the order of
base and new swapped every round, timed in CPU time. The ratio new/base per case is then paired: its
median moves with the change, not with the machine.

With ``--fingerprint`` every case is first checked once by each version: verdict, evaluation count and
the evidence's numbers (info, with each directional comparison's values and bounds, and every record's
discrepancy, to the last bit) must be equal (a speed change that changes what is judged is not a speed
change); differences are listed and the exit status is 1.

Cases: the first two OpInfo samples of every op with autograd, as ``bench/opinfo.py`` builds them,
where the anchor passes and the Jacobian has at most ``--max-jac`` entries.
"""

from __future__ import annotations

import argparse
import importlib
import io
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def export(rev: str | None, into: Path, name: str) -> None:
    """src/gradaudit of *rev* (None: the working tree) as package *name* under *into*."""
    target = into / name
    if rev is None:
        shutil.copytree(ROOT / "src" / "gradaudit", target, ignore=shutil.ignore_patterns("__pycache__"))
        return
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src/gradaudit"], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        try:
            tar.extractall(into / "_archive", filter="data")
        except TypeError:  # Python before 3.10.12 / 3.11.4: no extraction filters (our own archive, from git)
            tar.extractall(into / "_archive")
    (into / "_archive" / "src" / "gradaudit").rename(target)


def _evidence(res: Any) -> str:
    """The numbers a check's evidence holds, exactly: its info (each directional comparison's values and
    bounds, the notes) and every record's discrepancy, as text (repr of a float is exact)."""
    import json

    records = [repr(getattr(r, "discrepancy", None)) for r in res.records]
    return json.dumps({"info": res.info, "records": records}, sort_keys=True, default=repr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the revision to compare against (a commit, HEAD, a tag)")
    parser.add_argument("--new", default=None, help="the other revision (default: the working tree)")
    parser.add_argument("--mode", default="auto", choices=["auto", "full", "directional"])
    parser.add_argument("--max-jac", type=float, default=100, help="largest N*M of a case (default 100)")
    parser.add_argument("--repeat", type=int, default=6, help="calls per tool and case (default 6)")
    parser.add_argument("--ops", default=None, help="comma-separated OpInfo names (default: every op)")
    parser.add_argument("--fingerprint", action="store_true", help="first compare verdicts and evaluations")
    parser.add_argument("--slow", action="store_true",
                        help="list the cases over 1.5x the anchor's time in either version, with both ratios")
    args = parser.parse_args(argv)

    import torch

    threads = torch.get_num_threads()
    added = [str(ROOT / "bench")]
    with warnings.catch_warnings(), tempfile.TemporaryDirectory() as tmp:
        warnings.simplefilter("ignore")  # OpInfo's samples warn (deprecations, TF32 notes): not ours to show
        torch.set_num_threads(1)
        added.append(tmp)
        sys.path[:0] = added
        try:
            import opinfo
            from torch.autograd import gradcheck
            from torch.testing._internal.common_methods_invocations import op_db

            try:
                export(args.base, Path(tmp), "gradaudit_base")
                export(args.new, Path(tmp), "gradaudit_new")
            except subprocess.CalledProcessError as exc:
                print(f"error: git could not export src/gradaudit at {exc.cmd[-2]!r} (expected a commit, tag or "
                      f"HEAD of this repository; git said: {exc.stderr.decode(errors='replace').strip()}). "
                      "Pass --base (and --new) as a revision `git log` shows.", file=sys.stderr)
                return 2
            base, new = importlib.import_module("gradaudit_base"), importlib.import_module("gradaudit_new")
            return _run(args, base, new, op_db, opinfo, gradcheck)
        finally:  # leave the calling process as it was (the tests call main())
            torch.set_num_threads(threads)
            for path in added:
                sys.path.remove(path)
            for name in [m for m in sys.modules if m.split(".")[0] in ("gradaudit_base", "gradaudit_new")]:
                del sys.modules[name]


def _run(args: argparse.Namespace, base: Any, new: Any, op_db: list[Any], opinfo: Any, gradcheck: Any) -> int:
    builder = opinfo.CaseBuilder(op_db, 2)
    fast = args.mode == "directional"
    cases = []
    for op_index, index, label in opinfo.built_cases(builder, args.ops, args.max_jac):
        fn, checked, _ = builder.case(op_index, index)
        try:
            if not gradcheck(fn, opinfo._fresh(checked), fast_mode=fast):
                continue
        except Exception:
            continue
        cases.append((label, fn, checked))
    print(f"{len(cases)} cases (anchor passes, N*M <= {args.max_jac:g}); mode {args.mode}; base {args.base}, "
          f"new {args.new or 'the working tree'}")
    status = 0
    if args.fingerprint:
        differ = []
        for label, fn, checked in cases:
            got = []
            for version in (base, new):
                try:
                    res = version.check(fn, opinfo._fresh(checked), mode=args.mode)
                    got.append((str(res.verdict), res.info.get("evaluations"), _evidence(res)))
                except Exception as exc:  # noqa: BLE001 - a raise is a fingerprint too
                    got.append(("raised " + type(exc).__name__, None))
            if got[0] != got[1]:
                same = "" if got[0][:2] != got[1][:2] else " (the evidence's numbers differ)"
                differ.append(f"  {label}: base {got[0][:2]}, new {got[1][:2]}{same}")
        print(f"fingerprint (verdict, evaluations, the evidence's numbers): {len(differ)} of {len(cases)} cases differ")
        if differ:
            print("\n".join(differ))
        status = 1 if differ else 0
    tools = {
        "anchor": lambda fn, xs: gradcheck(fn, xs, fast_mode=fast),
        "base": lambda fn, xs: base.check(fn, xs, mode=args.mode),
        "new": lambda fn, xs: new.check(fn, xs, mode=args.mode),
    }
    rows, raised = [], []
    for label, fn, checked in cases:
        times: dict[str, list[float]] = {k: [] for k in tools}
        try:
            for tool in tools.values():
                tool(fn, opinfo._fresh(checked))  # warm
        except Exception as exc:  # noqa: BLE001 - a refusal (a sparse input) is not a time: the case is left out
            raised.append(f"{label} ({type(exc).__name__})")
            continue
        for rep in range(args.repeat):
            for key in ("anchor", "base", "new") if rep % 2 == 0 else ("anchor", "new", "base"):
                xs = opinfo._fresh(checked)
                start = time.process_time()
                tools[key](fn, xs)
                times[key].append(time.process_time() - start)
        rows.append((label, {k: statistics.median(v) for k, v in times.items()}))
    if raised:
        print(f"left out of the timing, a tool raised: {', '.join(raised)}")
    if not rows:
        print("no case selected")
        return 2
    anchor = "gradcheck fast" if fast else "gradcheck slow"
    speed = [t["base"] / t["new"] for _, t in rows]
    print(f"\n| measure ({len(rows)} cases, CPU time, median of {args.repeat} calls each) | base | new |")
    print("|---|---:|---:|")
    print(f"| median per-case {anchor} / gradaudit | {statistics.median(t['anchor'] / t['base'] for _, t in rows):.3f} "
          f"| {statistics.median(t['anchor'] / t['new'] for _, t in rows):.3f} |")
    total = {k: sum(t[k] for _, t in rows) for k in tools}
    print(f"| total {anchor} / gradaudit | {total['anchor'] / total['base']:.3f} "
          f"| {total['anchor'] / total['new']:.3f} |")
    print(f"| cases over 1.5x {anchor}'s time | {sum(t['base'] > 1.5 * t['anchor'] for _, t in rows)} "
          f"| {sum(t['new'] > 1.5 * t['anchor'] for _, t in rows)} |")
    print(f"\nnew against base, paired per case (> 1: new faster): median {statistics.median(speed):.3f}, "
          f"quartiles {statistics.quantiles(speed, n=4)[0]:.3f} and {statistics.quantiles(speed, n=4)[2]:.3f}"
          if len(speed) > 1 else f"\nnew against base: {speed[0]:.3f}")
    if args.slow:
        slow = [(label, t) for label, t in rows if max(t["base"], t["new"]) > 1.5 * t["anchor"]]
        print(f"\n| case over 1.5x {anchor}'s time in either version | base / {anchor} | new / {anchor} |")
        print("|---|---:|---:|")
        for label, t in sorted(slow, key=lambda row: -row[1]["new"] / row[1]["anchor"]):
            print(f"| `{label}` | {t['base'] / t['anchor']:.2f} | {t['new'] / t['anchor']:.2f} |")
    return status


if __name__ == "__main__":
    sys.exit(main())
