"""Conformance and speed sweep: gradaudit against torch.autograd.gradcheck over PyTorch's OpInfo database.

Cases: every op in ``torch.testing._internal.common_methods_invocations.op_db`` with ``supports_autograd``, float64,
CPU, the first ``--samples K`` sample inputs of ``op.sample_inputs("cpu", torch.float64, requires_grad=True)``
(``--dtype complex128``: the same for the ops whose forward supports complex128 on CPU, their samples in complex128,
which both tools check with Wirtinger calculus; ``--db python_ref_db``: the Python references ``torch._refs.*`` of
``python_ref_db`` whose torch op has autograd, the same samples through functions written in Python over torch's
primitives, whose backward is autograd's through that composition, or none where a primitive has no autograd
formula; ``--db foreach``: the ``torch._foreach_*`` ops of the ``foreach_*_op_db`` lists, FOREACH_TENSORS tensors
per list, every tensor that requires grad checked, in the sample's lists of ``args`` and ``kwargs`` too
(TestGradients' helper, mirrored here for op_db, unpacks only a list ``input``), OpInfo's skips read for
``TestForeach.test_autodiff``; ``--db autograd_function_db``, ``--db custom_op_db`` and ``--db hop_db``: the custom
``autograd.Function`` classes, ``torch.library`` custom ops and higher-order ops PyTorch's functorch tests run, in
``torch.testing._internal``'s modules of those names (autograd_function_db's called directly: its
``gradcheck_wrapper`` takes outputs, not the op) (global seed 1234 before each op, as PyTorch's test cases seed).
Each case is built the way PyTorch's ``TestBwdGradients.test_fn_grad`` builds it (``TestGradients._check_helper``):
the function variant ``op.get_op()`` called through ``op.gradcheck_wrapper``, ``sample.output_process_fn_grad``
applied to the output, the tensors that require grad (from ``sample.input``, a top-level tensor list in it,
``sample.args`` and ``sample.kwargs``) as the checked inputs, passed positionally; everything else stays fixed in
the closure.

Four tools per case, each on a fresh ``detach().clone().requires_grad_()`` of the inputs:
``gradcheck`` slow mode (defaults) and fast mode (``fast_mode=True``): "pass" when it returns True, "fail"
on ``GradcheckError``, "error" on any other exception; ``ga.check(fn, inputs, mode="auto")`` and
``mode="directional"``: ``res.verdict``, or "error" when it raises. A tool call that runs past
``--case-timeout`` has its worker killed and replaced and gets "timeout"; a worker that dies (segfault,
memory) gives "crash". Before the tools run, one forward (for the output size M) and one backward warm
the op's kernels, so no tool pays the op's first-call cost. The wall time of each tool call is measured
inside the worker, around the call only. Each tool runs up to ``--repeat`` times per case (default 5), the
tools interleaved round by round so that all four are sampled across the same stretch of a shared machine's
time; a case whose round (all four tools once) took under ``--round-budget`` seconds (default 0.05) gets more
rounds, up to ``--repeat-max`` in all (default 15), so that millisecond calls, whose medians of 5 still moved
by 1.5x from sweep to sweep, are sampled as the anchor benchmarks sample theirs (a median of 5 or more calls,
more while they are quick); a case's time is the median of its calls (all of them are kept), and a tool
whose calls take longer than ``--repeat-under`` seconds is not repeated: after one call over ``SECOND_CALL``
seconds, after two otherwise (a first call that stalled, as one right after another tool ran out of memory on
the same case, gets a second chance; when that one is quick, the repeats go on). The verdict is the first
call's (a later call that disagrees is recorded: it would be a tool whose verdict is not a function of its
inputs). Workers are spawned processes
with one thread each (``torch.set_num_threads(1)``) and an address-space cap (``--mem-limit-gb``, default half
the RAM shared out), so a huge dense Jacobian fails as a MemoryError-style "error" instead of taking the machine down.

Each case also records N (checked input elements), M (elements of the floating/complex outputs), and
whether OpInfo itself skips or expects failure for ``TestBwdGradients.test_fn_grad`` on CPU in that dtype (its
``DecorateInfo`` entries, plain decorators, ``supported_backward_dtypes``); such cases are run too, but
left out of the cross-tables and listed on their own. Decorators OpInfo puts on the other gradient tests
(gradgrad, forward AD, method/in-place variants) are kept as notes, as are ``gradcheck_fast_mode``,
``check_batched_grad`` and ``gradcheck_nondet_tol``.

Results go to a JSON Lines file, one line per case, appended as each case finishes (a killed sweep keeps
what it had), plus a "run" line per invocation and a "first_call" line (cold-start timings, measured in
fresh subprocesses after the sweep). The Markdown summary at the end is computed from that file.

Run (from the repository root; the full op_db at K = 2 took five to eight minutes on one core with torch 2.13
at --repeat 1, and about twice that at the default --repeat 5,
most of it gradcheck's slow mode on a few large cases):
    python bench/opinfo.py --workers 2 --out opinfo.jsonl
    python bench/opinfo.py --ops sin,matmul,nn.functional.conv2d --samples 1 --out few.jsonl
    python bench/opinfo.py --dtype complex128 --repeat 1 --out complex.jsonl  (verdicts on complex samples)
    python bench/opinfo.py --db python_ref_db --out refs.jsonl        (torch._refs: the same samples, other code)
    python bench/opinfo.py --db foreach --out foreach.jsonl           (torch._foreach_*: lists of tensors)
    python bench/opinfo.py --db custom_op_db --samples 4 --out custom_ops.jsonl   (custom ops; and
                                                                      autograd_function_db: custom Functions)
    python bench/opinfo.py --limit 50 --resume --out opinfo.jsonl     (skips cases already written)
    python bench/opinfo.py --summary opinfo.jsonl                     (re-renders, runs nothing)
"""

from __future__ import annotations

import argparse
import datetime
import gc as garbage
import hashlib
import itertools
import json
import math
import multiprocessing
import os
import platform
import queue
import re
import shlex
import statistics
import subprocess
import sys
import threading
import time
import unittest
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

# the OpInfo lists a sweep can take: common_methods_invocations' own, and the custom autograd.Functions, custom ops
# (torch.library) and higher-order ops (cond, map, ...) PyTorch's functorch and dynamo tests run (modules of their own
# in torch.testing._internal)
DBS = ("op_db", "python_ref_db", "foreach", "autograd_function_db", "custom_op_db", "hop_db")
CUSTOM_DBS = ("autograd_function_db", "custom_op_db", "hop_db")
# autograd_function_db's sorts give a gradcheck_wrapper that takes their outputs, not the op: called as OpInfo calls
# one, it raises in every tool; the ops of that list are called as they are
UNWRAPPED_DBS = ("autograd_function_db",)
FOREACH = ("foreach_unary_op_db", "foreach_binary_op_db", "foreach_pointwise_op_db", "foreach_reduce_op_db",
           "foreach_other_op_db")  # what --db foreach joins
