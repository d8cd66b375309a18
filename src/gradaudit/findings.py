"""Findings: every judged comparison of one checked input, kept as tensors until a report needs
them, with exact counts. Both check modes fill them; records and ``result.mismatches`` read them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import evaluate as E
from . import judge as J
from .record import Allowance, Comparison, Discrepancy, Location

if TYPE_CHECKING:
    import torch


def unravel(flat_index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The multi-index of a flat (row-major) index.

    >>> unravel(5, (2, 3))
    (1, 2)
    """
    out = []
    for size in reversed(shape):
        out.append(flat_index % size)
        flat_index //= size
    return tuple(reversed(out))


SMALL_BLOCK = 64  # a passed block of at most this many entries is summarized in Python floats


def _relative(diff: float, ref: float) -> float:
    """|diff| / |ref| as the tensor path reports it: 0 where diff is 0, inf where the quotient is infinite or NaN."""
    if diff == 0:
        return 0.0
    size = abs(ref)
    q = diff / size if size else math.inf
    return q if q == q else math.inf


@dataclass
class Part:
    """The non-passing comparisons of one judged block: flat positions and their terms."""

    output: int | None
    rows: torch.Tensor  # output element (flat), or -1
    cols: torch.Tensor  # input element (flat), or -1
    observed: torch.Tensor
    judged: J.Judged  # flat: the verdicts, reasons, references and evidence terms of these entries
    left: torch.Tensor | None = None
    right: torch.Tensor | None = None
    kind: str | None = None
    note: str = ""

    @property
    def verdict(self) -> torch.Tensor:
        return self.judged.verdict

    @property
    def reference(self) -> torch.Tensor:
        return self.judged.ref


#: an output k and flat rows, columns, differences and autograd's entries (Findings.seen)
Seen = tuple[int, "torch.Tensor | list[int]", "torch.Tensor | list[int]", "torch.Tensor | list[float]",
             "torch.Tensor | list[float]"]


