"""Conformance on PyTorch's module database (ModuleInfo ``module_db``): gradcheck against ``ga.check``.

Each module input (float64, CPU, eval and train mode) is checked as PyTorch's ``TestModule.test_grad``
builds it: the forward's tensor arguments and the module's parameters together, gradcheck (slow mode)
on the module's own parameters (it perturbs them in place), ``ga.check`` in auto and directional mode on
the same function with the parameters passed in (``torch.func.functional_call``, fresh copies of the
buffers per call: gradaudit works on copies). ``--api check_module``: ``ga.check_module`` on the parameters
alone, the forward's inputs fixed, against gradcheck of them, and whether it left the module, the inputs and the
random states as it found them (``bench/nn_tests.py``'s watch). Verdicts only: a per-call time cap (``--cap``), no
timing is reported.

    python bench/modules.py --out modules.jsonl            # every module, 4 inputs each (10-13 minutes)
    python bench/modules.py --modules nn.LPPool1d,nn.Linear --inputs 2
    python bench/modules.py --api check_module --out modules_cm.jsonl   # ga.check_module, and the caller's world

It prints the verdict table and every case where a verdict differs between the tools or the modes.
Modules whose ``test_grad`` ModuleInfo skips or expects to fail are marked.
"""

from __future__ import annotations

import argparse
import collections
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


class Timeout(Exception):
    pass


def _alarm(*_: Any) -> None:
    raise Timeout()


def _timed(f: Any, cap: int) -> tuple[Any, float, str | None]:
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(cap)
    start = time.perf_counter()
    try:
        return f(), time.perf_counter() - start, None
    except Timeout:
        return "timeout", time.perf_counter() - start, None
    except Exception as exc:  # noqa: BLE001 - a tool's error is a verdict here
        return "error", time.perf_counter() - start, f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        signal.alarm(0)


def _skips_grad(info: Any) -> str:
    """What ModuleInfo says of TestModule.test_grad for this module ('' if nothing)."""
    for d in getattr(info, "decorators", ()):
        if getattr(d, "cls_name", None) == "TestModule" and getattr(d, "test_name", None) == "test_grad":
            return "skip/xfail"
    return ""


def check_case(info: Any, mod_in: Any, training: bool, max_n: int, cap: int) -> dict[str, Any]:
    import torch
    import torch.utils._pytree as pytree
    from torch.testing._internal.common_utils import freeze_rng_state

    import gradaudit as ga

    cargs, ckw = mod_in.constructor_input.args, mod_in.constructor_input.kwargs
    m = info.module_cls(*cargs, **ckw).to("cpu").to(torch.float64)
    m.train(training)
    input_args, input_kwargs = mod_in.forward_input.args, mod_in.forward_input.kwargs
    if issubclass(info.module_cls, torch.nn.modules.lazy.LazyModuleMixin):
        with torch.no_grad():
            m(*input_args, **input_kwargs)
    params = tuple(m.parameters())
    other = {k: v for k, v in input_kwargs.items() if not isinstance(v, torch.Tensor)}
    kw_tensors = [(k, v) for k, v in input_kwargs.items() if isinstance(v, torch.Tensor)]
    flat, spec = pytree.tree_flatten(tuple(input_args) + params + tuple(v for _, v in kw_tensors))

    def split(values: tuple[Any, ...]) -> tuple[Any, Any, dict[str, Any]]:
        parts = pytree.tree_unflatten(list(values), spec)
        kw = dict(zip((k for k, _ in kw_tensors), parts[len(parts) - len(kw_tensors):])) if kw_tensors else {}
        return parts[:len(input_args)], parts[len(input_args):len(input_args) + len(params)], kw

    def with_own_parameters(*values: Any) -> Any:  # TestModule's function: gradcheck perturbs them in place
        args, _, kw = split(values)
        with freeze_rng_state():
            return pytree.tree_leaves(m(*args, **kw, **other))

    names = [n for n, _ in m.named_parameters()]
    buffers = dict(m.named_buffers())

    def with_parameters_passed(*values: Any) -> Any:
        args, ps, kw = split(values)
        state = {**{n: b.clone() for n, b in buffers.items()}, **dict(zip(names, ps))}
        return pytree.tree_leaves(torch.func.functional_call(m, state, tuple(args), {**kw, **other}))

    n = sum(t.numel() for t in flat if isinstance(t, torch.Tensor) and t.requires_grad)
    rec: dict[str, Any] = {"n": n}
    if n > max_n:
        rec["skipped"] = f"N = {n} > --max-n {max_n}"
        return rec
    state = {k: v.clone() for k, v in m.state_dict().items()}
    tol = info.gradcheck_nondet_tol
    ok, _, err = _timed(lambda: torch.autograd.gradcheck(with_own_parameters, flat, nondet_tol=tol), cap)
    rec["gradcheck"] = "pass" if ok is True else "fail" if err and "Jacobian mismatch" in err else str(ok)
    m.load_state_dict(state)
    for mode in ("auto", "directional"):
        xs = tuple(x.detach().clone().requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x
                   for x in flat)
        res, _, err = _timed(lambda: ga.check(with_parameters_passed, xs, mode=mode), cap)  # noqa: B023
        rec[mode] = res if isinstance(res, str) else str(res.verdict)
        if rec[mode] != "pass":
            said = [] if isinstance(res, str) else [f"'{r.input}': {r.reason}" for r in res.records
                                                     if r.verdict != "pass"]
            rec[mode + "_says"] = (err or "") if isinstance(res, str) else "; ".join(said)[:300]
    return rec


