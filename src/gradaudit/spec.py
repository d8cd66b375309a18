"""Expectations as data: a function, named inputs, the gradient written first, a tolerance.

``Expectation`` is what a ledger record holds (``ga.check()`` is the other door: a function and
tensors, judged against numeric evidence).

>>> e = Expectation(name="square", function="x*x", inputs={"x": 3.0}, expected={"x": 6},
...                 derivation="d/dx x^2 = 2x = 6 at x=3")
>>> e.inputs["x"].dtype
'float64'
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from . import expr as _expr
from .errors import SpecError, hide_spec_errors
from .tolerances import Tolerance, ToleranceUsed, require_why, resolve

METHODS = ("backward", "autograd.grad", "finite_difference", "taylor")
DEFAULT_METHODS = ("backward", "autograd.grad", "finite_difference")
SCHEMES = ("auto", "ridders", "central", "complex_step", "forward", "backward")
PROTOCOL_STEPS = ("forward", "backward", "backward_retain", "reset_none", "reset_zero")
DEFAULT_PROTOCOL = ("forward", "backward")
FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16")
DTYPES = FLOAT_DTYPES + ("int64", "int32", "int16", "int8", "uint8", "bool")
Expect = Literal["pass", "fail"]

#: record fields an input may not be named after (the record puts inputs at top level)
RESERVED_NAMES = frozenset({
    "schema_version", "kind", "suite", "check", "function", "inputs", "input",
    "analytical_gradient", "expected_value", "derivation", "observed_gradient", "executed",
    "method", "stored_or_returned", "protocol", "step", "shape", "dtype", "device",
    "tolerance", "discrepancy", "verdict", "outcome", "error", "source", "environment",
    "expectation_sha256", "expect", "expect_error", "name", "methods", "why", "evidence",
    "observed_error", "note", "input_meta", "expected_outcome", "elapsed_s",
    # the other fields of a record (an input named mode or rerun lost its value in the record's field of that name)
    "reason", "mode", "rerun", "details", "observed_value", "reference_value", "function_name", "convention",
    "scheme",
})


@dataclass(frozen=True)
class InputSpec:
    """One named input: its value (as written), dtype, device and whether it needs a gradient."""

    name: str
    value: Any
    dtype: str = "float64"
    device: str = "cpu"
    requires_grad: bool = True

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.tensor(requires_grad=False).shape)

    def tensor(self, *, requires_grad: bool | None = None, dtype: str | None = None) -> Any:
        """A fresh leaf tensor for this input (never shared between evidence channels)."""
        import torch

        dt = getattr(torch, dtype or self.dtype)
        if isinstance(self.value, torch.Tensor):
            t = self.value.detach().clone().to(dtype=dt, device=self.device)
        else:
            t = torch.tensor(self.value, dtype=dt, device=self.device)
        rg = self.requires_grad if requires_grad is None else requires_grad
        return t.requires_grad_(rg) if rg else t

    def written(self) -> Any:
        """The value as plain JSON-ready data."""
        import torch

        if isinstance(self.value, torch.Tensor):
            return self.value.detach().cpu().tolist()
        return self.value


@dataclass(frozen=True)
class ExpectedError:
    """A declared expected outcome: the check passes only when this error occurs."""

    type: str
    match: str
    explanation: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.type, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.type):
            raise SpecError(f"expect_error.type must be an exception class name such as "
                            f"'RuntimeError'; got {self.type!r}.", field="expect_error.type")
        try:
            re.compile(self.match)
        except (re.error, TypeError) as exc:
            raise SpecError(f"expect_error.match must be a regular expression; {exc}.",
                            field="expect_error.match") from None

    def matches(self, exc: BaseException) -> bool:
        names = {cls.__name__ for cls in type(exc).__mro__}
        return self.type in names and re.search(self.match, str(exc)) is not None


@dataclass(frozen=True)
class Expectation:
    """A gradient expectation: data, written before anything runs (a ledger record)."""

    name: str
    function: Any  # an expression string (parsed to expr.Expr) or a callable
    inputs: Mapping[str, Any]
    expected: Mapping[str, Any] = field(default_factory=dict)
    derivation: str = ""
    tolerance: Tolerance | None = None
    methods: Sequence[str] = DEFAULT_METHODS
    protocol: Sequence[str] = DEFAULT_PROTOCOL
    expect_error: ExpectedError | None = None
    expect: Expect = "pass"
    expect_why: str | None = None
    source: str = ""
    suite: str = ""
    step: float | None = None
    scheme: str = "auto"
    convention: Mapping[str, Any] = field(default_factory=dict)
    timeout: float | None = None  # seconds; on expiry the check gets the error verdict and the run goes on

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise SpecError("every check needs a non-empty 'name'.", field="name")
        check_timeout(self.timeout)
        if self.step is not None and (isinstance(self.step, bool) or not isinstance(self.step, (int, float))
                                      or not 0 < self.step < 1):
            raise SpecError(f"'step' is the finite-difference step h, a number in (0, 1); got {self.step!r}.",
                            field="step")
        set_ = object.__setattr__
        set_(self, "inputs", _normalise_inputs(self.inputs))
        set_(self, "methods", _normalise_methods(self.methods))
        set_(self, "protocol", _normalise_protocol(self.protocol, tuple(self.methods)))
        if isinstance(self.function, str):
            parsed = _expr.parse(self.function, allowed_names=tuple(self.inputs))
            set_(self, "function", parsed)
            unused = [n for n in self.inputs if n not in parsed.names]
            if unused:
                raise SpecError(
                    f"the input(s) {', '.join(unused)} are not used by the function "
                    f"{parsed.text!r}. Remove them, or correct the expression.",
                    field="function")
            _scalar_at_load(parsed, self.inputs)
        elif not callable(self.function):
            raise SpecError(f"'function' must be an expression string or a callable; got "
                            f"{type(self.function).__name__}.", field="function")
        if self.expect not in ("pass", "fail"):
            raise SpecError(f"'expect' must be 'pass' or 'fail'; got {self.expect!r}.", field="expect")
        if self.expect == "fail" and not (self.expect_why and self.expect_why.strip()):
            raise SpecError("a check expected to fail needs 'expect_why': why it fails and why "
                            "that is kept visible rather than fixed.", field="expect_why")
        if self.scheme not in SCHEMES:
            raise SpecError(f"unknown scheme {self.scheme!r}.{_expr._suggest(str(self.scheme), SCHEMES)} Schemes: "
                            f"{', '.join(SCHEMES)}.", field="scheme")
        if self.expect_error is None:
            set_(self, "expected", _normalise_expected(self.expected, self.inputs))
        elif self.expected:
            raise SpecError("a check that expects an error has no gradient expectation; remove "
                            "'analytical_gradient' or 'expect_error'.", field="analytical_gradient")
        if self.convention:
            set_(self, "convention", _normalise_expected(self.convention, self.inputs, partial=True,
                                                         field="convention"))
        if self.tolerance is not None:
            if not isinstance(self.tolerance, Tolerance):
                raise SpecError("'tolerance' must be a Tolerance(atol, rtol, why).", field="tolerance")
            require_why(self.tolerance, self.default_tolerances(),
                        labels=[m for m in self.methods if m != "taylor" for _ in self.grad_inputs])

    # -- derived views -------------------------------------------------------------
    def tolerance_for(self, name: str | None, method: str) -> ToleranceUsed | None:
        """The tolerance that governs one comparison, with its basis and whether it is the default."""
        if method == "taylor" or name is None:
            return None  # tolerance-free: the verdict follows from the observed convergence order
        if method == "finite_difference":
            return resolve("evidence_vs_expected", "float64", self.tolerance, scheme=self.numeric_scheme)
        return resolve("autograd_vs_expected", self.inputs[name].dtype, self.tolerance)

    def default_tolerances(self) -> list[ToleranceUsed]:
        found = [resolve("evidence_vs_expected", "float64", scheme=self.numeric_scheme)
                 if m == "finite_difference" else resolve("autograd_vs_expected", self.inputs[n].dtype)
                 for m in self.methods if m != "taylor" for n in self.grad_inputs]
        return found or [resolve("autograd_vs_expected", "float64")]

    @property
    def numeric_scheme(self) -> str:
        """The finite-difference scheme used: Ridders unless a step or a scheme was chosen."""
        if self.scheme != "auto":
            return self.scheme
        return "central" if self.step is not None else "ridders"

    @property
    def grad_inputs(self) -> list[str]:
        return [n for n, s in self.inputs.items() if s.requires_grad]

    def source_text(self) -> str:
        """The function's source: the expression, or the Python source when available."""
        return source_of(self.function)

    def call(self, tensors: Mapping[str, Any]) -> Any:
        fn = self.function
        if isinstance(fn, _expr.Expr):
            return fn(tensors)
        return fn(**tensors)

    def expected_tensor(self, name: str) -> Any:
        """The expectation for input *name* as a float64 tensor of the input's shape."""
        return _expected_as_tensor(self.expected[name], self.inputs, name)

    def convention_tensor(self, name: str) -> Any:
        """The declared subgradient convention for *name* at kinks, or None."""
        if name not in self.convention:
            return None
        return _expected_as_tensor(self.convention[name], self.inputs, name, "convention")


