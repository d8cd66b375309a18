"""The one data model: frozen records of an expectation, its evidence and the comparisons judged.

Every path (ledgers, ``ga.check``, ``check_module``, probes) produces :class:`Record` objects;
every renderer reads them. ``to_dict``/``from_dict`` derive from the fields; records hold plain
JSON values only (never tensors), and the JSON Schema ships in the package
(``gradaudit/schema/record.schema.json``).

>>> r = Record(suite="s", check="c", function="x*x", inputs=(InputMeta("x", 3, (), "float64", "cpu", True),),
...            input="x", analytical_gradient=6, expected_value=6.0)
>>> d = r.to_dict()
>>> d["x"], d["analytical_gradient"], d["observed_gradient"], d["executed"], d["verdict"]
(3, 6, None, False, 'planned')
>>> Record.from_dict(d) == r
True
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .tolerances import ToleranceUsed

SCHEMA_VERSION = 2

Verdict = Literal["pass", "fail", "inconclusive", "error", "skipped", "planned"]
Outcome = Literal["passed", "failed", "inconclusive", "errors", "expected failures", "unexpected passes", "skipped",
                  "planned"]
VERDICTS: tuple[str, ...] = typing.get_args(Verdict)

#: outcomes, in the order a summary lists them, and whether each makes a run fail.
OUTCOMES = {
    "passed": False, "failed": True, "inconclusive": True, "errors": True,
    "expected failures": False, "unexpected passes": True, "skipped": False, "planned": False,
}

JSON = Any  # plain JSON data: None, bool, int, float, str, lists and dicts of them


def _expectation(default: Any = None, **kw: Any) -> Any:
    """A field that belongs to the expectation: written before anything runs, identical in plan and run."""
    return field(default=default, metadata={"expectation": True}, **kw)


@dataclass(frozen=True)
class InputMeta:
    """One named input: its value as written (None where not recorded), shape, dtype, device."""

    name: str
    value: JSON
    shape: tuple[int, ...]
    dtype: str
    device: str
    requires_grad: bool


@dataclass(frozen=True)
class Evidence:
    """How the observed (or reference) values were obtained, and how precise they are."""

    method: str  # backward | autograd.grad | finite_difference | jvp | observation | taylor | ...
    scheme: str | None = None  # ridders | central | complex_step | forward | backward | richardson | ...
    step_rule: str | None = None
    steps: tuple[float, ...] | None = None
    precision: str | None = None  # the dtype the evidence was computed in
    error_bound: float | None = None  # the largest error bound over the compared values
    evaluations: int | None = None
    notes: tuple[str, ...] = ()
    details: Mapping[str, JSON] = field(default_factory=dict)


@dataclass(frozen=True)
class Location:
    """Where a value sits: input name, element of the input, output index and element."""

    input: str | None = None
    element: tuple[int, ...] | None = None
    output: int | None = None
    output_element: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Allowance:
    """What a comparison allowed, term by term: atol + rtol·|reference| + the evidence's error bound."""

    atol: float
    rtol_term: float
    evidence: float
    total: float


@dataclass(frozen=True)
class Comparison:
    """One located comparison: the reference (expected or numeric), the observed value, the
    allowance with its terms, the verdict and its reason."""

    location: Location
    reference: float | None
    observed: float | None
    allowance: Allowance | None
    verdict: Verdict
    kind: str = "value"  # value | kink | discontinuity | nonfinite | none-gradient | metadata | nondeterministic | ...
    reason: str = ""
    reference_kind: str = "numeric"  # numeric | expected
    slopes: tuple[float, float] | None = None

    @property
    def abs(self) -> float:
        if self.reference is None or self.observed is None:
            return math.inf
        if self.reference == self.observed:
            return 0.0
        return abs(self.observed - self.reference)

    @property
    def rel(self) -> float:
        a = self.abs
        if a == 0.0:
            return 0.0
        if self.reference in (None, 0.0) or not math.isfinite(a):
            return math.inf
        return a / abs(self.reference)  # type: ignore[arg-type]

    # short names used in reports and tests
    @property
    def input(self) -> str | None:
        return self.location.input

    @property
    def element(self) -> tuple[int, ...] | None:
        return self.location.element

    @property
    def output(self) -> int | None:
        return self.location.output

    @property
    def output_element(self) -> tuple[int, ...] | None:
        return self.location.output_element


@dataclass(frozen=True)
class Discrepancy:
    """The comparison summarized: exact counts (or "at least", with why), the greatest differences,
    and the worst comparisons, worst first."""

    total: int
    mismatched: int
    inconclusive: int = 0
    exact: bool = True
    why_inexact: str | None = None
    max_abs: float = 0.0
    max_rel: float = 0.0
    at: Location | None = None
    worst: tuple[Comparison, ...] = ()


@dataclass(frozen=True)
class ErrorInfo:
    """An exception kept whole: type, message, traceback, and where it was raised."""

    type: str
    message: str
    traceback: str = ""
    where: str | None = None  # function | backward | expectation | probe | timeout | ...