FOREACH_TENSORS = 3  # tensors per list in a foreach sample (sample_inputs' num_input_tensors)
SEED = 1234  # torch.testing._internal.common_utils.SEED, what PyTorch's TestCase.setUp seeds with
TOOLS = ("gradcheck_slow", "gradcheck_fast", "gradaudit_auto", "gradaudit_directional")
PAIRS = (("gradcheck_slow", "gradaudit_auto"), ("gradcheck_fast", "gradaudit_directional"))
HARNESS = ("timeout", "crash")  # verdicts the harness gives when a tool call never returned
CHECKED = ("pass", "fail", "inconclusive")  # verdicts of a tool that actually compared gradients
GC_ORDER = ("pass", "fail", "error", "timeout", "crash")
GA_ORDER = ("pass", "fail", "inconclusive", "error", "timeout", "crash")
BUCKETS = ((100, "N·M ≤ 100"), (10**4, "≤ 10⁴"), (10**6, "≤ 10⁶"), (math.inf, "> 10⁶"))
DETAIL_CHARS = 2000
GROUP_ABOVE = 20  # a disagreement list longer than this is grouped by message
STARTUP_TIMEOUT_S = 600.0  # a fresh worker imports torch and op_db (seconds) before it takes a task


# --------------------------------------------------------------------------------------------------------
# OpInfo's own expectations for the gradient test on CPU in the sweep's dtype (parent process; no op is run)

class _ProbeTest:
    """Stands in for a device-generic test instance when a decorator is probed."""

    device_type = "cpu"
    precision = 0.0
    rel_tol = 0.0


def decorator_effect(dec: Any) -> tuple[str, str] | None:
    """("skip" | "xfail" | "note", reason) when *dec* would skip or expect failure of a CPU test, else None.

    expectedFailure and unittest.skip are read from the attributes they set; anything else (onlyCUDA,
    skipCPUIfNoLapack, skipCPUIf(...)) is applied to a dummy test and called on a CPU stand-in, the way
    PyTorch's device-generic tests would call it: a SkipTest raised there is a skip. slowTest is a note:
    PyTorch runs those tests in its slow CI job, not never.
    """
    name = getattr(dec, "__name__", type(dec).__name__)
    if name == "slowTest":
        return ("note", "slowTest (run only with PYTORCH_TEST_WITH_SLOW=1)")

    def target(self: Any, *args: Any, **kwargs: Any) -> None:  # fresh each time: decorators mark it
        return None

    try:
        wrapped = dec(target)
    except Exception:
        return None
    if getattr(wrapped, "__unittest_expecting_failure__", False):
        return ("xfail", "unittest.expectedFailure")
    if getattr(wrapped, "__unittest_skip__", False):
        return ("skip", getattr(wrapped, "__unittest_skip_why__", "") or "unittest.skip")
    if wrapped is target or not callable(wrapped):
        return None
    try:
        wrapped(_ProbeTest())
    except unittest.SkipTest as exc:
        return ("skip", str(exc) or name)
    except Exception:
        return None
    return None


def _active(info: Any, cls_name: str | None, test_name: str | None, dtype: Any) -> bool:
    try:
        return bool(info.is_active(cls_name, test_name, "cpu", dtype, {}))
    except Exception:  # an active_if that needs test parameters: not active for a plain gradient test
        return False


#: per checked method, the PyTorch gradient test whose skips and expected failures apply: (classes, test name)
TESTS = {"grad": (("TestBwdGradients", "TestGradients"), "test_fn_grad"),
         "forward": (("TestFwdGradients", "TestGradients"), "test_forward_mode_AD"),
         "gradgrad": (("TestBwdGradients", "TestGradients"), "test_fn_gradgrad")}


def opinfo_expectations(op: Any, dtype_name: str = "float64", method: str = "grad") -> dict[str, Any]:
    """What OpInfo says about TestBwdGradients.test_fn_grad (a foreach op: TestForeach.test_autodiff; *method*
    "forward": TestFwdGradients.test_forward_mode_AD, "gradgrad": TestBwdGradients.test_fn_gradgrad) for *op* on
    CPU *dtype_name*, plus related notes."""
    import torch
    from torch.testing._internal.opinfo.core import DecorateInfo

    dtype = getattr(torch, dtype_name)
    status: str | None = None
    reason = ""
    notes: list[str] = []
    classes, test = (("TestForeach",), "test_autodiff") if _foreach(op) else TESTS[method]
    if getattr(op, "torch_opinfo", None) is not None:  # a Python reference: PyTorch tests no gradient of it
        return {"status": None, "reason": "", "notes": ["a Python reference: PyTorch runs no gradient test on it, so "
                                                        "OpInfo has no skip or xfail for one"],
                "gradcheck_fast_mode": op.gradcheck_fast_mode, "check_batched_grad": op.check_batched_grad,
                "gradcheck_nondet_tol": op.gradcheck_nondet_tol}
    if dtype not in op.supported_backward_dtypes("cpu"):
        status, reason = "skip", f"{dtype_name} not in supported_backward_dtypes('cpu'): {test} skips it"
    seen: set[int] = set()
    for info in itertools.chain(op.decorators, getattr(op, "skips", ())):
        if id(info) in seen:
            continue
        seen.add(id(info))
        if isinstance(info, DecorateInfo):
            primary = any(_active(info, cls, test, dtype) for cls in classes)
            related = (not primary and info.cls_name in ("TestBwdGradients", "TestFwdGradients", "TestGradients")
                       and _active(info, info.cls_name, info.test_name, dtype))
            where = f"{info.cls_name}.{info.test_name or '*'}" if info.cls_name else "all tests"
            decorators = info.decorators
        else:
            primary, related, where, decorators = True, False, "all tests", [info]
        if not (primary or related):
            continue
        for dec in decorators:
            effect = decorator_effect(dec)
            if effect is None:
                continue
            kind, why = effect
            if primary and kind in ("skip", "xfail") and status != "skip":
                status, reason = kind, f"{why} ({where})"
            else:
                notes.append(f"{kind} {where}: {why}")
    return {
        "status": status,
        "reason": reason,
        "notes": notes,
        "gradcheck_fast_mode": op.gradcheck_fast_mode,
        "check_batched_grad": op.check_batched_grad,
        "gradcheck_nondet_tol": op.gradcheck_nondet_tol,
    }


def load_db(name: str) -> list[Any]:
    """The OpInfo list *name* (one of DBS) from torch.testing._internal.common_methods_invocations."""
    import importlib

    from torch.testing._internal import common_methods_invocations as cmi

    if name in CUSTOM_DBS:
        return list(getattr(importlib.import_module(f"torch.testing._internal.{name}"), name))
    if name == "foreach":
        return [op for part in FOREACH for op in getattr(cmi, part)]
    return list(getattr(cmi, name))


def _foreach(op: Any) -> bool:
    return type(op).__name__ == "ForeachFuncInfo"


# --------------------------------------------------------------------------------------------------------
# Worker process: builds cases and runs one tool per task

