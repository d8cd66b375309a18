"""The command line: exit codes 0/1/2, one readable paragraph for bad input, atomic results."""

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

BAD = {
    "malformed JSON": ('{"function": "x*x", "x": 3', "is not valid JSON"),
    "unknown function": ('{"function": "cube(x)", "x": 3, "analytical_gradient": 27}', "unknown function"),
    "unknown input": ('{"function": "x*y", "x": 3, "analytical_gradient": 6}', "not an input"),
    "integer input": ('{"function": "x*x", "x": {"value": 3, "dtype": "int64"}, "analytical_gradient": 6}',
                      "gradients exist only for floating-point tensors"),
    "wrong shape": ('{"function": "sum(x)", "x": [1, 2], "analytical_gradient": [1, 1, 1]}', "has shape (3,)"),
    "tolerance without why": ('{"function": "x*x", "x": 3, "analytical_gradient": 6, '
                              '"tolerance": {"atol": 0.5, "rtol": 0}}', "has no 'why'"),
    "empty": ("[]", "the ledger is empty"),
    "injection": ('{"function": "__import__(\'os\').system(\'touch pwned\')", "x": 3, "analytical_gradient": 6}',
                  "other than a named function"),
}


@pytest.mark.parametrize("case", sorted(BAD))
@pytest.mark.parametrize("command", ["run", "plan"])
def test_bad_input_exits_2_with_one_paragraph(cli, ledger, case, command):
    content, words = BAD[case]
    path = ledger(content)
    res = cli(command, str(path))
    assert res.code == 2
    assert words in res.err and str(path) in res.err
    assert "Traceback" not in res.err + res.out
    assert res.err.startswith("gradaudit: error: ") and res.err.count("\n") == 1

