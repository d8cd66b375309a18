"""Linear regression from raw tensors (seed 004): check the gradients, then take one step.

Data x = 0..3, y = 1, 3, 5, 7; at w = b = 0 the MSE is 21 and by hand
dL/dw = (2/n) sum(err*x) = -17, dL/db = (2/n) sum(err) = -8.
Run:  python examples/03_linear_regression.py
"""

import torch

import gradaudit as ga
from gradaudit.render.text import make_console, render

data = {"x": ga.InputSpec("x", [0.0, 1.0, 2.0, 3.0], requires_grad=False),
        "y": ga.InputSpec("y", [1.0, 3.0, 5.0, 7.0], requires_grad=False)}
grads = ga.Expectation(name="MSE gradients at w = b = 0", function="mean((w*x + b - y)**2)",
                 inputs={"w": 0.0, "b": 0.0, **data}, expected={"w": -17, "b": -8},
                 derivation="errors -1, -3, -5, -7: dL/dw = 0.5 * -34, dL/db = 0.5 * -16")


def one_step():
    x, y = torch.tensor([0.0, 1.0, 2.0, 3.0]), torch.tensor([1.0, 3.0, 5.0, 7.0])
    w, b = torch.zeros((), requires_grad=True), torch.zeros((), requires_grad=True)
    ((w * x + b - y) ** 2).mean().backward()
    with torch.no_grad():  # the update is not part of the model
        w -= 0.1 * w.grad
        b -= 0.1 * b.grad
    return {"w": w.detach(), "b": b.detach(), "loss": ((w * x + b - y) ** 2).mean().detach()}


step = ga.Probe("one step with lr 0.1", one_step, {"w": 1.7, "b": 0.8, "loss": 0.535},
                derivation="w = 0 - 0.1 * -17, b = 0 - 0.1 * -8; errors -0.2, -0.5, -0.8, -1.1 give 0.535")
records = ga.run([grads, step])
render(records, make_console())
assert all(r.verdict == "pass" for r in records)