def _limit_memory(gigabytes: float) -> None:
    if gigabytes <= 0:
        return
    try:
        import resource
    except ImportError:  # not on this platform
        return
    limit = int(gigabytes * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def physical_memory_gb() -> float:
    """Physical memory in GiB, 0 where it cannot be read (then no cap)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (AttributeError, ValueError, OSError):
        return 0.0


def gradaudit_source_hash() -> str:
    """A short hash of gradaudit's installed source, to tell which code a record was made with."""
    import gradaudit

    root = Path(gradaudit.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".toml", ".json", ".j2"):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _exception_fields(exc: BaseException) -> dict[str, Any]:
    text = str(exc)
    return {"error_type": type(exc).__name__, "message": _first_line(text)[:300], "detail": text[:DETAIL_CHARS]}


def _describe(value: Any) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        flag = " grad" if value.requires_grad else ""
        return f"T{list(value.shape)} {str(value.dtype).removeprefix('torch.')}{flag}"
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
        return "[" + ", ".join(_describe(v) for v in value) + "]"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _output_tensors(out: Any) -> list[Any]:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _output_tensors(o)]
    return []


class CaseBuilder:
    """Samples of one op (cached: the first *samples*, every one for None), and the gradcheck-style function of
    one sample."""

    def __init__(self, op_db: list[Any], samples: int | None, dtype_name: str = "float64",
                 wrapped: bool = True) -> None:
        self.op_db = op_db
        self.wrapped = wrapped  # the op called through its gradcheck_wrapper (not for UNWRAPPED_DBS)
        self.samples = samples
        self.dtype_name = dtype_name
        self.key: int | None = None
        self.cached: list[Any] = []
        self.error: str | None = None

    source = "sample_inputs"  # what generate() calls (its failures are named so)

    def generate(self, op: Any) -> Iterable[Any]:
        """The op's samples, in OpInfo's order (a subclass takes others: bench/reference_inputs.py)."""
        import torch

        extra = {"num_input_tensors": [FOREACH_TENSORS]} if _foreach(op) else {}
        return op.sample_inputs("cpu", getattr(torch, self.dtype_name), requires_grad=True, **extra)

    def sample(self, op_index: int, index: int) -> Any:
        """The *index*-th sample, None past the last; raises RuntimeError when generating it failed."""
        import torch

        if self.key != op_index:
            self.key, self.cached, self.error = op_index, [], None
            torch.manual_seed(SEED)
            try:
                for sample in self.generate(self.op_db[op_index]):
                    self.cached.append(sample)
                    if self.samples is not None and len(self.cached) >= self.samples:
                        break
            except Exception as exc:
                self.error = f"{type(exc).__name__}: {_first_line(str(exc))[:300]}"
        if index < len(self.cached):
            return self.cached[index]
        if self.error is not None:
            raise RuntimeError(f"{self.source} failed at sample {len(self.cached)}: {self.error}")
        return None

    def case(self, op_index: int, index: int) -> tuple[Callable[..., Any], list[Any], Any] | None:
        """(fn, checked input tensors, sample), as TestGradients._check_helper builds them (which unpacks a list
        of tensors in ``sample.input`` only; for a foreach op, whose ``args`` hold lists too, in every position)."""
        import torch
        from torch.testing._internal.common_utils import is_iterable_of_tensors

        sample = self.sample(op_index, index)
        if sample is None:
            return None
        op = self.op_db[op_index]
        variant = op.get_op()
        all_args: Iterable[Any]
        if _foreach(op):
            all_args = itertools.chain.from_iterable(
                value if is_iterable_of_tensors(value) else (value,)
                for value in (sample.input, *sample.args, *sample.kwargs.values()))
        elif is_iterable_of_tensors(sample.input):
            all_args = itertools.chain(sample.input, sample.args, sample.kwargs.values())
        else:
            all_args = itertools.chain((sample.input,), sample.args, sample.kwargs.values())
        checked = [x for x in all_args
                   if isinstance(x, torch.Tensor) and x.requires_grad and (x.is_floating_point() or x.is_complex())]

        def recompose(inputs: tuple[Any, ...], value: Any, position: int) -> tuple[Any, int]:
            if is_iterable_of_tensors(value):
                rebuilt = []
                for x in value:
                    if isinstance(x, torch.Tensor) and x.requires_grad:
                        rebuilt.append(inputs[position])
                        position += 1
                    else:
                        rebuilt.append(x)
                return rebuilt, position
            if isinstance(value, torch.Tensor) and value.requires_grad:
                return inputs[position], position + 1
            return value, position

        def fn(*inputs: Any) -> Any:
            first, position = recompose(inputs, sample.input, 0)
            positional = [first]
            for arg in sample.args:
                value, position = recompose(inputs, arg, position)
                positional.append(value)
            kwargs = {}
            for key, arg in sample.kwargs.items():
                kwargs[key], position = recompose(inputs, arg, position)
            output = (op.gradcheck_wrapper(variant, *positional, **kwargs) if self.wrapped else
                      variant(*positional, **kwargs))  # (UNWRAPPED_DBS)
            if sample.output_process_fn_grad is not None:
                return sample.output_process_fn_grad(output)
            return output

        label = op.name.replace(".", "_") + (f"_{op.variant_test_name}" if op.variant_test_name else "")
        fn.__name__ = fn.__qualname__ = re.sub(r"\W", "_", label)
        return fn, checked, sample


def _fresh(checked: list[Any]) -> tuple[Any, ...]:
    return tuple(t.detach().clone().requires_grad_() for t in checked)


def build_meta(builder: CaseBuilder, op_index: int, index: int) -> dict[str, Any]:
    """N, M and a description of one case; one forward and one backward, which also warm the op up."""
    import torch

    try:
        made = builder.case(op_index, index)
    except Exception as exc:
        return {"status": "error", "error": f"{type(exc).__name__}: {_first_line(str(exc))[:400]}"}
    if made is None:
        return {"status": "absent"}
    fn, checked, sample = made
    meta: dict[str, Any] = {
        "status": "ok",
        "n_inputs": len(checked),
        "n": sum(t.numel() for t in checked),
        "inputs": [_describe(t) for t in checked],
        "sample": {"input": _describe(sample.input), "args": [_describe(a) for a in sample.args],
                   "kwargs": {k: _describe(v) for k, v in sample.kwargs.items()},
                   "output_process_fn_grad": sample.output_process_fn_grad is not None},
        "complex_inputs": any(t.is_complex() for t in checked),
    }
    try:
        inputs = _fresh(checked)
        every = _output_tensors(fn(*inputs))
        outs = [o for o in every if o.is_floating_point() or o.is_complex()]
        meta["other_outputs"] = [_describe(o) for o in every if not (o.is_floating_point() or o.is_complex())]
        meta["m"] = sum(o.numel() for o in outs)
        meta["outputs"] = [_describe(o) for o in outs]
        meta["complex_outputs"] = any(o.is_complex() for o in outs)
        differentiable = [o for o in outs if o.requires_grad]
        if differentiable and inputs:
            total = sum(torch.view_as_real(o).sum() if o.is_complex() else o.sum() for o in differentiable)
            torch.autograd.grad(total, inputs, allow_unused=True)
    except Exception as exc:
        meta.setdefault("m", None)
        meta["forward_error"] = f"{type(exc).__name__}: {_first_line(str(exc))[:300]}"
    meta["jac"] = meta["n"] * meta["m"] if meta.get("m") is not None else None
    return meta


