"""A catalogue of bad inputs and faults, across the CLI and the API, each with its exact outcome class:

- ``exit2``: the CLI exits 2 with one paragraph on stderr ("gradaudit: error: ..."), no traceback;
- ``SpecError``: the API raises ``ga.SpecError`` naming the argument, before any evaluation;
- ``error``: the check gets the ``error`` verdict with the exception's type, message and traceback kept;
- ``inconclusive``: the evidence cannot decide, and the record says why.

Expected outcomes come from what the input is (a NaN expectation cannot be compared; a FIFO is not a
results file), not from running gradaudit. The fuzzing of the expression parser and the ledger
loader is at the end.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
import time
import tracemalloc

import pytest
import torch

import gradaudit as ga
from gradaudit.errors import SpecError
from gradaudit.ledger import parse_ledger, parse_text

GOOD = {"function": "x*x", "x": 3.0, "analytical_gradient": 6}


def _one_paragraph(res) -> None:
    assert res.code == 2, (res.code, res.out, res.err)
    assert res.err.startswith("gradaudit: error: "), res.err
    assert res.err.count("\n") == 1, res.err  # one paragraph
    assert "Traceback" not in res.err + res.out


# -- ledgers that must be refused at load: exit 2, one paragraph naming the file ------------------------------

DEEP_JSON = "[" * 100_000 + "]" * 100_000
DEEP_TOML = "x = " + "[" * 100_000 + "]" * 100_000 + "\n"

LEDGERS = {
    # syntax and structure
    "not JSON": ("{function: x*x}", "ledger.json", "is not valid JSON"),
    "truncated JSON": ('{"function": "x*x", "x": 3', "ledger.json", "is not valid JSON"),
    "not TOML": ("function = = 'x'", "ledger.toml", "is not valid TOML"),
    "empty file": ("", "ledger.json", "is not valid JSON"),
    "empty list": ("[]", "ledger.json", "the ledger is empty"),
    "a number": ("42", "ledger.json", "a ledger holds a record"),
    "a string": ('"x*x"', "ledger.json", "a ledger holds a record"),
    "list of numbers": ("[1, 2]", "ledger.json", "a record must be an object"),
    "nested 100000 deep (JSON)": (DEEP_JSON, "ledger.json", "nested too deeply"),
    "nested 100000 deep (TOML)": (DEEP_TOML, "ledger.toml", "nested too deeply"),
    "unknown extension": (json.dumps(GOOD), "ledger.yaml", "ledgers are .json or .toml"),
    "invalid UTF-8": (b"\xff\xfe{", "ledger.json", "cannot be read"),
    "NUL bytes": ("\0\0\0", "ledger.json", "is not valid JSON"),
    "unknown top-level key": ('{"checks": [], "sute": "a"}', "ledger.json", "unknown top-level key"),
    "checks not a list": ('{"checks": 3}', "ledger.json", "a ledger holds a record"),
    # functions
    "no function": ('{"x": 3, "analytical_gradient": 6}', "ledger.json", "has no 'function'"),
    "function a number": ('{"function": 3, "x": 3, "analytical_gradient": 6}', "ledger.json",
                          "must be an expression string"),
    "unknown function": ('{"function": "cube(x)", "x": 3, "analytical_gradient": 27}', "ledger.json",
                         "unknown function"),
    "syntax error": ('{"function": "x*(x", "x": 3, "analytical_gradient": 6}', "ledger.json", "x*(x"),
    "import injection": ('{"function": "__import__(\'os\').system(\'true\')", "x": 3, "analytical_gradient": 6}',
                         "ledger.json", "other than a named function"),
    "attribute access": ('{"function": "x.__class__", "x": 3, "analytical_gradient": 6}', "ledger.json",
                         "x.__class__"),
    "lambda": ('{"function": "(lambda: 1)()", "x": 3, "analytical_gradient": 6}', "ledger.json", "lambda"),
    "subscript": ('{"function": "x[0]", "x": [3], "analytical_gradient": [6]}', "ledger.json", "x[0]"),
    "unknown name": ('{"function": "x*y", "x": 3, "analytical_gradient": 6}', "ledger.json", "not an input"),
    "string literal": ('{"function": "x*\'a\'", "x": 3, "analytical_gradient": 6}', "ledger.json", "x*'a'"),
    "very long expression": (json.dumps({"function": "+".join(["x"] * 20000), "x": 3, "analytical_gradient": 6}),
                             "ledger.json", "characters long"),
    # inputs
    "no inputs": ('{"function": "1.0", "analytical_gradient": 0}', "ledger.json", "has no inputs"),
    "inputs a list": ('{"function": "x*x", "inputs": [3.0], "analytical_gradient": 6}', "ledger.json",
                      "'inputs' must be an object"),
    "input given twice": ('{"function": "x*x", "x": 3, "inputs": {"x": 3}, "analytical_gradient": 6}',
                          "ledger.json", "given twice"),
    "input a string": ('{"function": "x*x", "x": "three", "analytical_gradient": 6}', "ledger.json", "'x'"),
    "input null": ('{"function": "x*x", "x": null, "analytical_gradient": 6}', "ledger.json", "'x'"),
    "input ragged": ('{"function": "sum(x)", "x": [[1, 2], [3]], "analytical_gradient": [1, 1]}', "ledger.json",
                     "'x'"),
    "input object without value": ('{"function": "x*x", "x": {"dtype": "float64"}, "analytical_gradient": 6}',
                                   "ledger.json", "value required"),
    "input requires_grad not bool": ('{"function": "x*x", "x": {"value": 3, "requires_grad": "yes"}, '
                                     '"analytical_gradient": 6}', "ledger.json", "requires_grad"),
    "integer input needing grad": ('{"function": "x*x", "x": {"value": 3, "dtype": "int64"}, '
                                   '"analytical_gradient": 6}', "ledger.json", "floating-point"),
    "unknown dtype": ('{"function": "x*x", "x": 3, "dtype": "float128", "analytical_gradient": 6}', "ledger.json",
                      "float128"),
    "dtype a number": ('{"function": "x*x", "x": 3, "dtype": 64, "analytical_gradient": 6}', "ledger.json",
                       "dtype"),
    "unknown device": ('{"function": "x*x", "x": 3, "device": "gpu0", "analytical_gradient": 6}', "ledger.json",
                       "gpu0"),
    "input named like a record field": ('{"function": "verdict*2", "verdict": 3, "analytical_gradient": 6}',
                                        "ledger.json", "verdict"),
    "input 1e400": ('{"function": "x*x", "x": 1e400, "analytical_gradient": 6}', "ledger.json", "finite"),
    "input NaN literal": ('{"function": "x*x", "x": NaN, "analytical_gradient": 6}', "ledger.json", "NaN"),
    "input 401-digit integer": ('{"function": "x*x", "x": 1' + "0" * 400 + ', "analytical_gradient": 6}',
                                "ledger.json", "too large"),
    "input 5000-digit integer": ('{"function": "x*x", "x": 1' + "0" * 5000 + ', "analytical_gradient": 6}',
                                 "ledger.json", "digits"),
    "TOML inf input": ('function = "x*x"\nx = inf\nanalytical_gradient = 6\n', "ledger.toml", "finite"),
    # expectations
    "no analytical_gradient": ('{"function": "x*x", "x": 3}', "ledger.json", "has no 'analytical_gradient'"),
    "expectation 1e400": ('{"function": "x*x", "x": 3.0, "analytical_gradient": 1e400}', "ledger.json",
                          "finite"),
    "expectation -1e400 in a list": ('{"function": "sum(x*x)", "x": [1, 2], "analytical_gradient": [2, -1e400]}',
                                     "ledger.json", "finite"),
    "expectation NaN literal": ('{"function": "x*x", "x": 3.0, "analytical_gradient": NaN}', "ledger.json", "NaN"),
    "expectation Infinity literal": ('{"function": "x*x", "x": 3.0, "analytical_gradient": Infinity}',
                                     "ledger.json", "Infinity"),
    "TOML nan expectation": ('function = "x*x"\nx = 3.0\nanalytical_gradient = nan\n', "ledger.toml",
                             "not finite"),
    "expectation wrong shape": ('{"function": "sum(x)", "x": [1, 2], "analytical_gradient": [1, 1, 1]}',
                                "ledger.json", "has shape (3,)"),
    "expectation for unknown input": ('{"function": "x*x", "x": 3, "analytical_gradient": {"y": 6}}', "ledger.json",
                                      "'y'"),
    "expectation a bad formula": ('{"function": "x*x", "x": 3, "analytical_gradient": "2*z"}', "ledger.json",
                                  "'z'"),
    "expectation a boolean": ('{"function": "x*x", "x": 3, "analytical_gradient": true}', "ledger.json",
                              "analytical_gradient"),
    # options
    "tolerance without why": ('{"function": "x*x", "x": 3, "analytical_gradient": 6, '
                              '"tolerance": {"atol": 0.5, "rtol": 0}}', "ledger.json", "has no 'why'"),
    "tolerance negative": ('{"function": "x*x", "x": 3, "analytical_gradient": 6, '
                           '"tolerance": {"atol": -1, "rtol": 0, "why": "w"}}', "ledger.json", "atol"),
    "tolerance a string": ('{"function": "x*x", "x": 3, "analytical_gradient": 6, "tolerance": "1e-3"}',
                           "ledger.json", "'tolerance' takes"),
    "tolerance 1e400": ('{"function": "x*x", "x": 3, "analytical_gradient": 6, '
                        '"tolerance": {"atol": 1e400, "rtol": 0, "why": "w"}}', "ledger.json", "atol"),
    "unknown method": ('{"function": "x*x", "x": 3, "analytical_gradient": 6, "methods": ["magic"]}',
                       "ledger.json", "magic"),
    "methods not a list": ('{"function": "x*x", "x": 3, "analytical_gradient": 6, "methods": "backward"}',
                           "ledger.json", "list of strings"),
    "unknown protocol step": ('{"function": "x*x", "x": 3, "analytical_gradient": 6, "protocol": ["jump"]}',
                              "ledger.json", "jump"),
    "zero step": ('{"function": "x*x", "x": 3, "analytical_gradient": 6, "step": 0}', "ledger.json", "step"),
    "negative step": ('{"function": "x*x", "x": 3, "analytical_gradient": 6, "step": -1e-3}', "ledger.json",
                      "step"),
    "unknown scheme": ('{"function": "x*x", "x": 3, "analytical_gradient": 6, "scheme": "simpson"}',
                       "ledger.json", "simpson"),
    "expect neither pass nor fail": ('{"function": "x*x", "x": 3, "analytical_gradient": 6, "expect": "maybe"}',
                                     "ledger.json", "maybe"),
    "expect_error without type": ('{"function": "x*x", "x": 3, "expect_error": {"match": "a"}}', "ledger.json",
                                  "'expect_error' takes"),
    "timeout not a number": ('{"function": "x*x", "x": 3, "analytical_gradient": 6, "timeout": "soon"}',
                             "ledger.json", "timeout"),
    "timeout zero": ('{"function": "x*x", "x": 3, "analytical_gradient": 6, "timeout": 0}', "ledger.json",
                     "timeout"),
    "duplicate names": ('[{"function": "x*x", "x": 3, "analytical_gradient": 6}, '
                        '{"function": "x*x", "x": 2, "analytical_gradient": 4}]', "ledger.json", "distinct 'name'"),
    "a result, not an expectation": ('{"function": "x*x", "x": 3, "analytical_gradient": 6, '
                                     '"observed_gradient": 6}', "ledger.json", "it is a result"),
}


@pytest.mark.parametrize("case", sorted(LEDGERS))
def test_bad_ledger_exits_2_with_one_paragraph(cli, tmp_path, case):
    content, name, words = LEDGERS[case]
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    res = cli("run", str(path))
    _one_paragraph(res)
    assert words in res.err, res.err
    assert str(path) in res.err


def test_cuda_device_on_a_cpu_only_build_is_refused_at_load(cli, ledger):
    if torch.cuda.is_available():
        pytest.skip("this build has a usable CUDA device")
    res = cli("run", str(ledger('{"function": "x*x", "x": 3, "device": "cuda", "analytical_gradient": 6}')))
    _one_paragraph(res)
    assert "cuda" in res.err and "not available" in res.err


# -- the command line itself -------------------------------------------------------------------------------

COMMANDS = {
    "no such ledger": (("run", "nope.json"), "no such ledger file"),
    "a misspelt suite": (("run", "quickstrat"), "Did you mean 'quickstart'"),
    "a directory as ledger": (("run", "{tmp}"), "directory"),
    "--check matching nothing": (("run", "quickstart", "--check", "zzzz"), "no check name contains"),
    "--width 0": (("run", "quickstart", "--width", "0"), "--width"),
    "--width 10": (("run", "quickstart", "--width", "10"), "--width"),
    "--timeout 0": (("run", "quickstart", "--timeout", "0"), "--timeout"),
    "--timeout -1": (("run", "quickstart", "--timeout", "-1"), "--timeout"),
    "--max-elements 0": (("run", "quickstart", "--max-elements", "0"), "--max-elements"),
    "--json onto a directory": (("run", "quickstart", "--json", "{tmp}"), "is a directory"),
    "--json and --html on one path": (("run", "quickstart", "--json", "{tmp}/r", "--html", "{tmp}/r"),
                                      "same file"),
    "--junit and --markdown on one path": (("run", "quickstart", "--junit", "{tmp}/a", "--markdown", "{tmp}/./a"),
                                           "same file"),
    "report onto its own results file": (("report", "{results}", "--html", "{results}"),
                                         "RESULTS and --html name the same file"),
    "report of a file with no records": (("report", "{results}"), "holds no records"),
    "report on a missing file": (("report", "{tmp}/none.jsonl", "--html", "{tmp}/o.html"), "cannot read"),
    "steps without a number": (("steps", "x*x", "--at", "x=abc"), "NAME=VALUE"),
    "steps of an unknown function": (("steps", "cube(x)", "--at", "x=1"), "unknown function"),
    "notebook of an unknown suite": (("notebook", "-o", "{tmp}/n.ipynb", "--suite", "nope"), "no built-in suite"),
    "plan of a bad ledger": (("plan", "{tmp}/nope.json"), "no such ledger file"),
}


@pytest.mark.parametrize("case", sorted(COMMANDS))
def test_bad_command_line_exits_2(cli, tmp_path, case):
    argv, words = COMMANDS[case]
    results = tmp_path / "results.jsonl"
    results.write_text('{"kind": "run"}\n')
    argv = [a.format(tmp=tmp_path, results=results) for a in argv]
    res = cli(*argv)
    if res.err.startswith("gradaudit: error: "):
        _one_paragraph(res)
    else:  # click's own usage errors: "Usage: ..." then "Error: ..."
        assert res.code == 2 and "Traceback" not in res.err
    assert words in res.err, res.err


REPORT_LINES = {
    "a JSON list": ("[1, 2, 3]", "neither a run header nor a record"),
    "a JSON number": ("7", "neither a run header nor a record"),
    "a truncated line": ('{"kind": "record", "check": ', "is not valid JSON: Expecting value at column 29."),
    "an unterminated string": ('{"kind": "record", "check": "ab', "Unterminated string starting at column 29."),
    "a NaN": ('{"kind": "record", "max": NaN}', "is not valid JSON"),
    "an unknown kind": ('{"kind": "banana"}', "neither a run header nor a record"),
    "a record of another schema": ('{"kind": "record", "verdict": 3, "discrepancy": "x"}', "schema version"),
    "nested 100000 deep": ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
}


@pytest.mark.parametrize("case", sorted(REPORT_LINES))
def test_report_of_a_broken_results_file_exits_2(cli, tmp_path, case):
    line, words = REPORT_LINES[case]
    path = tmp_path / "r.jsonl"
    path.write_text(line + "\n")
    res = cli("report", str(path), "--html", str(tmp_path / "o.html"))
    _one_paragraph(res)
    assert words in res.err and "line 1" in res.err
    assert not (tmp_path / "o.html").exists()


def _one_record_line() -> str:
    """A real record as ga.write_results writes it: y = 2x at x = 1.5 checked by ga.check."""
    import json

    from gradaudit.record import dumps

    res = ga.check(lambda x: 2 * x, (torch.tensor([1.5], dtype=torch.float64, requires_grad=True),))
    line = dumps(res.records[0].to_dict())
    assert json.loads(line)["verdict"] == "pass"
    return line


BROKEN_RECORDS = {  # a change to one field of a valid record, and the words that must name it
    "an unknown verdict": (lambda r: r.update(verdict="banana"), "at 'verdict': \"banana\" is not one of pass"),
    "another schema version": (lambda r: r.update(schema_version=99), "at 'schema_version': 99 where 2 is required"),
    "no inputs": (lambda r: r.pop("inputs"), "the field 'inputs' is missing"),
    "a string for the discrepancy": (lambda r: r.update(discrepancy="oops"), "at 'discrepancy'"),
    "a string for a shape": (lambda r: r.update(shape="3"), "at 'shape'"),
    "a number for an input's name": (lambda r: r["inputs"][0].update(name=7), "at 'inputs[0].name'"),
    "a control character in the verdict": (lambda r: r.update(verdict="\x1b[2Jx"), "\\u001b[2Jx"),
}


@pytest.mark.parametrize("case", sorted(BROKEN_RECORDS))
def test_report_of_a_record_that_breaks_the_schema_exits_2_and_names_the_field(cli, tmp_path, case):
    """Records are checked against the shipped schema when read: a verdict "banana" was rendered in the table
    (and the HTML, JUnit and Markdown files written, exit 0); a string discrepancy surfaced as a dataclass
    constructor's message. The error names the field and value, control characters escaped."""
    import json

    change, words = BROKEN_RECORDS[case]
    record = json.loads(_one_record_line())
    change(record)
    path = tmp_path / "r.jsonl"
    path.write_text('{"kind": "run"}\n' + json.dumps(record) + "\n")
    res = cli("report", str(path), "--html", str(tmp_path / "o.html"))
    _one_paragraph(res)
    assert "line 2 is not a gradaudit record of schema version 2" in res.err and words in res.err, res.err
    assert "\x1b" not in res.err and "__init__" not in res.err
    assert not (tmp_path / "o.html").exists()


