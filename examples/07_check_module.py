"""Check a module's parameter gradients by name: a small model, then one whose custom layer cuts a
parameter out of the graph (through .data), which gradaudit reports by its name.

Run:  python examples/07_check_module.py
"""

import torch

import gradaudit as ga


class ScaledTanh(torch.nn.Module):
    """y = a * tanh(x): a learnable output scale."""

    def __init__(self, detach: bool = False):
        super().__init__()
        self.a = torch.nn.Parameter(torch.tensor(1.5))
        self.detach = detach

    def forward(self, x):
        a = self.a.data if self.detach else self.a  # .data: the gradient of `a` is silently lost
        return a * torch.tanh(x)


def model(detach: bool = False) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), ScaledTanh(detach), torch.nn.Linear(4, 1)).double()


x = torch.randn(5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))


def loss(out):
    return out.pow(2).mean()


good = ga.check_module(model(), (x,), loss)
print(good)
assert good.ok

broken = ga.check_module(model(detach=True), (x,), loss)
print(broken)
assert broken.verdict == "fail"
assert [r.input for r in broken.records if r.verdict == "fail"] == ["1.a"]  # the parameter, by name
print("check_module: the lost gradient named", [r.input for r in broken.records if r.verdict == "fail"])