def _scalar_at_load(parsed: Any, inputs: Mapping[str, InputSpec]) -> None:
    """An expression must give one number at its point (a gradient expectation is of a scalar); said at
    load, before anything runs. An expression that raises there is left for the run (its error verdict)."""
    import torch

    try:
        with torch.no_grad():
            value = parsed({n: s.tensor(requires_grad=False) for n, s in inputs.items()})
    except Exception:
        return
    if isinstance(value, torch.Tensor) and value.numel() != 1:
        raise SpecError(f"the function {parsed.text!r} gives shape {tuple(value.shape)} at its inputs, but a "
                        "gradient expectation is of one number: reduce it, e.g. sum(...) or mean(...).",
                        field="function")


#: the longest timeout: the interval timer takes seconds within the platform's time_t (1e10 raised OverflowError)
MAX_TIMEOUT = 1e8


def check_timeout(timeout: Any, field: str = "timeout") -> None:
    """A timeout is None or a positive, finite number of seconds."""
    __tracebackhide__ = hide_spec_errors
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_TIMEOUT:
        raise SpecError(f"{field} is the seconds a check may take, a positive number up to {MAX_TIMEOUT:.0e} (about "
                        f"three years) such as 30; got {timeout!r}.", field=field)


#: seeds stay below this: a check draws several streams from seed * 16 + stream, within torch's 64-bit seeds
SEED_LIMIT = 2 ** 59


