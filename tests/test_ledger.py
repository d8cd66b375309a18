import json

import pytest

from gradaudit import SpecError, read_ledger
from gradaudit.ledger import read_results, results_text, write_atomic
from gradaudit.record import InputMeta, Record


def test_the_seed_record_shape_works_as_it_is(ledger):
    path = ledger('{"function":"x*x","x":3,"analytical_gradient":6,"observed_gradient":null,"executed":false}')
    (check,) = read_ledger(path)
    assert check.name == "x*x"
    assert check.expected_tensor("x").item() == 6.0
    assert check.source == "ledger.json record 1"


def test_a_list_and_a_checks_table(ledger):
    two = [{"function": "x*x", "x": 3, "analytical_gradient": 6},
           {"name": "vector sum", "function": "sum(x)", "x": [1, 2, 3], "analytical_gradient": [1, 1, 1]}]
    assert [c.name for c in read_ledger(ledger(two))] == ["x*x", "vector sum"]
    assert len(read_ledger(ledger({"suite": "s", "checks": two}))) == 2


def test_toml_ledger(ledger):
    path = ledger('[[checks]]\nfunction = "w*x + b"\nw = 3.0\nb = 1.0\n'
                  'x = { value = 2.0, requires_grad = false }\n'
                  'analytical_gradient = { w = 2, b = 1 }\n', "l.toml")
    (c,) = read_ledger(path)
    assert c.grad_inputs == ["w", "b"]
    assert c.expected_tensor("w").item() == 2.0  # d(wx+b)/dw = x = 2


@pytest.mark.parametrize("content, words", [
    ('{"function": "x*x", "x": 3,', "is not valid JSON"),
    ("[]", "the ledger is empty"),
    ('{"function": "cube(x)", "x": 3, "analytical_gradient": 27}', "unknown function 'cube'"),
    ('{"function": "x*y", "x": 3, "analytical_gradient": 6}', "'y', which is not an input"),
    ('{"function": "x*x", "x": {"value": 3, "dtype": "int64"}, "analytical_gradient": 6}',
     "gradients exist only for floating-point tensors"),
    ('{"function": "sum(x)", "x": [1, 2], "analytical_gradient": [1, 1, 1]}', "has shape (3,)"),
    ('{"function": "x*x", "x": 3, "analytical_gradient": 6, "tolerance": {"atol": 0.1, "rtol": 0.1}}',
     "has no 'why'"),
    ('{"function": "__import__(\'os\').system(\'true\')", "x": 3, "analytical_gradient": 6}',
     "calls something other than a named function"),
    ('{"function": "x.__class__", "x": 3, "analytical_gradient": 6}', "attribute access"),
    ('{"function": "x*x", "x": 3}', "no 'analytical_gradient'"),
    ('{"function": "x*x", "x": NaN, "analytical_gradient": 6}', "NaN is not JSON"),
])
def test_bad_ledgers_say_file_record_and_what_to_do(ledger, content, words):
    path = ledger(content)
    with pytest.raises(SpecError) as info:
        read_ledger(path)
    assert words in str(info.value)
    assert str(path) in str(info.value)


def test_malformed_toml_names_line(ledger):
    with pytest.raises(SpecError, match=r"is not valid TOML: .*line 2, column 5"):
        read_ledger(ledger('function = "x*x"\nx = = 3\n', "bad.toml"))


def test_missing_file():
    with pytest.raises(SpecError, match="no such ledger file"):
        read_ledger("does/not/exist.json")


def test_field_is_named(ledger):
    with pytest.raises(SpecError) as info:
        read_ledger(ledger('{"function": "x*x", "x": {"value": 3, "dtype": "int64"}, "analytical_gradient": 6}'))
    assert "record 1, field 'x'" in str(info.value)


def test_results_are_written_atomically_and_read_back(tmp_path):
    path = tmp_path / "out" / "r.jsonl"
    rec = Record(check="c", inputs=(InputMeta("x", 3, (), "float64", "cpu", True),), input="x",
                 analytical_gradient=6, observed_gradient=float("nan"), executed=True, verdict="fail", outcome="failed")
    write_atomic(path, results_text([rec], {"summary": {"failed": 1}}))
    text = path.read_text()
    assert "NaN" in text and json.loads(text.splitlines()[1])["observed_gradient"] == "NaN"
    header, records = read_results(path)
    assert header["summary"] == {"failed": 1}
    assert records[0].check == "c" and records[0].verdict == "fail"
    assert [p.name for p in path.parent.iterdir()] == ["r.jsonl"]  # no temporary file left behind


def test_a_failed_write_leaves_the_earlier_file(tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    path.write_text("earlier results\n")

    def broken(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr("os.replace", broken)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(path, "new")
    assert path.read_text() == "earlier results\n"
    assert [p.name for p in tmp_path.iterdir()] == ["r.jsonl"]


@pytest.mark.parametrize("suffix, content", [
    (".json", '{"function": "x*x", "x": 3.0, "analytical_gradient": 6}'),
    (".toml", 'function = "x*x"\nx = 3.0\nanalytical_gradient = 6\n'),
])
def test_a_ledger_with_a_byte_order_mark_is_read(tmp_path, suffix, content):
    # a BOM (Windows editors write one) was refused: JSON said "decode using utf-8-sig", TOML "Invalid statement"
    path = tmp_path / f"bom{suffix}"
    path.write_bytes(b"\xef\xbb\xbf" + content.encode())
    checks = read_ledger(path)
    assert [c.name for c in checks] and checks[0].function.text == "x*x"
