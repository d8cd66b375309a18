"""Terminal rendering with rich: one row per record, then every failure kept intact; and the
readable report of a ``ga.check`` result (``str(result)``).

Renders from records only (never from our own messages). Long values are summarized; whole
tensors and Jacobians are never printed; text from users has its control characters escaped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..record import OUTCOMES, Comparison, Discrepancy, Record, summarize, summary_line
from ..tolerances import ToleranceUsed
from .common import WEIGHTED, clean, fmt_number, fmt_value, idx, pct, plural, rel_text

if TYPE_CHECKING:
    from ..api import CheckResult

SHOWN = 5  # worst comparisons printed per record; the rest are in result.mismatches / the JSON record
VERDICT_STYLE = {"pass": "green", "fail": "red", "error": "magenta", "inconclusive": "yellow",
                 "skipped": "dim", "planned": "dim"}
COLUMNS = ("verdict", "check", "method", "stored/returned", "expected", "observed", "abs err",
           "tolerance", "shape", "dtype", "device")


# -- table cells ---------------------------------------------------------------------------------


def _line(text: object) -> str:
    """*text* on one line, every control character escaped, newlines too (a name holding a newline forged a line of
    the report: "input 'x' (vjp): PASS", a fresh-eyes audit)."""
    return clean(text, newlines=False)

def _input_meta(r: Record) -> Any:
    return next((m for m in r.inputs if m.name == r.input), None)


def _shape(r: Record) -> str:
    shape = r.shape
    meta = _input_meta(r)
    if shape is None and meta is not None:
        shape = meta.shape
    return "—" if shape is None else idx(shape)


def _meta(r: Record, key: str) -> str:
    value = getattr(r, key)
    meta = _input_meta(r)
    if value is None and meta is not None:
        value = getattr(meta, key)
    return "—" if value is None else clean(value, newlines=False)


def _is_check(r: Record) -> bool:
    return r.suite == "check" and r.expected_value is None and r.analytical_gradient is None


def _expected_cell(r: Record) -> str:
    if r.method == "ladder":
        allowed = r.details.get("allowed")
        return f"<= {fmt_value(allowed)} mean |err|" if allowed is not None else "—"
    if r.expect_error:
        return clean(r.expect_error.get("type"), newlines=False)
    if _is_check(r):
        worst = r.discrepancy.worst[0] if r.discrepancy and r.discrepancy.worst else None
        if worst is not None and worst.reference is not None:
            return f"{fmt_number(worst.reference)} (numeric)"
        return "numeric" if r.executed else "(numeric)"
    return fmt_value(r.expected_value)


def _observed_cell(r: Record) -> str:
    if r.verdict == "skipped":
        return "(skipped)"
    if not r.executed:
        return "(not run)"
    if r.expect_error:
        return _line(r.observed_error.type) if r.observed_error else "no error"
    if r.verdict == "error":
        return f"error: {_line(r.error.type) if r.error else '?'}"
    if r.method == "ladder":
        return f"{fmt_value(r.observed_value)} mean |err|"
    if r.method == "observation":
        return fmt_value(r.observed_value)
    if r.method == "taylor":
        order = r.details.get("order")
        return f"order {order:.2f}" if isinstance(order, float) else "exact"
    if _is_check(r):
        worst = r.discrepancy.worst[0] if r.discrepancy and r.discrepancy.worst else None
        if worst is not None and worst.observed is not None:
            return f"{fmt_number(worst.observed)} (autograd)"
        return "autograd"
    return fmt_value(r.observed_gradient)


def tolerance_cell(tol: ToleranceUsed | None) -> str:
    if tol is None:
        return "—"
    mark = "" if tol.default else "*"
    text = f"{tol.atol:.3g}/{tol.rtol:.3g}{mark}"
    return text + ("+ev" if tol.evidence_factor else "")


def _verdict_cell(r: Record) -> str:
    if r.outcome == "expected failures":
        return "fail (expected)"
    if r.outcome == "unexpected passes":
        return "pass (unexpected)"
    return r.verdict


def check_name(r: Record) -> str:
    return clean(r.check, newlines=False) + (f" [{clean(r.input, newlines=False)}]" if r.input else "")


def row(r: Record) -> list[str]:
    disc = r.discrepancy
    # every cell cleaned: a results file may hold control characters in any string field the schema admits
    # (method, dtype, device, ...), and a hand-edited one reached the terminal raw (a fresh-eyes audit)
    return [clean(cell, newlines=False) for cell in (
        _verdict_cell(r), check_name(r), r.method, str(r.stored_or_returned or "—"),
        _expected_cell(r), _observed_cell(r), fmt_number(disc.max_abs) if disc else "—",
        tolerance_cell(r.tolerance), _shape(r), _meta(r, "dtype"), _meta(r, "device"))]


def table(records: Sequence[Record], *, title: str | None = None) -> Any:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, highlight=False,
              padding=(0, 1, 0, 0))
    rows = [row(r) for r in records]
    longest = max((len(cells[1]) for cells in rows), default=5)
    for i, name in enumerate(COLUMNS):
        natural = max([len(name)] + [len(cells[i]) for cells in rows])
        wraps = name in ("check", "expected", "observed")
        t.add_column(name, overflow="fold",
                     min_width=min(longest, 32) if name == "check" else min(natural, 12) if wraps else natural)
    for r, cells in zip(records, rows):
        style = VERDICT_STYLE.get(r.verdict, "")
        cells = [escape(c) for c in cells]
        cells[0] = f"[{style}]{cells[0]}[/]" if style else cells[0]
        t.add_row(*cells)
    return t


# -- the intact account of one record ------------------------------------------------------------

def needs_detail(r: Record) -> bool:
    return r.outcome in ("failed", "errors", "expected failures", "unexpected passes", "inconclusive", "skipped")


def detail_lines(r: Record, *, repro: str | None = None) -> list[str]:
    """The intact account of one failed or errored record: code, inputs, discrepancy, env."""
    head = f"{_verdict_cell(r).upper()}: {clean(r.check, newlines=False)}"
    if r.method == "observation":
        head += f" — {clean(r.input, newlines=False)} (observed)"
    elif r.input:
        head += f" — d/d{clean(r.input, newlines=False)} by {r.method} ({r.stored_or_returned})"
    lines = [head, f"  source:     {clean(r.source, newlines=False) or '—'}"]
    fn = clean(r.function).splitlines() or [""]
    lines.append(f"  function:   {fn[0]}")
    lines += [f"              {line}" for line in fn[1:]]
    for m in r.inputs:
        value = "" if m.value is None else fmt_value(m.value) + " "
        lines.append(f"  input {clean(m.name, newlines=False)}:  {value}shape {tuple(m.shape)} {m.dtype} on {m.device}"
                     + ("" if m.requires_grad else " (no gradient)"))
    if r.derivation:
        lines.append(f"  derivation: {clean(r.derivation, newlines=False)}")
    if isinstance(r.expect, Mapping):
        lines.append(f"  expected to fail because: {clean(r.expect.get('why'), newlines=False)}")
    if r.protocol:
        lines.append(f"  protocol:   {' → '.join(r.protocol)}")
    lines += discrepancy_lines(r)
    if r.reason:
        lines.append(f"  note:       {clean(r.reason, newlines=False)}")
    lines += error_lines(r.error or (r.observed_error if r.verdict != "pass" else None))
    lines.append(f"  environment: {r.environment or '—'}")
    rerun = repro or r.rerun
    if rerun:
        lines.append(f"  re-run:     {clean(rerun, newlines=False)}")
    return lines


#: the traceback's last lines shown under an error (extended back to the start of the frame they begin in)
TRACEBACK_LINES = 6
#: at most this many lines of it, whole frames or not (a long message, an exception group)
TRACEBACK_MAX = 12


def error_lines(err: Any, indent: str = "  ") -> list[str]:
    """The error's type and message, then the end of its traceback: whole frames where they fit (a cut excerpt
    began with a frame's code line and no 'File' line above it), without the final message the first line says
    (on one line or several, the type qualified or not)."""
    if err is None:
        return []
    head = f"{_line(err.type)}: {clean(err.message, newlines=False)}" if err.message else _line(err.type)
    lines = [f"{indent}error:      {head}"]
    tb = _own_frames(_without_message(str(err.traceback).splitlines(), str(err.type)))
    start = max(0, len(tb) - TRACEBACK_LINES)
    while start > 0 and not _frame_start(tb[start]) and len(tb) - start < TRACEBACK_MAX:
        start -= 1
    return lines + [f"{indent}  " + clean(line) for line in tb[start:]]


def _frame_start(line: str) -> bool:
    """A traceback line naming a frame: '  File ...' (in an exception group's '  |   File ...' too)."""
    return line.lstrip(" |").startswith("File ")


def _without_message(tb: list[str], kind: str) -> list[str]:
    """*tb* without its last exception line and the message lines after it ('ValueError: ...', or
    'torch._C._LinAlgError: ...', a bare 'ValueError', a message of several lines): the error line says them."""
    for i in range(len(tb) - 1, -1, -1):
        line = tb[i]
        if not line.startswith((" ", "|")) and re.match(rf"([\w.<>]*\.)?{re.escape(kind)}(:|$)", line):
            return tb[:i]
    return tb


def _own_frames(tb: list[str]) -> list[str]:
    """The traceback's lines without the frames of gradaudit's own code and of autograd's engine call: a backward
    that returned the wrong shape showed only gradaudit's evaluate.py and torch's graph.py, where the user's code
    is not (the message names the Function). The lines between tracebacks of a chained exception (its cause's
    message, 'The above exception was the direct cause ...') are kept; 'Traceback (most recent call last):' and
    blank lines are left out."""
    import os

    own = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
           os.path.join("torch", "autograd", "graph.py"), os.path.join("torch", "autograd", "__init__.py"))
    out: list[str] = []
    keep = True
    for line in tb:
        if not line.strip() or line.lstrip(" |").startswith("Traceback (most recent call last)"):
            continue
        if _frame_start(line):
            keep = not any(part in line for part in own)
        elif not line.startswith((" ", "|")):
            keep = True  # not a frame's code: a message or a separator between chained tracebacks
        if keep:
            out.append(line)
    return out


