"""A small, safe expression language for ledger files.

Ledger files are data: a function such as ``"sum(w*x + b)"`` is *parsed* into a
tree of whitelisted nodes and interpreted with torch; nothing is ever passed to
``eval`` or ``exec``.

>>> import torch
>>> e = parse("x*x")
>>> e.names
('x',)
>>> float(e({"x": torch.tensor(3.0)}))
9.0

Allowed: numbers, input names, ``+ - * / **``, unary minus, parentheses and
calls of the functions in :data:`FUNCTIONS`. A few functions take parameters after
their tensor argument (see :data:`PARAMS`), positionally or by keyword: ``dim`` (an
integer) and ``keepdim`` (``True``/``False``) for ``sum mean prod amax amin logsumexp``
(reduce one dimension instead of all), ``dim`` (required) for ``softmax`` and
``log_softmax``, ``min``/``max`` (numbers) for ``clamp``. A parameter is a constant
written out, never an expression, and no other keyword is accepted.

>>> e = parse("sum(softmax(x, dim=-1) * w, 1)", allowed_names=("x", "w"))
>>> e.names, e.functions
(('x', 'w'), ('sum', 'softmax'))
>>> [round(v, 3) for v in e({"x": torch.zeros(2, 2), "w": torch.tensor([[1.0, 3.0], [0.0, 2.0]])}).tolist()]
[2.0, 1.0]
>>> float(parse("sum(clamp(x, min=0))")({"x": torch.tensor([-1.0, 2.0])}))
2.0
"""

from __future__ import annotations

import ast
import difflib
import math
import operator
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import SpecError

MAX_LENGTH = 2000
MAX_DEPTH = 64


def _torch() -> Any:
    import torch

    return torch


def _fn(name: str, arity: int | tuple[int, int] = 1) -> tuple[Callable[..., Any], tuple[int, int]]:
    def call(*args: Any, **params: Any) -> Any:
        torch = _torch()
        tensors = [a if isinstance(a, torch.Tensor) else torch.as_tensor(a, dtype=torch.float64)
                   for a in args]
        return _IMPLS[name](torch, *tensors, **params)

    span = (arity, arity) if isinstance(arity, int) else arity
    return call, span


def _reduction(method: str) -> Callable[..., Any]:
    """A reduction over every element, or over one dimension ``dim`` (kept as size 1 with ``keepdim``)."""
    def reduce(t: Any, x: Any, dim: int | None = None, keepdim: bool = False) -> Any:
        if dim is None:
            return getattr(t, method)(x)
        return getattr(t, method)(x, dim, keepdim=keepdim)

    return reduce


def _logsumexp(t: Any, x: Any, dim: int | None = None, keepdim: bool = False) -> Any:
    if dim is None:  # over every element, as sum(x): log(sum(exp(x)))
        return t.logsumexp(x.reshape(-1), 0)
    return t.logsumexp(x, dim, keepdim=keepdim)


def _clamp(t: Any, x: Any, min: float | None = None, max: float | None = None) -> Any:
    return t.clamp(x, min=None if min is None else float(min), max=None if max is None else float(max))


_IMPLS: dict[str, Callable[..., Any]] = {
    "sum": _reduction("sum"),
    "mean": _reduction("mean"),
    "prod": _reduction("prod"),
    "amax": _reduction("amax"),
    "amin": _reduction("amin"),
    "logsumexp": _logsumexp,
    "softmax": lambda t, x, dim: t.softmax(x, dim),
    "log_softmax": lambda t, x, dim: t.log_softmax(x, dim),
    "clamp": _clamp,
    "sin": lambda t, x: t.sin(x),
    "cos": lambda t, x: t.cos(x),
    "tan": lambda t, x: t.tan(x),
    "asin": lambda t, x: t.asin(x),
    "acos": lambda t, x: t.acos(x),
    "atan": lambda t, x: t.atan(x),
    "sinh": lambda t, x: t.sinh(x),
    "cosh": lambda t, x: t.cosh(x),
    "tanh": lambda t, x: t.tanh(x),
    "exp": lambda t, x: t.exp(x),
    "expm1": lambda t, x: t.expm1(x),
    "log": lambda t, x: t.log(x),
    "log1p": lambda t, x: t.log1p(x),
    "sqrt": lambda t, x: t.sqrt(x),
    "square": lambda t, x: t.square(x),
    "abs": lambda t, x: t.abs(x),
    "sigmoid": lambda t, x: t.sigmoid(x),
    "relu": lambda t, x: t.relu(x),
    "softplus": lambda t, x: t.nn.functional.softplus(x),
    "erf": lambda t, x: t.erf(x),
    "pow": lambda t, x, y: t.pow(x, y),
    "maximum": lambda t, x, y: t.maximum(x, y),
    "minimum": lambda t, x, y: t.minimum(x, y),
    "dot": lambda t, x, y: t.dot(x, y),
    "matmul": lambda t, x, y: t.matmul(x, y),
}

