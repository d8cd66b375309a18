"""Forward-mode AD and the double backward: gradaudit against gradcheck's own checks of them on OpInfo's op_db.

``--method forward``: ``ga.check(fn, inputs, forward_ad=True)``, the verdict of its jvp records (one per checked
input: fail if one fails, else inconclusive if one is, else pass), against ``torch.autograd.gradcheck(fn, inputs,
check_forward_ad=True, check_backward_ad=False)``; ``--method second``: ``ga.check(fn, inputs, order=2)``, its
double-backward records, against ``torch.autograd.gradgradcheck(fn, inputs)``; both gradcheck calls with
``check_undefined_grad=False, check_batched_grad=False`` (what gradaudit's records do not check either). Every op of
``op_db`` with autograd, float64 backward support and ``supports_forward_ad`` (``supports_gradgrad``), its first
``--samples`` sample inputs built as ``bench/opinfo.py`` builds them (CaseBuilder), real inputs only, at most
``--max-n`` checked elements. Verdicts only: one call per tool and case, ``--cap`` seconds at most (a "timeout"
past it), the times recorded but not a speed benchmark. OpInfo's own skips and expected failures for
``TestFwdGradients.test_forward_mode_AD`` (``TestBwdGradients.test_fn_gradgrad``) are marked and listed apart.

    python bench/opinfo_higher.py --method forward --out forward.jsonl    (about 2 minutes on one core)
    python bench/opinfo_higher.py --method second --out second.jsonl      (about 3 minutes)
    python bench/opinfo_higher.py --method forward --ops logcumsumexp,round
    python bench/opinfo_higher.py --method second --db autograd_function_db   (custom autograd.Functions)
    python bench/opinfo_higher.py --summary forward.jsonl                 (re-renders, runs nothing)

Read a disagreement before counting it: gradaudit's default tolerance (rtol 1e-10, plus its evidence's bound) is
far finer than gradcheck's (atol 1e-5, rtol 1e-3), so a derivative torch computes off by 1e-6 of itself fails here
and passes there (docs/history.md, "Forward-mode AD and the double backward on OpInfo").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: per method: the gradaudit record's method, the check= keyword, the OpInfo flag and opinfo.TESTS's key
METHODS = {"forward": ("jvp", {"forward_ad": True}, "supports_forward_ad", "forward"),
           "second": ("double backward", {"order": 2}, "supports_gradgrad", "gradgrad")}


class _Timeout(BaseException):
    """A tool call ran past --cap (a BaseException: a function's own ``except Exception`` does not swallow it)."""


@contextlib.contextmanager
def one_quiet_thread() -> Iterator[None]:
    """One torch thread and warnings ignored (some ops warn, deprecated names: the outcomes are what count), the
    thread count put back after (the tests call main() in their own process)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        torch.set_num_threads(threads)


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


def _gradcheck(method: str, fn: Any, inputs: tuple[Any, ...]) -> None:
    import torch

    if method == "forward":
        torch.autograd.gradcheck(fn, inputs, check_forward_ad=True, check_backward_ad=False,
                                 check_undefined_grad=False, check_batched_grad=False)
    else:
        torch.autograd.gradgradcheck(fn, inputs, check_undefined_grad=False, check_batched_grad=False)


def _verdict(tool: str, method: str, fn: Any, checked: list[Any], cap: float) -> tuple[str, str]:
    from torch.autograd.gradcheck import GradcheckError

    import gradaudit as ga

    inputs = tuple(t.detach().clone().requires_grad_() for t in checked)
    record, options, _, _ = METHODS[method]
    signal.setitimer(signal.ITIMER_REAL, cap)
    try:
        if tool == "gradcheck":
            _gradcheck(method, fn, inputs)
            return "pass", ""
        res = ga.check(fn, inputs, **options)
        if res.verdict == "error":
            return "error", res.report()[:1500]
        verdicts = [r.verdict for r in res.records if r.method == record]
        verdict = next((v for v in ("fail", "inconclusive") if v in verdicts), "pass" if verdicts else "error")
        says = "\n".join(f"{r.input}: {r.verdict} ({r.reason})" for r in res.records
                         if r.method == record and r.verdict != "pass")
        return verdict, says[:1500]
    except _Timeout:
        return "timeout", f"no answer within {cap:g} s"
    except GradcheckError as exc:
        return "fail", str(exc)[:300]
    except Exception as exc:
        return "error", f"{type(exc).__name__}: {str(exc)[:400]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def run(method: str, ops: set[str] | None, samples: int, max_n: int, cap: float, out: Path | None,
        db: str = "op_db") -> list[dict[str, Any]]:
    import opinfo
    import torch

    op_db = opinfo.load_db(db)
    _, _, flag, test = METHODS[method]
    builder = opinfo.CaseBuilder(op_db, samples, wrapped=db not in opinfo.UNWRAPPED_DBS)
    rows: list[dict[str, Any]] = []
    handle = out.open("w") if out else None
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for i, op in enumerate(op_db):
            if (not (op.supports_autograd and getattr(op, flag)) or (ops and op.name not in ops)
                    or torch.float64 not in op.supported_backward_dtypes("cpu")):
                continue
            status = opinfo.opinfo_expectations(op, method=test)["status"]
            for index in range(samples):
                try:
                    case = builder.case(i, index)
                except Exception as exc:
                    row = {"op": op.name, "variant": op.variant_test_name, "sample": index, "build": str(exc)[:300]}
                else:
                    if case is None:
                        break
                    fn, checked, _ = case
                    n = sum(t.numel() for t in checked)
                    if not checked or n == 0 or n > max_n or any(t.is_complex() for t in checked):
                        continue
                    row = {"op": op.name, "variant": op.variant_test_name, "sample": index, "n": n,
                           "opinfo": status, "layouts": sorted({str(t.layout) for t in checked}),
                           "non_finite": any(t.layout == torch.strided and not bool(torch.isfinite(t).all())
                                             for t in checked)}
                    for tool in ("gradcheck", "gradaudit"):
                        started = time.perf_counter()
                        row[tool], message = _verdict(tool, method, fn, checked, cap)
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
             f"expected failures (left out of the table: {len(cases) - len(compared)}); "
             f"{sum('build' in r for r in rows)} whose samples could not be built", ""]
    counts = Counter((r["gradcheck"], r["gradaudit"]) for r in compared)
    columns = ("pass", "fail", "inconclusive", "error", "timeout")
    lines += ["gradcheck (rows) x gradaudit (columns):", "",
              "| | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
    for mine in ("pass", "fail", "error", "timeout"):
        lines.append(f"| **{mine}** | " + " | ".join(str(counts[(mine, theirs)]) for theirs in columns) + " |")
    lines.append("")

    def listed(title: str, picked: list[dict[str, Any]]) -> None:
        lines.append(f"{title} ({len(picked)}):" + ("" if picked else " none"))
        for r in picked:
            says = (r.get("gradaudit_says") or r.get("gradcheck_says") or "").splitlines()
            lines.append(f"- {r['op']}{'.' + r['variant'] if r['variant'] else ''} #{r['sample']} (N={r['n']}): "
                         f"gradcheck {r['gradcheck']}, gradaudit {r['gradaudit']}"
                         + (f" — {says[0][:200]}" if says else ""))
        lines.append("")

    listed("where gradcheck passes and gradaudit does not",
           [r for r in compared if r["gradcheck"] == "pass" and r["gradaudit"] != "pass"])
    listed("where gradcheck fails and gradaudit passes",
           [r for r in compared if r["gradcheck"] == "fail" and r["gradaudit"] == "pass"])
    skipped = [r for r in cases if r.get("opinfo")]
    kinds = Counter((r["gradcheck"], r["gradaudit"]) for r in skipped)
    lines.append("OpInfo's skips and expected failures, gradcheck / gradaudit: "
                 + (", ".join(f"{a}/{b} x{k}" for (a, b), k in sorted(kinds.items())) or "none"))
    seconds = {tool: sum(r.get(tool + "_s", 0.0) for r in compared) for tool in ("gradcheck", "gradaudit")}
    lines.append(f"seconds in all (one call each, not a speed benchmark): gradcheck {seconds['gradcheck']:.1f}, "
                 f"gradaudit {seconds['gradaudit']:.1f} (its check includes the backward's)")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--method", choices=sorted(METHODS), default="forward",
                        help="forward: forward_ad=True against gradcheck's forward-AD check; second: order=2 "
                             "against gradgradcheck (default forward)")
    parser.add_argument("--ops", help="comma-separated OpInfo names (default: every op that supports the method)")
    parser.add_argument("--samples", type=int, default=2, help="sample inputs per op (default 2)")
    parser.add_argument("--max-n", type=int, default=400, help="leave out cases with more checked elements (400)")
    parser.add_argument("--cap", type=float, default=60.0, help="seconds per tool call at most (default 60)")
    parser.add_argument("--db", choices=("op_db", "autograd_function_db", "custom_op_db"), default="op_db",
                        help="the OpInfo list (default op_db; autograd_function_db and custom_op_db: the custom "
                             "autograd.Functions and torch.library ops of PyTorch's functorch tests, as in "
                             "bench/opinfo.py)")
    parser.add_argument("--out", type=Path, help="also write one JSON line per case")
    parser.add_argument("--summary", type=Path, metavar="PATH", help="summarize an existing JSONL; run nothing")
    args = parser.parse_args(argv)
    if args.summary is not None:
        if not args.summary.is_file():
            print(f"bench/opinfo_higher.py: no such results file {str(args.summary)!r}; run the sweep with --out "
                  "first.", file=sys.stderr)
            return 2
        print(summary([json.loads(line) for line in args.summary.read_text().splitlines() if line.strip()]), end="")
        return 0
    if args.samples < 1 or args.max_n < 1 or not args.cap > 0:
        print(f"bench/opinfo_higher.py: --samples and --max-n must be at least 1 and --cap positive; got "
              f"{args.samples}, {args.max_n} and {args.cap}.", file=sys.stderr)
        return 2

    with one_quiet_thread():
        ops = {o.strip() for o in args.ops.split(",") if o.strip()} if args.ops else None
        rows = run(args.method, ops, args.samples, args.max_n, args.cap, args.out, args.db)
    print(summary(rows), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