@dataclass(frozen=True)
class Record:
    """One expectation x method (x input), with its evidence, comparisons and verdict."""

    # -- the expectation: written first, identical in plan and run ------------------------------
    suite: str = _expectation("")
    check: str = _expectation("")
    function: str = _expectation("")
    inputs: tuple[InputMeta, ...] = _expectation(())
    input: str | None = _expectation()
    analytical_gradient: JSON = _expectation()
    expected_value: JSON = _expectation()
    derivation: str = _expectation("")
    method: str = _expectation("")
    stored_or_returned: str | None = _expectation()
    protocol: tuple[str, ...] | None = _expectation()
    step: float | None = _expectation()
    scheme: str | None = _expectation()
    convention: JSON = _expectation()
    tolerance: ToleranceUsed | None = _expectation()
    expect: JSON = _expectation("pass")
    expect_error: JSON = _expectation()
    source: str = _expectation("")
    function_name: str | None = _expectation()
    # -- what happened ------------------------------------------------------------------------------
    executed: bool = False
    verdict: Verdict = "planned"
    outcome: Outcome = "planned"
    reason: str | None = None
    observed_gradient: JSON = None
    observed_value: JSON = None
    reference_value: JSON = None
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    device: str | None = None
    mode: str | None = None
    evidence: Evidence | None = None
    discrepancy: Discrepancy | None = None
    error: ErrorInfo | None = None
    observed_error: ErrorInfo | None = None
    rerun: str | None = None
    environment: str | None = None
    elapsed_s: float | None = None
    details: Mapping[str, JSON] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.verdict == "pass"

    def to_dict(self) -> dict[str, Any]:
        """The JSON record: the ledger's fields first (function, inputs by name, gradients)."""
        body = to_json(self)
        head: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "kind": "record", "suite": body.pop("suite"),
                                "check": body.pop("check"), "function": body.pop("function")}
        head.update({m.name: to_json(m.value) for m in self.inputs})
        for key in ("input", "analytical_gradient", "observed_gradient", "executed"):
            head[key] = body.pop(key)
        head.update(body)
        head["expectation_sha256"] = expectation_hash(self)
        return head

    @classmethod
    def _make(cls, **values: Any) -> Record:
        """``Record(**values)`` for ``ga.check``'s hot path: the same record (equal, hashed and frozen alike), its
        fields set at once instead of one ``object.__setattr__`` each (a third of the time: 38 fields)."""
        if not values.keys() <= _RECORD_FIELDS:
            return cls(**values)  # (raises the constructor's own TypeError for the unknown name)
        record = object.__new__(cls)
        state = dict(_RECORD_DEFAULTS)
        for name, make in _RECORD_FACTORIES:  # (details: a dict of its own)
            state[name] = make()
        state.update(values)
        object.__setattr__(record, "__dict__", state)
        return record

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Record:
        """Rebuild a record from its JSON form (the inverse of :meth:`to_dict`)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return from_json(cls, {k: v for k, v in d.items() if k in names})


# (Record._make: the fields, their defaults, and the default factories, called for each record)
_RECORD_FIELDS = frozenset(f.name for f in dataclasses.fields(Record))
_RECORD_DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(Record)
                                    if f.default is not dataclasses.MISSING}
_RECORD_FACTORIES = tuple((f.name, f.default_factory) for f in dataclasses.fields(Record)
                          if f.default_factory is not dataclasses.MISSING)

EXPECTATION_FIELDS = tuple(f.name for f in dataclasses.fields(Record) if f.metadata.get("expectation"))


def expectation_hash(record: Record) -> str:
    """sha256 of the canonical JSON of the expectation fields."""
    part = {name: to_json(getattr(record, name)) for name in EXPECTATION_FIELDS}
    return hashlib.sha256(dumps(part, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


# -- JSON, derived from the fields ---------------------------------------------------------------

def encode_float(value: float) -> Any:
    """A float as JSON data: non-finite values become the strings "NaN", "Infinity", "-Infinity"."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def decode_float(value: Any) -> Any:
    return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(value, value) \
        if isinstance(value, str) else value


