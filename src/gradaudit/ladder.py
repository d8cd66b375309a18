"""The precision ladder: judge a low-precision kernel against a reference implementation.

Finite differences cannot judge a bfloat16 or float16 kernel (the step drowns in rounding). Kernel
authors test such kernels against a *reference implementation* instead (FlashAttention's tests:
"error <= 2 x the error of a PyTorch implementation in the same precision"). :func:`compare` does
that, per rung (dtype) of a ladder, for every output and every input gradient:

- **truth**: the reference in float64, on the CPU, on the *quantized* inputs (cast to the rung's
  dtype, then up: otherwise the rounding of the inputs dominates every error);
- **baseline**: the reference in the rung's dtype, on the device, on the same inputs;
- **candidate**: the kernel under test, in the rung's dtype, on the device, on the same inputs.

One seeded random ``grad_output`` (standard normal) per output drives every backward, quantized
the same way. The statistic is the **mean absolute error** against the truth; the candidate passes
a rung when

    mean|cand - truth| <= ratio x mean|base - truth| + LADDER_FLOOR_ULPS x eps(dtype) x mean|truth|
    max|cand - truth|  <= LADDER_MAX_RATIO x max|base - truth| + LADDER_FLOOR_ULPS x eps(dtype) x max|truth|

with ratio = LADDER_RATIO = 2, LADDER_FLOOR_ULPS = 1/8, LADDER_MAX_RATIO = 16 (named below; they are
to move to ``tolerances.py``).

Why these (measured on CPU, torch 2.13; the kernels are the planted ones of tests/test_ladder.py):

- the **max**-error ratio that hand-written tests use cries wolf: correct kernels reach 4.1 x at
  float32 (softmax gradient, both errors a few ulps), and a correct kernel must never fail;
- the **mean**-error ratio of correct kernels stays <= 1.56 x at every rung (8 kernels x 60 seeds, 0
  failures), while a formula bug is >= 32 x at bfloat16 and >= 1e6 x at float32, and a low-precision
  accumulation (split-K dB summed in the low dtype) is >= 3.85 x at 16 bits and <= 0.56 x at float32:
  ``ratio = 2`` separates them;
- the **floor** (1/8 of an ulp of the mean value) stands in where the baseline's error is ~0 (a
  truth the dtype represents exactly); it is below one correctly rounded output (about 0.18 eps x
  mean|truth|), so it never hides a precision bug: split-K's 0.80 eps x mean|truth| stays above the
  allowed 2 x 0.18 + 0.125 = 0.49 (a floor of 1/2 ulp would pass it);
- the **max guard** (16 x the baseline's largest error) is loose enough for every correct kernel
  (<= 4.1 x measured) and catches a *localized* formula bug (the tail row of a tile never written:
  mean ratio 1.5-1.8 x, max ratio >= 132 x at bfloat16) that the mean dilutes over many elements.

The **top rung**: where the candidate accepts float64, it is compared with the reference in float64
directly; a formula bug cannot hide behind rounding there. The reference *is* the truth, so there is
no baseline: the allowance is LADDER_TOP_ULPS = 1024 ulps of float64 at the values' scale, the larger of mean|truth|
and the float32 reference's own mean error in float32 ulps (which grows where the formula cancels).
Correct kernels differ by <= 5.3 such ulps (mean and max; at most 0.5% of the allowance), formula bugs by
>= 1e12 (the tail-row bug's mean) to 1e15.

Non-finite values: NaN/inf in the candidate where the truth and the baseline are finite fails, named as
such; elements where the truth itself is not finite are left out (and counted); a baseline that is not
finite where the truth is (an unstable reference overflowing in float16) sets no bound: inconclusive, also
where the candidate is not finite at those same elements only.

>>> import torch
>>> x = torch.randn(4, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0)).requires_grad_()
>>> res = compare(lambda x: torch.softmax(x, -1), lambda x: torch.softmax(x, -1), (x,))
>>> res.ok, [(row.rung, row.quantity, row.verdict) for row in res.rows][-2:]
(True, [('float64', 'output', 'pass'), ('float64', 'grad x', 'pass')])
"""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import judge as J
from .errors import EvaluationError, InputMutated, SpecError, said
from .guard import host_random, modules_named, restore_host_random, with_fresh_parametrizations
from .naming import Described, describe, tensor_literal
from .record import (
    Allowance,
    Comparison,
    Discrepancy,
    ErrorInfo,
    Evidence,
    InputMeta,
    Location,
    Record,
    decode_float,
    encode_float,
)
from .spec import check_seed
from .tolerances import (
    EPS,
    LADDER_FLOOR_ULPS,
    LADDER_MAX_RATIO,
    LADDER_RATIO,
    LADDER_TOP_ULPS,
    Tolerance,
    ToleranceUsed,
    plain,
)
from .tolerances import (
    LADDER_STATISTIC as STATISTIC,
)

if TYPE_CHECKING:
    import torch

# -- the named constants (the judging ones live in tolerances.py) --------------------------------------

#: the rungs a default ladder climbs (the top rung, float64, is added where the candidate accepts it)
DEFAULT_DTYPES = ("bfloat16", "float16", "float32")
#: the dtypes a rung may have
RUNG_DTYPES = ("bfloat16", "float16", "float32", "float64")
#: worst elements kept per record
KEEP = 5

BASIS = ("the mean |error| against the truth (the reference in float64 on the same quantized inputs) may be "
         "{ratio:g} x the reference's own mean |error| in {dtype}, plus {floor:g} eps({dtype}) x mean|truth|; and the "
         "largest |error| {max_ratio:g} x the reference's largest, plus {floor:g} eps x max|truth|. The mean separates "
         "correct kernels (<= 1.56 x measured) from formula bugs (>= 32 x) and low-precision accumulation (>= 3.85 x "
         "at 16 bits); the max ratio alone false-alarms correct kernels (4.1 x at float32)")
TOP_BASIS = ("top rung: the candidate in float64 against the reference in float64 directly (a formula bug cannot "
             "hide behind rounding there); allowed {top:g} ulps of float64 at the values' scale (the larger of "
             "mean|truth| and the float32 reference's mean error in float32 ulps); correct kernels measured <= 5.3")


