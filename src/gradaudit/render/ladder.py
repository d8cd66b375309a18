"""The readable report of a precision ladder (``str(ga.compare(...))``): the rule, then a table of
rung (dtype) x quantity (each output, each input's gradient) with the candidate's error, the
baseline's, their ratio, the allowance and the verdict; then every failure with its worst elements,
every error with its traceback, and the summary line.

Renders from records only (records read back from JSON render the same); text from users has its
control characters escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..record import Record, decode_float, summarize, summary_line
from .common import clean, fmt_number

COLUMNS = ("rung", "quantity", "candidate", "baseline", "ratio", "allowed", "max ratio", "verdict")
WORST_SHOWN = 5
TOP_MARK = "*"


def _num(value: Any, digits: int = 3) -> str:
    value = decode_float(value)
    if value is None:
        return "—"
    if isinstance(value, (int, float)):
        if value != value:  # NaN
            return "nan"
        if value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        if value == 0:
            return "0"
        return f"{value:.{digits}g}"
    return clean(value, newlines=False)


def _details(r: Record) -> Mapping[str, Any]:
    return r.details or {}


def _rung(r: Record) -> str:
    d = _details(r)
    rung = clean(d.get("rung", r.dtype or "?"), newlines=False)
    return rung + (TOP_MARK if d.get("top") else "")


def _quantity(r: Record) -> str:
    return clean(_details(r).get("quantity") or r.input or "output", newlines=False)


def _verdict(r: Record) -> str:
    d = _details(r)
    if r.verdict == "fail" and r.discrepancy is not None and any(c.kind == "nonfinite" for c in r.discrepancy.worst):
        return "fail (non-finite)"
    if r.verdict == "fail" and r.discrepancy is not None and any(c.kind == "metadata" for c in r.discrepancy.worst):
        return "fail (shape)"
    if r.verdict == "fail" and "max |error|" in (r.reason or "") and "mean |error|" not in (r.reason or "") \
            and not d.get("top"):
        return "fail (max)"
    return str(r.verdict)


def cells(r: Record) -> list[str]:
    """The table row of one ladder record."""
    d = _details(r)
    if r.verdict in ("error", "skipped") or "candidate_error" not in d:
        return [_rung(r), _quantity(r), "—", "—", "—", "—", "—", _verdict(r)]
    top = bool(d.get("top"))
    return [_rung(r), _quantity(r), _num(d.get("candidate_error")), "—" if top else _num(d.get("baseline_error")),
            "—" if top else _num(d.get("ratio")), _num(d.get("allowed")),
            "—" if top else _num(d.get("max_ratio")), _verdict(r)]


def table_lines(records: Sequence[Record]) -> list[str]:
    """The rung x quantity table, aligned (plain text)."""
    rows = [list(COLUMNS)] + [cells(r) for r in records]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    out = []
    for n, row in enumerate(rows):
        text = "  ".join(c.ljust(w) if i < 2 or i == len(COLUMNS) - 1 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(row, widths)))
        out.append(text.rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def rule_lines(records: Sequence[Record]) -> list[str]:
    rule = next((_details(r).get("rule") for r in records if isinstance(_details(r).get("rule"), Mapping)), None)
    if rule is None:
        return []
    floor = clean(rule.get("floor"), newlines=False)
    lines = [f"rule: the candidate's mean |error| <= {fmt_number(rule.get('ratio'))} x the baseline's + {floor} "
             f"(scale mean|truth|); its max |error| <= {fmt_number(rule.get('max_ratio'))} x the baseline's + "
             f"{floor} (scale max|truth|)",
             "      truth: the reference in float64 on the same quantized inputs, on the CPU; baseline: the reference "
             "in the rung's dtype",
             "      columns: mean |error| against the truth; ratio = candidate / baseline; allowed = the largest "
             "candidate error that passes"]
    if rule.get("why"):
        lines.append(f"      changed from the default: {clean(rule.get('why'), newlines=False)}")
    return lines


def top_note(records: Sequence[Record]) -> list[str]:
    rule: Mapping[str, Any] = next((_details(r)["rule"] for r in records
                                    if isinstance(_details(r).get("rule"), Mapping)), {})
    if not any(_details(r).get("top") for r in records):
        return []
    ulps = fmt_number(rule.get("top_ulps")) if rule.get("top_ulps") is not None else "the allowed"
    return [f"{TOP_MARK} top rung: the candidate in float64 against the reference in float64 directly (a formula bug "
            f"cannot hide behind rounding there); no baseline: allowed {ulps} ulps of float64 at the values' scale"]


def _element(r: Record, w: Mapping[str, Any]) -> str:
    index = ", ".join(str(i) for i in w.get("element") or [])
    if r.input:
        return f"{clean(r.input, newlines=False)}[{index}]"
    return f"{_quantity(r)}[{index}]"


def failure_lines(r: Record) -> list[str]:
    """The account of one record that did not pass: its reason, worst elements or error."""
    head = f"{r.verdict.upper()} {_rung(r)} {_quantity(r)}: {clean(r.reason or '', newlines=False)}"
    lines = [head]
    worst = [w for w in _details(r).get("worst", []) if isinstance(w, Mapping)]
    if worst and r.verdict in ("fail", "inconclusive"):
        top = bool(_details(r).get("top"))
        rows = [["element", "truth", "candidate"] + ([] if top else ["baseline"]) + ["|error|"]
                + ([] if top else ["baseline |error|"])]
        for w in worst[:WORST_SHOWN]:
            row = [_element(r, w), _num(w.get("truth"), 6), _num(w.get("candidate"), 6)]
            if not top:
                row.append(_num(w.get("baseline"), 6))
            row.append(_num(w.get("error")))
            if not top:
                row.append(_num(w.get("baseline_error")))
            rows.append(row)
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            lines.append("    " + "  ".join(c.rjust(wd) if i else c.ljust(wd) for i, (c, wd) in
                                            enumerate(zip(row, widths))).rstrip())
        d = r.discrepancy
        if d is not None and d.mismatched:
            lines.append(f"    {d.mismatched} of {d.total} elements exceed the allowance")
    notes = _details(r).get("notes") or []
    for note in notes:
        lines.append(f"    note: {clean(note, newlines=False)}")
    return lines


def error_lines(r: Record) -> list[str]:
    err = r.error
    if err is None:
        return []
    lines = [f"    error: {clean(err.type)}: {clean(err.message, newlines=False)}"]
    return lines + ["      " + clean(line) for line in str(err.traceback).splitlines()[-6:]]


def ladder_report(records: Sequence[Record], *, name: str = "", rerun: str = "") -> str:
    """The whole report: header, rule, table, failures (worst elements), errors, re-run line, summary."""
    from ..judge import verdict_of

    verdict = verdict_of([r.verdict for r in records])
    lines = [f"gradaudit.compare {clean(name, newlines=False)}: {verdict.upper()}"]
    lines += rule_lines(records)
    lines.append("")
    lines += table_lines(records)
    lines += top_note(records)
    seen_errors: set[tuple[str, str, str]] = set()
    for r in records:
        if r.verdict == "pass":
            continue
        if r.error is not None:
            key = (_rung(r), r.error.type, r.error.message)
            if key in seen_errors:
                continue
            seen_errors.add(key)
            lines.append("")
            lines.append(f"{r.verdict.upper()} {_rung(r)}: {clean(r.reason or '', newlines=False)}")
            if r.verdict == "error":
                lines += error_lines(r)
            continue
        lines.append("")
        lines += failure_lines(r)
    if rerun and verdict != "pass":
        lines.append("")
        lines.append(f"re-run: {clean(rerun, newlines=False)}")
    lines.append("")
    lines.append(summary_line(summarize(list(records))))
    return "\n".join(lines)


__all__ = ["cells", "failure_lines", "ladder_report", "table_lines"]