def run_tool(builder: CaseBuilder, op_index: int, index: int, tool: str) -> dict[str, Any]:
    """One tool on one case; the time covers the call only."""
    import torch
    from torch.autograd.gradcheck import GradcheckError

    import gradaudit as ga

    made = builder.case(op_index, index)
    if made is None:
        return {"verdict": "error", "seconds": 0.0, "error_type": "Harness", "message": "sample vanished"}
    fn, checked, _ = made
    inputs = _fresh(checked)
    result: dict[str, Any] = {}
    start = time.perf_counter()
    try:
        if tool.startswith("gradcheck"):
            ok = torch.autograd.gradcheck(fn, inputs, fast_mode=tool == "gradcheck_fast")
            seconds = time.perf_counter() - start
            result["verdict"] = "pass" if ok else "fail"
        else:
            res = ga.check(fn, inputs, mode="auto" if tool == "gradaudit_auto" else "directional")
            seconds = time.perf_counter() - start
            result["verdict"] = str(res.verdict)
            try:
                report = str(res)
            except Exception as exc:
                report = f"(str(res) raised {type(exc).__name__}: {exc})"
            lines = report.strip().splitlines() or [""]
            result["header"] = lines[0][:300]
            chosen = re.search(r"\(mode (\w+)", lines[0])
            if chosen:
                result["mode"] = chosen.group(1)
            if result["verdict"] != "pass":
                # the first record that did not pass (the lines before it state the tolerance and the evidence)
                said = [line for line in lines[1:] if line.startswith("input ") and "PASS" not in line]
                result["message"] = (said[0] if said else lines[1] if len(lines) > 1 else lines[0])[:300]
                result["detail"] = report[:DETAIL_CHARS]
    except GradcheckError as exc:
        seconds = time.perf_counter() - start
        result.update(verdict="fail", **_exception_fields(exc))
    except Exception as exc:
        seconds = time.perf_counter() - start
        result.update(verdict="error", **_exception_fields(exc))
    if result["verdict"] in ("fail", "error"):
        # an exception's traceback holds its frames' tensors in a reference cycle (gradcheck's out-of-memory
        # error on slice#1: gigabytes): collected here, untimed, not inside whichever tool runs next
        garbage.collect()
    result["seconds"] = seconds
    return result


def worker_main(conn: Any, samples: int, mem_limit_gb: float, dtype_name: str = "float64", db: str = "op_db"
                ) -> None:
    """Worker loop: ("build", op, sample) or ("tool", op, sample, tool) in, a dict out; None ends it."""
    _limit_memory(mem_limit_gb)
    import warnings

    warnings.filterwarnings("ignore")
    import torch

    torch.set_num_threads(1)
    builder = CaseBuilder(load_db(db), samples, dtype_name, wrapped=db not in UNWRAPPED_DBS)
    conn.send({"ready": os.getpid(), "gradaudit_src": gradaudit_source_hash()})
    while True:
        try:
            task = conn.recv()
        except EOFError:
            break
        if task is None:
            break
        try:
            if task[0] == "build":
                reply = build_meta(builder, task[1], task[2])
            else:
                reply = run_tool(builder, task[1], task[2], task[3])
        except BaseException as exc:  # a harness bug must not take the worker down silently
            reply = {"verdict": "error", "status": "error", "seconds": 0.0, "error": repr(exc),
                     **_exception_fields(exc)}
            reply["error_type"] = "Harness:" + reply["error_type"]
        conn.send(reply)


class Worker:
    """One worker process, restarted after a timeout or a crash."""

    def __init__(self, context: Any, samples: int, mem_limit_gb: float, dtype_name: str = "float64",
                 db: str = "op_db") -> None:
        self.context = context
        self.db = db
        self.samples = samples
        self.mem_limit_gb = mem_limit_gb
        self.dtype_name = dtype_name
        self.process: Any = None
        self.conn: Any = None
        self.src = ""
        self.restarts = 0

    def start(self) -> None:
        parent, child = self.context.Pipe()
        self.process = self.context.Process(target=worker_main, args=(child, self.samples, self.mem_limit_gb,
                                                                          self.dtype_name, self.db),
                                            daemon=True)
        self.process.start()
        child.close()
        self.conn = parent
        try:
            if not parent.poll(STARTUP_TIMEOUT_S):
                raise EOFError
            self.src = parent.recv()["gradaudit_src"]
        except (EOFError, OSError):
            self.stop()
            raise RuntimeError("the worker process did not start (see its traceback above)") from None

    def stop(self) -> None:
        if self.process is not None and self.process.is_alive():
            self.process.kill()
        if self.process is not None:
            self.process.join(10)
        if self.conn is not None:
            self.conn.close()
        self.process = self.conn = None

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.send(None)
                self.process.join(5)
            except (OSError, EOFError):
                pass
        self.stop()

    def call(self, task: tuple[Any, ...], timeout: float) -> dict[str, Any]:
        if self.process is None:
            self.start()
        try:
            self.conn.send(task)
            if self.conn.poll(timeout):
                return self.conn.recv()
        except (EOFError, OSError):
            code = self.process.exitcode if self.process is not None else None
            self.stop()
            self.restarts += 1
            return {"status": "crash", "verdict": "crash", "seconds": None, "error_type": "WorkerDied",
                    "message": f"worker died (exit code {code})"}
        self.stop()
        self.restarts += 1
        return {"status": "timeout", "verdict": "timeout", "seconds": timeout, "error_type": "Timeout",
                "message": f"no answer within {timeout:g} s; worker killed"}


# --------------------------------------------------------------------------------------------------------
# The sweep (parent process)

def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