@dataclass(frozen=True)
class LadderTolerance:
    """An override of the ladder's allowance, with why it is right (required).

    ``ratio``: the mean-error ratio; ``floor_ulps``: the floor in ulps of the values' scale;
    ``max_ratio``: the max guard; ``top_ulps``: the top rung's allowance. None keeps the default.
    A plain ``ga.Tolerance(atol, rtol, why=...)`` is taken too: its floor ``atol + rtol x scale``
    replaces the eps-derived floor at every rung below the top.
    """

    ratio: float | None = None
    floor_ulps: float | None = None
    max_ratio: float | None = None
    top_ulps: float | None = None
    why: str | None = None

    def __post_init__(self) -> None:
        for name in ("ratio", "floor_ulps", "max_ratio", "top_ulps"):
            value = plain(getattr(self, name))
            if value is None:
                continue
            object.__setattr__(self, name, value)
            positive = name in ("ratio", "max_ratio")
            if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                    or value < 0 or (positive and value == 0)):
                need = "> 0" if positive else ">= 0"
                raise SpecError(f"{name} must be a finite number {need}; got {value!r}.", field=f"tolerance.{name}")
        if not isinstance(self.why, str) or not self.why.strip():
            raise SpecError("a ladder tolerance changes what passes, which needs a reason: "
                            "LadderTolerance(ratio=3, why=\"...\").", field="tolerance.why")


@dataclass(frozen=True)
class _Rule:
    """The allowance in force: ratio, floor (eps-derived, or absolute + relative), max guard, top."""

    ratio: float
    floor_ulps: float
    max_ratio: float
    top_ulps: float
    atol: float | None = None  # a ga.Tolerance's floor: atol + rtol x scale instead of floor_ulps x eps x scale
    rtol: float | None = None
    why: str | None = None
    default: bool = True

    def floor(self, dtype: str, scale: float) -> float:
        if self.atol is not None:
            return self.atol + (self.rtol or 0.0) * scale
        return self.floor_ulps * EPS[dtype] * scale

    def floor_text(self) -> str:
        if self.atol is not None:
            return f"atol {self.atol:g} + rtol {self.rtol or 0.0:g} x scale"
        return f"{self.floor_ulps:g} eps x scale"


@dataclass(frozen=True)
class LadderRow:
    """One cell of the ladder: a rung (dtype) x a quantity (an output, or an input's gradient)."""

    rung: str
    top: bool
    quantity: str
    input: str | None
    output: int | None
    candidate_error: float | None
    baseline_error: float | None
    ratio: float | None
    floor: float | None
    allowed: float | None
    candidate_max_error: float | None
    baseline_max_error: float | None
    max_ratio: float | None
    max_allowed: float | None
    verdict: str
    reason: str

    @classmethod
    def of(cls, r: Record) -> LadderRow:
        """The row of a ladder record (read from its details: records read back from JSON work too)."""
        d = r.details

        def num(key: str) -> float | None:
            value = decode_float(d.get(key))
            return float(value) if isinstance(value, (int, float)) else None

        return cls(str(d.get("rung", r.dtype)), bool(d.get("top", False)), str(d.get("quantity", "")),
                   r.input, d.get("output"), num("candidate_error"), num("baseline_error"), num("ratio"),
                   num("floor"), num("allowed"), num("candidate_max_error"), num("baseline_max_error"),
                   num("max_ratio"), num("max_allowed"), r.verdict, r.reason or "")


@dataclass(frozen=True, repr=False)
class LadderResult(J.RecordsVerdict):
    """What ``compare`` found: a view over its records (one per rung x quantity)."""

    name: str
    records: tuple[Record, ...]
    info: Mapping[str, Any] = field(default_factory=dict)
    rerun: str = ""
    rung_seconds: Mapping[str, float] = field(default_factory=dict, compare=False)  # wall time per rung
    elapsed_s: float = field(default=0.0, compare=False)

    @property
    def rows(self) -> tuple[LadderRow, ...]:
        return tuple(LadderRow.of(r) for r in self.records)

    def report(self) -> str:
        from .render.ladder import ladder_report

        return ladder_report(self.records, name=self.name, rerun=self.rerun)

    def __str__(self) -> str:
        return self.report()

    def __repr__(self) -> str:  # the report too: `assert res.ok, res` shows it
        return self.report()

    def __rich__(self) -> str:
        from .render.text import rich_text

        return rich_text(self.report())


# -- argument checks (before any evaluation) -------------------------------------------------------

def _dtype_name(d: Any) -> str | None:
    import torch

    if isinstance(d, torch.dtype):
        name = str(d).removeprefix("torch.")
    elif isinstance(d, str):
        name = d.removeprefix("torch.")
        name = {"bf16": "bfloat16", "half": "float16", "fp16": "float16", "float": "float32", "fp32": "float32",
                "double": "float64", "fp64": "float64"}.get(name, name)
    else:
        return None
    return name if name in RUNG_DTYPES else None


def _rungs(dtypes: Any) -> list[str]:
    if isinstance(dtypes, (str, bytes)) or not isinstance(dtypes, Sequence) or not dtypes:
        one = _dtype_name(dtypes)
        if one is None:
            raise SpecError(f"dtypes must be a non-empty tuple of floating dtypes ({', '.join(RUNG_DTYPES)}); got "
                            f"{dtypes!r}.", field="dtypes")
        return [one]
    names = []
    for d in dtypes:
        name = _dtype_name(d)
        if name is None:
            raise SpecError(f"dtypes holds {d!r}, which is not a rung of the ladder; each must be one of "
                            f"{', '.join('torch.' + n for n in RUNG_DTYPES)}.", field="dtypes")
        if name in names:
            raise SpecError(f"dtypes names {name} twice.", field="dtypes")
        names.append(name)
    return names


def _rule(ratio: Any, tolerance: Any) -> _Rule:
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not math.isfinite(ratio) or ratio <= 0:
        raise SpecError(f"ratio must be a finite number > 0 (the candidate's error may be ratio x the baseline's; "
                        f"FlashAttention uses 2); got {ratio!r}.", field="ratio")
    base = _Rule(float(ratio), LADDER_FLOOR_ULPS, LADDER_MAX_RATIO, LADDER_TOP_ULPS, default=ratio == LADDER_RATIO)
    if tolerance is None:
        return base
    if isinstance(tolerance, LadderTolerance):
        if tolerance.ratio is not None and ratio != LADDER_RATIO and float(tolerance.ratio) != float(ratio):
            raise SpecError(f"the ratio is given twice (ratio={ratio!r} and tolerance.ratio={tolerance.ratio!r}); "
                            "give it once.", field="tolerance.ratio")
        return _Rule(float(tolerance.ratio if tolerance.ratio is not None else ratio),
                     float(tolerance.floor_ulps if tolerance.floor_ulps is not None else LADDER_FLOOR_ULPS),
                     float(tolerance.max_ratio if tolerance.max_ratio is not None else LADDER_MAX_RATIO),
                     float(tolerance.top_ulps if tolerance.top_ulps is not None else LADDER_TOP_ULPS),
                     why=tolerance.why, default=False)
    if isinstance(tolerance, Tolerance):
        if not tolerance.why:
            raise SpecError("a tolerance that replaces the ladder's floor needs a reason: "
                            "ga.Tolerance(atol, rtol, why=\"...\").", field="tolerance.why")
        return _Rule(base.ratio, LADDER_FLOOR_ULPS, LADDER_MAX_RATIO, LADDER_TOP_ULPS, float(tolerance.atol),
                     float(tolerance.rtol), tolerance.why, default=False)
    raise SpecError(f"tolerance must be a LadderTolerance(ratio=..., floor_ulps=..., why=...) or a "
                    f"ga.Tolerance(atol, rtol, why=...) (its floor); got {type(tolerance).__name__}.",
                    field="tolerance")


