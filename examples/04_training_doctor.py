"""The training-step doctor: audit a buggy training loop, then the loop fixed.

The buggy step forgets optimizer.zero_grad(), so every step adds its gradient to the last one's; and
it compares (N, 1) predictions with (N,) targets, which broadcasts (N, 1) - (N,) into an (N, N) grid:
the loss compares every prediction with every target. Neither raises, and the loss still goes down.
``audit_training`` runs the step on three batches and names both, with the fix.
Run:  python examples/04_training_doctor.py   (about a second)
"""

import torch

from gradaudit.render.text import make_console, render
from gradaudit.training import audit_training

torch.manual_seed(0)
N = 16
x = torch.linspace(0, 3, N).unsqueeze(1)  # (N, 1)
y = 2 * x.squeeze(1) + 1  # (N,): y = 2x + 1
batches = [(x, y)] * 3

model = torch.nn.Linear(1, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)


def buggy_step(batch):
    xb, yb = batch
    loss = ((model(xb) - yb) ** 2).mean()  # (N, 1) - (N,) -> (N, N)
    loss.backward()  # no zero_grad(): gradients pile up
    opt.step()
    return loss.item()


audit = audit_training(buggy_step, batches, model=model, optimizer=opt)
print(audit)
assert {f.kind for f in audit.findings} == {"grad_accumulates", "broadcast_in_loss"}
assert {f.where for f in audit.findings if f.kind == "grad_accumulates"} == {"weight", "bias"}
print()


def fixed_step(batch):
    xb, yb = batch
    opt.zero_grad()
    loss = ((model(xb).squeeze(-1) - yb) ** 2).mean()  # (N,) - (N,)
    loss.backward()
    opt.step()
    return loss.item()


audit = audit_training(fixed_step, batches, model=model, optimizer=opt)
print(audit)
print()
render(audit.records, make_console())  # the records, as every report renders them
assert audit.ok
