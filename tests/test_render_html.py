"""The HTML report, opened in headless Chromium (Debian's chromium-headless-shell via playwright).

Screenshots (full page, 1280 px and 420 px wide) are written to $GRADAUDIT_ARTIFACTS when it is set, else
to the test's tmp_path."""

import json
import math
import os
import re
import shutil
from pathlib import Path

import pytest

from gradaudit import Expectation, plan, run, suites
from gradaudit.ledger import parse_ledger, read_results, results_text, write_atomic
from gradaudit.record import summarize
from gradaudit.render.html import OUTCOME_ORDER, ordered, render_html
from gradaudit.render.plots import discrepancy_data, symlog_threshold

BROWSER = shutil.which("chromium-headless-shell") or "/usr/lib/chromium/chromium-headless-shell"

# a check name and a derivation with no place to break, to prove the page wraps them instead of scrolling
LONG_NAME = "vector_check_with_a_name_that_never_ends_" * 6 + "[4 elements]"
LONG_DERIVATION = ("d/dx_i sum(x_j^2) = 2x_i, so at x = [1, 0, 3, -2] the gradient is [2, 0, 6, -4]; the ledger "
                   "claims 5 for element 1: " + "a_derivation_written_without_any_space_" * 12)


def records():
    recs = run(suites.load("quickstart") + suites.load("notebook"), environment_id="env-test")
    # a failing tensor check, so that a discrepancy plot is embedded: d/dx_i sum(x^2) = 2 x_i = [2, 4, 6]
    recs += run([Expectation(name="claims [2, 5, 6]", function="sum(x*x)", inputs={"x": [1.0, 2.0, 3.0]},
                       expected={"x": [2, 5, 6]}, methods=["backward"], source="test")], environment_id="env-test")
    return recs


def ledger_records():
    """A passing check, a failing vector check (a wrong analytical gradient, long name and derivation), an
    expected failure, then the plan of one more check: 3 records each (backward, autograd.grad, finite
    differences)."""
    checks = parse_ledger([
        {"name": "x squared at 3", "function": "x*x", "x": 3.0, "analytical_gradient": 6,
         "derivation": "d/dx x^2 = 2x = 6 at x = 3"},
        {"name": LONG_NAME, "function": "sum(x*x)", "x": [1.0, 0.0, 3.0, -2.0],
         "analytical_gradient": [2, 5, 6, -4], "derivation": LONG_DERIVATION},
        {"name": "cube written as 2x", "function": "x**3", "x": 2.0, "analytical_gradient": 4,
         "derivation": "a slip: 2x written for 3x^2", "expect": "fail",
         "expect_why": "kept visible: d/dx x^3 = 3x^2 = 12 at x = 2, not 4"},
    ], where="report-ledger.json")
    planned = parse_ledger({"name": "planned: sin at 0", "function": "sin(x)", "x": 0.0, "analytical_gradient": 1},
                           where="plan.json")
    return run(checks, environment_id="env-test") + plan(planned, environment_id="env-test")


def artifacts(tmp_path: Path) -> Path:
    folder = Path(os.environ["GRADAUDIT_ARTIFACTS"]) if os.environ.get("GRADAUDIT_ARTIFACTS") else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_self_contained_and_complete():
    recs = records()
    page = render_html(recs, {"environment": {"id": "env-test"}})
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # nothing is fetched
    assert "<script src" not in page and "<link" not in page and "@import" not in page
    assert page.count('class="record"') == len(recs)
    assert "<svg" in page  # the discrepancy plot of the failing tensor check
    assert "Mismatched elements: 1 / 3 (33.3%)" in page


