"""Hostile inputs an audit found to slip past: paths the file system refuses, ledgers that loaded and planned but
could not run, API misuse answered from inside, a Ctrl-C after the files were written, and messages that said the
wrong thing.

Expected outcomes come from the project's rules, not from running gradaudit: bad input exits 2 with one paragraph
(the CLI) or raises ``ga.SpecError`` (the API) before anything runs; exit 130 means nothing was written.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import gradaudit as ga
from gradaudit.errors import SpecError
from gradaudit.expr import parse
from gradaudit.ledger import parse_text

GOOD = {"function": "x*x", "x": 3.0, "analytical_gradient": 6}
WRONG = {"function": "x*x", "x": 3.0, "analytical_gradient": 7}  # d/dx x^2 at 3 is 6: the run's exit code is 1
LONG = "a" * 300  # a file name longer than any file system takes (NAME_MAX is 255 bytes)


def _one_paragraph(res) -> None:
    assert res.code == 2, (res.code, res.out, res.err)
    assert res.err.startswith("gradaudit: error: "), res.err
    assert res.err.count("\n") == 1, res.err
    assert "Traceback" not in res.err + res.out


# -- F4: a path the file system refuses to look at (a name too long): exit 2 / SpecError, not a bare OSError -------

TOO_LONG = {
    "run --json": ("run", "{ledger}", "--json", "{long}.jsonl"),
    "run --html": ("run", "{ledger}", "--html", "{long}.html"),
    "run --junit": ("run", "{ledger}", "--junit", "{long}.xml"),
    "run --markdown": ("run", "{ledger}", "--markdown", "{long}.md"),
    "plan --json": ("plan", "{ledger}", "--json", "{long}.json"),
    "notebook -o": ("notebook", "-o", "{long}.ipynb"),
    "steps --plot": ("steps", "x*x", "--at", "x=1", "--plot", "{long}.png"),
    "steps --json": ("steps", "x*x", "--at", "x=1", "--json", "{long}.json"),
    "report RESULTS": ("report", "{long}.jsonl"),
}


@pytest.mark.parametrize("case", sorted(TOO_LONG))
def test_a_file_name_too_long_for_the_file_system_exits_2(cli, ledger, tmp_path, case):
    path = ledger(GOOD)
    argv = [a.format(ledger=path, long=tmp_path / LONG) for a in TOO_LONG[case]]
    res = cli(*argv)
    _one_paragraph(res)
    assert "too long" in res.err.lower()
    assert not any(p.name.startswith(LONG[:200]) for p in tmp_path.iterdir())


def test_write_results_and_read_ledger_of_a_name_too_long_raise_spec_error(tmp_path):
    records = ga.plan([ga.Expectation("sq", "x*x", {"x": 3.0}, {"x": 6})])
    with pytest.raises(SpecError, match="too long"):
        ga.write_results(tmp_path / f"{LONG}.jsonl", records, environment={})
    with pytest.raises(SpecError, match="too long"):
        ga.read_ledger(tmp_path / f"{LONG}.json")


# -- F5: ledgers that passed load and plan, then failed at run time -------------------------------------------------

TWICE = {
    "one record": ('{"function": "x*x", "x": 3.0, "x": 4.0, "analytical_gradient": 6}', "record 1", "x"),
    "second of a list": (json.dumps([GOOD])[:-1] + ', {"function": "x*x", "x": 3.0, "analytical_gradient": 6, '
                         '"analytical_gradient": 7}]', "record 2", "analytical_gradient"),
    "inside an input": ('{"checks": [{"function": "x*x", "x": {"value": 3.0, "value": [1.0, 2.0]}, '
                        '"analytical_gradient": 6}]}', "record 1", "x.value"),
}


@pytest.mark.parametrize("case", sorted(TWICE))
@pytest.mark.parametrize("command", ["plan", "run"])
def test_a_key_given_twice_in_a_json_ledger_is_refused_naming_key_and_record(cli, ledger, case, command):
    # json keeps the last of the two values: {"x": 3, "x": 4} checked x = 4 against an expectation written for 3
    text, record, key = TWICE[case]
    res = cli(command, str(ledger(text)))
    _one_paragraph(res)
    assert f"{record}, field '{key}'" in res.err and "twice" in res.err
    with pytest.raises(SpecError, match="twice"):
        parse_text(text, ".json", where="ledger.json")


def test_a_key_given_twice_at_the_top_level_names_the_key():
    text = '{"suite": "a", "suite": "b", "checks": [' + json.dumps(GOOD) + "]}"
    with pytest.raises(SpecError, match=r"ledger\.json, field 'suite': the key 'suite' is given twice"):
        parse_text(text, ".json", where="ledger.json")


def test_a_key_given_twice_in_a_toml_ledger_is_refused_too(cli, ledger):
    res = cli("plan", str(ledger('function = "x*x"\nx = 3.0\nx = 4.0\nanalytical_gradient = 6\n', "l.toml")))
    _one_paragraph(res)


def test_a_key_given_twice_in_a_results_line_is_refused(cli, ledger, tmp_path):
    # a hand edit that adds "verdict": "pass" before the written one: refused, never silently one or the other
    out = tmp_path / "r.jsonl"
    assert cli("run", str(ledger(WRONG)), "--json", str(out)).code == 1
    lines = out.read_text().split("\n")
    lines[1] = '{"verdict": "pass", ' + lines[1][1:]
    out.write_text("\n".join(lines))
    res = cli("report", str(out))
    _one_paragraph(res)
    assert "line 2" in res.err and "'verdict' is given twice" in res.err


CONSTANTS = ["x*(10**400)", "x*0**(-1)", "x*(1e308*10)", "x*(-8)**0.5", "x*(1/(1-1))"]


@pytest.mark.parametrize("function", CONSTANTS)
def test_a_constant_part_that_cannot_be_computed_is_refused_at_load(cli, ledger, function):
    # each gave the error verdict at every method (exit 1) after a load and a plan that passed (exit 0)
    res = cli("plan", str(ledger({"function": function, "x": 3.0, "analytical_gradient": 6})))
    _one_paragraph(res)
    assert "constant part" in res.err
    with pytest.raises(SpecError, match="constant part"):
        parse(function)


def test_constant_parts_that_are_finite_numbers_still_parse():
    x = torch.tensor(3.0, dtype=torch.float64)
    assert float(parse("x*2**-3")({"x": x})) == 0.375
    assert float(parse("x*(1e300*10)/1e301")({"x": x})) == pytest.approx(3.0)
    assert float(parse("x*(2*pi)")({"x": x})) == pytest.approx(6 * 3.141592653589793)
    assert float(parse("sum(clamp(x, -1, 1))")({"x": x})) == 1.0
    assert parse("sum(x*x, 0, True)")({"x": torch.ones(2, 2)}).tolist() == [[2.0, 2.0]]  # True: a parameter


@pytest.mark.parametrize("ledger_text", [
    {"function": "x*x", "x": {"value": 3.0, "device": "meta"}, "analytical_gradient": 6},
    {"device": "meta", "checks": [GOOD]},
])
def test_an_input_on_the_meta_device_is_refused_at_load(cli, ledger, ledger_text):
    res = cli("plan", str(ledger(ledger_text)))
    _one_paragraph(res)
    assert "meta device" in res.err and "no values" in res.err


def test_an_expectation_with_a_meta_tensor_raises_spec_error():
    x = torch.tensor(3.0, dtype=torch.float64, device="meta")
    with pytest.raises(SpecError, match="meta device"):
        ga.Expectation("sq", "x*x", {"x": x}, {"x": 6})


def test_nan_in_a_ledger_is_located_at_its_line_and_column(cli, ledger):
    text = '{"function": "x*x",\n "x": NaN, "analytical_gradient": 6}'
    res = cli("plan", str(ledger(text)))
    _one_paragraph(res)
    assert "NaN is not JSON" in res.err and "line 2, column 7" in res.err


# -- F6: ga.run / ga.plan given something other than checks -------------------------------------------------------

MISUSE = {
    "ga.run of an expression": (lambda: ga.run("x*x"), "got str"),
    "ga.run of numbers": (lambda: ga.run([1, 2]), "item 0 is int"),
    "ga.plan of None in a list": (lambda: ga.plan([None]), "item 0 is NoneType"),
    "ga.run of None": (lambda: ga.run(None), "got NoneType"),
    "ga.run of a dict": (lambda: ga.run(GOOD), "got dict"),
    "ga.run of one expectation": (lambda: ga.run(ga.Expectation("sq", "x*x", {"x": 3.0}, {"x": 6})), "in a list"),
}


@pytest.mark.parametrize("case", sorted(MISUSE))
def test_run_and_plan_of_something_other_than_checks_raise_spec_error(case):
    call, seen = MISUSE[case]
    with pytest.raises(SpecError, match="ga.Expectation or ga.Probe") as caught:
        call()
    assert seen in str(caught.value)


def test_run_of_no_checks_is_still_no_records():
    assert ga.run([]) == [] and ga.plan(iter([])) == []


# -- F7: Ctrl-C once the results files are written --------------------------------------------------------------

def test_ctrl_c_after_the_files_are_written_in_a_callers_process_names_them(cli, ledger, tmp_path, monkeypatch):
    """Called from Python (main(argv), click's CliRunner, IPython), the caller keeps its Ctrl-C: a SIGINT after the
    results file was written interrupts the run, 130, and the message names the file written (the program itself
    ignores it then: the test below). The caller's handler is untouched."""
    import gradaudit.record

    real = gradaudit.record.run_failed

    def interrupted_after_writing(counts):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler runs here if SIGINT is not ignored
        return real(counts)

    monkeypatch.setattr(gradaudit.record, "run_failed", interrupted_after_writing)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    out = tmp_path / "r.jsonl"
    try:
        res = cli("run", str(ledger(WRONG)), "--json", str(out))
        restored = signal.getsignal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert res.code == 130 and f"interrupted after writing {out}" in res.err, (res.code, res.err)
    assert out.read_text().startswith('{"schema_version"')
    assert restored is signal.default_int_handler


LATE_CTRL_C = """
import os, signal, sys

class Late:
    # sends Ctrl-C to this process while Python tears its modules down, after main() has returned: where Python
    # has put SIGINT's default action back, and a SIGINT kills the process (exit 130 to a shell, no message)
    def __del__(self, kill=os.kill, pid=os.getpid(), sig=signal.SIGINT):
        kill(pid, sig)

late = Late()
from gradaudit.cli import main

sys.argv = ["gradaudit", "run", "ledger.json", "--json", "r.jsonl", "-q"]
main()
"""


def test_ctrl_c_during_shutdown_after_the_run_does_not_turn_it_into_an_interrupt(tmp_path):
    (tmp_path / "ledger.json").write_text(json.dumps(WRONG))
    (tmp_path / "r.jsonl").write_text("earlier\n")
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(LATE_CTRL_C)], capture_output=True, text=True,
                         cwd=tmp_path, timeout=300, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert res.returncode == 1, (res.returncode, res.stderr[-2000:])
    assert (tmp_path / "r.jsonl").read_text().startswith('{"schema_version"')