def check_seed(seed: Any) -> None:
    """A seed is a non-negative int below SEED_LIMIT (a bool is not one)."""
    __tracebackhide__ = hide_spec_errors
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < SEED_LIMIT:
        raise SpecError(f"seed must be a non-negative integer below 2**59 (a check draws several independent random "
                        f"streams from it, within torch's 64-bit seeds); got {seed!r}.", field="seed")


def source_of(fn: Any) -> str:
    """The text of an expression or the source of a callable (read once per function)."""
    if isinstance(fn, _expr.Expr):
        return fn.text
    from .naming import describe

    return describe(fn).source


def _normalise_inputs(inputs: Mapping[str, Any]) -> dict[str, InputSpec]:
    if not isinstance(inputs, Mapping) or not inputs:
        raise SpecError("a check needs at least one input, e.g. {\"x\": 3.0}.", field="inputs")
    out: dict[str, InputSpec] = {}
    for name, value in inputs.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise SpecError(f"input names must be identifiers such as 'x' or 'w1'; got {name!r}.",
                            field="inputs")
        import unicodedata

        folded = unicodedata.normalize("NFKC", name)
        if folded != name:  # Python reads identifiers NFKC-normalized: the expression's ｘ is x, never this input
            raise SpecError(f"the input name {name!r} is read by Python as {folded!r} (its characters are "
                            f"compatibility forms, NFKC), so an expression can never refer to it; name the input "
                            f"{folded!r}.", field="inputs")
        if name in RESERVED_NAMES or name in _expr.FUNCTIONS or name in _expr.CONSTANTS:
            raise SpecError(f"'{name}' cannot name an input: it is a record field or a function "
                            "name. Rename the input.", field=name)
        spec = value if isinstance(value, InputSpec) else InputSpec(name=name, value=value, **_dtype_of(value))
        out[name] = _validated_input(spec)
    return out