def test_records_are_ordered_failures_first_and_stable_within_a_group():
    recs = ledger_records()
    # run order: passing x3, failing x3, expected failure x3, then the plan x3
    assert [r.outcome for r in recs] == ["passed"] * 3 + ["failed"] * 3 + ["expected failures"] * 3 + ["planned"] * 3
    got = ordered(recs)
    assert [r.outcome for r in got] == ["failed"] * 3 + ["expected failures"] * 3 + ["passed"] * 3 + ["planned"] * 3
    assert [r.method for r in got[:3]] == ["backward", "autograd.grad", "finite_difference"]  # stable
    assert OUTCOME_ORDER == ("failed", "errors", "unexpected passes", "inconclusive", "expected failures", "passed",
                             "skipped", "planned")
    # a check written to fail that passes is an unexpected pass: after the failures, flagged, and it fails the run
    surprise = run(parse_ledger({"name": "claimed wrong, but right", "function": "x*x", "x": 3.0,
                                 "analytical_gradient": 6, "expect": "fail", "expect_why": "thought to be wrong"},
                                where="surprise.json"), environment_id="env-test")
    assert [r.outcome for r in surprise] == ["unexpected passes"] * 3
    mixed = ordered(surprise + recs)
    assert [r.outcome for r in mixed][:6] == ["failed"] * 3 + ["unexpected passes"] * 3
    flagged = render_html(surprise, {})
    assert flagged.count('<span class="badge b-xpass">UNEXPECTED PASS</span>') == 3
    page = render_html(recs, {})
    outcomes = re.findall(r'<details class="record" data-verdict="[a-z]+" data-outcome="([a-z ]+)"', page)
    assert outcomes == [r.outcome for r in got]
    assert page.count('class="badge b-fail"') == 3 and page.count('class="badge b-xfail"') == 3
    assert page.count('data-verdict="planned"') == 3


def test_discrepancy_data_per_element_with_the_tolerance_band():
    recs = ledger_records()
    backward = next(r for r in recs if r.check == LONG_NAME and r.method == "backward")
    data = discrepancy_data(backward)
    assert data is not None and not data.by_location and data.total == 4
    # backward of sum(x*x) stores 2x exactly: [2, 0, 6, -4] against the claim [2, 5, 6, -4]
    assert data.observed == [2.0, 0.0, 6.0, -4.0] and data.reference == [2.0, 5.0, 6.0, -4.0]
    assert data.differences == [0.0, -5.0, 0.0, 0.0]  # exact zeros stay zero
    # float64 default: atol 1e-7 + rtol 1e-7 * |expected|
    assert data.allowed == pytest.approx([3e-7, 6e-7, 7e-7, 5e-7], rel=1e-12)
    assert all(data.allowed_exact) and not data.evidence_term
    # five decades between the band and the error: a symmetric-log axis, linear within the smallest band
    assert symlog_threshold(data.differences + data.allowed) == pytest.approx(3e-7)
    assert symlog_threshold([0.0, 0.5, 2.0, 3e-3]) is None  # within three decades: linear
    assert symlog_threshold([0.0, 0.0]) is None


def test_discrepancy_data_of_finite_differences_carries_the_evidence_term():
    recs = ledger_records()
    fd = next(r for r in recs if r.check == LONG_NAME and r.method == "finite_difference")
    data = discrepancy_data(fd)
    assert data is not None and data.observed_name == "numeric" and data.evidence_term
    assert data.reference == [2.0, 5.0, 6.0, -4.0]
    (located,) = [c for c in fd.discrepancy.worst if c.verdict == "fail"]
    assert located.element == (1,)
    assert data.allowed[1] == located.allowance.total and data.allowed_exact[1]  # the recorded allowance
    bound = fd.evidence.error_bound * fd.tolerance.evidence_factor  # elsewhere: the largest bound, an upper estimate
    assert data.allowed[0] == pytest.approx(fd.tolerance.atol + fd.tolerance.rtol * 2.0 + bound)
    assert data.allowed_exact == [False, True, False, False]
    assert abs(data.differences[1] + 5.0) < 1e-6  # the evidence sees 0 where 5 was written


