"""Full Jacobian checks of a function's backward: every element compared and located.

Evidence is float64 by default (directional checks are in ``directional.py``). The numeric
side is batched central differences (``torch.func.vmap`` in chunks, a loop when the function
cannot be vmapped), or column groups when the Jacobian is diagonal or banded (a probe column
bounds the band; each band is verified twice with fresh random weights, never assumed), or
one-sided differences with large steps when the function is verified affine in the input
(columns that then disagree are recomputed centrally). The analytic side is
``torch.func.vjp`` under ``vmap`` (then batched ``autograd.grad``, then a loop) with randomly
scaled, non-unit ``grad_outputs``, so a backward that ignores ``grad_output`` cannot pass."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .compare import unravel as _unravel
from .numeric import is_kink, one_sided
from .tolerances import SAFETY

SMALL_BATCH = 16
LOOP_BUDGET_S = 4e-4  # a small batch whose plain forwards cost less than this runs as a loop (vmap costs more)
CHUNK_BYTES = 16 * 2**20  # per batched call: under glibc's mmap threshold (BENCH_ANCHORS); 16 MB measured
# faster than 32 MB for the MLP at N = 3000 (300 against 510 ms) and no slower for A @ x
TOL_REL = 1e-7  # relative floor of a full-mode comparison (central-difference truncation is ~1e-10)


@dataclass
class Problem:
    """The function, its inputs in evidence precision, and which of them are checked."""

    fn: Callable[..., Any]
    inputs: list[Any]
    names: list[str]
    diff: list[int]
    outputs: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    forward_s: float = 0.0  # one plain forward, timed when the outputs were first computed
    graph: tuple[list[Any], list[Any]] | None = None  # (leaves, outputs) of that forward
    item_bytes: int | None = None  # bytes one forward allocates, for chunk sizes

    def call(self, *xs: Any) -> list[Any]:
        out = self.fn(*xs)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    def with_input(self, j: int, value: Any) -> list[Any]:
        xs = list(self.inputs)
        xs[j] = value
        return xs


@dataclass
class Mismatch:
    """One located disagreement between autograd and the numeric evidence."""

    input: int
    input_name: str
    element: tuple[int, ...] | None
    output: int | None
    output_element: tuple[int, ...] | None
    autograd: float | None
    numeric: float | None
    expected: float | None = None
    kind: str = "value"  # value | kink | none-gradient | metadata | nondeterministic | jvp | second-order | expected
    note: str = ""

    @property
    def abs(self) -> float:
        if self.autograd is None or self.numeric is None:
            return math.inf
        return abs(self.autograd - self.numeric)

    @property
    def rel(self) -> float:
        if self.numeric in (None, 0.0) or self.autograd is None:
            return math.inf if self.abs else 0.0
        return self.abs / abs(self.numeric)

    def to_dict(self) -> dict[str, Any]:
        return {"input": self.input, "input_name": self.input_name,
                "element": list(self.element) if self.element is not None else None, "output": self.output,
                "output_element": list(self.output_element) if self.output_element is not None else None,
                "autograd": self.autograd, "numeric": self.numeric, "expected": self.expected,
                "abs": self.abs, "rel": self.rel, "kind": self.kind, "note": self.note}


def _steps(x: Any, base: float | None = None) -> Any:
    """Steps *base* * max(1, |x|) (default cbrt(eps), the central-difference optimum), made exact."""
    import torch

    if base is None:
        base = torch.finfo(x.dtype).eps ** (1 / 3)
    h = base * x.detach().abs().clamp_min(1.0)
    return (x.detach() + h) - x.detach()


# -- evaluation helpers -------------------------------------------------------------------

def _chunk(problem: Problem, j: int) -> int:
    """Batch items per call so that one call's tensors stay under CHUNK_BYTES."""
    if problem.item_bytes is None:
        problem.item_bytes = _bytes_per_call(problem)
    return max(1, min(4096, CHUNK_BYTES // max(problem.item_bytes, 1)))


def _bytes_per_call(problem: Problem) -> int:
    """Bytes of every tensor one forward creates (its intermediates), counted by a dispatch mode."""
    import torch

    fallback = 8 * 4 * (sum(x.numel() for x in problem.inputs) + sum(o.numel() for o in problem.outputs))
    try:
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_leaves

        class Count(TorchDispatchMode):
            total = 0

            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                out = func(*args, **(kwargs or {}))
                self.total += sum(t.numel() * t.element_size() for t in tree_leaves(out) if torch.is_tensor(t))
                return out

        with torch.no_grad(), Count() as counter:
            problem.call(*problem.inputs)
        return max(int(counter.total), fallback // 4)
    except Exception:  # a private API: fall back to the inputs' and outputs' size
        return fallback


def batched_outputs(problem: Problem, j: int, batch: Any, info: dict[str, Any]) -> list[Any]:
    """Outputs for a batch of values of input j: vmap in chunks, a loop if vmap fails."""
    import torch

    size = batch.shape[0] if batch.shape[0] <= SMALL_BATCH else _chunk(problem, j)  # a few items: one call
    if batch.shape[0] <= SMALL_BATCH and batch.shape[0] * problem.forward_s < LOOP_BUDGET_S:
        # a few calls of a cheap function: a loop costs less than vmap's per-operation overhead
        rows = [problem.call(*problem.with_input(j, b)) for b in batch]
        return [torch.stack([r[k] for r in rows]) for k in range(len(problem.outputs))]
    if info.get("evaluation") != "loop":
        try:
            def one(xj: Any) -> tuple[Any, ...]:
                return tuple(problem.call(*problem.with_input(j, xj)))

            parts = [torch.func.vmap(one)(batch[s:s + size]) for s in range(0, batch.shape[0], size)]
            info["evaluation"] = "torch.func.vmap"
            info["largest_chunk"] = max(info.get("largest_chunk", 0), min(size, batch.shape[0]))
            return [parts[0][k] if len(parts) == 1 else torch.cat([p[k] for p in parts])
                    for k in range(len(problem.outputs))]
        except Exception as exc:  # not vmappable (e.g. an autograd.Function without setup_context)
            info["evaluation"] = "loop"
            info["vmap_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    rows = [problem.call(*problem.with_input(j, b)) for b in batch]
    return [torch.stack([r[k] for r in rows]) for k in range(len(problem.outputs))]


def numeric_columns(problem: Problem, j: int, directions: Any, h: Any, info: dict[str, Any]) -> list[Any]:
    """(f(x + h d) - f(x - h d)) / 2h for each direction d (rows of *directions*), per output."""
    import torch

    x = problem.inputs[j].detach()
    d = directions.reshape(directions.shape[0], *x.shape)
    hs = h.reshape(-1, *([1] * x.dim())) if torch.is_tensor(h) and h.dim() > 0 else h
    batch = torch.cat([x + hs * d, x - hs * d])
    outs = batched_outputs(problem, j, batch, info)
    n = directions.shape[0]
    scale = (2 * h).reshape(-1, *([1] * 0)) if torch.is_tensor(h) and h.dim() > 0 else 2 * h
    cols = []
    for o in outs:
        diff = (o[:n] - o[n:]).reshape(n, -1).to(torch.float64)
        cols.append(diff / (scale.reshape(-1, 1) if torch.is_tensor(scale) else scale))
    return cols  # per output: (n directions, M_k)


def central_columns(problem: Problem, j: int, which: Any, h: Any, info: dict[str, Any]) -> list[Any]:
    """Central-difference Jacobian columns *which* (indices into input j, steps h[which]), per
    output as (len(which), M_k); the evaluations are counted in *info*."""
    import torch

    x = problem.inputs[j]
    unit = torch.zeros(len(which), x.numel(), dtype=x.dtype)
    unit[torch.arange(len(which)), which] = 1.0
    info["evaluations"] = info.get("evaluations", 0) + 2 * len(which)
    return numeric_columns(problem, j, unit, h[which], info)


def analytic_rows(problem: Problem, k: int, weights: Any, info: dict[str, Any]) -> list[Any | None]:
    """v^T J for each v in *weights* (rows, shape (B, M_k)), per checked input; None where unused.

    ``torch.func.vjp`` under ``vmap`` (chunked) first, then ``autograd.grad`` with batched
    grad_outputs, then a loop: the record says which ran.
    """
    import torch

    out_shape = problem.outputs[k].shape
    cot = weights.reshape(weights.shape[0], *out_shape).to(problem.outputs[k].dtype)
    small = weights.shape[0] <= SMALL_BATCH  # a few rows: plain backward passes cost less than vmap
    size = weights.shape[0] if small else _chunk(problem, problem.diff[0])
    if not small and "vjp_error" not in info:
        try:
            def f_k(*checked: Any) -> Any:
                xs = list(problem.inputs)
                for i, value in zip(problem.diff, checked):
                    xs[i] = value
                return problem.call(*xs)[k]

            vjp_fn = torch.func.vjp(f_k, *[problem.inputs[i] for i in problem.diff])[1]
            got = torch.func.vmap(vjp_fn, chunk_size=size)(cot)
            info["analytic"] = "torch.func.vjp under vmap"
            # functorch returns zeros, never None, for an input the output does not use: ask autograd which
            used = _used_inputs(problem, k)
            return [g.reshape(weights.shape[0], -1).to(torch.float64) if used[i] else None for i, g in enumerate(got)]
        except Exception as exc:  # e.g. an autograd.Function without setup_context
            info["vjp_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    xs = [x.detach().requires_grad_(i in problem.diff) for i, x in enumerate(problem.inputs)]
    out = problem.call(*xs)[k]
    wrt = [xs[i] for i in problem.diff]
    if not small and "batched_grad_error" not in info:
        try:
            got = torch.autograd.grad(out, wrt, cot, is_grads_batched=True, allow_unused=True, retain_graph=True)
            info["analytic"] = "autograd.grad, batched grad_outputs"
            return [None if g is None else g.reshape(weights.shape[0], -1).to(torch.float64) for g in got]
        except Exception as exc:
            info["batched_grad_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    if not small or "analytic" not in info:
        info["analytic"] = "autograd.grad per row"
    rows: list[list[Any]] = [[] for _ in wrt]
    unused = [False] * len(wrt)
    for b in range(weights.shape[0]):
        got = torch.autograd.grad(out, wrt, cot[b], retain_graph=True, allow_unused=True)
        for i, g in enumerate(got):
            if g is None:
                unused[i] = True
            else:
                rows[i].append(g.reshape(-1).to(torch.float64))
    return [None if unused[i] else torch.stack(rows[i]) for i in range(len(wrt))]


def _used_inputs(problem: Problem, k: int) -> list[bool]:
    """Whether autograd connects output k to each checked input (None gradients stay visible)."""
    import torch

    xs = [x.detach().requires_grad_(i in problem.diff) for i, x in enumerate(problem.inputs)]
    out = problem.call(*xs)[k]
    if not out.requires_grad:
        return [False] * len(problem.diff)
    got = torch.autograd.grad(out, [xs[i] for i in problem.diff], torch.ones_like(out), allow_unused=True)
    return [g is not None for g in got]


# -- full mode ---------------------------------------------------------------------------

@dataclass
class Block:
    """The Jacobian of output k with respect to input j, both sides: dense (M, N) matrices, or
    values at (rows, cols) when a band was verified (every other entry is zero on both sides)."""

    j: int
    k: int
    analytic: Any
    numeric: Any
    rounding: Any  # rounding bound of the numeric side: rounding * per_column (broadcast)
    structure: str
    per_column: Any = 1.0
    bad: Any = None  # entries that disagree, when already computed
    rows: Any = None
    cols: Any = None
    col_offset: int = 0


def full_blocks(problem: Problem, gen: Any, info: dict[str, Any]) -> Iterator[Block]:
    """Every (output, input) block of the Jacobian, both sides, exploiting a diagonal or band.

    Dense blocks come in column chunks, each compared and dropped: memory holds autograd's
    Jacobian (8 M N bytes) plus one chunk of numeric columns.
    """
    import torch

    if len(problem.diff) == 1 and len(problem.outputs) == 1:
        banded = _banded(problem, gen, info)
        if banded is not None:
            yield banded
            return
    analytic: dict[tuple[int, int], Any] = {}
    for k, out in enumerate(problem.outputs):
        m = out.numel()
        if m == 0:  # an empty output has an empty Jacobian: nothing to compare
            analytic.update({(j, k): torch.zeros(0, problem.inputs[j].numel(), dtype=torch.float64)
                             for j in problem.diff})
            continue
        c = 0.5 + torch.rand(m, generator=gen, dtype=torch.float64)  # non-unit: a backward must scale by grad_output
        height = max(1, _chunk(problem, problem.diff[0]))
        for a in range(0, m, height):  # rows in chunks: memory holds the Jacobian plus one chunk
            b = min(m, a + height)
            weights = torch.zeros(b - a, m, dtype=torch.float64)
            weights[torch.arange(b - a), torch.arange(a, b)] = c[a:b]
            rows = analytic_rows(problem, k, weights, info)
            for pos, j in enumerate(problem.diff):
                row = rows[pos]
                if row is None:
                    analytic[j, k] = None
                    continue
                if b - a == m:  # one chunk: the rows are fresh tensors, scaled in place
                    analytic[j, k] = row.contiguous().div_(c.reshape(-1, 1))
                    continue
                if (j, k) not in analytic:
                    analytic[j, k] = torch.empty(m, row.shape[1], dtype=torch.float64)
                if analytic[j, k] is not None:
                    torch.div(row, c[a:b].reshape(-1, 1), out=analytic[j, k][a:b])
        info["backward_rows"] = info.get("backward_rows", 0) + m
    f_scale = [o.detach().abs().reshape(-1, 1).to(torch.float64).clamp_min(1.0) for o in problem.outputs]
    for j in problem.diff:
        x = problem.inputs[j]
        n = x.numel()
        h = _steps(x).reshape(-1)
        eps = torch.finfo(x.dtype).eps
        affine = n > SMALL_BATCH and _affine(problem, j, gen, info)
        step = _steps(x, 1.0).reshape(-1) if affine else h
        width = max(1, _chunk(problem, j) // (1 if affine else 2))
        rounding = [8 * eps * fs for fs in f_scale]  # times 1 / step per column
        for a in range(0, n, width):
            b = min(n, a + width)
            anas = [None if analytic[j, k] is None else analytic[j, k][:, a:b] for k in range(len(f_scale))]
            bads: list[Any] = [None] * len(f_scale)
            if affine:
                try:
                    cols = forward_columns(problem, j, a, b, step[a:b], info)
                except OutOfDomain:  # a step of max(1, |x|) left the function's domain: central from here on
                    affine = False
                    info["numeric"] += (f"; '{problem.names[j]}' from column {a} on: central differences "
                                        "(a step left the function's domain)")
            if affine:
                per_column = 1.0 / step[a:b].reshape(1, -1)
                bads = _recheck_centrally(problem, j, a, cols, anas, rounding, per_column, h, info)
            else:
                cols = [col.T for col in central_columns(problem, j, torch.arange(a, b), h, info)]
                per_column = 1.0 / h[a:b].reshape(1, -1)
            for k, col in enumerate(cols):
                yield Block(j, k, anas[k], col, rounding[k], "dense", per_column=per_column, bad=bads[k],
                            col_offset=a)


def _affine(problem: Problem, j: int, gen: Any, info: dict[str, Any]) -> bool:
    """Whether every output is affine in input j across steps of max(1, |x|): along two random
    directions u, f(x + u) - f(x) must equal 2 (f(x + u/2) - f(x)) to rounding.

    A curved (or kinked) function fails this almost surely; one whose curvature hides below
    rounding has one-sided differences accurate to rounding too. Columns that disagree with
    autograd are recomputed by central differences anyway, so a wrong guess cannot fail a check.
    """
    import torch

    x = problem.inputs[j]
    size = x.detach().abs().clamp_min(1.0)
    us = [(2 * torch.rand(x.shape, generator=gen, dtype=torch.float64) - 1).to(x.dtype) * size for _ in range(2)]
    info["evaluations"] = info.get("evaluations", 0) + 4
    try:
        outs = _far_outputs(problem, j, torch.stack([x + us[0], x + us[0] / 2, x + us[1], x + us[1] / 2]), info)
    except OutOfDomain:  # e.g. a domain check: such a function gets central differences with small steps
        return False
    eps = torch.finfo(x.dtype).eps
    for o, f0 in zip(outs, problem.outputs):
        if o.numel() == 0:
            continue
        o = o.reshape(4, -1).to(torch.float64)
        f0 = f0.reshape(-1).to(torch.float64)
        for far, half in ((o[0], o[1]), (o[2], o[3])):
            bend = (far - 2 * half + f0).abs()
            if not bool((bend <= 64 * eps * (far.abs().max() + 2 * half.abs().max() + f0.abs().max())).all()):
                return False
    name = problem.names[j]
    info["numeric"] = (f"affine in '{name}' (verified along two random directions): one-sided differences with "
                       "steps max(1, |x|), exact to rounding; disagreeing columns rechecked by central differences"
                       if "numeric" not in info else info["numeric"] + f"; also affine in '{name}'")
    return True


def forward_columns(problem: Problem, j: int, a: int, b: int, step: Any, info: dict[str, Any]) -> list[Any]:
    """(f(x + s_c e_c) - f(x)) / s_c for columns a..b-1, per output: (M_k, b - a) matrices."""
    import torch

    x = problem.inputs[j].detach()
    batch = x.reshape(1, -1).repeat(b - a, 1)
    rows = torch.arange(b - a)
    batch[rows, rows + a] += step
    outs = _far_outputs(problem, j, batch.reshape(b - a, *x.shape), info)
    info["evaluations"] = info.get("evaluations", 0) + (b - a)
    inverse = 1.0 / step.reshape(-1, 1).to(torch.float64)
    # contiguous: an output that ignores input j comes back from vmap expanded, not writable in place
    return [o.reshape(b - a, -1).to(torch.float64).contiguous().sub_(f0.reshape(1, -1)).mul_(inverse).T
            for o, f0 in zip(outs, problem.outputs)]


class OutOfDomain(Exception):
    """The function raised at a point one large step away: use small central steps instead."""


def _far_outputs(problem: Problem, j: int, batch: Any, info: dict[str, Any]) -> list[Any]:
    """batched_outputs at points far from x; a function that refuses them raises OutOfDomain and
    leaves *info* (how the rest is evaluated, e.g. vmap or loop) as it was."""
    import torch

    scratch = dict(info)
    try:
        with torch.no_grad():
            outs = batched_outputs(problem, j, batch, scratch)
    except Exception as exc:
        raise OutOfDomain(f"{type(exc).__name__}: {exc}") from exc
    info.update(scratch)
    return outs


def _recheck_centrally(problem: Problem, j: int, a: int, cols: list[Any], analytic: list[Any],
                       rounding: list[Any], per_column: Any, h: Any, info: dict[str, Any]) -> list[Any]:
    """Replace, in place, the one-sided columns that disagree with autograd by central differences
    (and their per-column rounding factor); returns the disagreeing entries per output."""
    import torch

    bads: list[Any] = [None if ana is None else _disagree(ana, col, rnd, per_column)
                       for col, ana, rnd in zip(cols, analytic, rounding)]
    suspect = [bad.any(0) for bad in bads if bad is not None]
    if not suspect or not bool(torch.stack(suspect).any()):
        return bads
    which = torch.stack(suspect).any(0).nonzero().flatten()
    central = central_columns(problem, j, which + a, h, info)
    info["rechecked_columns"] = info.get("rechecked_columns", 0) + len(which)
    per_column[:, which] = 1.0 / h[which + a].reshape(1, -1)
    for k, cen in enumerate(central):
        cols[k][:, which] = cen.T
        if bads[k] is not None:
            bads[k][:, which] = _disagree(analytic[k][:, which], cols[k][:, which], rounding[k], per_column[:, which])
    return bads


def _disagree(analytic: Any, numeric: Any, rounding: Any, per_column: Any = 1.0) -> Any:
    """Entries where autograd and the numeric evidence differ by more than the comparison allows,
    SAFETY * rounding * per_column + TOL_REL * max(1, |numeric|); NaN on either side disagrees.

    Every allowance is at least TOL_REL, so only differences above it are looked at closely.
    """
    import torch

    diff = (analytic - numeric).abs_()
    if diff.numel() == 0 or float(diff.max()) <= TOL_REL:  # a NaN maximum is not <=: it goes on
        return torch.zeros(diff.shape, dtype=torch.bool)
    bad = ~(diff <= TOL_REL)
    where = bad.nonzero(as_tuple=True)
    rnd = torch.as_tensor(rounding, dtype=diff.dtype).expand_as(diff)[where]
    cols = torch.as_tensor(per_column, dtype=diff.dtype).expand_as(diff)[where]
    allowed = SAFETY * rnd * cols + TOL_REL * numeric[where].abs().clamp_min(1.0)
    bad[where] = ~(diff[where] <= allowed)
    return bad


def _banded(problem: Problem, gen: Any, info: dict[str, Any]) -> Block | None:
    """Try a diagonal, then bands of half-width 1, 2, 4, 8: column groups j = c mod (2b+1).

    Each hypothesis is tested twice with independent random weights on both sides; it is
    accepted only when both draws agree on both sides. Cost: 4(2b+1) evaluations and
    2(2b+1) backward rows per hypothesis, instead of 2N and N.
    """
    import torch

    j, k = problem.diff[0], 0
    x, out = problem.inputs[j], problem.outputs[0]
    n, m = x.numel(), out.numel()
    if n != m or n < 16:
        return None
    h = _steps(x).reshape(-1)
    eps = torch.finfo(x.dtype).eps
    f_scale = out.detach().abs().reshape(-1).to(torch.float64).clamp_min(1.0)
    idx = torch.arange(n)
    reach = _reach(problem, j, h, f_scale, info)
    for b in (0, 1, 2, 4, 8):
        if b < reach:
            continue  # the probe column reaches farther than this band
        width = 2 * b + 1
        if width * 8 > n or reach > 8:
            break
        cc = idx.repeat(width) + torch.arange(-b, b + 1).repeat_interleave(n)  # entry (r, r + off), by offset
        rr = idx.repeat(width)
        keep = (cc >= 0) & (cc < n)
        rr, cc = rr[keep], cc[keep]
        draws = []
        for _ in range(2):
            w_num = 0.5 + torch.rand(n, generator=gen, dtype=torch.float64)
            w_ana = 0.5 + torch.rand(n, generator=gen, dtype=torch.float64)
            groups = torch.zeros(2, width, n, dtype=torch.float64)  # column c in group c mod width
            groups[0, idx % width, idx] = w_num
            groups[1, idx % width, idx] = w_ana
            comp = numeric_columns(problem, j, groups[0].to(x.dtype), 1.0 * h.min(), info)[0]  # (width, M)
            rows = analytic_rows(problem, k, groups[1], info)[0]
            info["evaluations"] = info.get("evaluations", 0) + 2 * width
            info["backward_rows"] = info.get("backward_rows", 0) + width
            draws.append((comp[cc % width, rr] / w_num[cc],  # row r of the group holding column c
                          None if rows is None else rows[rr % width, cc] / w_ana[rr]))
        (n1, a1), (n2, a2) = draws
        noise = 64 * eps * f_scale[rr] / float(h.min()) + TOL_REL * n1.abs()
        if not bool(((n1 - n2).abs() <= noise).all()):
            continue  # the true Jacobian is not in this band
        if a1 is None or a2 is None or not bool(((a1 - a2).abs() <= 1e-12 * (1 + a1.abs())).all()):
            return None  # autograd's Jacobian leaves the band: locate it with the dense check
        name = "diagonal" if b == 0 else f"banded (half-width {b})"
        info["structure"] = f"{name}: {width} column group(s), verified with two random draws"
        return Block(j, k, a1, n1, 8 * eps * f_scale[rr] / float(h.min()), name, rows=rr, cols=cc)
    return None


def _reach(problem: Problem, j: int, h: Any, f_scale: Any, info: dict[str, Any]) -> int:
    """How far from the diagonal a probe column (the middle one) has non-zeros beyond rounding:
    no narrower band can hold the Jacobian, so a dense one skips the band hypotheses."""
    import torch

    x = problem.inputs[j]
    probe = x.numel() // 2
    col = central_columns(problem, j, torch.tensor([probe]), h, info)[0][0]  # (M,)
    significant = (col.abs() > 64 * torch.finfo(x.dtype).eps * f_scale / h[probe]).nonzero().flatten()
    return int((significant - probe).abs().max()) if significant.numel() else 0


def compare_blocks(problem: Problem, blocks: Iterable[Block]) -> tuple[list[Mismatch], int]:
    """Located mismatches of every block (None gradients included), and the number of entries."""
    mismatches: list[Mismatch] = []
    total = 0
    for blk in blocks:
        out_shape = tuple(problem.outputs[blk.k].shape)
        in_shape = tuple(problem.inputs[blk.j].shape)
        full_size = problem.outputs[blk.k].numel() * problem.inputs[blk.j].numel()
        total += blk.numeric.numel() if blk.rows is None else full_size
        name = problem.names[blk.j]
        if blk.analytic is None:
            nz = blk.numeric.abs() > blk.rounding * blk.per_column + TOL_REL
            if bool(nz.any()):
                r, c = (int(v) for v in nz.nonzero()[0])
                mismatches.append(Mismatch(blk.j, name, _unravel(c + blk.col_offset, in_shape), blk.k,
                                           _unravel(r, out_shape), None, float(blk.numeric[r, c]), kind="none-gradient",
                                           note=f"'{name}' requires grad but autograd gives None, while the "
                                                f"numeric gradient is non-zero at {int(nz.sum())} entries"))
            continue
        bad = blk.bad if blk.bad is not None else _disagree(blk.analytic, blk.numeric, blk.rounding, blk.per_column)
        if blk.rows is None:
            where = [(r, c + blk.col_offset) for r, c in bad.nonzero().tolist()]
            values = [(float(blk.analytic[r, c - blk.col_offset]), float(blk.numeric[r, c - blk.col_offset]))
                      for r, c in where]
        else:
            pos = bad.nonzero().flatten().tolist()
            where = [(int(blk.rows[p]), int(blk.cols[p])) for p in pos]
            values = [(float(blk.analytic[p]), float(blk.numeric[p])) for p in pos]
        for (r, c), (a, nv) in zip(where, values):
            mismatches.append(Mismatch(blk.j, name, _unravel(c, in_shape), blk.k, _unravel(r, out_shape), a, nv))
    return mismatches, total


def classify_kinks(problem: Problem, mismatches: list[Mismatch], limit: int = 20) -> None:
    """Mark mismatches where one-sided slopes disagree as kinks (numeric evidence meaningless there)."""
    for mm in mismatches[:limit]:
        if mm.kind != "value" or mm.element is None or mm.output is None or mm.output_element is None:
            continue
        x = problem.inputs[mm.input]
        k = mm.output
        flat_out = _flat_index(mm.output_element, tuple(problem.outputs[k].shape))

        def component(t: Any, mm: Mismatch = mm, k: int = k, flat_out: int = flat_out) -> Any:
            return problem.call(*problem.with_input(mm.input, t))[k].reshape(-1)[flat_out]

        left, right = one_sided(component, x, _flat_index(mm.element, tuple(x.shape)))
        if is_kink(left, right):
            mm.kind = "kink"
            mm.note = f"left slope {left:.6g}, right slope {right:.6g}, autograd chose {mm.autograd:.6g}"


def _flat_index(index: tuple[int, ...], shape: tuple[int, ...]) -> int:
    flat = 0
    for i, size in zip(index, shape):
        flat = flat * size + i
    return flat
