"""The evaluation substrate both check modes (and the ledger's numeric channel) stand on.

A :class:`Problem` is a function, its inputs in evidence precision (float64 unless the function
refuses it), which inputs are checked and the outputs at the point. On top of it:

- :func:`batched_outputs`: outputs for a batch of values of one input. A batch of at most
  ``SMALL_BATCH`` items runs as a loop of plain calls on independent tensors; a larger one runs
  under ``torch.func.vmap`` in chunks, confirmed against plain calls on two rows before it is
  trusted, and falls back to the loop (saying why) when vmap fails or disagrees. The choice
  depends on size and capability only, never on a clock. vmap runs on torch's batching rules only
  (:func:`batching_rules_only`): an op without one is looped over by our own loop, not by vmap's
  fallback, which prints a performance warning to the user's terminal for each call.
- numeric columns: central differences along directions, one-sided far steps, one-sided small
  steps (slopes, for kinks), and Ridders' extrapolation per element with its error bound;
- :func:`analytic_rows`: vᵀJ for batches of output weights (autograd).

Exceptions raised by the user's function or backward come out as :class:`EvaluationError`.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import functools
import math
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import EvaluationError, OutputsChanged
from .guard import expired, fixed_rng
from .numeric import RIDDERS_BASE, RIDDERS_COLUMNS, ridders_tensor
from .tolerances import KINK_REL, ROUNDING_ULPS, SAFETY, SLOPE_CAP, SLOPE_FINER, STRUCTURE_ULPS

if TYPE_CHECKING:
    import torch

SMALL_BATCH = 32  # at most this many items: a loop of plain calls (no vmap overhead, independent tensors; vmap's
# first batch in a check, with its confirmation against plain calls, costs about a millisecond)
ANALYTIC_LOOP = 64  # at most this many vᵀJ rows: plain backward passes (torch.func's first use costs ~2 s)
CHUNK_BYTES = 16 * 2**20  # per batched call: under glibc's mmap threshold (BENCH_ANCHORS); 16 MB measured
# faster than 32 MB for the MLP at N = 3000 (300 against 510 ms) and no slower for A @ x
Info = dict[str, Any]
TINY = 64  # tensors of at most this many elements are read as Python floats where that saves tensor operations
#: the lean paths for small problems (Python floats, fewer tensor operations) give the same evidence, records and
#: verdicts as the general tensor path, IEEE operation for operation; False runs the general path everywhere (the
#: tests compare the two, tests/test_lean.py)
LEAN = True
#: float64's eps^(1/3) and eps^(1/2), as steps() computes them (torch.finfo(torch.float64).eps ** p)
EPS_POWERS = {"cbrt": 2.220446049250313e-16 ** (1 / 3), "sqrt": 2.220446049250313e-16 ** 0.5}


@dataclass
class Problem:
    """The function, its inputs in evidence precision, and which of them are checked."""

    fn: Callable[..., Any]
    inputs: list[torch.Tensor]
    names: list[str]
    diff: list[int]
    outputs: list[torch.Tensor] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    item_bytes: int | None = None  # bytes one forward allocates, for chunk sizes
    vmap: dict[int, bool] = field(default_factory=dict)  # per input: vmap works and agrees (decided once)
    used: dict[int, list[bool]] = field(default_factory=dict)  # per output: which checked inputs autograd reaches
    # per checked output, the checked inputs its first forward's graph reaches (graph_reach; several outputs only,
    # else None): an output whose graph never meets an input gives it no gradient by construction, not by a backward
    reached: list[set[int]] | None = None
    _noise: list[torch.Tensor] | None = None
    _stairs: dict[int, list[torch.Tensor]] = field(default_factory=dict)
    _column_stairs: dict[tuple[int, int], list[torch.Tensor]] = field(default_factory=dict)
    # calls made for the evidence outside a stage's own count: the outputs' rounding measured (measure_noise) and the
    # plain calls that confirm a vmap batch (_confirm); added to info["evaluations"] once, at the end of a check
    side_evaluations: int = 0
    _f_scale: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    _f_size: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    _x_size: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    _held: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = field(default_factory=dict)
    random: bool | None = None  # draws random numbers (found on the first call): evaluated from one fixed state
    rng_seed: int = 0
    rng_devices: tuple[int, ...] = ()  # CUDA devices whose generators are fixed too
    keep: list[int] | None = None  # the (flattened) outputs that are checked; None: all of them
    returned: int | None = None  # how many (flattened) outputs the first call returned: every call must return as many
    shapes: tuple[Any, ...] | None = None  # the checked outputs' shapes at the first call: every call must give them
    point: tuple[list[Any], list[torch.Tensor]] | None = None  # leaves and outputs of the first forward (its graph)
    needs_grad: bool = False  # differentiates inside (fails with gradients off): evaluated with them on
    meta: Any = None  # the records' description of the inputs (made once by the caller)
    # per input, the shape and dtype the caller gave (None: as in inputs), for the records: the evidence copies are
    # float64, a complex one its real view (a float32 input was recorded as float64, a complex (2,) as (2, 2))
    given: list[tuple[tuple[int, ...], str] | None] | None = None
    # per output, the flat elements that are not finite at the point (None: every one is), when some but not all
    # are: every evaluation reads 0 there (call), as do the outputs at the point, and no mode judges their rows
    dead: list[torch.Tensor | None] | None = None
    at_point: list[torch.Tensor] | None = None  # with dead: the outputs at the point as the function gave them
    # per input, the device the function runs it on where that is not the CPU (None: every input on the CPU). The
    # inputs above and all evidence stay on the CPU; each call moves its inputs there and its outputs back, both
    # differentiably, so the function and its backward run where the caller put them and the copies are exact
    devices: list[Any] | None = None
    moved: list[Any] | None = None  # with watch_moved: the device copies the last call made
    # torch's holder of the default device (torch.set_default_device), and the caller's setting in it: a function
    # that changes it (model-building code on the meta device) made the check's own tensors there, and it crashed
    # with a bare traceback (a fresh-eyes audit); each call puts the caller's back (_default_device_back)
    device_holder: Any = None
    device_context: Any = None
    watch_moved: bool = False  # keep them (the first call's are checked unchanged, as the inputs are)
    # per checked output, the lower precision the function computes it in (a float64 value cast to float32 inside:
    # computed_in), to which every call rounds it (None: as it is): the evidence then has that precision, as for a
    # float32 output; None where no output is
    inner: list[Any] | None = None

    def call(self, *xs: torch.Tensor) -> list[torch.Tensor]:
        """The function's outputs as a list; its exceptions become EvaluationError('function').

        Every call starts from the same random state (torch's generators seeded with ``rng_seed``,
        the caller's state restored after), until the first call shows the function draws nothing.
        For a function that differentiates inside (``needs_grad``), an evaluation runs with gradients
        on and its checked inputs as fresh leaves, as gradcheck evaluates, and gives detached outputs."""
        expired()
        if self.needs_grad:
            import torch

            fresh = [x.detach().requires_grad_(True) if i in self.diff and torch.is_tensor(x) and not x.requires_grad
                     and x.is_floating_point() else x for i, x in enumerate(xs)]
            if any(a is not b for a, b in zip(fresh, xs)):  # an evaluation, not a forward whose graph is wanted
                with GradMode(True):
                    outs = self._call(*fresh)
                return [o.detach() if torch.is_tensor(o) else o for o in outs]
        return self._call(*xs)

    def _where(self, xs: Sequence[Any]) -> str:
        """Who raised, for an exception of the function: at a point the check stepped to (after the first calls, an
        input moved), how far each checked input was moved, the largest element's step (an exception at a finite
        difference's step outside the function's domain said only "the function raised", a fresh-eyes audit)."""
        import torch

        if self.shapes is None:  # (the first call: at the point itself)
            return "the function"
        moved = []
        try:  # (under vmap the inputs are batched, and reading a number out of them raises: nothing said then)
            for i in self.diff:
                x, at = xs[i], self.inputs[i]
                if torch.is_tensor(x) and torch.is_tensor(at) and x.shape == at.shape and x.is_floating_point():
                    now, was = x.detach().cpu().to(torch.float64), at.to(torch.float64)
                    # (an element held where it is, NaN or infinite, has not moved: NaN - NaN is not a step)
                    gap = torch.where((now == was) | (now.isnan() & was.isnan()), 0.0, (now - was).abs())
                    step = float(gap.nan_to_num(nan=math.inf).max()) if gap.numel() else 0.0
                    if step > 0:
                        moved.append(f"'{self.names[i]}' by up to {step:.3g}")
        except Exception:
            return "the function"
        if not moved:
            return "the function"
        return (f"the function, at a point the check stepped to ({', '.join(moved)}: a finite difference's step; "
                "where that leaves the function's domain, returning NaN there instead of raising lets the steps "
                "shrink),")

    def _default_device_back(self) -> None:
        """Put back the default device the caller had at the check's start, which the function changed."""
        import torch

        torch.set_default_device(None if self.device_context is None else self.device_context.device)
        self.device_context = getattr(self.device_holder, "device_context", None)  # (a new one for the same device)

    def _call(self, *xs: torch.Tensor) -> list[torch.Tensor]:
        if self.devices is not None:
            xs = tuple(x if d is None else x.to(d) for x, d in zip(xs, self.devices))
            if self.watch_moved:
                self.moved = list(xs)
        try:
            if self.random is False:
                out = self.fn(*xs)
            elif not self.rng_devices:  # fixed_rng for the CPU generator, inlined: this runs once per evaluation
                import torch

                gen = torch.random.default_generator
                saved = gen.get_state()
                try:
                    gen.manual_seed(self.rng_seed)
                    out = self.fn(*xs)
                    if self.random is None:  # the first call: does the function draw random numbers?
                        self.random = not gen.get_state().equal(_seeded_state(self.rng_seed))
                finally:
                    gen.set_state(saved)
            else:
                with fixed_rng(self.rng_seed, self.rng_devices):
                    before = None if self.random else _rng_states(self.rng_devices)
                    out = self.fn(*xs)
                    if before is not None:  # the first call: does the function draw random numbers?
                        self.random = not all(a.equal(b) for a, b in zip(before, _rng_states(self.rng_devices)))
        except EvaluationError:
            raise
        except Exception as exc:
            raise EvaluationError(self._where(xs), exc) from exc
        finally:
            if self.device_holder is not None and getattr(self.device_holder, "device_context",
                                                          None) is not self.device_context:
                self._default_device_back()
        import torch

        if self.keep == [0] and self.returned == 1 and torch.is_tensor(out) and not out.is_complex():
            outs = [out] if self.devices is None else [_to_cpu(out)]  # one real tensor: as it is
        else:
            flat = _flat_outputs(out)
            if self.returned is not None and len(flat) != self.returned:
                raise EvaluationError("the function", OutputsChanged(
                    f"the function returned {self.returned} output(s) at its first call and {len(flat)} at another "
                    "point (flattened). A gradient check compares outputs at nearby points, so their number and "
                    "shapes must not depend on the input values (a data-dependent branch, nonzero() or a boolean "
                    "mask); return the same structure everywhere, e.g. pad or mask instead of dropping"))
            outs = self.select(flat)
            outs = outs if self.devices is None else [_to_cpu(o) for o in outs]
        if self.inner is not None:
            outs = narrowed(outs, self.inner)
        shapes = self.shapes
        if shapes is not None and (getattr(outs[0], "shape", None) != shapes[0] if len(outs) == 1
                                   else tuple(getattr(o, "shape", None) for o in outs) != shapes):
            k = next(k for k, (o, e) in enumerate(zip(outs, shapes)) if getattr(o, "shape", None) != e)
            now = getattr(outs[k], "shape", None)
            raise EvaluationError("the function", OutputsChanged(
                f"the function's output {k} has shape {tuple(shapes[k])} at its first call and "
                f"{type(outs[k]).__name__ if now is None else tuple(now)} at another point. A gradient check compares "
                "outputs at nearby points, so "
                "their shapes must not depend on the input values (a data-dependent slice, nonzero() or a boolean "
                "mask); return the same shape everywhere, e.g. pad or mask instead of dropping elements"))
        if self.dead is not None:  # output elements not finite at the point: 0 in every evaluation (an output
            # whose size changed is left as it is, for the check that says so)
            outs = [o if d is None or not torch.is_tensor(o) or o.numel() != d.numel()
                    else o.masked_fill(d.reshape(o.shape), 0.0) for o, d in zip(outs, self.dead)]
        return outs

    def device_of(self, j: int) -> str:
        """The device of input j as the caller gave it (the evidence itself is on the CPU)."""
        if self.devices is not None and self.devices[j] is not None:
            return str(self.devices[j])
        x = self.inputs[j]
        return str(x.device) if hasattr(x, "device") else ""

    def select(self, outs: list[Any]) -> list[Any]:
        """The checked outputs among all of them, a complex one as its real view (real, imaginary)."""
        if self.keep is None:
            return outs
        return [_real(outs[k]) for k in self.keep]

    def leaves(self) -> list[Any]:
        """The inputs for a forward with a graph: the checked ones as fresh leaves that require grad, the
        other tensors detached, everything else as it is."""
        import torch

        return [x.detach().requires_grad_(i in self.diff) if torch.is_tensor(x) else x
                for i, x in enumerate(self.inputs)]

    def forward_with_graph(self) -> tuple[list[Any], list[torch.Tensor]]:
        """Leaves at the inputs and the outputs of a fresh forward there, with its graph. Every batch of
        backward passes gets its own forward right before it, as in a training step: a backward may read
        state its forward left outside autograd (a hook's stored activations), which evaluations at other
        points overwrite."""
        xs = self.leaves()
        with GradMode(True):
            return xs, self.call(*xs)

    def with_input(self, j: int, value: torch.Tensor) -> list[torch.Tensor]:
        xs = list(self.inputs)
        xs[j] = value
        return xs

    def f_scale(self, k: int) -> torch.Tensor:
        """|f| of output k, flat, in float64 (computed once per output tensor; callers do not write to it)."""
        import torch

        out = self.outputs[k]
        cached = self._f_scale.get(k)
        if cached is None or cached[0] is not out:
            cached = self._f_scale[k] = (out, out.detach().abs().reshape(-1).to(torch.float64))
        return cached[1]

    def f_size(self, k: int) -> torch.Tensor:
        """max(1, |f|) of output k, flat, float64: the size that intermediates of order one round at."""
        out = self.outputs[k]
        cached = self._f_size.get(k)
        if cached is None or cached[0] is not out:
            cached = self._f_size[k] = (out, self.f_scale(k).clamp_min(1.0))
        return cached[1]

    def held(self, j: int) -> torch.Tensor | None:
        """:func:`held` of input j (computed once per input tensor; callers do not write to it)."""
        x = self.inputs[j]
        cached = self._held.get(j)
        if cached is None or cached[0] is not x:
            cached = self._held[j] = (x, held(x))
        return cached[1]

    def x_size(self, j: int) -> torch.Tensor:
        """max(1, |x|) of input j, flat, float64 (NaN where x is NaN): the size an entry's column is
        measured against (computed once per input tensor; callers do not write to it)."""
        import torch

        x = self.inputs[j]
        cached = self._x_size.get(j)
        if cached is None or cached[0] is not x:
            size = x.detach().abs().reshape(-1)
            size = size.to(torch.float64) if size.dtype != torch.float64 else size
            cached = self._x_size[j] = (x, size.clamp_min_(1.0))
        return cached[1]

    def noise(self, k: int) -> torch.Tensor:
        """The rounding of one evaluation of output k, per element (flat, float64): measured once, see
        :func:`measure_noise`."""
        if self._noise is None:
            self._noise = measure_noise(self)
        return self._noise[k]

    def stairs(self, j: int, k: int) -> torch.Tensor:
        """The rounding of output k per element (STAIR_PAIRS, M_k), float64, at moves from about 1e-9 to 1e-6 of every
        element of input j at once: measured once per input, where a failure asks (see :func:`measure_stairs`)."""
        if j not in self._stairs:
            self._stairs[j] = measure_stairs(self, j)
        return self._stairs[j][k]

    def column_stairs(self, j: int, k: int, cols: torch.Tensor, info: Info) -> torch.Tensor:
        """The same along each column *cols* of input j alone: (STAIR_PAIRS, len(cols), M_k), each column measured once
        per check (see :func:`measure_stairs`)."""
        import torch

        wanted = [c for c in dict.fromkeys(cols.tolist()) if (j, c) not in self._column_stairs]
        if wanted:
            got = measure_stairs(self, j, torch.tensor(wanted), info)
            for i, c in enumerate(wanted):
                self._column_stairs[j, c] = [g[:, i] for g in got]
        return torch.stack([self._column_stairs[j, c][k] for c in cols.tolist()], dim=1)


