"""JUnit XML, Markdown, the executed notebook, and the progress bar."""

import io
import os
import xml.etree.ElementTree as ET

import pytest

from gradaudit import Expectation, run, suites
from gradaudit.render.junit import junit_xml
from gradaudit.render.markdown import markdown

# d/dx_i sum(x^2) = 2 x_i = [2, 4, 6]: element 1 is claimed as 5
WRONG = Expectation(name="claims [2, 5, 6]", function="sum(x*x)", inputs={"x": [1.0, 2.0, 3.0]},
              expected={"x": [2, 5, 6]}, methods=["backward"], suite="demo", source="test")
BOOM = Expectation(name="raises", function=lambda x: 1 / 0, inputs={"x": 1.0}, expected={"x": 1}, methods=["backward"],
             suite="demo", source="test")


@pytest.fixture(scope="module")
def recs():
    return run(suites.load("quickstart") + suites.load("notebook") + [WRONG, BOOM], environment_id="env-test")


def test_junit_is_valid_and_counts_match(recs):
    root = ET.fromstring(junit_xml(recs, {"environment": {"id": "env-test", "torch": {"version": "x"}}}))
    assert root.tag == "testsuites" and int(root.get("tests")) == len(recs)
    assert (root.get("failures"), root.get("errors"), root.get("skipped")) == ("1", "1", "0")
    demo = root.find("testsuite[@name='demo']")
    failure = demo.find("testcase/failure")
    assert failure.get("message").startswith("1 / 3 elements mismatched")
    assert "Mismatched elements: 1 / 3 (33.3%)" in failure.text and "function:   sum(x*x)" in failure.text
    assert demo.find("testcase/error").get("type") == "ZeroDivisionError"
    kept = [c for c in root.iter("testcase") if c.find("system-out") is not None]
    assert len(kept) == 3 and "expected failure" in kept[0].find("system-out").text  # the notebook's kept failure


def test_junit_pinned_for_one_record():
    (r,) = run([Expectation(name="sq", function="x*x", inputs={"x": 3.0}, expected={"x": 6}, methods=["backward"],
                      suite="s")], environment_id="e")
    text = junit_xml([r]).replace(f'time="{float(r.elapsed_s):.6f}"', 'time="T"')
    assert text == ('<?xml version="1.0" encoding="utf-8"?>\n'
                    '<testsuites name="gradaudit" tests="1" failures="0" errors="0" skipped="0">\n'
                    '  <testsuite name="s" tests="1" failures="0" errors="0" skipped="0">\n'
                    '    <testcase classname="gradaudit.s" name="sq [x] · backward" time="T" />\n'
                    '  </testsuite>\n'
                    '</testsuites>\n')


def test_markdown_summary(recs):
    text = markdown(recs, {"environment": {"id": "env-test", "python": {"version": "3"}, "torch": {"version": "t"}}})
    lines = text.splitlines()
    assert lines[2].startswith("**") and "1 failed" in lines[2] and "1 error," in lines[2]
    table = [line for line in lines if line.startswith("| ")]
    assert len(table) == len(recs) + 1  # header + one row per record
    assert table[1].startswith("| fail | claims [2, 5, 6] [x] | backward | stored | [2, 5, 6] | [2, 4, 6] | 1 |")


def test_run_writes_all_formats(cli, tmp_path):
    paths = {k: tmp_path / f"r.{k}" for k in ("html", "xml", "md")}
    res = cli("run", "quickstart", "--html", str(paths["html"]), "--junit", str(paths["xml"]),
              "--markdown", str(paths["md"]))
    assert res.code == 0 and all(p.exists() for p in paths.values())
    assert ET.parse(paths["xml"]).getroot().get("tests") == "6"
    assert oct(paths["md"].stat().st_mode & 0o777) != "0o600"


def test_progress_is_quiet_off_a_terminal_and_shown_on_one():
    from rich.console import Console

    from gradaudit.cli import LazyProgress

    quiet = io.StringIO()
    bar = LazyProgress(Console(file=quiet, force_terminal=False), total=3, after_s=0.0)
    for c in suites.load("quickstart")[:3]:
        bar(c)
    bar.stop()
    assert quiet.getvalue() == ""
    shown = io.StringIO()
    bar = LazyProgress(Console(file=shown, force_terminal=True, width=80), total=3, after_s=0.0)
    bar(suites.load("quickstart")[0])
    bar.stop()
    assert "checking" in shown.getvalue() and "1/3" in shown.getvalue()


