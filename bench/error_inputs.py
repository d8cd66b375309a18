"""Bad input from outside: ``ga.check`` on OpInfo's ``error_inputs``, the inputs each op must refuse.

Most ops of ``op_db`` with autograd have ``error_inputs``: arguments its own tests expect to raise (a shape that
does not fit, an index out of range, a dtype the op refuses), with the exception type they expect. Nobody here wrote
them, and they are the inputs a user's own code hands a checker by mistake. Each is built as ``bench/opinfo.py``
builds a sample (CaseBuilder), its floating tensors made float64 leaves that require grad, and checked once with
``ga.check`` (auto mode). The promise: a function that raises gets an ``error`` verdict whose record names the
function's exception, never an exception of gradaudit's own escaping, a hang or a silent pass. Cases with no
floating tensor to check are counted apart; an input that stops being an error for the forward once it is float64 (a
dtype mismatch) is counted by its verdict (scatter's then raises in its backward, in gradcheck too). Checks only:
one call each, ``--cap`` seconds at most.

    python bench/error_inputs.py                  (every op, about a minute on one core)
    python bench/error_inputs.py --ops cat,view   (a few ops)

It prints the counts and every case that broke the promise, or whose record names another exception than the
op's tests expect (a subclass, or the same error raised earlier as another type, is the op's business, not ours).
"""

from __future__ import annotations

import argparse
import collections
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from opinfo_higher import _alarm, _Timeout, one_quiet_thread  # noqa: E402 - the same timer and setup


def run(ops: set[str] | None, cap: float) -> tuple[collections.Counter[str], list[str]]:
    """(outcome counts, lines naming each case that broke the promise or named another exception)."""
    import opinfo
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    import gradaudit as ga

    expected: dict[int, type] = {}  # id(sample) -> the exception type OpInfo expects

    class ErrorBuilder(opinfo.CaseBuilder):
        source = "error_inputs"

        def generate(self, op: Any) -> Any:
            def leaf(t: Any) -> Any:
                return t.detach().to(torch.float64).requires_grad_() if isinstance(t, torch.Tensor) and \
                    t.is_floating_point() else t

            for error in op.error_inputs("cpu"):
                s = error.sample_input
                s.input = type(s.input)(leaf(t) for t in s.input) if isinstance(s.input, (list, tuple)) else \
                    leaf(s.input)
                s.args = tuple(leaf(a) for a in s.args)
                s.kwargs = {k: leaf(v) for k, v in s.kwargs.items()}
                expected[id(s)] = error.error_type
                yield s

    builder = ErrorBuilder(op_db, None)
    counts: collections.Counter[str] = collections.Counter()
    odd: list[str] = []
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for index, op in enumerate(op_db):
            if not op.supports_autograd or op.error_inputs_func is None or (ops and op.name not in ops):
                continue
            sample_index = 0
            while True:
                label = f"{op.name}{'.' + op.variant_test_name if op.variant_test_name else ''}#{sample_index}"
                try:
                    case = builder.case(index, sample_index)
                except RuntimeError as exc:  # error_inputs itself failed to generate
                    counts["could not be generated"] += 1
                    odd.append(f"{label}: {exc}")
                    break
                if case is None:
                    break
                sample_index += 1
                fn, checked, sample = case
                if not checked:
                    counts["no floating tensor to check"] += 1
                    continue
                want = expected[id(sample)]
                try:  # what the function raises, called as it is (its record must name that)
                    fn(*(t.detach().clone().requires_grad_() for t in checked))
                    raised: type | None = None
                except Exception as exc:  # noqa: BLE001 - the op's own error, expected here
                    raised = type(exc)
                signal.setitimer(signal.ITIMER_REAL, cap)
                try:
                    res = ga.check(fn, tuple(checked))
                except _Timeout:
                    counts["timeout"] += 1
                    odd.append(f"{label}: no answer within {cap:g} s")
                    continue
                except ga.SpecError as exc:  # refused before the function ran: said in a sentence
                    counts["refused with a SpecError"] += 1
                    odd.append(f"{label}: SpecError: {str(exc).splitlines()[0][:160]}")
                    continue
                except Exception as exc:  # noqa: BLE001 - an exception escaping a check is what this looks for
                    counts["an exception escaped"] += 1
                    odd.append(f"{label}: {type(exc).__name__} escaped: {str(exc).splitlines()[0][:160]}")
                    continue
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                if raised is None:  # float64 made it no error for the forward: whatever the check says of it
                    counts[f"the forward runs in float64; verdict {res.verdict}"] += 1
                    continue
                if res.verdict != "error" or f"raised {raised.__name__}" not in res.report():
                    counts["error, naming another exception than the function's"] += 1
                    odd.append(f"{label}: the function raised {raised.__name__}; the record says "
                               f"{res.report().splitlines()[0][:160]}")
                elif issubclass(raised, want):
                    counts["error, naming the function's exception (the one OpInfo expects)"] += 1
                else:
                    counts["error, naming the function's exception (not the one OpInfo expects)"] += 1
                    odd.append(f"{label}: OpInfo expects {want.__name__}, the function raised {raised.__name__} "
                               "(the op's business; the record names it)")
    finally:
        signal.signal(signal.SIGALRM, previous)
    return counts, odd


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", help="comma-separated OpInfo names (default: every op with autograd)")
    parser.add_argument("--cap", type=float, default=30.0, help="seconds per check at most (default 30)")
    args = parser.parse_args(argv)
    if not args.cap > 0:
        print(f"error: --cap must be positive; got {args.cap}.", file=sys.stderr)
        return 2
    with one_quiet_thread():
        wanted = {o.strip() for o in args.ops.split(",") if o.strip()} if args.ops else None
        counts, odd = run(wanted, args.cap)
    if not counts:
        print(f"error: no error input to check for --ops {args.ops!r}: name ops with autograd (as in "
              "`python bench/opinfo.py --ops`), or leave --ops out.", file=sys.stderr)
        return 2
    print(f"{sum(counts.values())} error inputs")
    for what, count in counts.most_common():
        print(f"- {what}: {count}")
    if odd:
        print("\nTo read:")
        for line in odd:
            print(f"- {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