def tolerance_line(tol: ToleranceUsed | None, indent: str = "  ") -> list[str]:
    if tol is None:
        return []
    why = clean(tol.why or tol.basis, newlines=False)
    text = f"{indent}tolerance:  atol {fmt_number(tol.atol)}, rtol {fmt_number(tol.rtol)}"
    if tol.evidence_factor:
        text += f", plus {fmt_number(tol.evidence_factor)} × the evidence's error bound"
        # (the default's basis ends saying so too: once is enough)
        why = why.removesuffix(f"; plus {fmt_number(tol.evidence_factor)} x the numeric evidence's own error bound")
        why = why.removesuffix(f", plus {fmt_number(tol.evidence_factor)} x the numeric evidence's own error bound")
    return [text + f" ({'default' if tol.default else 'changed'}: {why})"]


def discrepancy_lines(r: Record, indent: str = "  ") -> list[str]:
    out: list[str] = []
    if r.method == "observation":
        out.append(f"{indent}expected:   {fmt_value(r.expected_value)}")
        if r.executed:
            out.append(f"{indent}observed:   {fmt_value(r.observed_value)}")
    elif r.expected_value is not None:
        out.append(f"{indent}expected:   {fmt_value(r.expected_value)}   (written: {fmt_value(r.analytical_gradient)})")
        out.append(f"{indent}observed:   {fmt_value(r.observed_gradient)}")
    out += tolerance_line(r.tolerance, indent)
    if r.evidence is not None and r.evidence.precision and r.method in ("finite_difference", "vjp", "jvp",
                                                                          "double backward"):
        out.append(f"{indent}evidence:   {evidence_text(r)}")
    if r.discrepancy is not None:
        out += mismatch_lines(r.discrepancy, indent, located=_is_check(r))
    return out