def narrowed(outs: list[Any], dtypes: Sequence[Any]) -> list[Any]:
    """Each floating tensor among *outs* rounded (differentiably) to its entry of *dtypes* where that is coarser
    (None: left as it is)."""
    import torch

    return [o.to(d) if d is not None and torch.is_tensor(o) and o.is_floating_point()
            and torch.finfo(o.dtype).eps < torch.finfo(d).eps else o for o, d in zip(outs, dtypes)]


#: the float32 range within which an output may be rounded to it: well inside its normal numbers, so that the
#: rounding neither overflows nor underflows (1e40 x + tanh(x.float()) would read inf, 1e-45 x ... a subnormal)
NARROW_RANGE = (1e-30, 1e30)


#: the relative move of every checked input element at which an output on float32's grid is confirmed (:func:`on_grid`):
#: not a power of two, so a float64 computation's outputs there leave float32's grid
GRID_PROBE = 1.3e-5
_FLOAT32 = struct.Struct("f")
EPS32 = 1.1920928955078125e-07  # float32's eps
ROUND_ZEROS = 16  # a float32 with at least this many trailing zeros in its 24-bit mantissa says nothing (1.0, 0.75, 3)
FULL_ZEROS = 2  # at most this many: float32's full precision (7 in 8 of its values; half of them must be)
SMALL_GRID = 64  # values asked about in Python floats up to this many


def on_grid(values: Any) -> Any:
    """torch.float32 where every element of the float64 CPU tensor *values* is finite and exactly a float32, and
    they use float32's precision: a float64 computation's value is almost never a float32, and float32's own carry
    24 significant bits, the last few zero by chance (at most FULL_ZEROS trailing zeros for 7 in 8 of them: half of
    those with more than 8 significant bits must). Values that are multiples of one coarse quantum are not taken
    for float32's: small integers (floor), or a small term absorbed into a large one ((1 + 1e-12 sin x) - 1 moves
    in stairs of 2^-52, every value a few thousand of them, 13 bits), whose rounding is that quantum, not float32's
    relative one (taken for float32's, a right backward FAILED on that finer model). None otherwise. A screen on the
    first element first."""
    import torch

    if (type(values) is not torch.Tensor or values.dtype != torch.float64 or values.layout != torch.strided
            or not values.is_cpu or not values.numel()):
        return None
    first = ctypes.c_double.from_address(values.data_ptr()).value  # element [0, ...] (a sign bit is no matter)
    try:
        if _FLOAT32.unpack(_FLOAT32.pack(first))[0] != first:  # (NaN: never equal; inf: the check below)
            return None
    except OverflowError:  # beyond float32's range
        return None
    flat = values.detach().reshape(-1)
    pack, unpack = _FLOAT32.pack, _FLOAT32.unpack
    if flat.numel() <= SMALL_GRID:  # in Python floats (the tensor path's small-tensor operations cost more)
        lowest = []
        try:
            for v in flat.tolist():
                if unpack(pack(v))[0] != v or not math.isfinite(v):  # (NaN: never equal)
                    return None
                if v:
                    bits = int(abs(math.frexp(v)[0]) * 2.0 ** 24)  # a 24-bit integer: exact
                    lowest.append(bits & -bits)
        except OverflowError:  # beyond float32's range
            return None
        telling = [b for b in lowest if b < 2 ** ROUND_ZEROS]
        if not telling or 2 * sum(b <= 2 ** FULL_ZEROS for b in telling) < len(telling):
            return None
        return torch.float32
    try:  # the first 8 next (an output that starts with 0, relu's or a mask's, passes the first screen)
        if any(unpack(pack(v))[0] != v for v in flat[:8].tolist()):
            return None
    except OverflowError:
        return None
    if not bool(torch.isfinite(flat).all()) or not torch.equal(flat.to(torch.float32).to(torch.float64), flat):
        return None
    mantissa = (torch.frexp(flat).mantissa.abs() * 2.0 ** 24).to(torch.int64)  # 24-bit integers (0 for 0): exact
    lowest_t = mantissa & -mantissa  # the lowest set bit, 2^(trailing zeros); 0 for 0
    telling_t = lowest_t[(lowest_t > 0) & (lowest_t < 2 ** ROUND_ZEROS)]  # values with more than 8 significant bits
    if not telling_t.numel() or 2 * int((telling_t <= 2 ** FULL_ZEROS).sum()) < telling_t.numel():
        return None
    return torch.float32