def test_the_record_reader_agrees_with_jsonschema_on_the_shipped_schema():
    """schema_error (no runtime dependency) and the jsonschema package judge the same records alike: a real
    record and each broken one above."""
    import json

    import jsonschema

    from gradaudit.record import schema, schema_error

    validator = jsonschema.Draft202012Validator(schema())
    record = json.loads(_one_record_line())
    assert schema_error(record) is None and validator.is_valid(record)
    for change, _ in BROKEN_RECORDS.values():
        broken = json.loads(_one_record_line())
        change(broken)
        assert schema_error(broken) is not None and not validator.is_valid(broken)


# -- results files: only regular files are replaced; faults keep the earlier file -------------------------------

def test_a_fifo_is_not_replaced(cli, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    res = cli("run", "quickstart", "--json", str(fifo))
    _one_paragraph(res)
    assert "not a regular file" in res.err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_device_is_not_replaced(cli, tmp_path):
    device = tmp_path / "null"  # our own character device: a regression must not replace the system's /dev/null
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot create a character device here: {exc}")
    before = os.stat(device)
    res = cli("run", "quickstart", "--json", str(device))
    _one_paragraph(res)
    assert "not a regular file" in res.err
    after = os.stat(device)
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino


def test_a_symlink_to_a_regular_file_writes_the_file_and_keeps_the_link(cli, tmp_path):
    target = tmp_path / "real.jsonl"
    target.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    res = cli("run", "quickstart", "--json", str(link))
    assert res.code == 0, res.err
    assert link.is_symlink() and target.read_text().startswith('{"schema_version"')


@pytest.mark.parametrize("errno_name", ["ENOSPC", "EROFS", "EACCES"])
def test_a_write_fault_exits_2_keeps_the_earlier_file_and_leaves_no_temp(cli, tmp_path, monkeypatch, errno_name):
    import errno

    out = tmp_path / "r.jsonl"
    out.write_text("earlier results\n")
    real_fsync = os.fsync

    def failing_fsync(fd):
        raise OSError(getattr(errno, errno_name), os.strerror(getattr(errno, errno_name)))

    monkeypatch.setattr(os, "fsync", failing_fsync)
    res = cli("run", "quickstart", "--json", str(out))
    monkeypatch.setattr(os, "fsync", real_fsync)
    _one_paragraph(res)
    assert os.strerror(getattr(errno, errno_name)) in res.err and str(out) in res.err
    assert "6 passed, 0 failed" in res.out  # the table is shown before the files are written
    assert out.read_text() == "earlier results\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.jsonl"]


