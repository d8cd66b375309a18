"""Full mode: every Jacobian entry of a function's backward judged and located.

Two stages, the same principle as the directional check's: a quick stage can only accept.

1. **Quick stage** (per column): central differences with h = cbrt(eps) max(1, |x|), batched; or
   column groups when the Jacobian is diagonal or banded (a probe column bounds the band; each band
   is verified with two random draws, never assumed; the columns holding an entry a band or group did not
   accept are judged again one by one, at their own steps); or one-sided differences with steps
   max(1, |x|) when the function is verified affine in the input. An entry is accepted when
   autograd agrees to within the tolerance plus the rounding bound of that difference.
2. **Final stage**: every column holding an entry the quick stage did not accept — and every
   column of an input whose directional confirmation (Ridders along a random direction, run in
   every mode) disagrees, unless the same confirmation along the columns the quick stage accepted
   agrees (then the disagreement lies in the others) — is judged with Ridders' extrapolation per
   entry, whose error estimate enters the allowance, and with one-sided slopes that expose kinks
   and discontinuities; where an entry passes on a bound coarser than RESOLVE of its value, Ridders
   starts again from smaller steps.

The analytic side is autograd's vᵀJ in row chunks with randomly scaled, non-unit ``grad_outputs``,
so a backward that ignores ``grad_output`` cannot pass. Memory: autograd's Jacobian (8 M N bytes)
plus one chunk of numeric columns.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from . import evaluate as E
from . import judge as J
from .evaluate import (
    EPS_POWERS,
    SMALL_BATCH,
    Info,
    OutOfDomain,
    Problem,
    _chunk,
    analytic_rows,
    batched_outputs,
    central_columns,
    forward_columns,
    numeric_columns,
    ridders_columns,
    slopes,
    steps,
)
from .findings import Findings, Seen
from .numeric import RIDDERS_BASE, extrapolate, truncation
from .tolerances import (
    RESOLVE,
    ROUNDING_ULPS,
    SAFETY,
    SLOPE_REL,
    SLOPE_ROUNDING,
    STRUCTURE_REL,
    STRUCTURE_ULPS,
    ToleranceUsed,
)

if TYPE_CHECKING:
    import torch

#: analytic columns of (input j, output k) for flat input indices: (M_k, len(cols)), or None (no gradient)
Columns = Callable[[int, int, "torch.Tensor"], "torch.Tensor | None"]


@dataclass
class Quick:
    """The quick stage's numeric columns [a, b) of input j, per output, and their rounding bounds."""

    values: list[torch.Tensor]  # (M_k, b - a)
    rounding: list[torch.Tensor]  # broadcastable to (M_k, b - a)


def full(problem: Problem, gen: Callable[[], torch.Generator], tol: ToleranceUsed, info: Info,
         confirm: Callable[[int], bool], first: tuple[torch.Tensor | None, ...], vs: list[torch.Tensor],
         confirm_without: Callable[[int, torch.Tensor], bool] | None = None,
         confirm_along: Callable[[int, torch.Tensor | list[float], bool], bool] | None = None,
         left_open: Callable[[int, torch.Tensor | list[float], bool], int] | None = None,
         confirm_open: Callable[[int, torch.Tensor | list[float]], bool] | None = None,
         confirm_alone: Callable[[int], bool] | None = None) -> dict[int, Findings]:
    """Judge every Jacobian entry. *first* is the first backward's vᵀJ per checked input, all outputs
    weighted by *vs* at once (for a scalar output that is the whole Jacobian row, times the weight). *gen* makes
    the random stream (called once, at the first draw: a scalar output's check draws nothing).

    The Jacobian is judged one output at a time, and a backward may go wrong only when several outputs
    receive a gradient together; so autograd's rows, weighted by *vs* and summed, must equal *first*
    to rounding. Where they do not (or the rows were not all built), *confirm(j)* runs the directional
    confirmation for input j and says whether it disagreed: then every column of j is judged in the
    final stage, unless *confirm_without(j, cols)*, the same confirmation with the columns *cols* (those the
    quick stage did not accept, which the final stage judges anyway) left still, agrees: the disagreement is
    then theirs, and the columns the quick stage accepted stand on the evidence they stand on wherever the
    confirmation agrees (nn.functional.hardsigmoid, whose backward multiplies by a float32 1/6: its 5 wrong
    columns of 20 were judged by Ridders with the 15 right ones, 328 evaluations instead of 152).

    Where the confirmation agrees, its allowance (rtol of a sum over every column) can exceed what 1e-8 of a
    small entry moves it: a backward off by 1e-8 at the one element of |x|^1.5 at 0.01 among 24 of order one
    passed. So the columns holding an entry the quick stage could not resolve to RESOLVE are found
    (:func:`_unresolved_terms`: per column, the smallest such entry's term |v_r J_rc|), and
    *confirm_along(j, terms)* confirms again, on their own, those whose entries the confirmation did not resolve
    either (RESOLVE |v_r J_rc u_c| within the error its evidence leaves possible), unless, for a function of one
    input, they are every column it moved, and says whether that disagreed; then every column of j is judged in
    the final stage. Where every entry of the only input's Jacobian is non-zero (every projection moves every
    output, and carries its rounding): with one output element, a column is confirmed again only where 1e-8 of
    its entry's term along that column alone exceeds that rounding; with several, none where every column holds
    an unresolved entry. Where such entries are all that asks for the confirmation (one input, every column
    accepted, no disagreement with the first backward, no entry beyond the tolerance, no band) and their columns
    are a proper part of it, *confirm_along* is called at once instead: one projection along them, not two.
    Where that projection leaves some of them unresolved (*left_open(j, terms, False)*: how many no agreeing
    projection resolved), the whole confirmation and the projection after it are made as well: a split of the one
    along every unresolved column, down to one element of (c |x|^1.5).sum() at 0.01 among 8, accepted a quick stage
    whose allowance was 1.5e-8 of that element's term, and a bug of 1e-8 there passed that the two projections fail.
    Every decision above is taken on central differences' bound alone, as before the fourteenth session. The
    evidence seen then opens more (:func:`_unresolved_terms` with found.seen: an accepted entry's difference, a
    column whose open entries cancel); *confirm_open(j, terms)* projects along those no agreeing projection resolves
    (with its truncation taken for each term's own, directional.resolves) and says whether that disagreed. It only
    adds a projection: when these rules took the decisions, more open columns made fewer or wider projections, and a
    reviewer's 1e-8 bugs that the projections before them fail passed (36 in two scans). At the end
    *left_open(j, terms, True)* is told the columns still holding such entries (those not judged by Ridders), and
    the record names those no projection resolved to 1e-8 either. An input of several that asks for the confirmation
    only because autograd gives it no gradient (and nothing asked before it) is confirmed by *confirm_alone(j)*: its
    own projection, the one the confirmation makes after its joint projection of every input (which leaves a term
    of 0 open always); where that passes it decides, and no other input is projected for it, else the whole
    confirmation runs as before. Not where an input before it is loose (found.loose: a quick stage accepted an entry
    on a difference larger than the entry itself), which the whole confirmation covers; and a loose input after it
    asks for the whole confirmation itself."""
    import torch

    made: list[torch.Generator] = []

    def generator() -> torch.Generator:
        if not made:
            made.append(gen())
        return made[0]

    found = {j: Findings(j, problem.names[j], tuple(problem.inputs[j].shape),
                         [tuple(o.shape) for o in problem.outputs], held=problem.held(j)) for j in problem.diff}
    banded = _banded(problem, generator, info) if len(problem.diff) == 1 and len(problem.outputs) == 1 else None
    derived = False  # autograd's rows are the first backward itself: comparing them with it is no evidence
    if banded is not None:
        analytic: dict[tuple[int, int], torch.Tensor | None] = {}
    elif len(vs) == 1 and len(problem.outputs) == 1 and problem.outputs[0].numel() == 1:
        # a scalar output: the first backward (random weight v, |v| in [0.5, 1.5)) already gave v J; a
        # backward that ignores its grad_output still fails, as it gives J instead of v J
        v = vs[0].to(problem.outputs[0].dtype).item()
        analytic = {(j, 0): None if g is None else _row_over(g, v) for j, g in zip(problem.diff, first)}
        derived = True
    else:
        analytic = _analytic(problem, generator, info)
    weighted: list[Weighted] = []  # the output weights as _together uses them, made once for every input
    asked = False  # the confirmation has run (for every input at once): asking again costs nothing
    alone: set[int] = set()  # inputs given no gradient confirmed on their own, without the whole confirmation
    for pos, j in enumerate(problem.diff):
        central: Central = []
        bases: list[float] = []
        extrapolated: Extrapolated = {}
        suspect = _quick(problem, j, analytic, banded, tol, found[j], info, central, bases)
        if central:  # Richardson's extrapolation from the quick stage's differences, before Ridders
            suspect = _richardson(problem, j, suspect, central, analytic, banded, tol, found[j], info,
                                  extrapolated if _coarse_evidence(problem, j) else None)
        disagree = not derived and not _together(problem, j, analytic, banded, first[pos], vs, tol, weighted)
        # the confirmation runs where central differences cannot resolve RESOLVE of an entry, and where an entry
        # passed beyond the tolerance itself, on the evidence's bound alone (found[j].beyond)
        beyond = found[j].beyond and problem.inputs[j].dtype == torch.float64  # where the default promise is made
        fixed = found[j].held
        width = problem.inputs[j].numel() - (0 if fixed is None else len(fixed))  # the columns of j that move
        # the entries central differences could not resolve to RESOLVE (a band's are never all resolved: see
        # _unresolved_terms); one column of one input is never confirmed again (the confirmation moved it alone)
        base = min(bases, default=EPS_POWERS["cbrt"])
        # and those the evidence seen leaves open too (the differences accepted, columns whose entries cancel)
        unresolved, opened = _unresolved_pair(problem, j, analytic, banded, tol, vs, base, found[j].seen)
        # autograd gives the input no gradient at all (vᵀJ exactly 0, or None): central differences at their small
        # steps read exactly 0 too where a slope is too small to move the outputs there, and agree with it, as a
        # structural zero does (1 + 1e-12 x.sum(): a backward giving 0 passed full mode, where directional mode, whose
        # steps move the output and whose Ridders resolves it, failed it); the confirmation decides (_silent). Not
        # where every output is exactly 0: floats are dense there, so differences that read exactly 0 bound the slope
        # to nothing a step can miss (relu or x * 0 on their flat sides, where the confirmation near a kink took 87
        # evaluations instead of 6, deciding nothing)
        silent = (tol.default and _silent(first[pos]) and problem.inputs[j].numel() > 0
                  and any(bool(o.ne(0).any()) for o in problem.outputs))
        # and the same for one output of several: autograd gives the input no gradient from it (its block None or
        # exactly 0) while the others' reach it, so vᵀJ is not 0. A backward dropping a slope of 1e-11 from the
        # second output, (x.sum() + w.sum(), 1.5 + 1e-11 x.sum() + w.sum()), passed full mode on every seed (its
        # differences read exactly 0 too) where directional mode, which checks each output alone, failed it
        silent = silent or (tol.default and len(problem.outputs) > 1 and banded is None and not derived
                            and problem.inputs[j].numel() > 0 and _silent_output(problem, j, analytic))
        others = disagree or beyond or banded is not None or unresolved is not None or opened is not None
        # an input of several asking only for its silence (nothing asked before it): its own projection, as the
        # confirmation makes it after the joint one (every input moved at once, which leaves a term of 0 open
        # always), decides where it passes; where it does not, the whole confirmation runs (confirm_alone says which).
        # Its neighbours are not projected for it (two scalar inputs: clamp_max, copysign, fmod, the index ops, 14
        # evaluations for 6 of gradcheck's, now 10), unless one of them is loose: an entry accepted on a difference
        # larger than itself (autograd's 0 where the differences read a slope), which the whole confirmation covered
        # (a backward dropping a slope of 1e-8 from an output of 100, below what the open-entry rule of
        # _unresolved_terms sees, failed beside a silent input on 11 of 20 seeds, as directional mode fails it, and
        # passed on all 20 without that cover: a review). Before it, the silent input is confirmed whole; after it,
        # a loose input asks for the whole confirmation, as every input after a silent one did
        # (a silent input's own looseness is its own projection's to see)
        quiet = (silent and not others and not asked and confirm_alone is not None and len(problem.diff) > 1
                 and not any(found[i].loose and i not in alone for i in problem.diff[:pos]) and confirm_alone(j))
        if quiet:
            alone.add(j)
        asked = asked or others or (silent and not quiet) or (bool(alone) and not quiet and found[j].loose)
        noted = opened  # (the columns judged by Ridders are set to 0 in it below)
        if width < 2 and len(problem.diff) == 1:
            unresolved = None

        def every(j: int = j) -> torch.Tensor:  # (made only where needed)
            return found[j].unheld(torch.arange(problem.inputs[j].numel()))
        resolving = asked  # the confirmation agreed (or agreed along the accepted columns): small entries next
        agreed = "the directional confirmation agreed"
        # one input, every column accepted, and the confirmation asked for nothing but entries central differences
        # could not resolve (no disagreement with the first backward, no entry beyond the tolerance, no band): the
        # projection along those columns alone, the rest still, is the one confirm_along makes after a whole one
        # that leaves them open, so it is made at once (var_mean of 5 elements: 18 evaluations, now 14; polygamma of
        # 25 near its poles: 44, now 24)
        direct = 0
        if (confirm_along is not None and unresolved is not None and len(problem.diff) == 1 and not disagree
                and not silent
                and not beyond and banded is None and not len(suspect) and first[pos] is not None):
            direct = _count_unresolved(unresolved, fixed)
            direct = direct if direct < width else 0  # every column: the whole confirmation is that projection
        if direct and confirm_along is not None and unresolved is not None:
            resolving = False
            if confirm_along(j, unresolved, False):
                found[j] = _afresh(problem, found[j])
                suspect = every()
                info["confirmation"] = (f"the projection along the column(s) whose entries central differences could "
                                        f"not resolve to 1e-8 ({direct} of {width}) disagreed: every column judged "
                                        "by Ridders")
            elif left_open is not None and left_open(j, unresolved, False):
                direct, resolving = 0, True  # it left some open: the whole confirmation, and the projection after it
        if not direct and asked and confirm(j):
            if (confirm_without is not None and 0 < len(suspect) < width
                    and confirm_without(j, suspect)):
                info["confirmation"] = ("the directional confirmation disagreed, and agreed along the columns the "
                                        "quick stage accepted: the others judged by Ridders")
                agreed += " along the columns the quick stage accepted"
            else:
                # every column is judged again, so its entries are counted once, there: not also as the quick stage did
                found[j] = _afresh(problem, found[j])
                suspect = every()
                info["confirmation"] = "the directional confirmation disagreed: every column judged by Ridders"
                resolving = False
                if banded is not None:
                    # a band holds autograd's entries inside it only: an entry the backward invents outside it (below
                    # what the band test's draws resolve beside a steep diagonal) is then judged, and named, against
                    # autograd's rows, built here
                    banded, analytic = None, _analytic(problem, generator, info)
                    info["confirmation"] += ", against autograd's rows (the band's own entries were not enough)"
        hopeless = False  # (a dense Jacobian of several outputs, every column open: no projection resolves finer)
        if resolving and confirm_along is not None:
            # the accepted columns holding an entry central differences could not resolve to 1e-8, on their own
            count = 0
            if isinstance(unresolved, list):  # a few entries: in Python floats
                for i in suspect.tolist():
                    unresolved[i] = 0.0  # judged by Ridders in any case
                count = _count_unresolved(unresolved, fixed)
            elif unresolved is not None:
                unresolved[suspect] = 0.0  # judged by Ridders in any case
                count = _count_unresolved(unresolved, fixed)
            # one input, every entry non-zero: a projection along any of its columns moves every output, and carries
            # their rounding. With one output element, each column's one entry is what a projection along it alone
            # resolves, and confirm_along makes none where the rounding alone exceeds 1e-8 of every such term
            # ((|x|^1.5).sum() at 0.01 among 24 of order one: its 1e-8 bug fails); with several, where every column
            # is unresolved, none is made, as before the twelfth session (softmin of 5 elements: 26 evaluations, 14
            # without; y = M (x^3 s), M 25 x 25: 20 more, none resolving)
            one = sum(o.numel() for o in problem.outputs) == 1
            # (autograd's rows scanned for zeros only where the answer matters)
            dense = (count > 0 and (one or count == width) and len(problem.diff) == 1 and banded is None
                     and all(a is None or bool((a != 0).all()) for (i, _), a in analytic.items() if i == j))
            single = dense and one
            hopeless = dense and not one and count == width
            if unresolved is not None and count and not hopeless and confirm_along(j, unresolved, single):
                # their entries were counted as the quick stage accepted them: every column is judged again, and
                # counted once, there
                found[j] = _afresh(problem, found[j])
                suspect = every()
                info["confirmation"] = (f"{agreed}, and disagreed along the column(s) whose entries neither central "
                                        f"differences nor it could resolve to 1e-8 (of the {count} central differences "
                                        "could not): every column judged by Ridders")
        if confirm_open is not None and opened is not None and len(suspect) < width and not hopeless:
            extra = list(opened) if isinstance(opened, list) else opened.clone()
            _count_unresolved(extra, fixed)  # (held columns set to 0)
            if isinstance(extra, list):
                for i in suspect.tolist():
                    extra[i] = 0.0
            else:
                extra[suspect] = 0.0
            if confirm_open(j, extra):
                found[j] = _afresh(problem, found[j])
                suspect = every()
                info["confirmation"] = ("the projection along the column(s) whose entries the evidence seen leaves "
                                        "open (an accepted difference, entries that cancel, a term's own "
                                        "truncation) disagreed: every column judged by Ridders")
        if len(suspect):
            _final(problem, j, suspect, analytic, banded, tol, found[j], info, extrapolated)
        if left_open is not None and noted is not None and len(suspect) < width:
            for i in suspect.tolist():
                noted[i] = 0.0  # judged by Ridders, whose entries say where they are coarse
            if fixed is not None:
                for i in fixed.tolist():
                    noted[i] = 0.0  # held: not judged
            left_open(j, noted, True)
    _leave_out_dead(problem, found)
    return found


