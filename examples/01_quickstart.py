"""Quickstart: write the derivative first, then let three channels of evidence check it.

Run:  python examples/01_quickstart.py
"""

import gradaudit as ga
from gradaudit.render.text import make_console, render

# f(x) = x^2, so f'(x) = 2x, which is 6 at x = 3: written before anything runs.
square = ga.Expectation(
    name="x squared at x = 3",
    function="x*x",
    inputs={"x": 3.0},
    expected={"x": 6},
    derivation="d/dx x^2 = 2x = 6 at x = 3",
)

# A vector: d/dx_i sum(x_i^2) = 2 x_i, so [2, 4, 6] at x = [1, 2, 3].
vector = ga.Expectation(name="sum of squares", function="sum(x*x)", inputs={"x": [1.0, 2.0, 3.0]},
                  expected={"x": "2*x"}, derivation="d/dx_i sum(x^2) = 2 x_i")

records = ga.run([square, vector])
render(records, make_console())
assert all(r.verdict == "pass" for r in records)