@pytest.fixture
def jupyter_dirs(tmp_path, monkeypatch):
    for var in ("IPYTHONDIR", "JUPYTER_RUNTIME_DIR", "MPLCONFIGDIR", "JUPYTER_DATA_DIR"):
        path = tmp_path / var.lower()
        path.mkdir()
        monkeypatch.setenv(var, str(path))
    return tmp_path


def test_notebook_is_built_executed_and_shows_the_evidence(cli, jupyter_dirs):
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    path = jupyter_dirs / "gradcheck.ipynb"
    res = cli("notebook", "-o", str(path), "--execute")
    assert res.code == 0, res.err
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    md = [c.source for c in nb.cells if c.cell_type == "markdown"]
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "gn.environment()" in code[0].source  # the environment block comes first
    env_text = code[0].outputs[0]["data"]["text/plain"]
    assert "torch" in env_text and "cuda: compiled with" in env_text
    # every derivation is written in markdown before the cell that runs it
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and "gn.show" in cell.source:
            assert nb.cells[i - 1].cell_type == "markdown" and "Derivation, written first" in nb.cells[i - 1].source
    outputs = {c.source: c.outputs[0]["data"]["text/plain"] for c in code[1:]}
    square = outputs["gn.show('tutorial', 'x squared')"]
    header = square.splitlines()[0].split()
    assert header[:4] == ["method", "stored/returned", "expected", "observed"]
    assert "shape" in header and "dtype" in header and "device" in header
    rows = square.splitlines()[1:4]
    assert [r.split()[0] for r in rows] == ["backward", "autograd.grad", "finite_difference"]
    assert all(r.split()[2] == "6" and r.split()[3] == "6" for r in rows)  # 2x at x = 3, expected and observed
    failing = outputs["gn.show('tutorial', 'a failed check kept intact: 2x written as x^2')"]
    assert "fail (expected)" in failing and "Mismatched elements: 1 / 1 (100%)" in failing
    assert "function:   x*x" in failing and "environment:" in failing
    assert any("Deliberately failing" in m for m in md)


def test_notebook_without_execute_has_no_outputs(cli, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    path = tmp_path / "plain.ipynb"
    assert cli("notebook", "-o", str(path), "--suite", "quickstart").code == 0
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    assert cli("notebook", "-o", str(path), "--suite", "nope").code == 2
    assert os.path.exists(path)


def test_markdown_keeps_user_text_as_text(recs):
    # a check named with HTML and Markdown became a live <img onerror> and bold text once rendered (a fresh-eyes
    # audit); rendered by markdown-it (CommonMark, as rich ships it), the name reads as it was written
    import dataclasses

    markdown_it = pytest.importorskip("markdown_it")
    name = "x <img src=x onerror=alert(1)> **bold** [link](http://e.x) `code` a|b"
    text = markdown([dataclasses.replace(recs[0], check=name)])
    html = markdown_it.MarkdownIt("commonmark").enable("table").render(text)
    cell = [line for line in html.splitlines() if "onerror" in line]
    assert cell == ["<td>x &lt;img src=x onerror=alert(1)&gt; **bold** [link](http://e.x) `code` a|b [x]</td>"]
    assert "<img" not in html and "<a " not in html and "<code>" not in html


@pytest.mark.parametrize("bad", ["\ufffe", "\uffff", "\x01", "\x0b"])
def test_junit_stays_well_formed_with_characters_xml_forbids_in_names_and_the_header(bad):
    # U+FFFE and U+FFFF (and controls in a results file's header) made the file unparseable for CI
    import xml.etree.ElementTree as ET

    from gradaudit.record import Record
    from gradaudit.render.junit import junit_xml

    r = Record(suite=f"s{bad}", check=f"name{bad}", function="x*x", method="autograd.grad", verdict="fail",
               outcome="failed", reason=f"why{bad}")
    text = junit_xml([r], {"environment": {"id": f"env{bad}", "torch": {"version": f"2{bad}"}}})
    root = ET.fromstring(text.encode("utf-8"))
    assert root.get("failures") == "1"
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["environment"] == f"env{bad.encode('unicode_escape').decode('ascii')}"