def _leave_out_dead(problem: Problem, found: dict[int, Findings]) -> None:
    """Rows of outputs not finite at the point (problem.dead) are not judged: every evaluation reads 0 there and
    autograd's rows are set to 0 there (_analytic, _banded), so each of their entries passed on 0 against 0, and is
    taken out of the count here (the record names those rows as not checked)."""
    if problem.dead is None:
        return
    rows = sum(int(d.sum()) for d in problem.dead if d is not None)
    for f in found.values():
        f.total -= rows * (problem.inputs[f.input].numel() - _held_count(f))


def _afresh(problem: Problem, f: Findings) -> Findings:
    """Input f.input's findings begun again (its held elements kept): every column is judged again, and counted once."""
    return Findings(f.input, problem.names[f.input], tuple(problem.inputs[f.input].shape),
                    [tuple(o.shape) for o in problem.outputs], held=f.held)


def _count_unresolved(terms: torch.Tensor | list[float], fixed: torch.Tensor | None) -> int:
    """The columns holding an unresolved entry (*terms* > 0), those *fixed* (held, not judged) set to 0 first."""
    if isinstance(terms, list):  # a few entries: in Python floats
        for i in [] if fixed is None else fixed.tolist():
            terms[i] = 0.0
        return sum(t > 0 for t in terms)
    if fixed is not None:
        terms[fixed] = 0.0
    return int((terms > 0).sum())


EPS64 = 2.220446049250313e-16  # float64 machine epsilon, as torch.finfo(torch.float64).eps


def _unresolved_entries(size: torch.Tensor, evidence: torch.Tensor, tol: ToleranceUsed,
                        below: torch.Tensor | None = None) -> torch.Tensor:
    """Entries |J| = *size* worth resolving (above their allowance) whose quick-stage *evidence* is coarser than
    RESOLVE of them: :func:`_unresolved_terms`' rule; with *below* (per entry, :func:`_unresolved_terms`), also
    the non-zero entries within their allowance that are at least that."""
    worth = size > evidence + tol.atol + tol.rtol * size
    picked = worth & (evidence > RESOLVE * size)
    if below is not None:
        picked |= ~worth & (size > 0) & (size >= below)
    return picked


TINY_TERM = 5e-324  # an unresolved entry's term where its output weight is 0 (a non-finite output): not "resolved"
#: an accepted entry whose difference is below this fraction of RESOLVE of it is not kept in found.seen: where the
#: evidence's allowance resolves RESOLVE of it, the backward there is known to within its difference plus the
#: evidence's own bound, (SEEN + 1 / SAFETY) RESOLVE of it, inside the promise
SEEN = 0.1


def _seen(found: Findings, k: int, rows: torch.Tensor, cols: torch.Tensor, diff: torch.Tensor,
          obs: torch.Tensor) -> None:
    """Keep in found.seen the entries of a block a quick stage accepted (flat *rows* and *cols*, broadcasting with
    *diff*; *obs* autograd's entries) whose difference is above SEEN RESOLVE of them, for :func:`_unresolved_terms`."""
    import torch

    shape = diff.shape
    entry = obs.detach().to(torch.float64).expand(shape)
    keep = diff > (SEEN * RESOLVE) * entry.abs()
    if bool(keep.any()):
        found.seen.append((k, rows.expand(shape)[keep], cols.expand(shape)[keep], diff[keep], entry[keep]))
        found.loose = found.loose or bool((diff[keep] > entry[keep].abs()).any())


