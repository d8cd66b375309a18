"""pytest collects ledger files: one item per check, each run in a separate pytest process on a tmp folder.

Every expected gradient below is derived by hand in the comment beside it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "ledgers"

GRADS_JSON = r"""{"checks": [
  {"name": "square", "function": "x*x", "x": 3.0, "analytical_gradient": 6,
   "derivation": "d/dx x^2 = 2x = 6 at x = 3"},
  {"name": "wrong_square", "function": "x*x", "x": 3.0, "analytical_gradient": 9,
   "derivation": "a wrong derivation: 3x = 9 (d/dx x^2 is 2x = 6)"},
  {"name": "kept_wrong", "function": "x*x", "x": 3.0, "analytical_gradient": 9,
   "expect": "fail", "expect_why": "the seed's 9 written for 2x = 6, kept visible"}
]}
"""

# cube: d/dx x^3 = 3x^2 = 12 at x = 2.
# softmax_pair: s = softmax([0, 0]) = [1/2, 1/2]; d/dx_j sum_i w_i s_i = s_j (w_j - s.w) with w = [1, 0], s.w = 1/2:
# [1/2 * 1/2, 1/2 * (-1/2)] = [0.25, -0.25].
# surprise: declared a failure, but 2x = 6 at x = 3 is right: an unexpected pass, which fails.
MORE_TOML = """\
[[checks]]
name = "cube"
function = "x**3"
x = 2.0
analytical_gradient = 12.0
derivation = "d/dx x^3 = 3x^2 = 12 at x = 2"

[[checks]]
name = "softmax_pair"
function = "sum(w*softmax(x, dim=0))"
x = [0.0, 0.0]
w = {value = [1.0, 0.0], requires_grad = false}
analytical_gradient = [0.25, -0.25]
derivation = "s_j (w_j - s.w) with s = [1/2, 1/2], w = [1, 0]"

[[checks]]
name = "surprise"
function = "x*x"
x = 3.0
analytical_gradient = 6.0
expect = "fail"
expect_why = "declared wrong, but it is right"
"""

NODEIDS = [
    "grads.gradaudit.json::square", "grads.gradaudit.json::wrong_square", "grads.gradaudit.json::kept_wrong",
    "more.gradaudit.toml::cube", "more.gradaudit.toml::softmax_pair", "more.gradaudit.toml::surprise",
]


def _pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k != "PYTEST_ADDOPTS" and not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT_TEST"))}
    env["COLUMNS"] = "120"
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-W", "error", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def _summary(out: str) -> str:
    """pytest's final line, e.g. '1 failed, 3 passed, 1 xfailed in 4.2s', without the time and the '='s."""
    last = [line for line in out.splitlines() if line.strip()][-1]
    return re.sub(r"\s+in [\d.]+s.*$", "", last.strip("= ")).strip()


def _junit(path: Path) -> dict[tuple[str, str], ET.Element]:
    cases = ET.parse(path).getroot().iter("testcase")
    return {(c.get("classname", ""), c.get("name", "")): c for c in cases}


@pytest.fixture
def ledgers(tmp_path: Path) -> Path:
    (tmp_path / "grads.gradaudit.json").write_text(GRADS_JSON)
    (tmp_path / "more.gradaudit.toml").write_text(MORE_TOML)
    # a ledger by content but not by name: not collected
    (tmp_path / "notes.json").write_text('{"function": "x*x", "x": 3.0, "analytical_gradient": 9}')
    return tmp_path


def test_one_item_per_check_with_junit_xfail_and_the_report(ledgers):
    res = _pytest(ledgers, "--junitxml=report.xml", "-rA")
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert _summary(res.stdout) == "2 failed, 3 passed, 1 xfailed", out
    cases = _junit(ledgers / "report.xml")
    assert sorted(cases) == sorted(
        [("grads.gradaudit.json", n) for n in ("square", "wrong_square", "kept_wrong")]
        + [("more.gradaudit.toml", n) for n in ("cube", "softmax_pair", "surprise")])
    # passing checks: no child element
    for key in [("grads.gradaudit.json", "square"), ("more.gradaudit.toml", "cube"),
                ("more.gradaudit.toml", "softmax_pair")]:
        assert list(cases[key]) == [], key
    # the failure text is the text report of the check's records: every method, expected 9 and observed 6
    failure = cases[("grads.gradaudit.json", "wrong_square")].find("failure")
    assert failure is not None and failure.text is not None
    for method in ("backward (stored)", "autograd.grad (returned)", "finite_difference (estimated)"):
        assert f"FAIL: wrong_square — d/dx by {method}" in failure.text
    assert "expected:   9" in failure.text and "observed:   6" in failure.text
    assert "Mismatched elements: 1 / 1 (100%)" in failure.text
    assert "derivation: a wrong derivation: 3x = 9" in failure.text
    assert "re-run:     python -m pytest grads.gradaudit.json::wrong_square" in failure.text
    assert "0 passed, 3 failed" in failure.text  # the renderer's own summary line
    assert "Traceback" not in failure.text and ".py:" not in failure.text
    # an expected failure that fails is xfailed, with its reason
    skipped = cases[("grads.gradaudit.json", "kept_wrong")].find("skipped")
    assert skipped is not None and skipped.get("type") == "pytest.xfail"
    assert "the seed's 9 written for 2x = 6" in (skipped.get("message") or "")
    # an expected failure that passes fails, and says so
    surprise = cases[("more.gradaudit.toml", "surprise")].find("failure")
    assert surprise is not None and surprise.text is not None
    assert "PASS (UNEXPECTED): surprise" in surprise.text
    assert "expected to fail because: declared wrong" in surprise.text
    # the same report in the terminal
    assert "FAIL: wrong_square — d/dx by backward (stored)" in res.stdout
    assert "XFAIL grads.gradaudit.json::kept_wrong - expected failure: the seed's 9 written for 2x = 6" in res.stdout
    assert "notes.json" not in res.stdout