def to_json(value: Any) -> Any:
    """Plain JSON data from dataclasses, tuples, mappings, tensors and floats."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, float):
        return encode_float(value)
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if hasattr(value, "tolist") and hasattr(value, "dtype"):  # a tensor or an array
        return to_json(value.tolist())
    return value


jsonable = to_json


@functools.cache
def _hints(tp: type) -> dict[str, Any]:
    return typing.get_type_hints(tp)


def from_json(tp: Any, data: Any) -> Any:
    """Rebuild a value of type *tp* (a dataclass, tuple, Optional, Literal or plain type) from JSON data."""
    if isinstance(tp, str):  # pragma: no cover - annotations are resolved below
        raise TypeError(tp)
    origin = typing.get_origin(tp)
    if tp is Any or tp is JSON:
        return data
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if data is None:
            return None
        return from_json(args[0], data) if len(args) == 1 else data
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = _hints(tp)
        kwargs = {f.name: from_json(hints[f.name], data[f.name]) for f in dataclasses.fields(tp) if f.name in data}
        return tp(**kwargs)
    if origin is tuple:
        items = typing.get_args(tp)
        return tuple(from_json(items[0] if items else Any, v) for v in data)
    if origin in (Mapping, dict) or tp in (dict, Mapping):
        return dict(data)
    if tp is float:
        return decode_float(data)
    return data


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` that never writes bare NaN/Infinity; text as it is, but a lone surrogate (a name from a file
    name that is not UTF-8) as JSON's escape for it, which reads back as the same string (raw, it could not be
    written as UTF-8)."""
    data = to_json(value)
    text = json.dumps(data, allow_nan=False, ensure_ascii=False, **kwargs)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(data, allow_nan=False, ensure_ascii=True, **kwargs)
    return text


def schema() -> dict[str, Any]:
    """The JSON Schema of a record, as shipped in the package."""
    from importlib import resources

    return json.loads(resources.files("gradaudit").joinpath("schema/record.schema.json").read_text(encoding="utf-8"))


_TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
}


def schema_error(data: Any, node: dict[str, Any] | None = None, path: str = "",
                 root: dict[str, Any] | None = None) -> str | None:
    """Where *data* breaks the shipped record schema, in words ("at 'verdict': 'banana' is not one of ..."),
    or None where it conforms. The subset of JSON Schema the shipped schema uses (type, const, enum,
    required, properties, additionalProperties, items, prefixItems, min/maxItems, pattern, anyOf, oneOf,
    local $ref): a results file is data, and a record is checked before anything reads it."""
    import re

    root = root if root is not None else _shipped_schema()
    node = root if node is None else node
    where = f"at '{path}'" if path else "the record"
    if "$ref" in node:
        target: Any = root
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return schema_error(data, target, path, root)
    for key in ("anyOf", "oneOf"):
        if key in node:
            matched = [schema_error(data, option, path, root) is None for option in node[key]]
            if (key == "anyOf" and not any(matched)) or (key == "oneOf" and sum(matched) != 1):
                return f"{where}: {_short(data)} is not a value this field holds"
    if "const" in node and data != node["const"]:
        return f"{where}: {_short(data)} where {node['const']!r} is required"
    if "enum" in node and data not in node["enum"]:
        return f"{where}: {_short(data)} is not one of {', '.join(map(str, node['enum']))}"
    kind = node.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_TYPES[k](data) for k in kinds):
            return f"{where}: {_short(data)} where {' or '.join(kinds)} is required"
    if "pattern" in node and isinstance(data, str) and not re.search(node["pattern"], data):
        return f"{where}: {_short(data)} does not have the required form"
    if isinstance(data, dict):
        for name in node.get("required", ()):
            if name not in data:
                return f"{where}: the field '{name}' is missing"
        props = node.get("properties", {})
        for name, value in data.items():
            if name in props:
                found = schema_error(value, props[name], f"{path}.{name}" if path else name, root)
                if found:
                    return found
            elif node.get("additionalProperties", True) is False:
                return f"{where}: unknown field '{name}'"
    if isinstance(data, list):
        if len(data) < node.get("minItems", 0) or len(data) > node.get("maxItems", len(data)):
            return f"{where}: {len(data)} items, which this field does not hold"
        first = node.get("prefixItems", [])
        for i, value in enumerate(data):
            item = first[i] if i < len(first) else node.get("items")
            if isinstance(item, dict):
                found = schema_error(value, item, f"{path}[{i}]", root)
                if found:
                    return found
    return None


@functools.cache
def _shipped_schema() -> dict[str, Any]:
    return schema()


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 60 else text[:57] + "..."


# -- counting ----------------------------------------------------------------------------------

def summarize(records: Sequence[Record]) -> dict[str, int]:
    """Counts per outcome."""
    counts = {k: 0 for k in OUTCOMES}
    for r in records:
        counts[r.outcome] = counts.get(r.outcome, 0) + 1
    return counts


def summary_line(counts: Mapping[str, int]) -> str:
    """``N passed, N failed`` plus the other outcomes that occurred."""
    parts = [f"{counts.get('passed', 0)} passed", f"{counts.get('failed', 0)} failed"]
    singular = {"errors": "error", "expected failures": "expected failure", "unexpected passes": "unexpected pass"}
    for key in ("errors", "inconclusive", "expected failures", "unexpected passes", "skipped", "planned"):
        if counts.get(key):
            parts.append(f"{counts[key]} {singular.get(key, key) if counts[key] == 1 else key}")
    return ", ".join(parts)


def run_failed(counts: Mapping[str, int]) -> bool:
    return any(counts.get(k, 0) for k, bad in OUTCOMES.items() if bad)