_TWO_ARGS = {"pow", "maximum", "minimum", "dot", "matmul"}
#: the tensor arguments each function takes (expressions), before its parameters
TENSOR_ARGS: dict[str, int] = {name: 2 if name in _TWO_ARGS else 1 for name in _IMPLS}
#: the parameters a function takes after its tensor arguments, in positional order; each may also be
#: given by keyword, and each is a constant written out (an integer dim, True/False, a number)
_REDUCE = ("dim", "keepdim")
PARAMS: dict[str, tuple[str, ...]] = {
    "sum": _REDUCE, "mean": _REDUCE, "prod": _REDUCE, "amax": _REDUCE, "amin": _REDUCE, "logsumexp": _REDUCE,
    "softmax": ("dim",), "log_softmax": ("dim",), "clamp": ("min", "max"),
}
_REQUIRED: dict[str, tuple[str, ...]] = {"softmax": ("dim",), "log_softmax": ("dim",)}
KEYWORDS = ("dim", "keepdim", "min", "max")
MAX_DIM = 64  # torch tensors have at most 64 dimensions: dim lies in [-64, 63]
FUNCTIONS: dict[str, tuple[Callable[..., Any], tuple[int, int]]] = {
    name: _fn(name, (TENSOR_ARGS[name], TENSOR_ARGS[name] + len(PARAMS.get(name, ())))) for name in sorted(_IMPLS)
}
CONSTANTS: dict[str, float] = {"pi": math.pi}

_BINOPS: dict[type, tuple[str, Callable[[Any, Any], Any]]] = {
    ast.Add: ("+", operator.add),
    ast.Sub: ("-", operator.sub),
    ast.Mult: ("*", operator.mul),
    ast.Div: ("/", operator.truediv),
    ast.Pow: ("**", operator.pow),
}

ALLOWED = (
    "numbers, input names, + - * / **, unary minus, parentheses and calls of "
    + ", ".join(sorted(FUNCTIONS))
    + "; the parameters dim, keepdim, min and max, as constants: sum(x, 1), softmax(x, dim=-1), "
      "clamp(x, min=0)"
)

_REFUSED = {
    ast.Attribute: "attribute access (a.b)",
    ast.Subscript: "subscripts (a[i])",
    ast.Lambda: "lambdas",
    ast.Compare: "comparisons",
    ast.BoolOp: "boolean operators",
    ast.IfExp: "conditional expressions",
    ast.ListComp: "comprehensions",
    ast.GeneratorExp: "comprehensions",
    ast.DictComp: "comprehensions",
    ast.SetComp: "comprehensions",
    ast.List: "list literals",
    ast.Tuple: "tuples",
    ast.Dict: "dict literals",
    ast.Set: "set literals",
    ast.JoinedStr: "f-strings",
    ast.NamedExpr: "assignment expressions (:=)",
    ast.Starred: "starred arguments",
    ast.Await: "await",
}


@dataclass(frozen=True)
class Expr:
    """A parsed expression: call it with a mapping of input name -> tensor."""

    text: str
    tree: ast.expr = field(repr=False, compare=False)
    names: tuple[str, ...]
    functions: tuple[str, ...]

    def __call__(self, env: Mapping[str, Any]) -> Any:
        return _evaluate(self.tree, env)