class Sink:
    """Appends JSON lines, one write and flush per record, from any thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(_json_safe(record), allow_nan=False, ensure_ascii=False)
        with self.lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    if not path.exists():
        return rows
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut short by a kill
            continue
    return rows


def case_key(row: dict[str, Any]) -> tuple[str, str, int]:
    return (row["op"], row.get("variant", ""), int(row["sample"]))


def sweep_op(worker: Worker, op_index: int, op: Any, args: argparse.Namespace, done: set[tuple[str, str, int]],
             sink: Sink, progress: Callable[[dict[str, Any]], None]) -> None:
    """All samples of one op, each built then checked by the four tools in turn."""
    expectations = opinfo_expectations(op, args.dtype)
    for index in range(args.samples):
        if (op.name, op.variant_test_name, index) in done:
            continue
        meta = worker.call(("build", op_index, index), args.case_timeout)
        if meta.get("status") == "absent":
            return
        record: dict[str, Any] = {"kind": "case", "op": op.name, "variant": op.variant_test_name, "sample": index,
                                  "opinfo": expectations}
        if meta.get("status") != "ok":
            record["build"] = {"status": meta.get("status"),
                               "error": meta.get("error") or meta.get("message", "")}
            record["tools"] = {}
            sink.write(record)
            progress(record)
            return  # the sample generator failed or hung: later samples cannot be had
        meta.pop("status")
        record.update({k: meta.pop(k) for k in ("n", "m", "jac")})
        record["build"] = {"status": "ok", **meta}
        record["tools"] = run_tools(worker, op_index, index, args)
        for result in record["tools"].values():
            result.pop("status", None)
        record["gradaudit_src"] = worker.src
        sink.write(record)
        progress(record)


SECOND_CALL = 2.0  # a tool whose first call took longer (but over --repeat-under) is not called a second time


def _done(times: list[float], repeat_under: float) -> bool:
    """No more calls of a tool: every call so far took over *repeat_under* seconds, and it has had two, or
    one over SECOND_CALL seconds."""
    return min(times) > repeat_under and (len(times) > 1 or times[0] > SECOND_CALL)


def run_tools(worker: Worker, op_index: int, index: int, args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """The four tools on one case, in rounds: every tool once per round (so each is sampled across the same
    stretch of time), up to --repeat rounds, and more (up to --repeat-max) while the last round of all the tools'
    calls took at most --round-budget seconds; a tool that did not compare gradients is not called again, nor
    one whose calls take more than --repeat-under seconds (:func:`_done`). The verdict and messages are the
    first call's; "seconds" is the median of the calls' times, all of which are kept ("times"). A later call
    with another verdict is recorded ("verdicts"): a tool whose verdict moved between identical calls."""
    results: dict[str, dict[str, Any]] = {}
    rounds, spent = 0, 0.0
    while rounds < max(1, args.repeat) or (rounds < args.repeat_max and spent <= args.round_budget):
        rounds += 1
        spent = 0.0  # this round's calls, in seconds
        for tool in TOOLS:
            first = results.get(tool)
            if first is not None and (first["verdict"] not in CHECKED or not first["times"]
                                      or _done(first["times"], args.repeat_under)):
                continue
            result = worker.call(("tool", op_index, index, tool), args.case_timeout)
            spent += result.get("seconds") or math.inf  # a call without a time (a timeout): no more rounds
            if first is None:
                result["times"] = [] if result.get("seconds") is None else [result["seconds"]]
                results[tool] = result
                continue
            if result.get("seconds") is not None:
                first["times"].append(result["seconds"])
                first["seconds"] = statistics.median(first["times"])
            if result["verdict"] != first["verdict"]:
                first.setdefault("verdicts", [first["verdict"]]).append(result["verdict"])
    return results


def select_ops(op_db: list[Any], names: str | None, limit: int | None, dtype_name: str = "float64"
               ) -> list[tuple[int, Any]]:
    """The ops with autograd (for a complex dtype: those whose forward supports it on CPU), *names* and *limit*
    applied. A Python reference (python_ref_db) says supports_autograd=False of itself, as PyTorch tests no
    gradient of it: it is taken where its torch op has autograd."""
    import torch

    dtype = getattr(torch, dtype_name)

    def autograd(op: Any) -> bool:
        torch_op = getattr(op, "torch_opinfo", None)
        return bool(op.supports_autograd or (torch_op is not None and torch_op.supports_autograd))

    chosen = [(i, op) for i, op in enumerate(op_db) if autograd(op)
              and (not dtype.is_complex or dtype in op.supported_dtypes("cpu"))]
    if names:
        wanted = {n.strip() for n in names.split(",") if n.strip()}
        chosen = [(i, op) for i, op in chosen if op.name in wanted]
        missing = wanted - {op.name for _, op in chosen}
        if missing:
            print(f"warning: not among the ops with autograd: {', '.join(sorted(missing))}", file=sys.stderr)
    return chosen[:limit] if limit is not None else chosen


def built_cases(builder: CaseBuilder, names: str | None, max_jac: float) -> list[tuple[int, int, str]]:
    """(op index, sample index, label "op.variant#sample") of every case of the ops with autograd (*names* applied)
    whose sample builds and whose Jacobian has 1 to *max_jac* entries (bench/paired.py and bench/calls.py)."""
    found = []
    for op_index, op in select_ops(builder.op_db, names, None):
        for index in range(2):
            meta = build_meta(builder, op_index, index)
            if meta.get("status") == "ok" and meta.get("jac") and meta["jac"] <= max_jac:
                found.append((op_index, index, op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
                              + f"#{index}"))
    return found


def run_sweep(args: argparse.Namespace, out: Path) -> None:
    if not args.resume and out.exists() and out.stat().st_size:
        print(f"bench/opinfo.py: {out} exists; pass --resume to continue it or choose another --out",
              file=sys.stderr)
        sys.exit(2)
    if args.resume:
        runs = [r for r in read_jsonl(out) if r.get("kind") == "run"]
        before = {r.get("dtype", "float64") for r in runs}
        if before - {args.dtype}:
            print(f"bench/opinfo.py: {out} holds a sweep of {', '.join(sorted(before))} samples; --resume continues "
                  f"it only with the same --dtype (got {args.dtype}); choose another --out for {args.dtype}",
                  file=sys.stderr)
            sys.exit(2)
        dbs = {r.get("db", "op_db") for r in runs}
        if dbs - {args.db}:
            print(f"bench/opinfo.py: {out} holds a sweep of {', '.join(sorted(dbs))}; --resume continues it only "
                  f"with the same --db (got {args.db}); choose another --out for {args.db}", file=sys.stderr)
            sys.exit(2)
    import torch

    torch.set_num_threads(1)
    import gradaudit

    ops = select_ops(load_db(args.db), args.ops, args.limit, args.dtype)
    done = {case_key(r) for r in read_jsonl(out) if r.get("kind") == "case"} if args.resume else set()
    sink = Sink(out)
    sink.write({"kind": "run", "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                "command": shlex.join([Path(sys.executable).name, *sys.argv]), "torch": torch.__version__,
                "gradaudit": gradaudit.__version__, "gradaudit_src": gradaudit_source_hash(),
                "git_commit": _git_commit(), "python": platform.python_version(), "platform": platform.platform(),
                "ops": len(ops), "samples": args.samples, "dtype": args.dtype, "db": args.db, "workers": args.workers,
                "case_timeout_s": args.case_timeout, "mem_limit_gb": args.mem_limit_gb, "resume": args.resume,
                "repeat": args.repeat, "repeat_under_s": args.repeat_under, "repeat_max": args.repeat_max,
                "round_budget_s": args.round_budget,
                "already_done": len(done)})
    print(f"{len(ops)} ops, up to {args.samples} samples each, {args.workers} worker(s) -> {out}", file=sys.stderr)

    tasks: queue.Queue[tuple[int, Any]] = queue.Queue()
    for item in ops:
        tasks.put(item)
    started = time.perf_counter()
    counter = itertools.count(1)

    def progress(record: dict[str, Any]) -> None:
        number = next(counter)
        label = record["op"] + (f".{record['variant']}" if record["variant"] else "")
        if record["build"]["status"] != "ok":
            text = f"build {record['build']['status']}: {record['build'].get('error', '')[:100]}"
        else:
            text = f"N={record['n']} M={record['m']} " + " ".join(
                f"{tool.split('_')[1]}={res['verdict']}({_seconds(res.get('seconds'))})"
                for tool, res in record["tools"].items())
        elapsed = time.perf_counter() - started
        print(f"[{number} {elapsed:7.0f}s] {label}#{record['sample']} {text}", file=sys.stderr, flush=True)

    context = multiprocessing.get_context("spawn")
    workers = [Worker(context, args.samples, args.mem_limit_gb, args.dtype, args.db) for _ in range(args.workers)]
    failures: list[BaseException] = []

    def drain(worker: Worker) -> None:
        while True:
            try:
                op_index, op = tasks.get_nowait()
            except queue.Empty:
                return
            try:
                sweep_op(worker, op_index, op, args, done, sink, progress)
            except Exception as exc:  # the harness itself: record and go on
                failures.append(exc)
                sink.write({"kind": "harness_error", "op": op.name, "variant": op.variant_test_name,
                            "error": f"{type(exc).__name__}: {exc}"})
                worker.stop()

    threads = [threading.Thread(target=drain, args=(w,), daemon=True) for w in workers]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(1.0)
    finally:
        for worker in workers:
            worker.close()
    print(f"sweep done in {time.perf_counter() - started:.0f} s; worker restarts: "
          f"{sum(w.restarts for w in workers)}; harness errors: {len(failures)}", file=sys.stderr)


def _git_commit() -> str | None:
    """The commit of the git checkout gradaudit is imported from (None outside one); read-only."""
    import gradaudit

    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
                              cwd=Path(gradaudit.__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def _seconds(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "-"
    return f"{value:.3g}s" if value < 100 else f"{value:.0f}s"


# --------------------------------------------------------------------------------------------------------
# First-call cost: a fresh interpreter per tool

FIRST_CALL = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
torch.set_num_threads(1)
tool = sys.argv[1]
extra = 0.0
if tool == "gradaudit":
    import gradaudit as ga
    extra = time.perf_counter() - t1
def fn(x, w):
    return torch.tanh(x @ w).sum(-1) * x[:, 0]
g = torch.Generator().manual_seed(0)
inputs = (torch.randn(4, 3, dtype=torch.float64, generator=g).requires_grad_(),
          torch.randn(3, 5, dtype=torch.float64, generator=g).requires_grad_())
def call():
    fresh = tuple(t.detach().clone().requires_grad_() for t in inputs)
    start = time.perf_counter()
    if tool == "gradaudit":
        verdict = ga.check(fn, fresh).verdict
    else:
        verdict = "pass" if torch.autograd.gradcheck(fn, fresh) else "fail"
    return verdict, time.perf_counter() - start
first, first_s = call()
second, second_s = call()
print(json.dumps({"import_torch_s": t1 - t0, "import_tool_s": extra, "first_s": first_s, "first": first,
                  "second_s": second_s}))
"""