def test_stale_temp_files_of_a_killed_run_are_cleaned_on_the_next_write(cli, tmp_path):
    import subprocess

    out = tmp_path / "r.jsonl"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that no longer runs
    stale = tmp_path / f".r.jsonl.{dead.pid}.abc123.tmp"
    stale.write_text("half a file")
    other = tmp_path / ".other.jsonl.1.x.tmp"  # another file's temp: not ours to remove
    other.write_text("x")
    res = cli("run", "quickstart", "--json", str(out))
    assert res.code == 0, res.err
    assert not stale.exists() and other.exists()


def _past_its_own_import(proc, limit=60.0):
    """Wait until the child has started to load torch's library: the CLI's handlers are in place by then. Before
    that, while Python itself imports the gradaudit package, a Ctrl-C is Python's own KeyboardInterrupt with its
    traceback (up to 0.3 s on a loaded machine; a fixed 3 s sleep could land there when the machine starved the
    child, the likely cause of one failure seen). Where /proc cannot tell (not Linux), a fixed wait."""
    maps = f"/proc/{proc.pid}/maps"
    if not os.path.exists(maps):
        time.sleep(3.0)
        return
    start = time.monotonic()
    while time.monotonic() - start < limit and proc.poll() is None:
        try:
            with open(maps) as f:
                if "libtorch" in f.read():
                    return
        except OSError:
            pass
        time.sleep(0.02)
    raise AssertionError(f"the CLI did not start to import torch within {limit:g} s (exit {proc.poll()})")


