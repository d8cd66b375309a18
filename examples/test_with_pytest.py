"""gradaudit in your own test suite: the `gradaudit` fixture and marker (installed with the package).

Run:  python -m pytest examples/test_with_pytest.py
"""

import pytest
import torch


class Cube(torch.autograd.Function):
    """y = x^3, dy/dx = 3x^2."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x**2


@pytest.mark.gradaudit(mode="full", seed=1)  # defaults for every gradaudit call in this test
def test_cube_backward(gradaudit):
    x = torch.randn(6, dtype=torch.float64, requires_grad=True)
    res = gradaudit.assert_gradients(Cube.apply, (x,))  # fails the test with the located report
    assert res.mode == "full"


def test_a_small_model(gradaudit):
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1)).double()
    gradaudit.assert_module(model, (torch.randn(5, 3, dtype=torch.float64),), lambda out: out.pow(2).mean())


def test_a_training_step(gradaudit):
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = [(torch.randn(8, 3), torch.randn(8, 1)) for _ in range(3)]

    def step(batch):
        opt.zero_grad()
        loss = ((model(batch[0]) - batch[1]) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.item()

    gradaudit.audit_training(step, data, model=model, optimizer=opt)  # fails the test on any finding
