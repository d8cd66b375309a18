"""The training doctor's overhead: ga.audit_training against the plain steps it audits.

A ≈1M-parameter MLP (784 -> 1024 -> 256 -> 10, ReLU, 1,068,810 parameters), cross-entropy on random
batches, one correct step (zero_grad, forward, backward, optimizer step). Each repeat times the same
`--steps` batches twice, alternately: run plainly, then under audit_training (parameter hooks, the
function mode, node probes, value snapshots, the findings and records). Warm: one round of each first.
Medians; the goal is an audit at most 3x the time of the steps it audits. This machine is shared and
noisy, so read the ratio, not the third digit; the default is one thread (two threads on a loaded
two-core machine make every reduction wait for the busy core).

Run:  python bench/bench_training.py                      (about 10 seconds; prints a Markdown table)
      python bench/bench_training.py --repeats 31 --threads 2 --batch 256 --optimizer adam
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from gradaudit.training import audit_training

OPTIMIZERS: dict[str, Callable[[Any], torch.optim.Optimizer]] = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9),
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-3),
}


def setup(batch: int, steps: int, optimizer: str) -> tuple[nn.Module, Any, Callable[[Any], float], list[Any]]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = OPTIMIZERS[optimizer](model.parameters())
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(batch, 784, generator=g), torch.randint(0, 10, (batch,), generator=g))
               for _ in range(steps)]

    def step(b: Any) -> float:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(b[0]), b[1])
        loss.backward()
        opt.step()
        return loss.item()

    return model, opt, step, batches


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=15, help="timed rounds (median reported)")
    ap.add_argument("--steps", type=int, default=3, help="steps per round (audit_training's steps=)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--optimizer", choices=sorted(OPTIMIZERS), default="sgd")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    model, opt, step, batches = setup(args.batch, args.steps, args.optimizer)
    n_params = sum(p.numel() for p in model.parameters())

    def plain() -> None:
        for b in batches:
            step(b)

    def audited() -> None:
        audit = audit_training(step, batches, model=model, optimizer=opt, steps=args.steps)
        assert audit.ok, audit

    plain()
    audited()
    times: dict[str, list[float]] = {"plain": [], "audit": []}
    for _ in range(args.repeats):
        for name, fn in (("plain", plain), ("audit", audited)):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    p, a = statistics.median(times["plain"]), statistics.median(times["audit"])
    print(f"MLP 784-1024-256-10 ({n_params:,} parameters), batch {args.batch}, {args.optimizer}, "
          f"{args.steps} steps per round, {args.repeats} rounds, {args.threads} thread(s), torch {torch.__version__}")
    print()
    print("| what | median ms | per step ms | ratio |")
    print("|---|---:|---:|---:|")
    print(f"| {args.steps} plain steps | {p * 1e3:.1f} | {p * 1e3 / args.steps:.1f} | 1.00 |")
    print(f"| audit_training of the same steps | {a * 1e3:.1f} | {a * 1e3 / args.steps:.1f} | {a / p:.2f} |")
    print()
    print(f"overhead ratio {a / p:.2f} (goal <= 3)")


if __name__ == "__main__":
    main()
