"""Terminal rendering with rich: one row per record, then every failure kept intact.

Renders from records only (never from our own messages). Long values are
summarized; whole tensors are never printed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..record import Record, summarize, summary_line

MAX_INLINE = 4
VERDICT_STYLE = {"pass": "green", "fail": "red", "error": "magenta", "inconclusive": "yellow",
                 "skipped": "dim", None: "dim"}
COLUMNS = ("verdict", "check", "method", "stored/returned", "expected", "observed", "abs err",
           "tolerance", "shape", "dtype", "device")


def fmt_number(v: Any) -> str:
    if isinstance(v, str):  # encoded non-finite
        return {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}.get(v, v)
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.6g}" if isinstance(v, (int, float)) and not math.isnan(v) else str(v)


def _flat(v: Any) -> list[Any]:
    if isinstance(v, (list, tuple)):
        return [x for item in v for x in _flat(item)]
    return [v]


def fmt_value(v: Any) -> str:
    """A short text for a number or a nested list: at most four values, then a count."""
    if v is None:
        return "None"
    if isinstance(v, str):
        return v
    if isinstance(v, Mapping) and "matches" in v:
        return f"~/{v['matches']}/"
    if not isinstance(v, (list, tuple)):
        return fmt_number(v)
    flat = _flat(v)
    if len(flat) <= MAX_INLINE and (not v or not isinstance(v[0], (list, tuple))):
        return "[" + ", ".join(fmt_number(x) for x in flat) + "]"
    head = ", ".join(fmt_number(x) for x in flat[:3])
    return f"[{head}, … {len(flat)} values]"


def _shape(r: Record) -> str:
    shape = r.get("shape")
    spec = (r.expectation.get("inputs") or {}).get(r.get("input"))
    if shape is None and spec:
        shape = spec["shape"]
    return "—" if shape is None else "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _meta(r: Record, key: str) -> str:
    value = r.get(key)
    spec = (r.expectation.get("inputs") or {}).get(r.get("input"))
    if value is None and spec:
        value = spec.get(key)
    return "—" if value is None else str(value)


def _expected_cell(r: Record) -> str:
    err = r.get("expect_error")
    if err:
        return str(err["type"])
    return fmt_value(r.get("expected_value"))


def _observed_cell(r: Record) -> str:
    if r.verdict == "skipped":
        return "(skipped)"
    if not r.get("executed"):
        return "(not run)"
    if r.get("expect_error"):
        raised = r.get("observed_error")
        return str(raised["type"]) if raised else "no error"
    if r.verdict == "error":
        return f"error: {r.get('error', {}).get('type', '?')}"
    if r.get("method") == "observation":
        return fmt_value(r.get("observed_value"))
    if r.get("method") == "taylor":
        return f"order {r.get('order'):.2f}" if r.get("order") is not None else "exact"
    return fmt_value(r.get("observed_gradient"))


def _tolerance_cell(r: Record) -> str:
    tol = r.get("tolerance_used") or r.get("tolerance")
    if not tol:
        return "—"
    if tol.get("atol") is None:
        return "derived"
    mark = "" if tol.get("default") else "*"
    return f"{tol['atol']:.3g}/{tol['rtol']:.3g}{mark}"


def _verdict_cell(r: Record) -> str:
    outcome = r.outcome
    if outcome == "expected failures":
        return "fail (expected)"
    if outcome == "unexpected passes":
        return "pass (unexpected)"
    return r.verdict or "planned"


def row(r: Record) -> list[str]:
    disc = r.get("discrepancy")
    return [
        _verdict_cell(r),
        str(r.get("check")) + (f" [{r.get('input')}]" if r.get("input") else ""),
        str(r.get("method")), str(r.get("stored_or_returned")),
        _expected_cell(r), _observed_cell(r),
        fmt_number(disc["max_abs"]) if disc else "—",
        _tolerance_cell(r), _shape(r), _meta(r, "dtype"), _meta(r, "device"),
    ]


def table(records: Sequence[Record], *, title: str | None = None) -> Any:
    from rich import box
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
        cells = [_escape(c) for c in cells]
        cells[0] = f"[{style}]{cells[0]}[/]" if style else cells[0]
        t.add_row(*cells)
    return t


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def needs_detail(r: Record) -> bool:
    return r.outcome in ("failed", "errors", "expected failures", "unexpected passes", "inconclusive", "skipped")


def detail_lines(r: Record, *, repro: str | None = None) -> list[str]:
    """The intact account of one failed or errored record: code, inputs, discrepancy, env."""
    e = r.expectation
    head = f"{_verdict_cell(r).upper()}: {e.get('check')}"
    if e.get("method") == "observation":
        head += f" — {e.get('input')} (observed)"
    elif e.get("input"):
        head += f" — d/d{e['input']} by {e.get('method')} ({e.get('stored_or_returned')})"
    lines = [head, f"  source:     {e.get('source') or '—'}"]
    fn = str(e.get("function") or "").splitlines() or [""]
    lines.append(f"  function:   {fn[0]}")
    lines += [f"              {line}" for line in fn[1:]]
    for name, spec in (e.get("inputs") or {}).items():
        lines.append(f"  input {name}:  {fmt_value(spec['value'])} shape {tuple(spec['shape'])} "
                     f"{spec['dtype']} on {spec['device']}"
                     + ("" if spec.get("requires_grad") else " (no gradient)"))
    if e.get("derivation"):
        lines.append(f"  derivation: {e['derivation']}")
    if isinstance(e.get("expect"), Mapping):
        lines.append(f"  expected to fail because: {e['expect'].get('why')}")
    if r.get("protocol"):
        lines.append(f"  protocol:   {' → '.join(r.get('protocol'))}")
    lines += _discrepancy_lines(r)
    if r.get("note"):
        lines.append(f"  note:       {r.get('note')}")
    err = r.get("error") or (r.get("observed_error") if r.verdict != "pass" else None)
    if err:
        lines.append(f"  error:      {err['type']}: {err['message']}")
        lines += ["    " + line for line in str(err.get("traceback", "")).splitlines()[-6:]]
    lines.append(f"  environment: {r.get('environment') or '—'}")
    if repro:
        lines.append(f"  re-run:     {repro}")
    return lines


def _discrepancy_lines(r: Record) -> list[str]:
    disc = r.get("discrepancy")
    tol = r.get("tolerance_used") or r.get("tolerance")
    out = []
    if r.get("method") == "observation":
        out.append(f"  expected:   {fmt_value(r.get('expected_value'))}")
        if r.get("executed"):
            out.append(f"  observed:   {fmt_value(r.get('observed_value'))}")
    elif r.get("expected_value") is not None:
        out.append(f"  expected:   {fmt_value(r.get('expected_value'))}   (written: "
                   f"{fmt_value(r.get('analytical_gradient'))})")
        out.append(f"  observed:   {fmt_value(r.get('observed_gradient'))}")
    if tol and tol.get("atol") is not None:
        why = tol.get("why") or tol.get("basis")
        out.append(f"  tolerance:  atol {fmt_number(tol['atol'])}, rtol {fmt_number(tol['rtol'])}"
                   f" ({'default' if tol.get('default') else 'changed'}: {why})")
    if r.get("evidence_precision"):
        out.append(f"  evidence:   {r.get('evidence_precision')}")
    if disc and disc["mismatched"]:
        pct = 100.0 * disc["mismatched"] / max(disc["total"], 1)
        idx = tuple(disc["index"])
        out.append(f"  Mismatched elements: {disc['mismatched']} / {disc['total']} ({pct:.1f}%)")
        out.append(f"  Greatest absolute difference: {fmt_number(disc['max_abs'])} at index {idx} "
                   f"(up to {fmt_number(disc['atol'])} + {fmt_number(disc['rtol'])}·|expected| allowed)")
        out.append(f"  Greatest relative difference: {fmt_number(disc['max_rel'])}")
        if disc["total"] > 1:
            out.append("    index | expected | observed | abs | rel")
            for w in disc["worst"]:
                out.append(f"    {tuple(w['index'])} | {fmt_number(w['expected'])} | "
                           f"{fmt_number(w['observed'])} | {fmt_number(w['abs'])} | {fmt_number(w['rel'])}")
    return out


def table_width(records: Sequence[Record]) -> int:
    """Characters the table needs so that no column is cut (measured, not guessed)."""
    import io

    from rich.console import Console

    probe = Console(file=io.StringIO(), width=10_000, no_color=True)
    return int(probe.measure(table(records)).minimum)


def stacked(records: Sequence[Record]) -> list[str]:
    """The narrow-terminal view: one line per record, every field labelled."""
    lines = []
    for r in records:
        cells = row(r)
        lines.append(f"{cells[0]:<8} {cells[1]} · {cells[2]} ({cells[3]}) · expected {cells[4]} · "
                     f"observed {cells[5]} · abs err {cells[6]} · tol {cells[7]} · {cells[8]} {cells[9]} {cells[10]}")
    return lines


def render(records: Sequence[Record], console: Any, *, title: str | None = None,
           repro: Mapping[str, str] | None = None, environment_lines: Iterable[str] = ()) -> None:
    """Print the table, the details of every non-passing record, and the summary line."""
    for line in environment_lines:
        console.print(line, highlight=False, markup=False)
    if table_width(records) <= console.width:
        console.print(table(records, title=title))
    else:
        for line in stacked(records):
            console.print(line, highlight=False, markup=False, soft_wrap=True)
    for r in records:
        if needs_detail(r):
            console.print()
            for line in detail_lines(r, repro=(repro or {}).get(str(r.get("check")))):
                console.print(line, highlight=False, markup=False, soft_wrap=True)
    if any(r.get("executed") for r in records):
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
        width = int(os.environ.get("COLUMNS", "160"))
    return Console(file=stream, width=width, force_terminal=is_tty, no_color=not is_tty,
                   highlight=False, emoji=False)