def test_a_scalar_expected_failure_is_plotted_too():
    recs = ledger_records()
    xfail = next(r for r in recs if r.check == "cube written as 2x" and r.method == "autograd.grad")
    data = discrepancy_data(xfail)
    assert data is not None and data.reference == [4.0] and data.observed == [12.0]  # 3x^2 at 2
    assert data.differences == [8.0]
    planned = next(r for r in recs if r.outcome == "planned")
    assert discrepancy_data(planned) is None  # nothing observed, nothing drawn
    pytest.importorskip("matplotlib")
    from gradaudit.render.plots import discrepancy_svg

    svg = discrepancy_svg(xfail)
    assert svg is not None and svg.startswith("<svg") and "<metadata>" not in svg


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(BROWSER):
        if os.environ.get("CI"):
            pytest.fail(f"CI must install chromium-headless-shell ({BROWSER} is missing)")
        pytest.skip("chromium-headless-shell is not installed (apt-get install chromium-headless-shell)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=BROWSER, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


def test_report_in_a_browser(browser, tmp_path, cli):
    out = tmp_path / "results.jsonl"
    ledger = tmp_path / "bad.json"
    ledger.write_text(json.dumps({"name": "claims [2, 5, 6]", "function": "sum(x*x)", "x": [1, 2, 3],
                                  "analytical_gradient": [2, 5, 6], "methods": ["backward"]}))
    assert cli("run", "quickstart", str(ledger), "--json", str(out)).code == 1
    html = tmp_path / "report.html"
    res = cli("report", str(out), "--html", str(html))  # re-rendered from saved records
    assert res.code == 1 and html.exists(), res.err  # the run's exit code: a check failed
    header, recs = read_results(out)
    counts = summarize(recs)

    page = browser.new_page()
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(html.as_uri())
    assert errors == []
    assert all(u.startswith(("file:", "data:", "about:")) for u in requests), requests
    assert page.locator("#count-total").inner_text() == str(len(recs))
    assert page.locator("#count-passed").inner_text() == str(counts["passed"])
    assert page.locator("#count-failed").inner_text() == str(counts["failed"])
    assert page.locator("#records .record:visible").count() == len(recs)
    for verdict in ("pass", "error", "inconclusive", "skipped"):  # show failures only
        page.locator(f"input.verdict-filter[value={verdict}]").uncheck()
    visible = page.locator("#records .record:visible")
    assert visible.count() == counts["failed"] == 1
    assert visible.first.get_attribute("data-verdict") == "fail"
    assert page.locator("#shown-line").inner_text() == f"showing 1 of {len(recs)} records"
    page.locator("input.verdict-filter[value=pass]").check()
    assert page.locator("#records .record:visible").count() == counts["failed"] + counts["passed"]
    page.close()


def _no_horizontal_scroll(page) -> tuple[int, int]:
    return tuple(page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]"))


@pytest.mark.parametrize("width", [1280, 420])
def test_a_report_people_read(browser, tmp_path, width):
    recs = ledger_records()
    path = tmp_path / "report.html"
    path.write_text(render_html(recs, {"environment": {"id": "env-test"}}), encoding="utf-8")
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    assert errors == []

    scroll, inner = _no_horizontal_scroll(page)
    assert inner == width and scroll <= inner, f"page scrolls sideways at {width} px: {scroll} > {inner}"

    rows = page.locator("#records .record")
    outcomes = [rows.nth(i).get_attribute("data-outcome") for i in range(rows.count())]
    assert outcomes == ["failed"] * 3 + ["expected failures"] * 3 + ["passed"] * 3 + ["planned"] * 3
    assert all(rows.nth(i).is_visible() for i in range(rows.count()))  # planned records are shown too

    # an expected failure looks different from a failure: its own badge, label and colour
    fail_badge = page.locator('.record[data-outcome="failed"] .badge').first
    xfail_badge = page.locator('.record[data-outcome="expected failures"] .badge').first
    assert fail_badge.inner_text() == "FAIL" and xfail_badge.inner_text() == "expected failure"
    assert fail_badge.get_attribute("class") != xfail_badge.get_attribute("class")

    def background(loc):
        return loc.evaluate("e => getComputedStyle(e).backgroundColor")

    assert background(fail_badge) == "rgb(207, 34, 46)"  # --fail, #cf222e
    assert background(xfail_badge) == "rgb(255, 248, 197)"  # amber, #fff8c5
    assert page.locator('.record[data-outcome="planned"] .badge').first.inner_text() == "planned"

    # details: closed for passing (and expected-failure, planned) records, open for failures
    def is_open(outcome):
        loc = page.locator(f'#records .record[data-outcome="{outcome}"]')
        return [loc.nth(i).evaluate("e => e.open") for i in range(loc.count())]

    assert is_open("passed") == [False] * 3 and is_open("planned") == [False] * 3
    assert is_open("expected failures") == [False] * 3 and is_open("failed") == [True] * 3
    passing = page.locator('#records .record[data-outcome="passed"]').first
    assert not passing.locator("pre").is_visible()
    # a failing record holds its intact account and a plot, inside its own row
    failing = page.locator('#records .record[data-outcome="failed"]').first
    assert "Mismatched elements: 1 / 4 (25%)" in failing.locator("pre").inner_text()
    assert failing.locator("figure.discrepancy svg").count() == 1
    svg_box = failing.locator("figure.discrepancy svg").bounding_box()
    assert svg_box is not None and svg_box["x"] + svg_box["width"] <= width

    # opened, every long line still wraps
    page.locator("#open-all").click()
    assert is_open("passed") == [True] * 3
    scroll, inner = _no_horizontal_scroll(page)
    assert scroll <= inner, f"an opened record scrolls sideways at {width} px: {scroll} > {inner}"
    pre = failing.locator("pre")
    assert pre.evaluate("e => getComputedStyle(e).whiteSpace") == "pre-wrap"
    assert pre.evaluate("e => e.scrollWidth <= e.clientWidth")
    page.locator("#close-all").click()
    assert is_open("failed") == [False] * 3

    page.locator("#open-all").click()
    shot = artifacts(tmp_path) / f"report-{width}.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.exists() and shot.stat().st_size > 0
    with open(shot, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    page.close()


def test_report_command_errors(cli, tmp_path):
    assert cli("report", str(tmp_path / "missing.jsonl"), "--html", str(tmp_path / "r.html")).code == 2
    empty = tmp_path / "empty.jsonl"
    write_atomic(empty, results_text([], {}))
    res = cli("report", str(empty), "--html", str(tmp_path / "r.html"))
    assert res.code == 2 and "holds no records" in res.err
    assert cli("report", str(empty)).code == 2


def test_nonfinite_values_are_not_plotted_as_numbers():
    from gradaudit.record import Record

    r = Record(check="nan", method="backward", input="x", expected_value=[1.0, 2.0],
               observed_gradient=[1.0, "NaN"], executed=True, verdict="fail", outcome="failed")
    data = discrepancy_data(r)
    assert data is not None and data.differences[0] == 0.0 and math.isnan(data.differences[1])
    assert data.allowed == [None, None]  # no tolerance recorded: no band drawn


@pytest.mark.parametrize("name", ["cost$\\frac$", "$x^{2$", "a\x1bb\x07c"])
def test_a_plot_draws_user_text_literally_without_warnings(name):
    # a name with $...$ was read as mathtext, failed to parse and its plot was silently dropped; one with ESC/BEL
    # made matplotlib warn "Glyph 27 missing" from our call (tests run with warnings as errors) and the SVG held
    # them raw (a fresh-eyes audit)
    import dataclasses
    import warnings

    pytest.importorskip("matplotlib")
    from gradaudit.render.plots import discrepancy_svg

    failing = next(r for r in records() if r.check == "claims [2, 5, 6]" and r.method == "backward")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        svg = discrepancy_svg(dataclasses.replace(failing, check=name, input=name))
    assert svg is not None and svg.startswith("<svg")
    assert "\x1b" not in svg and "\x07" not in svg


@pytest.mark.parametrize("width", [1280, 420])
def test_an_inconclusive_badge_keeps_its_word_whole(browser, tmp_path, width):
    # relu at its kink 0 is inconclusive (no declared convention); its badge broke as INCONCLUSI/VE at 1280 px
    recs = run([Expectation(name="relu at its kink", function="relu(x)", inputs={"x": 0.0}, expected={"x": 0.0},
                            methods=["finite_difference"])])
    assert {r.verdict for r in recs} == {"inconclusive"}
    path = tmp_path / "report.html"
    path.write_text(render_html(recs, {"environment": {"id": "env-test"}}), encoding="utf-8")
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(path.as_uri())
    badge = page.locator('.record[data-outcome="inconclusive"] .badge').first
    assert badge.inner_text().strip().upper() == "INCONCLUSIVE"
    line = float(badge.evaluate("e => parseFloat(getComputedStyle(e).lineHeight)"))
    assert badge.bounding_box()["height"] < 1.9 * line, "the badge wraps inside its word"
    scroll, inner = _no_horizontal_scroll(page)
    assert scroll <= inner