def check_module_case(info: Any, mod_in: Any, training: bool, max_n: int, cap: int) -> dict[str, Any]:
    """``ga.check_module(module, args, kwargs=...)`` (the parameters checked, the forward's inputs fixed) against
    gradcheck of the same parameters, and whether it left the module, the inputs and the random states as it found
    them (bench/nn_tests.py's watch)."""
    import torch
    import torch.utils._pytree as pytree
    from nn_tests import compare_check_module

    cargs, ckw = mod_in.constructor_input.args, mod_in.constructor_input.kwargs
    m = info.module_cls(*cargs, **ckw).to("cpu").to(torch.float64)
    m.train(training)
    detach = (lambda t: t.detach())  # noqa: E731 - the forward's inputs are fixed here
    args = pytree.tree_map_only(torch.Tensor, detach, tuple(mod_in.forward_input.args))
    kwargs = pytree.tree_map_only(torch.Tensor, detach, dict(mod_in.forward_input.kwargs))
    if issubclass(info.module_cls, torch.nn.modules.lazy.LazyModuleMixin):
        with torch.no_grad():
            m(*args, **kwargs)
    return compare_check_module(m, args, kwargs, max_n, cap, info.gradcheck_nondet_tol)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", default=None, help="comma-separated ModuleInfo names (default: all)")
    parser.add_argument("--inputs", type=int, default=4, help="module inputs per module and mode (default 4)")
    parser.add_argument("--max-n", type=int, default=3000, help="skip cases with more checked elements")
    parser.add_argument("--cap", type=int, default=120, help="seconds per tool call (default 120)")
    parser.add_argument("--out", default=None, help="JSON Lines of the cases (optional)")
    parser.add_argument("--seed", type=int, default=0, help="torch seed for each module's inputs (default 0)")
    parser.add_argument("--api", choices=("check", "check_module"), default="check",
                        help="check_module: ga.check_module on the parameters alone (the inputs fixed) against "
                             "gradcheck of them, and whether it left the module, the inputs and the random states "
                             "as it found them (default check: inputs and parameters together)")
    args = parser.parse_args(argv)

    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings(), torch.random.fork_rng():  # the caller's random state is left as it was
            warnings.simplefilter("ignore")  # module inputs warn (deprecations): not ours to show
            from torch.testing._internal.common_modules import module_db

            wanted = None if args.modules is None else {s.strip() for s in args.modules.split(",") if s.strip()}
            chosen = [mi for mi in module_db if wanted is None or mi.name in wanted]
            missing = sorted((wanted or set()) - {mi.name for mi in module_db})
            if missing and chosen:
                print(f"warning: no ModuleInfo named {', '.join(missing)}; checking the others", file=sys.stderr)
            if not chosen:
                print(f"error: no ModuleInfo named {args.modules!r} (expected names such as nn.Linear)",
                      file=sys.stderr)
                return 2
            from nn_tests import keep

            rows = []
            sink = open(args.out, "w") if args.out else None
            try:
                for info in chosen:
                    for training in (False, True):
                        torch.manual_seed(args.seed)  # the same inputs for a module whatever else runs
                        made = info.module_inputs_func(info, device="cpu", dtype=torch.float64, requires_grad=True,
                                                       training=training)
                        for index, mod_in in enumerate([x for x in made if x.forward_input is not None][:args.inputs]):
                            rec = {"module": info.name, "training": training, "index": index,
                                   "moduleinfo": _skips_grad(info)}
                            keep(rec, lambda info=info, mod_in=mod_in, training=training: (
                                check_case(info, mod_in, training, args.max_n, args.cap) if args.api == "check"
                                else check_module_case(info, mod_in, training, args.max_n, args.cap)), rows, sink)
            finally:
                if sink:
                    sink.close()
    finally:
        torch.set_num_threads(threads)
    checked = [r for r in rows if "gradcheck" in r]
    print(f"{len(rows)} cases from {len(chosen)} modules; {len(checked)} checked "
          f"({len(rows) - len(checked)} skipped or not built)\n")
    print("| gradcheck | ga auto | ga directional | cases | of them ModuleInfo skips test_grad |")
    print("|---|---|---|---:|---:|")
    counts = collections.Counter((r["gradcheck"], r["auto"], r["directional"]) for r in checked)
    for key, count in counts.most_common():
        marked = sum(1 for r in checked if (r["gradcheck"], r["auto"], r["directional"]) == key and r["moduleinfo"])
        print(f"| {' | '.join(key)} | {count} | {marked} |")
    odd = [r for r in checked if len({r["gradcheck"], r["auto"], r["directional"]}) > 1]
    if odd:
        print("\nCases where the verdicts differ:")
        for r in odd:
            says = r.get("auto_says") or r.get("directional_says") or ""
            print(f"- {r['module']} ({'train' if r['training'] else 'eval'}, input {r['index']}, N = {r['n']}"
                  f"{', ModuleInfo skips test_grad' if r['moduleinfo'] else ''}): gradcheck {r['gradcheck']}, "
                  f"auto {r['auto']}, directional {r['directional']}. {says}")
    if args.api == "check_module":
        from nn_tests import print_watched

        print_watched(checked, lambda r: f"{r['module']} ({'train' if r['training'] else 'eval'}, input {r['index']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
