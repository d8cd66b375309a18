import json

import jsonschema
import pytest

from gradaudit.record import (
    EXPECTATION_FIELDS,
    Allowance,
    Comparison,
    Discrepancy,
    ErrorInfo,
    Evidence,
    InputMeta,
    Location,
    Record,
    dumps,
    jsonable,
    schema,
    summary_line,
)
from gradaudit.tolerances import ToleranceUsed

X = (InputMeta("x", 3, (), "float64", "cpu", True),)


def test_seed_fields_come_first():
    r = Record(suite="s", check="c", function="x*x", inputs=X, input="x", analytical_gradient=6)
    keys = list(r.to_dict())
    assert keys[:10] == ["schema_version", "kind", "suite", "check", "function", "x", "input",
                         "analytical_gradient", "observed_gradient", "executed"]
    # the seed's own record shape: {"function":"x*x","x":3,"analytical_gradient":6,"observed_gradient":null,...}
    d = r.to_dict()
    assert (d["function"], d["x"], d["analytical_gradient"], d["observed_gradient"], d["executed"]) == \
        ("x*x", 3, 6, None, False)


def test_non_finite_numbers_are_explicit():
    text = dumps({"a": float("nan"), "b": [float("inf"), -float("inf")], "c": 1.5})
    assert json.loads(text) == {"a": "NaN", "b": ["Infinity", "-Infinity"], "c": 1.5}
    assert "NaN," not in text.replace('"NaN"', "")


def test_tensors_become_lists():
    import torch

    assert jsonable({"t": torch.tensor([1.0, float("nan")])}) == {"t": [1.0, "NaN"]}


FULL = Record(
    suite="s", check="c", function="x*x", inputs=X, input="x", analytical_gradient=6, expected_value=6.0,
    derivation="2x", method="finite_difference", stored_or_returned="estimated", step=1e-3, scheme="central",
    tolerance=ToleranceUsed(1e-6, 1e-6, None, True, "table", None), source="test", executed=True, verdict="fail",
    outcome="failed", reason="r", observed_gradient=float("nan"), shape=(), dtype="float64", device="cpu",
    evidence=Evidence("finite_difference", "central", "h", (1e-3,), "float64", None, 2, ("n",), {"f": 9.0}),
    discrepancy=Discrepancy(1, 1, 0, True, None, float("inf"), float("inf"), Location("x", ()),
                            (Comparison(Location("x", ()), 6.0, float("nan"), Allowance(1e-6, 6e-6, 0.0, 7e-6),
                                        "fail", "nonfinite", "the observed value is nan", "expected", (1.0, 2.0)),)),
    error=ErrorInfo("ValueError", "m", "tb", "the function"), rerun="gradaudit run s", environment="e", elapsed_s=0.5,
    details={"k": [1, 2]})


def test_round_trip_of_every_field():
    back = Record.from_dict(json.loads(dumps(FULL.to_dict())))
    assert back.to_dict() == FULL.to_dict()
    assert back.discrepancy.worst[0].allowance == FULL.discrepancy.worst[0].allowance
    assert back.discrepancy.max_abs == float("inf") and back.evidence.steps == (1e-3,)


def test_the_fast_constructor_makes_the_constructors_record():
    """Record._make (ga.check's hot path) sets the fields at once: the same record as Record(...), frozen, with a
    details dict of its own, and the constructor's error for a field that does not exist."""
    import dataclasses

    given = {f.name: getattr(FULL, f.name) for f in dataclasses.fields(Record)}
    assert Record._make(**given) == FULL and repr(Record._make(**given)) == repr(FULL)
    few = {"suite": "s", "check": "c", "verdict": "pass", "shape": (2,)}
    made, built = Record._make(**few), Record(**few)
    assert made == built and dataclasses.asdict(made) == dataclasses.asdict(built) and made.to_dict() == built.to_dict()
    assert made.details == {} and made.details is not Record._make(**few).details
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.verdict = "fail"
    with pytest.raises(TypeError, match="verdictt"):
        Record._make(verdictt="pass")


def test_records_validate_against_the_shipped_schema():
    jsonschema.validate(json.loads(dumps(FULL.to_dict())), schema())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**json.loads(dumps(FULL.to_dict())), "verdict": "maybe"}, schema())


def test_the_schema_names_every_field_of_the_model():
    import dataclasses

    props = schema()["properties"]
    assert set(props) == {f.name for f in dataclasses.fields(Record)} | {"schema_version", "kind",
                                                                          "expectation_sha256"}
    for cls in (Evidence, Comparison, Discrepancy, Location, Allowance, ErrorInfo, InputMeta, ToleranceUsed):
        assert set(schema()["$defs"][cls.__name__]["properties"]) == {f.name for f in dataclasses.fields(cls)}


def test_the_expectation_hash_covers_only_the_expectation():
    import dataclasses

    ran = dataclasses.replace(FULL, verdict="pass", outcome="passed", reason=None)
    assert ran.to_dict()["expectation_sha256"] == FULL.to_dict()["expectation_sha256"]
    changed = dataclasses.replace(FULL, derivation="2x, by the power rule")
    assert changed.to_dict()["expectation_sha256"] != FULL.to_dict()["expectation_sha256"]
    assert "derivation" in EXPECTATION_FIELDS and "verdict" not in EXPECTATION_FIELDS


def test_summary_line():
    assert summary_line({"passed": 3, "failed": 0}) == "3 passed, 0 failed"
    assert summary_line({"passed": 3, "failed": 1, "errors": 2, "expected failures": 1}) == \
        "3 passed, 1 failed, 2 errors, 1 expected failure"