def first_call() -> dict[str, Any]:
    """Cold-start cost in fresh subprocesses: import torch, (import gradaudit,) first and second call."""
    result: dict[str, Any] = {"kind": "first_call", "case": "tanh(x @ w).sum(-1) * x[:, 0], x 4×3, w 3×5, float64",
                              "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}
    for tool in ("gradcheck", "gradaudit"):
        try:
            done = subprocess.run([sys.executable, "-c", FIRST_CALL, tool], capture_output=True, text=True,
                                  timeout=600)
            result[tool] = json.loads(done.stdout.strip().splitlines()[-1])
        except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
            result[tool] = {"error": f"{type(exc).__name__}: {exc}"}
    return result


# --------------------------------------------------------------------------------------------------------
# Summary (Markdown), computed from the JSONL alone

def _label(row: dict[str, Any]) -> str:
    return f"`{row['op']}`" + (f" ({row['variant']})" if row.get("variant") else "")


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _verdict(row: dict[str, Any], tool: str) -> str:
    return str(row.get("tools", {}).get(tool, {}).get("verdict", "missing"))


def _time(row: dict[str, Any], tool: str) -> float | None:
    value = row.get("tools", {}).get(tool, {}).get("seconds")
    return float(value) if isinstance(value, (int, float)) else None


def _message(row: dict[str, Any], tool: str) -> str:
    res = row.get("tools", {}).get(tool, {})
    text = res.get("message") or res.get("header") or ""
    if res.get("error_type") and res.get("verdict") in ("error", "timeout", "crash"):
        text = f"{res['error_type']}: {text}"
    return _cell(text[:160])


def _cross_table(rows: list[dict[str, Any]], gc: str, ga: str) -> list[str]:
    counts = Counter((_verdict(r, gc), _verdict(r, ga)) for r in rows)
    if not counts:
        return ["no cases"]
    row_keys = [k for k in GC_ORDER if any(c[0] == k for c in counts)] + sorted(
        {c[0] for c in counts} - set(GC_ORDER))
    col_keys = [k for k in GA_ORDER if any(c[1] == k for c in counts)] + sorted(
        {c[1] for c in counts} - set(GA_ORDER))
    lines = [f"| {gc} ↓ / {ga} → | " + " | ".join(col_keys) + " | total |",
             "|---|" + "---:|" * (len(col_keys) + 1)]
    for rk in row_keys:
        cells = [counts.get((rk, ck), 0) for ck in col_keys]
        lines.append(f"| **{rk}** | " + " | ".join(str(c) for c in cells) + f" | {sum(cells)} |")
    totals = [sum(counts.get((rk, ck), 0) for rk in row_keys) for ck in col_keys]
    lines.append("| total | " + " | ".join(str(c) for c in totals) + f" | {sum(totals)} |")
    return lines


def _case_list(rows: list[dict[str, Any]], ga: str, title: str, gc_tool: str) -> list[str]:
    lines = [f"**{title}** ({len(rows)})", ""]
    if not rows:
        return lines + ["none", ""]
    says = "gradcheck says" if any(_verdict(r, gc_tool) in ("error", *HARNESS) for r in rows) else "gradaudit says"
    if len(rows) > GROUP_ABOVE:  # long lists: one bullet per message, the cases as op#sample (N×M)
        groups: dict[str, list[str]] = {}
        for r in rows:
            message = _message(r, gc_tool) if says == "gradcheck says" else _message(r, ga)
            size = ", ".join([f"{r.get('n')}×{r.get('m')}", *_tags(r)])
            groups.setdefault(message, []).append(f"{_label(r)}#{r['sample']} ({size})")
        lines.append(f"Grouped by what {says.split()[0]} says; each case as op#sample (N×M, and whether it has "
                     "complex inputs, complex outputs or integer/bool outputs):")
        lines.append("")
        for message, members in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            lines.append(f"- {message or '(no message)'} ({len(members)}): " + ", ".join(members))
        return lines + [""]
    lines += [f"| op | sample | N | M | {gc_tool} | {ga} | {says} |", "|---|---:|---:|---:|---|---|---|"]
    for r in rows:
        message = _message(r, gc_tool) if says == "gradcheck says" else _message(r, ga)
        lines.append(f"| {_label(r)} | {r['sample']} | {r.get('n')} | {r.get('m')} | {_verdict(r, gc_tool)} | "
                     f"{_verdict(r, ga)} | {message} |")
    return lines + [""]


def _tags(row: dict[str, Any]) -> list[str]:
    build = row.get("build", {})
    return [tag for tag, key in (("complex in", "complex_inputs"), ("complex out", "complex_outputs"),
                                 ("int out", "other_outputs")) if build.get(key)]


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3g}" if b > 0 else "-"