# -- F10: messages that said the wrong thing, options ignored without a word ----------------------------------------

def test_report_of_a_symlink_loop_says_it_cannot_read_it(cli, tmp_path):
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    res = cli("report", str(tmp_path / "loop1"))
    _one_paragraph(res)
    assert "cannot read" in res.err and "write" not in res.err.replace("wrote", "")


def test_report_of_a_fifo_says_it_reads_results(cli, tmp_path):
    fifo = tmp_path / "r.jsonl"
    os.mkfifo(fifo)
    res = cli("report", str(fifo))
    _one_paragraph(res)
    assert "FIFO" in res.err and "gradaudit report reads" in res.err and "written atomically" not in res.err


EMPTY = {
    "run --json": ("run", "{ledger}", "--json", ""),
    "run --html": ("run", "{ledger}", "--html", ""),
    "run --junit": ("run", "{ledger}", "--junit", ""),
    "run --markdown": ("run", "{ledger}", "--markdown", ""),
    "plan --json": ("plan", "{ledger}", "--json", ""),
    "notebook -o": ("notebook", "-o", ""),
    "steps --json": ("steps", "x*x", "--at", "x=1", "--json", ""),
    "report RESULTS": ("report", ""),
}


@pytest.mark.parametrize("case", sorted(EMPTY))
def test_an_empty_output_path_exits_2(cli, ledger, case):
    # run --json '' ran and wrote nothing (exit 0); notebook -o '' said "error:  is a directory"
    res = cli(*[a.format(ledger=ledger(GOOD)) for a in EMPTY[case]])
    _one_paragraph(res)
    assert "empty path" in res.err


