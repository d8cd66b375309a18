"""Check your own autograd.Function: a backward with a bug, found and located.

Swish(x) = x * sigmoid(x), so d/dx = sigmoid(x) + x * sigmoid(x) * (1 - sigmoid(x)).
The buggy backward forgets the product rule's second term; gradaudit compares it with float64
finite differences, element by element, and says which elements are wrong and by how much.

Run:  python examples/06_custom_function.py
"""

import torch

import gradaudit as ga


class Swish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad * (s + x * s * (1 - s))


class BuggySwish(Swish):
    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * torch.sigmoid(x)  # the product rule's second term is missing


x = torch.tensor([-2.0, -0.5, 0.0, 0.5, 2.0], dtype=torch.float64, requires_grad=True)

wrong = ga.check(BuggySwish.apply, (x,))
print(wrong)  # the located failure: which elements, numeric vs autograd, the tolerance, a re-run line
# the missing term x s (1 - s) vanishes only at x = 0: four of the five elements are wrong
assert wrong.verdict == "fail"
assert sorted(c.element for c in wrong.mismatches) == [(0,), (1,), (3,), (4,)]

right = ga.check(Swish.apply, (x,))
print(right)
assert right.ok
print("custom Function: the bug located at elements", sorted(c.element[0] for c in wrong.mismatches))
