"""A Markdown summary: counts, then one table row per record (failures first)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..record import Record, summarize, summary_line
from .common import clean
from .text import COLUMNS, row

ORDER = {"failed": 0, "unexpected passes": 0, "errors": 1, "inconclusive": 2, "expected failures": 3,
         "skipped": 4, "planned": 5, "passed": 6}


def _cell(text: str) -> str:
    return clean(text, newlines=False).replace("|", "\\|").replace("`", "\\`")


def markdown(records: Sequence[Record], header: Mapping[str, Any] | None = None) -> str:
    env = (header or {}).get("environment") or {}
    lines = ["# gradaudit results", "", f"**{summary_line(summarize(list(records)))}**", ""]
    if env:
        lines += [f"Environment `{env.get('id')}`: Python {env.get('python', {}).get('version')}, "
                  f"torch {env.get('torch', {}).get('version')}", ""]
    lines.append("| " + " | ".join(COLUMNS) + " |")
    lines.append("|" + "---|" * len(COLUMNS))
    for r in sorted(records, key=lambda r: ORDER.get(str(r.outcome), 9)):
        lines.append("| " + " | ".join(_cell(c) for c in row(r)) + " |")
    return "\n".join(lines) + "\n"