def _device(device: Any, xs: list[Any]) -> torch.device:
    import torch

    if device is None:
        devices = {x.device for x in xs}
        return next(iter(devices)) if len(devices) == 1 else torch.device("cpu")
    if not isinstance(device, (str, torch.device)):
        raise SpecError(f"device must be a string such as 'cuda' or a torch.device; got {type(device).__name__}.",
                        field="device")
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError) as exc:
        raise SpecError(f"device {device!r} is not a device torch knows: {exc}.", field="device") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SpecError(f"device {device!r}: CUDA is not available on this machine.", field="device")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise SpecError(f"device {device!r}: MPS is not available on this machine.", field="device")
    return dev


def _names(candidate: Any, reference: Any, count: int, names: Any) -> list[str]:
    from .api import _arg_names

    if names is not None:
        if (isinstance(names, (str, bytes)) or not isinstance(names, Sequence) or len(names) != count
                or not all(isinstance(n, str) and n for n in names)):
            raise SpecError(f"names must be {count} non-empty strings, one per input; got {names!r}.", field="names")
        if len(set(names)) != count:
            raise SpecError(f"names must be distinct (each locates a gradient); got {names!r}.", field="names")
        return list(names)
    for fn in (candidate, reference):
        found = _arg_names(fn, count)
        if found != [f"input{i}" for i in range(count)]:
            return found
    return [f"input{i}" for i in range(count)]


def _validate(candidate: Any, reference: Any, inputs: Any, dtypes: Any, ratio: Any, seed: Any, tolerance: Any,
              names: Any, name: Any) -> tuple[list[Any], list[str], _Rule, list[str]]:
    import torch

    for arg, fn in (("candidate", candidate), ("reference", reference)):
        if not callable(fn):
            raise SpecError(f"{arg} must be callable (a function, MyFunction.apply or a module); got "
                            f"{type(fn).__name__}.", field=arg)
    xs = list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
    if not xs:
        raise SpecError("inputs must hold at least one tensor, e.g. (x,).", field="inputs")
    for i, x in enumerate(xs):
        if not torch.is_tensor(x):
            raise SpecError(f"inputs[{i}] is a {type(x).__name__} ({x!r:.40}), not a tensor: every input is cast to "
                            "each rung's dtype, so pass tensors (a constant can be captured in the functions).",
                            field="inputs")
    diff = [i for i, x in enumerate(xs) if x.requires_grad]
    if not diff:
        raise SpecError("no input has requires_grad=True, so no gradient would be judged; create the inputs with "
                        "requires_grad=True (the ladder judges the outputs and every such input's gradient).",
                        field="inputs")
    for i in diff:
        if not xs[i].is_floating_point() or xs[i].is_complex():
            raise SpecError(f"inputs[{i}] has dtype {xs[i].dtype}; gradients are judged for real floating-point "
                            "tensors only.", field="inputs")
    rungs = _rungs(dtypes)
    check_seed(seed)
    rule = _rule(ratio, tolerance)
    if name is not None and not isinstance(name, str):
        raise SpecError(f"name must be a string; got {type(name).__name__}.", field="name")
    labels = _names(candidate, reference, len(xs), names)
    return xs, labels, rule, rungs


# -- evaluation ------------------------------------------------------------------------------------

@dataclass
class _Run:
    outputs: list[torch.Tensor]
    grads: list[torch.Tensor]
    output_dtypes: list[str]


def _outputs_of(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _evaluate(fn: Callable[..., Any], args: list[Any], diff: list[int], gos: list[torch.Tensor], who: str,
              dtype: str, seed: int = 0) -> _Run:
    """Forward and backward (autograd.grad with the seeded grad_outputs) of *fn* at *args*; the outputs and
    gradients detached. Its exceptions come out as EvaluationError naming the pass. Every forward starts from
    torch's generators seeded with *seed* (the CPU's, and those of the CUDA devices the arguments are on; put back
    after), as ga.check's evaluations do: a dropout compared with itself drew a new mask at each call, and failed."""
    import torch

    # private copies (an input already in the rung's dtype was the caller's own tensor: a function writing to it
    # changed the caller's), and a write to one is the function's error, as in ga.check
    leaves = [a.detach().clone().requires_grad_(i in diff) if torch.is_tensor(a) else a for i, a in enumerate(args)]
    devices = sorted({a.device.index or 0 for a in leaves if torch.is_tensor(a) and a.is_cuda})
    try:
        with torch.enable_grad(), torch.random.fork_rng(devices=devices):
            torch.random.default_generator.manual_seed(seed)
            for d in devices:
                torch.cuda.default_generators[d].manual_seed(seed)
            outs = _outputs_of(fn(*leaves))
    except Exception as exc:
        raise EvaluationError(f"the {who} forward in {dtype}", exc) from exc
    for i, (a, leaf) in enumerate(zip(args, leaves)):
        if torch.is_tensor(a) and not bool(torch.equal(a, leaf.detach()) or torch.allclose(
                a, leaf.detach(), rtol=0, atol=0, equal_nan=True)):
            raise EvaluationError(f"the {who} forward in {dtype}", InputMutated(
                f"the function changes its input {i} in place (an in-place op such as ReLU(inplace=True) or .clamp_ "
                "on an argument), so the reference, the baseline and the candidate would not see the same point. "
                "Work on a copy inside the function; the caller's tensor is untouched"))
    for k, o in enumerate(outs):
        if not torch.is_tensor(o) or not o.is_floating_point():
            got = type(o).__name__ if not torch.is_tensor(o) else f"a {o.dtype} tensor"
            raise EvaluationError(f"the {who} forward in {dtype}",
                                  TypeError(f"output {k} is {got}; the ladder compares floating-point tensors"))
    pairs = [(o, g.to(device=o.device, dtype=o.dtype)) for o, g in zip(outs, gos)
             if o.requires_grad and tuple(o.shape) == tuple(g.shape)]
    wrt = [leaves[i] for i in diff]
    grads: tuple[Any, ...] = tuple(None for _ in wrt)
    if pairs:
        try:
            grads = torch.autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs], allow_unused=True)
        except Exception as exc:
            raise EvaluationError(f"the {who} backward in {dtype}", exc) from exc
    out_grads = [torch.zeros_like(w) if g is None else g.detach() for g, w in zip(grads, wrt)]
    return _Run([o.detach() for o in outs], out_grads, [str(o.dtype).removeprefix("torch.") for o in outs])