def parse(text: str, *, allowed_names: tuple[str, ...] | None = None) -> Expr:
    """Parse *text* into an :class:`Expr`, refusing anything outside the whitelist.

    If *allowed_names* is given, a name outside it is refused with a suggestion.
    """
    if not isinstance(text, str) or not text.strip():
        raise SpecError(f"an expression must be a non-empty string such as \"x*x\"; got {text!r}.")
    if len(text) > MAX_LENGTH:
        raise SpecError(f"the expression is {len(text)} characters long; at most {MAX_LENGTH} are allowed.")
    try:
        with warnings.catch_warnings():
            # Python warns about text such as "1if" or "3x" (a SyntaxWarning printed to the terminal): an
            # expression that needs a warning is refused like one that does not parse
            warnings.simplefilter("error", SyntaxWarning)
            warnings.simplefilter("error", DeprecationWarning)
            tree = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, SyntaxWarning, DeprecationWarning, ValueError) as exc:
        msg = getattr(exc, "msg", None) or str(exc)
        col = getattr(exc, "offset", None)
        raise SpecError(
            f"the expression {text!r} is not valid: {msg}" + (f" (column {col})" if col else "") + ". "
            f"Allowed: {ALLOWED}."
        ) from None
    names: list[str] = []
    functions: list[str] = []
    _validate(tree, text, names, functions, allowed_names, 0)
    _fold(tree, text)
    return Expr(text=text, tree=tree, names=tuple(dict.fromkeys(names)),
                functions=tuple(dict.fromkeys(functions)))


def _suggest(word: str, candidates: list[str] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word, list(candidates), n=1)
    return f" Did you mean '{close[0]}'?" if close else ""


def _validate(node: ast.AST, text: str, names: list[str], functions: list[str],
              allowed_names: tuple[str, ...] | None, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise SpecError(f"the expression {text!r} nests deeper than {MAX_DEPTH} levels.")
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise SpecError(
                f"the expression {text!r} contains the literal {node.value!r}; only numbers are "
                f"allowed as literals. Allowed: {ALLOWED}."
            )
        if not _finite(node.value):  # 1e400 is inf; a 401-digit int overflows float (an error at every evaluation)
            shown = repr(node.value) if len(repr(node.value)) <= 40 else f"a {len(str(node.value))}-digit number"
            raise SpecError(f"the expression {text!r} contains the literal {shown}, which is not a finite float64 "
                            "number (at most about 1.8e308); write a finite constant.")
        return
    if isinstance(node, ast.Name):
        if node.id in FUNCTIONS:
            raise SpecError(f"in {text!r}, '{node.id}' is a function; call it, e.g. {node.id}(x).")
        if node.id in CONSTANTS:
            return
        if allowed_names is not None and node.id not in allowed_names:
            known = ", ".join(sorted(allowed_names)) or "none"
            import unicodedata

            folded = [n for n in allowed_names if n != node.id and unicodedata.normalize("NFKC", n) == node.id]
            if folded:  # an input named ｘ: Python reads the expression's ｘ as x (identifiers are NFKC-normalized)
                raise SpecError(f"the input name {folded[0]!r} is read by Python as {node.id!r} (its characters are "
                                "compatibility forms, NFKC), so the expression can never refer to it; name the "
                                f"input {node.id!r}.")
            raise SpecError(
                f"the expression {text!r} uses the name '{node.id}', which is not an input "
                f"(inputs: {known}).{_suggest(node.id, allowed_names)} "
                "Add it as an input or correct the expression."
            )
        names.append(node.id)
        return
    if isinstance(node, ast.BinOp):
        if type(node.op) not in _BINOPS:
            raise SpecError(
                f"the operator {type(node.op).__name__} in {text!r} is not allowed. Allowed: {ALLOWED}."
            )
        _validate(node.left, text, names, functions, allowed_names, depth + 1)
        _validate(node.right, text, names, functions, allowed_names, depth + 1)
        return
    if isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, (ast.USub, ast.UAdd)):
            raise SpecError(f"the unary operator in {text!r} is not allowed. Allowed: {ALLOWED}.")
        _validate(node.operand, text, names, functions, allowed_names, depth + 1)
        return
    if isinstance(node, ast.Call):
        _validate_call(node, text, names, functions, allowed_names, depth)
        return
    what = _REFUSED.get(type(node), f"the construct {type(node).__name__}")
    raise SpecError(
        f"the expression {text!r} uses {what}, which ledger expressions do not allow "
        f"(they are parsed, never evaluated as Python). Allowed: {ALLOWED}."
    )


