"""A function's name as its user knows it, its source, and an expression that re-runs it.

>>> import torch
>>> describe(torch.sin).name, describe(torch.nn.functional.softplus).paste
('torch.sin', 'torch.nn.functional.softplus')
"""

from __future__ import annotations

import functools
import inspect
import math
import types
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .tolerances import Tolerance

if TYPE_CHECKING:
    import torch

TORCH_NAMESPACES = ("torch", "torch.nn.functional", "torch.linalg", "torch.special", "torch.fft")
INLINE = 8  # inputs with at most this many elements are written into the re-run line


@dataclass(frozen=True)
class Described:
    name: str  # for reports: MyFunction.apply, torch.sin, module.fn
    source: str  # the source text (the class of an autograd.Function), or the name
    paste: str | None  # an expression that evaluates to the function, where there is one
    where: str | None  # file:line, where known


_DESCRIBED: weakref.WeakKeyDictionary[Any, Described] = weakref.WeakKeyDictionary()


_BY_CODE: dict[tuple[Any, str, str, str], Described] = {}
BY_CODE_MAX = 4096  # distinct definitions remembered (a code object holds no user data, only the program's)


def describe(fn: Any) -> Described:
    """How to name *fn* in reports and re-run lines, worked out once per definition: a plain function
    by its code object (every closure a loop makes from one lambda shares it), anything else per
    object, held weakly. A closure and what it captures are never kept alive by gradaudit."""
    module = getattr(fn, "__module__", None) or ""
    if (type(fn) is types.FunctionType and not hasattr(fn, "__wrapped__")
            and module != "torch" and not module.startswith("torch.")):
        # torch's own (boolean_dispatch makes max_pool1d/2d/3d from one code object) and decorated functions
        # (a decorator's wrapper is one code object for all it wraps) are named per object below
        key = (fn.__code__, module, fn.__qualname__, fn.__name__)
        known = _BY_CODE.get(key)
        if known is None:
            if len(_BY_CODE) >= BY_CODE_MAX:
                _BY_CODE.clear()
            known = _BY_CODE[key] = _describe(fn)
        return known
    try:
        known = _DESCRIBED.get(fn)
    except TypeError:  # unhashable, or no weak reference possible (a builtin: cheap to name)
        return _describe(fn)
    if known is None:
        known = _DESCRIBED[fn] = _describe(fn)
    return known


def _describe(fn: Any) -> Described:
    if isinstance(fn, functools.partial):
        inner = _describe(fn.func)
        return Described(f"partial({inner.name})", inner.source, None, inner.where)
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, type) and getattr(fn, "__name__", "") == "apply":
        import torch

        if issubclass(owner, torch.autograd.Function):  # MyFunction.apply: name and source of the class
            return Described(f"{owner.__qualname__}.apply", _source(owner), _importable(owner, ".apply"),
                             _where(owner))
    torch_name = _torch_name(fn)
    if torch_name:
        return Described(torch_name, torch_name, torch_name, None)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    if "<lambda>" in name:
        where = _where(fn)
        return Described("<lambda>" + (f" at {where}" if where else ""), _source(fn), None, where)
    if not callable(fn) or not hasattr(fn, "__qualname__"):  # a callable object, e.g. an nn.Module
        cls = type(fn)
        return Described(cls.__qualname__, _source(cls), None, _where(cls))
    return Described(name, _source(fn), _importable(fn, ""), _where(fn))


def _torch_name(fn: Any) -> str | None:
    import sys

    name = getattr(fn, "__name__", None)
    if not name:
        return None
    for space in TORCH_NAMESPACES:
        module = sys.modules.get(space)
        if module is None:
            continue
        short = space.rsplit(".", 1)[-1] + "_"  # torch.linalg.svdvals is named linalg_svdvals
        for candidate in (name, name.removeprefix(short)):
            if getattr(module, candidate, None) is fn:
                return f"{space}.{candidate}"
    torch = sys.modules.get("torch")
    owner = getattr(fn, "__objclass__", None)  # a method descriptor: torch.Tensor.sin
    if torch is not None and owner is not None and getattr(torch.Tensor, name, None) is fn:
        return f"torch.Tensor.{name}"
    return None


def _importable(obj: Any, suffix: str) -> str | None:
    qual, module = getattr(obj, "__qualname__", ""), getattr(obj, "__module__", None)
    if not module or "<locals>" in qual or "<" in qual:
        return None
    return f"{qual}{suffix}" if module == "__main__" else f"{module}.{qual}{suffix}"


def _where(obj: Any) -> str | None:
    """file:line of *obj*'s definition (a function's from its code object, without reading the file)."""
    import os

    obj = inspect.unwrap(obj) if callable(obj) else obj  # a decorated function: where the function itself is
    code = getattr(obj, "__code__", None)
    if code is not None:
        path = code.co_filename
        return None if not path or path.startswith("<") else f"{os.path.basename(path)}:{code.co_firstlineno}"
    try:
        path = inspect.getsourcefile(obj)
        line = inspect.getsourcelines(obj)[1]
    except (OSError, TypeError):
        return None
    if not path:
        return None
    return f"{os.path.basename(path)}:{line}"