def _error_info(exc: EvaluationError) -> ErrorInfo:
    original = exc.original
    return ErrorInfo(type(original).__name__, said(original),
                     "".join(traceback.format_exception(type(original), original, original.__traceback__)).rstrip(),
                     exc.where)


# -- the judgement of one quantity ------------------------------------------------------------------

@dataclass
class _Judged:
    verdict: str
    reason: str
    kind: str
    details: dict[str, Any]
    discrepancy: Discrepancy
    tolerance: ToleranceUsed
    candidate_error: float
    baseline_error: float | None


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for size in reversed(shape):
        out.append(flat % size)
        flat //= size
    return tuple(reversed(out))


def _enc(v: float | None) -> Any:
    return None if v is None else encode_float(float(v))


def _ratio(a: float, b: float) -> float:
    if b == 0.0:
        return 0.0 if a == 0.0 else math.inf
    return a / b


@dataclass
class _Side:
    """One side (candidate or baseline) against the truth: the values and |errors| in float64 on the CPU,
    and where they are not finite though the truth is."""

    values: torch.Tensor
    errors: torch.Tensor  # 0 where both are the same infinity; inf where the value is NaN
    bad: torch.Tensor | None  # not finite where the truth is (None: there is no such element)
    mean: float | None = None  # the mean error, where the fast path computed it (every element finite)


def _side(value: torch.Tensor, truth: torch.Tensor, truth_finite: torch.Tensor | None) -> _Side:
    import torch

    v = value.detach().to(device="cpu", dtype=torch.float64)
    err = (v - truth).abs()
    if truth_finite is None and v.numel():  # the common case: a finite mean error means every value is finite
        mean = float(err.mean())
        if math.isfinite(mean):
            return _Side(v, err, None, mean)
    finite = torch.isfinite(v)
    err = torch.where(v == truth, 0.0, err).nan_to_num(nan=math.inf)
    bad = ~finite if truth_finite is None else truth_finite & ~finite
    return _Side(v, err, bad if bool(bad.any()) else None)


def _truth_finite(truth: torch.Tensor) -> torch.Tensor | None:
    """None when every element of the truth is finite (its |sum| is: the common case, one pass), else the mask."""
    import torch

    if not truth.numel() or math.isfinite(float(truth.abs().sum())):
        return None
    mask = torch.isfinite(truth)
    return None if bool(mask.all()) else mask


