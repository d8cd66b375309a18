"""Rendered terminal text, pinned at fixed widths (wide: table; narrow: one line per record)."""

import io

from gradaudit import Expectation, run
from gradaudit.render.text import fmt_value, make_console, render

# d/dx_i sum(x^2) = 2 x_i = [2, 6] at x = [1, 3]; element 1 is claimed to be 7
CHECK = Expectation(name="claims 7", function="sum(x*x)", inputs={"x": [1.0, 3.0]}, expected={"x": [2, 7]},
              methods=["backward"], derivation="d/dx_i sum(x^2) = 2x_i; element 1 claimed wrong", source="test")

DETAIL = """\
FAIL: claims 7 — d/dx by backward (stored)
  source:     test
  function:   sum(x*x)
  input x:  [1, 3] shape (2,) float64 on cpu
  derivation: d/dx_i sum(x^2) = 2x_i; element 1 claimed wrong
  protocol:   forward → backward
  expected:   [2, 7]   (written: [2, 7])
  observed:   [2, 6]
  tolerance:  atol 1e-07, rtol 1e-07 (default: default for float64 gradients (torch.testing.assert_close's table))
  Mismatched elements: 1 / 2 (50%)
  Greatest absolute difference: 1 at 'x' element (1,) (up to 8e-07 allowed)
  Greatest relative difference: 0.142857 at 'x' element (1,)
    element | expected | observed | abs | rel | allowed | verdict
    (1,) | 7 | 6 | 1 | 0.142857 | 8e-07 | fail
  environment: env-test

0 passed, 1 failed
"""

WIDE = """\
verdict  check         method    stored/returned  expected  observed  abs err  tolerance    shape  dtype    device
──────────────────────────────────────────────────────────────────────────────────────────────────────────────────
fail     claims 7 [x]  backward  stored           [2, 7]    [2, 6]    1        1e-07/1e-07  (2,)   float64  cpu   \n
"""

NARROW = ("FAIL  claims 7 [x]\n"  # a short card per record, wrapped at the width, fields indented
          "      backward (stored) · expected [2, 7] · observed [2, 6] · abs err 1 · tol\n"
          "      1e-07/1e-07 · (2,) float64 cpu\n\n")


def rendered(width):
    buf = io.StringIO()
    render(run([CHECK], environment_id="env-test"), make_console(buf, width=width))
    return buf.getvalue()


def test_wide_table_pinned():
    assert rendered(120) == WIDE + DETAIL


def test_narrow_falls_back_to_a_card_per_record():
    assert rendered(80) == NARROW + DETAIL


def test_no_escape_codes_when_not_a_terminal():
    assert "\x1b[" not in rendered(120)


def test_long_values_are_summarized():
    assert fmt_value(list(range(1000))) == "[0, 1, 2, … 1000 values]"
    assert fmt_value([[1.0, 2.0], [3.0, 4.0]]) == "[1, 2, 3, … 4 values]"
    assert fmt_value(0.1234567891) == "0.123457"
    assert fmt_value("NaN") == "NaN" and fmt_value(None) == "None"