def computed_in(outs: Sequence[Any], leaves: Sequence[Any], eps: float) -> list[tuple[Any, str] | None]:
    """Per output (a first call's, with its graph): the least precise floating dtype coarser than *eps* that the
    autograd graph computes in on its way from the checked *leaves* to that output, with the name of a node that
    does, or None. A float64 function that casts part of its work to float32 (``h.float()``, a float32 model run as
    model.double() with its RMSNorm in float32) is a staircase at float32's steps, whatever dtype it returns. Only
    nodes on a path from a checked input count: a float32 parameter that requires grad, a branch that does not
    depend on the inputs, or a node's non-differentiable output (its placeholder: :func:`produced` below) does not
    make the function float32. All None where the graph cannot be read."""
    import torch

    roots = [o.grad_fn for o in outs if torch.is_tensor(o) and o.grad_fn is not None]
    try:
        if not _coarser_anywhere(roots, eps):  # (the common case, in one pass: nothing on the graph is coarser)
            return [None] * len(outs)
    except (AttributeError, TypeError, RuntimeError):
        return [None] * len(outs)
    checked = {id(t) for t in leaves}
    # per node: reaches a checked leaf; the worst eps among the tensors on its paths to one, and its node
    memo: dict[int, tuple[bool, float, Any]] = {}

    default = torch.get_default_dtype()

    def produced(node: Any, k: int) -> tuple[float, Any]:
        """The least precise floating dtype among what *node*'s forward produced (its eps, 0.0 if none, and where): its
        output *k*, the one the path takes, and every other output autograd has real metadata for. A
        non-differentiable output (indices marked so in an autograd.Function, a custom op's integer or Python
        outputs) has a placeholder there, a 0-dim tensor of the default dtype, which, counted, made a float64
        sort read as computed in float32 (inconclusive where gradcheck passes: custom_op_db's
        NumpySortCustomOp). A real output off the path still counts: a Function whose forward works in float32
        and returns that intermediate beside a float64 result built from it looks, on the graph, like one
        returning an unused x.float() beside float64 work, and only the first is judged on float64 evidence
        wrongly (its right backward FAILED)."""
        worst, where = 0.0, None
        for i, meta in enumerate(node._input_metadata):
            if i != k and meta.dtype == default and not len(meta.shape):  # a placeholder, off the path
                continue
            dtype = _real_dtype(torch, meta.dtype)
            if dtype.is_floating_point and torch.finfo(dtype).eps > worst:
                worst, where = torch.finfo(dtype).eps, (dtype, node.name())
        return worst, where

    def visit(root: Any) -> tuple[bool, float, Any]:
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if id(node) in memo:
                continue
            edges = [(n, k) for n, k in node.next_functions if n is not None]
            if not expanded:
                stack.append((node, True))
                stack.extend((c, False) for c, _ in edges if id(c) not in memo)
                continue
            if hasattr(node, "variable"):  # AccumulateGrad: a leaf, checked or not; its dtype is the leaf's own
                memo[id(node)] = (id(node.variable) in checked, 0.0, None)
                continue
            reaches, worst, where = False, 0.0, None
            for child, k in edges:
                r, w, at = memo[id(child)]
                if not r:
                    continue
                reaches = True
                if not hasattr(child, "variable"):  # the child's output this node takes: on the path
                    own, by = produced(child, k)
                    if own > w:
                        w, at = own, by
                if w > worst:
                    worst, where = w, at
            memo[id(node)] = (reaches, worst, where)
        return memo[id(root)]

    found: list[tuple[Any, str] | None] = []
    try:
        for o in outs:
            node = o.grad_fn if torch.is_tensor(o) else None
            if node is None:
                found.append(None)
                continue
            reaches, worst, where = visit(node)
            own, by = produced(node, o.output_nr)  # the output itself, as the root node produced it
            if own > worst:
                worst, where = own, by
            found.append(where if reaches and worst > eps else None)
    except (AttributeError, TypeError, RuntimeError):  # (a private attribute: where it is not, nothing is found)
        return [None] * len(outs)
    return found


@functools.lru_cache(maxsize=8)
def _fine_dtypes(eps: float) -> frozenset[Any]:
    """The floating and complex dtypes at least as precise as *eps*."""
    import torch

    return frozenset(d for d in (torch.float64, torch.complex128, torch.float32, torch.complex64)
                     if torch.finfo(d).eps <= eps)


def _coarser_anywhere(roots: list[Any], eps: float) -> bool:
    """Whether any node of the graph below *roots* produced a floating tensor coarser than *eps*."""
    import torch

    fine = _fine_dtypes(eps)
    stack, seen = list(roots), set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for meta in node._input_metadata:
            dtype = meta.dtype
            if dtype not in fine and (dtype.is_floating_point or dtype.is_complex) and torch.finfo(dtype).eps > eps:
                return True
        stack.extend(n for n, _ in node.next_functions if n is not None)
    return False


def _real_dtype(torch: Any, dtype: Any) -> Any:
    """The real dtype of a complex one's parts (complex64: float32), a real one as it is."""
    return {torch.complex64: torch.float32, torch.complex128: torch.float64, torch.complex32: torch.float16}.get(
        dtype, dtype)


def on_cpu(xs: Sequence[Any]) -> tuple[list[Any], list[Any] | None]:
    """The tensors among *xs* on the CPU, and per input the device it came from (None: the CPU); the second is
    None when every tensor is on the CPU. See ``Problem.devices``."""
    import torch

    devices = [x.device if torch.is_tensor(x) and x.device.type != "cpu" else None for x in xs]
    if all(d is None for d in devices):
        return list(xs), None
    return [x if d is None else x.cpu() for x, d in zip(xs, devices)], devices


def _to_cpu(t: Any) -> Any:
    import torch

    return t.cpu() if torch.is_tensor(t) and t.device.type != "cpu" else t


def _flat_outputs(out: Any) -> list[Any]:
    """The leaves of whatever the function returned: a tensor, a tuple/list/dict of them, nested."""
    import torch

    if torch.is_tensor(out):
        return [out]
    if not isinstance(out, (tuple, list, dict)):
        return [out]
    if not isinstance(out, dict) and all(type(o) is torch.Tensor for o in out):
        return list(out)  # a flat tuple or list of tensors: its leaves in order, as tree_flatten gives them
    from torch.utils._pytree import tree_flatten

    return list(tree_flatten(out)[0])


class GradMode:
    """``torch.no_grad()`` (``GradMode(False)``) or ``torch.enable_grad()`` (``GradMode(True)``): the same switch
    of autograd's grad mode, restored on exit, without the decorator machinery that makes torch's context
    managers cost more than a small function's evaluation."""

    __slots__ = ("enabled", "was")

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.was = True

    def __enter__(self) -> None:
        import torch

        self.was = torch.is_grad_enabled()
        torch._C._set_grad_enabled(self.enabled)

    def __exit__(self, *exc: object) -> None:
        import torch

        torch._C._set_grad_enabled(self.was)


def fresh(values: list[float], shape: tuple[int, ...] | torch.Size) -> torch.Tensor:
    """A new contiguous float64 tensor holding *values* (Python floats, exactly), shaped *shape*, over a buffer of
    its own: an evaluation point independent of every other (about 1.5 us, torch.tensor's about 4)."""
    return _from_buffer("d", values, shape)


def fresh_mask(values: list[bool]) -> torch.Tensor:
    """:func:`fresh` for a flat bool tensor."""
    return _from_buffer("b", values, (len(values),))


def fresh_index(values: list[int]) -> torch.Tensor:
    """:func:`fresh` for a flat int64 tensor (indices)."""
    return _from_buffer("q", values, (len(values),))


_BUFFER_DTYPES = {"d": "float64", "b": "bool", "q": "int64"}


def _from_buffer(code: str, values: list[Any], shape: tuple[int, ...] | torch.Size) -> torch.Tensor:
    import torch

    dtype = getattr(torch, _BUFFER_DTYPES[code])
    if not values:  # (a buffer of no bytes is refused)
        return torch.empty(shape, dtype=dtype)
    t = torch.frombuffer(array.array(code, values), dtype=dtype)
    return t if len(shape) == 1 else t.view(tuple(shape))  # (a tuple: a torch.Size argument costs 2 us more)


def _real(t: Any) -> Any:
    import torch

    return torch.view_as_real(t.resolve_conj()) if torch.is_tensor(t) and t.is_complex() else t


_SEEDED: dict[int, torch.Tensor] = {}
SEEDED_KEPT = 8  # seeds whose generator state is kept (5 KB each): a loop over many seeds does not grow it


def _seeded_state(seed: int) -> torch.Tensor:
    """The state of torch's CPU generator right after manual_seed(seed) (kept for the last few seeds)."""
    state = _SEEDED.get(seed)
    if state is None:
        import torch

        if len(_SEEDED) >= SEEDED_KEPT:
            _SEEDED.clear()
        state = _SEEDED[seed] = torch.Generator().manual_seed(seed).get_state()
    return state


def seeded_generator(seed: int) -> torch.Generator:
    """A new CPU generator in the state manual_seed(seed) gives it (its state copied from :func:`_seeded_state`: half
    the cost of seeding, which a small check does a few times)."""
    import torch

    gen = torch.Generator()
    gen.set_state(_seeded_state(seed))
    return gen


_FIRST_DRAWS: dict[int, list[float]] = {}
FIRST_DRAWS = TINY  # values kept per seed (first_draws)


def first_draws(seed: int, count: int) -> list[float] | None:
    """The first *count* values (at most FIRST_DRAWS) that torch.rand draws in float64 from
    :func:`seeded_generator` (*seed*), as Python floats: what rand gives there, one call or several in turn (each
    value is the stream's next), without a generator (kept for the last few seeds). None for more."""
    if count > FIRST_DRAWS:
        return None
    draws = _FIRST_DRAWS.get(seed)
    if draws is None:
        import torch

        if len(_FIRST_DRAWS) >= SEEDED_KEPT:  # (cleared, as _seeded_state's: checks in threads evicting one key
            _FIRST_DRAWS.clear()             # each at once raised KeyError, a reviewer's find)
        draws = _FIRST_DRAWS[seed] = torch.rand(FIRST_DRAWS, generator=seeded_generator(seed),
                                                dtype=torch.float64).tolist()
    return draws[:count]