def evidence_text(r: Record) -> str:
    ev = r.evidence
    assert ev is not None
    from ..tolerances import eps

    digits = int(-math.log10(eps(ev.precision or "float64")))
    text = f"{ev.precision} evidence (eps {eps(ev.precision or 'float64'):.1e}, about {digits} significant digits)"
    if ev.scheme:
        text += f"; {ev.scheme}"
    if ev.error_bound is not None:
        text += f"; error bound at most {ev.error_bound:.1e}"
    for note in ev.notes:
        text += f"; {clean(note, newlines=False)}"
    return text


def mismatch_lines(d: Discrepancy, indent: str = "  ", *, located: bool = False) -> list[str]:
    """numpy.testing's vocabulary: mismatched elements (exact, or "at least"), greatest differences,
    then at most SHOWN worst comparisons and how many more there are."""
    bad = d.mismatched
    if not bad and not d.inconclusive and not any(c.verdict not in ("pass", None) and c.reference is not None
                                                  and c.observed is not None for c in d.worst):
        # (every value within its allowance: nothing to show, unless a projection that judged them together failed,
        # whose numbers the report left out: "each within its allowance, but not a projection" alone, an audit)
        return []
    out = []
    if bad:
        count = f"{bad} / {d.total} ({pct(bad, d.total)})" if d.exact else f"at least {bad} / {d.total}"
        out.append(f"{indent}Mismatched elements: {count}" + ("" if d.exact else f": {d.why_inexact}"))
    if d.inconclusive:
        out.append(f"{indent}Inconclusive elements: {d.inconclusive} / {d.total}")
    worst = [c for c in d.worst if c.reference is not None and c.observed is not None]
    if worst:
        # a NaN difference is the greatest (the record counts it as infinite); max() kept whichever came first
        top = max(worst, key=lambda c: c.abs if c.abs == c.abs else math.inf)
        # (a non-finite value fails or is inconclusive whatever the allowance: the bound carrying its inf says nothing)
        allowed = (f" (up to {fmt_number(top.allowance.total)} allowed)" if top.allowance and top.kind != "nonfinite"
                   else "")
        out.append(f"{indent}Greatest absolute difference: {fmt_number(top.abs)} at {where(top)}{allowed}")
        rel = max(worst, key=lambda c: (c.reference not in (0.0, None), c.rel))
        out.append(f"{indent}Greatest relative difference: {rel_text(rel.rel, rel.reference)} at {where(rel)}")
    for c in d.worst:
        if c.reference is None or c.observed is None:
            out.append(f"{indent}{c.kind}: {clean(c.reason, newlines=False)}")
    if worst:
        outputs = any(c.output is not None for c in worst)
        ref_name = "numeric" if worst[0].reference_kind == "numeric" else "expected"
        obs_name = "autograd" if located else "observed"
        if any(WEIGHTED in (c.reason or "") for c in worst[:SHOWN]):
            # a directional check's located elements: (vᵀJ)_i, not a Jacobian entry (a reader took 0.288 for the
            # gradient 6 of x² at 3; its sign and size move with the seed's v)
            ref_name, obs_name = f"{ref_name} vᵀJ", f"{obs_name} vᵀJ"
            out.append(f"{indent}(vᵀJ: each element's gradient weighted by the random output weights v, as the "
                       "directional check compares it; mode='full' "
                       "shows every Jacobian entry)")
        head = ("input | element | output | output element | " if outputs else "element | ")
        out.append(f"{indent}  {head}{ref_name} | {obs_name} | abs | rel | allowed | verdict")
        for c in worst[:SHOWN]:
            place = (f"{_line(c.input)} | {idx(c.element)} | {c.output} | {idx(c.output_element)} | " if outputs
                     else f"{idx(c.element)} | ")
            allowed = fmt_number(c.allowance.total) if c.allowance and c.kind != "nonfinite" else "—"
            reason = clean(c.reason, newlines=False)
            label = reason if reason.startswith(f"{c.kind}:") else f"{c.kind}: {reason}"
            # (a projection's row, element "all", says which projection it is: a double backward holds two)
            verdict = c.verdict + (f" ({label})" if c.kind not in ("value",) else
                                   f" ({reason})" if c.element is None and reason else "")
            out.append(f"{indent}  {place}{fmt_number(c.reference)} | {fmt_number(c.observed)} | "
                       f"{fmt_number(c.abs)} | {rel_text(c.rel, c.reference)} | {allowed} | {verdict}")
        more = bad + d.inconclusive - min(len(worst), SHOWN)
        if more > 0:
            out.append(f"{indent}  … {more} more: see result.mismatches (or the JSON record)")
    return out


