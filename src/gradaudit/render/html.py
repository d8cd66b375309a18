"""One self-contained HTML report (no network, no CDN) that a person reads top to bottom: counts per
outcome, a verdict filter, then every record, failures first, each one compact row (a card on a narrow
screen) that opens onto its intact account and, where it holds numbers, an honest discrepancy plot
(inline SVG: observed − expected per element against the band the tolerance allows).

Order: failed, errors, unexpected passes, inconclusive, expected failures, passed, skipped, planned
(the run's order kept within each group). Failures, errors, unexpected passes and inconclusive records
are open; every other record is closed until clicked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup, escape

from ..record import Record, summarize, summary_line
from .common import clean
from .text import COLUMNS, detail_lines, row

VERDICTS = ("pass", "fail", "error", "inconclusive", "skipped", "planned")

#: the order a reader meets records in: what needs attention first
OUTCOME_ORDER = ("failed", "errors", "unexpected passes", "inconclusive", "expected failures", "passed", "skipped",
                 "planned")

#: outcome -> (badge text, CSS class); an expected failure is amber and says so, never the red FAIL
BADGES = {
    "failed": ("FAIL", "b-fail"),
    "errors": ("ERROR", "b-error"),
    "unexpected passes": ("UNEXPECTED PASS", "b-xpass"),
    "inconclusive": ("INCONCLUSIVE", "b-inconclusive"),
    "expected failures": ("expected failure", "b-xfail"),
    "passed": ("pass", "b-pass"),
    "skipped": ("skipped", "b-skipped"),
    "planned": ("planned", "b-planned"),
}

#: outcomes whose records are open on load (they make a run fail)
OPEN = ("failed", "errors", "unexpected passes", "inconclusive")

_BREAKS = re.compile(r"([_/,.;:=\]\)])")


def ordered(records: Sequence[Record]) -> list[Record]:
    """*records* failures first (the groups of :data:`OUTCOME_ORDER`), stable within a group."""
    rank = {o: i for i, o in enumerate(OUTCOME_ORDER)}
    return sorted(records, key=lambda r: rank.get(r.outcome, len(rank)))


def _verdict(r: Record) -> str:
    return str(r.verdict)


def _cell(text: str) -> Markup:
    """Escaped text with line-break opportunities after _ / , . ; : = ] ) so long names wrap at a seam."""
    return Markup(_BREAKS.sub(r"\1<wbr>", str(escape(text))))


def _env_line(header: Mapping[str, Any]) -> str:
    """The environment in one line; facts the header does not hold are left out (never "None")."""
    env = header.get("environment") or {}
    if not env:
        return "environment not recorded"
    accel = "; ".join(f"{name}: {'ready' if a.get('ready') else 'not ready'}"
                      for name, a in (env.get("accelerators") or {}).items())
    facts = [("environment", env.get("id")), ("gradaudit", env.get("gradaudit")),
             ("Python", (env.get("python") or {}).get("version")), ("torch", (env.get("torch") or {}).get("version")),
             ("", (env.get("platform") or {}).get("description")), ("", accel), ("created", env.get("created"))]
    return clean(" · ".join(f"{label} {value}".strip() for label, value in facts if value), newlines=False)


def render_html(records: Sequence[Record], header: Mapping[str, Any] | None = None, *, plots: bool = True) -> str:
    """The report as one HTML string."""
    import jinja2

    header = header or {}
    counts = summarize(list(records))
    items = []
    for r in ordered(records):
        interesting = r.outcome not in ("passed", "planned")
        cells = [clean(c, newlines=False) for c in row(r)]
        badge, badge_class = BADGES.get(r.outcome, (r.verdict, "b-skipped"))
        items.append({
            "verdict": _verdict(r), "outcome": r.outcome, "badge": badge, "badge_class": badge_class,
            "cells": [{"name": name, "html": _cell(text), "empty": text in ("—", "")}
                      for name, text in zip(COLUMNS[1:], cells[1:])],
            "title": clean(f"{r.check} — {r.method}", newlines=False),
            "open": r.outcome in OPEN, "detail": clean("\n".join(detail_lines(r))),
            "plot": _plot(r) if plots and interesting else None})
    ladders = []
    if plots:
        try:
            from .plots import ladder_svgs

            ladders = [{"title": clean(t, newlines=False), "svg": svg} for t, svg in ladder_svgs(records)]
        except Exception:  # matplotlib missing, or a plot that fails: a plot never breaks a report
            ladders = []
    env = jinja2.Environment(loader=jinja2.PackageLoader("gradaudit.render", "templates"),
                             autoescape=jinja2.select_autoescape(["html", "j2"]))
    return env.get_template("report.html.j2").render(
        records=records, items=items, counts=counts, columns=COLUMNS, head=[_cell(c) for c in COLUMNS],
        verdicts=VERDICTS, ladders=ladders,
        badges=BADGES, order=OUTCOME_ORDER, summary_text=summary_line(counts), env_line=_env_line(header))


def _plot(r: Record) -> str | None:
    """The discrepancy plot of a record that holds numbers to compare, if matplotlib is there."""
    try:
        from .plots import discrepancy_svg
    except ImportError:  # pragma: no cover - matplotlib is optional
        return None
    try:
        return discrepancy_svg(r)
    except Exception:  # a plot never breaks a report
        return None