class Stream:
    """A seeded random stream, :func:`seeded_generator` (*seed*): its first float64 draws read from
    :func:`first_draws` (a small check draws a few), its generator made only where more are drawn. Each call of
    :meth:`generator` starts the stream afresh: a caller takes its draws from one or the other, not both."""

    __slots__ = ("seed",)

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def generator(self) -> torch.Generator:
        return seeded_generator(self.seed)

    def first(self, count: int) -> list[float] | None:
        """The stream's first *count* rand values, or None (more than FIRST_DRAWS, or the lean paths off)."""
        return first_draws(self.seed, count) if LEAN else None


def _rng_states(devices: tuple[int, ...]) -> list[torch.Tensor]:
    import torch

    return [torch.random.default_generator.get_state()] + [torch.cuda.get_rng_state(d) for d in devices]


_ENGINE: list[Callable[..., Any] | None] = []


def _engine() -> Callable[..., Any] | None:
    """autograd's engine entry, as torch.autograd.grad calls it (imported at first use: no torch before)."""
    if not _ENGINE:
        try:
            from torch.autograd.graph import _engine_run_backward
        except ImportError:  # another torch: torch.autograd.grad with the sum in grad()
            _ENGINE.append(None)
        else:
            _ENGINE.append(_engine_run_backward)
    return _ENGINE[0]


_ENGINE_KWARGS = {"allow_unused", "retain_graph", "create_graph"}


def flat_list(t: torch.Tensor) -> list[Any]:
    """``t.reshape(-1).tolist()``, the same Python numbers in the same order, without the view for a tensor of one
    dimension (a view costs more than a few values' tolist); a tensor that requires grad is read as it is."""
    dim = t.dim()
    if dim == 1:
        return t.tolist()  # type: ignore[no-any-return]
    if dim == 0:
        return [t.item()]
    if dim == 2 and 0 < t.numel() <= 32:  # (rows of a few values: flattened in Python for less than the view costs;
        # not an empty one, whose tolist makes a list per row: 10⁷ of them for shape (10⁷, 0), 5 s)
        return [v for row in t.tolist() for v in row]
    return (t.detach() if t.requires_grad else t).reshape(-1).tolist()  # type: ignore[no-any-return]


def plain(grads: Any) -> tuple[Any, ...]:
    """Gradients without a graph: a backward that differentiates inside (a recomputing checkpoint, with
    create_graph=True) returns gradients that require grad, and reading one as a number warns. And with
    storage: autograd's efficient zeros (a ZeroTensor: torch.sgn's backward for a real input) cannot be read
    (tolist raised, an error where gradcheck passes), so they become plain zeros. A sparse gradient (an
    Embedding with sparse=True) is its dense equivalent: its values are judged (comparing it crashed; gradcheck
    refuses its layout)."""
    import torch

    out = []
    for g in grads:
        if g is not None:
            if g.requires_grad:
                g = g.detach()
            if g._is_zerotensor():
                g = torch.zeros(g.shape, dtype=g.dtype, device=g.device)
            elif g.layout != torch.strided:
                g = g.to_dense()
        out.append(g)
    return tuple(out)


def graph_reach(outs: Sequence[Any], leaves: Sequence[Any], diff: Sequence[int]) -> list[set[int]]:
    """Per output, the indices in *diff* of the *leaves* its autograd graph reaches (their AccumulateGrad nodes), one
    walk of each output's graph."""
    ids = {id(leaves[i]): i for i in diff}
    found: list[set[int]] = []
    for out in outs:
        hit: set[int] = set()
        stack, seen = [getattr(out, "grad_fn", None)], set()
        while stack:
            node = stack.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            at = ids.get(id(getattr(node, "variable", None)))
            if at is not None:
                hit.add(at)
            stack.extend(n for n, _ in getattr(node, "next_functions", ()))
        found.append(hit)
    return found


def grad(outputs: Any, inputs: Any, grad_outputs: Any = None, **kwargs: Any) -> tuple[Any, ...]:
    """``torch.autograd.grad`` whose exceptions (a backward that raises, or returns a gradient the
    engine rejects) become EvaluationError('the backward')."""
    import torch

    try:
        if grad_outputs is not None and not kwargs.get("is_grads_batched"):
            tensor = torch.Tensor
            outs = [outputs] if isinstance(outputs, tensor) else list(outputs)
            gos = [grad_outputs] if isinstance(grad_outputs, tensor) else list(grad_outputs)
            wrt = (inputs,) if isinstance(inputs, tensor) else tuple(inputs)
            # a copy each time: a backward that writes to its grad_output must not change the caller's weights
            taken, given = [], []
            plain_types = True  # every output a plain tensor, its grad_output of its shape
            for o, g in zip(outs, gos):
                if o.requires_grad:
                    g = g.clone() if g.dtype == o.dtype else g.to(o.dtype)
                    plain_types = plain_types and type(o) is tensor and o.shape == g.shape
                    taken.append(o)
                    given.append(g)
            engine = _engine()
            if (engine is not None and taken and plain_types and _ENGINE_KWARGS.issuperset(kwargs)
                    and all(type(t) is tensor for t in wrt)):
                # autograd's engine as torch.autograd.grad calls it, with grad_outputs built here in the outputs'
                # own shapes and dtypes: its Python-side checks cost more than a small backward itself, and its
                # first tensor grad_output imports torch.fx's symbolic shapes (sympy, about 0.8 s of a process's
                # first check). Not for tensor subclasses, which dispatch through __torch_function__.
                create = bool(kwargs.get("create_graph", False))
                retain = kwargs.get("retain_graph")
                got = engine(tuple(taken), tuple(given), create if retain is None else bool(retain), create, wrt,
                             bool(kwargs.get("allow_unused", False)), accumulate_grad=False)
                return tuple(got) if create else plain(got)
            # otherwise vᵀJ as the gradient of the scalar sum(o * v): the backward receives exactly v as its
            # grad_output (sum's backward is ones, mul's multiplies by v)
            total = torch.zeros((), dtype=torch.float64)
            for o, g in zip(outs, gos):
                total = total + (o * g.to(o.dtype)).sum()
            got = torch.autograd.grad(total, inputs, **kwargs)
        else:
            got = torch.autograd.grad(outputs, inputs, grad_outputs, **kwargs)
        return tuple(got) if kwargs.get("create_graph") else plain(got)
    except EvaluationError:
        raise
    except Exception as exc:
        raise EvaluationError("the backward", exc) from exc


NOISE_SAMPLES = 4