def _validate_call(node: ast.Call, text: str, names: list[str], functions: list[str],
                   allowed_names: tuple[str, ...] | None, depth: int) -> None:
    if not isinstance(node.func, ast.Name):
        raise SpecError(
            f"the expression {text!r} calls something other than a named function; only "
            f"calls such as sin(x) are allowed. Allowed: {ALLOWED}."
        )
    name = node.func.id
    if name not in FUNCTIONS:
        raise SpecError(
            f"the expression {text!r} calls the unknown function '{name}'.{_suggest(name, tuple(FUNCTIONS))} "
            f"Known functions: {', '.join(sorted(FUNCTIONS))}."
        )
    params = PARAMS.get(name, ())
    if node.keywords and not params:
        raise SpecError(f"in {text!r}, {name}() takes positional arguments only (no keyword such as "
                        f"'{node.keywords[0].arg or '**'}').")
    low, high = FUNCTIONS[name][1]
    if not low <= len(node.args) <= high:
        if low == high:
            raise SpecError(f"in {text!r}, {name}() takes {low} argument(s); {len(node.args)} given.")
        signature = ", ".join(("x", "y")[:low] + params)
        raise SpecError(f"in {text!r}, {name}() takes {low} to {high} arguments ({name}({signature})); "
                        f"{len(node.args)} given.")
    functions.append(name)
    for arg in node.args[:TENSOR_ARGS[name]]:
        _validate(arg, text, names, functions, allowed_names, depth + 1)
    call_params(node, text)


def call_params(node: ast.Call, text: str) -> dict[str, Any]:
    """The parameters of a call (``dim``, ``keepdim``, ``min``, ``max``) as Python values, given
    positionally after the tensor arguments or by keyword; SpecError for anything else."""
    assert isinstance(node.func, ast.Name)
    name = node.func.id
    params = PARAMS.get(name, ())
    given: dict[str, Any] = {}
    for param, arg in zip(params, node.args[TENSOR_ARGS[name]:]):
        given[param] = _constant(arg, text, name, param)
    for kw in node.keywords:
        if kw.arg is None:
            raise SpecError(f"in {text!r}, keyword unpacking (**) is not allowed; write {name}()'s "
                            f"parameters out, e.g. {name}(x, {params[0]}=...).")
        if kw.arg not in KEYWORDS:
            raise SpecError(f"in {text!r}, the keyword '{kw.arg}' is not allowed; ledger expressions take only "
                            f"the keywords {', '.join(KEYWORDS)}.{_suggest(kw.arg, KEYWORDS)}")
        if kw.arg not in params:
            raise SpecError(f"in {text!r}, {name}() takes no keyword '{kw.arg}'; its parameters are "
                            f"{', '.join(params)}.")
        if kw.arg in given:
            raise SpecError(f"in {text!r}, {name}() gets '{kw.arg}' twice (by position and by keyword).")
        given[kw.arg] = _constant(kw.value, text, name, kw.arg)
    missing = [p for p in _REQUIRED.get(name, ()) if p not in given]
    if missing:
        raise SpecError(f"in {text!r}, {name}() needs '{missing[0]}', the dimension it normalizes over, "
                        f"e.g. {name}(x, {missing[0]}=-1).")
    if "keepdim" in given and "dim" not in given:
        raise SpecError(f"in {text!r}, {name}() gets keepdim without dim; keepdim keeps the reduced "
                        f"dimension, so give it, e.g. {name}(x, dim=0, keepdim=True).")
    if name == "clamp":
        if not given:
            raise SpecError(f"in {text!r}, clamp() needs min, max or both, e.g. clamp(x, -1, 1) or "
                            "clamp(x, min=0).")
        if "min" in given and "max" in given and given["min"] > given["max"]:
            raise SpecError(f"in {text!r}, clamp() gets min {given['min']!r} above max {given['max']!r}; "
                            "min must not exceed max.")
    return given


