"""The step-size study. Expected numbers from the error model, derived by hand:

f = sin(x) e^x at 0.7: |f| = 1.29729, f''' = 2 e^x (cos x - sin x) = 0.48580,
so h* = (3 eps |f| / |f'''|)^(1/3) = 1.2116e-5 in float64 and 9.848e-3 in float32.
"""

import xml.etree.ElementTree as ET

import pytest

from gradaudit.study import study


@pytest.fixture(scope="module")
def s():
    return study("sin(x)*exp(x)", {"x": 0.7})


def test_optimum_follows_the_error_model(s):
    assert s["optimum"]["float64"]["h"] == pytest.approx(1.2116e-5, rel=1e-3)
    assert s["optimum"]["float32"]["h"] == pytest.approx(9.848e-3, rel=1e-3)
    assert s["third_derivative"] == pytest.approx(0.48580, rel=1e-4)


def test_the_v_has_its_bottom_near_the_optimum(s):
    assert 1e-6 <= s["optimum"]["float64"]["best_h"] <= 1e-4
    assert 1e-3 <= s["optimum"]["float32"]["best_h"] <= 1e-1
    # both arms: truncation at large h, rounding at tiny h
    err = {(r["dtype"], r["h"]): r["abs_error"] for r in s["rows"]}
    assert err["float64", 1e-1] > 1e3 * s["optimum"]["float64"]["best_error"]
    assert err["float64", 1e-12] > 1e3 * s["optimum"]["float64"]["best_error"]


def test_float32_rounding_noise_swamps_tiny_steps(s):
    err = {(r["dtype"], r["h"]): r["abs_error"] for r in s["rows"]}
    # rounding eps32 |f| / h = 1.19e-7 * 1.297 / 1e-6 = 0.15: far above float32's best, about 1e-5
    assert err["float32", 1e-6] > 1e3 * s["optimum"]["float32"]["best_error"]
    assert err["float32", 1e-6] > 1e3 * err["float64", 1e-6]


def test_steps_command_writes_table_and_plots(cli, tmp_path):
    png, svg, js = tmp_path / "v.png", tmp_path / "v.svg", tmp_path / "v.json"
    res = cli("steps", "sin(x)*exp(x)", "--at", "x=0.7", "--plot", str(png), "--plot", str(svg), "--json", str(js))
    assert res.code == 0, res.err
    assert "optimum h* = (3 eps |f| / |f'''|)^(1/3) = 1.21e-05" in res.out
    assert "32-bit rounding noise swamps tiny steps" in res.out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert ET.parse(svg).getroot().tag.endswith("svg")
    assert '"optimum"' in js.read_text()


def test_steps_bad_input(cli):
    assert cli("steps", "sin(x)", "--at", "x=abc").code == 2
    res = cli("steps", "sin(y)", "--at", "x=1")
    assert res.code == 2 and "not an input" in res.err
    assert cli("steps", "sin(x)", "--at", "x=1", "--plot", "v.pdf").code == 2
