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
calls of the functions in :data:`FUNCTIONS` with positional arguments.
"""

from __future__ import annotations

import ast
import difflib
import math
import operator
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
    def call(*args: Any) -> Any:
        torch = _torch()
        tensors = [a if isinstance(a, torch.Tensor) else torch.as_tensor(a, dtype=torch.float64)
                   for a in args]
        return _IMPLS[name](torch, *tensors)

    span = (arity, arity) if isinstance(arity, int) else arity
    return call, span


_IMPLS: dict[str, Callable[..., Any]] = {
    "sum": lambda t, x: t.sum(x),
    "mean": lambda t, x: t.mean(x),
    "prod": lambda t, x: t.prod(x),
    "amax": lambda t, x: t.amax(x),
    "amin": lambda t, x: t.amin(x),
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
FUNCTIONS: dict[str, tuple[Callable[..., Any], tuple[int, int]]] = {
    name: _fn(name, 2 if name in _TWO_ARGS else 1) for name in sorted(_IMPLS)
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
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise SpecError(
            f"the expression {text!r} is not valid: {exc.msg} (column {exc.offset}). "
            f"Allowed: {ALLOWED}."
        ) from None
    names: list[str] = []
    functions: list[str] = []
    _validate(tree, text, names, functions, allowed_names, 0)
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
        return
    if isinstance(node, ast.Name):
        if node.id in FUNCTIONS:
            raise SpecError(f"in {text!r}, '{node.id}' is a function; call it, e.g. {node.id}(x).")
        if node.id in CONSTANTS:
            return
        if allowed_names is not None and node.id not in allowed_names:
            known = ", ".join(sorted(allowed_names)) or "none"
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
    if node.keywords:
        raise SpecError(f"in {text!r}, {name}() takes positional arguments only.")
    low, high = FUNCTIONS[name][1]
    if not low <= len(node.args) <= high:
        raise SpecError(f"in {text!r}, {name}() takes {low} argument(s); {len(node.args)} given.")
    functions.append(name)
    for arg in node.args:
        _validate(arg, text, names, functions, allowed_names, depth + 1)


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
        args = [_evaluate(a, env) for a in node.args]
        return FUNCTIONS[node.func.id][0](*args)
    raise SpecError(f"cannot evaluate {ast.unparse(node)!r}")  # unreachable after parse()
