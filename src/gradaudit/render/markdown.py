"""A Markdown summary: counts, then one table row per record (failures first)."""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..record import Record, summarize, summary_line
from .common import clean
from .text import COLUMNS, row

ORDER = {"failed": 0, "unexpected passes": 0, "errors": 1, "inconclusive": 2, "expected failures": 3,
         "skipped": 4, "planned": 5, "passed": 6}


#: Markdown's punctuation that would start emphasis, code or a table cell, written as its escape (and a link's
#: "](" broken: vectors such as [2, 5, 6] stay as they read)
_PUNCTUATION = re.compile(r"([\\`*_|~]|(?<=\])\()")


def _cell(text: Any) -> str:
    """User text as it reads: HTML in it escaped (a check named `x <img src=x onerror=...>` became a live tag in
    a rendered report), Markdown's punctuation too (no emphasis, link, image or code span from a name)."""
    return _PUNCTUATION.sub(r"\\\1", html.escape(clean(text, newlines=False), quote=False))


def markdown(records: Sequence[Record], header: Mapping[str, Any] | None = None) -> str:
    env = (header or {}).get("environment") or {}
    lines = ["# gradaudit results", "", f"**{summary_line(summarize(list(records)))}**", ""]
    if env:
        lines += [f"Environment {_cell(env.get('id'))}: Python {_cell((env.get('python') or {}).get('version'))}, "
                  f"torch {_cell((env.get('torch') or {}).get('version'))}", ""]
    lines.append("| " + " | ".join(COLUMNS) + " |")
    lines.append("|" + "---|" * len(COLUMNS))
    for r in sorted(records, key=lambda r: ORDER.get(str(r.outcome), 9)):
        lines.append("| " + " | ".join(_cell(c) for c in row(r)) + " |")
    return "\n".join(lines) + "\n"