def where(c: Comparison) -> str:
    text = f"'{_line(c.input)}' element {idx(c.element)}" if c.element is not None else f"'{_line(c.input)}'"
    if c.output is not None and c.output_element is not None:
        text += f", output {c.output} element {idx(c.output_element)}"
    return text


# -- ga.check results ----------------------------------------------------------------------------

_INFO = ("structure", "evaluation", "evaluations", "backward_rows", "pattern_draws", "richardson_groups",
         "richardson_columns", "ridders_columns")


#: the records whose located mismatches a check's report shows (each record's own line is always shown)
DETAILED = 5


def _record_name(r: Record) -> str:
    return clean(f"'{r.input}'" + ("" if r.method == "vjp" else f" ({r.method})"), newlines=False)


def check_report(res: CheckResult) -> str:
    """The readable report of a ga.check result: verdict, tolerance, and per input every located
    mismatch (at most five shown each), never whole Jacobians."""
    facts = [f"mode {res.mode}"] + [f"{k.replace('_', ' ')} {res.info[k]}" for k in _INFO if k in res.info]
    bad = [r for r in res.records if r.verdict != "pass"]
    if bad and len(res.records) > 1:  # (the first line alone is what pytest -q and --tb=line show)
        facts.insert(0, f"{len(bad)} of {plural(len(res.records), 'record')} not passing: "
                        f"{', '.join(_record_name(r) for r in bad[:3])}{', ...' if len(bad) > 3 else ''}")
    lines = [f"gradaudit.check {clean(res.name, newlines=False)}: {res.verdict.upper()} ({'; '.join(facts)})"]
    first = res.records[0] if res.records else None
    if first is not None and first.verdict != "error":
        lines += tolerance_line(first.tolerance, "")
        if first.evidence is not None:
            lines.append(f"evidence:   {evidence_text(first)}")
    shown: dict[tuple[str, str, str], str] = {}  # an error already printed, and the input it was printed for
    detailed = 0  # records whose mismatches are shown: at most DETAILED (one model's 60 failing parameters made a
    # report of 666 lines, 55 kB, which pytest printed whole: a fresh-eyes audit); the others get their one line
    for r in res.records:
        status = r.verdict.upper()
        lines.append(f"input '{_line(r.input)}' ({r.method}): {status}" + (f" — {clean(r.reason, newlines=False)}"
                                                                          if r.reason else ""))
        if r.method != "vjp" and r.tolerance is not None and r.tolerance != (first.tolerance if first else None):
            lines += tolerance_line(r.tolerance, "  ")
        if r.discrepancy is not None and r.verdict != "pass":
            detailed += 1
            if detailed <= DETAILED:
                lines += mismatch_lines(r.discrepancy, "  ", located=True)
            elif detailed == DETAILED + 1:
                lines.append(f"  (the mismatches of the records after the first {DETAILED} that do not pass are "
                             "left out here: see result.mismatches, or the JSON record)")
        if r.error is not None:
            # one failing call raises the same error for every input (a model given the wrong shape: each of its
            # parameters' records holds it): its traceback is printed once
            key = (str(r.error.type), str(r.error.message), str(r.error.traceback))
            if key in shown:
                lines.append(f"  error:      the same {_line(r.error.type)} as input '{_line(shown[key])}' above")
            else:
                shown[key] = str(r.input)
                lines += error_lines(r.error, "  ")
    if res.verdict == "inconclusive":
        lines += _next_steps(res)
    if res.rerun and not res.ok:
        lines.append(f"re-run: {clean(res.rerun, newlines=False)}")
    return "\n".join(clean(line) for line in lines)


