"""Extremal inputs: gradaudit against torch.autograd.gradcheck on OpInfo's ``reference_inputs``.

OpInfo's reference inputs hold what its sample inputs do not: values of 10^6 to 10^20, values next to poles and
domain edges, NaN and +-inf, empty and large tensors. They were written for comparisons with reference
implementations, not for gradient tests, so this is a corpus nobody tuned a gradient checker on. Every op with
autograd and float64 backward support that has reference inputs (``op.reference_inputs_func``), each case built
as ``bench/opinfo.py`` builds a sample (CaseBuilder: ``op.gradcheck_wrapper``, the tensors that require grad
checked); cases whose checked inputs hold more than ``--max-n`` elements, or none, are left out. Four tools per
case, as in ``bench/opinfo.py``: gradcheck slow and fast mode, ``ga.check`` auto and directional; verdicts only
(one call each, ``--cap`` seconds at most: a call past it is a "timeout"). OpInfo's own skips and expected
failures for ``TestBwdGradients.test_fn_grad`` are marked and listed apart.

    python bench/reference_inputs.py --max-n 300 --out reference.jsonl     (about 25 minutes on one core)
    python bench/reference_inputs.py --ops tan,sgn,nn.functional.celu      (a few ops)
    python bench/reference_inputs.py --summary reference.jsonl             (re-renders, runs nothing)

Read a disagreement before counting it: at extremal values gradcheck's absolute step of 1e-6 may not move x at
all (it then reads a derivative of 0), and a backward may be off by more than float64 rounding
(docs/history.md, "Complex samples, and OpInfo's reference inputs").
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

TOOLS = ("gradcheck_slow", "gradcheck_fast", "gradaudit_auto", "gradaudit_directional")
PAIRS = (("gradcheck_slow", "gradaudit_auto"), ("gradcheck_fast", "gradaudit_directional"))


class _Timeout(BaseException):
    """A tool call ran past --cap (a BaseException: a function's own ``except Exception`` does not swallow it)."""


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def _verdict(tool: str, fn: Any, checked: list[Any], cap: float) -> tuple[str, str]:
    import torch
    from torch.autograd.gradcheck import GradcheckError

    import gradaudit as ga

    inputs = [t.detach().clone().requires_grad_() for t in checked]
    signal.setitimer(signal.ITIMER_REAL, cap)
    try:
        if tool.startswith("gradcheck"):
            torch.autograd.gradcheck(fn, tuple(inputs), fast_mode=tool.endswith("fast"))
            return "pass", ""
        res = ga.check(fn, inputs, mode="auto" if tool.endswith("auto") else "directional")
        return res.verdict, "" if res.verdict == "pass" else res.report()[:1500]
    except _Timeout:
        return "timeout", f"no answer within {cap:g} s"
    except GradcheckError as exc:
        return "fail", str(exc)[:300]
    except Exception as exc:
        return "error", f"{type(exc).__name__}: {str(exc)[:400]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def reference_builder(op_db: list[Any]) -> Any:
    """bench/opinfo.py's CaseBuilder over ``op.reference_inputs`` (all of them, cached per op)."""
    import opinfo

    class ReferenceBuilder(opinfo.CaseBuilder):
        source = "reference_inputs"

        def generate(self, op: Any) -> Any:
            import torch

            return op.reference_inputs("cpu", torch.float64, requires_grad=True)

    return ReferenceBuilder(op_db, None)


def run(ops: set[str] | None, max_n: int, cap: float, out: Path | None) -> list[dict[str, Any]]:
    import opinfo
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    builder = reference_builder(op_db)
    rows: list[dict[str, Any]] = []
    handle = out.open("w") if out else None
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for i, op in enumerate(op_db):
            if (not op.supports_autograd or op.reference_inputs_func is None
                    or torch.float64 not in op.supported_backward_dtypes("cpu") or (ops and op.name not in ops)):
                continue
            status = opinfo.opinfo_expectations(op)["status"]
            index = -1
            while True:
                index += 1
                try:
                    case = builder.case(i, index)
                except Exception as exc:
                    row = {"op": op.name, "variant": op.variant_test_name, "sample": index, "build": str(exc)[:300]}
                    rows.append(row)
                    if handle:
                        handle.write(json.dumps(row) + "\n")
                    break
                if case is None:
                    break
                fn, checked, _ = case
                n = sum(t.numel() for t in checked)
                if not checked or n == 0 or n > max_n:
                    continue
                row = {"op": op.name, "variant": op.variant_test_name, "sample": index, "n": n, "opinfo": status,
                       "non_finite": any(t.layout == torch.strided and not bool(torch.isfinite(t).all())
                                         for t in checked),
                       "shapes": [list(t.shape) for t in checked]}
                for tool in TOOLS:
                    started = time.perf_counter()
                    row[tool], message = _verdict(tool, fn, checked, cap)
                    row[tool + "_s"] = round(time.perf_counter() - started, 4)
                    if message:
                        row[tool + "_says"] = message
                rows.append(row)
                if handle:
                    handle.write(json.dumps(row) + "\n")
                    handle.flush()
    finally:
        signal.signal(signal.SIGALRM, previous)
        if handle:
            handle.close()
    return rows


def summary(rows: list[dict[str, Any]]) -> str:
    cases = [r for r in rows if "build" not in r]
    compared = [r for r in cases if not r.get("opinfo")]
    entries = {(r["op"], r["variant"]) for r in cases}
    lines = [f"{len(cases)} cases from {len(entries)} ops and variants; {len(compared)} outside OpInfo's skips and "
             f"expected failures (left out of the tables: {len(cases) - len(compared)}); "
             f"{sum('build' in r for r in rows)} whose reference inputs could not be built", ""]
    for anchor, tool in PAIRS:
        counts = Counter((r[anchor], r[tool]) for r in compared)
        lines += [f"{anchor} (rows) x {tool} (columns):", "",
                  "| | pass | fail | inconclusive | error | timeout |", "|---|---:|---:|---:|---:|---:|"]
        for mine in ("pass", "fail", "error", "timeout"):
            cells = [str(counts[(mine, theirs)]) for theirs in ("pass", "fail", "inconclusive", "error", "timeout")]
            lines.append(f"| **{mine}** | " + " | ".join(cells) + " |")
        lines.append("")
        odd = Counter((r["op"], r["variant"], r[tool]) for r in compared if r[anchor] == "pass" and r[tool] != "pass")
        lines.append(f"where {anchor} passes and {tool} does not ({sum(odd.values())} cases): "
                     + ("; ".join(f"{op}{'.' + v if v else ''} {verdict} x{k}" for (op, v, verdict), k
                                  in sorted(odd.items())) or "none"))
        lines.append("")
    differ = Counter((r["op"], r["variant"], r["gradaudit_auto"], r["gradaudit_directional"]) for r in compared
                     if r["gradaudit_auto"] != r["gradaudit_directional"])
    lines.append(f"auto and directional differ on {sum(differ.values())} cases: "
                 + ("; ".join(f"{op}{'.' + v if v else ''} {a}/{d} x{k}" for (op, v, a, d), k in sorted(differ.items()))
                    or "none"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", help="comma-separated OpInfo names (default: every op with reference inputs)")
    parser.add_argument("--max-n", type=int, default=300, help="leave out cases with more checked elements (300)")
    parser.add_argument("--cap", type=float, default=60.0, help="seconds per tool call at most (default 60)")
    parser.add_argument("--out", type=Path, help="also write one JSON line per case")
    parser.add_argument("--summary", type=Path, metavar="PATH", help="summarize an existing JSONL; run nothing")
    args = parser.parse_args(argv)
    if args.summary is not None:
        if not args.summary.is_file():
            print(f"bench/reference_inputs.py: no such results file {str(args.summary)!r}; run the sweep with "
                  "--out first.", file=sys.stderr)
            return 2
        print(summary([json.loads(line) for line in args.summary.read_text().splitlines() if line.strip()]))
        return 0
    if args.max_n < 1 or not args.cap > 0:
        print(f"bench/reference_inputs.py: --max-n must be at least 1 and --cap positive; got {args.max_n} and "
              f"{args.cap}.", file=sys.stderr)
        return 2
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gradcheck and the ops warn at extremal values; verdicts are what count
            ops = {o.strip() for o in args.ops.split(",") if o.strip()} if args.ops else None
            rows = run(ops, args.max_n, args.cap, args.out)
    finally:
        torch.set_num_threads(threads)
    print(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