def test_collection_is_one_item_per_check_in_file_order_with_reportinfo(ledgers):
    (ledgers / "conftest.py").write_text(textwrap.dedent("""
        def pytest_collection_finish(session):
            for item in session.items:
                path, line, domain = item.reportinfo()
                print("INFO", path.name, line, domain, "|", item.location[2])
    """))
    res = _pytest(ledgers, "--collect-only", "-q", "-s")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    listed = [line for line in res.stdout.splitlines() if "::" in line]
    assert listed == NODEIDS, out
    assert "INFO grads.gradaudit.json None grads.gradaudit.json record 2: wrong_square | " \
           "grads.gradaudit.json record 2: wrong_square" in res.stdout
    assert "INFO more.gradaudit.toml None more.gradaudit.toml record 3: surprise" in res.stdout


def test_k_selects_checks_by_name(ledgers):
    res = _pytest(ledgers, "-k", "square or cube", "-v")  # square, wrong_square (substring) and cube; not the rest
    assert res.returncode == 1, res.stdout + res.stderr
    assert _summary(res.stdout) == "1 failed, 2 passed, 3 deselected", res.stdout + res.stderr
    for nodeid, outcome in [("grads.gradaudit.json::square", "PASSED"),
                            ("grads.gradaudit.json::wrong_square", "FAILED"), ("more.gradaudit.toml::cube", "PASSED")]:
        assert f"{nodeid} {outcome}" in res.stdout


def test_xdist_runs_each_check_once(ledgers):
    res = _pytest(ledgers, "-n", "2", "--junitxml=report.xml")
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert _summary(res.stdout) == "2 failed, 3 passed, 1 xfailed", out
    assert "2 workers [6 items]" in res.stdout, out
    cases = list(ET.parse(ledgers / "report.xml").getroot().iter("testcase"))
    assert sorted(c.get("name") for c in cases) == sorted(n.split("::")[1] for n in NODEIDS)
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    assert failed == {"wrong_square", "surprise"}


def test_a_malformed_ledger_is_one_collection_error_without_traceback(tmp_path):
    (tmp_path / "syntax.gradaudit.json").write_text('{"function": "x*x", "x": 3.0,')
    # record 2 has the error: the whole file is one error, naming the record and field
    (tmp_path / "unknown.gradaudit.toml").write_text(textwrap.dedent("""\
        [[checks]]
        function = "x*x"
        x = 3.0
        analytical_gradient = 6.0

        [[checks]]
        function = "sinn(x)"
        x = 1.0
        analytical_gradient = 0.5
    """))
    (tmp_path / "escape.gradaudit.json").write_text(
        '{"function": "x*\\u001b[2Jx", "x": 3.0, "analytical_gradient": 6}')
    res = _pytest(tmp_path, "--junitxml=report.xml")
    out = res.stdout + res.stderr
    assert res.returncode == 2, out
    assert _summary(res.stdout) == "3 errors", out
    for name in ("syntax.gradaudit.json", "unknown.gradaudit.toml", "escape.gradaudit.json"):
        assert len(re.findall(rf"ERROR collecting {re.escape(name)}\b", res.stdout)) == 1, out
    assert "syntax.gradaudit.json: is not valid JSON: Expecting property name enclosed in double quotes at line 1" \
           in res.stdout
    assert "unknown.gradaudit.toml record 2: the expression 'sinn(x)' calls the unknown function 'sinn'. " \
           "Did you mean 'sin'?" in res.stdout
    assert "escape.gradaudit.json record 1: the expression 'x*\\x1b[2Jx' is not valid" in res.stdout
    assert "\x1b" not in out and "Traceback" not in out and ".py:" not in res.stdout
    errors = [c.find("error") for c in ET.parse(tmp_path / "report.xml").getroot().iter("testcase")]
    assert len(errors) == 3 and all(e is not None and "Traceback" not in (e.text or "") for e in errors)