def measure_noise(problem: Problem) -> list[torch.Tensor]:
    """How much one evaluation of each output element is off by rounding: the largest second difference
    |f(x + d) + f(x - d) - 2 f(x)| when every checked input moves by a few ulps of its order-one size
    (d = 2k eps max(1, |x|), k = 1, 2, random signs), and at least ROUNDING_ULPS eps |f|. A sum whose terms
    cancel rounds like its terms, not like its value; moving the inputs exposes that (4 evaluations per
    problem, not per column). The second difference leaves out the function's own change over d, f' d,
    which is no rounding: for x far below 1 (sqrt at 9e-6, d = 1.8e-15) it was 3e-13, and divided by
    Ridders' small steps it hid a gradient off by 1e-8."""
    import torch

    gen = torch.Generator().manual_seed(99)
    signs = {j: torch.where(torch.rand(problem.inputs[j].shape, generator=gen) < 0.5, -1.0, 1.0).to(torch.float64)
             for j in problem.diff}
    spread = [torch.zeros(o.numel(), dtype=torch.float64) for o in problem.outputs]
    with torch.no_grad():
        for k in range(1, NOISE_SAMPLES // 2 + 1):
            pair = []
            for sign in (1.0, -1.0):
                xs = list(problem.inputs)
                for j in problem.diff:
                    x = problem.inputs[j]
                    eps = torch.finfo(x.dtype).eps
                    size = x.detach().abs().to(torch.float64).nan_to_num(nan=1.0, posinf=1.0).clamp_min(1.0)
                    xs[j] = x + (sign * 2 * k * eps * signs[j] * size).to(x.dtype)
                pair.append(problem.call(*xs))
                problem.side_evaluations += 1
            for i, (up, down, f0) in enumerate(zip(pair[0], pair[1], problem.outputs)):
                base = f0.reshape(-1).to(torch.float64)
                second = ((up.detach().reshape(-1).to(torch.float64) - base)
                          + (down.detach().reshape(-1).to(torch.float64) - base)).abs()
                spread[i] = torch.maximum(spread[i], second.nan_to_num(nan=0.0, posinf=0.0))
    out = []
    for o, s in zip(problem.outputs, spread):
        eps = torch.finfo(o.dtype).eps if o.is_floating_point() else 0.0
        out.append(torch.maximum(ROUNDING_ULPS * eps * o.detach().abs().reshape(-1).to(torch.float64), s))
    return out


#: measure_stairs's nodes besides 0, as fractions of its step at each scale (sixteenths: exact on its grid, and uneven,
#: so that no rounding grid of the function's inputs makes their errors follow a smooth curve), its five scales, and
#: its first step's base, 16 e sqrt(eps) (not a power of two: steps of one land on every phase of a grid of a power of
#: two ulps). The smallest scale's nodes are 2.5e-9 of max(1, |x|) apart, the largest's 1.2e-6: a function that holds
#: its input to a grid between (x + c inside, at c from 1e6 to 1e9) shows that grid's rounding at two neighbouring
#: scales whose nodes span many of its stairs. With the largest at e sqrt(eps), stairs wider than its nodes (c = 1e8:
#: 1.5e-8) read nothing, and right backwards FAILED there on Ridders' bounds of 1e-10 (a review's x + c battery)
STAIR_NODES = (-1.0, -0.625, 0.375, 0.8125)
STAIR_SCALES = (1.0, 0.25, 0.0625, 0.015625, 0.00390625)
STAIR_BASE = 16 * math.e * EPS_POWERS["sqrt"]
#: the points measure_stairs evaluates per direction (every node at every scale)
STAIR_POINTS = len(STAIR_NODES) * len(STAIR_SCALES)
#: measure_stairs's readings per output element: one per pair of neighbouring scales
STAIR_PAIRS = len(STAIR_SCALES) - 1
#: how far beyond a quotient's step a pair of scales may move x and still count for it (stair_reading): stairs wider
#: than the step (x + 1e9 inside: 1.2e-7, quotients at 1.25e-6 and more) are read at moves a few times the step
STAIR_REACH = 4.0


def stair_reading(pairs: torch.Tensor, largest: torch.Tensor, slope: torch.Tensor, step: torch.Tensor,
                  floor: torch.Tensor) -> torch.Tensor:
    """One evaluation's rounding from the per-pair readings *pairs* ((STAIR_PAIRS, ...), :func:`measure_stairs`) for a
    quotient at *step* of a function whose slope there is *slope*; *largest* is the measure's largest move (STAIR_BASE
    max(1, |x|)); a reading no larger than *floor* (SAFETY times the rounding the bound counts already) reads nothing.
    A pair counts only
    - where its moves, *largest* times its larger scale, are within STAIR_REACH times the step: the quotient evaluates
      the function within its step of x, and farther out the nodes reach the function's own shape, a pole or a cusp
      whose |L| does not fall from scale to scale (1/x at 3e-8, whose quotients step by 3e-10: its pole read as
      rounding of 1.2e8 per evaluation, and backwards 1e-6 and 1e-4 off went from fail to inconclusive, a review;
      tan at -4988429.2, where 6.5e-7 of |x| is 3.2, beyond a period);
    - where its reading is within what stairs could make: a pair reads rounding where its smaller scale's nodes span
      several stairs, and an evaluation is off by at most half a stair times the slope, 2.08 |*slope*| times that
      scale's largest move.
    Of those, the finest that reads more than *floor*, or the next larger one where that reads 4 times as much: a pair
    reads only stairs its smaller nodes span (softmax(x + 1e9): 1.2e-7, read by the pair at 6.5e-7 and 1.6e-7 alone,
    the finer ones reading the outputs' own rounding), and one whose nodes span a stair or two reads less. The largest
    of every pair read fine stairs about twice as high (the largest of four fourth differences of random errors), and
    so did the next larger pair always taken: 10^6 (log(1 + x0) - x0) + sum x[1:]^2 at 1e-4 with a backward 1e-8 off
    failed 24 of 60 seeds (31 at 4e6b276, a review), 27 with this rule. Broadcast: *largest*, *slope*, *step* and
    *floor* against the shape after the first dimension."""
    import torch

    count = len(STAIR_SCALES) - 1
    shape = (count,) + (1,) * (pairs.dim() - 1)
    larger = torch.tensor(STAIR_SCALES[:-1], dtype=torch.float64).reshape(shape)
    smaller = torch.tensor(STAIR_SCALES[1:], dtype=torch.float64).reshape(shape)
    valid = ((largest * larger <= STAIR_REACH * step) & (pairs <= 2.08 * slope.abs() * largest * smaller)
             & (pairs > floor))
    index = torch.arange(count).reshape(shape)
    finest = torch.where(valid, index, -1).amax(0, keepdim=True)
    at_finest = torch.where(valid & (index == finest), pairs, 0.0).amax(0, keepdim=True)
    # the next larger pair only where it reads 4 times the finest or more (stairs too wide for the finer nodes), not as
    # a second sample of the same rounding
    taken = valid & ((index == finest) | ((index == finest - 1) & (pairs >= 4 * at_finest)))
    return torch.where(taken, pairs, 0.0).amax(0)


def _stair_weights() -> list[float]:
    """The fourth divided difference at 0 and STAIR_NODES (it leaves out every cubic), scaled to |weights| summing to
    16, as those of the fourth difference at even nodes (1, -4, 6, -4, 1): at 0 first."""
    nodes = (0.0, *STAIR_NODES)
    raw = [1.0 / math.prod(a - b for b in nodes if b != a) for a in nodes]
    total = sum(abs(w) for w in raw)
    return [16.0 * w / total for w in raw]


STAIR_WEIGHTS = _stair_weights()


def stair_rounding(sums: Sequence[torch.Tensor]) -> torch.Tensor:
    """The rounding of one evaluation from |L| at the STAIR_SCALES (*sums*, each the absolute fourth divided
    difference of STAIR_WEIGHTS at that scale, any shape). L leaves out the function's own change up to its
    third derivative; the fourth derivative and above add to L at a quarter of a step about 1/256 of what they add at
    the step (or less: nearer a singularity the larger nodes see more of it), while rounding adds as much at any scale
    whose nodes span many of its stairs. Of two neighbouring scales, a pair whose |L| fall by no more than 16 times
    reads rounding, |L(smaller)| - |L(larger)|/256; one that falls by more reads the function's own curvature (sqrt
    and |x|^1.5 at 1e-7, digamma 1e-5 from its pole: H is not small against the distance to the singularity there) and
    reads nothing. Nor does a pair that falls by 4 times or more beside a neighbouring pair that does too: |L| falling
    steadily by a power of the scale is the function's own shape, a kink (4 times) or a power singularity inside the
    nodes (|x|^1.5 at 1e-8: 8 times), where rounding does not fall steadily (with the largest nodes at 1.2e-6,
    |x|^1.5 at 1e-8 read as rounding, and its backwards 1e-6 off went from fail to inconclusive). Each pair's reading,
    over 4, stacked (STAIR_PAIRS, ...): about one evaluation's rounding at its usual size (a fourth difference of
    independent errors of up to r is about 5 r, at most 16 r); :func:`stair_reading` takes the one a quotient uses.
    Stairs about as wide as a pair's smaller scale's nodes (sin(x + 1e7): 1.9e-9, against nodes 2.5e-9
    apart) read less there, and stairs wider than them nothing."""
    import torch

    steep = [larger >= 4 * smaller for larger, smaller in zip(sums, sums[1:])]
    readings = []
    for i, (larger, smaller) in enumerate(zip(sums, sums[1:])):
        beside = torch.zeros_like(steep[i])
        for k in (i - 1, i + 1):
            if 0 <= k < len(steep):
                beside = beside | steep[k]
        flat = (larger <= 16 * smaller) & ~(steep[i] & beside)
        readings.append(torch.where(flat, (smaller - larger / 256).clamp_min(0.0), 0.0))
    return torch.stack(readings).div_(4).nan_to_num_(nan=0.0, posinf=0.0)


def measure_stairs(problem: Problem, j: int, cols: torch.Tensor | None = None, info: Info | None = None
                   ) -> list[torch.Tensor]:
    """How much one evaluation of each output element is off where the function rounds input j coarser than its
    dtype does (x + 1e5 inside: x is held to 1.5e-11 there, where float64 holds it to 1e-16), which the moves of
    :func:`measure_noise`, a few ulps, do not see: they vanish into the large term, and the rounding measured is the
    output's own, while every finite difference whose step is not a multiple of that grid carries its rounding
    (sin(x + 1e5)'s and softmax(x + 1e5)'s right backwards FAILED, where gradcheck passes them).

    Input j (float64) moves to STAIR_NODES times a step H at each of STAIR_SCALES (:func:`stair_rounding`), H =
    STAIR_BASE max(1, |x|) made a multiple of 2^18 ulps (:func:`halving_steps`: every point exact); the other inputs
    are held. With *cols* None every element moves at once, by H times a random sign and a random size from 0.5 to 1.5
    (STAIR_POINTS, 20 evaluations; per output, (STAIR_PAIRS, M_k)): an estimate for any one column, which the others'
    rounding adds to. With *cols*, each of those columns alone (20 evaluations per column, batched; per output,
    (STAIR_PAIRS, len(cols), M_k)): the rounding a difference along that column carries. One reading per pair of
    neighbouring scales (:func:`stair_rounding`); the caller takes the one a quotient uses (:func:`stair_reading`).
    Float64; 0 everywhere where input j is not float64 (its steps are not exact there)."""
    import torch

    x = problem.inputs[j].detach()
    width = 1 if cols is None else len(cols)
    if x.dtype != torch.float64:
        return [torch.zeros((STAIR_PAIRS, o.numel()) if cols is None else (STAIR_PAIRS, width, o.numel()),
                            dtype=torch.float64) for o in problem.outputs]
    weights = STAIR_WEIGHTS
    at = [o.detach().reshape(1, -1).to(torch.float64) for o in problem.outputs]
    step = halving_steps(x, STAIR_BASE, 19)  # a multiple of 2^18 ulps: every node times every level below is exact
    if cols is None:
        # random signs and random sizes, 0.5 to 1.5 in 64ths: a combination of elements the function rounds (x0 - x1
        # + 1e5) moves too (with signs alone, equal ones left x0 - x1 still, and it read nothing: a review)
        gen = torch.Generator().manual_seed(98)
        signs = torch.where(torch.rand(x.shape, generator=gen) < 0.5, -1.0, 1.0)
        levels = torch.randint(32, 97, x.shape, generator=gen).to(torch.float64) / 64
        moves = (step * signs * levels).unsqueeze(0)
    else:
        moves = unit_rows(x, cols).mul_(step.reshape(1, -1)).reshape(width, *x.shape)
    chunk = max(1, (1 << 21) // max(1, STAIR_POINTS * x.numel()))  # columns per batch: a few MB of points
    parts: list[list[torch.Tensor]] = []  # per chunk, per output: (STAIR_POINTS, w', M) values
    with torch.no_grad():
        for a in range(0, width, chunk):
            move = moves[a:a + chunk]
            points = torch.cat([x + (node * scale) * move for scale in STAIR_SCALES for node in STAIR_NODES])
            # (batched_outputs: each point an independent tensor, never a view of the batch)
            outs = batched_outputs(problem, j, points, {} if info is None else info)
            if info is None:
                problem.side_evaluations += len(points)
            else:
                info["evaluations"] = info.get("evaluations", 0) + len(points)
            parts.append([o.reshape(STAIR_POINTS, len(move), -1).to(torch.float64) for o in outs])
    out = []
    for k, o in enumerate(problem.outputs):
        values = torch.cat([part[k] for part in parts], dim=1)  # (STAIR_POINTS, w, M)
        sums = []
        for s in range(len(STAIR_SCALES)):
            total = weights[0] * at[k]
            for i, w in enumerate(weights[1:]):
                total = total + w * values[4 * s + i]
            sums.append(total.abs())
        rounding = stair_rounding(sums)  # (STAIR_PAIRS, w, M)
        # none below SAFETY times the outputs' own rounding at the points: sin at 0, whose value there is exactly 0 (its
        # measured noise 0), reads the rounding of its values of 1e-8 at the moves (at the pair's own points)
        eps = torch.finfo(o.dtype).eps if o.is_floating_point() else torch.finfo(torch.float64).eps
        n = len(STAIR_NODES)
        top = torch.stack([torch.maximum(values[n * p:n * (p + 2)].abs().amax(0), at[k].abs())
                           for p in range(STAIR_PAIRS)]).nan_to_num_(nan=0.0, posinf=0.0)
        rounding = torch.where(rounding > SAFETY * ROUNDING_ULPS * eps * top, rounding, 0.0)
        out.append(rounding.reshape(STAIR_PAIRS, -1) if cols is None else rounding)
    return out


# -- batched evaluation ------------------------------------------------------------------------

def _chunk(problem: Problem, need: int | None = None) -> int:
    """Batch items per call so that one call's tensors stay under CHUNK_BYTES. A caller that will ask
    for at most *need* items, no more than SMALL_BATCH (a loop of plain calls), gets SMALL_BATCH
    without the measuring forward."""
    if need is not None and need <= SMALL_BATCH and problem.item_bytes is None:
        return SMALL_BATCH
    if problem.item_bytes is None:
        problem.item_bytes = _bytes_per_call(problem)
    return max(1, min(4096, CHUNK_BYTES // max(problem.item_bytes, 1)))


def _bytes_per_call(problem: Problem) -> int:
    """Bytes one batch item costs: the intermediates one forward keeps for its backward that depend on the
    checked inputs (saved tensors that require grad; a captured constant is shared by the whole batch),
    plus the inputs and outputs."""
    import torch

    total = 8 * (sum(x.numel() for x in problem.inputs if torch.is_tensor(x))
                 + sum(o.numel() for o in problem.outputs))

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal total
        if t.requires_grad:
            total += t.numel() * t.element_size()
        return t

    xs = problem.leaves()
    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        problem.call(*xs)
    return int(total)


def _loop(problem: Problem, j: int, batch: torch.Tensor) -> list[torch.Tensor]:
    import torch

    xs, call, rows = list(problem.inputs), problem.call, []
    for b in batch:
        xs[j] = b.clone()  # independent tensors, never views of the batch
        rows.append(call(*xs))
    return [torch.stack([r[k] for r in rows]) for k in range(len(problem.outputs))]


@contextlib.contextmanager
def batching_rules_only() -> Iterator[None]:
    """torch.func.vmap (and autograd's batched grad_outputs) with its per-op fallback off, the setting it had
    restored after. An op without a batching rule then raises, and the caller loops over plain calls, as the
    fallback would have (no faster), instead of the fallback printing "There is a performance drop because we
    have not yet implemented the batching rule for ..." to the user's stderr on every call (straight from C++,
    past Python's warning filters, for torch._refs.to's prims::copy_to: 40 lines in one check; as a Python
    UserWarning for stft's unfold_backward). A torch without the private switch runs as it is."""
    import torch

    functorch = getattr(torch._C, "_functorch", None)
    get = getattr(functorch, "_is_vmap_fallback_enabled", None)
    put = getattr(functorch, "_set_vmap_fallback_enabled", None)
    if get is None or put is None:
        yield
        return
    before = bool(get())
    put(False)
    try:
        yield
    finally:
        put(before)


def batched_outputs(problem: Problem, j: int, batch: torch.Tensor, info: Info) -> list[torch.Tensor]:
    """Outputs for a batch of values of input j (see the module docstring)."""
    import torch

    n = batch.shape[0]
    if n <= SMALL_BATCH or problem.vmap.get(j) is False or problem.random is not False:
        info.setdefault("evaluation", "loop")
        return _loop(problem, j, batch)
    size = _chunk(problem)
    try:
        def one(xj: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return tuple(problem.call(*problem.with_input(j, xj)))

        with torch.no_grad(), batching_rules_only():
            parts = [torch.func.vmap(one)(batch[s:s + size]) for s in range(0, n, size)]
        outs = [parts[0][k] if len(parts) == 1 else torch.cat([p[k] for p in parts])
                for k in range(len(problem.outputs))]
    except Exception as exc:  # not vmappable (data-dependent control flow, a Function without vmap support, ...)
        problem.vmap[j] = False
        info["evaluation"] = "loop"
        info["vmap_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
        return _loop(problem, j, batch)
    if j not in problem.vmap:
        problem.vmap[j] = _confirm(problem, j, batch, outs, info)
        if not problem.vmap[j]:
            return _loop(problem, j, batch)
    info["evaluation"] = "torch.func.vmap"
    info["largest_chunk"] = max(info.get("largest_chunk", 0), min(size, n))
    return outs


def _confirm(problem: Problem, j: int, batch: torch.Tensor, outs: list[torch.Tensor], info: Info) -> bool:
    """vmap's first and last rows against plain calls: a batching rule that reads the wrong row
    (or the same row everywhere) is caught here, and the loop is used instead."""
    for row in (0, batch.shape[0] - 1):
        plain = problem.call(*problem.with_input(j, batch[row].clone()))
        problem.side_evaluations += 1
        for k, (o, p) in enumerate(zip(outs, plain)):
            if not _agree(o[row], p, problem.noise(k)):
                info["evaluation"] = "loop"
                info["vmap_error"] = (f"vmap's row {row} of output {k} differs from a plain call at the same point; "
                                      "the batched evaluation is not trusted")
                return False
    return True


def _agree(got: torch.Tensor, want: torch.Tensor, noise: torch.Tensor) -> bool:
    """Equal shapes, NaN at the same places, and values equal to rounding: a batched kernel may sum in
    another order (a matrix product instead of matrix-vector products), so the limit is the measured
    rounding of an evaluation, or a few ulps of the largest value, times STRUCTURE_ULPS."""
    import torch

    if got.shape != want.shape:
        return False
    eps = torch.finfo(want.dtype).eps if want.is_floating_point() else 0.0
    got, want = got.detach().to(torch.float64).reshape(-1), want.detach().to(torch.float64).reshape(-1)
    if not bool((torch.isnan(got) == torch.isnan(want)).all()):
        return False
    floor = eps * float(want.abs().nan_to_num(0.0, 0.0, 0.0).max()) if want.numel() else 0.0
    limit = STRUCTURE_ULPS * torch.maximum(noise.reshape(-1), torch.tensor(floor, dtype=torch.float64))
    return bool(((got - want).abs().nan_to_num(0.0) <= limit).all())


# -- numeric columns -------------------------------------------------------------------------

def steps(x: torch.Tensor, base: float | torch.Tensor | None = None, *, finite: bool = False) -> torch.Tensor:
    """Steps *base* * max(1, |x|) per element (default cbrt(eps), the central-difference optimum; a tensor of
    x's shape and dtype: one base per element), made exactly representable: (x + h) - x. *finite*: the caller
    knows every element of x is finite (then (x + h) - x > 0 everywhere, and the masking below changes nothing)."""
    import torch

    if base is None:
        base = torch.finfo(x.dtype).eps ** (1 / 3)
    if finite:
        h = x.detach().abs().clamp_min_(1.0).mul_(base)
        return (x.detach() + h).sub_(x.detach())
    # a non-finite element (a masked -inf) is held at its value: a finite step leaves it where it is,
    # so its column measures that the function does not move, instead of inf - inf = NaN
    x = x.detach()
    h = x.abs().nan_to_num_(nan=1.0, posinf=1.0).clamp_min_(1.0).mul_(base)
    taken = (x + h).sub_(x)
    return torch.where(taken > 0, taken, h)


def held(x: torch.Tensor) -> torch.Tensor | None:
    """The flat indices of the non-finite elements of x (a masked -inf, a NaN placeholder), or None: they
    are held at their value (a finite step leaves an infinity where it is) and their columns not checked,
    as no derivative exists there."""
    import torch

    if not x.is_floating_point():
        return None
    if LEAN and x.numel() <= TINY:
        if all(map(math.isfinite, flat_list(x))):  # a few values: read in Python
            return None
    elif math.isfinite(float(x.detach().sum())):  # every element finite (a sum that overflows looks closer)
        return None
    finite = torch.isfinite(x.detach().reshape(-1))
    return None if bool(finite.all()) else (~finite).nonzero().flatten()


def numeric_columns(problem: Problem, j: int, directions: torch.Tensor, h: torch.Tensor | float,
                    info: Info, cols: torch.Tensor | None = None,
                    sizes: list[torch.Tensor] | None = None) -> list[torch.Tensor]:
    """(f(x + h d) - f(x - h d)) / 2h for each direction d (rows of *directions*), per output as
    (n directions, M_k) in float64; h is a scalar or one step per direction. *cols*: the directions are the unit
    rows of these flat elements (:func:`unit_rows`), and each quotient divides by the distance its two points are
    apart (:func:`_spans`). Into *sizes* (per output, the same shape): max(|f(x + h d)|, |f(x - h d)|), the values
    the quotient's rounding comes from."""
    import torch

    x = problem.inputs[j].detach()
    n = directions.shape[0]
    d = directions.reshape(n, *x.shape)
    d = d if d.dtype == x.dtype else d.to(x.dtype)
    step = torch.as_tensor(h, dtype=x.dtype).reshape(-1, *([1] * x.dim())) * d
    with torch.no_grad():
        outs = batched_outputs(problem, j, torch.cat([x + step, x - step]), info)
    scale = (2 * torch.as_tensor(h, dtype=torch.float64)).reshape(-1, 1)
    if cols is not None and x.dtype != torch.float64:
        scale = _spans(x.reshape(-1)[cols], torch.as_tensor(h, dtype=x.dtype).expand(len(cols)))
    info["evaluations"] = info.get("evaluations", 0) + 2 * n
    if sizes is not None:
        sizes.extend(torch.maximum(o[:n].abs(), o[n:].abs()).reshape(n, -1).to(torch.float64) for o in outs)
    return [(o[:n] - o[n:]).reshape(n, -1).to(torch.float64).div_(scale) if o.dtype != torch.float64
            else torch.sub(o[:n], o[n:]).reshape(n, -1).div_(scale) for o in outs]


def unit_rows(x: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """One-hot directions for the flat indices *cols* of x."""
    import torch

    unit = torch.zeros(len(cols), x.numel(), dtype=x.dtype)
    unit[torch.arange(len(cols)), cols] = 1.0
    return unit


def central_columns(problem: Problem, j: int, cols: torch.Tensor, h: torch.Tensor, info: Info) -> list[torch.Tensor]:
    """Central-difference Jacobian columns *cols* of input j with steps h[cols], per output as (len(cols), M_k)."""
    if LEAN and (2 * len(cols) <= SMALL_BATCH or problem.vmap.get(j) is False or problem.random is not False):
        return _central_loop(problem, j, cols, h[cols], info)  # the loop batched_outputs would run
    return numeric_columns(problem, j, unit_rows(problem.inputs[j], cols), h[cols], info, cols)


def _spans(there: torch.Tensor, hs: torch.Tensor) -> torch.Tensor:
    """(there + hs) - (there - hs), as the evaluations' points lie (each rounded to the inputs' dtype), in float64,
    as a column (n, 1). In float64 the steps are exact and this is 2 hs; in a coarser dtype x - h may round where
    x + h did not (float16 at -8.48: x - 0.84 lands between two spacings of 0.0078), and dividing by 2 h put a
    0.3% error into a quotient claimed to 1e-6."""
    import torch

    return ((there + hs).to(torch.float64) - (there - hs).to(torch.float64)).reshape(-1, 1)


def _central_loop(problem: Problem, j: int, cols: torch.Tensor, hs: torch.Tensor, info: Info) -> list[torch.Tensor]:
    """:func:`numeric_columns` along unit directions, evaluated as batched_outputs' loop evaluates them, with
    fewer tensor operations: the same points (x + h e_c is x + 0.0 away from c, so -0.0 reads +0.0 there, and
    x - h e_c is x), contiguous and independent, the same order of calls (every x + h e_c, then every x - h e_c),
    the same quotients."""
    import torch

    x = problem.inputs[j].detach()
    n = len(cols)
    at = cols.tolist()
    there = x.reshape(-1)[cols]
    hs = hs if hs.dtype == x.dtype else hs.to(x.dtype)
    up_values, down_values = (there + hs).tolist(), (there - hs).tolist()
    info.setdefault("evaluation", "loop")
    xs, call = list(problem.inputs), problem.call
    up_base = (x + 0.0).contiguous()
    rows = []
    with torch.no_grad():
        for base, values in ((up_base, up_values), (x, down_values)):
            for c, value in zip(at, values):
                point = base.clone(memory_format=torch.contiguous_format)
                point.view(-1)[c] = value
                xs[j] = point
                rows.append(call(*xs))
    info["evaluations"] = info.get("evaluations", 0) + 2 * n
    scale = (2 * hs.to(torch.float64)).reshape(-1, 1) if x.dtype == torch.float64 else _spans(there, hs)
    out = []
    for k in range(len(problem.outputs)):
        o = torch.stack([r[k] for r in rows])
        diff = torch.sub(o[:n], o[n:]).reshape(n, -1)
        out.append(diff.div_(scale) if diff.dtype == torch.float64 else diff.to(torch.float64).div_(scale))
    return out


def far_outputs(problem: Problem, j: int, batch: torch.Tensor, info: Info) -> list[torch.Tensor]:
    """batched_outputs at points far from x; a function that refuses them raises OutOfDomain and
    leaves *info* (how the rest is evaluated) as it was."""
    import torch

    scratch = dict(info)
    try:
        with torch.no_grad():
            outs = batched_outputs(problem, j, batch, scratch)
    except EvaluationError as exc:
        raise OutOfDomain(str(exc)) from exc
    info.update(scratch)
    return outs


class OutOfDomain(Exception):
    """The function raised at a point one large step away: use small central steps instead."""


def forward_columns(problem: Problem, j: int, cols: torch.Tensor, step: torch.Tensor, info: Info) -> list[torch.Tensor]:
    """(f(x + s_c e_c) - f(x)) / s_c for columns *cols*, per output: (M_k, len(cols)) matrices."""
    import torch

    x = problem.inputs[j].detach()
    batch = x.reshape(1, -1).repeat(len(cols), 1)
    rows = torch.arange(len(cols))
    batch[rows, cols] += step
    outs = far_outputs(problem, j, batch.reshape(len(cols), *x.shape), info)
    info["evaluations"] = info.get("evaluations", 0) + len(cols)
    inverse = 1.0 / step.reshape(-1, 1).to(torch.float64)
    # contiguous: an output that ignores input j comes back from vmap expanded, not writable in place
    return [o.reshape(len(cols), -1).to(torch.float64).contiguous().sub_(f0.reshape(1, -1).to(torch.float64))
            .mul_(inverse).T for o, f0 in zip(outs, problem.outputs)]


def slopes(problem: Problem, j: int, cols: torch.Tensor, info: Info, resolve: list[torch.Tensor] | None = None
           ) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]:
    """One-sided slopes (left, right) of every output along columns *cols*, each extrapolated from steps
    t and t/2 (2 D(t/2) - D(t)), with the rounding bound of each, 10 noise / t (:func:`measure_noise`): per
    output, four (len(cols), M_k) tensors. They differ at a kink; on a smooth function they agree to O(t^3)
    plus that bound (plain one-sided quotients differ by t |f''|, which near a singularity, sqrt at 3e-6,
    exceeds KINK_REL of the slope). t is sqrt(eps) max(1, |x|). *resolve* (per output, (len(cols), M_k)) is the
    largest bound each entry may have (inf: any); a column where one is exceeded is measured again from the step
    at which it would not be, at most SLOPE_CAP max(1, |x|): a discrepancy of 0.01 against a slope blurred by 0.1
    (the rounding of |f| = 9e4 over t = 1.5e-8) could not be told from a kink. A fourth tensor estimates what the
    extrapolation leaves of the truncation error, f'''(x) t^2 / 12, by the difference of the central differences at
    t and t/2, f'''(x) t^2 / 8 (near a singularity, sqrt 3e-6 from 0, the slopes are 1.5e-6 off the derivative, and
    a backward off by 1e-4 was called a jump inside Ridders' steps). Slopes that differ like a kink by no more than
    that estimate explains are measured again from t / SLOPE_FINER, and kept where they look like a smooth
    function's."""
    import torch

    x = problem.inputs[j].detach()
    size = problem.x_size(j)[cols]
    noise = [problem.noise(k).reshape(1, -1) for k in range(len(problem.outputs))]
    base = torch.finfo(x.dtype).eps ** 0.5
    result = _slopes_at(problem, j, cols, base, noise, info)
    rel = torch.full_like(size, base)  # per column, the relative step its slopes were measured from
    if resolve is not None and base < SLOPE_CAP:
        wanted = torch.zeros_like(size)  # per column, the relative step at which every entry's bound is as asked
        for (_, _, bound, _), asked in zip(result, resolve):
            if bound.numel():
                ratio = (bound / asked).nan_to_num_(nan=0.0, posinf=math.inf).amax(dim=1)
                wanted = torch.maximum(wanted, ratio * base)  # the bound scales as 1 / t
        again = (wanted > base).nonzero().flatten()
        if len(again):
            rel[again] = wanted[again].clamp_max(SLOPE_CAP)
            more = _slopes_at(problem, j, cols[again], rel[again], noise, info)
            for (left, right, bound, trunc), (l2, r2, b2, t2) in zip(result, more):
                left[again], right[again], bound[again], trunc[again] = l2, r2, b2, t2
    # slopes that differ like a kink by no more than their own truncation explains, where a step SLOPE_FINER times
    # smaller still resolves a kink through their rounding, are measured again from it: the step was too coarse for the
    # function (tan at -4988429.2, t = 0.074: 3.852 and 3.867, truncation estimate 0.05, autograd 3.89586; read as
    # a kink, the right backward and bugs of 1e-8 and 1e-6 there were inconclusive). At a kink the truncation
    # estimate is about 0 (relu at 0: the central differences at t and t/2 are both 1/2)
    finer = torch.zeros(len(cols), dtype=torch.bool)
    for left, right, bound, trunc in result:
        if not left.numel():
            continue
        apart = (left - right).abs()
        margin = KINK_REL * torch.maximum(left.abs(), right.abs())
        kinkish = apart > margin + 2 * bound
        explained = apart <= margin + 2 * bound + 2 * trunc
        resolvable = 2 * SLOPE_FINER * bound < margin
        finer |= (kinkish & explained & resolvable).any(dim=1)
    again = finer.nonzero().flatten()
    if len(again):
        more = _slopes_at(problem, j, cols[again], rel[again] / SLOPE_FINER, noise, info)
        # kept only where they look like a smooth function's: their truncation estimate fell (by SLOPE_FINER^2 there;
        # rounding makes it grow) and their midpoint moved by no more than the first slopes' truncation explains.
        # A function that rounds like its terms, whose rounding the measured noise misses (a variance at 1000 +-
        # 0.01), gives equal slopes in stairs at the finer step, far from the first ones: those stay, a kink
        smooth = torch.ones(len(again), dtype=torch.bool)
        for (left, right, bound, trunc), (l2, r2, b2, t2) in zip(result, more):
            if not l2.numel():
                continue
            mid, mid2 = (left[again] + right[again]) / 2, (l2 + r2) / 2
            fell = 4 * t2 <= trunc[again]
            near = (mid2 - mid).abs() <= trunc[again] + 2 * (bound[again] + b2)
            smooth &= (fell & near).all(dim=1)
        kept = smooth.nonzero().flatten()
        for (left, right, bound, trunc), (l2, r2, b2, t2) in zip(result, more):
            at = again[kept]
            left[at], right[at], bound[at], trunc[at] = l2[kept], r2[kept], b2[kept], t2[kept]
    return result


def _slopes_at(problem: Problem, j: int, cols: torch.Tensor, relative: float | torch.Tensor,
               noise: list[torch.Tensor], info: Info
               ) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]:
    """:func:`slopes` from steps *relative* max(1, |x|) (one for every column, or one per column), each exact as
    :func:`steps` makes it, and divided by as it is."""
    import torch

    x = problem.inputs[j].detach()
    if isinstance(relative, torch.Tensor):  # per column: a base for every element of x, the columns' own
        every = torch.zeros(x.numel(), dtype=x.dtype)
        every[cols] = relative.to(x.dtype)
        s, half = (steps(x, (every * factor).reshape(x.shape)).reshape(-1)[cols] for factor in (1.0, 0.5))
    else:
        s, half = (steps(x, base).reshape(-1)[cols] for base in (relative, relative / 2))
    unit = unit_rows(x, cols).reshape(len(cols), *x.shape)
    hs, hs2 = (t.reshape(-1, *([1] * x.dim())) for t in (s, half))
    with torch.no_grad():
        outs = batched_outputs(problem, j, torch.cat([x + hs * unit, x - hs * unit, x + hs2 * unit,
                                                      x - hs2 * unit]), info)
    info["evaluations"] = info.get("evaluations", 0) + 4 * len(cols)
    n = len(cols)
    inv = 1.0 / s.reshape(-1, 1).to(torch.float64)
    inv2 = 1.0 / half.reshape(-1, 1).to(torch.float64)
    result = []
    for o, f0, r in zip(outs, problem.outputs, noise):
        o = o.reshape(4 * n, -1).to(torch.float64)
        f0 = f0.reshape(1, -1).to(torch.float64)
        left = 2 * ((f0 - o[3 * n:]) * inv2) - (f0 - o[n:2 * n]) * inv
        right = 2 * ((o[2 * n:3 * n] - f0) * inv2) - (o[:n] - f0) * inv
        # each extrapolated slope is off by about f'''(x) t^2 / 12; the central differences at t and t/2 differ by
        # f'''(x) t^2 / 8
        trunc = ((o[:n] - o[n:2 * n]) * (inv / 2) - (o[2 * n:3 * n] - o[3 * n:]) * (inv2 / 2)).abs()
        result.append((left, right, 10 * r * inv, trunc))  # each: 2 (2 r) / (t / 2) + 2 r / t
    return result


def halving_steps(x: torch.Tensor, base: float, columns: int) -> torch.Tensor:
    """:func:`steps` (*base* * max(1, |x|)) rounded to a multiple of 2^(columns - 1) spacings of the floating-point
    numbers at |x| + h, so that every h / 2^k (k < columns) moves x exactly: x + h / 2^k and x - h / 2^k are the
    points the quotient divides by. ``steps`` alone makes h exact, not its halves: at 1 - 1e-8 a step of 1e-9 / 2
    lands up to half a spacing (5.6e-17) off, the quotient is off by 1.1e-7 relative (ulp / h), and near a
    singularity Ridders' tableau extrapolates that into a bound 1e4 times too small (atanh's right backward failed,
    digamma's at 1e-5 from its pole too). Where the function's points cross a power of two upwards, the coarser
    spacing there may still round x + h / 2^k; elsewhere every step is exact. Where 2^(columns - 1) spacings exceed
    h itself (a float16 or bfloat16 input: 32 spacings at 2.5 are 0.5 in bfloat16), h is left as ``steps`` makes it
    rather than made many times larger."""
    import torch

    h = steps(x, base).detach()
    top = x.detach().abs().add(h)
    unit = torch.nextafter(top, torch.full_like(top, math.inf)).sub_(top).mul_(2.0 ** (columns - 1))
    rounded = torch.round(h / unit).mul_(unit)
    return torch.where(torch.isfinite(rounded) & (unit <= h), rounded, h)


def ridders_columns(problem: Problem, j: int, cols: torch.Tensor, info: Info, *, base: float = RIDDERS_BASE,
                    columns: int = RIDDERS_COLUMNS, steps: list[torch.Tensor] | None = None
                    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Ridders' extrapolation per Jacobian entry of columns *cols* of input j, from central differences
    at steps h0 / 2^k (h0 = base * max(1, |x|)): per output, (value, error bound) as (len(cols), M_k).

    The bound is the tableau's own error estimate plus the rounding of the last quotient used, noise / h (see
    :func:`measure_noise`), where the noise is at least ROUNDING_ULPS eps of the values that quotient differences:
    the noise is measured at x, and where |f| is far smaller there than at the steps (x² at 1e-5: 1e-10 against
    1e-4 at x + 0.01) the bound read 2e-24 against an error of 1e-19, and a ledger's right expectation FAILED.
    Steps where the function is not finite are dropped per entry. Into *steps* (per output, the same shape): the
    step of each entry's last quotient used, h.
    """
    import torch

    x = problem.inputs[j]
    h0 = halving_steps(x, base, columns).reshape(-1)[cols]
    hs = torch.stack([h0 / 2**k for k in range(columns)])  # (K, w): every one an exact displacement
    unit = unit_rows(x, cols)
    sizes: list[list[torch.Tensor]] = [[] for _ in range(columns)]
    per_step = [numeric_columns(problem, j, unit, hs[k], info, cols, sizes[k]) for k in range(columns)]
    if x.dtype != torch.float64:  # a step below the input's spacing moves nothing: no quotient (ridders_tensor)
        at = x.detach().reshape(-1)[cols]
        for k in range(columns):
            step = hs[k].to(x.dtype)
            still = ((at + step) == at) | ((at - step) == at)
            if bool(still.any()):
                for quotients in per_step[k]:
                    quotients[still] = math.nan
    out = []
    for kk in range(len(problem.outputs)):
        d = torch.stack([per_step[k][kk] for k in range(columns)])  # (K, w, M)
        value, err, used = ridders_tensor(d)
        h_used = _step_of(hs, used)
        out_k = problem.outputs[kk]
        eps = torch.finfo(out_k.dtype).eps if out_k.is_floating_point() else 0.0
        at = torch.stack([sizes[k][kk] for k in range(columns)])  # (K, w, M): |f| at each step's two points
        there = at.gather(0, used.clamp_max(columns - 1).unsqueeze(0)).squeeze(0).nan_to_num(nan=0.0, posinf=0.0)
        noise = torch.maximum(problem.noise(kk).reshape(1, -1), ROUNDING_ULPS * eps * there)
        out.append((value, err + noise / h_used))
        if steps is not None:
            steps.append(h_used)
    return out


def _step_of(hs: torch.Tensor, used: torch.Tensor) -> torch.Tensor:
    """The step (per column) of the tableau index *used* (per entry, shape (w, M))."""
    k = used.clamp_max(hs.shape[0] - 1)
    return hs.T.gather(1, k)  # hs.T: (w, K); k: (w, M) -> (w, M)


# -- analytic rows -----------------------------------------------------------------------------

def analytic_rows(problem: Problem, k: int, weights: torch.Tensor, info: Info) -> list[torch.Tensor | None]:
    """vᵀJ for each v in *weights* (rows, shape (B, M_k)), per checked input, as (B, N_i) in float64;
    None where autograd gives no gradient (the output does not use the input).

    Up to ANALYTIC_LOOP rows: plain ``autograd.grad`` per row (no transform to set up); more:
    ``torch.func.vjp`` under ``vmap`` in chunks, then ``autograd.grad`` with batched grad_outputs,
    then the loop, each tried after the previous one failed. The record says which ran.
    """
    import torch

    out_shape = problem.outputs[k].shape
    cot = weights.reshape(weights.shape[0], *out_shape).to(problem.outputs[k].dtype)
    xs, outs = problem.forward_with_graph()
    out = outs[k]
    wrt = [xs[i] for i in problem.diff]
    if not out.requires_grad:
        return [None] * len(wrt)
    rows = weights.shape[0]
    if rows > ANALYTIC_LOOP:
        if k not in problem.used:  # functorch returns zeros, never None, for an unused input: ask autograd once
            problem.used[k] = [g is not None for g in grad(out, wrt, torch.ones_like(out), allow_unused=True,
                                                             retain_graph=True)]
        used = problem.used[k]
        for attempt in (_vjp_vmap, _batched_grad):
            if f"{attempt.__name__}_error" in info:
                continue
            try:
                got = attempt(problem, k, out, wrt, cot, info)
            except Exception as exc:
                # no batching rule for some backward, or a function the transform refuses (an autograd.Function
                # without setup_context, under torch.func.vjp: wrapped as the function's error): the next way.
                # The function and its backward ran plainly before; the loop below raises what is really theirs
                why: BaseException = exc.original if isinstance(exc, EvaluationError) else exc
                info[f"{attempt.__name__}_error"] = (f"{type(why).__name__}: "
                                                     f"{str(why).splitlines()[0][:160] if str(why) else ''}")
                continue
            return [g.reshape(rows, -1).to(torch.float64) if u and g is not None else None
                    for g, u in zip(got, used)]
    info.setdefault("analytic", "autograd.grad per row")
    per_input: list[list[torch.Tensor | None]] = [[] for _ in wrt]
    engine = _engine()
    direct = (engine is not None and type(out) is torch.Tensor and tuple(out.shape) == tuple(cot.shape[1:])
              and all(type(t) is torch.Tensor for t in wrt))
    for b in range(rows):
        if direct:  # grad()'s engine call without its per-call checks, made once here; a copy of each row
            try:
                got = plain(engine((out,), (cot[b].to(out.dtype, copy=True),), True, False,  # type: ignore[misc]
                                   tuple(wrt), True, accumulate_grad=False))
            except Exception as exc:
                raise EvaluationError("the backward", exc) from exc
        else:
            got = grad(out, wrt, cot[b], retain_graph=True, allow_unused=True)
        for i, g in enumerate(got):
            per_input[i].append(None if g is None else g.reshape(-1) if g.dtype == torch.float64
                                else g.reshape(-1).to(torch.float64))
    if k not in problem.used and rows:  # autograd gives None where its graph does not reach, whatever the row
        problem.used[k] = [any(g is not None for g in per_input[i]) for i in range(len(wrt))]
    used = problem.used.get(k, [False] * len(wrt))
    return [torch.stack([torch.zeros(wrt[i].numel(), dtype=torch.float64) if g is None else g
                         for g in per_input[i]]) if used[i] else None for i in range(len(wrt))]


def _vjp_vmap(problem: Problem, k: int, out: torch.Tensor, wrt: list[torch.Tensor], cot: torch.Tensor,
              info: Info) -> tuple[torch.Tensor, ...]:
    import torch

    def f_k(*checked: torch.Tensor) -> torch.Tensor:
        xs = list(problem.inputs)
        for i, value in zip(problem.diff, checked):
            xs[i] = value
        return problem.call(*xs)[k]

    vjp_fn = torch.func.vjp(f_k, *[problem.inputs[i] for i in problem.diff])[1]
    with batching_rules_only():
        got = torch.func.vmap(vjp_fn, chunk_size=_chunk(problem))(cot)
    info["analytic"] = "torch.func.vjp under vmap"
    return plain(got)


def _batched_grad(problem: Problem, k: int, out: torch.Tensor, wrt: list[torch.Tensor], cot: torch.Tensor,
                  info: Info) -> tuple[torch.Tensor, ...]:
    import torch

    with batching_rules_only():
        got = torch.autograd.grad(out, wrt, cot, is_grads_batched=True, allow_unused=True, retain_graph=True)
    info["analytic"] = "autograd.grad, batched grad_outputs"
    return tuple(torch.zeros_like(w) if g is None else g for g, w in zip(plain(got), wrt))