def _errors(value: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """|value - truth| in float64 (0 where both are the same infinity; inf where value is NaN)."""
    return _side(value, truth, _truth_finite(truth)).errors


def _judge(cand: torch.Tensor, base: torch.Tensor | None, truth: torch.Tensor, *, dtype: str, top: bool, rule: _Rule,
           place: Callable[[tuple[int, ...]], Location], what: str, top_scale: tuple[float, float] | None
           ) -> _Judged:
    """Judge one quantity (an output, or an input's gradient) at one rung."""
    shape = tuple(truth.shape)
    n_total = truth.numel()
    if tuple(cand.shape) != shape:
        reason = f"the candidate's {what} has shape {tuple(cand.shape)}, the reference's {shape}"
        disc = Discrepancy(n_total, n_total, 0, True, None, math.inf, math.inf, None,
                           (Comparison(place(()), None, None, None, "fail", "metadata", reason, "reference"),))
        return _Judged("fail", reason, "metadata", {"shape_mismatch": [list(cand.shape), list(shape)]}, disc,
                       _tolerance(rule, dtype, top, 0.0, 0.0), math.inf, None)
    truth_finite = _truth_finite(truth)  # None: every element of the truth is finite
    n_finite = n_total if truth_finite is None else int(truth_finite.sum())

    def on_finite(t: torch.Tensor) -> torch.Tensor:
        return t if truth_finite is None else t[truth_finite]

    c = _side(cand, truth, truth_finite)
    ec_f, t_f = on_finite(c.errors), on_finite(truth).abs()
    scale_mean = float(t_f.mean()) if n_finite else 0.0
    scale_max = float(t_f.max()) if n_finite else 0.0
    mean_c = c.mean if c.mean is not None else float(ec_f.mean()) if n_finite else 0.0
    max_c = float(ec_f.max()) if n_finite else 0.0
    n_bad = 0 if c.bad is None else int(c.bad.sum())
    mean_scale, max_scale = scale_mean, scale_max
    b: _Side | None = None
    if top:
        assert top_scale is not None
        mean_scale = max(scale_mean, top_scale[0])
        max_scale = max(scale_max, top_scale[1])
        mean_b = max_b = None
        floor = rule.top_ulps * EPS["float64"] * mean_scale
        max_floor = rule.top_ulps * EPS["float64"] * max_scale
        allowed, max_allowed = floor, max_floor
        n_base_bad = 0
    else:
        assert base is not None
        b = _side(base, truth, truth_finite)
        eb_f = on_finite(b.errors)
        mean_b = b.mean if b.mean is not None else float(eb_f.mean()) if n_finite else 0.0
        max_b = float(eb_f.max()) if n_finite else 0.0
        n_base_bad = 0 if b.bad is None else int(b.bad.sum())
        floor = rule.floor(dtype, scale_mean)
        max_floor = rule.floor(dtype, scale_max)
        allowed = rule.ratio * mean_b + floor
        max_allowed = rule.max_ratio * max_b + max_floor
    ratio = None if mean_b is None else _ratio(mean_c, mean_b)
    max_ratio = None if max_b is None else _ratio(max_c, max_b)
    flat_err = c.errors.reshape(-1)
    # the verdict: non-finite first, then what cannot be judged, then the mean, then the max guard
    kind = "value"
    if n_total == 0:
        verdict, reason = "pass", f"the {what} is empty: nothing to compare"
    elif n_bad and c.bad is not None and b is not None and b.bad is not None and not bool((c.bad & ~b.bad).any()):
        # not finite only where the reference at this rung is not finite either (exp(12) overflows float16 in both):
        # the baseline sets no bound there, as below; an identical candidate FAILED here
        verdict, kind = "inconclusive", "nonfinite"
        reason = (f"the candidate's {what} is not finite in {dtype} at {n_bad} of {n_total} elements where the truth "
                  "is finite, and the reference's is not finite there either: the baseline sets no bound at this rung")
    elif n_bad:
        assert c.bad is not None
        where_bad = c.bad.reshape(-1).nonzero().flatten()
        first = _unravel(int(where_bad[0]), shape)
        kinds = sorted({"NaN" if math.isnan(v) else "inf" for v in c.values.reshape(-1)[where_bad[:1000]].tolist()})
        verdict, kind = "fail", "nonfinite"
        reason = (f"non-finite: the candidate's {what} is {'/'.join(kinds)} at {n_bad} of {n_total} elements where "
                  f"the truth is finite (first at {_fmt_index(first)})")
    elif n_finite == 0:
        verdict, reason = "inconclusive", f"the truth itself is not finite anywhere in the {what}: nothing to judge"
    elif n_base_bad:
        verdict, kind = "inconclusive", "nonfinite"
        reason = (f"the reference itself is not finite in {dtype} at {n_base_bad} elements of the {what} where the "
                  "truth is: the baseline sets no bound at this rung")
    elif mean_c > allowed:
        verdict = "fail"
        if top:
            reason = (f"mean |error| {mean_c:.3g} against the float64 reference exceeds the allowed {allowed:.3g} "
                      f"({rule.top_ulps:g} ulps of float64 at scale {mean_scale:.3g})")
            if 0.05 * EPS["float32"] * mean_scale <= mean_c <= 64 * EPS["float32"] * mean_scale:
                reason += "; the error is at float32 level: does the candidate compute in float32 when given float64?"
        else:
            reason = (f"mean |error| {mean_c:.3g} is {ratio:.3g} x the {dtype} reference's {mean_b:.3g}; allowed "
                      f"{allowed:.3g} ({rule.ratio:g} x baseline + floor {floor:.3g})")
    elif max_c > max_allowed:
        verdict = "fail"
        worst_at = _unravel(int(flat_err.argmax()), shape)
        if top:
            reason = (f"max |error| {max_c:.3g} at {_fmt_index(worst_at)} against the float64 reference exceeds the "
                      f"allowed {max_allowed:.3g} ({rule.top_ulps:g} ulps of float64 at scale {max_scale:.3g})")
        else:
            reason = (f"max |error| {max_c:.3g} at {_fmt_index(worst_at)} is {max_ratio:.3g} x the {dtype} reference's "
                      f"largest error {max_b:.3g}; allowed {max_allowed:.3g} ({rule.max_ratio:g} x + floor "
                      f"{max_floor:.3g}): a localized error the mean dilutes")
    else:
        verdict = "pass"
        if top:
            reason = (f"mean |error| {mean_c:.3g} against the float64 reference within {allowed:.3g} "
                      f"({rule.top_ulps:g} ulps of float64 at scale {mean_scale:.3g})")
        else:
            reason = (f"mean |error| {mean_c:.3g} = {ratio:.3g} x the {dtype} reference's {mean_b:.3g} (allowed "
                      f"{allowed:.3g}); max |error| {max_c:.3g} = {max_ratio:.3g} x (allowed {max_allowed:.3g})")
    excluded = n_total - n_finite
    if excluded and verdict != "inconclusive":
        reason += f"; {excluded} elements where the truth is not finite are left out"
    # the worst elements, located: the largest errors (NaN counts as infinite), worst first
    order = flat_err.topk(min(KEEP, n_total)).indices.tolist() if n_total else []
    t_flat, c_flat = truth.reshape(-1), c.values.reshape(-1)
    threshold = allowed if mean_c > allowed or kind == "nonfinite" else max_allowed
    bad_flat = None if c.bad is None else c.bad.reshape(-1)
    allowance = (Allowance(allowed, 0.0, 0.0, allowed) if top else
                 Allowance(floor, 0.0, allowed - floor, allowed))  # the floor, plus ratio x the baseline's error
    worst, worst_json = [], []
    for i in order:
        idx = _unravel(i, shape)
        e = float(flat_err[i])
        is_bad = bad_flat is not None and bool(bad_flat[i])
        elem_verdict = "fail" if verdict == "fail" and (e > threshold or is_bad) else "pass"
        worst.append(Comparison(place(idx), float(t_flat[i]), float(c_flat[i]), allowance,
                                elem_verdict, "nonfinite" if is_bad else "value", "", "reference"))  # type: ignore[arg-type]
        worst_json.append({"element": list(idx), "truth": _enc(float(t_flat[i])), "candidate": _enc(float(c_flat[i])),
                           "baseline": None if b is None else _enc(float(b.values.reshape(-1)[i])), "error": _enc(e),
                           "baseline_error": None if b is None else _enc(float(b.errors.reshape(-1)[i]))})
    if verdict != "fail":
        mismatched = 0
    else:
        mismatched = n_bad if kind == "nonfinite" else int((ec_f > threshold).sum())
    at = place(_unravel(order[0], shape)) if order else None
    max_rel = float((ec_f / t_f).nan_to_num(nan=0.0).max()) if n_finite else 0.0
    disc = Discrepancy(n_total, mismatched, 0, True, None, max_c, max_rel, at, tuple(worst))
    details = {
        "rung": dtype, "top": top, "statistic": STATISTIC,
        "candidate_error": _enc(mean_c), "baseline_error": _enc(mean_b), "ratio": _enc(ratio),
        "floor": _enc(floor), "allowed": _enc(allowed),
        "candidate_max_error": _enc(max_c), "baseline_max_error": _enc(max_b), "max_ratio": _enc(max_ratio),
        "max_floor": _enc(max_floor), "max_allowed": _enc(max_allowed),
        "scale_mean": _enc(scale_mean), "scale_max": _enc(scale_max),
        "elements": n_total, "nonfinite_candidate": n_bad, "nonfinite_baseline": n_base_bad,
        "truth_not_finite": excluded, "worst": worst_json,
        "mismatched_counts": "elements whose |error| exceeds the allowance that failed (none when it passes)",
    }
    if top:
        details["top_scale"] = [_enc(mean_scale), _enc(max_scale)]
    return _Judged(verdict, reason, kind, details, disc, _tolerance(rule, dtype, top, floor, allowed), mean_c, mean_b)


def _fmt_index(index: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, index)) + ("," if len(index) == 1 else "") + ")"