def _dtype_of(value: Any) -> dict[str, Any]:
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return {}
    if isinstance(value, torch.Tensor):
        return {"dtype": str(value.dtype).removeprefix("torch."), "device": str(value.device),
                "requires_grad": True}
    return {}


def _validated_input(spec: InputSpec) -> InputSpec:
    if not isinstance(spec.dtype, str) or spec.dtype not in DTYPES:
        raise SpecError(f"dtype {spec.dtype!r} is not supported; use one of {', '.join(DTYPES)}.",
                        field=f"{spec.name}.dtype")
    if spec.requires_grad and spec.dtype not in FLOAT_DTYPES:
        raise SpecError(
            f"the input '{spec.name}' has dtype {spec.dtype} and requires a gradient, but gradients "
            "exist only for floating-point tensors. Write the value with a decimal point "
            f"(e.g. 3.0) or set dtype=float64.", field=spec.name)
    _check_value(spec.value, spec.name)
    _device_available(spec)
    try:
        made = spec.tensor(requires_grad=False)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise SpecError(f"the value of '{spec.name}' cannot become a {spec.dtype} tensor on "
                        f"{spec.device}: {exc}. Give a number or a rectangular nested list.",
                        field=spec.name) from None
    except Exception as exc:  # e.g. torch's AssertionError for a device this build lacks
        raise SpecError(f"the input '{spec.name}' cannot be placed on device {spec.device!r}: "
                        f"{type(exc).__name__}: {exc}. Use a device this machine has (`gradaudit env` lists them).",
                        field=f"{spec.name}.device") from None
    if not isinstance(spec.requires_grad, bool):
        raise SpecError("requires_grad must be true or false.", field=f"{spec.name}.requires_grad")
    if spec.requires_grad and made.numel() == 0:  # ("x": [] passed two methods, its written gradient unread)
        raise SpecError(f"the input '{spec.name}' is empty ({spec.value!r}): it has no element whose gradient a check "
                        "could compare with the one written. Give it at least one value, or set requires_grad to "
                        "false.", field=spec.name)
    return spec


def _device_available(spec: InputSpec) -> None:
    import torch

    if not isinstance(spec.device, str):
        raise SpecError(f"device must be a string such as 'cpu' or 'cuda'; got {spec.device!r}.",
                        field=f"{spec.name}.device")
    try:
        device = torch.device(spec.device)
    except (RuntimeError, ValueError):
        raise SpecError(f"the input '{spec.name}' names device {spec.device!r}, which is not a torch device; "
                        "write 'cpu', 'cuda', 'cuda:1', 'mps' ...", field=f"{spec.name}.device") from None
    if device.type == "meta":  # (it loaded and planned, then every method gave the error verdict)
        raise SpecError(f"the input '{spec.name}' is on the meta device, which holds shapes but no values: a gradient "
                        "check needs values (the function's, autograd's, finite differences'). Use device 'cpu', or "
                        "'cuda' on a machine with a GPU.", field=f"{spec.name}.device")
    if device.type == "cuda" and not torch.cuda.is_available():
        why = "this torch build has no CUDA" if torch.version.cuda is None else "no CUDA device is visible"
        raise SpecError(f"the input '{spec.name}' asks for device {spec.device!r}, which is not available here "
                        f"({why}). Run the ledger on a machine with a GPU, or use device 'cpu'.",
                        field=f"{spec.name}.device")


def _check_value(value: Any, name: str) -> None:
    import torch

    if isinstance(value, torch.Tensor):
        return
    if isinstance(value, bool) or value is None or isinstance(value, (str, dict)):
        raise SpecError(f"the value of '{name}' must be a number or a nested list of numbers; "
                        f"got {value!r}.", field=name)
    if isinstance(value, (list, tuple)):
        for v in value:
            _check_value(v, name)
    elif not isinstance(value, (int, float)):
        raise SpecError(f"the value of '{name}' must be a number or a nested list of numbers; "
                        f"got {type(value).__name__}.", field=name)
    else:
        _finite_number(value, f"the value of '{name}'", name)