@functools.lru_cache(maxsize=512)
def _source_cached(obj: Any) -> str:
    return inspect.getsource(obj).strip()


def _source(obj: Any) -> str:
    """The source text of *obj*, or its name. Read once per code object (every closure made by one
    definition shares it, and a code object holds no user data) or per class."""
    try:
        inner = inspect.unwrap(obj) if callable(obj) else obj  # a decorated function: the function's own source
        return _source_cached(getattr(inner, "__code__", inner))
    except (OSError, TypeError, ValueError):
        return getattr(obj, "__qualname__", repr(obj))


def tensor_literal(t: torch.Tensor) -> str | None:
    """A pasteable expression for a small tensor (None when it is too large or not plain)."""
    import torch

    if t.numel() > INLINE or t.layout != torch.strided or t.is_meta:  # a meta tensor has no values to write
        return None
    if t.is_complex():  # its real and imaginary parts, exactly (a literal 1-0j would lose the sign of zero)
        parts = torch.view_as_real(t.detach().cpu().resolve_conj())
        real, imag = (tensor_literal(parts[..., i].contiguous()) for i in (0, 1))
        if real is None or imag is None:
            return None
        text = f"torch.complex({real}, {imag})"
        if t.device.type != "cpu":
            text += f".to({str(t.device)!r})"
        return text + (".requires_grad_()" if t.requires_grad else "")
    on_cpu = t.is_cpu
    plain = t if on_cpu else t.detach().cpu()  # (tolist reads a tensor that requires grad as it is)
    values = plain.tolist()
    if plain.is_floating_point():
        dim = plain.dim()
        flat = [values] if dim == 0 else values if dim == 1 else plain.detach().reshape(-1).tolist()
        if not all(map(math.isfinite, flat)):
            return None
    text = f"torch.tensor({values!r}, dtype={t.dtype}"
    if not on_cpu:
        text += f", device={str(t.device)!r}"
    return text + (", requires_grad=True)" if t.requires_grad else ")")


def literal(value: Any, depth: int = 0) -> str | None:
    """A pasteable expression for an argument: a small tensor (:func:`tensor_literal`), a tuple, list or dict of
    such (as written), torch.Size, a ga.Tolerance, or a plain value whose repr reads back (None, numbers, strings);
    None where any part cannot be written."""
    import torch

    if torch.is_tensor(value):
        return tensor_literal(value)
    if depth > 16:
        return None
    if isinstance(value, torch.Size):
        return f"torch.Size({list(value)!r})"
    if isinstance(value, torch.dtype):
        return str(value)  # torch.float32
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    if isinstance(value, Tolerance):
        return "ga." + repr(value)
    if value is None or isinstance(value, (bool, int, str, bytes)):
        return repr(value)
    if isinstance(value, (float, complex)):
        text = repr(value)
        return text if "nan" not in text and "inf" not in text else None  # (nan and inf are not names)
    if type(value) in (tuple, list):
        parts = [literal(v, depth + 1) for v in value]
        if any(p is None for p in parts):
            return None
        body = ", ".join(p for p in parts if p is not None)
        return f"[{body}]" if type(value) is list else f"({body}{',' if len(parts) == 1 else ''})"
    if type(value) is dict:
        items = [(literal(k, depth + 1), literal(v, depth + 1)) for k, v in value.items()]
        if any(k is None or v is None for k, v in items):
            return None
        return "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"
    return None


def rerun(call: str, fn: Described, inputs: Sequence[Any], options: dict[str, Any]) -> str:
    """``ga.check(torch.sin, (torch.tensor([0.5], ...),), mode='full', seed=0)``: pasteable where the
    function, inputs and options allow it; otherwise it names what to paste in their place."""
    literals = [literal(x) for x in inputs]
    written = [lit for lit in literals if lit is not None]
    shown_inputs = ("(" + ", ".join(written) + ("," if len(written) == 1 else "") + ")"
                    if len(written) == len(literals) else "inputs")
    args, unwritten = [], []
    for key, value in options.items():
        if value is None:
            continue
        text = literal(value)
        if text is None:
            unwritten.append(key)
            text = key
        args.append(f"{key}={text}")
    text = f"{call}({fn.paste or 'fn'}, {shown_inputs}" + (f", {', '.join(args)}" if args else "") + ")"
    notes = []
    if fn.paste is None:
        notes.append(f"fn: {fn.name}")
    if shown_inputs == "inputs":
        notes.append("inputs: the tensors checked")
    notes += [f"{key}: as given" for key in unwritten]
    return text + (f"  # {'; '.join(notes)}" if notes else "")