def test_the_ini_option_sets_the_patterns(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\ngradaudit_ledgers = *.ledger.json checks/*.toml\n")
    (tmp_path / "mine.ledger.json").write_text('{"name": "sq", "function": "x*x", "x": 3.0, "analytical_gradient": 6}')
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "c.toml").write_text('function = "x**3"\nname = "cube"\nx = 2.0\n'
                                                'analytical_gradient = 12.0\n')
    (tmp_path / "c.toml").write_text('function = "x*x"\nx = 1.0\nanalytical_gradient = 2.0\n')  # not under checks/
    # the configured patterns replace the defaults: a *.gradaudit.json file is not collected here
    (tmp_path / "default.gradaudit.json").write_text('{"function": "x*x", "x": 3.0, "analytical_gradient": 6}')
    res = _pytest(tmp_path, "--collect-only", "-q")
    assert res.returncode == 0, res.stdout + res.stderr
    assert [line for line in res.stdout.splitlines() if "::" in line] == ["checks/c.toml::cube", "mine.ledger.json::sq"]


def test_torch_is_not_imported_by_the_plugin_or_a_session_without_ledgers(tmp_path):
    probe = subprocess.run([sys.executable, "-c", "import gradaudit.pytest_plugin, sys; print('torch' in sys.modules)"],
                           capture_output=True, text=True, timeout=120)
    assert probe.stdout.strip() == "False", probe.stdout + probe.stderr
    (tmp_path / "test_plain.py").write_text("import sys\n\n\ndef test_no_torch():\n"
                                            "    assert 'torch' not in sys.modules\n")
    (tmp_path / "data.json").write_text("{}")
    res = _pytest(tmp_path)
    assert res.returncode == 0 and _summary(res.stdout) == "1 passed", res.stdout + res.stderr


def test_the_example_ledger_folder_passes(tmp_path):
    # examples/ledgers/linear.gradaudit.json: mean((w*x + b - y)^2) over x = [1, 2, 3, 4], y = [3, 5, 7, 9];
    # r = w*x + b - y, dL/dw = mean(2 r x), dL/db = mean(2 r):
    #   w = 0, b = 0:    r = [-3, -5, -7, -9]      -> 2(-3-10-21-36)/4 = -35,     2(-24)/4 = -12
    #   w = 1, b = 0:    r = [-2, -3, -4, -5]      -> 2(-2-6-12-20)/4 = -20,      2(-14)/4 = -7
    #   w = 0.5, b = -1: r = [-3.5, -5, -6.5, -8]  -> 2(-3.5-10-19.5-32)/4 = -32.5, 2(-23)/4 = -11.5 (as formulas)
    res = _pytest(tmp_path, str(EXAMPLES), f"--junitxml={tmp_path / 'report.xml'}", "-v")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert _summary(res.stdout) == "3 passed", out
    cases = _junit(tmp_path / "report.xml")
    assert sorted(name for _, name in cases) == ["mse_gradient_at_w1", "mse_gradient_at_zero", "mse_gradient_formula"]
    assert all(list(c) == [] for c in cases.values())


def test_a_check_named_with_double_colons_can_be_run_again_by_its_re_run_line(tmp_path):
    # "::" separates the parts of a pytest node id: the item "grad::wrong" printed the re-run line
    # `python -m pytest g.gradaudit.json::grad::wrong`, which pytest answered with "not found"
    (tmp_path / "g.gradaudit.json").write_text(
        '{"checks": [{"name": "grad::wrong", "function": "x*x", "x": 3.0, "analytical_gradient": 9,'
        ' "derivation": "a wrong 3x = 9 (2x = 6)"}]}')
    res = _pytest(tmp_path, "-rA")
    assert res.returncode == 1, res.stdout + res.stderr
    line = [s for s in res.stdout.splitlines() if "re-run:" in s][0]
    assert line.strip() == "re-run:     python -m pytest 'g.gradaudit.json::grad: :wrong'"
    again = _pytest(tmp_path, "g.gradaudit.json::grad: :wrong")  # the node id of that line, as the shell passes it
    assert _summary(again.stdout) == "1 failed", again.stdout + again.stderr


def test_a_failed_items_summary_line_gives_its_counts_and_a_tab_name_can_be_run_again(tmp_path):
    # pytest's summary said "FAILED a.gradaudit.json::kink - PASS kink [x]" (the table's first row) for a check whose
    # finite differences were inconclusive; a name holding a tab printed a re-run line that matched nothing
    (tmp_path / "a.gradaudit.json").write_text(
        '{"checks": [{"name": "kink", "function": "relu(x)", "x": 0.0, "analytical_gradient": 0, "derivation": "0"},'
        ' {"name": "tab\\there", "function": "x*x", "x": 3.0, "analytical_gradient": 9, "derivation": "a wrong 9"}]}')
    res = _pytest(tmp_path, "-rA")
    assert "FAILED a.gradaudit.json::kink - kink: 2 passed, 0 failed, 1 inconclusive" in res.stdout, res.stdout
    assert "re-run:     python -m pytest 'a.gradaudit.json::tab\\there'" in res.stdout
    again = _pytest(tmp_path, "a.gradaudit.json::tab\\there")
    assert _summary(again.stdout) == "1 failed", again.stdout + again.stderr