def test_sigint_during_a_run_keeps_the_earlier_results_byte_identical(tmp_path):
    import subprocess

    out = tmp_path / "r.jsonl"
    out.write_bytes(b"earlier\n")
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps([{"name": f"c{i}", "function": "sum(x*x)", "x": [0.5] * 40,
                                 "analytical_gradient": [1.0] * 40} for i in range(400)]))
    # SIGINT at its default disposition in the child: a test run started in the background of a shell without
    # job control inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler (the run finished)
    proc = subprocess.Popen([sys.executable, "-m", "gradaudit", "run", str(slow), "--json", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    _past_its_own_import(proc)
    time.sleep(1.0)  # importing torch (Ctrl-C held until it is done) or running: either way nothing may be written
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    # 130, or death by SIGINT (-2), which a shell also reports as 130
    assert proc.returncode in (130, -signal.SIGINT), (proc.returncode, err)
    assert "Traceback" not in err and "interrupted" in err and "untouched" in err, err
    assert out.read_bytes() == b"earlier\n"


# -- non-finite never passes ----------------------------------------------------------------------------------

@pytest.mark.parametrize("formula,where", [("x/0", "x"), ("sqrt(0-x)", "x")])
def test_a_formula_that_is_not_finite_at_the_point_is_an_error_naming_the_element(formula, where):
    # d/dx of x*x is finite at x = 3, but the written expectation evaluates to inf (x/0) or NaN (sqrt(-3))
    checks = parse_ledger({"function": "x*x", "x": 3.0, "analytical_gradient": formula}, where="t")
    records = ga.run(checks)
    assert {r.verdict for r in records} == {"error"}
    assert all("element" in r.error.message and "not finite" in r.error.message for r in records)


def test_a_formula_that_is_not_finite_fails_the_cli_run(cli, ledger):
    res = cli("run", str(ledger('{"function": "x*x", "x": 3.0, "analytical_gradient": "x/0"}')))
    assert res.code == 1 and "0 passed" in res.out


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_check_refuses_a_non_finite_expected(bad):
    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    with pytest.raises(SpecError, match="expected"):
        ga.check(lambda x: (x * x).sum(), (x,), expected=[torch.tensor([2.0, bad], dtype=torch.float64)])


@pytest.mark.parametrize("jacobian", [torch.diag(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)),
                                      [[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 3.0]]])
def test_an_expectation_shaped_like_a_jacobian_is_refused_saying_what_expected_takes(jacobian):
    # torch's own expand() message said nothing of what to change (a fresh-eyes audit)
    x = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64, requires_grad=True)
    said = r"expected\[0\] has shape \(3, 3\), and the gradient of input 0 has shape \(3,\): expected= takes the"
    with pytest.raises(SpecError, match=said + " gradient of a function with one scalar output") as err:
        ga.check(torch.sin, (x,), expected=[jacobian])
    assert "not a Jacobian" in str(err.value) and "expand" not in str(err.value)


@pytest.mark.parametrize(("shape", "value"), [((), [1.0]), ((3,), [[1.0, 2.0, 3.0]])])
def test_an_expectation_with_a_dimension_of_one_more_is_not_called_a_jacobian(shape, value):
    # (a review: "not a Jacobian" fired for these; torch's own reason is kept)
    x = torch.zeros(shape, dtype=torch.float64, requires_grad=True)
    with pytest.raises(SpecError, match="cannot be compared with the gradient of input 0") as err:
        ga.check(lambda t: (t * t).sum(), (x,), expected=[value])
    assert "Jacobian" not in str(err.value)


def test_a_nan_gradient_at_a_finite_point_fails():
    class NanGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")

    x = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    for mode in ("full", "directional"):
        res = ga.check(NanGrad.apply, (x,), mode=mode)
        assert res.verdict == "fail", (mode, res)


def test_a_function_not_finite_at_the_point_is_inconclusive_or_error_not_pass():
    x = torch.tensor([0.0, 1.0], dtype=torch.float64, requires_grad=True)
    res = ga.check(lambda x: torch.log(x).sum() * 0 + torch.sqrt(x), (x,))  # sqrt'(0) = inf
    assert res.verdict != "pass"


# -- the API: misuse is a SpecError naming the argument --------------------------------------------------------

def _x():
    return torch.tensor([0.5, -1.0], dtype=torch.float64, requires_grad=True)


API_MISUSE = {
    "fn not callable": (lambda: ga.check(3, (_x(),)), "fn"),
    "inputs not tensors": (lambda: ga.check(torch.sin, ([1.0, 2.0],)), "inputs"),
    "inputs empty": (lambda: ga.check(torch.sin, ()), "inputs"),
    "no input requires grad": (lambda: ga.check(torch.sin, (torch.ones(2),)), "inputs"),
    "integer input requires grad": (lambda: ga.check(torch.sin, (torch.ones(2, dtype=torch.int64),)), "inputs"),
    "unknown mode": (lambda: ga.check(torch.sin, (_x(),), mode="fast"), "mode"),
    "tolerance a float": (lambda: ga.check(torch.sin, (_x(),), tolerance=1e-3), "tolerance"),
    "tolerance without why": (lambda: ga.check(torch.sin, (_x(),), tolerance=ga.Tolerance(1e-3, 1e-3)), "why"),
    "seed a string": (lambda: ga.check(torch.sin, (_x(),), seed="1"), "seed"),
    "seed negative": (lambda: ga.check(torch.sin, (_x(),), seed=-1), "seed"),
    "order 3": (lambda: ga.check(torch.sin, (_x(),), order=3), "order"),
    "nondet_tol a float (gradcheck's)": (lambda: ga.check(torch.sin, (_x(),), nondet_tol=1e-3), "nondet_tol"),
    "gradcheck's eps": (lambda: ga.check(torch.sin, (_x(),), eps=1e-6), "eps"),
    "gradcheck's atol": (lambda: ga.check(torch.sin, (_x(),), atol=1e-5), "atol"),
    "gradcheck's raise_exception": (lambda: ga.check(torch.sin, (_x(),), raise_exception=False), "raise_exception"),
    "names of the wrong length": (lambda: ga.check(torch.sin, (_x(),), names=["a", "b"]), "names"),
    "name not a string": (lambda: ga.check(torch.sin, (_x(),), name=3), "name"),
    "timeout zero": (lambda: ga.check(torch.sin, (_x(),), timeout=0), "timeout"),
    "timeout a string": (lambda: ga.check(torch.sin, (_x(),), timeout="5"), "timeout"),
    "timeout NaN": (lambda: ga.check(torch.sin, (_x(),), timeout=float("nan")), "timeout"),
    "expected of the wrong length": (lambda: ga.check(torch.sin, (_x(),), expected=[1.0, 2.0]), "expected"),
    "check_module given a function": (lambda: ga.check_module(torch.sin, (_x(),)), "model"),
    "check_module loss_fn not callable": (lambda: ga.check_module(torch.nn.Linear(2, 1), (torch.ones(2),), 3),
                                          "loss_fn"),
    "check_module unknown option": (lambda: ga.check_module(torch.nn.Linear(2, 1), (torch.ones(2),), atol=1),
                                    "atol"),
    "check_module timeout negative": (lambda: ga.check_module(torch.nn.Linear(2, 1), (torch.ones(2),), timeout=-1),
                                      "timeout"),
    "assert_gradients timeout zero": (lambda: ga.assert_gradients(torch.sin, (_x(),), timeout=0), "timeout"),
    "Tolerance negative": (lambda: ga.Tolerance(atol=-1.0, rtol=0.0, why="w"), "atol"),
    "Tolerance NaN": (lambda: ga.Tolerance(atol=0.0, rtol=float("nan"), why="w"), "rtol"),
    "write_results of a string": (lambda: ga.write_results("r.jsonl", ["pass"]), "items"),
}