@dataclass
class Findings:
    """Everything judged for one checked input: exact counts, the greatest difference, and the
    comparisons that did not pass (as tensors; :meth:`comparisons` builds the objects)."""

    input: int
    name: str
    shape: tuple[int, ...]
    out_shapes: list[tuple[int, ...]]
    reference_kind: str = "numeric"
    total: int = 0
    failed: int = 0
    inconclusive: int = 0
    exact: bool = True
    why_inexact: str | None = None
    max_abs: float = 0.0
    max_rel: float = 0.0
    at: Location | None = None
    parts: list[Part] = field(default_factory=list)
    extra: list[Comparison] = field(default_factory=list)  # input-level comparisons (metadata, projections)
    held: torch.Tensor | None = None  # flat input elements that are not finite: held fixed, never judged
    not_checked: str = ""  # what the report says of them
    gave_none: bool = False  # autograd's gradient of this input is None (the output does not depend on it)
    # a directional pass: the moved elements no passing projection resolved to 1e-6 of their typical term, and the
    # largest of their finest allowances over that term (directional._left_coarse); None where the promise holds
    coarse: tuple[int, float] | None = None
    beyond: bool = False  # a quick stage accepted an entry beyond the tolerance, on its bound alone (full._beyond)
    # entries a quick stage accepted with a difference above SEEN RESOLVE of them: per chunk, the output and the
    # flat rows, columns, differences and autograd's entries (full._seen; full._unresolved_terms reads them), as
    # tensors or, from a block judged in Python floats, as lists (full._seen_values)
    seen: list[Seen] = field(default_factory=list)
    # a quick stage accepted an entry whose difference exceeds the entry itself (autograd's 0, or a block it gives as
    # None, where the differences read more than 0): the evidence does not show the entry's size (full._seen)
    loose: bool = False

    def location(self, output: int | None, row: int, col: int) -> Location:
        element = unravel(col, self.shape) if col >= 0 else None
        out_el = unravel(row, self.out_shapes[output]) if output is not None and row >= 0 else None
        return Location(self.name, element, output, out_el)

    def add(self, judged: J.Judged, observed: torch.Tensor, reference: torch.Tensor, *, output: int | None,
            rows: torch.Tensor, cols: torch.Tensor, slopes: tuple[torch.Tensor, torch.Tensor] | None = None,
            kind: str | None = None, note: str = "") -> int:
        """Count a judged block (entries at flat (rows, cols), any shapes that broadcast) and keep
        what did not pass. Entries in held columns (non-finite input elements) are left out."""
        import torch

        shape = judged.verdict.shape
        if self.held is None and judged.all_pass:  # the common case: counts and the largest differences only
            return self._add_passed(judged, reference, output, rows.expand(shape), cols.expand(shape))
        rows = rows.expand(shape).reshape(-1)
        cols = cols.expand(shape).reshape(-1)
        if self.held is not None and len(self.held):
            mine = ~torch.isin(cols, self.held)
            if not bool(mine.all()):
                shape = judged.verdict.shape

                def flat(t: torch.Tensor) -> torch.Tensor:
                    return t.detach().expand(shape).reshape(-1)[mine]

                observed, reference = flat(observed), flat(reference)
                slopes = None if slopes is None else (flat(slopes[0]), flat(slopes[1]))
                judged, rows, cols = judged.take(mine), rows[mine], cols[mine]
        verdict = judged.verdict.reshape(-1)
        counted = int(verdict.numel())
        self.total += counted
        if not judged.all_pass:
            self.failed += int((verdict == J.FAIL).sum())
            self.inconclusive += int((verdict == J.INCONCLUSIVE).sum())
        diff = judged.diff.reshape(-1)
        if diff.numel():
            at = int(diff.argmax())
            if float(diff[at]) > self.max_abs or self.at is None:
                self.max_abs = J.unbounded(float(diff[at]))
                self.at = self.location(output, int(rows[at]), int(cols[at]))
            ref = reference.detach().to(torch.float64).expand_as(judged.verdict).reshape(-1)
            # (an infinite difference is the judge's largest float: divided, it read as a finite 3e307)
            rel = torch.div(J.unbounded_tensor(diff), ref.abs()).masked_fill_(diff == 0, 0.0)
            self.max_rel = max(self.max_rel, J.unbounded(float(rel.nan_to_num_(nan=math.inf).max())))
        if judged.all_pass:
            return counted
        # what did not pass, and passes worth a word (a kink resolved by a declared convention)
        keep = ((verdict != J.PASS) | (judged.reason.reshape(-1) == J.CONVENTION)).nonzero().flatten()
        if not keep.numel():
            return counted

        def pick(t: torch.Tensor) -> torch.Tensor:
            return t.expand_as(judged.verdict).reshape(-1)[keep]

        left = right = None
        if slopes is not None:
            left, right = pick(slopes[0].to(torch.float64)), pick(slopes[1].to(torch.float64))
        self.parts.append(Part(output, rows[keep], cols[keep], pick(observed.detach().to(torch.float64)),
                               judged.take(keep), left, right, kind, note))
        return counted

    def _add_passed(self, judged: J.Judged, reference: torch.Tensor, output: int | None, rows: torch.Tensor,
                    cols: torch.Tensor) -> int:
        """:meth:`add` for a block whose every entry passed (rows and cols expanded to its shape)."""
        import torch

        counted = int(judged.verdict.numel())
        self.total += counted
        if not counted:
            return counted
        shape = judged.verdict.shape
        diff = judged.diff.expand(shape)
        ref = reference.detach()
        ref = ref if ref.dtype == torch.float64 else ref.to(torch.float64)
        if counted <= SMALL_BLOCK and ref.shape == shape:  # a few values: in Python floats, the same arithmetic
            diffs, refs = E.flat_list(diff), E.flat_list(ref)
            largest = max(diffs)
            at = diffs.index(largest)  # the first largest, as argmax
            rel = max(_relative(d, r) for d, r in zip(diffs, refs))
        else:
            flat = diff.reshape(-1)
            at = int(flat.argmax())
            largest = float(flat[at])
            rel = float(torch.div(diff, ref.abs()).masked_fill_(diff == 0, 0.0).nan_to_num_(nan=math.inf).max())
        largest, rel = J.unbounded(largest), J.unbounded(rel)
        if largest > self.max_abs or self.at is None:
            self.max_abs = largest
            where = unravel(at, tuple(shape))
            self.at = self.location(output, int(rows[where]), int(cols[where]))
        self.max_rel = max(self.max_rel, rel)
        return counted

    def add_passed_values(self, diffs: list[float], refs: list[float], width: int, output: int | None,
                          cols: list[int]) -> int:
        """:meth:`add` for a block that passed whole, given as Python floats: |observed - reference| and the
        reference, row-major over output elements 0, 1, ... by the input elements *cols* (*width* of them).
        The same counts, largest differences and location as :meth:`_add_passed`."""
        counted = len(diffs)
        self.total += counted
        if not counted:
            return counted
        largest = max(diffs)
        at = diffs.index(largest)  # the first largest, as argmax
        rel = max(map(_relative, diffs, refs))
        if largest > self.max_abs or self.at is None:
            self.max_abs = J.unbounded(largest)
            self.at = self.location(output, at // width, cols[at % width])
        self.max_rel = max(self.max_rel, rel)
        return counted

    def unheld(self, cols: torch.Tensor) -> torch.Tensor:
        """*cols* without the held (non-finite) input elements."""
        import torch

        return cols if self.held is None or not len(self.held) else cols[~torch.isin(cols, self.held)]

    def drop_columns(self, cols: torch.Tensor) -> None:
        """Forget what was judged for input elements *cols* (they are being judged again)."""
        import torch

        for part in self.parts:
            keep = ~torch.isin(part.cols, cols)
            part.judged = part.judged.take(keep)
            for name in ("rows", "cols", "observed", "left", "right"):
                value = getattr(part, name)
                if value is not None:
                    setattr(part, name, value[keep])

    @property
    def verdict(self) -> str:
        if self.failed or any(c.verdict == "fail" for c in self.extra):
            return "fail"
        if self.inconclusive or any(c.verdict == "inconclusive" for c in self.extra):
            return "inconclusive"
        return "pass"

    def comparisons(self, limit: int | None = None) -> list[Comparison]:
        """The comparisons that did not pass, worst first: failures before inconclusive ones, larger
        differences first; input-level ones (metadata, projections) lead."""
        import torch

        out = list(self.extra)
        if not self.parts:
            return out[:limit] if limit is not None else out
        verdict = torch.cat([p.verdict for p in self.parts])
        diff = torch.cat([(p.observed - p.reference).abs().nan_to_num(nan=math.inf) for p in self.parts])
        # fails first (larger differences first), then inconclusive ones, then noteworthy passes
        key = torch.where(verdict == J.FAIL, diff.clamp_min(0) + 1.0,
                          torch.where(verdict == J.INCONCLUSIVE, -1.0 / (1.0 + diff), -2.0 + -1.0 / (1.0 + diff)))
        order = torch.argsort(key, descending=True, stable=True)
        if limit is not None:
            order = order[: max(0, limit - len(out))]
        sizes = [len(p.verdict) for p in self.parts]
        starts = [sum(sizes[:i]) for i in range(len(sizes))]
        for flat in order.tolist():
            i = max(k for k, s in enumerate(starts) if s <= flat)
            out.append(self._comparison(self.parts[i], flat - starts[i]))
        return out

    def _comparison(self, p: Part, i: int) -> Comparison:
        obs, ref = float(p.observed[i]), float(p.reference[i])
        slopes = None
        if p.left is not None and p.right is not None:
            pair = (float(p.left[i]), float(p.right[i]))
            slopes = pair if all(math.isfinite(v) for v in pair) else None
        j = p.judged
        code = int(j.reason[i])
        reason = J.reason_text(code, obs, ref, slopes, reference_kind=self.reference_kind)
        if p.note:
            reason = f"{reason}; {p.note}" if reason else p.note
        allowance = Allowance(j.atol, float(j.rtol_term[i]), J.unbounded(float(j.evidence[i])),
                              J.unbounded(float(j.allowed[i])))
        kind = p.kind if p.kind and code in (J.OUTSIDE, J.OK) else J.KINDS[code]
        return Comparison(self.location(p.output, int(p.rows[i]), int(p.cols[i])), ref, obs, allowance,
                          J.NAMES[int(j.verdict[i])], kind, reason, self.reference_kind, slopes)

    def discrepancy(self, keep: int, kept: list[Comparison] | None = None) -> Discrepancy:
        """Counts of the located comparisons (input-level ones, such as a gradient's dtype, lead the
        kept comparisons but are not element counts); *kept*: ``comparisons(keep)``, where the caller has it."""
        return Discrepancy(self.total, self.failed, self.inconclusive, self.exact, self.why_inexact, self.max_abs,
                           self.max_rel, self.at, tuple(self.comparisons(keep) if kept is None else kept))