def _tolerance(rule: _Rule, dtype: str, top: bool, floor: float, allowed: float) -> ToleranceUsed:
    """The allowance as a ToleranceUsed: atol = the floor, plus ratio x the baseline's error (the evidence)."""
    if top:
        return ToleranceUsed(float(allowed), 0.0, rule.why, rule.default, TOP_BASIS.format(top=rule.top_ulps), None)
    basis = BASIS.format(ratio=rule.ratio, dtype=dtype, floor=rule.floor_ulps, max_ratio=rule.max_ratio)
    if rule.atol is not None:
        basis = f"floor set by the check: {rule.floor_text()}; " + basis
    return ToleranceUsed(float(floor), 0.0, rule.why, rule.default, basis, rule.ratio)


# -- the ladder ------------------------------------------------------------------------------------

@dataclass
class _Setup:
    candidate: Callable[..., Any]
    reference: Callable[..., Any]
    xs: list[Any]
    names: list[str]
    diff: list[int]
    rule: _Rule
    device: torch.device
    gos: list[torch.Tensor]  # float64, CPU, one per output
    out_shapes: list[tuple[int, ...]]
    who: Described
    ref_who: Described
    label: str
    repro: str
    seed: int
    meta: tuple[InputMeta, ...]


def _quantities(s: _Setup) -> list[tuple[str, str | None, int | None]]:
    """(quantity label, input name, output index) of every judged quantity, outputs first."""
    many = len(s.out_shapes) > 1
    out: list[tuple[str, str | None, int | None]] = [(f"output {k}" if many else "output", None, k)
                                                      for k in range(len(s.out_shapes))]
    out += [(f"grad {s.names[j]}", s.names[j], None) for j in s.diff]
    return out


def _cast(xs: list[Any], dtype: torch.dtype, device: torch.device | str) -> list[Any]:
    return [x.detach().to(device=device, dtype=dtype) if x.is_floating_point() else x.detach().to(device=device)
            for x in xs]


def _record(s: _Setup, rung: str, top: bool, quantity: tuple[str, str | None, int | None], *, shape: tuple[int, ...],
            verdict: str, reason: str, judged: _Judged | None = None, error: ErrorInfo | None = None,
            notes: Sequence[str] = ()) -> Record:
    label, input_name, output = quantity
    # the generic renderers show check [input]: "softmax @ bfloat16: output", "softmax @ bfloat16: gradient [x]"
    what = label if input_name is None else "gradient"
    check = f"{s.label} @ {rung}{' (top rung)' if top else ''}: {what}"
    if top:
        derivation = ("the candidate in float64 against the reference in float64 on the same inputs (the top rung: "
                      "a formula bug cannot hide behind rounding here)")
    else:
        derivation = (f"the candidate in {rung} against the truth (the reference in float64 on the same "
                      f"{rung}-quantized inputs, on the CPU), judged against the reference's own error in {rung}")
    details: dict[str, Any] = {"rung": rung, "top": top, "quantity": label, "output": output,
                               "reference": s.ref_who.name, "seed": s.seed, "device": str(s.device),
                               "rule": {"statistic": STATISTIC, "ratio": s.rule.ratio, "floor": s.rule.floor_text(),
                                        "max_ratio": s.rule.max_ratio, "top_ulps": s.rule.top_ulps,
                                        "why": s.rule.why}}
    if judged is not None:
        details.update(judged.details)
    if notes:
        details["notes"] = list(notes)
    evidence = Evidence(
        method="reference", scheme="precision ladder",
        step_rule=None, precision=rung,
        error_bound=None if judged is None or judged.baseline_error is None else float(judged.baseline_error),
        evaluations=2 if top else 3, notes=tuple(notes),
        details={"truth": ("the reference in float64 on the original inputs (cast up)" if top else
                           f"the reference in float64 on the {rung}-quantized inputs, on the CPU"),
                 "baseline": None if top else f"the reference in {rung} on {s.device}",
                 "candidate": f"the candidate in {rung} on {s.device}",
                 "grad_output": f"standard normal, seed {s.seed}, quantized to the rung's dtype"})
    return Record(
        suite="ladder", check=check, function=s.who.source, function_name=s.who.name, inputs=s.meta,
        input=input_name, derivation=derivation, method="ladder", stored_or_returned="returned",
        tolerance=None if judged is None else judged.tolerance, source=s.repro, executed=True,
        verdict=verdict, outcome=J.outcome(verdict), reason=reason,  # type: ignore[arg-type]
        observed_value=None if judged is None else _enc(judged.candidate_error),
        reference_value=None if judged is None else _enc(judged.baseline_error),
        shape=shape, dtype=rung, device=str(s.device), evidence=evidence,
        discrepancy=None if judged is None else judged.discrepancy, error=error, rerun=s.repro, details=details)


def _shape_of(s: _Setup, q: tuple[str, str | None, int | None]) -> tuple[int, ...]:
    _, input_name, output = q
    if output is not None:
        return s.out_shapes[output]
    return tuple(s.xs[s.names.index(input_name)].shape)  # type: ignore[arg-type]


def _place(s: _Setup, q: tuple[str, str | None, int | None]) -> Callable[[tuple[int, ...]], Location]:
    _, input_name, output = q
    if output is not None:
        return lambda idx: Location(None, None, output, idx or None)
    return lambda idx: Location(input_name, idx or None)


def _errored(s: _Setup, rung: str, top: bool, exc: EvaluationError, *, verdict: str = "error",
             why: str | None = None) -> list[Record]:
    info = _error_info(exc)
    reason = why or f"{exc.where} raised {info.type}: {info.message.splitlines()[0] if info.message else ''}".rstrip()
    return [_record(s, rung, top, q, shape=_shape_of(s, q), verdict=verdict, reason=reason, error=info)
            for q in _quantities(s)]


def _rung(s: _Setup, rung: str, cache: dict[str, Any]) -> list[Record]:
    """One rung below the top: truth, baseline and candidate on the same quantized inputs."""
    import torch

    dt = getattr(torch, rung)
    xq = _cast(s.xs, dt, "cpu")  # quantized on the CPU, then up (exact) for the truth
    x64 = _cast(xq, torch.float64, "cpu")
    gq = [g.to(dt) for g in s.gos]
    g64 = [g.to(torch.float64) for g in gq]
    try:
        truth = _evaluate(s.reference, x64, s.diff, g64, "reference (the float64 truth)", rung, seed=s.seed)
        base = _evaluate(s.reference, _cast(xq, dt, s.device), s.diff, [g.to(s.device) for g in gq],
                         "reference (the baseline)", rung, seed=s.seed)
    except EvaluationError as exc:
        return _errored(s, rung, False, exc)
    try:
        cand = _evaluate(s.candidate, _cast(xq, dt, s.device), s.diff, [g.to(s.device) for g in gq], "candidate",
                         rung, seed=s.seed)
    except EvaluationError as exc:
        return _errored(s, rung, False, exc)
    cache["candidate_ran"] = True
    if rung == "float32":
        cache["float32"] = (truth, base)
    return _judge_all(s, rung, False, truth, base, cand, None)


