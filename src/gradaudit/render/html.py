"""One self-contained HTML report (no network, no CDN): counts, a verdict filter, every record's
details, and a per-element discrepancy plot (inline SVG) for failed tensor checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..record import Record, summarize, summary_line
from .common import clean
from .text import COLUMNS, detail_lines, row

VERDICTS = ("pass", "fail", "error", "inconclusive", "skipped", "planned")


def _verdict(r: Record) -> str:
    return str(r.verdict)


def _env_line(header: Mapping[str, Any]) -> str:
    env = header.get("environment") or {}
    if not env:
        return "environment not recorded"
    accel = "; ".join(f"{name}: {'ready' if a.get('ready') else 'not ready'}"
                      for name, a in env.get("accelerators", {}).items())
    return (f"environment {env.get('id')} · gradaudit {env.get('gradaudit')} · Python "
            f"{env.get('python', {}).get('version')} · torch {env.get('torch', {}).get('version')} · "
            f"{env.get('platform', {}).get('description')} · {accel} · created {env.get('created')}")


def render_html(records: Sequence[Record], header: Mapping[str, Any] | None = None, *, plots: bool = True) -> str:
    """The report as one HTML string."""
    import jinja2

    header = header or {}
    counts = summarize(list(records))
    items = []
    for r in records:
        interesting = r.outcome not in ("passed", "planned")
        items.append({"verdict": _verdict(r), "outcome": r.outcome, "cells": [clean(c, newlines=False) for c in row(r)],
                      "title": clean(f"{r.check} — {r.method}", newlines=False),
                      "open": r.outcome in ("failed", "errors"), "detail": clean("\n".join(detail_lines(r))),
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
        records=records, items=items, counts=counts, columns=COLUMNS, verdicts=VERDICTS, ladders=ladders,
        summary_text=summary_line(counts), env_line=_env_line(header))


def _plot(r: Record) -> str | None:
    """A per-element discrepancy plot for a failed tensor comparison, if matplotlib is there."""
    observed, expected = r.observed_gradient, r.expected_value
    if not isinstance(observed, list) or not isinstance(expected, list):
        return None
    try:
        from .plots import discrepancy_svg
    except ImportError:  # pragma: no cover - matplotlib is optional
        return None
    try:
        return discrepancy_svg(r)
    except Exception:  # a plot never breaks a report
        return None
