"""The HTML report, opened in headless Chromium (Debian's chromium-headless-shell via playwright)."""

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from gradaudit import Expectation, run, suites
from gradaudit.ledger import read_results, results_text, write_atomic
from gradaudit.record import summarize
from gradaudit.render.html import render_html

BROWSER = shutil.which("chromium-headless-shell") or "/usr/lib/chromium/chromium-headless-shell"


def records():
    recs = run(suites.load("quickstart") + suites.load("notebook"), environment_id="env-test")
    # a failing tensor check, so that a discrepancy plot is embedded: d/dx_i sum(x^2) = 2 x_i = [2, 4, 6]
    recs += run([Expectation(name="claims [2, 5, 6]", function="sum(x*x)", inputs={"x": [1.0, 2.0, 3.0]},
                       expected={"x": [2, 5, 6]}, methods=["backward"], source="test")], environment_id="env-test")
    return recs


def test_self_contained_and_complete():
    recs = records()
    page = render_html(recs, {"environment": {"id": "env-test"}})
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # nothing is fetched
    assert "<script src" not in page and "<link" not in page and "@import" not in page
    assert page.count('class="record"') == len(recs)
    assert "<svg" in page  # the discrepancy plot of the failing tensor check
    assert "Mismatched elements: 1 / 3 (33.3%)" in page


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
    assert res.code == 0, res.err
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
    assert page.locator("tr.record:visible").count() == len(recs)
    for verdict in ("pass", "error", "inconclusive", "skipped"):  # show failures only
        page.locator(f"input.verdict-filter[value={verdict}]").uncheck()
    visible = page.locator("tr.record:visible")
    assert visible.count() == counts["failed"] == 1
    assert visible.first.get_attribute("data-verdict") == "fail"
    page.locator("input.verdict-filter[value=pass]").check()
    assert page.locator("tr.record:visible").count() == counts["failed"] + counts["passed"]
    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    if os.environ.get("GRADAUDIT_SCREENSHOT_DIR"):
        shutil.copy(shot, Path(os.environ["GRADAUDIT_SCREENSHOT_DIR"]) / "report.png")


def test_report_command_errors(cli, tmp_path):
    assert cli("report", str(tmp_path / "missing.jsonl"), "--html", str(tmp_path / "r.html")).code == 2
    empty = tmp_path / "empty.jsonl"
    write_atomic(empty, results_text([], {}))
    res = cli("report", str(empty), "--html", str(tmp_path / "r.html"))
    assert res.code == 2 and "holds no records" in res.err
    assert cli("report", str(empty)).code == 2