@pytest.mark.parametrize("case", sorted(API_MISUSE))
def test_api_misuse_raises_spec_error_naming_the_argument(case):
    call, argument = API_MISUSE[case]
    with pytest.raises(SpecError) as info:
        call()
    assert argument in str(info.value)


# -- the API: the user's code failing is an error verdict, with its traceback ----------------------------------

def _raises(x):
    raise ZeroDivisionError("boom in the user's function")


class _BadBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        raise ValueError("boom in backward")


class _WrongShape(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return torch.ones(5, dtype=g.dtype)


ERRORS = {
    "function raises": (_raises, "ZeroDivisionError"),
    "backward raises": (_BadBackward.apply, "ValueError"),
    "gradient of the wrong shape": (_WrongShape.apply, "RuntimeError"),
}

RETURNS = {
    "a float": (lambda x: 1.0, "float"),
    "None": (lambda x: None, "NoneType"),
    "a dict of numbers": (lambda x: {"y": 1.0}, "float"),
    "a list of floats": (lambda x: [1.0, 2.0], "float"),
    "an integer tensor": (lambda x: (x > 0).long(), "int64"),
}


@pytest.mark.parametrize("case", sorted(RETURNS))
def test_a_function_returning_no_float_tensor_is_a_spec_error_naming_fn(case):
    fn, words = RETURNS[case]
    with pytest.raises(SpecError) as info:
        ga.check(fn, (_x(),))
    assert info.value.field == "fn" and words in str(info.value)


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_failing_user_code_is_an_error_record(case):
    fn, words = ERRORS[case]
    res = ga.check(fn, (_x(),))
    assert res.verdict == "error", res
    err = res.records[0].error
    assert words in err.type + " " + err.message
    assert res.records[0].rerun
    if case in ("function raises", "backward raises"):
        assert "Traceback" in err.traceback and "boom" in err.traceback


def _hangs(x):
    while True:
        time.sleep(0.01)


def test_a_hanging_function_times_out_as_an_error_and_the_run_goes_on():
    start = time.perf_counter()
    res = ga.check(_hangs, (_x(),), timeout=0.5)
    assert time.perf_counter() - start < 5
    assert res.verdict == "error" and "timeout" in res.records[0].error.message
    assert ga.check(torch.sin, (_x(),), timeout=5).ok  # nothing left armed
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_assert_gradients_and_check_module_time_out_too():
    with pytest.raises(ga.GradientMismatch, match="timeout"):
        ga.assert_gradients(_hangs, (_x(),), timeout=0.3)

    class Hangs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(2, dtype=torch.float64))

        def forward(self, x):
            return _hangs(x) if x.numel() else self.w * x

    res = ga.check_module(Hangs(), (torch.ones(2, dtype=torch.float64),), timeout=0.3)
    assert res.verdict == "error" and "timeout" in res.records[0].error.message


def test_a_swap_cut_short_leaves_the_callers_model_as_it_was(monkeypatch):
    # timeout='s alarm can land inside torch.func.functional_call while it swaps the check's copies into the model,
    # before it has noted what to put back: stood in for here by a functional_call that installs one copy and is
    # then stopped. The caller's model must hold its own parameter and buffer objects afterwards, .grad and all
    from gradaudit.guard import CheckTimeout

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    model(torch.randn(4, 2)).sum().backward()
    before = {k: (v, v.detach().clone()) for k, v in model.state_dict(keep_vars=True).items()}
    grad = model[0].weight.grad.clone()

    def cut_short(module, state, args, kwargs=None):
        module[0]._parameters["weight"] = state["0.weight"].detach()  # half a swap
        module[1]._buffers["running_mean"] = torch.zeros(2, dtype=torch.float64)
        raise CheckTimeout(0.01)

    monkeypatch.setattr(torch.func, "functional_call", cut_short)
    res = ga.check_module(model, (torch.randn(4, 2),), lambda o: o.sum(), timeout=30)
    assert res.verdict == "error" and "timeout" in res.records[0].error.message
    now = model.state_dict(keep_vars=True)
    for k, (obj, value) in before.items():
        assert now[k] is obj and torch.equal(now[k], value), k
    assert isinstance(model[0].weight, torch.nn.Parameter) and torch.equal(model[0].weight.grad, grad)


def test_a_timeout_lost_in_a_callback_fires_again_and_is_not_printed(capfd):
    # Python only reports an exception raised in a __del__ or a weakref callback ("Exception ignored in ..."): a
    # timeout's alarm landing there was printed and lost, and the check ran on past its limit. It fires again
    from gradaudit.guard import CheckTimeout, time_limit

    class Slow:
        def __del__(self):
            end = time.monotonic() + 0.3
            while time.monotonic() < end:  # the alarm, due after 0.05 s, lands here
                pass

    start = time.monotonic()
    with pytest.raises(CheckTimeout):
        with time_limit(0.05):
            Slow()
            while time.monotonic() - start < 5:  # stopped by the alarm fired again, not by this bound
                pass
    assert time.monotonic() - start < 2
    assert "Exception ignored" not in capfd.readouterr().err
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


class _OuterAlarm(BaseException):  # (as pytest.fail's Failed, which pytest-timeout raises)
    pass


