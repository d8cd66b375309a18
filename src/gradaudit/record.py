"""Records: one per expectation x method, frozen, JSON-ready; expected and observed apart.

>>> r = Record({"suite": "s", "check": "c", "function": "x*x", "inputs": {"x": {"value": 3}},
...             "input": "x", "analytical_gradient": 6}, {"observed_gradient": None, "executed": False})
>>> d = r.to_dict()
>>> d["x"], d["analytical_gradient"], d["observed_gradient"], d["executed"]
(3, 6, None, False)
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1

#: fields that are the expectation: written before anything runs, identical in plan and run.
EXPECTATION_KEYS = (
    "suite", "check", "function", "inputs", "input", "analytical_gradient", "expected_value",
    "derivation", "method", "stored_or_returned", "protocol", "step", "scheme", "convention", "tolerance",
    "expect", "expect_error", "source",
)

#: outcomes, in the order a summary lists them, and whether each makes a run fail.
OUTCOMES = {
    "passed": False, "failed": True, "inconclusive": False, "errors": True,
    "expected failures": False, "unexpected passes": True, "skipped": False,
}


def jsonable(value: Any) -> Any:
    """Plain JSON data: tensors become lists, non-finite floats become strings."""
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "tolist") and hasattr(value, "dtype"):  # a tensor or an array
        return jsonable(value.tolist())
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` that never writes bare NaN/Infinity."""
    return json.dumps(jsonable(value), allow_nan=False, ensure_ascii=False, **kwargs)


def expectation_hash(expectation: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of the expectation fields."""
    canonical = dumps({k: expectation.get(k) for k in EXPECTATION_KEYS}, sort_keys=True,
                      separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Record:
    """One piece of evidence compared with one expectation."""

    expectation: Mapping[str, Any]
    observation: Mapping[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str | None:
        return self.observation.get("verdict")

    @property
    def outcome(self) -> str | None:
        return self.observation.get("outcome")

    def get(self, key: str, default: Any = None) -> Any:
        if key in self.expectation:
            return self.expectation[key]
        return self.observation.get(key, default)

    def to_dict(self) -> dict[str, Any]:
        """The JSON record: seed-shaped fields first (function, inputs by name, gradients)."""
        e, o = self.expectation, self.observation
        d: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "kind": "record",
                             "suite": e.get("suite"), "check": e.get("check"),
                             "function": e.get("function")}
        for name, spec in (e.get("inputs") or {}).items():
            d[name] = spec.get("value") if isinstance(spec, Mapping) else spec
        d["input"] = e.get("input")
        d["analytical_gradient"] = e.get("analytical_gradient")
        d["observed_gradient"] = o.get("observed_gradient")
        d["executed"] = bool(o.get("executed", False))
        for k in EXPECTATION_KEYS:
            d.setdefault(k, e.get(k))
        for k, v in o.items():
            d.setdefault(k, v)
        d["expectation_sha256"] = expectation_hash(e)
        return jsonable(d)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Record:
        """Rebuild a record from its JSON form (the inverse of :meth:`to_dict`)."""
        exp = {k: d.get(k) for k in EXPECTATION_KEYS}
        skip = set(EXPECTATION_KEYS) | {"schema_version", "kind", "expectation_sha256"}
        skip |= set(d.get("inputs") or {})
        obs = {k: v for k, v in d.items() if k not in skip}
        return cls(exp, obs)


def summarize(records: list[Record]) -> dict[str, int]:
    """Counts per outcome, checks counted by record."""
    counts = {k: 0 for k in OUTCOMES}
    for r in records:
        if r.outcome in counts:
            counts[r.outcome] += 1  # type: ignore[index]
    return counts


def summary_line(counts: Mapping[str, int]) -> str:
    """``N passed, N failed`` plus the other outcomes that occurred."""
    parts = [f"{counts.get('passed', 0)} passed", f"{counts.get('failed', 0)} failed"]
    for key in ("errors", "inconclusive", "expected failures", "unexpected passes", "skipped"):
        if counts.get(key):
            parts.append(f"{counts[key]} {key}")
    return ", ".join(parts)


def run_failed(counts: Mapping[str, int]) -> bool:
    return any(counts.get(k, 0) for k, bad in OUTCOMES.items() if bad)