def _finite_number(value: float, what: str, field: str) -> None:
    """A written number must be a finite float64: 1e400 (inf), NaN and 400-digit integers are refused."""
    try:
        as_float = float(value)
    except OverflowError:
        raise SpecError(f"{what} is an integer of {len(str(abs(int(value))))} digits, too large for a float64 "
                        "(at most about 1.8e308). Write the number you mean.", field=field) from None
    if not math.isfinite(as_float):
        raise SpecError(f"{what} is {as_float}, which is not finite (a literal such as 1e400 overflows to "
                        "infinity). Gradients are checked at finite points: write a finite number.",
                        field=field)


def _drawn_from(values: Sequence[str], vocabulary: tuple[str, ...], field: str) -> tuple[str, ...]:
    """*values* as a tuple, each checked against *vocabulary* (with a suggestion)."""
    if isinstance(values, str) or not values:
        raise SpecError(f"'{field}' must be a non-empty list drawn from {', '.join(vocabulary)}; "
                        f"got {values!r}.", field=field)
    for v in values:
        if v not in vocabulary:
            raise SpecError(f"unknown {field} entry {v!r}.{_expr._suggest(str(v), vocabulary)} Allowed: "
                            f"{', '.join(vocabulary)}.", field=field)
    return tuple(values)


def _normalise_methods(methods: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(_drawn_from(methods, METHODS, "methods")))


def _normalise_protocol(protocol: Sequence[str], methods: tuple[str, ...]) -> tuple[str, ...]:
    protocol = _drawn_from(protocol, PROTOCOL_STEPS, "protocol")
    if protocol[0] != "forward":
        raise SpecError("a protocol starts with 'forward' (the evidence channel starts from fresh "
                        "leaves whose .grad is None).", field="protocol")
    if protocol != DEFAULT_PROTOCOL and methods != ("backward",):
        raise SpecError("a custom protocol describes what happens to .grad, so it applies to the "
                        "'backward' method only; set methods = [\"backward\"].", field="protocol")
    return protocol


def _normalise_expected(expected: Any, inputs: Mapping[str, InputSpec], *, partial: bool = False,
                        field: str = "analytical_gradient") -> dict[str, Any]:
    grad_names = [n for n, s in inputs.items() if s.requires_grad]
    if not isinstance(expected, Mapping):
        if not grad_names:
            raise SpecError(f"no input requires a gradient ({', '.join(inputs)}: requires_grad false), so there "
                            "is no gradient to expect; write \"analytical_gradient\": {} (nothing to compare: the "
                            "check runs nothing, exit code 5) or let an input require grad.", field=field)
        if len(grad_names) != 1:
            raise SpecError(f"with several inputs ({', '.join(grad_names)}) the analytical "
                            "gradient must be an object keyed by input name, e.g. "
                            "{\"w\": -12, \"b\": -6}.", field=field)
        expected = {grad_names[0]: expected}
    for name in expected:
        if name not in inputs:
            raise SpecError(f"'{field}' names '{name}', which is not an input "
                            f"(inputs: {', '.join(inputs)}).{_expr._suggest(str(name), tuple(inputs))}",
                            field=field)
    missing = [n for n in grad_names if n not in expected]
    if missing and not partial:
        raise SpecError(f"no analytical gradient for the input(s) {', '.join(missing)}: write the "
                        "expected derivative of each input that requires a gradient first.",
                        field="analytical_gradient")
    out: dict[str, Any] = {}
    for name, value in expected.items():
        if not inputs[name].requires_grad:
            raise SpecError(f"'{name}' has requires_grad=false, so it has no gradient to expect.",
                            field=f"{field}.{name}")
        if isinstance(value, str):
            value = _expr.parse(value, allowed_names=tuple(inputs))
        _expected_as_tensor(value, inputs, name, field)  # validates shape now, not at run time
        out[name] = value
    return out