#: what to do about an inconclusive comparison, by its kind (an inconclusive result said why, not what next: a
#: fresh-eyes audit)
NEXT_STEPS = {
    "kink": "a kink lies within the steps (both one-sided slopes are shown): the derivative there is a convention, "
            "not a value; check at a point away from it, and test the convention you rely on with expected=",
    "discontinuity": "a jump or a staircase lies within the steps: check at a point away from it; a function that "
                     "rounds (a cast to lower precision inside) is checked on evidence of that precision",
    "coarse": "the evidence cannot resolve the value: the function is flat or dominated by a large constant there, "
              "or computed below float64; check at another point, or without the constant",
    "nonfinite": "the function or the evidence is not finite there: check at a point inside its domain",
}


def _next_steps(res: CheckResult) -> list[str]:
    kinds = []
    for c in res.mismatches:
        if c.verdict == "inconclusive" and c.kind in NEXT_STEPS and c.kind not in kinds:
            kinds.append(c.kind)
    return [f"next:       {NEXT_STEPS[k]}" for k in kinds]


def rich_text(text: str) -> str:
    """*text* for a rich console: its square brackets shown, never read as markup."""
    from rich.markup import escape

    return escape(text)


# -- whole runs ----------------------------------------------------------------------------------

def table_width(records: Sequence[Record]) -> int:
    """Characters the table needs so that no column is cut (measured, not guessed)."""
    import io

    from rich.console import Console

    probe = Console(file=io.StringIO(), width=10_000, no_color=True)
    return int(probe.measure(table(records)).minimum)


