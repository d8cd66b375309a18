"""Conformance on PyTorch's older NN test lists (``torch.testing._internal.common_nn``): gradcheck against ``ga.check``.

Cases: ``module_tests`` and ``get_new_module_tests()`` (run by test_nn.py as ``NewModuleTest``) and
``criterion_tests`` (``CriterionTest``), built as test_nn.py builds them: float64 default dtype (test_nn.py sets
it), a dict without a ``constructor`` taking ``getattr(nn, module_name)``, the module made from its
``constructor_args`` and its input from ``input``, ``input_fn`` or ``input_size`` (floating tensors require grad),
a criterion's target fixed. The checked tensors are the forward's inputs and the module's parameters together, as
``NewModuleTest._check_gradients`` passes them: gradcheck (slow mode, defaults) on the module's own parameters,
which it perturbs in place; ``ga.check`` in auto and directional mode on the same function with the parameters
passed in (``torch.func.functional_call``, the buffers copied per call: gradaudit works on copies). Left out, as
test_nn.py leaves them out of gradcheck: ``has_sparse_gradients`` (a sparse weight gradient), ``skip_double``,
``test_cpu=False`` and ``check_forward_only``. ``--order 2``: ``torch.autograd.gradgradcheck`` against the
double-backward records of ``ga.check(..., order=2)`` on the entries test_nn.py gradgradchecks (those with
``check_gradgrad=False`` left out; the anchor's verdict stays under the key ``gradcheck``). ``--api check_module``:
``ga.check_module(module, args)`` on the parameters alone, the inputs fixed, against gradcheck of the same
parameters, and whether it left the module (parameters, buffers, ``requires_grad`` and ``.grad``, training flags,
plain attributes), the inputs and torch's, Python's and NumPy's random states as it found them. Verdicts only: a
per-call time cap (``--cap``), no timing.

    python bench/nn_tests.py --out nn_tests.jsonl            # every entry (under a minute on one core)
    python bench/nn_tests.py --names Conv2d_groups,L1Loss_no_batch_dim_mean,CrossMapLRN2d
    python bench/nn_tests.py --order 2 --out nn_tests_order2.jsonl   # the double backward against gradgradcheck
    python bench/nn_tests.py --api check_module                      # ga.check_module, and the caller's world

It prints the verdict table and every case where a verdict differs between the tools or the modes. These
lists are older than ModuleInfo (``bench/modules.py``) and hold other configurations of the same modules
(padding modes, groups, dilation, reductions, losses with weights) that PyTorch's own tests gradcheck.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def entries() -> list[tuple[str, str, dict[str, Any]]]:
    """(name, kind, the test's dict) for every entry: kind "module" or "criterion"."""
    from torch.testing._internal import common_nn as cn

    out: list[tuple[str, str, dict[str, Any]]] = []
    for kind, tests in (("module", list(cn.module_tests) + list(cn.get_new_module_tests())),
                        ("criterion", list(cn.criterion_tests))):
        for params in tests:
            params = dict(params)
            if "constructor" not in params:
                params["constructor"] = getattr(__import__("torch").nn, params.pop("module_name"))
            else:
                params.pop("module_name", None)
            name = params.get("fullname") or (params["constructor"].__name__
                                              + (f"_{params['desc']}" if params.get("desc") else ""))
            out.append((name, kind, params))
    return out


def keep(rec: dict[str, Any], build: Any, rows: list[dict[str, Any]], sink: Any) -> None:
    """rec updated with build() (the harness's case), or with the reason it could not be built; kept in rows and,
    with --out, written as one JSON line at once (bench/modules.py keeps its cases the same way)."""
    try:
        rec.update(build())
    except Exception as exc:  # noqa: BLE001 - the harness could not build the case
        rec["build_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    rows.append(rec)
    if sink:
        sink.write(json.dumps(rec) + "\n")
        sink.flush()


def _sized(n: int, max_n: int, none: str) -> dict[str, Any]:
    """A case's record to start from: its N, and why it is left out (*none* where nothing is checked, or N over
    --max-n), if it is."""
    rec: dict[str, Any] = {"n": n}
    if not n:
        rec["skipped"] = none
    elif n > max_n:
        rec["skipped"] = f"N = {n} > --max-n {max_n}"
    return rec


def _skipped(params: dict[str, Any], order: int) -> str:
    """Why test_nn.py leaves an entry out of gradcheck (or gradgradcheck, *order* 2), '' if it does not."""
    skip = [k for k in ("has_sparse_gradients", "skip_double", "check_forward_only") if params.get(k)]
    if params.get("test_cpu") is False:
        skip.append("test_cpu=False")
    if order == 2 and params.get("check_gradgrad") is False:
        skip.append("check_gradgrad=False")
    return ", ".join(skip)


def _build(kind: str, params: dict[str, Any]) -> tuple[Any, Any, Any, tuple[Any, ...]]:
    """(module, input, target, extra_args) as test_nn.py builds them, in float64 (target None for a module)."""
    import torch
    from torch.testing._internal import common_nn as cn
    from torch.testing._internal.common_utils import set_default_dtype

    with set_default_dtype(torch.float64):
        test = (cn.NewModuleTest if kind == "module" else cn.CriterionTest)(**params)
        m = test.constructor(*test.constructor_args)
        raw = test._get_input()
        target = test._get_target() if kind == "criterion" else None
        extra = tuple(test.extra_args) if kind == "criterion" else ()
    return m, raw, target, extra


def check_case(kind: str, params: dict[str, Any], max_n: int, cap: int, order: int = 1) -> dict[str, Any]:
    import torch
    import torch.utils._pytree as pytree
    from modules import _timed
    from torch.testing._internal.common_utils import freeze_rng_state

    import gradaudit as ga

    skip = _skipped(params, order)
    if skip:
        return {"skipped": skip}
    m, raw, target, extra = _build(kind, params)
    inputs = raw if isinstance(raw, tuple) else (raw,)
    params_ = tuple(m.parameters())
    flat, spec = pytree.tree_flatten(tuple(inputs) + params_)
    count = len(inputs)

    def call(module_args: tuple[Any, ...]) -> Any:
        return m(*module_args) if kind == "module" else m(*module_args, target, *extra)

    def with_own_parameters(*values: Any) -> Any:  # NewModuleTest's function: gradcheck perturbs them in place
        parts = pytree.tree_unflatten(list(values), spec)
        with freeze_rng_state():
            return pytree.tree_leaves(call(tuple(parts[:count])))

    names = [n for n, _ in m.named_parameters()]
    buffers = dict(m.named_buffers())

    def with_parameters_passed(*values: Any) -> Any:
        parts = pytree.tree_unflatten(list(values), spec)
        state = {**{n: b.clone() for n, b in buffers.items()}, **dict(zip(names, parts[count:]))}
        args = tuple(parts[:count]) if kind == "module" else (*parts[:count], target, *extra)
        return pytree.tree_leaves(torch.func.functional_call(m, state, args))

    rec = _sized(sum(t.numel() for t in flat if isinstance(t, torch.Tensor) and t.requires_grad), max_n,
                 "nothing requires grad")
    if "skipped" in rec:
        return rec
    state = {k: v.clone() for k, v in m.state_dict().items()}
    anchor = torch.autograd.gradcheck if order == 1 else torch.autograd.gradgradcheck
    ok, _, err = _timed(lambda: anchor(with_own_parameters, flat), cap)
    rec["gradcheck"] = "pass" if ok is True else "fail" if err and "Jacobian mismatch" in err else str(ok)
    if err:
        rec["gradcheck_says"] = err[:300]
    m.load_state_dict(state)
    for mode in ("auto", "directional"):
        xs = tuple(x.detach().clone().requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x
                   for x in flat)
        res, _, err = _timed(lambda: ga.check(with_parameters_passed, xs, mode=mode, order=order), cap)  # noqa: B023
        # order 2: the double-backward records' verdict (fail if one fails, else inconclusive if one is), as
        # bench/opinfo_higher.py reads it against gradgradcheck
        records = [] if isinstance(res, str) else [r for r in res.records
                                                   if order == 1 or r.method == "double backward"]
        verdicts = {r.verdict for r in records}
        rec[mode] = (res if isinstance(res, str) else "error" if res.verdict == "error" or not records
                     else next((v for v in ("fail", "inconclusive") if v in verdicts), "pass"))
        if rec[mode] != "pass":
            said = [f"'{r.input}': {r.reason}" for r in records if r.verdict != "pass"]
            rec[mode + "_says"] = (err or "") if isinstance(res, str) else "; ".join(said)[:300]
    return rec


HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks", "_state_dict_hooks",
         "_load_state_dict_pre_hooks")  # a module's own hook dicts: one left registered is a change


def _plain(value: Any) -> Any:
    """A plain attribute's value where it compares by value (numbers, strings, tuples of them), else its type."""
    if isinstance(value, (int, float, str, bool, type(None))):
        return value
    if isinstance(value, (tuple, list)) and all(isinstance(v, (int, float, str, bool, type(None))) for v in value):
        return tuple(value)
    return type(value).__name__


def _world(m: Any, args: Any) -> dict[str, Any]:
    """What check_module must leave as it found it. Per parameter and buffer (non-persistent ones too): the object
    itself, its version counter (an in-place write, even of equal values, breaks a graph that saved it), dtype,
    device, requires_grad, values and .grad; per module: the object, its training flag, its plain attributes'
    values and its hook dicts' sizes; the inputs (object, version, values); torch's, Python's and NumPy's whole
    random states."""
    import random

    import numpy as np
    import torch
    import torch.utils._pytree as pytree

    def tensor(t: Any) -> tuple[Any, ...]:
        grad = getattr(t, "grad", None)
        return (id(t), t._version, t.dtype, t.device, t.requires_grad, t.detach().clone(),
                None if grad is None else grad.detach().clone())

    return {
        "tensors": {**{f"parameter '{n}'": tensor(p) for n, p in m.named_parameters(remove_duplicate=False)},
                    **{f"buffer '{n}'": tensor(b) for n, b in m.named_buffers(remove_duplicate=False)}},
        "modules": {n: (id(mod), mod.training, {k: _plain(v) for k, v in vars(mod).items() if not k.startswith("_")},
                        tuple(len(getattr(mod, h, {})) for h in HOOKS)) for n, mod in m.named_modules()},
        "inputs": [tensor(x) for x in pytree.tree_leaves(args) if isinstance(x, torch.Tensor)],
        "random": (torch.get_rng_state(), random.getstate(), repr(np.random.get_state())),
    }


def _same(a: Any, b: Any) -> bool:
    """Two tensors alike in shape, dtype and values, NaN equal to NaN (a NaN is not a change); None alike None."""
    import torch

    if a is None or b is None:
        return a is None and b is None
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if torch.equal(a, b):
        return True
    return bool((a.is_floating_point() or a.is_complex()) and ((a == b) | (a.isnan() & b.isnan())).all())


def _changed(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two snapshots of :func:`_world`, said in words (empty: nothing)."""
    import torch

    said = []
    tensors, later = before["tensors"], after["tensors"]
    said += [f"{k} removed" for k in tensors if k not in later] + [f"{k} added" for k in later if k not in tensors]
    for k, (ident, version, dtype, device, grad_flag, value, grad) in tensors.items():
        if k not in later:
            continue
        ident2, version2, dtype2, device2, grad_flag2, value2, grad2 = later[k]
        if ident2 != ident:
            said.append(f"{k} replaced by another tensor")
        if version2 != version:
            said.append(f"{k} written in place")
        if (dtype2, device2, grad_flag2) != (dtype, device, grad_flag) or not _same(value, value2):
            said.append(f"{k}'s dtype, device, requires_grad or values")
        if not _same(grad, grad2):
            said.append(f"{k}'s .grad")
    modules, later_modules = before["modules"], after["modules"]
    if modules.keys() != later_modules.keys():
        said.append("the submodules")
    for n, (ident, training, attrs, hooks) in modules.items():
        if n in later_modules and later_modules[n] != (ident, training, attrs, hooks):
            said.append(f"module '{n or 'the model'}' (the object, its training flag, a plain attribute or a hook)")
    if len(before["inputs"]) != len(after["inputs"]) or any(
            x[:2] != y[:2] or not _same(x[5], y[5]) for x, y in zip(before["inputs"], after["inputs"])):
        said.append("an input")
    (torch_state, python_state, numpy_state), (torch2, python2, numpy2) = before["random"], after["random"]
    if not torch.equal(torch_state, torch2) or python_state != python2 or numpy_state != numpy2:
        said.append("a random state")
    return said


def check_module_case(kind: str, params: dict[str, Any], max_n: int, cap: int) -> dict[str, Any]:
    """``ga.check_module(module, args)`` (the parameters checked, the inputs fixed) against gradcheck of the same
    parameters, and whether the module, the inputs and the random states are as they were after it."""
    import torch

    skip = _skipped(params, 1)
    if skip:
        return {"skipped": skip}
    m, raw, target, extra = _build(kind, params)
    given = raw if isinstance(raw, tuple) else (raw,)
    inputs = tuple(x.detach() if isinstance(x, torch.Tensor) else x for x in given)
    args = inputs if kind == "module" else (*inputs, target, *extra)
    return compare_check_module(m, args, {}, max_n, cap)


def compare_check_module(m: Any, args: tuple[Any, ...], kwargs: dict[str, Any], max_n: int, cap: int,
                         nondet_tol: float = 0.0) -> dict[str, Any]:
    """gradcheck of *m*'s parameters (the forward's *args* and *kwargs* fixed) and ``ga.check_module`` in auto and
    directional mode, each watched (:func:`_world`): the record of one case (bench/modules.py calls it too)."""
    import torch
    import torch.utils._pytree as pytree
    from modules import _timed
    from torch.testing._internal.common_utils import freeze_rng_state

    import gradaudit as ga

    checked = tuple(p for p in m.parameters() if p.requires_grad)
    rec = _sized(sum(p.numel() for p in checked), max_n, "no parameter requires grad")
    if "skipped" in rec:
        return rec

    def with_own_parameters(*_: Any) -> Any:  # gradcheck perturbs the parameters in place
        with freeze_rng_state():
            return pytree.tree_leaves(m(*args, **kwargs))

    state = {k: v.clone() for k, v in m.state_dict().items()}
    ok, _, err = _timed(lambda: torch.autograd.gradcheck(with_own_parameters, checked, nondet_tol=nondet_tol), cap)
    rec["gradcheck"] = "pass" if ok is True else "fail" if err and "Jacobian mismatch" in err else str(ok)
    if err:
        rec["gradcheck_says"] = err[:300]
    m.load_state_dict(state)
    for mode in ("auto", "directional"):
        before = _world(m, (args, kwargs))
        res, _, err = _timed(lambda: ga.check_module(m, args, kwargs=kwargs or None, mode=mode), cap)  # noqa: B023
        rec[mode] = res if isinstance(res, str) else str(res.verdict)
        changed = _changed(before, _world(m, (args, kwargs)))
        if changed:
            rec[mode + "_changed"] = changed
        if rec[mode] != "pass":
            said = [] if isinstance(res, str) else [f"'{r.input}': {r.reason}" for r in res.records
                                                     if r.verdict != "pass"]
            rec[mode + "_says"] = (err or "") if isinstance(res, str) else "; ".join(said)[:300]
    return rec


def print_watched(checked: list[dict[str, Any]], label: Any) -> None:
    """The watch's summary over the *checked* records of a --api check_module sweep; *label(record)* names one."""
    moved = [r for r in checked if r.get("auto_changed") or r.get("directional_changed")]
    print(f"\ncheck_module left the module, the inputs and the random states as it found them in "
          f"{len(checked) - len(moved)} of {len(checked)} cases" + (":" if moved else "."))
    for r in moved:
        print(f"- {label(r)}: changed {', '.join(r.get('auto_changed', []) + r.get('directional_changed', []))}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--names", default=None, help="comma-separated test names (default: all)")
    parser.add_argument("--max-n", type=int, default=3000, help="skip cases with more checked elements")
    parser.add_argument("--cap", type=int, default=120, help="seconds per tool call (default 120)")
    parser.add_argument("--out", default=None, help="JSON Lines of the cases (optional)")
    parser.add_argument("--seed", type=int, default=0, help="torch seed before each entry (default 0)")
    parser.add_argument("--api", choices=("check", "check_module"), default="check",
                        help="check_module: ga.check_module on the parameters alone (the inputs fixed) against "
                             "gradcheck of them, and whether it left the module, the inputs and the random states "
                             "as it found them (default check: inputs and parameters together)")
    parser.add_argument("--order", type=int, choices=(1, 2), default=1,
                        help="2: ga.check(order=2)'s double-backward records against gradgradcheck, on the entries "
                             "test_nn.py gradgradchecks (default 1: the backward against gradcheck)")
    args = parser.parse_args(argv)
    if args.api == "check_module" and args.order == 2:
        print("error: --api check_module checks the first-order gradients of the parameters; --order 2 goes with the "
              "default --api check. Run them apart.", file=sys.stderr)
        return 2
    if args.cap < 1 or args.max_n < 1:
        print(f"error: --cap and --max-n must be 1 or more; got {args.cap} and {args.max_n}.", file=sys.stderr)
        return 2

    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings(), torch.random.fork_rng():  # the caller's random state is left as it was
            warnings.simplefilter("ignore")  # the lists warn (deprecated arguments): not ours to show
            every = entries()
            wanted = None if args.names is None else {s.strip() for s in args.names.split(",") if s.strip()}
            chosen = [e for e in every if wanted is None or e[0] in wanted]
            missing = sorted((wanted or set()) - {e[0] for e in every})
            if missing and chosen:
                print(f"warning: no common_nn test named {', '.join(missing)}; checking the others", file=sys.stderr)
            if not chosen:
                print(f"error: no common_nn test named {args.names!r} (expected names such as Conv2d_groups or "
                      "L1Loss_no_batch_dim_mean; leave --names out for every one)", file=sys.stderr)
                return 2
            rows = []
            sink = open(args.out, "w") if args.out else None
            try:
                for name, kind, params in chosen:
                    torch.manual_seed(args.seed)  # the same inputs for an entry whatever else runs
                    rec: dict[str, Any] = {"name": name, "kind": kind}
                    keep(rec, lambda kind=kind, params=params: (
                        check_case(kind, params, args.max_n, args.cap, args.order) if args.api == "check"
                        else check_module_case(kind, params, args.max_n, args.cap)), rows, sink)
            finally:
                if sink:
                    sink.close()
    finally:
        torch.set_num_threads(threads)
    checked = [r for r in rows if "gradcheck" in r]
    skipped = collections.Counter(r.get("skipped") or ("not built" if "build_error" in r else "")
                                  for r in rows if "gradcheck" not in r)
    print(f"{len(rows)} entries; {len(checked)} checked; left out: "
          + (", ".join(f"{why} {k}" for why, k in skipped.most_common()) or "none") + "\n")
    print(f"| {'gradcheck' if args.order == 1 else 'gradgradcheck'} | ga auto | ga directional | cases |")
    print("|---|---|---|---:|")
    for key, count in collections.Counter((r["gradcheck"], r["auto"], r["directional"]) for r in checked).most_common():
        print(f"| {' | '.join(key)} | {count} |")
    odd = [r for r in checked if len({r["gradcheck"], r["auto"], r["directional"]}) > 1]
    if odd:
        print("\nCases where the verdicts differ:")
        for r in odd:
            says = r.get("auto_says") or r.get("directional_says") or r.get("gradcheck_says") or ""
            print(f"- {r['name']} ({r['kind']}, N = {r['n']}): gradcheck {r['gradcheck']}, auto {r['auto']}, "
                  f"directional {r['directional']}. {says}")
    if args.api == "check_module":
        print_watched(checked, lambda r: r["name"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