def _judge_all(s: _Setup, rung: str, top: bool, truth: _Run, base: _Run | None, cand: _Run,
               top_scales: list[tuple[float, float]] | None) -> list[Record]:
    import torch

    records = []
    notes = []
    if len(cand.outputs) != len(truth.outputs):
        notes.append(f"the candidate returned {len(cand.outputs)} outputs, the reference {len(truth.outputs)}")
    odd = sorted({d for d in cand.output_dtypes if d != rung})
    if odd:
        notes.append(f"the candidate returns {', '.join(odd)} at the {rung} rung")
    for n, q in enumerate(_quantities(s)):
        label, input_name, output = q
        if output is not None:
            t = truth.outputs[output].to(torch.float64)
            if output >= len(cand.outputs):
                reason = f"the candidate returned no {label} (it returned {len(cand.outputs)} outputs)"
                disc = Discrepancy(t.numel(), t.numel(), 0, True, None, math.inf, math.inf, None,
                                   (Comparison(Location(None, None, output), None, None, None, "fail", "metadata",
                                               reason, "reference"),))
                j = _Judged("fail", reason, "metadata", {}, disc, _tolerance(s.rule, rung, top, 0.0, 0.0), math.inf,
                            None)
                records.append(_record(s, rung, top, q, shape=tuple(t.shape), verdict="fail", reason=reason,
                                       judged=j, notes=notes))
                continue
            c, b = cand.outputs[output], None if base is None else base.outputs[output]
        else:
            pos = s.diff.index(s.names.index(input_name))  # type: ignore[arg-type]
            t = truth.grads[pos]
            c, b = cand.grads[pos], None if base is None else base.grads[pos]
        j = _judge(c, b, t.to(torch.float64), dtype=rung, top=top, rule=s.rule, place=_place(s, q),
                   what=label if output is not None else f"gradient of '{input_name}'",
                   top_scale=None if top_scales is None else top_scales[n])
        records.append(_record(s, rung, top, q, shape=tuple(t.shape), verdict=j.verdict, reason=j.reason, judged=j,
                               notes=notes))
    return records


def _top(s: _Setup, cache: dict[str, Any], asked: bool) -> list[Record]:
    """The top rung: the candidate in float64 against the reference in float64 directly. Skipped (with the
    candidate's exception kept) where the candidate does not accept float64 though it ran at a rung below;
    an error where float64 was asked for, or where the candidate ran at no rung at all."""
    import torch

    x64 = _cast(s.xs, torch.float64, "cpu")
    try:
        truth = _evaluate(s.reference, x64, s.diff, s.gos, "reference (the float64 truth)", "float64", seed=s.seed)
    except EvaluationError as exc:
        return _errored(s, "float64", True, exc)
    try:
        cand = _evaluate(s.candidate, _cast(x64, torch.float64, s.device), s.diff, [g.to(s.device) for g in s.gos],
                         "candidate", "float64", seed=s.seed)
    except EvaluationError as exc:
        if asked or not cache.get("candidate_ran"):
            return _errored(s, "float64", True, exc)
        info = _error_info(exc)
        first = info.message.splitlines()[0] if info.message else ""
        return _errored(s, "float64", True, exc, verdict="skipped",
                        why=f"the candidate does not accept float64 ({exc.where} raised {info.type}: {first}); "
                            "the top rung is skipped")
    # the values' scale where the formula cancels: the float32 reference's own error, in float32 ulps
    scales = _float32_scales(s, cache)
    return _judge_all(s, "float64", True, truth, None, cand, scales)


def _float32_scales(s: _Setup, cache: dict[str, Any]) -> list[tuple[float, float]]:
    """Per quantity: (mean, max) error of the float32 reference against the truth, in float32 ulps; zeros where
    the reference does not run in float32."""
    import torch

    pair = cache.get("float32")
    if pair is None:
        xq = _cast(s.xs, torch.float32, "cpu")
        gq = [g.to(torch.float32) for g in s.gos]
        try:
            truth = _evaluate(s.reference, _cast(xq, torch.float64, "cpu"), s.diff, [g.double() for g in gq],
                              "reference", "float64", seed=s.seed)
            base = _evaluate(s.reference, xq, s.diff, gq, "reference", "float32", seed=s.seed)
        except EvaluationError:
            return [(0.0, 0.0) for _ in _quantities(s)]
        pair = (truth, base)
    truth, base = pair
    out = []
    for t, b in zip(truth.outputs + truth.grads, base.outputs + base.grads):
        if tuple(t.shape) != tuple(b.shape) or not t.numel():
            out.append((0.0, 0.0))
            continue
        t64 = t.to(torch.float64)
        finite = _truth_finite(t64)
        side = _side(b, t64, finite)
        if side.mean is not None:  # every value finite: the common case
            out.append((side.mean / EPS["float32"], float(side.errors.max()) / EPS["float32"]))
            continue
        e = side.errors if finite is None else side.errors[finite]
        e = e[torch.isfinite(e)]
        out.append((float(e.mean()) / EPS["float32"], float(e.max()) / EPS["float32"]) if e.numel() else (0.0, 0.0))
    return out


def _rerun(who: Described, ref: Described, xs: list[Any], options: dict[str, Any]) -> str:
    literals = [tensor_literal(x) for x in xs]
    shown = ("(" + ", ".join(lit for lit in literals if lit) + ("," if len(xs) == 1 else "") + ")"
             if all(literals) else "inputs")
    args = "".join(f", {k}={v}" for k, v in options.items() if v is not None)
    text = f"ga.compare({who.paste or 'candidate'}, {ref.paste or 'reference'}, {shown}{args})"
    notes = [f"candidate: {who.name}"] if who.paste is None else []
    notes += [f"reference: {ref.name}"] if ref.paste is None else []
    notes += ["inputs: the tensors compared"] if shown == "inputs" else []
    return text + (f"  # {'; '.join(notes)}" if notes else "")


