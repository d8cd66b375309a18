"""The lesson's hand-derived graph: z = w*x + b, L = (z - t)^2 at x=2, w=3, b=1, t=10.

By hand: z = 7, L = 9, dL/dz = -6, so dL/dw = -6*x = -12, dL/db = -6, dL/dx = -6*w = -18.
Run:  python examples/02_hand_graph.py
"""

import gradaudit as ga
from gradaudit.render.text import make_console, render

graph = ga.Expectation(
    name="hand-derived graph",
    function="(w*x + b - t)**2",
    inputs={"x": 2.0, "w": 3.0, "b": 1.0, "t": ga.InputSpec("t", 10.0, requires_grad=False)},
    expected={"w": -12, "b": -6, "x": -18},
    derivation="dL/dz = 2(z - t) = -6; dL/dw = -6x, dL/db = -6, dL/dx = -6w",
)
records = ga.run([graph])
render(records, make_console())
assert all(r.verdict == "pass" for r in records)