def _fold(node: ast.AST, text: str) -> float | None:
    """The value of a constant part (numbers, pi, + - * / ** and signs between them, as :func:`_evaluate`
    computes it: Python floats), or None where the part holds an input or a call. A constant part that overflows,
    divides by zero or is not a real number is refused at parse (it gave the error verdict at every evaluation,
    after a load and plan that passed)."""
    if isinstance(node, ast.Constant):
        assert isinstance(node.value, (int, float))  # validated by _validate
        return float(node.value)
    if isinstance(node, ast.Name):
        return CONSTANTS.get(node.id)
    if isinstance(node, ast.UnaryOp):
        operand = _fold(node.operand, text)
        return None if operand is None else -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.Call):  # its tensor arguments are parts of their own (its parameters are checked)
        assert isinstance(node.func, ast.Name)  # validated by _validate_call
        for arg in node.args[:TENSOR_ARGS[node.func.id]]:
            _fold(arg, text)
        return None
    if not isinstance(node, ast.BinOp):
        return None
    left, right = _fold(node.left, text), _fold(node.right, text)
    if left is None or right is None:
        return None
    why = ""
    try:
        value: Any = _BINOPS[type(node.op)][1](left, right)
    except OverflowError:
        why = "overflows a float64 (at most about 1.8e308)"
    except ZeroDivisionError as exc:
        why = f"divides by zero ({exc})"
    else:
        if not isinstance(value, float):  # (-8)**0.5 is a complex number
            why = f"is not a real number ({value})"
        elif not math.isfinite(value):  # 1e308*10: inf without an OverflowError
            why = f"is {value}, not a finite number"
    if why:
        part = ast.get_source_segment(text.strip(), node) or ast.unparse(node)
        part = part if len(part) <= 40 else part[:37] + "..."
        raise SpecError(f"the expression {text!r} has the constant part {part!r}, which cannot be computed: it "
                        f"{why}. Ledger constants are float64 numbers; write the constant you mean.")
    return float(value)


def _finite(value: float) -> bool:
    """A finite number that is a float too (an int of 400 digits overflows float(): OverflowError crashed loading)."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _constant(node: ast.expr, text: str, name: str, param: str) -> Any:
    """A parameter's value: a number or True/False written out (an optional sign), checked for *param*."""
    value: Any = None
    if isinstance(node, ast.Constant):
        value = node.value
    elif (isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd))
          and isinstance(node.operand, ast.Constant) and isinstance(node.operand.value, (int, float))
          and not isinstance(node.operand.value, bool)):
        value = -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
    else:
        seen = ast.get_source_segment(text.strip(), node) or type(node).__name__
        seen = seen if len(seen) <= 40 else seen[:37] + "..."
        raise SpecError(f"in {text!r}, {name}()'s parameter '{param}' is {seen!r}, not a constant; "
                        f"{_PARAM_KINDS[param]}" + (" (for a bound that is an input use maximum(x, y) or "
                                                   "minimum(x, y))" if param in ("min", "max") else "") + ".")
    if param == "dim":
        if isinstance(value, bool) or not isinstance(value, int) or not -MAX_DIM <= value < MAX_DIM:
            raise SpecError(f"in {text!r}, {name}()'s parameter 'dim' is {value!r}; {_PARAM_KINDS['dim']}.")
    elif param == "keepdim":
        if not isinstance(value, bool):
            raise SpecError(f"in {text!r}, {name}()'s parameter 'keepdim' is {value!r}; "
                            f"{_PARAM_KINDS['keepdim']}.")
    elif isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value):
        shown = repr(value) if len(repr(value)) <= 40 else f"a {len(str(abs(value)))}-digit number"
        raise SpecError(f"in {text!r}, {name}()'s parameter '{param}' is {shown}; {_PARAM_KINDS[param]}.")
    return value


_PARAM_KINDS = {
    "dim": f"dim must be an integer written out, from {-MAX_DIM} to {MAX_DIM - 1}, such as 0 or -1",
    "keepdim": "keepdim must be True or False",
    "min": "min must be a finite number written out, such as -1 or 0.5",
    "max": "max must be a finite number written out, such as 1 or 2.5",
}


def _evaluate(node: ast.AST, env: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        assert isinstance(node.value, (int, float))  # validated by parse()
        return float(node.value)
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        if node.id in CONSTANTS:
            return CONSTANTS[node.id]
        raise SpecError(f"the expression needs the input '{node.id}', which was not given.")
    if isinstance(node, ast.BinOp):
        left = _evaluate(node.left, env)
        right = _evaluate(node.right, env)
        symbol, op = _BINOPS[type(node.op)]
        if isinstance(left, float) and isinstance(right, float):
            try:
                return op(left, right)
            except (OverflowError, ZeroDivisionError) as exc:
                raise SpecError(f"the constant part '{ast.unparse(node)}' cannot be computed: {exc}.") from None
        return op(left, right)
    if isinstance(node, ast.UnaryOp):
        value = _evaluate(node.operand, env)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name = node.func.id
        args = [_evaluate(a, env) for a in node.args[:TENSOR_ARGS[name]]]
        params = call_params(node, "") if name in PARAMS else {}
        return FUNCTIONS[name][0](*args, **params)
    raise SpecError(f"cannot evaluate {ast.unparse(node)!r}")  # unreachable after parse()