def _expected_as_tensor(value: Any, inputs: Mapping[str, InputSpec], name: str,
                        field: str = "analytical_gradient") -> Any:
    import torch

    shape = inputs[name].shape
    where = f"{field}.{name}"
    what = "the expected gradient" if field == "analytical_gradient" else "the declared convention"
    if isinstance(value, _expr.Expr) or callable(value):
        env = {n: s.tensor(requires_grad=False, dtype="float64") for n, s in inputs.items()}
        try:
            result = value(env) if isinstance(value, _expr.Expr) else value(**env)
        except SpecError:
            raise
        except Exception as exc:  # the expectation itself is broken: an input error
            raise SpecError(f"{what} formula raised {type(exc).__name__}: {exc}.",
                            field=where) from None
        tensor = torch.as_tensor(result, dtype=torch.float64).detach()
    else:
        if isinstance(value, bool) or value is None or isinstance(value, (str, dict)):
            raise SpecError(f"{what} must be a number, a nested list, a formula "
                            f"string or a callable; got {value!r}.", field=where)
        try:
            tensor = torch.as_tensor(value, dtype=torch.float64).detach().clone().cpu()
        except (TypeError, ValueError, RuntimeError, OverflowError) as exc:
            raise SpecError(f"{what} cannot become a tensor: {exc}.", field=where) from None
        if not bool(torch.isfinite(tensor).all()):
            bad = [i for i, v in enumerate(tensor.reshape(-1).tolist()) if not math.isfinite(v)]
            raise SpecError(f"{what} holds {tensor.reshape(-1)[bad[0]].item()} (at flat element "
                            f"{bad[0]}), which is not finite: an expectation must be a finite number. A value "
                            "such as 1e400 overflows to infinity; write the derivative you derived.", field=where)
    if tensor.dim() == 0 and shape != ():
        return tensor.expand(shape).clone()
    if tuple(tensor.shape) != shape:
        raise SpecError(f"{what} of '{name}' has shape {tuple(tensor.shape)}, but "
                        f"'{name}' has shape {shape}; a gradient has the shape of its input. "
                        "Give one value per element (or a single number for all).", field=where)
    return tensor


@dataclass(frozen=True)
class Matches:
    """An expected text given as a regular expression (e.g. an error message)."""

    pattern: str

    def __post_init__(self) -> None:
        re.compile(self.pattern)


@dataclass(frozen=True)
class Probe:
    """A check of observed facts: *run* returns {fact: value}; *expected* holds each
    fact's value as written in the document (numbers, lists, text, True/False/None, or
    :class:`Matches`). Used for what is not a gradient: shapes, dtypes, grad_fn names,
    memory sharing, the numbers of a worked example.
    """

    name: str
    run: Callable[[], Mapping[str, Any]]
    expected: Mapping[str, Any]
    derivation: str = ""
    tolerance: Tolerance | None = None
    expect: Expect = "pass"
    expect_why: str | None = None
    source: str = ""
    suite: str = ""
    skip_unless: Callable[[], str | None] | None = None
    #: the dtype of its numeric observations, declared: the default tolerance is the one for it in the plan and the
    #: run alike. None: the run takes the observed dtype's and the plan float64's (a float32 probe's expectation hash
    #: then differs between the two: the lesson's float32 probes declare theirs)
    dtype: str | None = None

    def __post_init__(self) -> None:
        if self.dtype is not None and self.dtype not in FLOAT_DTYPES:
            raise SpecError(f"a probe's dtype is that of its numeric observations, one of {', '.join(FLOAT_DTYPES)}; "
                            f"got {self.dtype!r}.", field="dtype")
        if not self.expected:
            raise SpecError(f"the probe '{self.name}' expects no facts; write the expected values first.",
                            field="expected")
        if self.expect == "fail" and not (self.expect_why and self.expect_why.strip()):
            raise SpecError("a probe expected to fail needs 'expect_why'.", field="expect_why")
        if self.tolerance is not None and not self.tolerance.why:
            raise SpecError("a probe's tolerance needs a 'why'.", field="tolerance.why")

    def source_text(self) -> str:
        return source_of(self.run)