@pytest.mark.parametrize("limit", [None, 30.0])
def test_the_callers_own_alarm_fires_on_time_during_a_check_with_a_timeout(limit):
    # the caller's timer (pytest-timeout's signal method: a SIGALRM handler and setitimer) due in 0.2 s, around a
    # check that takes longer: timeout=30 replaced that timer with its own for the whole check, and the caller's alarm
    # fired when the check ended (4.4 s instead of 1 s, a fresh-eyes audit). It is handed to the caller's handler on
    # time, and the caller's timer is left as its handler left it
    fired: list[float] = []

    def handler(signum, frame):
        fired.append(time.monotonic())
        raise _OuterAlarm

    x = torch.tensor([0.3, -0.7], dtype=torch.float64, requires_grad=True)

    def slow(t):
        end = time.monotonic() + 0.1
        while time.monotonic() < end:
            pass
        return t.sin().sum()

    previous = signal.signal(signal.SIGALRM, handler)
    try:
        start = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        with pytest.raises(_OuterAlarm):
            ga.check(slow, (x,), timeout=limit)
        assert len(fired) == 1 and fired[0] - start < 0.6
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_callers_handler_that_re_arms_its_own_timer_keeps_ticking_through_a_check():
    # a watchdog whose SIGALRM handler re-arms its own one-shot timer: its setitimer overwrote the check's timer, the
    # next (caller's) alarm was taken for the check's timeout, CheckTimeout after 0.4 s with timeout=30, and the
    # caller's timer was dead after (a review). The check passes, the handler ticks during and after it
    ticks: list[float] = []

    def watchdog(signum, frame):
        ticks.append(time.monotonic())
        signal.setitimer(signal.ITIMER_REAL, 0.1)

    def slow(t):
        end = time.monotonic() + 0.02
        while time.monotonic() < end:
            pass
        return t.sin()

    previous = signal.signal(signal.SIGALRM, watchdog)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        x = torch.linspace(-1, 1, 12, dtype=torch.float64).requires_grad_()
        res = ga.check(slow, (x,), mode="full", timeout=30)
        during = len(ticks)
        assert res.verdict == "pass", res
        assert during >= 2 and signal.getitimer(signal.ITIMER_REAL)[0] > 0
        end = time.monotonic() + 0.35
        while time.monotonic() < end:
            pass
        assert len(ticks) >= during + 2
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_check_inside_a_checks_function_does_not_take_the_outer_timeout_for_its_own():
    # ga.check(timeout=1) whose function runs ga.check(timeout=60): the outer limit's alarm, landing inside the inner
    # check, was reported by it as its own ("did not finish within 1 s (timeout=1)"), and the outer function went on
    # (a review). The inner check lets it pass: the outer check reports its timeout, no inner one reports any
    inner: list = []

    def slow(t):
        end = time.monotonic() + 0.03
        while time.monotonic() < end:
            pass
        return t.sin()

    def outer(y):
        x = torch.linspace(-1, 1, 40, dtype=torch.float64).requires_grad_()
        inner.append(ga.check(slow, (x,), mode="full", timeout=60))
        return y * 2

    start = time.monotonic()
    res = ga.check(outer, (torch.ones(2, dtype=torch.float64, requires_grad=True),), mode="full", timeout=1)
    assert res.verdict == "error" and "timeout" in res.records[0].error.message
    assert time.monotonic() - start < 3
    assert all(r.verdict == "pass" for r in inner)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_ledger_check_times_out_and_the_next_one_runs(cli, ledger):
    # the expression language cannot loop, so a huge input stands in for a slow function
    slow = {"name": "slow", "function": "sum(x*x)", "x": [0.5] * 3000, "analytical_gradient": [1.0] * 3000,
            "timeout": 0.01, "methods": ["finite_difference"]}
    res = cli("run", str(ledger(json.dumps([slow, {**GOOD, "name": "quick"}]))))
    assert res.code == 1
    assert "timeout" in res.out and "3 passed, 0 failed, 1 error" in res.out  # quick: three methods pass


# -- state safety ------------------------------------------------------------------------------------------------

def test_check_inside_no_grad_and_inference_mode():
    for ctx in (torch.no_grad, torch.inference_mode):
        with ctx():
            x = torch.tensor([0.5, -1.0], dtype=torch.float64).requires_grad_(ctx is torch.no_grad)
            if ctx is torch.inference_mode:
                x = torch.tensor([0.5, -1.0], dtype=torch.float64)
                res = ga.check(torch.sin, (x.requires_grad_(True),))
            else:
                res = ga.check(torch.sin, (x,))
            assert res.ok, res
            assert not torch.is_grad_enabled()


def test_a_function_that_switches_gradients_off_leaves_the_callers_grad_mode_on():
    # the check skips torch's context managers where they would change nothing on the way in; on the way out
    # the caller's mode is still restored, as the context managers restored it
    def leaks(x):
        torch.set_grad_enabled(False)
        return x * x

    x = torch.tensor([0.5, -1.0], dtype=torch.float64, requires_grad=True)
    res = ga.check(leaks, (x,))
    assert torch.is_grad_enabled()
    assert res.verdict == "fail", res  # its output has no graph: autograd's gradient is missing
    torch.set_grad_enabled(True)


def test_the_random_state_probe_keeps_few_seeds_and_reads_each_right():
    from gradaudit import evaluate as E

    x = torch.tensor([0.5, -1.0], dtype=torch.float64, requires_grad=True)
    for seed in range(3 * E.SEEDED_KEPT):
        assert ga.check(lambda x: x * torch.rand(2, dtype=torch.float64), (x,), seed=seed).ok
        assert ga.check(torch.sin, (x,), seed=seed).info.get("notes") is None  # draws nothing: not called random
        generator = torch.Generator().manual_seed(seed)
        if seed in E._SEEDED:
            assert torch.equal(E._SEEDED[seed], generator.get_state())
    assert len(E._SEEDED) <= E.SEEDED_KEPT


def test_a_function_that_mutates_its_input_leaves_the_callers_tensor_alone():
    x = torch.tensor([0.5, -1.0], dtype=torch.float64, requires_grad=True)
    before = x.detach().clone()

    def mutates(x):
        x.data.mul_(2)
        return x * 3

    res = ga.check(mutates, (x,))
    assert torch.equal(x.detach(), before) and x.grad is None
    assert res.verdict == "error" and "in place" in res.records[0].error.message


def test_rng_grad_mode_and_default_dtype_are_untouched():
    torch.manual_seed(123)
    state = torch.get_rng_state()
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    after_draw = torch.get_rng_state()
    drop = torch.nn.Dropout(0.5)
    res = ga.check(lambda x: drop(x) * x, (x,))
    assert torch.equal(torch.get_rng_state(), after_draw) and not torch.equal(state, after_draw)
    assert torch.is_grad_enabled() and torch.get_default_dtype() == torch.float32
    assert res.ok, res


def test_dropout_in_train_mode_is_checked_with_the_same_rng_state_at_every_point():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 1)).double()
    model.train()
    res = ga.check_module(model, (torch.randn(3, 4, dtype=torch.float64),), lambda y: y.sum())
    assert res.ok, res
    assert "same random state" in res.report()
    assert not any(c.kind == "kink" for c in res.mismatches)


def test_batchnorm_in_train_mode_keeps_its_buffers():
    with torch.random.fork_rng():  # (the sum after batch norm makes the first layer's gradients 0, and at some
        torch.manual_seed(0)  # initializations their evidence is inconclusive: README Known limits)
        model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 1)).double()
        inputs = torch.randn(6, 3, dtype=torch.float64)
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    res = ga.check_module(model, (inputs,), lambda y: y.sum())
    assert res.ok, res
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert int(after["1.num_batches_tracked"]) == 0
    assert model.training