def _time_section(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["## 3. Time", ""]
    lines += ["Compared cases only (OpInfo skips and xfails left out). Total seconds per tool (a timeout counts as "
              "the cap, a crash as 0):",
              "", "| tool | cases | total s | median s | timeouts | crashes |", "|---|---:|---:|---:|---:|---:|"]
    for tool in TOOLS:
        times = [t for r in rows if (t := _time(r, tool)) is not None]
        verdicts = Counter(_verdict(r, tool) for r in rows)
        lines.append(f"| {tool} | {len(times)} | {sum(times):.1f} | "
                     f"{statistics.median(times) if times else 0:.4f} | {verdicts['timeout']} | {verdicts['crash']} |")
    lines += ["", "Ratios over the cases where both tools of the pair compared gradients (verdict pass, fail or "
              "inconclusive; errors, timeouts and crashes left out); ratio > 1 means gradaudit was faster. "
              "Each time is the median of the tool's calls on the case (--repeat of them, interleaved with "
              "the other tools' calls, and up to --repeat-max while a round of the four took at most --round-budget "
              "seconds; a tool whose calls take over --repeat-under seconds is called once or twice) "
              "on a possibly shared "
              "machine: per-case ratios of millisecond calls are still noisy, and a lone outlier below is worth "
              "re-running with --ops before reading anything into it.", ""]
    for gc, ga in PAIRS:
        lines += [f"{gc} / {ga}:", "",
                  "| N·M bucket | cases | gradcheck s | gradaudit s | total ratio | median per-case ratio |",
                  "|---|---:|---:|---:|---:|---:|"]
        both = [r for r in rows if _verdict(r, gc) in CHECKED and _verdict(r, ga) in CHECKED
                and _time(r, gc) is not None and _time(r, ga) is not None and r.get("jac") is not None]
        groups = [("all", both)]
        low = -1.0
        for high, name in BUCKETS:
            groups.append((name, [r for r in both if low < r["jac"] <= high]))
            low = high
        for name, part in groups:
            gct = sum(_time(r, gc) or 0.0 for r in part)
            gat = sum(_time(r, ga) or 0.0 for r in part)
            per_case = [(_time(r, gc) or 0.0) / t for r in part if (t := _time(r, ga))]
            median = f"{statistics.median(per_case):.3g}" if per_case else "-"
            lines.append(f"| {name} | {len(part)} | {gct:.1f} | {gat:.1f} | {_ratio(gct, gat)} | "
                         f"{median} |")
        nonempty = [r for r in both if r["jac"] and (_time(r, gc) or 0) > 0]
        slow = [r for r in nonempty if (_time(r, ga) or 0.0) > 1.5 * (_time(r, gc) or 0.0)]
        lines += ["", f"Cases where {ga} took more than 1.5 times {gc}'s time (N·M > 0): {len(slow)} of "
                  f"{len(nonempty)}" + (f", {sum(r['jac'] <= 100 for r in slow)} of them with N·M ≤ 100" if slow
                                        else "") + "."]
        varied = [r for r in rows if r["tools"].get(ga, {}).get("verdicts") or r["tools"].get(gc, {}).get("verdicts")]
        if varied:
            lines.append("Cases whose verdict moved between identical calls: "
                         + ", ".join(f"{_label(r)}#{r['sample']}" for r in varied) + ".")
        by_ratio = sorted(nonempty, key=lambda r: -(_time(r, ga) or 0.0) / (_time(r, gc) or 1.0))[:10]
        by_excess = sorted(nonempty, key=lambda r: (_time(r, gc) or 0.0) - (_time(r, ga) or 0.0))[:10]
        for title, chosen in ((f"The 10 cases where {ga} is slowest relative to {gc} (N·M > 0)", by_ratio),
                              (f"The 10 cases where {ga} takes the most seconds beyond {gc}", by_excess)):
            lines += ["", f"{title}:", "",
                      f"| op | sample | N | M | {gc} s | {ga} s | {ga} / {gc} | {ga} mode |",
                      "|---|---:|---:|---:|---:|---:|---:|---|"]
            for r in chosen:
                gct, gat = _time(r, gc) or 0.0, _time(r, ga) or 0.0
                mode = r["tools"][ga].get("mode", "")
                lines.append(f"| {_label(r)} | {r['sample']} | {r.get('n')} | {r.get('m')} | {gct:.4f} | {gat:.4f} | "
                             f"{_ratio(gat, gct)} | {mode} |")
        lines.append("")
    return lines


def summarize(path: Path) -> str:
    """The Markdown summary of a results file."""
    entries = read_jsonl(path)
    cases: dict[tuple[str, str, int], dict[str, Any]] = {}
    for row in entries:
        if row.get("kind") == "case":
            cases[case_key(row)] = row  # a re-run case: the last line wins
    runs = [r for r in entries if r.get("kind") == "run"]
    first_calls = [r for r in entries if r.get("kind") == "first_call"]
    harness = [r for r in entries if r.get("kind") == "harness_error"]
    rows = list(cases.values())
    dtype_name = runs[-1].get("dtype", "float64") if runs else "float64"
    db = runs[-1].get("db", "op_db") if runs else "op_db"
    test = "TestForeach.test_autodiff" if db == "foreach" else "TestBwdGradients.test_fn_grad"
    built = [r for r in rows if r.get("build", {}).get("status") == "ok"]
    broken = [r for r in rows if r.get("build", {}).get("status") != "ok"]
    expected = [r for r in built if r.get("opinfo", {}).get("status")]
    included = [r for r in built if not r.get("opinfo", {}).get("status")]

    out = [f"# gradaudit vs torch.autograd.gradcheck on OpInfo's {db} ({path.name})", ""]
    out.append(f"{len(rows)} cases from {len({(r['op'], r.get('variant', '')) for r in rows})} OpInfo entries: "
               f"{len(included)} compared, {len(expected)} that OpInfo skips or xfails for {test} on CPU "
               f"{dtype_name} (listed apart), {len(broken)} whose sample could not be built.")
    out += ["", "## 1. Verdicts", ""]
    for gc, ga in PAIRS:
        out += [f"{gc} × {ga} ({len(included)} cases):", ""] + _cross_table(included, gc, ga) + [""]
    out += [f"**OpInfo skips / expected failures** for {test}, CPU {dtype_name} "
            f"({len(expected)} cases; run anyway, not counted above):", ""]
    if expected:
        out += ["| op | sample | OpInfo | reason | gc slow | gc fast | ga auto | ga directional |",
                "|---|---:|---|---|---|---|---|---|"]
        for r in sorted(expected, key=case_key):
            info = r["opinfo"]
            out.append(f"| {_label(r)} | {r['sample']} | {info['status']} | {_cell(info.get('reason', ''))} | "
                       + " | ".join(_verdict(r, t) for t in TOOLS) + " |")
    else:
        out.append("none")
    out += ["", f"**Samples that could not be built** ({len(broken)}):", ""]
    for r in sorted(broken, key=case_key):
        out.append(f"- {_label(r)} sample {r['sample']}: {r['build'].get('status')}: "
                   f"{_cell(r['build'].get('error', ''))}")
    if harness:
        out += ["", f"**Harness errors** ({len(harness)}):", ""]
        out += [f"- `{r['op']}` {r.get('variant', '')}: {_cell(r.get('error', ''))}" for r in harness]

    out += ["", "## 2. Disagreements (compared cases)", ""]
    previous: dict[str, list[tuple[str, str, int, str]]] = {}
    for gc, ga in PAIRS:
        out += [f"### {gc} vs {ga}", ""]
        pick = [("False alarms (gradcheck pass, gradaudit fail)", lambda a, b: a == "pass" and b == "fail"),
                ("Refusals / crashes (gradcheck pass, gradaudit error, timeout or crash)",
                 lambda a, b: a == "pass" and b in ("error", *HARNESS)),
                ("Misses (gradcheck fail, gradaudit pass)", lambda a, b: a == "fail" and b == "pass"),
                ("Inconclusive where gradcheck passes", lambda a, b: a == "pass" and b == "inconclusive"),
                ("gradcheck could not check (error, timeout or crash)", lambda a, b: a in ("error", *HARNESS))]
        for title, test in pick:
            chosen = sorted((r for r in included if test(_verdict(r, gc), _verdict(r, ga))), key=case_key)
            shown = [(*case_key(r), _message(r, ga) + _message(r, gc)) for r in chosen]
            if chosen and previous.get(title) == shown:
                out += [f"**{title}** ({len(chosen)}): the same cases, with the same messages, as above", ""]
                continue
            previous[title] = shown
            out += _case_list(chosen, ga, title, gc)

    out += _time_section(included)

    out += ["## 4. Provenance", ""]
    for run in runs:
        out.append(f"- {run.get('date')}: torch {run.get('torch')}, gradaudit {run.get('gradaudit')} "
                   f"(source {run.get('gradaudit_src')}, commit {run.get('git_commit')}), Python "
                   f"{run.get('python')}, {run.get('platform')}; {run.get('ops')} ops, samples {run.get('samples')} "
                   f"({run.get('dtype', 'float64')}), "
                   f"workers {run.get('workers')}, case timeout {run.get('case_timeout_s')} s; "
                   f"command: `{run.get('command')}`")
    sources = Counter(r.get("gradaudit_src") for r in built)
    if len(sources) > 1:
        out.append(f"- gradaudit source changed during the sweep: cases per source hash {dict(sources)}")
    if first_calls:
        fc = first_calls[-1]
        out += ["", f"First call in a fresh interpreter ({fc.get('date')}; case: {fc.get('case')}; one thread):", "",
                "| tool | import torch s | import tool s | first call s | second call s | verdict |",
                "|---|---:|---:|---:|---:|---|"]
        for tool in ("gradcheck", "gradaudit"):
            d = fc.get(tool, {})
            if "error" in d:
                out.append(f"| {tool} | error: {_cell(d['error'])} | | | | |")
                continue
            out.append(f"| {tool} | {d.get('import_torch_s', 0):.3f} | {d.get('import_tool_s', 0):.3f} | "
                       f"{d.get('first_s', 0):.4f} | {d.get('second_s', 0):.4f} | {d.get('first')} |")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------------------

def main(argv: Iterable[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=2, metavar="K", help="sample inputs per op (default 2)")
    parser.add_argument("--dtype", choices=("float64", "complex128"), default="float64",
                        help="the samples' dtype (default float64; complex128: the ops whose forward supports it, "
                             "checked with Wirtinger calculus by both tools)")
    parser.add_argument("--db", choices=DBS, default="op_db",
                        help="the OpInfo list (default op_db; python_ref_db: the Python references torch._refs.*, "
                             "the same samples through other code, taken where the torch op has autograd; foreach: "
                             "the torch._foreach_* ops, lists of tensors; autograd_function_db, custom_op_db and "
                             "hop_db: the custom autograd.Functions, torch.library ops and higher-order ops (cond, "
                             "map) of PyTorch's functorch and dynamo tests)")
    parser.add_argument("--workers", type=int, default=1, metavar="W", help="worker processes (default 1)")
    parser.add_argument("--repeat", type=int, default=5, metavar="K",
                        help="calls per tool and case, interleaved across the tools; the time is their median "
                             "(default 5; 1 for single calls)")
    parser.add_argument("--repeat-max", type=int, default=15, metavar="K",
                        help="more rounds, up to K in all, while one round of the four tools took at most "
                             "--round-budget seconds (default 15; --repeat or less for no more)")
    parser.add_argument("--round-budget", type=float, default=0.05, metavar="S",
                        help="the round time (all four tools once, seconds) under which a case gets more rounds "
                             "(default 0.05)")
    parser.add_argument("--repeat-under", type=float, default=0.25, metavar="S",
                        help="repeat a tool only while some call took at most S seconds; one over S gets a second call "
                             "when it took at most 2 s, so a stalled first call does not stand alone (default 0.25)")
    parser.add_argument("--case-timeout", type=float, default=120.0, metavar="S",
                        help="cap in seconds on each tool call of a case (default 120)")
    parser.add_argument("--mem-limit-gb", type=float, default=None, metavar="G",
                        help="address-space cap per worker, 0 for none (default: half the RAM over the workers)")
    parser.add_argument("--out", default="opinfo_results.jsonl", metavar="PATH",
                        help="JSON Lines results (default opinfo_results.jsonl)")
    parser.add_argument("--ops", metavar="a,b,c", help="only these op names")
    parser.add_argument("--limit", type=int, metavar="N", help="only the first N ops (after --ops)")
    parser.add_argument("--resume", action="store_true", help="append to --out, skipping cases already in it")
    parser.add_argument("--no-first-call", action="store_true", help="skip the fresh-interpreter timing")
    parser.add_argument("--summary", metavar="PATH", help="print the summary of an existing JSONL; run nothing")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.summary:
        print(summarize(Path(args.summary)), end="")
        return
    if args.samples < 1 or args.workers < 1 or args.case_timeout <= 0:
        parser.error("--samples and --workers must be at least 1 and --case-timeout positive")
    if args.mem_limit_gb is None:
        args.mem_limit_gb = round(0.5 * physical_memory_gb() / args.workers, 1)
    out = Path(args.out)
    run_sweep(args, out)
    if not args.no_first_call:
        Sink(out).write(first_call())
    print(summarize(out), end="")


if __name__ == "__main__":
    main()