def compare(candidate: Callable[..., Any], reference: Callable[..., Any], inputs: Sequence[Any] | Any, *,
            dtypes: Sequence[Any] = DEFAULT_DTYPES, ratio: float = LADDER_RATIO, seed: int = 0, device: Any = None,
            tolerance: LadderTolerance | Tolerance | None = None, names: Sequence[str] | None = None,
            name: str | None = None) -> LadderResult:
    """Judge *candidate* (a fast kernel) against *reference* (a plain implementation of the same function)
    at every rung of a precision ladder, for every output and every input gradient (the inputs with
    ``requires_grad=True``); see the module docstring for the rule and why.

    *dtypes*: the rungs below the top (default bfloat16, float16, float32; torch dtypes or their names);
    the top rung, float64, is added where the candidate accepts it. *ratio*: the candidate's mean error
    may be this many times the baseline's. *seed*: the random grad_outputs. *device*: where the candidate
    and the low-precision reference run (default: the inputs' device); the truth runs on the CPU in
    float64. *tolerance*: a :class:`LadderTolerance` (ratio, floor, max guard, top rung) or a
    ``ga.Tolerance(atol, rtol)`` floor, each with a ``why``. *names*: the inputs' names (default: the
    candidate's or the reference's parameters); *name*: the check's name.

    Misuse raises :class:`SpecError` before anything is evaluated; an exception from the candidate
    gives the ``error`` verdict at that rung, with its traceback kept.
    """
    import torch

    # the caller's world as it was: modules' buffers (a BatchNorm in train() mode updates its running statistics at
    # every evaluation) and the random state (a function that draws advances it)
    modules = {id(m): m for f in (candidate, reference) for m in modules_named(f)}  # (as ga.check finds them)
    lazy = getattr(torch.nn.parameter, "UninitializedBuffer", ())  # (a lazy module's: no values to keep yet)
    buffers = [(b, b.detach().clone()) for m in modules.values() for b in m.buffers() if not isinstance(b, lazy)]
    rng, host = torch.random.get_rng_state(), host_random()  # (host: Python's and NumPy's)
    try:
        return _compare(candidate, reference, inputs, dtypes=dtypes, ratio=ratio, seed=seed, device=device,
                        tolerance=tolerance, names=names, name=name)
    finally:
        try:
            with torch.no_grad():
                for b, saved in buffers:
                    # only where a value moved: a copy bumps the buffer's version, and a graph the caller built before
                    # the comparison that saved it (batch norm in eval(), an orthogonal parametrization's base) then
                    # raised "modified by an inplace operation" at the caller's next backward. (A sparse buffer,
                    # which torch.equal does not take, is copied back as before.)
                    if not (b.layout == torch.strided and b.shape == saved.shape and torch.equal(b, saved)):
                        b.copy_(saved)
        finally:
            torch.random.set_rng_state(rng)
            restore_host_random(host)


def _compare(candidate: Callable[..., Any], reference: Callable[..., Any], inputs: Sequence[Any] | Any, *,
             dtypes: Sequence[Any], ratio: float, seed: int, device: Any, tolerance: LadderTolerance | Tolerance | None,
             names: Sequence[str] | None, name: str | None) -> LadderResult:
    import torch

    ratio, seed = plain(ratio), plain(seed)  # (NumPy scalars as the numbers they hold)
    xs, labels, rule, rungs = _validate(candidate, reference, inputs, dtypes, ratio, seed, tolerance, names, name)
    dev = _device(device, xs)
    start = time.perf_counter()
    who, ref_who = describe(candidate), describe(reference)
    # (inside parametrize.cached(): a weight cached in one dtype must not serve the others, nor stay in the caller's)
    candidate, reference = with_fresh_parametrizations(candidate), with_fresh_parametrizations(reference)
    options = {"dtypes": None if tuple(rungs) == DEFAULT_DTYPES else "(" + ", ".join(f"torch.{r}" for r in rungs)
               + ("," if len(rungs) == 1 else "") + ")",
               "ratio": None if ratio == LADDER_RATIO else repr(ratio), "seed": seed or None,
               "device": None if device is None else repr(str(device)),
               "tolerance": None if tolerance is None else "tolerance"}
    repro = _rerun(who, ref_who, xs, options)
    label = name or f"{who.name} vs {ref_who.name}"
    diff = [i for i, x in enumerate(xs) if x.requires_grad]
    meta = tuple(InputMeta(n, None, tuple(x.shape), str(x.dtype).removeprefix("torch."), str(x.device),
                           x.requires_grad) for n, x in zip(labels, xs))
    # the outputs' shapes (and that the reference runs at all) from the reference in float64
    x64 = _cast(xs, torch.float64, "cpu")
    try:  # the inputs do not require grad here: no graph is kept (copies: the reference may write to them)
        probe = _outputs_of(reference(*[x.clone() if torch.is_tensor(x) else x for x in x64]))
    except Exception as exc:
        err = EvaluationError("the reference forward in float64", exc)
        s = _Setup(candidate, reference, xs, labels, diff, rule, dev, [], [], who, ref_who, label, repro, seed, meta)
        error = _error_info(err)
        failed = tuple(_record(s, r, r == "float64", ("output", None, None), shape=(), verdict="error",
                               reason=f"{err.where} raised {error.type}", error=error)
                       for r in [*rungs, *(["float64"] if "float64" not in rungs else [])])
        return LadderResult(label, failed, {}, repro, {}, round(time.perf_counter() - start, 4))
    for k, o in enumerate(probe):
        if not torch.is_tensor(o) or not o.is_floating_point():
            got = type(o).__name__ if not torch.is_tensor(o) else f"a {o.dtype} tensor"
            raise SpecError(f"the reference must return a floating-point tensor or a tuple of them; its output {k} "
                            f"is {got}.", field="reference")
    gen = torch.Generator().manual_seed(seed)
    gos = [torch.randn(tuple(o.shape), generator=gen, dtype=torch.float64) for o in probe]
    s = _Setup(candidate, reference, xs, labels, diff, rule, dev, gos, [tuple(o.shape) for o in probe], who, ref_who,
               label, repro, seed, meta)
    del probe
    records: list[Record] = []
    seconds: dict[str, float] = {}
    cache: dict[str, Any] = {}
    low = [r for r in rungs if r != "float64"]
    for rung in low:
        t0 = time.perf_counter()
        records += _rung(s, rung, cache)
        seconds[rung] = time.perf_counter() - t0
    t0 = time.perf_counter()
    records += _top(s, cache, asked="float64" in rungs)
    seconds["float64"] = time.perf_counter() - t0
    info = {"rungs": [*low, "float64"], "device": str(dev), "statistic": STATISTIC, "ratio": rule.ratio,
            "floor_ulps": rule.floor_ulps, "max_ratio": rule.max_ratio, "top_ulps": rule.top_ulps, "seed": seed}
    return LadderResult(label, tuple(records), info, repro, seconds, round(time.perf_counter() - start, 4))


__all__ = ["DEFAULT_DTYPES", "LADDER_FLOOR_ULPS", "LADDER_MAX_RATIO", "LADDER_RATIO", "LADDER_TOP_ULPS",
           "LadderResult", "LadderRow", "LadderTolerance", "compare"]