def _seen_values(found: Findings, k: int, diffs: list[float], obs: torch.Tensor | None, at: list[int],
                 clean: list[int] | None = None) -> None:
    """:func:`_seen` for a block judged in Python floats: *diffs* row-major over the columns *at* (*obs*,
    autograd's block, the same shape, None for zeros), only the columns at positions *clean* (all: None)."""

    w = len(at)
    ok = None if clean is None else set(clean)
    if obs is None:  # no entry of autograd's to resolve; loose where the differences read more than 0
        found.loose = found.loose or any(d > 0 for i, d in enumerate(diffs) if ok is None or i % w in ok)
        return
    limit = SEEN * RESOLVE
    entries = E.flat_list(obs)
    chosen = [i for i, (d, e) in enumerate(zip(diffs, entries)) if d > limit * abs(e) and (ok is None or i % w in ok)]
    if chosen:  # (as Python numbers: the small path reads them so; the tensor path makes tensors of them)
        found.seen.append((k, [i // w for i in chosen], [at[i % w] for i in chosen], [diffs[i] for i in chosen],
                           [entries[i] for i in chosen]))
        found.loose = found.loose or any(diffs[i] > abs(entries[i]) for i in chosen)


def _silent(g: torch.Tensor | None) -> bool:
    """Whether autograd's vᵀJ for an input is None or exactly 0 everywhere (a strided tensor: a sparse one is read
    as it is, not scanned)."""
    import torch

    return g is None or (g.layout == torch.strided and g.numel() > 0 and not bool(g.any()))


def _silent_output(problem: Problem, j: int, analytic: dict[tuple[int, int], torch.Tensor | None]) -> bool:
    """Whether autograd gives input j no gradient from some output that is not exactly 0 everywhere: its Jacobian
    block None or exactly 0 (rows of outputs not finite at the point are 0 in both, _analytic and Problem.dead). A
    None block of an output whose graph never reaches input j (problem.reached) does not count: no backward gave it,
    ((x * 2, w * 3), broadcast_tensors, the slices of separate inputs; 50 scalar inputs and 50 outputs each of one
    took 304 evaluations instead of 100 with it, a review); a backward returning None for an input its node does
    reach (set_materialize_grads(False)) does."""
    for k, o in enumerate(problem.outputs):
        block = analytic.get((j, k))
        if block is None and problem.reached is not None and k < len(problem.reached) and j not in problem.reached[k]:
            continue
        if (block is None or (block.numel() > 0 and not bool(block.any()))) and o.numel() and bool(o.ne(0).any()):
            return True
    return False


def _row_over(g: torch.Tensor, v: float) -> torch.Tensor:
    """g / v as one float64 row (a scalar output's Jacobian row from its first backward, whose weight was v): a few
    float64 values divided in Python floats, the same IEEE division (a weight of exactly 0, drawn with probability
    2⁻⁵³, takes the tensor division, whose 0/0 and x/0 Python refuses)."""
    import torch

    if E.LEAN and g.dtype == torch.float64 and g.numel() <= E.TINY and v != 0:
        return E.fresh([a / v for a in E.flat_list(g)], (1, g.numel()))
    return (g.detach().to(torch.float64) / v).reshape(1, -1)


def _seen_tensors(block: Seen) -> tuple[int, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A block of Findings.seen as tensors (:func:`_seen_values` keeps Python numbers)."""
    k, rows, cols, diff, entry = block
    if isinstance(rows, list) and isinstance(cols, list) and isinstance(diff, list) and isinstance(entry, list):
        return k, E.fresh_index(rows), E.fresh_index(cols), E.fresh(diff, (len(diff),)), E.fresh(entry, (len(entry),))
    assert not isinstance(rows, list) and not isinstance(cols, list) and not isinstance(diff, list)
    assert not isinstance(entry, list)
    return k, rows, cols, diff, entry


def _unresolved_terms(problem: Problem, j: int, analytic: dict[tuple[int, int], torch.Tensor | None],
                      banded: Band | None, tol: ToleranceUsed, vs: list[torch.Tensor], base: float,
                      seen: list[Seen] | None = None
                      ) -> torch.Tensor | list[float] | None:
    """Per column of input j (flat, float64): the smallest term |v_r J_rc| (output weights *vs*) of an entry the
    quick stage does not resolve to RESOLVE (the default tolerance's promise), what that entry moves a projection
    along v by per unit of u_c; 0 where every entry is resolved; None where every entry of every column is, and
    outside the default promise (a tolerance the user set, or evidence in another precision). A list of Python
    floats for a few entries (:func:`_unresolved_terms_small`).

    An entry is unresolved where its evidence term, SAFETY ROUNDING_ULPS eps max(1, |f_r|) / h_c, exceeds
    RESOLVE |J_rc| and |J_rc| exceeds its allowance (an entry below its allowance has no relative error worth
    resolving), however small against the output's largest entry: entries below 1% of it were exempt, and
    y = 1e6 x0^2 + x1^2 with dy/dx1 off by 1% passed full mode (its central differences resolve 3e-9 of
    |y| = 1e6, 1.5e-3 of dy/dx1) where directional mode, whose output weights are 1 / max(1, |y|), failed it on
    every seed. A loss summing many terms (|f| of 460 against entries of 1) or sigmoid (entries of at most 1/4
    against max(1, |f|) = 1) is not resolved: a backward off by 1e-8 there passes central differences, and the
    directional confirmation, 100 times finer, decides. *base*: the quick steps' h_c / max(1, |x_c|), the
    smallest used (an affine function's one-sided steps of max(1, |x|) resolve far finer). A band (autograd's
    entries not built) asks the confirmation whatever this says (full()): its two draws agree to STRUCTURE_REL
    of its entries, so a dependence outside it smaller than that (1e-7 beside entries of 1) is taken for zero
    on both sides, and with a tolerance the user set it passed full mode where directional mode and the same
    function on 15 elements fail it.

    The evidence term is what the allowance of a right backward's entry is; the entry a backward off there by
    RESOLVE moves by that much, less the evidence's own error, so at the edge (c sin(3x): evidence 2.93e-9 against
    RESOLVE |J| = 2.95e-9) a bug of 1e-8 passed. Where a quick stage accepted an entry with a difference *d*
    (*seen*: found.seen, those above SEEN RESOLVE of it), the backward is known there only to within d plus the
    evidence: the entry is unresolved where evidence + d exceeds RESOLVE |J_rc| (as the projections' own rule,
    directional._consistent, adds their disagreement); and a column's term is no larger than the sum of its open
    entries' (:func:`_with_sums`). With *seen* None (full()'s decisions, as before the fourteenth session) neither.

    With *seen* too, an entry within its allowance is unresolved where it moves its output, over a move of its
    input's size, by RESOLVE of the output's own size or by more than SAFETY times its rounding over Ridders'
    first step: |J_rc| max(1, |x_c|) >= min(RESOLVE |f_r|, SAFETY ROUNDING_ULPS eps max(1, |f_r|) / RIDDERS_BASE).
    The allowance counts rounding at eps max(1, |f|) over the quick stage's steps, and exempted such entries: where
    every output is far below one, every entry (1e-9 sin x: a backward 50% off at one element passed full mode,
    and directional mode, whose weights leave its projection of order 1e-9, failed it; exp(c x)'s entry of 5e-22
    beside outputs of 6e27, silently); where an output is large against its slope, its whole gradient (1000 +
    1e-6 sin x: a backward 10% off, even 100%, passed full mode silently and failed directional mode, whose
    projection resolves 1e-6 at steps of 1e-2 to about 2e-9). Such an entry is then resolved by a projection
    along its column (full(): confirm_open) or named as open. So is an entry autograd gives as exactly 0 where a
    quick stage's difference *d* (the slope it saw) would be such an entry, with d for its size, and d exceeds what
    the outputs' rounding alone moves a difference by, ROUNDING_ULPS eps max(1, |f_r|) / h_c (the evidence term
    without its SAFETY), and the measured rounding of f_r over h_c (evaluate.measure_noise: 4 evaluations, made only
    where such an entry is seen, so the rule does not depend on what an earlier stage measured): (sin(k0) + x0, 100 +
    1e-7 k1) with a backward dropping k1's slope passed full mode on every seed (d about 1e-7, 3.4 times that
    rounding, within an allowance of 3e-7; an entry of 0 was never open), where directional mode, whose larger
    steps resolve it, failed it. A structural zero, whose differences read exactly 0, stays resolved, and so does
    one whose differences read rounding only (without that bound a review found cumsum then diff less x, softmax's
    shift and layer norm's centring named as open, and slopes of 1e-11 dropped below the outputs' rounding
    inconclusive where directional mode passes them; with the nominal rounding alone, cumsum then diff less x at
    x0 = 1000, whose differences read the rounding of its large cumsum, was still named)."""
    import torch

    x = problem.inputs[j]
    if not tol.default or x.dtype != torch.float64:
        return None
    summed = seen is not None  # (None: central differences' bound alone, each entry on its own)
    seen = seen or []
    if (E.LEAN and banded is None and all(o.dtype == torch.float64 for o in problem.outputs)
            and sum(a.numel() for (i, _), a in analytic.items() if i == j and a is not None) <= J.SMALL):
        small = _unresolved_terms_small(problem, j, analytic, tol, vs, base, seen, summed)
        assert not isinstance(small, tuple)
        return small
    terms = torch.full((x.numel(),), math.inf, dtype=torch.float64)
    sums = torch.zeros(x.numel(), dtype=torch.float64)  # per column, the sum of its unresolved entries' v_r J_rc
    x_size = problem.x_size(j).reshape(-1)
    for k, rows, cols, diff, entry in map(_seen_tensors, seen):  # entries resolved but for their difference
        out = problem.outputs[k]
        unit = SAFETY * ROUNDING_ULPS * torch.finfo(out.dtype).eps
        evidence = unit * problem.f_size(k).reshape(-1)[rows] / (base * x_size[cols])
        size = entry.abs()
        picked = ((size > evidence + tol.atol + tol.rtol * size) & ~(evidence > RESOLVE * size)
                  & (evidence + diff > RESOLVE * size))
        term = vs[k].reshape(-1).to(torch.float64)[rows] * entry
        # autograd gives the entry exactly 0 where the output moved, by more than the outputs' rounding: open at the
        # slope the difference saw (as _unresolved_terms_small, the same IEEE operations)
        moved = (size == 0) & (diff > evidence / SAFETY) & (
            diff >= torch.minimum(_own(problem.f_scale(k))[rows], (unit / RIDDERS_BASE)
                                  * problem.f_size(k).reshape(-1)[rows]) / x_size[cols])
        if bool(moved.any()):  # and by more than the measured rounding (measured once, only where it decides)
            moved &= diff > problem.noise(k)[rows] / (base * x_size[cols])
        picked |= moved
        term = torch.where(moved, vs[k].reshape(-1).to(torch.float64)[rows] * diff, term)
        terms.scatter_reduce_(0, cols[picked], term[picked].abs().clamp_min_(TINY_TERM), reduce="amin")
        sums.index_add_(0, cols[picked], term[picked])
    if banded is not None:
        if banded.analytic is None:
            return None
        unit = SAFETY * ROUNDING_ULPS * torch.finfo(problem.outputs[0].dtype).eps
        evidence = unit * problem.f_size(0)[banded.rows] / (base * problem.x_size(j)[banded.cols])
        below = (torch.minimum(_own(problem.f_scale(0)), (unit / RIDDERS_BASE) * problem.f_size(0))[banded.rows]
                 / problem.x_size(j)[banded.cols]) if summed else None
        picked = _unresolved_entries(banded.analytic.abs(), evidence, tol, below)
        term = vs[0].reshape(-1).to(torch.float64)[banded.rows] * banded.analytic
        terms.scatter_reduce_(0, banded.cols[picked], term[picked].abs().clamp_min_(TINY_TERM), reduce="amin")
        sums.index_add_(0, banded.cols[picked], term[picked])
        return _with_sums(terms, sums if summed else None)
    h = base * problem.x_size(j).reshape(1, -1)
    for k, out in enumerate(problem.outputs):
        a = analytic.get((j, k))
        if a is None or not a.numel() or not out.is_floating_point():
            continue
        fs = problem.f_size(k).reshape(-1, 1)
        # (open within the allowance: moving the output by RESOLVE of its own size, or by more than its rounding
        # over Ridders' first step)
        fa = torch.minimum(_own(problem.f_scale(k)), problem.f_size(k) * (SAFETY * ROUNDING_ULPS
                           * torch.finfo(out.dtype).eps / RIDDERS_BASE)).reshape(-1, 1) if summed else None
        xs = problem.x_size(j).reshape(1, -1)
        weight = vs[k].reshape(-1, 1).to(torch.float64)
        unit = SAFETY * ROUNDING_ULPS * torch.finfo(out.dtype).eps
        step = max(1, (1 << 18) // max(1, a.shape[1]))  # rows at a time: a few MB of temporaries, not M x N
        for r in range(0, a.shape[0], step):
            size = a[r:r + step].abs()
            picked = _unresolved_entries(size, unit * fs[r:r + step] / h, tol,
                                         None if fa is None else fa[r:r + step] / xs)
            if bool(picked.any()):
                term = torch.where(picked, a[r:r + step] * weight[r:r + step], 0.0)
                terms = torch.minimum(terms, torch.where(picked, term.abs().clamp_min_(TINY_TERM), math.inf).amin(0))
                sums.add_(term.sum(0))
    return _with_sums(terms, sums if summed else None)


def _unresolved_pair(problem: Problem, j: int, analytic: dict[tuple[int, int], torch.Tensor | None],
                     banded: Band | None, tol: ToleranceUsed, vs: list[torch.Tensor], base: float,
                     seen: list[Seen]
                     ) -> tuple[torch.Tensor | list[float] | None, torch.Tensor | list[float] | None]:
    """:func:`_unresolved_terms` on central differences' bound alone, and with the evidence *seen*: for a few float64
    entries both in one pass over them (:func:`_unresolved_terms_small`), otherwise one call each."""
    import torch

    if (tol.default and problem.inputs[j].dtype == torch.float64 and E.LEAN and banded is None
            and all(o.dtype == torch.float64 for o in problem.outputs)
            and sum(a.numel() for (i, _), a in analytic.items() if i == j and a is not None) <= J.SMALL):
        pair = _unresolved_terms_small(problem, j, analytic, tol, vs, base, seen, True, both=True)
        assert isinstance(pair, tuple)
        return pair
    return (_unresolved_terms(problem, j, analytic, banded, tol, vs, base),
            _unresolved_terms(problem, j, analytic, banded, tol, vs, base, seen))


def _own(f: torch.Tensor) -> torch.Tensor:
    """RESOLVE |f| per output element, inf where f is 0 (an output of exactly 0 has no size of its own to resolve
    against: gelu at -11 computes -0.0, and autograd's slope of 1e-28 there is no entry any step can see)."""
    import torch

    return torch.where(f > 0, f * RESOLVE, math.inf)


def _with_sums(terms: torch.Tensor, sums: torch.Tensor | None) -> torch.Tensor | None:
    """The terms of :func:`_unresolved_terms`, each no larger than |the sum of its column's unresolved terms|, what a
    backward scaling that column's gradient by 1 + RESOLVE moves a projection by per unit of u_c (with several
    outputs they may cancel: cat of sum(x^2) and sum(sin x), whose entries 2 x0 and cos x0, weighted, nearly
    cancel; a bug of 1e-8 at element 0 moved the confirmation by less than each term, and passed); 0 where every
    entry is resolved; None where every entry of every column is."""
    import torch

    some = terms < math.inf
    if not bool(some.any()):
        return None
    if sums is not None:
        terms = torch.where(some, torch.minimum(terms, sums.abs().clamp_min_(TINY_TERM)), terms)
    return terms.masked_fill_(~some, 0.0)


def _unresolved_terms_small(problem: Problem, j: int, analytic: dict[tuple[int, int], torch.Tensor | None],
                            tol: ToleranceUsed, vs: list[torch.Tensor], base: float,
                            seen: list[Seen],
                            summed: bool = True, both: bool = False
                            ) -> list[float] | None | tuple[list[float] | None, list[float] | None]:
    """:func:`_unresolved_terms` for a few float64 entries, in Python floats (a list): the same IEEE operations
    (max(1, |v|) as x_size and f_size, NaN staying NaN as in clamp_min; a NaN entry is never picked), but for the
    order in which a column's terms are summed (:func:`_with_sums`; rows in order here). *both*: the terms on central
    differences' bound alone (no *seen*, not summed) and those of *seen*, summed, as a pair, in one pass."""
    xs = [max(abs(v), 1.0) for v in E.flat_list(problem.inputs[j])]
    width = len(xs)
    terms = [math.inf] * width
    plain = [math.inf] * width  # with *both*: the terms on central differences' bound alone
    unit = SAFETY * ROUNDING_ULPS * EPS64
    sums = [0.0] * width
    differences: dict[tuple[int, int], float] = {}  # (output, flat entry): the difference a quick stage accepted
    for k, rows_t, cols_t, diff, _ in seen:
        for r, c, d in zip(*(v if isinstance(v, list) else v.tolist() for v in (rows_t, cols_t, diff))):
            differences[k, r * width + c] = d
    for k, out in enumerate(problem.outputs):
        a = analytic.get((j, k))
        if a is None or not a.numel():
            continue
        values = [abs(f) for f in E.flat_list(out)]
        rows = [max(f, 1.0) for f in values]
        weights = E.flat_list(vs[k])
        noise: list[float] | None = None  # the measured rounding, measured only where it decides (below)
        for i, value in enumerate(E.flat_list(a)):
            r, c = divmod(i, width)
            size = abs(value)
            evidence = unit * rows[r] / (base * xs[c])
            seen_diff = differences.get((k, i), 0.0)
            worth = size > evidence + tol.atol + tol.rtol * size
            if both and worth and evidence + 0.0 > RESOLVE * size:  # (as the call without *seen* adds its 0.0)
                plain[c] = min(plain[c], max(abs(value * weights[r]), TINY_TERM))
            if ((worth and evidence + seen_diff > RESOLVE * size)
                    or (summed and not worth and size > 0
                        and size >= min(RESOLVE * values[r] if values[r] > 0 else math.inf,
                                        (unit / RIDDERS_BASE) * rows[r]) / xs[c])):
                term = value * weights[r]
                terms[c] = min(terms[c], max(abs(term), TINY_TERM))
                sums[c] += term
            elif (summed and size == 0 and seen_diff > evidence / SAFETY
                  and seen_diff >= min(RESOLVE * values[r] if values[r] > 0 else math.inf,
                                       (unit / RIDDERS_BASE) * rows[r]) / xs[c]):
                # autograd gives the entry exactly 0 where the output moved (see _unresolved_terms)
                if noise is None:
                    noise = E.flat_list(problem.noise(k))
                if seen_diff > noise[r] / (base * xs[c]):
                    term = seen_diff * weights[r]
                    terms[c] = min(terms[c], max(abs(term), TINY_TERM))
                    sums[c] += term
    first = None if not both or all(t == math.inf for t in plain) else [0.0 if t == math.inf else t for t in plain]
    if all(t == math.inf for t in terms):
        return (first, None) if both else None
    if not summed:
        return [0.0 if t == math.inf else t for t in terms]
    opened = [0.0 if t == math.inf else min(t, max(abs(total), TINY_TERM)) for t, total in zip(terms, sums)]
    return (first, opened) if both else opened


@dataclass
class Weighted:
    """The output weights, flat in float64, their absolute values, and the sums _together projects onto."""

    w: list[torch.Tensor]
    aw: list[torch.Tensor]
    weight: float  # sum over outputs of |v| max(1, |f|)
    absolute: float  # sum of |v|: the atol of every entry, projected


def _weighted(problem: Problem, vs: list[torch.Tensor]) -> Weighted:
    import torch

    ws = [v.reshape(-1).to(torch.float64) for v in vs]
    aws = [w.abs() for w in ws]
    weight = sum(float(aw @ problem.f_size(k)) for k, aw in enumerate(aws))
    return Weighted(ws, aws, weight, sum(float(aw.sum()) for aw in aws))


def _together(problem: Problem, j: int, analytic: dict[tuple[int, int], torch.Tensor | None], banded: Band | None,
              first: torch.Tensor | None, vs: list[torch.Tensor], tol: ToleranceUsed,
              weighted: list[Weighted] | None = None) -> bool:
    """Whether the backward of all outputs at once (*first*, weights *vs*) equals autograd's rows of
    every output, weighted and summed, to within what the entries' own judgement resolves: per
    column, STRUCTURE_ULPS ulps of the sum of |terms|, the tolerance projected through |v|, and the
    finest error bound of a central difference (ROUNDING_ULPS eps^(2/3) of the entry's natural size
    max(1, |f|) / max(1, |x|), weighted by |v|). A combined backward that differs by less than that
    could not be told from a right one by any entry's comparison."""
    import torch

    if banded is None:
        small = _together_small(problem, j, analytic, first, vs, tol)
        if small is not None:
            return small
    n = problem.inputs[j].numel()
    total: torch.Tensor | None = None  # sum over outputs of the weighted rows, and of |terms|
    size: torch.Tensor | None = None
    if weighted is None:
        weighted = []
    if not weighted:
        weighted.append(_weighted(problem, vs))
    wt = weighted[0]
    for k, (w, aw) in enumerate(zip(wt.w, wt.aw)):
        if banded is not None:
            if banded.analytic is not None:
                terms = w[banded.rows] * banded.analytic
                total = _zeros(n) if total is None else total
                size = _zeros(n) if size is None else size
                total.index_add_(0, banded.cols, terms)
                size.index_add_(0, banded.cols, terms.abs())
            continue
        if (j, k) not in analytic:
            return False  # rows not built: nothing to compare with
        block = analytic[j, k]
        if block is not None and block.numel():
            part, part_size = w @ block, aw @ block.abs()
            total = part if total is None else total.add_(part)
            size = part_size if size is None else size.add_(part_size)
    total = _zeros(n) if total is None else total
    size = _zeros(n) if size is None else size
    got = _zeros(n) if first is None else first.detach().reshape(-1).to(torch.float64)
    x = problem.inputs[j].detach().reshape(-1)
    eps = torch.finfo(x.dtype).eps
    resolution = (ROUNDING_ULPS * eps ** (2 / 3) * wt.weight) / problem.x_size(j)
    allowed = (size + got.abs()).mul_(STRUCTURE_ULPS * eps).add_(size, alpha=tol.rtol)
    if tol.atol:
        allowed.add_(tol.atol * wt.absolute)
    agree = (got - total).abs_() <= allowed.add_(resolution)
    return bool(agree.all()) or bool((agree | ~torch.isfinite(x)).all())  # held elements are not checked


def _together_small(problem: Problem, j: int, analytic: dict[tuple[int, int], torch.Tensor | None],
                    first: torch.Tensor | None, vs: list[torch.Tensor], tol: ToleranceUsed) -> bool | None:
    """:func:`_together` for a small float64 input (at most judge.SMALL entries in its rows of every output), in
    Python floats: a dozen tensor operations cost more than the sums themselves. The weighted sums are
    accumulated row by row, where the tensor path's matrix products may add in another order: the two
    differ by a few ulps of the sum of |terms|, which the allowance's STRUCTURE_ULPS ulps of that sum
    hold many times over (the comparison only decides whether the directional confirmation runs, and a
    backward that errs by rounding is not one it is there to catch). None: not small."""
    import torch

    x = problem.inputs[j]
    n = x.numel()
    if not E.LEAN or x.dtype != torch.float64 or n * sum(o.numel() for o in problem.outputs) > J.SMALL:
        return None
    total = [0.0] * n  # sum over outputs of the weighted rows, and of |terms|
    size = [0.0] * n
    weight = absolute = 0.0  # sum over outputs of |v| max(1, |f|), and of |v| (as _weighted)
    for k, v in enumerate(vs):
        w = E.flat_list(v)
        aw = [abs(a) for a in w]
        weight += math.fsum(a * f for a, f in zip(aw, problem.f_size(k).tolist()))
        absolute += math.fsum(aw)
        if (j, k) not in analytic:
            return False  # rows not built: nothing to compare with
        block = analytic[j, k]
        if block is None or not block.numel():
            continue
        for wr, awr, row in zip(w, aw, block.tolist()):
            for c, a in enumerate(row):
                total[c] += wr * a
                size[c] += awr * abs(a)
    got = [0.0] * n if first is None else first.detach().reshape(-1).to(torch.float64).tolist()
    if len(got) != n:
        return None  # (autograd's engine gives a gradient the input's shape; the tensor path says what else happens)
    eps = EPS64
    unit = ROUNDING_ULPS * eps ** (2 / 3) * weight
    structure = STRUCTURE_ULPS * eps
    spread = tol.atol * absolute if tol.atol else 0.0
    values = E.flat_list(x)
    for c, (s, g, t, xs) in enumerate(zip(size, got, total, problem.x_size(j).tolist())):
        allowed = (s + abs(g)) * structure + tol.rtol * s + spread + unit / xs
        if not abs(g - t) <= allowed and math.isfinite(values[c]):  # held elements are not checked
            return False
    return True


def _zeros(n: int) -> torch.Tensor:
    import torch

    return torch.zeros(n, dtype=torch.float64)


def _scale(problem: Problem, j: int, k: int, cols: torch.Tensor) -> torch.Tensor:
    """max(1, |f_r|) / max(1, |x_c|): the natural size of entry (r, c), against which an error
    bound is "too large"; (M_k, len(cols))."""
    return problem.f_size(k).reshape(-1, 1) / problem.x_size(j)[cols].reshape(1, -1)


def _precision(problem: Problem, j: int) -> str:
    return str(problem.inputs[j].dtype).removeprefix("torch.")


def _rounding(problem: Problem, k: int, h: torch.Tensor) -> torch.Tensor:
    """The quick stage's bound for a difference quotient with steps h (per column): ROUNDING_ULPS ulps of
    max(1, |f|) — the size that intermediates of order one round at, even where f itself is small —
    divided by h. The quick stage only accepts: what it does not accept goes to Ridders, whose bound
    uses the measured rounding (evaluate.measure_noise) and its own truncation estimate."""
    import torch

    eps = torch.finfo(problem.outputs[k].dtype).eps if problem.outputs[k].is_floating_point() else 0.0
    return ROUNDING_ULPS * eps * problem.f_size(k).reshape(-1, 1) / h.reshape(1, -1)


# -- analytic side ---------------------------------------------------------------------------------

def _analytic(problem: Problem, gen: Callable[[], torch.Generator], info: Info
              ) -> dict[tuple[int, int], torch.Tensor | None]:
    """autograd's Jacobian per (input, output), from row chunks of randomly scaled one-hot weights."""
    import torch

    analytic: dict[tuple[int, int], torch.Tensor | None] = {}
    for k, out in enumerate(problem.outputs):
        m = out.numel()
        if m == 0:  # an empty output has an empty Jacobian: nothing to compare
            analytic.update({(j, k): torch.zeros(0, problem.inputs[j].numel(), dtype=torch.float64)
                             for j in problem.diff})
            continue
        # 0.5 + r for torch.rand's r, exactly (uniform_ adds 0.5 to the same draw); non-unit: a backward must use
        # grad_output
        c = torch.empty(m, dtype=torch.float64).uniform_(0.5, 1.5, generator=gen())
        height = max(1, _chunk(problem, m))
        for a in range(0, m, height):
            b = min(m, a + height)
            weights = torch.zeros(b - a, m, dtype=torch.float64)
            weights.diagonal(a).copy_(c[a:b])  # row i weighs output element a + i
            rows = _divided(problem, k, weights, c[a:b], analytic_rows(problem, k, weights, info), info)
            for pos, j in enumerate(problem.diff):
                row = rows[pos]
                if row is None:
                    analytic[j, k] = None
                    continue
                if b - a == m:
                    analytic[j, k] = row
                    continue
                if (j, k) not in analytic:
                    analytic[j, k] = torch.empty(m, row.shape[1], dtype=torch.float64)
                target = analytic[j, k]
                if target is not None:
                    target[a:b] = row
        info["backward_rows"] = info.get("backward_rows", 0) + m
        dead = None if problem.dead is None else problem.dead[k]
        if dead is not None:  # rows of outputs not finite at the point: not judged (_leave_out_dead)
            for j in problem.diff:
                block = analytic.get((j, k))
                if block is not None:
                    block[dead] = 0.0
    return analytic


def _divided(problem: Problem, k: int, weights: torch.Tensor, c: torch.Tensor, rows: list[torch.Tensor | None],
             info: Info) -> list[torch.Tensor | None]:
    """autograd's rows c_i (e_i)ᵀJ divided by their weights c: J's rows. Where c J overflowed (an entry within a
    factor 1.5 of float64's largest: d/dx exp at 709.5 is 1.37e308, and 1.2 times it is inf) those rows are taken
    again with weights c / 4 (an exact scaling) and divided by them, where that is finite: a right backward read
    inf there and FAILED. A backward that gives inf itself gives it again."""
    import torch

    out = [None if r is None else r.contiguous().div_(c.reshape(-1, 1)) for r in rows]
    if all(q is None or not bool(torch.isinf(q).any()) for q in out):  # (a NaN no scaling repairs)
        return out
    again = analytic_rows(problem, k, weights / 4, info)
    info["backward_rows"] = info.get("backward_rows", 0) + len(c)
    for pos, (q, r) in enumerate(zip(out, again)):
        if q is not None and r is not None:
            quarter = r.contiguous().div_((c / 4).reshape(-1, 1))
            out[pos] = torch.where(torch.isfinite(q) | ~torch.isfinite(quarter), q, quarter)
    return out


def _columns(analytic: dict[tuple[int, int], torch.Tensor | None], banded: Band | None, j: int, k: int,
             cols: torch.Tensor | slice) -> torch.Tensor | None:
    """autograd's columns *cols* of block (j, k) as (M_k, len(cols)); None where autograd gives None."""
    import torch

    if banded is not None:
        assert isinstance(cols, torch.Tensor)
        dense = torch.zeros(banded.m, len(cols), dtype=torch.float64)
        pos = {int(c): i for i, c in enumerate(cols.tolist())}
        keep = torch.tensor([int(c) in pos for c in banded.cols.tolist()], dtype=torch.bool)
        where = torch.tensor([pos[int(c)] for c in banded.cols[keep].tolist()], dtype=torch.long)
        if banded.analytic is None:
            return None
        dense[banded.rows[keep], where] = banded.analytic[keep]
        return dense
    block = analytic.get((j, k))
    return None if block is None else block[:, cols]  # a slice gives a view, indices a copy


# -- quick stage ---------------------------------------------------------------------------------

#: the quick stage's central differences of the columns it did not accept: (columns, per output (M_k, w), steps)
Central = list[tuple["torch.Tensor", list["torch.Tensor"], "torch.Tensor"]]
#: per column the Richardson stage sent on, per output: its estimate and that estimate's error bound, (M_k,) each
Extrapolated = dict[int, list[tuple["torch.Tensor", "torch.Tensor", float]]]


def _coarse_evidence(problem: Problem, j: int) -> bool:
    """Whether input j's evidence is below float64's precision: its copy, an output or the function's work inside
    (problem.inner) in float32 or coarser. There Ridders' smallest steps round coarsely, and a Richardson estimate
    at the quick stage's step may be the finer evidence (:func:`_final`)."""
    import torch

    dtypes = [problem.inputs[j].dtype, *(o.dtype for o in problem.outputs)]
    return problem.inner is not None or any(d.is_floating_point and torch.finfo(d).eps > EPS64 for d in dtypes)


def _quick(problem: Problem, j: int, analytic: dict[tuple[int, int], torch.Tensor | None], banded: Band | None,
           tol: ToleranceUsed, found: Findings, info: Info, central: Central | None = None,
           bases: list[float] | None = None) -> torch.Tensor:
    """Judge every entry of input j by the quick stage; return the columns it did not accept (and, into
    *central*, their central differences, for :func:`_richardson`; into *bases*, the step bases used:
    cbrt(eps) for central differences, 1 for the one-sided steps of an affine function)."""
    import torch

    n = problem.inputs[j].numel()
    suspect: list[torch.Tensor] = []
    if banded is not None:
        # a band: its column groups' differences (one step for all columns); the columns holding an entry they did
        # not accept come here, one by one at their own steps, as any column (and on to Richardson, then Ridders)
        left = found.unheld(_quick_band(problem, j, banded, tol, found))
        if not len(left):
            return left
        todo: torch.Tensor | None = left
    else:  # a sparse Jacobian: column groups; the columns of a group with an entry they did not accept come here
        todo = _quick_colored(problem, j, analytic, tol, found, info)
    x = problem.inputs[j]
    count = n if todo is None else len(todo)
    given: list[torch.Tensor] | None = None
    if (E.LEAN and todo is None and found.held is None and 2 * n <= SMALL_BATCH
            and max(1, _chunk(problem, 2 * n) // 2) >= n):
        tiny = _quick_tiny(problem, j, analytic, tol, found, info)
        if tiny is True:
            return torch.zeros(0, dtype=torch.long)  # every entry accepted
        if tiny is not None:
            given, h = tiny  # the same central columns, as tensors: judged below
    if given is None:
        h = steps(x, finite=found.held is None).reshape(-1)
    affine = todo is None and n > PLAIN_COLUMNS and _affine(problem, j, info)
    step = steps(x, 1.0).reshape(-1) if affine else h
    width = max(1, _chunk(problem, 2 * count) // (1 if affine else 2))
    for a in range(0, count, width):
        cols = torch.arange(a, min(n, a + width)) if todo is None else todo[a:a + width]
        numeric = None
        if given is not None:  # _quick_tiny's columns: all n of them, one chunk
            numeric, used, given = given, h, None
        if affine:
            try:
                numeric = forward_columns(problem, j, cols, step[cols], info)
                used = step[cols]
            except OutOfDomain:  # a step of max(1, |x|) left the function's domain: central from here on
                affine = False
                info["numeric"] += (f"; '{problem.names[j]}' from column {a} on: central differences "
                                    "(a step left the function's domain)")
        is_central = numeric is None or not affine
        if bases is not None:
            bases.append(EPS_POWERS["cbrt"] if is_central else 1.0)
        if numeric is None:
            numeric = [col.T for col in central_columns(problem, j, cols, h, info)]
            used = h[cols]
        # every output's block is judged first: a column an output does not accept goes to the final stage
        # for every output, so none of its entries is counted here (the final stage counts them all)
        blocks: list[tuple[int, torch.Tensor, torch.Tensor, Any]] = []
        bad = [False] * len(cols)
        for k, num in enumerate(numeric):
            ana = _columns(analytic, banded, j, k, slice(a, a + len(cols)) if todo is None else cols)
            obs = torch.zeros_like(num) if ana is None else ana
            judged: Any = _small_judged(problem, j, k, obs, num, cols, tol, found, h=used)
            if judged is None:
                judged = J.judge(obs, num, tol, reference_bound=_rounding(problem, k, used),
                                 scale=_scale(problem, j, k, cols), precision=_precision(problem, j))
            _mark(bad, judged, len(cols))
            blocks.append((k, obs, num, judged))
        if any(bad):
            picked = torch.tensor(bad, dtype=torch.bool)
            suspect.append(cols[picked])  # judged again in the final stage; the clean columns are final now
            if central is not None and is_central:
                central.append((cols[picked], [num[:, picked] for num in numeric], used[picked]))
        _count(cols, blocks, bad, found, tol)
    return found.unheld(torch.unique(torch.cat(suspect))) if suspect else torch.zeros(0, dtype=torch.long)


def _richardson(problem: Problem, j: int, suspect: torch.Tensor, central: Central,
                analytic: dict[tuple[int, int], torch.Tensor | None], banded: Band | None, tol: ToleranceUsed,
                found: Findings, info: Info, extrapolated: Extrapolated | None = None) -> torch.Tensor:
    """A second quick stage for the columns whose central differences D(h) were not accepted: Richardson's
    (4 D(h) - D(2h)) / 3 from the quick stage's D(h) and one more central difference, at 2h (2 evaluations
    per column; Ridders takes 12 and the slopes 2 more). The h^2 term of the truncation error, which keeps
    D(h) from 1e-10 near a singularity (tan, polygamma near a pole) or at large |x| (sin at 7.6), cancels.
    Its rounding is 1.5 times the quick stage's ((4/h + 1/(2h)) / 3 rounding units), but it is judged
    against the quick stage's own allowance: it accepts only what the central difference would accept
    without its truncation error. Its own truncation error (the h^4 term, which a step close to a pole
    leaves at 1e-7 of the value) must be within that allowance too, as :func:`numeric.truncation`
    estimates it from D(h) - D(2h); where it is not, a gradient error of its size could hide in the
    extrapolated value, and the column goes on. Like the
    quick stage it can only accept: a column that any output does not accept goes on to the final stage
    (Ridders with its own error estimate, and the slopes). Returns the columns left for it. Into *extrapolated*
    (where given: evidence below float64's precision), each such column's estimates with their own bound, 1.5 times
    the rounding (the measured noise where larger) plus the truncation estimate, for the final stage."""
    import torch

    x = problem.inputs[j].detach().reshape(-1)
    left: list[torch.Tensor] = []
    done = torch.zeros(0, dtype=torch.long)
    for cols, nums, hs in central:
        keep = found.unheld(cols)
        if len(keep) != len(cols):  # held (non-finite) elements are never judged
            mine = torch.isin(cols, keep)
            cols, nums, hs = cols[mine], [num[:, mine] for num in nums], hs[mine]
        if not len(cols):
            continue
        done = torch.cat([done, cols])
        there = x[cols]
        doubled = torch.zeros(x.numel(), dtype=x.dtype)
        doubled[cols] = (there + 2 * hs.to(x.dtype)) - there  # the step taken, as steps() makes it
        far = central_columns(problem, j, cols, doubled, info)
        info["richardson_columns"] = info.get("richardson_columns", 0) + len(cols)
        bad = [False] * len(cols)
        blocks: list[tuple[int, torch.Tensor, torch.Tensor, Any]] = []
        estimates: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # per output: R, rounding, D(h) - D(2h)
        for k, (near, d2) in enumerate(zip(nums, far)):
            value = extrapolate(near, d2.T, 4.0)  # (4 near - d2) / 3, without overflow near float64's end
            ana = _columns(analytic, banded, j, k, cols)
            obs = torch.zeros_like(value) if ana is None else ana
            # judged with the central difference's own bound, not the 1.5 times of its rounding that the
            # extrapolation carries: it accepts only what the quick stage would accept without truncation
            judged: Any = _small_judged(problem, j, k, obs, value, cols, tol, found, h=hs)
            rounding = _rounding(problem, k, hs)
            if judged is None:
                judged = J.judge(obs, value, tol, reference_bound=rounding,
                                 scale=_scale(problem, j, k, cols), precision=_precision(problem, j))
            _mark(bad, judged, len(cols))
            # the extrapolation's own truncation (h^4) must be negligible too: estimated from D(h) - D(2h)
            unsettled = ~(truncation(near - d2.T, value) <= tol.atol + tol.rtol * value.abs() + SAFETY * rounding)
            for i in unsettled.any(0).nonzero().flatten().tolist():
                bad[i] = True
            blocks.append((k, obs, value, judged))
            if extrapolated is not None:
                estimates.append((value, rounding, near - d2.T))
        if extrapolated is not None and any(bad):
            for k, (value, rounding, delta) in enumerate(estimates):
                noise = problem.noise(k).reshape(-1, 1) / hs.reshape(1, -1)
                own = 1.5 * torch.maximum(torch.as_tensor(rounding).expand_as(value), noise) + torch.as_tensor(
                    truncation(delta, value)).expand_as(value)
                for i in [i for i, b in enumerate(bad) if b]:  # (every output's, in order: _finer reads them by k)
                    extrapolated.setdefault(int(cols[i]), []).append((value[:, i], own[:, i], float(hs[i])))
        if any(bad):
            left.append(cols[torch.tensor(bad, dtype=torch.bool)])
        _count(cols, blocks, bad, found, tol)
    rest = suspect[~torch.isin(suspect, done)]  # columns without central differences (banded, affine)
    return found.unheld(torch.unique(torch.cat([rest, *left])))


def _quick_tiny(problem: Problem, j: int, analytic: dict[tuple[int, int], torch.Tensor | None], tol: ToleranceUsed,
                found: Findings, info: Info) -> Literal[True] | tuple[list[torch.Tensor], torch.Tensor] | None:
    """The quick stage of a tiny input (at most SMALL_BATCH / 2 finite float64 elements, float64 outputs, at
    most judge.SMALL entries), in Python floats: the steps of :func:`steps`, the points and the order of
    calls of the loop that :func:`central_columns` runs, the same quotients, and judge's rule by
    :func:`judge.passes` with the bound of :func:`_rounding` and the scale of :func:`_scale`. Every
    operation is the IEEE double operation the tensor path makes, so the evidence and the verdicts are
    the same; only tensor operations are saved.

    True: every entry accepted and counted. Otherwise the central columns as tensors (M_k, n) per output
    and the steps, for the tensor path to judge (nothing counted). None: not tiny after all."""
    import torch

    x = problem.inputs[j].detach()
    outs = problem.outputs
    n = x.numel()
    if x.dtype != torch.float64 or any(o.dtype != torch.float64 for o in outs) or n * sum(
            o.numel() for o in outs) > J.SMALL:
        return None
    values = E.flat_list(x)
    base = EPS_POWERS["cbrt"]
    hs = []
    for v in values:  # steps(x): max(1, |x|) cbrt(eps), made exact as (x + h) - x
        h0 = max(abs(v), 1.0) * base
        hs.append((v + h0) - v)
    info.setdefault("evaluation", "loop")
    xs, call, shape = list(problem.inputs), problem.call, x.shape
    rows = []
    up_base = [v + 0.0 for v in values]  # x + h e_c holds x + 0.0 away from c (-0.0 reads +0.0), x - h e_c holds x
    with E.GradMode(False):
        for point_base, sign in ((up_base, 1.0), (values, -1.0)):
            for c in range(n):
                if n == 1:  # one element: the cheapest fresh tensor holding it
                    value = values[0] + hs[0] if sign > 0 else values[0] - hs[0]
                    xs[j] = (torch.scalar_tensor(value, dtype=torch.float64) if not shape
                             else E.fresh([value], shape))  # (shape (1,): no view)
                else:
                    point = list(point_base)
                    point[c] = values[c] + hs[c] if sign > 0 else values[c] - hs[c]
                    xs[j] = E.fresh(point, shape)  # contiguous and independent
                rows.append(call(*xs))
    info["evaluations"] = info.get("evaluations", 0) + 2 * n
    twice = [2 * h for h in hs]
    x_sizes = [max(abs(v), 1.0) for v in values]
    precision = _precision(problem, j)
    numeric: list[list[float]] = []
    judged: list[list[float] | None] = []
    per_output: list[list[float]] = []  # the bounds of each output's entries
    for k, out in enumerate(outs):
        m = out.numel()
        if m == 1:
            up = [[rows[c][k].item()] for c in range(n)]
            down = [[rows[n + c][k].item()] for c in range(n)]
        else:
            up = [E.flat_list(rows[c][k]) for c in range(n)]
            down = [E.flat_list(rows[n + c][k]) for c in range(n)]
        num = [(up[c][r] - down[c][r]) / twice[c] for r in range(m) for c in range(n)]  # (M_k, n), row-major
        numeric.append(num)
        if not m:
            judged.append([])
            per_output.append([])
            continue
        block = analytic.get((j, k))
        obs = [0.0] * (m * n) if block is None else E.flat_list(block)
        fs = [max(abs(f), 1.0) for f in E.flat_list(out)]  # problem.f_size(k); NaN stays NaN
        unit = ROUNDING_ULPS * torch.finfo(out.dtype).eps
        bounds = [unit * f / h for f in fs for h in hs]
        verdicts = J.passes(obs, num, bounds, [f / x for f in fs for x in x_sizes], tol, precision)
        judged.append(verdicts[1] if verdicts is not None and all(verdicts[0]) else None)
        per_output.append(bounds)
    if all(d is not None for d in judged):
        cols = list(range(n))
        for k, (diffs, num) in enumerate(zip(judged, numeric)):
            found.beyond = found.beyond or _beyond_values(diffs, num, tol)  # type: ignore[arg-type]
            if tol.default:
                _seen_values(found, k, diffs, analytic.get((j, k)), cols)  # type: ignore[arg-type]
            found.add_passed_values(diffs, num, n, k, cols)  # type: ignore[arg-type]  # none is None here
        return True
    return ([torch.tensor(num, dtype=torch.float64).reshape(o.numel(), n) for num, o in zip(numeric, outs)],
            torch.tensor(hs, dtype=torch.float64))


def _small_judged(problem: Problem, j: int, k: int, obs: torch.Tensor, ref: torch.Tensor, cols: torch.Tensor,
                  tol: ToleranceUsed, found: Findings, *, h: torch.Tensor | None = None,
                  bound: torch.Tensor | None = None) -> tuple[list[bool], list[float], list[float], list[float]] | None:
    """judge's verdict per entry of a small block (M_k x len(cols)) in Python floats (:func:`judge.passes`),
    with the bound of :func:`_rounding` for steps *h* (or the given *bound*, (M_k, len(cols))) and the scale
    of :func:`_scale`: whether each entry passes, its difference and its reference, row-major. None where
    the tensor judge decides (a large block, held elements, a tolerance the user set)."""
    import torch

    m, w = ref.shape
    if not E.LEAN or found.held is not None or not 0 < m * w <= J.SMALL or not tol.default:
        return None
    fs = problem.f_size(k).tolist()
    xs = problem.x_size(j)[cols].tolist()
    if bound is None:
        assert h is not None
        out = problem.outputs[k]
        unit = ROUNDING_ULPS * (torch.finfo(out.dtype).eps if out.is_floating_point() else 0.0)
        hs = h.tolist()
        bounds = [unit * f / hc for f in fs for hc in hs]
    else:
        bounds = E.flat_list(bound)
    refs = E.flat_list(ref)
    judged = J.passes(E.flat_list(obs), refs, bounds, [f / x for f in fs for x in xs], tol,
                      _precision(problem, j))
    return None if judged is None else (judged[0], judged[1], refs, bounds)


def _count(cols: torch.Tensor, blocks: list[tuple[int, torch.Tensor, torch.Tensor, Any]], bad: list[bool],
           found: Findings, tol: ToleranceUsed, *, quick: bool = True) -> None:
    """Count the entries of the columns every output accepted (*bad* marks the others, judged again later
    for every output). *blocks*: per output k, (k, observed, reference, judgement), the judgement a
    J.Judged or _small_judged's flags, differences, references and bounds. In a quick stage (*quick*), an
    entry accepted beyond the tolerance on the evidence's bound alone sets found.beyond (:func:`_beyond`)."""
    import torch

    clean = [i for i, b in enumerate(bad) if not b]
    if not clean:
        return
    some = len(clean) < len(bad)
    mask = torch.tensor([not b for b in bad], dtype=torch.bool) if some else None
    at = cols.tolist()
    w = len(at)
    for k, obs, ref, judged in blocks:
        if isinstance(judged, tuple):
            _, diffs, refs, bounds = judged
            if quick and tol.default:
                _seen_values(found, k, diffs, obs, at, clean if some else None)
            if not some:
                found.beyond = found.beyond or quick and _beyond_values(diffs, refs, tol)
                found.add_passed_values(diffs, refs, w, k, at)
                continue
            rows = range(ref.shape[0])
            picked = [r * w + c for r in rows for c in clean]
            diffs, refs = [diffs[i] for i in picked], [refs[i] for i in picked]
            found.beyond = found.beyond or quick and _beyond_values(diffs, refs, tol)
            found.add_passed_values(diffs, refs, len(clean), k, [at[c] for c in clean])
            continue
        rows_t = torch.arange(ref.shape[0]).reshape(-1, 1)
        if mask is None:
            found.beyond = found.beyond or quick and _beyond(judged, tol)
            if quick and tol.default:
                _seen(found, k, rows_t, cols.reshape(1, -1), judged.diff.expand(judged.verdict.shape), obs)
            found.add(judged, obs, ref, output=k, rows=rows_t, cols=cols.reshape(1, -1))
        else:
            part = judged.columns(mask)
            found.beyond = found.beyond or quick and _beyond(part, tol)
            if quick and tol.default:
                _seen(found, k, rows_t, cols[mask].reshape(1, -1), part.diff.expand(part.verdict.shape), obs[:, mask])
            found.add(part, obs[:, mask], ref[:, mask], output=k, rows=rows_t, cols=cols[mask].reshape(1, -1))


def _beyond(judged: J.Judged, tol: ToleranceUsed) -> bool:
    """Whether an entry passed beyond the default tolerance itself, within the evidence's own bound only: its
    difference above atol + rtol |reference|, and the reference at least 1% of the block's largest (a NaN there:
    none). Central differences resolve about 1e-9 of an entry, so they pass torch's trigamma, 3e-10 off at 0.5,
    within their bound: where the evidence shows such a difference, the directional confirmation (100 times finer)
    decides, as in directional mode. The reference was also required to lie above its bound (not an entry of zero
    seen through rounding); zeros seen through rounding are below 1% of the largest beside real entries, and a block
    whose largest entry is within its bound is one the evidence cannot resolve at all (x.sum() + 1e10, whose values
    round at 2e-6: central differences read 0.945 within a bound of 1.5, and a backward giving 0 passed full mode,
    where directional mode failed it)."""
    shape = judged.verdict.shape
    if not tol.default or not judged.verdict.numel():
        return False
    size, diff, wide = (t.expand(shape) for t in (judged.ref.abs(), judged.diff, judged.evidence))
    floor = 0.01 * float(size.max())
    return bool(((judged.verdict.expand(shape) == J.PASS) & (diff > tol.atol + tol.rtol * size)
                 & (size >= floor)).any())


def _beyond_values(diffs: list[float], refs: list[float], tol: ToleranceUsed) -> bool:
    """:func:`_beyond` for a block that passed whole, in Python floats (differences and references): the same IEEE
    operations."""
    if not tol.default or not refs or any(r != r for r in refs):
        return False
    floor = 0.01 * max(abs(r) for r in refs)
    return any(d > tol.atol + tol.rtol * abs(r) and abs(r) >= floor for d, r in zip(diffs, refs))


def _mark(bad: list[bool], judged: Any, width: int) -> None:
    """Mark in *bad* the columns holding an entry that did not pass."""
    if isinstance(judged, tuple):
        for i, ok in enumerate(judged[0]):
            if not ok:
                bad[i % width] = True
    elif not judged.all_pass:
        for i in (judged.verdict != J.PASS).any(0).nonzero().flatten().tolist():
            bad[i] = True


def _affine(problem: Problem, j: int, info: Info) -> bool:
    """Whether every output is affine in input j across steps of max(1, |x|): along two fixed
    pseudo-random directions u, f(x + u) - f(x) must equal 2 (f(x + u/2) - f(x)) to rounding.

    A curved (or kinked) function fails this almost surely; one whose curvature hides below
    rounding has one-sided differences accurate to rounding too. Entries that then disagree with
    autograd are judged again by Ridders, so a wrong guess cannot fail a check.
    """
    import torch

    x = problem.inputs[j]
    size = x.detach().abs().clamp_min(1.0)
    gen = torch.Generator().manual_seed(1234)  # its own stream: the verdict never depends on this draw
    us = [torch.empty(x.shape, dtype=torch.float64).uniform_(-1.0, 1.0, generator=gen).to(x.dtype) * size  # 2 r - 1
          for _ in range(2)]
    info["evaluations"] = info.get("evaluations", 0) + 4
    try:
        from .evaluate import far_outputs

        outs = far_outputs(problem, j, torch.stack([x + us[0], x + us[0] / 2, x + us[1], x + us[1] / 2]), info)
    except OutOfDomain:  # e.g. a domain check: such a function gets central differences with small steps
        return False
    eps = torch.finfo(x.dtype).eps
    moved = False
    for o, f0 in zip(outs, problem.outputs):
        if o.numel() == 0:
            continue
        o = o.reshape(4, -1).to(torch.float64)
        f0 = f0.reshape(-1).to(torch.float64)
        for far, half in ((o[0], o[1]), (o[2], o[3])):
            bend = (far - 2 * half + f0).abs()
            if not bool((bend <= STRUCTURE_ULPS * eps * (far.abs().max() + 2 * half.abs().max()
                                                         + f0.abs().max())).all()):
                return False
            moved = moved or bool((far != f0).any())
    if not moved:
        return False  # constant along both directions (a step function, or unused): no evidence of affinity
    name = problem.names[j]
    info["numeric"] = (f"affine in '{name}' (verified along two directions): one-sided differences with steps "
                       "max(1, |x|), exact to rounding; entries that disagree judged again by Ridders"
                       if "numeric" not in info else info["numeric"] + f"; also affine in '{name}'")
    return True


# -- banded Jacobians ------------------------------------------------------------------------------

@dataclass
class Band:
    """A verified band of the Jacobian of the single output w.r.t. the single checked input: values at
    (rows, cols) on both sides; every other entry is zero on both sides."""

    m: int
    rows: torch.Tensor
    cols: torch.Tensor
    analytic: torch.Tensor | None
    numeric: torch.Tensor
    h: float
    structure: str


def _banded(problem: Problem, gen: Callable[[], torch.Generator], info: Info) -> Band | None:
    """Try a diagonal, then bands of half-width 1, 2, 4, 8: column groups c mod (2b+1) (none narrower than the
    probe column reaches; none wider when that reaches no neighbour and the diagonal failed).

    Each hypothesis is tested twice with independent random weights on both sides; it is accepted
    only when both draws agree on both sides. Cost: 4(2b+1) evaluations per hypothesis, and 2(2b+1)
    backward rows where the two numeric draws agree (none where they do not), instead of 2N and N.
    """
    import torch

    j, k = problem.diff[0], 0
    x, out = problem.inputs[j], problem.outputs[0]
    n, m = x.numel(), out.numel()
    if n != m or n < 16 or torch.finfo(x.dtype).eps > E.EPS32:
        # (in bfloat16 or float16 evidence STRUCTURE_ULPS ulps are half the values: both draws agreed on a diagonal
        # for log_softmax's 5 x 5 blocks, and the check showed band entries as autograd's and FAILED it)
        return None
    h = steps(x).reshape(-1)
    hmin = h.min()
    eps = torch.finfo(x.dtype).eps
    f_scale = problem.f_size(0)
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
        weights = [torch.empty(n, dtype=torch.float64).uniform_(0.5, 1.5, generator=gen())  # 0.5 + r, exactly
                   for _ in range(4)]  # per draw: the numeric side's, then autograd's
        groups = torch.zeros(4, width, n, dtype=torch.float64)  # column c in group c mod width
        for d, w in enumerate(weights):
            groups[d, idx % width, idx] = w
        # both numeric draws first: where they disagree (the true Jacobian is not in this band), no backward is run
        n1, n2 = (numeric_columns(problem, j, groups[d], hmin, info)[0][cc % width, rr] / weights[d][cc]
                  for d in (0, 2))  # (width, M) -> row r of the group holding column c
        noise = STRUCTURE_ULPS * eps * f_scale[rr] / float(hmin) + STRUCTURE_REL * n1.abs()
        if not bool(((n1 - n2).abs() <= noise).all()):
            if reach == 0:
                # the probe column reaches no neighbour: a wider band could only hold a Jacobian whose other
                # columns reach farther than it does. A diagonal one whose two draws differ by their steps'
                # truncation (polygamma near a pole: each column's step is h times its weight) fails every
                # band alike; the column groups from autograd's pattern judge it from here
                return None
            continue  # the true Jacobian is not in this band
        ana = []
        for d in (1, 3):
            rows = analytic_rows(problem, k, groups[d], info)[0]
            info["backward_rows"] = info.get("backward_rows", 0) + width
            a = None if rows is None else rows[rr % width, cc] / weights[d][rr]
            if a is not None and problem.dead is not None and problem.dead[0] is not None:
                a.masked_fill_(problem.dead[0][rr], 0.0)  # rows not finite at the point: not judged
            ana.append(a)
        a1, a2 = ana
        if (a1 is None) != (a2 is None) or (a1 is not None and a2 is not None
                                           and not bool(((a1 - a2).abs() <= STRUCTURE_ULPS * eps * (1 + a1.abs()))
                                                        .all())):
            return None  # autograd's Jacobian leaves the band: locate it with the dense check
        name = "diagonal" if b == 0 else f"banded (half-width {b})"
        info["structure"] = f"{name}: {width} column group(s), verified with two random draws"
        return Band(m, rr, cc, a1, n1, float(hmin), name)
    return None


def _reach(problem: Problem, j: int, h: torch.Tensor, f_scale: torch.Tensor, info: Info) -> int:
    """How far from the diagonal a probe column (the middle one) has non-zeros beyond rounding:
    no narrower band can hold the Jacobian, so a dense one skips the band hypotheses."""
    import torch

    x = problem.inputs[j]
    probe = x.numel() // 2
    col = central_columns(problem, j, torch.tensor([probe]), h, info)[0][0]  # (M,)
    significant = (col.abs() > STRUCTURE_ULPS * torch.finfo(x.dtype).eps * f_scale / h[probe]).nonzero().flatten()
    return int((significant - probe).abs().max()) if significant.numel() else 0


def _quick_band(problem: Problem, j: int, band: Band, tol: ToleranceUsed, found: Findings) -> torch.Tensor:
    """Judge the band's entries (every other entry is zero on both sides: counted as agreeing)."""
    import torch

    n = problem.inputs[j].numel()
    obs = torch.zeros_like(band.numeric) if band.analytic is None else band.analytic
    rounding = _rounding(problem, 0, torch.tensor([band.h], dtype=torch.float64)).reshape(-1)[band.rows]
    scale = _scale_entries(problem, j, 0, band.rows, band.cols)
    judged = J.judge(obs, band.numeric, tol, reference_bound=rounding, scale=scale, precision=_precision(problem, j))
    bad = judged.verdict != J.PASS
    suspect = found.unheld(torch.unique(band.cols[bad]))
    if not len(suspect):
        found.beyond = found.beyond or _beyond(judged, tol)
        if tol.default:
            _seen(found, 0, band.rows, band.cols, judged.diff.expand(judged.verdict.shape), obs)
        kept = found.add(judged, obs, band.numeric, output=0, rows=band.rows, cols=band.cols)
    else:
        clean = ~torch.isin(band.cols, suspect)
        found.beyond = found.beyond or _beyond(judged.take(clean), tol)
        if tol.default:
            _seen(found, 0, band.rows[clean], band.cols[clean], judged.diff.expand(judged.verdict.shape)[clean],
                  obs[clean])
        kept = found.add(judged.take(clean), obs[clean], band.numeric[clean], output=0, rows=band.rows[clean],
                         cols=band.cols[clean])
    # the entries outside the band agree (zero on both sides, verified twice), except in suspect and held columns
    found.total += (n - len(suspect) - _held_count(found)) * band.m - kept
    return suspect


# -- sparse Jacobians: column groups from autograd's pattern, verified -----------------------------

#: an input of at most this many elements is checked column by column (2n plain calls: no structure, column
#: groups or affinity test, to look for; they cost more than they save at this size)
PLAIN_COLUMNS = 16
#: a measured evaluation noise above this fraction of max(1, |f|) (45,000 ulps) is taken for a jump at the point, not
#: rounding: a row a column group must not move then moves by rounding alone (a larger noise from terms that cancel
#: only sends its groups column by column, which judge it as an input too small for groups would be judged)
JUMP_NOISE = 1e-11
#: column groups are used when there are at most this fraction of the columns (else: one column at a time)
COLORED_FRACTION = 4
#: the pattern's non-zeros at most this many (the grouping is a Python loop over them)
COLORED_MAX_NONZEROS = 4_000_000


def _groups(pattern: torch.Tensor) -> tuple[torch.Tensor, int] | None:
    """Column groups no two of whose columns share a non-zero row of *pattern* (rows, n) (greedy: each
    column takes the first group after every group already holding one of its rows): the group of
    each column and the number of groups, or None when grouping would not save enough evaluations."""
    import torch

    rows, n = pattern.shape
    if n < 2 * COLORED_FRACTION or int(pattern.sum(1).max()) * COLORED_FRACTION > n:
        return None  # a row with that many non-zeros needs that many groups
    nz = pattern.T.nonzero()  # (col, row), ordered by column
    if len(nz) > COLORED_MAX_NONZEROS:
        return None
    per_col = torch.bincount(nz[:, 0], minlength=n).tolist()
    row_list = nz[:, 1].tolist()
    after = [0] * rows  # per row: the first group not yet holding one of its columns
    group = [0] * n
    at = 0
    for c in range(n):
        mine = row_list[at:at + per_col[c]]
        at += per_col[c]
        if not mine:
            continue
        g = max(after[r] for r in mine)
        group[c] = g
        for r in mine:
            after[r] = g + 1
    count = max(group) + 1
    if count * COLORED_FRACTION > n:
        return None
    return torch.tensor(group), count


def _quick_colored(problem: Problem, j: int, analytic: dict[tuple[int, int], torch.Tensor | None],
                   tol: ToleranceUsed, found: Findings, info: Info) -> torch.Tensor | None:
    """The quick stage for a sparse Jacobian (a batch of independent items, a pooling window, a loss per
    sequence): columns that share no non-zero row of autograd's Jacobian are moved together, each by
    its own step times a random weight in [0.5, 1.5), so one central difference per group gives every
    entry of its columns (2 evaluations per group instead of 2 per column).

    autograd's pattern is a hypothesis, never trusted: a row a group does not reach in the pattern
    must not move beyond rounding (else the function depends on a column autograd says it does not),
    and an entry the group's difference does not accept sends every column of its group back to the
    column-by-column quick stage (and what that does not accept on to Ridders), so such columns are
    judged exactly as without groups. In a row a group does reach, a missed dependence would add to the entry that
    reaches it and could pass within that entry's tolerance (1e-5 beside an entry of 1e6, 1e-11 of it); so a group
    that the quick stage accepts and that holds an entry whose tolerance (atol + rtol |J|) exceeds its rounding term is
    moved again in parts (:func:`_hidden`), where each row must move exactly as its own column alone moves it. A
    dependence autograd misses is therefore found either way, unless it is within 4 times the column-by-column quick
    stage's rounding term (twice the term, over the group's smallest weight, 0.5).

    A group whose rows all stay still where they must, but with an entry its difference does not accept, is
    moved again with twice its steps (2 more evaluations): Richardson's (4 D(h) - D(2h)) / 3 per entry, judged
    as :func:`_richardson` judges a column's (the quick stage's allowance; its own truncation estimate within
    it). Near a pole (polygamma) the h^2 term alone kept every entry from being accepted, and every column of
    the group went one by one, 2 evaluations each and 2 more for their own Richardson's. A group that does not
    accept every entry this way goes one by one as before. A dependence autograd misses scales with the step as the
    entry it joins does, so it would survive the extrapolation: a group is accepted this way only after it is moved
    in parts (:func:`_hidden`), whatever its tolerance, where such a dependence shows to rounding (2 ROUNDING_ULPS eps
    max(1, |f|) and the measured noise), below the allowance of the column-by-column quick stage it would take.
    Returns those columns, or None when grouping does not pay (then every column goes one by one).
    """
    import torch

    x = problem.inputs[j]
    n = x.numel()
    blocks = [analytic.get((j, k)) for k in range(len(problem.outputs))]
    sizes = [o.numel() for o in problem.outputs]
    if n <= PLAIN_COLUMNS or not sum(sizes):
        return None
    pattern = torch.cat([torch.zeros(m, n, dtype=torch.bool) if b is None else (b != 0) for b, m in zip(blocks, sizes)])
    if found.held is not None and len(found.held):
        pattern[:, found.held] = False  # a held element never moves and is not judged: it takes no place in a group
    made = _groups(pattern)
    if made is None:
        return None
    group, count = made
    gen = torch.Generator().manual_seed(4321)  # its own stream: an entry is accepted or judged again either way
    weight = torch.empty(n, dtype=torch.float64).uniform_(0.5, 1.5, generator=gen)  # 0.5 + r for rand's r, exactly
    h = steps(x).reshape(-1).to(torch.float64) * weight
    idx = torch.arange(n)
    raw, denom = _group_differences(problem, j, group, torch.arange(count), h, info)
    eps = torch.finfo(x.dtype).eps
    # the rounding of a difference of two evaluations, (M_k,): as the column-by-column quick stage for an
    # entry; a row that must not move may also move by the measured rounding (terms that cancel)
    f_round = [2 * ROUNDING_ULPS * eps * problem.f_size(k) for k in range(len(sizes))]
    # except where one evaluation is off by more than JUMP_NOISE of the value's size: a jump within a few ulps of
    # the point does that (floor at an integer: the measured "noise" is the jump itself), and a row that must not
    # move may move by rounding alone there; so its groups go column by column, as without groups
    still = [torch.where(problem.noise(k) > JUMP_NOISE * problem.f_size(k), f_round[k],
                         torch.maximum(f_round[k], 2 * problem.noise(k))).reshape(1, -1) for k in range(len(sizes))]
    entries = []  # per output: autograd's non-zeros (rows, cols) outside held columns
    for block in blocks:
        r, c = (block != 0).nonzero().unbind(1) if block is not None else (torch.zeros(0, dtype=torch.long),) * 2
        if found.held is not None and len(found.held):  # a held element never moves, covers nothing, is not judged
            mine = ~torch.isin(c, found.held)
            r, c = r[mine], c[mine]
        entries.append((r, c))
    # pass 1: which groups hold an entry the quick stage does not accept (then all their columns go on), and which
    # of them because a row moved that must not (those go on whatever a second difference says)
    bad = torch.zeros(count, dtype=torch.bool)
    loose = torch.zeros(count, dtype=torch.bool)
    wide = torch.zeros(count, dtype=torch.bool)  # a group with an entry whose tolerance could hide a missed dependence
    judged_k: list[tuple[J.Judged, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None] = []
    for k, (block, m) in enumerate(zip(blocks, sizes)):
        r, c = entries[k]
        loose |= _moved(raw[k], group, r, c, count, m, still[k])
        if block is None:
            judged_k.append(None)
            continue
        num = raw[k][group[c], r] / denom[c]
        obs = block[r, c]
        judged = J.judge(obs, num, tol, reference_bound=f_round[k][r] / denom[c],
                         scale=_scale_entries(problem, j, k, r, c), precision=_precision(problem, j))
        if not judged.all_pass:
            bad[group[c][judged.verdict != J.PASS]] = True
        # a missed dependence moves row r as the entry (r, c) moves it, and passes within atol + rtol |J_rc| on top
        # of the rounding term; column by column it fails above the rounding term alone. Where the tolerance's part
        # is at most the rounding term, what passes here and fails there is within 4 times that stage's own rounding
        # term (twice, over the smallest weight): only groups with an entry whose tolerance is wider are moved in parts
        # (_hidden)
        wide[group[c][(judged.atol + judged.rtol_term).expand(num.shape) > judged.evidence.expand(num.shape)]] = True
        judged_k.append((judged, obs, num, r, c))
    bad |= loose
    again = (bad & ~loose).nonzero().flatten()
    rescued = torch.zeros(count, dtype=torch.bool)
    extrapolated: list[tuple[J.Judged, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None] = []
    if len(again):
        raw2, denom2 = _group_differences(problem, j, group, again, 2 * h, info)
        info["richardson_groups"] = info.get("richardson_groups", 0) + len(again)
        slot = torch.full((count,), -1, dtype=torch.long)
        slot[again] = torch.arange(len(again))
        rescued[again] = True
        for k, (block, m) in enumerate(zip(blocks, sizes)):
            r, c = entries[k]
            rescued[again] &= ~_moved(raw2[k], slot[group], r, c, len(again), m, still[k])
            pick = slot[group[c]] >= 0
            r, c = r[pick], c[pick]
            if block is None:
                extrapolated.append(None)
                continue
            near = raw[k][group[c], r] / denom[c]
            far = raw2[k][slot[group[c]], r] / denom2[c]
            value = extrapolate(near, far, 4.0)
            obs = block[r, c]
            # the central difference's own bound, as _richardson judges a column: it accepts only what the quick
            # stage would accept without its truncation error, and the extrapolation's own truncation (h^4),
            # estimated from D(h) - D(2h), must be within the allowance too
            rounding = f_round[k][r] / denom[c]
            judged = J.judge(obs, value, tol, reference_bound=rounding, scale=_scale_entries(problem, j, k, r, c),
                             precision=_precision(problem, j))
            unsettled = ~(truncation(near - far, value) <= tol.atol + tol.rtol * value.abs() + SAFETY * rounding)
            rescued[group[c][(judged.verdict != J.PASS) | unsettled]] = False
            extrapolated.append((judged, obs, value, r, c))
    # autograd's pattern in the rows the groups do reach (_hidden), for every group Richardson's extrapolation would
    # accept (a missed dependence scales with the step as the entry it joins does, and would survive it; the columns
    # one by one, which these groups would otherwise take, are judged at the quick stage's own resolution) and every
    # group the quick stage accepted with an entry whose tolerance could hide one
    hidden = _hidden(problem, j, group, ((~bad & wide) | rescued).nonzero().flatten(), h, raw, entries, still, info)
    rescued &= ~hidden
    accepted = ~bad & ~hidden  # by the quick stage's differences
    bad = ~accepted & ~rescued
    suspect = found.unheld(idx[bad[group]])
    for k in range(len(sizes)):
        kept = 0
        for item, fine in ((judged_k[k], accepted), (extrapolated[k] if extrapolated else None, rescued)):
            if item is None:
                continue
            judged, obs, num, r, c = item
            clean = fine[group[c]]  # the quick stage's entries in groups it accepted; Richardson's in those it saved
            if not bool(clean.any()):
                continue
            if bool(clean.all()):
                found.beyond = found.beyond or _beyond(judged, tol)
                if tol.default:
                    _seen(found, k, r, c, judged.diff.expand(judged.verdict.shape), obs)
                kept += found.add(judged, obs, num, output=k, rows=r, cols=c)
            else:
                found.beyond = found.beyond or _beyond(judged.take(clean), tol)
                if tol.default:
                    _seen(found, k, r[clean], c[clean], judged.diff.expand(judged.verdict.shape)[clean], obs[clean])
                kept += found.add(judged.take(clean), obs[clean], num[clean], output=k, rows=r[clean], cols=c[clean])
        # the entries outside autograd's pattern agree (zero on both sides, verified), except in suspect and
        # held columns
        found.total += (n - len(suspect) - _held_count(found)) * sizes[k] - kept
    saved = int(rescued.sum())
    said = f"'{problem.names[j]}' sparse: {count} column group(s) for {n} columns" + (
        f" ({saved} group(s) accepted by Richardson's extrapolation from a second difference at twice the steps)"
        if saved else "") + (
        f" ({len(suspect)} column(s) of {int(bad.sum())} group(s) then one by one)" if len(suspect) else "")
    info["structure"] = (f"{said} (from autograd's pattern, verified: rows a group does not reach must not move)"
                         if "structure" not in info else f"{info['structure']}; {said}")
    return suspect


def _group_differences(problem: Problem, j: int, group: torch.Tensor, ids: torch.Tensor, h: torch.Tensor,
                       info: Info) -> tuple[list[torch.Tensor], torch.Tensor]:
    """f(x + d_g) - f(x - d_g) for the column groups *ids* (d_g: every column c of group g moved by h[c]), per output
    as (len(ids), M_k) in float64, and the steps actually taken, up and down, per column (those of other groups: 0)."""
    import torch

    n = problem.inputs[j].numel()
    slot = torch.full((int(group.max()) + 1 if n else 0,), -1, dtype=torch.long)
    slot[ids] = torch.arange(len(ids))
    at = slot[group]  # each column's place among the groups asked for (-1: not asked)
    cols = (at >= 0).nonzero().flatten()
    raw, taken = _row_differences(problem, j, at[cols], cols, h[cols], len(ids), info)
    denom = torch.zeros(n, dtype=torch.float64)
    denom[cols] = taken
    return raw, denom


def _row_differences(problem: Problem, j: int, rows: torch.Tensor, cols: torch.Tensor, hs: torch.Tensor, count: int,
                     info: Info) -> tuple[list[torch.Tensor], torch.Tensor]:
    """f(x + d_i) - f(x - d_i) for i < *count* (d_i: every column cols[e] with rows[e] = i moved by hs[e]), per output
    as (count, M_k) in float64, in batches of at most half a chunk of points; and the steps actually taken, up and
    down, per entry (2 hs where x is not finite: it stays where it is)."""
    import torch

    x = problem.inputs[j]
    flat = x.detach().reshape(-1)
    width = max(1, _chunk(problem, 2 * count) // 2)  # (a few rows: a loop of plain calls, no measuring forward)
    raw: list[list[torch.Tensor]] = [[] for _ in problem.outputs]
    taken = torch.zeros(len(cols), dtype=torch.float64)
    for a in range(0, count, width):
        b = min(count, a + width)
        mine: slice | torch.Tensor
        if b - a == count:  # (one batch: every entry, no selection)
            mine, c, r = slice(None), cols, rows
        else:
            mine = (rows >= a) & (rows < b)
            c, r = cols[mine], rows[mine] - a
        up = flat.reshape(1, -1).repeat(b - a, 1)
        down = up.clone()
        up[r, c] += hs[mine].to(x.dtype)
        down[r, c] -= hs[mine].to(x.dtype)
        step = (up[r, c] - flat[c]).to(torch.float64) + (flat[c] - down[r, c]).to(torch.float64)
        taken[mine] = torch.where(step > 0, step, 2 * hs[mine])  # a non-finite element stays where it is
        with torch.no_grad():
            outs = batched_outputs(problem, j, torch.cat([up, down]).reshape(2 * (b - a), *x.shape), info)
        for k, o in enumerate(outs):
            o = o.reshape(2 * (b - a), -1).to(torch.float64)
            raw[k].append(o[:b - a] - o[b - a:])
    info["evaluations"] = info.get("evaluations", 0) + 2 * count
    return [torch.cat(r) if r else torch.zeros(0, o.numel(), dtype=torch.float64)
            for r, o in zip(raw, problem.outputs)], taken


def _moved(diffs: torch.Tensor, at: torch.Tensor, r: torch.Tensor, c: torch.Tensor, count: int, m: int,
           still: torch.Tensor) -> torch.Tensor:
    """Per group (*count* of them; *at*: each column's group): whether a row that none of its columns reaches in
    autograd's pattern (entries (r, c)) moved beyond *still* in the groups' differences *diffs* (count, m), or in
    any of several sets of them (..., count, m). NaN counts as moved."""
    import torch

    covered = torch.zeros(count, m, dtype=torch.bool)
    mine = at[c] >= 0
    covered[at[c][mine], r[mine]] = True
    moved = (~covered & ~(diffs.abs() <= still)).any(-1)
    return moved.reshape(-1, count).any(0)


def _hidden(problem: Problem, j: int, group: torch.Tensor, ids: torch.Tensor, h: torch.Tensor,
            raw: list[torch.Tensor], entries: list[tuple[torch.Tensor, torch.Tensor]], still: list[torch.Tensor],
            info: Info) -> torch.Tensor:
    """Per group (all of them; only those in *ids* are tested): whether a row it reaches through one of its columns
    depends on another of its columns, which autograd's pattern says it does not. Each group is moved again with only
    the columns whose place in the group has bit b set, for each bit b of the largest group's size (2 evaluations per
    group and bit): a row reached by a moved column must move exactly as with the whole group (*raw*), one reached by
    an unmoved column not at all, to *still* (rounding and the measured noise) — the row's function of its own column
    alone gives the same values at the same points. Any two columns of a group differ in some bit, so a dependence
    between them shows in that draw: the row moves with the other column but not its own, or with its own but without
    the other. A group of one column has nothing to test."""
    import torch

    n = group.numel()
    count = raw[0].shape[0] if raw else 0
    found = torch.zeros(count, dtype=torch.bool)
    if not len(ids) or not n:
        return found
    sizes = torch.bincount(group, minlength=count)
    bits = int(sizes[ids].max() - 1).bit_length()
    if not bits:
        return found
    order = torch.argsort(group, stable=True)
    place = torch.empty(n, dtype=torch.long)
    place[order] = torch.arange(n) - (torch.cumsum(sizes, 0) - sizes)[group[order]]
    slot = torch.full((count,), -1, dtype=torch.long)
    slot[ids] = torch.arange(len(ids))
    # every part of every group in one set of evaluations: row b len(ids) + slot[g] moves the columns of group g whose
    # place has bit b set
    asked = (slot[group] >= 0).nonzero().flatten()
    parts = [asked[(place[asked] >> b) & 1 == 1] for b in range(bits)]
    cols = torch.cat(parts)
    rows = torch.cat([b * len(ids) + slot[group[part]] for b, part in enumerate(parts)])
    every, _ = _row_differences(problem, j, rows, cols, h[cols], bits * len(ids), info)
    moved = ((place.reshape(1, -1) >> torch.arange(bits).reshape(-1, 1)) & 1) == 1  # (bits, n)
    for k, (r, c) in enumerate(entries):
        mine = slot[group[c]] >= 0
        r, c = r[mine], c[mine]
        part = every[k].reshape(bits, len(ids), -1)  # (bits, groups, M_k)
        limit = still[k].reshape(-1)
        want = torch.where(moved[:, c], raw[k][group[c], r].reshape(1, -1), 0.0)  # (bits, entries)
        off = ~((part[:, slot[group[c]], r] - want).abs() <= limit[r])  # NaN counts as off
        found[group[c][off.any(0)]] = True
        found[ids] |= _moved(part, slot[group], r, c, len(ids), part.shape[2], limit)  # rows no column reaches
    info["pattern_draws"] = info.get("pattern_draws", 0) + bits * len(ids)
    return found


def _held_count(found: Findings) -> int:
    return 0 if found.held is None else len(found.held)


def _scale_entries(problem: Problem, j: int, k: int, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """:func:`_scale` at entries (rows, cols)."""
    import torch

    x = problem.inputs[j].detach().reshape(-1)[cols].abs().to(torch.float64).clamp_min(1.0)
    return problem.f_size(k)[rows] / x


# -- final stage ---------------------------------------------------------------------------------

#: Ridders restarted from h0 / 10^k, k = 1..SHRINKS, where its first tableau could not decide: down to
#: 1e-10 max(1, |x|), where rounding (eps |f| / h ~ 2e-6 |f|) outweighs any truncation; sqrt at 9e-6 needs
#: h0 = 1e-7 to resolve RESOLVE of its slope
SHRINKS = 8
UNDECIDED = (J.COARSE, J.DISCONTINUITY, J.EVIDENCE_NONFINITE)


def _shrink(problem: Problem, j: int, k: int, part: torch.Tensor, obs: torch.Tensor, value: torch.Tensor,
            bound: torch.Tensor, sides: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], judged: J.Judged,
            tol: ToleranceUsed, info: Info, step: torch.Tensor
            ) -> tuple[torch.Tensor, torch.Tensor, J.Judged, torch.Tensor]:
    """Entries the first tableau left undecided (an error bound too large for the value, a jump inside
    the steps, steps that left the function's domain) get Ridders again from smaller first steps, h0/10,
    h0/100, ...: near a singularity (tan near a pole, asin near 1, polygamma near a pole) the truncation
    error of the large steps dominates, and smaller ones see the smooth function. Per entry the
    estimate with the smallest error bound is kept, and the entry is judged again; an entry that is
    still undecided stays inconclusive. A real kink (one-sided slopes that differ) is not retried. *step*: each
    entry's last Ridders step, (w, M) as *value*, kept with the estimate (:func:`_staircase`), and returned with it."""
    import torch

    base = RIDDERS_BASE
    left, right, noise, trunc = sides
    clash: torch.Tensor | None = None  # (w, M): entries whose smaller steps disagreed with their larger ones
    for _ in range(SHRINKS):
        undecided = torch.isin(judged.reason.expand_as(judged.verdict), torch.tensor(UNDECIDED))
        undecided |= _unresolved(problem, j, judged, bound.T, tol)
        # a tableau from the next first step h0 has a bound of at least the rounding noise / h0: an entry whose
        # finite bound is already that fine cannot gain from smaller steps (sums that round coarsely: each retry
        # cost 8 evaluations per column, and all SHRINKS of them ran)
        floor = problem.noise(k).reshape(-1, 1) / ((base / 10) * problem.x_size(j)[part].reshape(1, -1))
        undecided &= ~(bound.T <= floor)
        if not bool(undecided.any()):
            break
        base /= 10
        cols = undecided.any(dim=0).nonzero().flatten()  # judged is (M, w): columns of this part
        info["ridders_retries"] = info.get("ridders_retries", 0) + len(cols)
        retried: list[torch.Tensor] = []
        (v2, b2) = ridders_columns(problem, j, part[cols], info, base=base, steps=retried)[k]  # (w', M)
        # a finer estimate outside the coarser one's allowance, and the coarser outside its own: at least one bound
        # is wrong, and it is the larger steps' (their truncation, or steps beyond the function's own scale: sin
        # at 1e4, whose first tableau from h0 = 100 sees sin(h) / h of steps 100 to 3 and settled on 0.005 with a
        # bound of 1e-13, was inconclusive in full mode, every finer tableau set aside for its larger bound)
        apart = (v2 - value[cols]).abs() > SAFETY * (bound[cols] + b2)
        better = (b2 < bound[cols]) | ~torch.isfinite(bound[cols]) | apart
        better &= torch.isfinite(v2) & torch.isfinite(b2)
        # On a staircase (a float32 cast inside a float64 function: one-sided slopes both exactly 0, or an estimate
        # of exactly 0 from steps below the stairs where the larger steps saw a slope) a finer estimate is kept only
        # inside the coarser one's allowance: the quanta grow as 1 / h while the bound, from float64's rounding,
        # does not (0.41828 +- 6e-9 from h0 = 1e-5 for a slope of 0.41759 failed). Elsewhere, near a singularity,
        # it is the larger steps' bound that underestimates (their truncation), and the finer estimate stands
        flat = (v2 == 0) | (((left[cols] == 0) & (right[cols] == 0)).reshape(v2.shape) if left.numel() else False)
        outside = better & flat & ((v2 - value[cols]).abs() > SAFETY * bound[cols]) & torch.isfinite(bound[cols])
        clash = torch.zeros_like(bound, dtype=torch.bool) if clash is None else clash
        clash[cols] |= outside
        better &= ~outside
        value, bound, step = value.clone(), bound.clone(), step.clone()
        value[cols] = torch.where(better, v2, value[cols])
        bound[cols] = torch.where(better, b2, bound[cols])
        step[cols] = torch.where(better, retried[k], step[cols])
        judged = J.judge(obs, value.T, tol, reference_bound=bound.T, scale=_scale(problem, j, k, part),
                         slopes=(left.T, right.T, noise.T, trunc.T), precision=_precision(problem, j))
    if left.numel():
        value, bound, judged = _staircase(problem, j, k, part, obs, value, bound, sides, judged, tol, info, base, step)
    if clash is not None and bool(clash.any()):
        # a pass the smaller steps could not refine, because they disagree with the larger ones beyond the
        # bounds: the function is not smooth at their scale, and the default tolerance's promise is not kept
        weak = clash.T & _unresolved(problem, j, judged, bound.T, tol)
        if bool(weak.any()):
            judged = judged.undecided(weak, J.COARSE)
    if left.numel():
        # a pass still coarser than the promise stands only where the slopes show a smooth function (J.rough);
        # on a staircase (exp of a float32 cast: Ridders from 1e-2 within 8e-6 of a slope its float32 backward
        # misses by 6e-8) it is not differentiable at the small step's scale, as directional mode finds it
        weak = _unresolved(problem, j, judged, bound.T, tol)
        if bool(weak.any()):
            weak &= J.rough(left.T, right.T, noise.T, value.T)
        if bool(weak.any()):
            judged = judged.undecided(weak, J.DISCONTINUITY)
    return value, bound, judged, step


def _staircase(problem: Problem, j: int, k: int, part: torch.Tensor, obs: torch.Tensor, value: torch.Tensor,
               bound: torch.Tensor, sides: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
               judged: J.Judged, tol: ToleranceUsed, info: Info, base: float, step: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, J.Judged]:
    """Entries of output k along columns *part* that fail where Ridders' tableau may misjudge its own error.

    (1) Where the one-sided slopes are exactly 0 and the estimate is not: the function is a staircase at the slopes'
    scale (a float16 cast inside a float64 function, tanh(x.half()): flat over 5e-4 of x), and Ridders' columns, each
    crossing a few stairs, quantize, so that its tableau claimed 1e-12 for an estimate 2% off, and the right
    backward FAILED, as in gradcheck, where directional mode says inconclusive (directional._quantized). The stairs'
    height is measured as there: f along the column at 2t, 4t, ... below the first step (t = sqrt(eps)
    max(1, |x|)), whose first change from f(x) is one or two stairs; each quotient Ridders divides by its step is
    off by up to that, and the bound grows by twice it over the step of the estimate's last quotient (*step*,
    (w, M); where f moves at none of the probes, by |the estimate|). Over the smallest step any tableau took
    instead, a float32 cast's bug of 1% that directional mode fails was inconclusive.

    (2) Elsewhere, for an entry within the quick stage's allowance (3e-9 max(1, |f|) / max(1, |x|): one only the
    open-entry rules send here, _unresolved_terms): a second tableau from 3/4 of the first step, as
    directional._reproduced; where the two differ by more than SAFETY times the bound, the bound is their
    difference. gelu at -7.7 computes x (1 + erf(x / sqrt 2)) / 2 = -5.3e-14, its slope of 4e-13 from 1 + erf in
    stairs of 1.1e-16, and the estimate was 2% off on a bound of 3e-16; its right backward FAILED. A smooth entry's
    two tableaus agree, and a bug of 1e-8 there still fails. (3) Where no step moved the output at all (below).
    *base*: the first step's relative size."""
    import torch

    left, right, _, _ = sides
    level = (left.T == 0) & (right.T == 0)
    still = (judged.verdict == J.FAIL) & level & (value.T == 0)  # (M, w): no step moved it at all
    failed = (judged.verdict == J.FAIL) & (value.T != 0)
    if not bool(failed.any() or still.any()):
        return value, bound, judged
    flat = failed & level
    sizes = problem.x_size(j)[part].reshape(1, -1)
    eps = torch.finfo(problem.outputs[k].dtype).eps
    unit = SAFETY * ROUNDING_ULPS * eps / EPS_POWERS["cbrt"]
    small = failed & ~flat & (value.T.abs() * sizes <= unit * problem.f_size(k).reshape(-1, 1))
    if not bool(flat.any() or small.any() or still.any()):
        return value, bound, judged
    bound = bound.clone()
    if bool(still.any()):
        # (3) an output no step moved (gelu at -9.4 computes -0.0 wherever the steps go) has a slope of at most its
        # rounding, ROUNDING_ULPS eps max(1, |f|), twice, over the step: autograd's 3e-19 there FAILED against an
        # estimate of exactly 0 with a bound of 0 (as directional._still bounds the elements a projection left still)
        hold = 2 * ROUNDING_ULPS * eps * problem.f_size(k).reshape(1, -1) / step
        bound = torch.where(still.T, bound + hold, bound)
    if bool(flat.any()):
        cols = flat.any(dim=0).nonzero().flatten()
        quantum = _quanta(problem, j, part[cols], base, info)[k]  # (w', M)
        extra = torch.where(quantum > 0, 2 * quantum / step[cols], value[cols].abs())
        bound[cols] = torch.where(flat.T[cols], bound[cols] + extra, bound[cols])
    if bool(small.any()):
        cols = small.any(dim=0).nonzero().flatten()
        other, other_bound = ridders_columns(problem, j, part[cols], info, base=0.75 * base)[k]  # (w', M)
        noise = torch.maximum(other_bound, (other - value[cols]).abs()).nan_to_num(nan=math.inf)
        wider = small.T[cols] & (noise > SAFETY * bound[cols])
        bound[cols] = torch.where(wider, noise, bound[cols])
    left, right, noise_t, trunc = sides
    judged = J.judge(obs, value.T, tol, reference_bound=bound.T, scale=_scale(problem, j, k, part),
                     slopes=(left.T, right.T, noise_t.T, trunc.T), precision=_precision(problem, j))
    return value, bound, judged


def _quanta(problem: Problem, j: int, cols: torch.Tensor, base: float, info: Info) -> list[torch.Tensor]:
    """Per output, (len(cols), M): the first change of each output element from its value at the point when input
    j's element c moves by 2t, 4t, ... below base max(1, |x_c|) (t = sqrt(eps) max(1, |x_c|)); 0 where none moves
    it (or only to a non-finite value). One evaluation per probe and column."""
    import torch

    x = problem.inputs[j].detach()
    eps = torch.finfo(x.dtype).eps
    count = max(1, int(math.floor(math.log2(base / eps ** 0.5))))  # 2t ... 2^count t, all below the first step
    size = problem.x_size(j)[cols]
    w = len(cols)
    moves = (eps ** 0.5) * size.reshape(1, -1) * (2.0 ** torch.arange(1, count + 1, dtype=torch.float64)).reshape(-1, 1)
    batch = x.reshape(1, -1).to(torch.float64).repeat(count * w, 1)
    rows = torch.arange(count * w)
    batch[rows, cols.repeat(count)] += moves.reshape(-1)
    outs = batched_outputs(problem, j, batch.to(x.dtype).reshape(count * w, *x.shape), info)
    info["evaluations"] = info.get("evaluations", 0) + count * w
    result = []
    for out, at in zip(outs, problem.outputs):
        f = out.reshape(count, w, -1).to(torch.float64)
        change = (f - at.detach().reshape(1, 1, -1).to(torch.float64)).abs()
        moved = (change > 0) & torch.isfinite(change)
        first = moved.to(torch.int8).argmax(dim=0, keepdim=True)  # the first probe that moved it (0 where none)
        result.append(torch.where(moved.any(dim=0), change.gather(0, first).squeeze(0), 0.0))
    return result


def _unresolved(problem: Problem, j: int, judged: J.Judged, bound: torch.Tensor, tol: ToleranceUsed) -> torch.Tensor:
    """Entries that pass, but on evidence coarser than the default tolerance's promise: SAFETY times Ridders'
    error bound above RESOLVE |value| (a backward off by 1e-8 could pass within it), in float64 at the default
    tolerance (as :func:`_unresolved_terms` asks of the quick stage, and directional._unresolved of a direction).
    They get Ridders from smaller steps too (:func:`_shrink`), the finest bound kept."""
    import torch

    shape = judged.verdict.shape
    if not tol.default or problem.inputs[j].dtype != torch.float64 or not judged.verdict.numel():
        return torch.zeros(shape, dtype=torch.bool)
    # only entries above their own bound (below it a relative error means nothing) and at least 1% of the block's
    # largest (a NaN there: none): a smaller one beside a large output rounds no finer at smaller steps, and the
    # directional confirmation, which full() asks wherever central differences leave an entry unresolved, judges
    # it with output weights of order one
    size, wide = judged.ref.expand(shape).abs(), SAFETY * bound.expand(shape)
    floor = 0.01 * float(size.max())
    return (judged.verdict.expand(shape) == J.PASS) & (wide > RESOLVE * size) & (size > wide) & (size >= floor)


def _slope_resolution(obs: torch.Tensor, value: torch.Tensor, bound: torch.Tensor, tol: ToleranceUsed) -> torch.Tensor:
    """The rounding bound the one-sided slopes of each entry may have (evaluate.slopes), (w, M) as *value*:
    SLOPE_ROUNDING of its discrepancy |autograd - Ridders| (or of the finest margin the judge uses with slopes,
    SLOPE_REL of the values, whichever is larger) where the discrepancy exceeds the allowance (the judge's rule:
    atol + rtol |value| + SAFETY bound), so that a kink or a jump as large as the discrepancy is told from
    rounding; inf where it does not (the slopes decide nothing there)."""
    import torch

    diff = (obs.T - value).abs()
    outside = diff > tol.atol + tol.rtol * value.abs() + SAFETY * bound
    smallest = SLOPE_REL * torch.maximum(obs.T.abs(), value.abs())
    return torch.where(outside, SLOPE_ROUNDING * torch.maximum(diff, smallest), math.inf)


def _finer(refined: list[tuple[torch.Tensor, torch.Tensor]], used: list[torch.Tensor], part: torch.Tensor,
           extrapolated: Extrapolated) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Ridders' (value, bound) per output, (w, M) each, with the Richardson estimates of *extrapolated* taken
    where their bound is finer and the two agree (within SAFETY times both bounds); *used* (each entry's last
    step) follows."""
    import torch

    at = [i for i, c in enumerate(part.tolist()) if c in extrapolated]
    if not at:
        return refined
    out = []
    for k, (value, bound) in enumerate(refined):
        value, bound = value.clone(), bound.clone()
        for i in at:
            qv, qb, h = extrapolated[int(part[i])][k]
            take = (qb < bound[i]) & ((qv - value[i]).abs() <= SAFETY * (qb + bound[i])) & torch.isfinite(qv)
            take &= torch.isfinite(qb)
            value[i] = torch.where(take, qv, value[i])
            bound[i] = torch.where(take, qb, bound[i])
            used[k][i] = torch.where(take, h, used[k][i])
        out.append((value, bound))
    return out


def _final(problem: Problem, j: int, cols: torch.Tensor, analytic: dict[tuple[int, int], torch.Tensor | None],
           banded: Band | None, tol: ToleranceUsed, found: Findings, info: Info,
           extrapolated: Extrapolated | None = None) -> None:
    """Judge every entry of columns *cols* of input j with Ridders per entry and one-sided slopes. Where the
    Richardson stage left an estimate of a column (*extrapolated*: evidence below float64's precision) whose bound
    is finer than Ridders' and which Ridders' agrees with, that estimate is the evidence: in float32 Ridders' smallest
    steps round coarsely (sin's slope -0.27046 +- 4e-4 from a last step of 2.3e-3, where Richardson at the quick
    stage's 9e-3 gives -0.27046 +- 1.6e-4), and a backward 1% off passed within ten times the coarser bound."""
    import torch

    cols = found.unheld(cols)
    own: dict[tuple[int, int], torch.Tensor | None] = {}  # rows whose own rounding was measured (_own_rounding)
    width = max(1, _chunk(problem, 12 * len(cols)) // 12)
    info["ridders_columns"] = info.get("ridders_columns", 0) + len(cols)
    for a in range(0, len(cols), width):
        part = cols[a:a + width]
        used: list[torch.Tensor] = []  # per output, each entry's last Ridders step (_staircase)
        refined = ridders_columns(problem, j, part, info, steps=used)
        if extrapolated:
            refined = _finer(refined, used, part, extrapolated)
        # the slopes decide only entries outside the allowance (a kink or a jump makes them inconclusive):
        # they are measured for the columns holding such an entry, which are then judged with them
        first = []
        marks = [False] * len(part)
        for k, (value, bound) in enumerate(refined):
            ana = _columns(analytic, banded, j, k, part)
            obs = torch.zeros_like(value.T) if ana is None else ana
            judged: Any = _small_judged(problem, j, k, obs, value.T, part, tol, found, bound=bound.T)
            if judged is None:
                judged = J.judge(obs, value.T, tol, reference_bound=bound.T, scale=_scale(problem, j, k, part),
                                 precision=_precision(problem, j))
            _mark(marks, judged, len(part))
            # a pass on evidence too coarse for RESOLVE: Ridders again from smaller steps (in Python floats for a
            # block judged in them: the same IEEE products)
            if not isinstance(judged, tuple):
                for i in _unresolved(problem, j, judged, bound.T, tol).any(0).nonzero().flatten().tolist():
                    marks[i] = True
            elif tol.default and problem.inputs[j].dtype == torch.float64 and not any(r != r for r in judged[2]):
                floor = 0.01 * max((abs(r) for r in judged[2]), default=0.0)
                for i, (ok, r, b) in enumerate(zip(judged[0], judged[2], bound.T.reshape(-1).tolist())):
                    if ok and SAFETY * b > RESOLVE * abs(r) and abs(r) > SAFETY * b and abs(r) >= floor:
                        marks[i % len(part)] = True
            first.append((k, ana is None, obs, value, bound, judged))
        bad = torch.tensor(marks, dtype=torch.bool)
        some = any(marks)
        sub = part[bad]
        sides = None
        if some:  # each entry outside its allowance asks slopes fine enough to tell a kink as large as its discrepancy
            sides = slopes(problem, j, sub, info, [_slope_resolution(obs[:, bad], value[bad], bound[bad], tol)
                                                   for _, _, obs, value, bound, _ in first])
        for k, none, obs, value, bound, judged in first:
            kind = "none-gradient" if none else None
            note = "autograd gives None for this input" if none else ""
            rows = torch.arange(value.shape[1]).reshape(-1, 1)
            clean = ~bad
            if isinstance(judged, tuple):  # judged in Python floats: its passed columns counted from them
                _count(part, [(k, obs, value.T, judged)], marks, found, tol, quick=False)
            elif sides is None:
                found.add(judged, obs, value.T, output=k, rows=rows, cols=part.reshape(1, -1), kind=kind, note=note)
            elif bool(clean.any()):
                found.add(judged.columns(clean), obs[:, clean], value.T[:, clean], output=k, rows=rows,
                          cols=part[clean].reshape(1, -1), kind=kind, note=note)
            if sides is None:
                continue
            left, right, noise, trunc = sides[k]
            value, bound, obs = value[bad], bound[bad], obs[:, bad]
            judged = J.judge(obs, value.T, tol, reference_bound=bound.T, scale=_scale(problem, j, k, sub),
                             slopes=(left.T, right.T, noise.T, trunc.T), precision=_precision(problem, j))
            value, bound, judged, step = _shrink(problem, j, k, sub, obs, value, bound, sides[k], judged, tol, info,
                                                 used[k][bad])
            if banded is None and not none:
                judged = _own_rounding(problem, j, k, sub, obs, value.T, bound.T, judged, tol, info,
                                       (left.T, right.T, noise.T, trunc.T), own)
            judged = _stairs(problem, j, k, sub, obs, value.T, bound.T, step.T, judged, tol, info)
            found.add(judged, obs, value.T, output=k, rows=rows, cols=sub.reshape(1, -1), slopes=(left.T, right.T),
                      kind=kind, note=note)


def _stairs(problem: Problem, j: int, k: int, cols: torch.Tensor, obs: torch.Tensor, value: torch.Tensor,
            bound: torch.Tensor, step: torch.Tensor, judged: J.Judged, tol: ToleranceUsed, info: Info) -> J.Judged:
    """The failed entries (rows of output k, columns *cols* of input j; *obs* autograd's, *value* the evidence, *bound*
    its bound, *step* the step of its last quotient, all (M, w)) whose difference lies within the rounding the function
    shows at moves from about 1e-9 to 1e-6 of that column alone (:func:`evaluate.measure_stairs`) over that step:
    inconclusive (J.STAIRS), never a pass. Only where that rounding is more than SAFETY times the one measured at moves
    of a few ulps (problem.noise, which the bound counts already): a function that rounds its inputs coarser than their
    dtype (x + c inside, x held to c's spacing) shows it at the larger moves alone. sin(x + 1e5) and softmax(x + 1e5):
    every quotient of Ridders' tableau was off by up to 1e-11 over its step, 1.6e-9 of the slope, and the right
    backwards FAILED on bounds of 1e-12 (gradcheck passes them). A difference beyond it still fails (a bug of 1e-4).

    The whole input is measured first (20 evaluations), moving every element at once: where even that rounding, which
    every element's adds to, does not explain a failure, it stands, and nothing more is measured (a wrong backward's
    usual failure). Then each remaining column alone (20 evaluations each): the rounding of another element is not
    this column's (K sin(x0 + 1e5) + sum(x[1:]^3) at K = 1e7: x0's rounding, moved with x1, made a backward 1% off at
    x1 inconclusive)."""
    import torch

    from .evaluate import STAIR_BASE, stair_reading

    failed = judged.verdict.expand(obs.shape) == J.FAIL
    largest = (STAIR_BASE * problem.x_size(j)[cols]).reshape(1, -1)  # the measure's largest move, per column
    slope = torch.maximum(obs.abs(), value.abs())
    if bool(failed.any()):
        # where no such rounding could explain the difference (at most about 2 |J| H per evaluation, H the measure's
        # largest move: stairs as wide as the moves, each evaluation off by half a stair; wider ones read flat at the
        # slopes' steps), nothing is measured: a wrong backward's usual failure
        failed &= (obs - value).abs() <= SAFETY * (bound + 2.08 * slope * largest / step)
    if not bool(failed.any()):
        return judged
    noise = problem.noise(k).reshape(-1, 1)
    # (the whole input's reading, every pair's: a gate for the columns' own measures, whose readings are held to what
    # stairs could make; here the other columns' rounding adds to each entry's)
    whole = problem.stairs(j, k).amax(0).reshape(-1, 1)
    whole = torch.where(whole > SAFETY * noise, whole, 0.0).expand(obs.shape)
    if not bool((failed & (whole > 0)).any()):
        return judged

    def redo(rounding: torch.Tensor) -> torch.Tensor:
        # (the bound with the rounding alone: the slopes' kink or jump, judged against a wider bound, made a difference
        # far beyond it "not failed", and an entry off by 1e-3 beside sin(x0 + 1e9) inconclusive, a review)
        return J.judge(obs, value, tol, reference_bound=bound + rounding / step, scale=_scale(problem, j, k, cols),
                       precision=_precision(problem, j)).verdict.expand(obs.shape) != J.FAIL

    candidate = failed & (whole > 0) & redo(whole)
    at = candidate.any(0).nonzero().flatten()
    if not len(at):
        return judged
    alone = torch.zeros_like(obs)
    own = stair_reading(problem.column_stairs(j, k, cols[at], info).transpose(1, 2), largest[:, at],
                        slope[:, at], step[:, at], SAFETY * noise)  # (M, w')
    alone[:, at] = torch.where(own > SAFETY * noise, own, 0.0)
    return judged.undecided(candidate & (alone > 0) & redo(alone), J.STAIRS)


def _own_rounding(problem: Problem, j: int, k: int, cols: torch.Tensor, obs: torch.Tensor, value: torch.Tensor,
                  bound: torch.Tensor, judged: J.Judged, tol: ToleranceUsed, info: Info,
                  sides: tuple[torch.Tensor, ...], cache: dict[tuple[int, int], torch.Tensor | None]) -> J.Judged:
    """The failed entries (rows of output k, columns *cols* of input j: *obs* autograd's, *value* the evidence, *bound*
    its bound) whose autograd value is no larger than autograd's own rounding in float64, and whose difference lies
    within that rounding and the evidence's bound: inconclusive (J.OWN_ROUNDING), as directional.judge_along judges a
    projection (directional.own_rounding). The rounding is measured per entry: the range of autograd's values of it,
    the check's own (from its random row weight) and the rows taken again with unit weights and with them scaled by
    each of directional.OWN_SCALINGS, divided back (5 backwards per row measured, each row once per check: *cache*,
    (k, row) -> its values, None where not measurable). Not where the weights doubled do not give exactly twice the
    row (a backward not linear in its grad_output, or nondeterministic), nor where the range is more than float64's
    rounding at the output's size, OWN_ULPS eps |f_r| per unit of the input (a backward rounded through float32). Only
    entries where the evidence allows 0 and autograd's value is within SAFETY times that are measured: a wrong
    backward's usual failure measures nothing. At unit weights alone one of softmax(x + c)'s residues read
    exactly 0 at every scaling, where the check's own row weight read 2.4e-17. softmax(x + c) at c = 1e8: every entry
    of c's column is 0, autograd's a residue of 1e-17 of cancelling terms, and Ridders per entry reads exactly 0 on a
    bound of 1e-19: a right backward FAILED."""
    import torch

    from .directional import OWN_SCALINGS, OWN_ULPS

    cap = (OWN_ULPS * EPS64 * problem.f_scale(k)).reshape(-1, 1).expand(obs.shape)
    candidate = ((judged.verdict.expand(obs.shape) == J.FAIL) & (value.abs() <= SAFETY * bound)
                 & (obs.abs() <= SAFETY * cap))
    rows = candidate.any(1).nonzero().flatten().tolist()
    if not rows:
        return judged
    missing = [r for r in rows if (k, r) not in cache]
    if missing:
        m = problem.outputs[k].numel()
        pos = problem.diff.index(j)
        got: list[torch.Tensor] = []
        for a in (1.0, 2.0, *OWN_SCALINGS):
            weights = torch.zeros(len(missing), m, dtype=torch.float64)
            weights[torch.arange(len(missing)), torch.tensor(missing)] = a
            g = analytic_rows(problem, k, weights, info)[pos]
            info["backward_rows"] = info.get("backward_rows", 0) + len(missing)
            if g is None or g.is_complex():
                cache.update({(k, r): None for r in missing})
                break
            got.append(g)
        else:
            exact = (got[1] == 2 * got[0]) | (got[0].isnan() & got[1].isnan())
            for i, r in enumerate(missing):
                cache[k, r] = (torch.stack([got[0][i], *(g[i] / a for a, g in zip(OWN_SCALINGS, got[2:]))])
                               if bool(exact[i].all()) else None)
    measured = torch.full_like(obs, math.inf)
    for r in rows:
        row = cache[k, r]
        if row is not None:
            # the range of autograd's values of each entry: the check's own (from its random row weight) among them
            values = torch.cat([obs[r].reshape(1, -1), row[:, cols]])
            measured[r] = values.amax(0) - values.amin(0)
    candidate &= (measured <= cap) & (obs.abs() <= SAFETY * measured)
    if not bool(candidate.any()):
        return judged
    redo = J.judge(obs, value, tol, observed_bound=measured.masked_fill(~candidate, 0.0), reference_bound=bound,
                   scale=_scale(problem, j, k, cols), slopes=sides, precision=_precision(problem, j))
    return judged.undecided(candidate & (redo.verdict.expand(obs.shape) != J.FAIL), J.OWN_ROUNDING)