def test_a_function_still_random_after_the_rng_is_fixed_is_not_deterministic():
    import random

    def noisy(x):
        return x * x + random.random() * 1e-3  # Python's own RNG: gradaudit cannot fix it

    res = ga.check(noisy, (_x(),))
    assert res.verdict == "error", res
    assert "not deterministic" in res.records[0].error.message
    assert "differ by" in res.records[0].error.message


@pytest.mark.parametrize("mode", ["full", "directional"])
@pytest.mark.parametrize("jitter", [1e-10, 1e-8, 1e-6])
@pytest.mark.parametrize("n", [1, 8])
def test_outputs_that_jitter_are_not_deterministic_in_every_mode(mode, jitter, n):
    """sin(x) (1 ± jitter), the sign alternating call by call: two evaluations at the point differ by
    2 jitter |sin x|, far above 64 ulps of it, so every mode says error, whatever the jitter does to the
    error bounds of the evidence (asked only where a check did not pass, some of these passed)."""
    calls = []

    def jittery(x):
        calls.append(1)
        return torch.sin(x) * (1 + jitter * (-1) ** len(calls))

    x = torch.linspace(0.2, 1.5, n, dtype=torch.float64, requires_grad=True)
    res = ga.check(jittery, (x,), mode=mode)
    assert res.verdict == "error" and "not deterministic" in res.records[0].error.message, res


# -- terminal safety: control characters from user text never reach a terminal raw ----------------------------

ESC_NAME = "evil\x1b[2J\x1b]0;pwned\x07\rname\n99 passed, 0 failed"


def test_control_characters_in_a_check_name_are_escaped_in_every_text_output(cli, ledger, tmp_path):
    path = ledger(json.dumps({**GOOD, "name": ESC_NAME, "derivation": "d\x1b[8mhidden"}))
    out = tmp_path / "r.jsonl"
    res = cli("run", str(path), "--json", str(out), "--markdown", str(tmp_path / "r.md"),
              "--junit", str(tmp_path / "r.xml"), "--html", str(tmp_path / "r.html"))
    assert res.code == 0, res.err
    for text in (res.out, res.err, (tmp_path / "r.md").read_text()):
        assert "\x1b" not in text and "\x07" not in text and "\r" not in text
        assert "\n99 passed" not in text
    xml = (tmp_path / "r.xml").read_text()
    assert "\x1b" not in xml and "\x07" not in xml
    import xml.etree.ElementTree as ET

    ET.fromstring(xml)  # still well-formed XML
    assert "\x1b" not in (tmp_path / "r.html").read_text()
    res = cli("run", str(path), "--list")
    assert "\x1b" not in res.out


def test_control_characters_in_a_function_name_are_escaped_in_the_check_report():
    def f(x):
        return torch.sin(x)

    res = ga.check(f, (_x(),), name="a\x1b[31mred\x07")
    assert "\x1b" not in res.report() and "\x07" not in res.report()


def test_a_spec_error_quoting_user_text_is_escaped(cli, ledger):
    res = cli("run", str(ledger('{"function": "x*\\u001b[2Jx", "x": 3, "analytical_gradient": 6}')))
    _one_paragraph(res)
    assert "\x1b" not in res.err


# -- size and exit codes ------------------------------------------------------------------------------------------

def test_the_element_guard_refuses_before_any_work(cli, ledger):
    path = ledger(json.dumps({"function": "sum(x*x)", "x": [1.0] * 50, "analytical_gradient": [2.0] * 50}))
    res = cli("run", str(path), "--max-elements", "20")
    _one_paragraph(res)
    assert "50 elements" in res.err and "--max-elements" in res.err


def test_a_run_that_checks_nothing_exits_5(cli, ledger):
    path = ledger('{"function": "x*x", "x": {"value": 3, "requires_grad": false}, "analytical_gradient": {}}')
    res = cli("run", str(path))
    assert res.code == 5 and "no checks ran" in res.err and "Traceback" not in res.err


def test_a_narrow_width_still_shows_the_summary(cli):
    res = cli("run", "quickstart", "--width", "40")
    assert res.code == 0 and "6 passed, 0 failed" in res.out


# -- fuzzing: the expression parser and the ledger loader raise nothing but SpecError ---------------------------

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gradaudit import expr as _expr  # noqa: E402

TOKENS = ["x", "y", "(", ")", "+", "-", "*", "/", "**", ",", ".", "[", "]", "0", "1", "3.5", "1e400", "1e-400",
          "sin", "exp", "log", "sqrt", "sum", "mean", "softmax", "clamp", "dim", "=", "__import__", "lambda",
          "'", '"', " ", "@", "%", "//", "<", "and", "not", "if", "else", "9" * 30, "x.T", "\x00", "é"]
FUZZ = settings(max_examples=1000, deadline=2000, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


def _bounded(fn):
    """Run fn; the peak of Python allocations it makes stays under 64 MB."""
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 64 * 2**20, peak


@FUZZ
@given(st.one_of(st.lists(st.sampled_from(TOKENS), max_size=30).map("".join), st.text(max_size=60)))
def test_fuzz_the_expression_parser_raises_only_spec_error(text):
    def parse():
        try:
            parsed = _expr.parse(text, allowed_names=("x", "y"))
        except SpecError:
            return
        # what parses evaluates quickly; its failures (a shape error, a domain error) are ordinary
        # exceptions that a check records as its error verdict, never an exit or a hang
        x = torch.tensor([0.5, 2.0], dtype=torch.float64)
        try:
            parsed({"x": x, "y": x})
        except Exception:  # noqa: BLE001 - recorded as an error verdict by the channels
            pass

    _bounded(parse)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats(allow_nan=False)
    | st.text(max_size=12) | st.sampled_from(["x*x", "sum(x)", "nan", "inf", "x/0", "1e400"]),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(
        st.sampled_from(["function", "x", "analytical_gradient", "inputs", "value", "dtype", "tolerance", "atol",
                         "rtol", "why", "methods", "step", "scheme", "name", "checks", "expect_error", "type",
                         "requires_grad", "device", "timeout", "protocol", "expect"]) | st.text(max_size=6),
        kids, max_size=5),
    max_leaves=20)


@FUZZ
@given(JSON_VALUES)
def test_fuzz_the_ledger_loader_raises_only_spec_error(data):
    def load():
        try:
            parse_ledger(data, where="fuzz")
        except SpecError:
            pass

    _bounded(load)


@FUZZ
@given(st.binary(max_size=80) | st.text(max_size=80), st.sampled_from([".json", ".toml"]))
def test_fuzz_ledger_text_raises_only_spec_error(raw, suffix):
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw

    def load():
        try:
            parse_ledger(parse_text(text, suffix, where="fuzz"), where="fuzz")
        except SpecError:
            pass

    _bounded(load)


def test_an_inconclusive_only_run_exits_1_and_says_why(cli, ledger):
    # relu at 0: left slope 0, right slope 1, so finite differences cannot judge the subgradient autograd chose
    res = cli("run", str(ledger('{"function": "relu(x)", "x": 0.0, "analytical_gradient": 0, '
                                '"methods": ["finite_difference"]}')))
    assert res.code == 1
    assert "0 passed, 0 failed, 1 inconclusive" in res.out
    assert "left slope 0, right slope 1" in res.out and "convention" in res.out


