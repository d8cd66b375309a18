"""Every path writes records of the one model: each validates against the shipped JSON Schema, and
ga.check results go through write_results -> gradaudit report like ledger records."""

import json
import xml.etree.ElementTree as ET

import jsonschema
import pytest
import torch

import gradaudit as ga
from gradaudit import suites
from gradaudit.record import dumps, schema, schema_error

F64 = torch.float64


def leaf(n, seed=0):
    return (torch.rand(n, generator=torch.Generator().manual_seed(seed), dtype=F64) + 0.3).requires_grad_()


class Wrong(torch.autograd.Function):  # y = x^2, dy/dx = 2x; the backward returns 3x
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * g


def boom(x):
    raise ValueError("planted")


def every_path():
    """Records from every door: ledgers (run and plan, probes, skips, expected errors), ga.check in each
    mode with jvp, double backward and expected=, errors, and check_module."""
    checks = [c for name in suites.names() for c in suites.load(name)]
    checks.append(ga.Expectation("wrong", "sum(x*x)", {"x": [1.0, 2.0]}, {"x": [2, 5]}, methods=["backward",
                                                                                                   "taylor"]))
    checks.append(ga.Expectation("relu", "sum(relu(x))", {"x": [0.0, 1.0]}, {"x": [0, 1]},
                                 methods=["finite_difference"]))
    out = {"ledger run": ga.run(checks, environment_id="e"), "ledger plan": ga.plan(checks)}
    x = leaf(6)
    for mode in ("full", "directional", "auto"):
        out[f"check {mode}"] = list(ga.check(Wrong.apply, (x,), mode=mode).records)
    out["check options"] = list(ga.check(lambda x: torch.sin(x).sum(), (x,), forward_ad=True, order=2,
                                         expected=[torch.cos(x.detach())]).records)
    out["check error"] = list(ga.check(boom, (x,)).records)
    out["check kink"] = list(ga.check(torch.relu, (torch.zeros(3, dtype=F64, requires_grad=True),)).records)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh()).double()
    out["check_module"] = list(ga.check_module(model, (torch.randn(4, 3, dtype=F64),), lambda o: o.sum()).records)
    return out


@pytest.fixture(scope="module")
def paths():
    return every_path()


def test_every_record_of_every_path_validates_against_the_schema(paths):
    validator = jsonschema.Draft202012Validator(schema())
    for path, records in paths.items():
        assert records, path
        for r in records:
            data = json.loads(dumps(r.to_dict()))  # through JSON text: NaN and Infinity must be strings
            errors = sorted(validator.iter_errors(data), key=str)
            assert not errors, f"{path}: {r.check} [{r.input}]: {errors[0].message} at {list(errors[0].path)}"
            assert schema_error(data) is None, f"{path}: {r.check} [{r.input}]: {schema_error(data)}"  # the reader's
            assert ga.Record.from_dict(data).to_dict() == r.to_dict(), path


def test_records_hold_plain_json_only(paths):
    for records in paths.values():
        for r in records:
            json.dumps(r.to_dict(), allow_nan=False)  # raises on tensors, NaN, sets ...


def test_write_results_then_report_renders_check_results_like_ledger_records(tmp_path, cli):
    wrong = ga.check(Wrong.apply, (leaf(4),))
    ok = ga.check(torch.sin, (leaf(3),))
    ledger = ga.run([ga.Expectation("sq", "x*x", {"x": 3.0}, {"x": 6})])
    path = ga.write_results(tmp_path / "mixed.jsonl", [wrong, ok, *ledger])
    header, back = ga.read_results(path)
    assert [r.to_dict() for r in back] == [r.to_dict() for r in (*wrong.records, *ok.records, *ledger)]
    assert header["summary"]["failed"] == 1 and header["summary"]["passed"] == 4
    html, junit, md = tmp_path / "r.html", tmp_path / "r.xml", tmp_path / "r.md"
    res = cli("report", str(path), "--html", str(html), "--junit", str(junit), "--markdown", str(md))
    assert res.code == 1, res.err  # the run's: one check failed
    page = html.read_text()
    assert "Wrong.apply" in page and "Mismatched elements: 4 / 16 (25%)" in page
    assert "expected None" not in page and "tolerance —" not in page
    root = ET.parse(junit).getroot()
    assert root.get("tests") == "5" and root.get("failures") == "1"
    failure = root.find(".//failure")
    assert failure.get("message").startswith("4 / 16 elements mismatched")
    assert "numeric | autograd | abs | rel | allowed | verdict" in failure.text
    assert "| fail | Wrong.apply [x] | vjp | returned |"  # x: the name in forward(ctx, x) in md.read_text()


def test_a_plan_shows_in_html_and_is_skipped_not_passed_in_junit(tmp_path, cli, ledger):
    from gradaudit.render.html import render_html
    from gradaudit.render.junit import junit_xml

    planned = ga.plan(suites.load("quickstart"))
    page = render_html(planned)
    assert page.count('class="record"') == len(planned) and 'data-verdict="planned"' in page
    root = ET.fromstring(junit_xml(planned))
    assert root.get("tests") == str(len(planned)) and root.get("skipped") == str(len(planned))
    assert root.get("failures") == "0" and all(c.find("skipped") is not None for c in root.iter("testcase"))
    path = ledger({"function": "x*x", "x": 3, "analytical_gradient": 6})
    out = tmp_path / "plan.jsonl"
    assert cli("plan", str(path), "--json", str(out)).code == 0
    assert cli("report", str(out), "--html", str(tmp_path / "p.html")).code == 0
    assert (tmp_path / "p.html").read_text().count('class="record"') == 3


def test_records_of_a_vector_finite_difference_failure_hold_numbers_not_tensors():
    (r,) = ga.run([ga.Expectation("v", "sum(x*x)", {"x": [1.0, 2.0, 3.0]}, {"x": [2, 4, 7]},
                                  methods=["finite_difference"])])
    assert r.verdict == "fail"
    c = r.discrepancy.worst[0]
    assert isinstance(c.allowance.total, float) and c.element == (2,) and c.reference == 7.0
    from gradaudit.render.text import detail_lines

    assert "tensor(" not in "\n".join(detail_lines(r))