def test_injection_runs_nothing(cli, ledger, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = ledger(BAD["injection"][0])
    assert cli("run", str(path)).code == 2
    assert not (tmp_path / "pwned").exists()


def test_missing_file_and_unknown_suite(cli):
    res = cli("run", "nope.json")
    assert res.code == 2 and "no such ledger file" in res.err
    res = cli("run", "quickstrat")
    assert res.code == 2 and "Did you mean 'quickstart'" in res.err


def test_quickstart_passes_with_the_seed_numbers(cli, tmp_path):
    out = tmp_path / "q.jsonl"
    res = cli("run", "quickstart", "--json", str(out))
    assert res.code == 0, res.out + res.err
    assert res.out.rstrip().splitlines()[-2] == "6 passed, 0 failed"
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    header, records = lines[0], lines[1:]
    assert header["kind"] == "run" and header["environment"]["id"]
    observed = {(r["check"], r["method"]): r["observed_gradient"] for r in records}
    assert observed["x squared at x = 3", "backward"] == 6  # 2x at x = 3
    assert observed["x squared at x = 3", "autograd.grad"] == 6
    assert observed["x squared at x = 3", "finite_difference"] == pytest.approx(6, abs=1e-9)
    assert observed["accumulation: two fresh passes without reset", "backward"] == 12  # 6 + 6
    assert observed["reset: x.grad = None, then a fresh pass", "backward"] == 6
    twice = [r for r in records if r["check"] == "backward twice on the same graph"][0]
    assert twice["verdict"] == "pass" and twice["observed_error"]["type"] == "RuntimeError"
    assert "releases its graph" in twice["expect_error"]["explanation"]
    assert {r["environment"] for r in records} == {header["environment"]["id"]}


def test_a_failing_ledger_exits_1_and_keeps_the_failure_intact(cli, ledger):
    path = ledger({"name": "claims 7", "function": "x*x", "x": 3, "analytical_gradient": 7,
                   "derivation": "a wrong claim"})
    res = cli("run", str(path))
    assert res.code == 1
    assert "0 passed, 3 failed" in res.out
    assert "Mismatched elements: 1 / 1 (100%)" in res.out
    assert "function:   x*x" in res.out and "environment: " in res.out
    assert f"re-run:     gradaudit run {path} --check 'claims 7'" in res.out


def test_a_raising_function_is_an_error_verdict(cli, ledger):
    path = ledger({"function": "log(x)", "x": -1, "analytical_gradient": -1, "methods": ["backward"]})
    res = cli("run", str(path))
    assert res.code == 1 and "0 passed, 0 failed, 1 error" in res.out
    assert "output is nan" in res.out


def test_plan_prints_seed_shaped_records(cli, ledger):
    res = cli("plan", str(ledger('{"function":"x*x","x":3,"analytical_gradient":6}')))
    assert res.code == 0
    first = json.loads(res.out.splitlines()[0])
    assert {k: first[k] for k in ("function", "x", "analytical_gradient", "observed_gradient", "executed")} == \
        {"function": "x*x", "x": 3, "analytical_gradient": 6, "observed_gradient": None, "executed": False}


def test_interrupted_run_leaves_earlier_results(cli, ledger, tmp_path, monkeypatch):
    out = tmp_path / "r.jsonl"
    out.write_text("earlier\n")

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr("gradaudit.cli.run_checks", interrupted)
    res = cli("run", "quickstart", "--json", str(out))
    assert res.code == 130 and "untouched" in res.err
    assert out.read_text() == "earlier\n"


def test_an_interrupt_while_the_reports_render_writes_none_of_them(cli, tmp_path, monkeypatch):
    # the JSON records were written before the HTML was rendered (matplotlib plots: a second or more); Ctrl-C then
    # left the new JSON beside the old HTML, JUnit and Markdown, and said "nothing was written" (a fresh-eyes audit)
    paths = {kind: tmp_path / f"r.{kind}" for kind in ("jsonl", "html", "xml", "md")}
    for path in paths.values():
        path.write_text("earlier\n")

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr("gradaudit.render.html.render_html", interrupted)
    res = cli("run", "quickstart", "--json", str(paths["jsonl"]), "--html", str(paths["html"]), "--junit",
              str(paths["xml"]), "--markdown", str(paths["md"]))
    assert res.code == 130 and "nothing was written" in res.err
    assert all(path.read_text() == "earlier\n" for path in paths.values())


def test_an_interrupt_while_writing_says_which_files_were_written(cli, tmp_path, monkeypatch):
    import gradaudit.ledger

    written = []
    real = gradaudit.ledger.write_atomic

    def second_interrupted(path, text):
        if written:
            raise KeyboardInterrupt
        real(path, text)
        written.append(path)

    monkeypatch.setattr(gradaudit.ledger, "write_atomic", second_interrupted)
    json_path, md_path = tmp_path / "r.jsonl", tmp_path / "r.md"
    md_path.write_text("earlier\n")
    res = cli("run", "quickstart", "--json", str(json_path), "--markdown", str(md_path))
    assert res.code == 130
    assert f"interrupted after writing {json_path}; any other results file named keeps its earlier contents" in res.err
    assert md_path.read_text() == "earlier\n" and json_path.read_text().startswith("{")


def test_notebook_output_naming_its_ledger_is_refused(cli, ledger):
    # gradaudit notebook --from L -o L replaced the ledger with the notebook (rc 0)
    path = ledger('{"function": "x*x", "x": 3.0, "analytical_gradient": 6, "derivation": "2x"}')
    before = path.read_bytes()
    res = cli("notebook", "--from", str(path), "-o", str(path))
    assert res.code == 2 and "name the same file" in res.err
    assert path.read_bytes() == before


def test_list_and_check_filter(cli):
    res = cli("run", "quickstart", "--list")
    assert res.code == 0 and "accumulation: two fresh passes without reset" in res.out
    res = cli("run", "quickstart", "--check", "accumulation")
    assert res.code == 0 and "1 passed, 0 failed" in res.out
    assert cli("run", "quickstart", "--check", "zzz").code == 2


def test_env_json(cli):
    res = cli("env", "--json")
    block = json.loads(res.out)
    assert res.code == 0 and set(block["accelerators"]) == {"cuda", "mps"}


def test_usage_error_exits_2(cli):
    assert cli("run", "--no-such-flag").code == 2
    assert cli("plan").code == 2


def test_python_dash_m():
    res = subprocess.run([sys.executable, "-m", "gradaudit", "--help"], capture_output=True, text=True)
    assert res.returncode == 0 and "run" in res.stdout and "plan" in res.stdout


def test_quiet_shows_only_what_did_not_pass(cli, ledger):
    path = ledger('[{"name": "right", "function": "x*x", "x": 3.0, "analytical_gradient": 6}, '
                  '{"name": "wrong", "function": "x*x", "x": 3.0, "analytical_gradient": 7}]')  # d/dx x^2 = 6 at 3
    res = cli("run", str(path), "--quiet")
    assert res.code == 1
    assert "wrong" in res.out and "right" not in res.out and "env " not in res.out
    assert res.out.rstrip().splitlines()[-1] == "3 passed, 3 failed"
    assert cli("run", "quickstart", "-q").out.strip() == "6 passed, 0 failed"


def test_a_narrow_terminal_gets_a_short_card_per_record(cli):
    res = cli("run", "quickstart", "--width", "50")
    lines = res.out.splitlines()
    cards = [line for line in lines if line.startswith(("PASS ", "FAIL ", "      "))]
    assert len(cards) >= 12 and all(len(line) <= 50 for line in cards)  # 6 records, at least 2 lines each
    assert any(line.startswith("PASS  x squared at x = 3 [x]") for line in lines)
    assert any(line.startswith("      backward (stored) · expected 6") for line in lines)


def test_report_without_an_output_option_renders_to_the_terminal(cli, ledger, tmp_path):
    path = ledger('[{"name": "right", "function": "x*x", "x": 3.0, "analytical_gradient": 6}, '
                  '{"name": "wrong", "function": "x*x", "x": 3.0, "analytical_gradient": 7}]')  # d/dx x^2 = 6 at 3
    out = tmp_path / "r.jsonl"
    assert cli("run", str(path), "--json", str(out)).code == 1
    res = cli("report", str(out))
    assert res.code == 1  # as the run's: a check failed
    assert res.out.rstrip().splitlines()[-1] == "3 passed, 3 failed"
    assert "FAIL: wrong" in res.out
    quiet = cli("report", str(out), "-q")
    assert "right" not in quiet.out and "wrong" in quiet.out


@pytest.mark.parametrize("columns", ["abc", "0", "-5", "10"])
def test_a_bad_columns_variable_is_ignored(cli, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    res = cli("run", "quickstart")
    assert res.code == 0 and "6 passed, 0 failed" in res.out


def _closed_early(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run the CLI with a reader that has already gone (``gradaudit ... | head`` once head exits)."""
    proc = subprocess.Popen([sys.executable, "-m", "gradaudit", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=cwd)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # every write of the command finds no reader: EPIPE
    with proc.stderr:
        err = proc.stderr.read().decode()
    return subprocess.CompletedProcess(argv, proc.wait(timeout=120), "", err)


def test_a_reader_that_closes_early_loses_nothing(ledger, tmp_path):
    """`gradaudit run --list | head` exited 1 ("a check failed"); a closed pipe is not a failure. The run goes
    on without its table: the results file is written and the exit code is the run's own (1: one check of
    this ledger is wrong, d/dx x^2 = 6 at 3, not 7)."""
    listed = _closed_early("run", "--list", cwd=tmp_path)
    assert listed.returncode == 0 and listed.stderr == ""
    path = ledger('[{"name": "right", "function": "x*x", "x": 3.0, "analytical_gradient": 6}, '
                  '{"name": "wrong", "function": "x*x", "x": 3.0, "analytical_gradient": 7}]')
    out = tmp_path / "results.jsonl"
    ran = _closed_early("run", str(path), "--json", str(out), cwd=tmp_path)
    assert ran.returncode == 1 and "Traceback" not in ran.stderr
    records = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    assert {r.get("check") for r in records if r.get("verdict")} >= {"right", "wrong"}


def test_no_standard_output_at_all(tmp_path):
    """stdout closed before the start (`gradaudit env >&-`): Python has no sys.stdout; nothing is printed
    and the command still succeeds."""
    res = subprocess.run([sys.executable, "-m", "gradaudit", "env"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                         preexec_fn=lambda: __import__("os").close(1))
    assert res.returncode == 0 and "Traceback" not in res.stderr


def test_result_files_go_into_folders_that_do_not_exist_yet(cli, tmp_path):
    # the help text promises it for --json, --html, --junit and --markdown, in run and report alike
    paths = {opt: tmp_path / "new" / opt.strip("-") / f"results.{ext}"
             for opt, ext in (("--json", "jsonl"), ("--html", "html"), ("--junit", "xml"), ("--markdown", "md"))}
    res = cli("run", "quickstart", "-q", *[a for opt, p in paths.items() for a in (opt, str(p))])
    assert res.code == 0, res.err
    assert all(p.is_file() and p.stat().st_size for p in paths.values())
    again = tmp_path / "other" / "deeper" / "report.html"
    res = cli("report", str(paths["--json"]), "--html", str(again))
    assert res.code == 0, res.err
    assert again.read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html")


# -- from a fresh-eyes audit of the CLI (twenty-second session): each failed before it ------------------------------

SQUARE = [{"name": "sq", "function": "x*x", "x": 3, "analytical_gradient": 6}]


@pytest.mark.parametrize("command", ["run", "plan"])
def test_results_that_would_replace_the_ledger_being_read_are_refused(cli, ledger, command):
    # `gradaudit run mine.json --json mine.json` exited 0 and replaced the hand-written ledger with its results
    path = ledger(SQUARE, "mine.json")
    before = path.read_bytes()
    res = cli(command, str(path), "--json", str(path))
    assert res.code == 2 and "the ledger" in res.err and "same file" in res.err
    assert path.read_bytes() == before


def test_results_holding_a_line_separator_are_read_back(cli, ledger, tmp_path):
    # U+2028 stays raw in the JSON Lines (ensure_ascii=False) and the reader split lines at it too: a results file
    # gradaudit wrote was "not valid JSON" to gradaudit report
    checks = [{**SQUARE[0], "derivation": "d/dx x^2 = 2x\u2028= 6 at x = 3"}]
    out = tmp_path / "r.jsonl"
    assert cli("run", str(ledger(checks)), "--json", str(out), "-q").code == 0
    res = cli("report", str(out), "-q")
    assert res.code == 0, res.err


def test_the_rerun_line_of_a_name_with_a_control_character_selects_it(cli, ledger):
    # the name was escaped for display (esc\x1b[1mbold) and then quoted, so the pasted filter matched nothing
    path = ledger([{"name": "esc\u001b[1mbold", "function": "x*x", "x": 1, "analytical_gradient": 3}])  # wrong: 2
    res = cli("run", str(path))
    line = next(x for x in res.out.splitlines() if "re-run:" in x).split("re-run:", 1)[1].strip()
    again = cli(*shlex.split(line)[1:])
    assert again.code == 1 and "no check name contains" not in again.err


def test_write_results_takes_one_result_and_refuses_a_non_iterable_with_a_spec_error(tmp_path):
    # one ga.check result (not a list) and None raised a bare TypeError
    import torch

    import gradaudit as ga

    res = ga.check(torch.sin, (torch.tensor([0.5], dtype=torch.float64, requires_grad=True),))
    path = ga.write_results(tmp_path / "r.jsonl", res)
    assert [r.verdict for r in ga.read_results(path)[1]] == ["pass"]
    with pytest.raises(ga.SpecError, match="write_results takes"):
        ga.write_results(tmp_path / "s.jsonl", None)


def test_write_results_of_nothing_refuses_and_keeps_an_earlier_file(tmp_path, cli):
    # ga.write_results(path, []) wrote a file that gradaudit report then refused ("holds no records"), replacing
    # whatever the path held
    import torch

    import gradaudit as ga

    path = ga.write_results(tmp_path / "r.jsonl",
                            ga.check(torch.sin, (torch.tensor([0.5], dtype=torch.float64, requires_grad=True),)))
    before = path.read_bytes()
    with pytest.raises(ga.SpecError, match="no records.*was not written"):
        ga.write_results(path, [])
    assert path.read_bytes() == before
    assert cli("report", str(path)).code == 0


def test_ctrl_c_while_a_notebook_executes_is_an_interrupt_not_the_kernels_errors(monkeypatch):
    # Ctrl-C during `gradaudit notebook --execute` ended in ZMQError / DeadKernelError tracebacks and exit 1:
    # nbclient turns the KeyboardInterrupt into its own errors while it shuts the kernel down
    import signal

    nbclient = pytest.importorskip("nbclient")
    from gradaudit.render import notebook as nbr

    class Client:
        def __init__(self, *a, **k):
            pass

        def execute(self, **k):
            try:  # SIGINT arriving: its handler called as Python calls it (no real signal: pytest's own is safe)
                signal.getsignal(signal.SIGINT)(signal.SIGINT, None)
            except KeyboardInterrupt:
                raise RuntimeError("Kernel died before replying to kernel_info") from None

    monkeypatch.setattr(nbclient, "NotebookClient", Client)
    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        nbr.execute(nbr.build(("quickstart",), ()))
    assert signal.getsignal(signal.SIGINT) is handler  # restored


def _results_lines(cli, tmp_path, target="tutorial"):
    path = tmp_path / "r.jsonl"
    assert cli("run", target, "--json", str(path), "-q").code in (0, 1)
    return path, [json.loads(line) for line in path.read_text().splitlines()]


def _rewrite(path, lines):
    path.write_text("".join(json.dumps(obj) + "\n" for obj in lines))


def test_a_record_whose_outcome_contradicts_its_verdict_is_refused(cli, tmp_path):
    # a hand edit of "outcome" to "passed" on a failing record: the row said fail, the summary "passed", exit 0 and
    # JUnit failures="0" (a fresh-eyes audit); the tutorial's expected failure has verdict fail, outcome expected
    # failures
    path, lines = _results_lines(cli, tmp_path)
    kept = [i for i, obj in enumerate(lines) if obj.get("outcome") == "expected failures"]
    assert kept
    lines[kept[0]]["outcome"] = "passed"
    _rewrite(path, lines)
    for argv in (("report", str(path)), ("report", str(path), "--junit", str(tmp_path / "r.xml"))):
        res = cli(*argv)
        assert res.code == 2 and "has verdict 'fail' and outcome 'passed', which disagree" in res.err
    assert not (tmp_path / "r.xml").exists()


def test_an_expected_error_that_is_not_an_object_is_refused_not_a_crash(cli, tmp_path):
    # "expect_error": "RuntimeError" passed the schema and every renderer raised AttributeError
    path, lines = _results_lines(cli, tmp_path, "quickstart")
    lines[1]["expect_error"] = "RuntimeError"
    _rewrite(path, lines)
    res = cli("report", str(path))
    assert res.code == 2 and "has expect_error 'RuntimeError'" in res.err


def test_a_results_header_with_the_callers_own_environment_renders(cli, tmp_path):
    # ga.write_results(path, records, environment={...}) is documented; report then raised KeyError: 'torch'
    import gradaudit as ga

    path, _ = _results_lines(cli, tmp_path, "quickstart")
    _, records = ga.read_results(path)
    own = ga.write_results(tmp_path / "own.jsonl", records, environment={"ci_job": "42"})
    res = cli("report", str(own))
    assert res.code == 0 and "ci_job: 42" in res.out and "6 passed, 0 failed" in res.out
    for option, name in (("--html", "r.html"), ("--junit", "r.xml"), ("--markdown", "r.md")):
        assert cli("report", str(own), option, str(tmp_path / name)).code == 0


@pytest.mark.parametrize("environment", ['"x"', '{"torch": 5}', '{"accelerators": {"cuda": 1}}'])
def test_a_malformed_results_environment_is_refused(cli, tmp_path, environment):
    path, lines = _results_lines(cli, tmp_path, "quickstart")
    lines[0]["environment"] = json.loads(environment)
    _rewrite(path, lines)
    res = cli("report", str(path))
    assert res.code == 2 and "the run header's environment" in res.err and "Traceback" not in res.err


@pytest.mark.parametrize("environment", [{1, 2}, [1, 2], "ci"])
def test_write_results_refuses_an_environment_that_is_not_a_dict(tmp_path, environment):
    import gradaudit as ga

    with pytest.raises(ga.SpecError, match="environment must be a dict"):
        ga.write_results(tmp_path / "r.jsonl", [], environment=environment)
    assert not (tmp_path / "r.jsonl").exists()


def test_control_characters_in_any_field_of_a_results_file_stay_escaped(cli, tmp_path):
    # method, dtype, device and the evidence's scheme held ESC/BEL that reached the terminal raw, and the JUnit XML
    # was not well-formed (a fresh-eyes audit; names and derivations were already escaped)
    import xml.etree.ElementTree as ET

    path, lines = _results_lines(cli, tmp_path)
    hostile = "vjp\u001b]0;pwned\u0007\u001b[2J"
    for obj in lines[1:]:
        obj["method"] = hostile
        obj["dtype"] = "float64\u001b[31m"
        for meta in obj.get("inputs") or []:
            meta["device"] = "cpu\u0007"
    _rewrite(path, lines)
    res = cli("report", str(path))
    assert "\u001b" not in res.out and "\u0007" not in res.out and "\\x1b]0;pwned" in res.out
    assert cli("report", str(path), "--junit", str(tmp_path / "r.xml")).code == 0
    text = (tmp_path / "r.xml").read_text()
    assert "\u001b" not in text and ET.fromstring(text.split("\n", 1)[1]) is not None


def test_a_lone_surrogate_in_a_name_is_written_and_read_back(cli, tmp_path):
    # a check named from a file name that is not UTF-8 (os.fsdecode gives lone surrogates) crashed every writer with
    # UnicodeEncodeError; the JSON now holds its escape and reads back as the same string, the reports show it escaped
    import torch

    import gradaudit as ga

    name = "sin\udcff"
    res = ga.check(torch.sin, (torch.tensor([0.5], dtype=torch.float64, requires_grad=True),), name=name)
    path = ga.write_results(tmp_path / "r.jsonl", res)
    assert ga.read_results(path)[1][0].check == name
    shown = cli("report", str(path))
    assert shown.code == 0 and "sin\\udcff" in shown.out
    for option, out in (("--html", "r.html"), ("--junit", "r.xml"), ("--markdown", "r.md")):
        assert cli("report", str(path), option, str(tmp_path / out)).code == 0


def test_results_paths_are_str_path_or_bytes_and_anything_else_is_a_spec_error(tmp_path):
    # ga.write_results(b"r.jsonl", ...) and (3, ...) raised a bare TypeError (a fresh-eyes audit)
    import os

    import torch

    import gradaudit as ga

    res = ga.check(torch.sin, (torch.tensor([0.5], dtype=torch.float64, requires_grad=True),))
    written = ga.write_results(os.fsencode(tmp_path / "b.jsonl"), res)
    assert written == tmp_path / "b.jsonl" and ga.read_results(os.fsencode(written))[1][0].verdict == "pass"
    for bad in (3, None, ["r.jsonl"]):
        with pytest.raises(ga.SpecError, match="the results path must be a str or a pathlib.Path"):
            ga.write_results(bad, res)


def test_steps_refuses_clashing_outputs_and_a_point_that_is_not_finite(cli, tmp_path):
    # --json and --plot naming one file wrote the plot over the study (rc 0); a plot under a file raised
    # FileExistsError; --at x=nan printed "no optimum: f''' is 0 here" and "nanx its best" (a fresh-eyes audit)
    (tmp_path / "file").write_text("kept\n")
    same = str(tmp_path / "v.svg")
    res = cli("steps", "sin(x)", "--at", "x=0.5", "--json", same, "--plot", same)
    assert res.code == 2 and "name the same file" in res.err and not (tmp_path / "v.svg").exists()
    res = cli("steps", "sin(x)", "--at", "x=0.5", "--plot", str(tmp_path / "file" / "x.png"))
    assert res.code == 2 and "Not a directory" in res.err and (tmp_path / "file").read_text() == "kept\n"
    for value in ("nan", "inf", "-inf"):
        res = cli("steps", "sin(x)", "--at", f"x={value}")
        assert res.code == 2 and "with a finite number" in res.err


def test_a_ledger_records_re_run_line_is_kept_in_the_results(cli, ledger, tmp_path):
    # the re-run line of a ledger check was printed during run only: gradaudit report and the HTML had none
    import gradaudit as ga

    path = ledger('{"checks": [{"name": "wrong", "function": "x*x", "x": 3.0, "analytical_gradient": 9, '
                  '"derivation": "a wrong 3x (2x = 6)"}]}')
    out = tmp_path / "r.jsonl"
    assert cli("run", str(path), "--json", str(out)).code == 1
    wanted = f"gradaudit run {path} --check wrong"
    assert {r.rerun for r in ga.read_results(out)[1]} == {wanted}
    assert f"re-run:     {wanted}" in cli("report", str(out)).out


@pytest.mark.parametrize("content, said", [
    # a 401-digit clamp bound: OverflowError from float() at load, a traceback and exit 1
    ('{"function": "clamp(x, min=1' + "0" * 400 + ')", "x": 3.0, "analytical_gradient": 0}',
     "parameter 'min' is a 401-digit number"),
    ('{"function": "x*1' + "0" * 400 + '", "x": 3.0, "analytical_gradient": 0}',
     "contains the literal a 401-digit number, which is not a finite float64 number"),
    # a timeout of 1e10: OverflowError from setitimer at run time
    ('{"function": "x*x", "x": 3.0, "analytical_gradient": 6, "timeout": 1e10}', "a positive number up to 1e+08"),
    # an empty input passed two methods, its written gradient never read
    ('{"function": "sum(x*x)", "x": [], "analytical_gradient": 6}', "the input 'x' is empty ([])"),
    # a suite that is not a string: the run wrote records gradaudit report then refused
    ('{"checks": [{"function": "x*x", "x": 3.0, "analytical_gradient": 6}], "suite": 5}',
     "the top-level 'suite' must be a string; got int (5)"),
    # an input named like a record field lost its value in that field of the record
    ('{"function": "mode*mode", "mode": 3.0, "analytical_gradient": 6}', "'mode' cannot name an input"),
    # a full-width x: Python reads the expression's x as x, so the input could never be used
    ('{"function": "\\uff58*\\uff58", "\\uff58": 3.0, "analytical_gradient": 6}',
     "the input name 'ｘ' is read by Python as 'x'"),
])
def test_ledger_input_that_crashed_or_passed_unchecked_is_refused_at_load(cli, ledger, content, said):
    # found by a fresh-eyes audit of ledgers and the CLI: each ended in a bare traceback (exit 1), a pass of nothing,
    # or a results file gradaudit report refuses
    path = ledger(content)
    for command in ("run", "plan"):
        res = cli(command, str(path))
        assert res.code == 2 and said in res.err and "Traceback" not in res.err, (command, res.err)


def test_a_target_name_too_long_for_the_file_system_is_refused(cli):
    res = cli("run", "a" * 300)  # os.stat raised ENAMETOOLONG from Path.exists(), a traceback and exit 1
    assert res.code == 2 and "is not a usable path (File name too long)" in res.err


def test_the_re_run_line_names_the_ledger_a_check_came_from(cli, tmp_path):
    # two ledgers with one check name: A's failure said to re-run B.json, which passes (a fresh-eyes audit)
    (tmp_path / "A.json").write_text('{"name": "sq", "function": "x*x", "x": 3.0, "analytical_gradient": 7, '
                                     '"derivation": "a wrong 7"}')
    (tmp_path / "B.json").write_text('{"name": "sq", "function": "x*x", "x": 3.0, "analytical_gradient": 6, '
                                     '"derivation": "2x"}')
    res = cli("run", str(tmp_path / "A.json"), str(tmp_path / "B.json"))
    assert res.code == 1
    assert f"re-run:     gradaudit run {tmp_path / 'A.json'} --check sq" in res.out
    assert f"gradaudit run {tmp_path / 'B.json'}" not in res.out


def test_report_to_files_exits_as_the_run_did(cli, ledger, tmp_path):
    # a CI step that re-renders saved results as HTML or JUnit must fail where the run failed: it exited 0 whatever
    # the records held (only the terminal form followed the run)
    wrong = ledger([{"name": "wrong", "function": "x*x", "x": 3, "analytical_gradient": 7}])  # d/dx x^2 = 6, not 7
    out = tmp_path / "r.jsonl"
    assert cli("run", str(wrong), "--json", str(out), "-q").code == 1
    res = cli("report", str(out), "--html", str(tmp_path / "r.html"), "--junit", str(tmp_path / "r.xml"))
    assert res.code == 1 and (tmp_path / "r.html").is_file() and (tmp_path / "r.xml").is_file()
    good = tmp_path / "g.jsonl"
    assert cli("run", "quickstart", "--json", str(good), "-q").code == 0
    assert cli("report", str(good), "--markdown", str(tmp_path / "g.md")).code == 0


# -- the third fresh-eyes audit (2026-12-06): reports, exit codes and the terminal --------------------------------

def test_the_progress_bar_shows_a_check_name_escaped_and_reads_no_markup_in_it():
    # the bar printed names raw: an ESC sequence cleared the screen, and [link=...] became a live hyperlink
    import io

    from rich.console import Console

    from gradaudit.cli import LazyProgress

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=150)
    bar = LazyProgress(console, total=3, after_s=0.0)
    bar(type("C", (), {"name": "evil [link=https://evil.example/]L[/link] \x1b[2J"})())
    bar(type("C", (), {"name": "evil [link=https://evil.example/]L[/link] \x1b[2J"})())
    bar.stop()
    text = out.getvalue()
    assert "\x1b[2J" not in text and "\x1b]8;" not in text  # no raw ESC[2J, no OSC 8 hyperlink
    assert "\\x1b[2J" in text and "[link=https://evil.example/]" in text  # shown, escaped, as text


def test_plan_on_standard_output_escapes_what_json_leaves_raw_and_reads_back_the_same(cli, ledger):
    name = "c1 \x9b2J bidi \u202eevil\u202c del \x7f"
    r = cli("plan", str(ledger({"name": name, "function": "x*x", "x": 3, "analytical_gradient": 6})))
    assert r.code == 0
    assert not any(c in r.out for c in ("\x9b", "\u202e", "\x7f"))
    assert {json.loads(line)["check"] for line in r.out.splitlines()} == {name}


def test_report_exits_5_where_the_run_checked_nothing(cli, tmp_path):
    results = tmp_path / "r.jsonl"
    assert cli("run", "lesson", "--check", "same-device", "--json", str(results)).code == 5
    assert cli("report", str(results)).code == 5
    r = cli("report", str(results), "--junit", str(tmp_path / "r.xml"))
    assert r.code == 5 and "no checks ran in" in r.err


def test_a_replaced_results_file_keeps_its_permissions(cli, ledger, tmp_path):
    import os
    import stat

    results = tmp_path / "r.jsonl"
    path = ledger({"function": "x*x", "x": 3, "analytical_gradient": 6})
    assert cli("run", str(path), "--json", str(results)).code == 0
    os.chmod(results, 0o600)
    assert cli("run", str(path), "--json", str(results)).code == 0
    assert stat.S_IMODE(os.stat(results).st_mode) == 0o600


def test_a_ledger_input_named_gn_does_not_shadow_the_notebooks_module():
    from gradaudit.render.notebook import variable_names

    assert variable_names(["gn", "x"])["gn"] != "gn"


@pytest.mark.parametrize("function", ["1/x", "sqrt(x)"])
def test_steps_at_a_point_where_the_derivative_is_not_finite_is_refused(cli, function):
    r = cli("steps", function, "--at", "x=0")
    assert r.code == 2 and "nothing finite to estimate" in r.err and "nan" not in r.out


def test_a_results_file_nested_too_deeply_is_refused_in_its_own_terms(cli, tmp_path):
    results = tmp_path / "deep.jsonl"
    results.write_text('{"schema_version": 1, "kind": "run"}\n' + "[" * 100 + "]" * 100 + "\n")
    r = cli("report", str(results))
    assert r.code == 2 and "a ledger or a results file needs a few" in r.err


def test_ctrl_c_seen_by_nbclients_own_handler_is_an_interrupt(monkeypatch):
    # while cells run, nbclient's event loop replaces the SIGINT handler: it starts the kernel's cleanup (leaving
    # _async_cleanup_kernel_future behind) and execute() then fails with AssertionError or a CancelledError (exit 1
    # and tracebacks, where an interrupt is exit 130 and one line)
    import asyncio

    nbclient = pytest.importorskip("nbclient")
    from gradaudit.render import notebook as nbr

    for failure in (AssertionError(), asyncio.CancelledError()):
        class Client:
            def __init__(self, *a, **k):
                pass

            def execute(self, _failure=failure, **k):
                self._async_cleanup_kernel_future = object()
                raise _failure

        monkeypatch.setattr(nbclient, "NotebookClient", Client)
        with pytest.raises(KeyboardInterrupt):
            nbr.execute(nbr.build(("quickstart",), ()))


def test_a_kernel_that_fails_for_another_reason_shows_its_log(monkeypatch, capsys):
    nbclient = pytest.importorskip("nbclient")
    from gradaudit.render import notebook as nbr

    class Client:
        def __init__(self, *a, **k):
            pass

        def execute(self, stderr, **k):
            stderr.write("kernel: cannot import ipykernel_launcher\n")
            raise RuntimeError("Kernel died before replying to kernel_info")

    monkeypatch.setattr(nbclient, "NotebookClient", Client)
    with pytest.raises(RuntimeError):
        nbr.execute(nbr.build(("quickstart",), ()))
    assert "cannot import ipykernel_launcher" in capsys.readouterr().err