def test_text_python_would_warn_about_is_refused_without_a_warning():
    import warnings

    from gradaudit import expr

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # outside pytest's error filter: nothing may be printed either
        for text in ("3x", "1if x", "x is 1"):
            with pytest.raises(SpecError):
                expr.parse(text, allowed_names=("x",))
    assert caught == []


def test_ctrl_c_while_torch_is_imported_is_held_until_the_import_is_done():
    """``import torch`` calls back into Python from C++; a KeyboardInterrupt raised inside such a callback aborted
    the CLI (SIGABRT, exit -6, "terminate called after throwing an instance of 'pybind11::error_already_set'") on a
    loaded machine where the import was still running when Ctrl-C came. The CLI imports torch inside
    guard.deferring_sigint, which holds SIGINT until its block is done and raises KeyboardInterrupt then (exit 130,
    with its message), and puts Python's own handler back."""
    from gradaudit.guard import deferring_sigint

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    done = []
    try:
        with pytest.raises(KeyboardInterrupt):
            with deferring_sigint():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)  # held: no KeyboardInterrupt inside the block
                done.append(True)
        assert done == [True]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        with deferring_sigint():  # nothing held: nothing raised
            done.append(True)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert done == [True, True]


def test_check_module_misuse_names_check_modules_own_arguments():
    # errors said "field 'fn': the function returned float" (check_module has no fn) and gave one text for a module
    # without parameters and for one whose parameters are all frozen (a fresh-eyes audit)
    import dataclasses

    import torch

    import gradaudit as ga

    x = torch.ones(3, 2, dtype=torch.float64)
    model = torch.nn.Linear(2, 1).double()
    with pytest.raises(ga.SpecError, match=r"field 'loss_fn': loss_fn returned float where"):
        ga.check_module(model, (x,), lambda out: out.sum().item())

    @dataclasses.dataclass
    class Out:
        logits: torch.Tensor

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Linear(2, 1).double()

        def forward(self, x):
            return Out(self.inner(x))

    with pytest.raises(ga.SpecError, match=r"field 'model': the model's forward returned Out .* pass loss_fn="):
        ga.check_module(Wrapped(), (x,))
    assert ga.check_module(Wrapped(), (x,), lambda out: out.logits.sum()).ok
    frozen = torch.nn.Linear(2, 1).double().requires_grad_(False)
    with pytest.raises(ga.SpecError, match=r"its 2 parameters \(weight, bias\) all have requires_grad=False"):
        ga.check_module(frozen, (x,))
    with pytest.raises(ga.SpecError, match="Tanh has no parameters at all.*ga.check\\(model, inputs\\)"):
        ga.check_module(torch.nn.Tanh(), (x,))


@pytest.mark.parametrize("key, value, field", [
    ("derivaton", "2x", "derivation"), ("tolerence", {"atol": 1.0, "rtol": 0.0, "why": "w"}, "tolerance"),
    ("analytical_gradeint", 6, "analytical_gradient"), ("setp", 0.001, "step"), ("metods", ["backward"], "methods"),
])
def test_a_misspelled_ledger_field_is_named_with_its_correction(cli, ledger, key, value, field):
    # a key that is not a record field is an input of the function: a misspelled field the function does not use
    # was refused with an error about an input ("must be a number", "not used by the function")
    rec = {"function": "x*x", "x": 3.0, "analytical_gradient": 6, key: value}
    if key == "analytical_gradeint":
        del rec["analytical_gradient"]
    res = cli("run", str(ledger(rec)))
    assert res.code == 2
    assert f"unknown field '{key}': did you mean '{field}'?" in res.err
    assert "Traceback" not in res.err


def test_an_input_named_like_a_field_is_an_input_where_the_function_uses_it(cli, ledger):
    # steps * 2 at 3: d/dsteps = 2 ("steps" is one letter from "step", but the function uses it)
    res = cli("run", str(ledger({"function": "steps*2", "steps": 3.0, "analytical_gradient": 2})))
    assert res.code == 0 and "3 passed, 0 failed" in res.out


def test_a_misspelled_key_of_an_input_object_is_named_with_its_correction(cli, ledger):
    res = cli("run", str(ledger({"function": "x*x", "x": {"value": 3.0, "requires_gard": False},
                                 "analytical_gradient": 6})))
    assert res.code == 2 and "'requires_gard': did you mean 'requires_grad'?" in res.err


def test_a_convention_of_the_wrong_shape_names_the_convention(cli, ledger):
    # relu at its kink 0: the README's convention {"x": 0} declares relu'(0) = 0; a list of two values for a scalar
    # input was refused naming 'analytical_gradient.x', which held a right scalar
    rec = {"name": "relu kink", "function": "relu(x)", "x": 0.0, "analytical_gradient": 0}
    bad = cli("run", str(ledger({**rec, "convention": {"x": [0, 1]}})))
    assert bad.code == 2 and "field 'convention.x': the declared convention of 'x' has shape (2,)" in bad.err
    good = cli("run", str(ledger({**rec, "convention": {"x": 0}})))
    assert good.code == 0 and "3 passed, 0 failed" in good.out


@pytest.mark.parametrize("content", ['{"function": "x*x",\n "x": 3, "analytical_gradient": 6}\n',
                                     '[{"function": "x*x", "x": 3, "analytical_gradient": 6}]\n'])
def test_report_given_a_ledger_says_to_run_it(cli, tmp_path, content):
    # a newcomer passed the ledger to gradaudit report and read "line 1 is not valid JSON", which said nothing of why
    path = tmp_path / "mine.json"
    path.write_text(content)
    res = cli("report", str(path))
    assert res.code == 2 and "It looks like a ledger" in res.err and "gradaudit run mine.json" in res.err


def test_report_of_a_damaged_results_file_says_nothing_of_ledgers(cli, tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text("garbage\n")
    res = cli("report", str(path))
    assert res.code == 2 and "not valid JSON" in res.err and "ledger" not in res.err


def test_an_integer_output_is_refused_with_advice_about_integer_outputs():
    # argmax returns an index: the advice about .item() and None did not apply to it
    x = torch.tensor([0.3, 1.2, -0.4], dtype=torch.float64, requires_grad=True)
    with pytest.raises(ga.SpecError, match="torch.int64 tensor") as info:
        ga.check(lambda t: t.argmax(), (x,))
    assert "integer or bool output" in str(info.value) and ".item()" not in str(info.value)
    with pytest.raises(ga.SpecError, match=r"not Python numbers \(\.item\(\)\)"):
        ga.check(lambda t: t.sum().item(), (x,))


def test_a_tolerance_without_why_names_the_method_of_each_default(cli, ledger):
    # two defaults were listed side by side, without saying which is the finite difference's and which autograd's
    res = cli("run", str(ledger({"function": "x*x", "x": 3.0, "analytical_gradient": 6,
                                 "tolerance": {"atol": 1e-3, "rtol": 0}})))
    assert res.code == 2
    assert "finite_difference: atol=0, rtol=8.88178e-16" in res.err
    assert "backward and autograd.grad: atol=1e-07, rtol=1e-07" in res.err