def stacked(records: Sequence[Record], width: int = 80) -> list[str]:
    """The narrow-terminal view: a short card per record, every field labelled, lines wrapped to *width*
    with the fields indented under the verdict."""
    import textwrap

    lines = []
    pad = " " * 6
    for r in records:
        cells = row(r)
        fields = [f"{cells[2]} ({cells[3]})", f"expected {cells[4]}", f"observed {cells[5]}", f"abs err {cells[6]}",
                  f"tol {cells[7]}", f"{cells[8]} {cells[9]} {cells[10]}"]
        lines += textwrap.wrap(f"{cells[0].upper():<5} {cells[1]}", width=max(width, 20), subsequent_indent=pad,
                               break_on_hyphens=False)
        lines += textwrap.wrap(" · ".join(fields), width=max(width, 20), initial_indent=pad, subsequent_indent=pad,
                               break_on_hyphens=False)
    return lines


def render(records: Sequence[Record], console: Any, *, title: str | None = None,
           repro: Mapping[str, str] | None = None, environment_lines: Iterable[str] = (), quiet: bool = False) -> None:
    """Print the table, the details of every non-passing record, and the summary line."""
    # (every line cleaned once more where it is printed: clean leaves what it cleaned as it is)
    for line in environment_lines:
        console.print(clean(line, newlines=False), highlight=False, markup=False)
    # quiet: only what makes the run fail (failed, errors, unexpected passes, inconclusive)
    shown = [r for r in records if OUTCOMES.get(r.outcome, False)] if quiet else list(records)
    if shown:
        if table_width(shown) <= console.width:
            console.print(table(shown, title=title))
        else:
            for line in stacked(shown, console.width):
                console.print(clean(line), highlight=False, markup=False, soft_wrap=True)
    for r in (shown if quiet else records):
        if needs_detail(r):
            console.print()
            for line in detail_lines(r, repro=(repro or {}).get(r.check)):
                console.print(clean(line), highlight=False, markup=False, soft_wrap=True)
    if shown or not quiet:
        console.print()
    console.print(summary_line(summarize(list(records))), highlight=False, markup=False)


def make_console(file: Any = None, *, width: int | None = None) -> Any:
    """A rich console: colours on a terminal, plain text (no escape codes) elsewhere."""
    import os
    import sys

    from rich.console import Console

    stream = file or sys.stdout
    is_tty = hasattr(stream, "isatty") and stream.isatty()
    if width is None and not is_tty:
        columns = os.environ.get("COLUMNS", "")
        width = int(columns) if columns.isdigit() and int(columns) >= 40 else 160  # a bad COLUMNS is ignored
    return Console(file=stream, width=width, force_terminal=is_tty, no_color=not is_tty,
                   highlight=False, emoji=False)


__all__ = ["check_report", "detail_lines", "fmt_number", "fmt_value", "make_console", "plural", "render", "row",
           "table"]
