import json

from gradaudit.record import Record, dumps, jsonable, summary_line


def test_seed_fields_come_first():
    r = Record({"suite": "s", "check": "c", "function": "x*x", "inputs": {"x": {"value": 3}},
                "input": "x", "analytical_gradient": 6}, {"observed_gradient": None, "executed": False})
    keys = list(r.to_dict())
    assert keys[:10] == ["schema_version", "kind", "suite", "check", "function", "x", "input",
                         "analytical_gradient", "observed_gradient", "executed"]


def test_non_finite_numbers_are_explicit():
    text = dumps({"a": float("nan"), "b": [float("inf"), -float("inf")], "c": 1.5})
    assert json.loads(text) == {"a": "NaN", "b": ["Infinity", "-Infinity"], "c": 1.5}
    assert "NaN," not in text.replace('"NaN"', "")


def test_tensors_become_lists():
    import torch

    assert jsonable({"t": torch.tensor([1.0, float("nan")])}) == {"t": [1.0, "NaN"]}


def test_round_trip():
    r = Record({"check": "c", "inputs": {"x": {"value": 3}}, "input": "x", "analytical_gradient": 6},
               {"observed_gradient": 6.0, "executed": True, "verdict": "pass", "outcome": "passed"})
    back = Record.from_dict(json.loads(dumps(r.to_dict())))
    assert back.to_dict() == r.to_dict()


def test_summary_line():
    assert summary_line({"passed": 3, "failed": 0}) == "3 passed, 0 failed"
    assert summary_line({"passed": 3, "failed": 1, "errors": 2, "expected failures": 1}) == \
        "3 passed, 1 failed, 2 errors, 1 expected failures"