def test_write_results_to_an_empty_path_raises_spec_error():
    records = ga.plan([ga.Expectation("sq", "x*x", {"x": 3.0}, {"x": 6})])
    with pytest.raises(SpecError, match="empty"):
        ga.write_results("", records, environment={})


def test_list_with_a_results_option_is_refused_not_ignored(cli, ledger, tmp_path):
    out = tmp_path / "l.jsonl"
    res = cli("run", str(ledger(GOOD)), "--list", "--json", str(out))
    _one_paragraph(res)
    assert "--list" in res.err and "--json" in res.err
    assert not out.exists()


def test_nan_in_a_results_line_is_located_at_its_column(cli, tmp_path):
    path = tmp_path / "r.jsonl"
    line = '{"kind": "record", "check": "sq", "observed_gradient": NaN}'
    path.write_text('{"schema_version": 2, "kind": "run"}\n' + line + "\n")
    res = cli("report", str(path))
    _one_paragraph(res)
    assert f"line 2 is not valid JSON: NaN is not JSON; write a number at column {line.index('NaN') + 1}" in res.err


def test_a_run_through_clicks_runner_leaves_the_callers_ctrl_c(ledger, tmp_path):
    # CliRunner calls the command group itself, not main(): once the files were written, Ctrl-C stayed ignored in
    # the caller's process (the program's own rule leaking into pytest, IPython's %run -m gradaudit)
    from click.testing import CliRunner

    from gradaudit.cli import cli as group

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        res = CliRunner().invoke(group, ["run", str(ledger(WRONG)), "--json", str(tmp_path / "r.jsonl")])
        after = signal.getsignal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert res.exit_code == 1 and (tmp_path / "r.jsonl").exists()
    assert after is signal.default_int_handler
