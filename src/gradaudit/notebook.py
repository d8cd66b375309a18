"""Helpers the generated notebook calls: each check runs in its own cell and shows a table with
expected and observed in separate columns, shape/dtype/device beside every value, and a
failure kept intact (code, environment, discrepancy).

>>> view = show("quickstart", "x squared at x = 3")
>>> [r.verdict for r in view.records]
['pass', 'pass', 'pass']
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from .record import Record

NB_COLUMNS = ("method", "stored/returned", "expected", "observed", "abs err", "tolerance", "shape", "dtype",
              "device", "verdict")

_ENV: dict[str, Any] = {}


def environment() -> EnvironmentView:
    """The environment block (computed once per kernel), shown at the top of the notebook."""
    from .env import environment as block

    if not _ENV:
        _ENV.update(block())
    return EnvironmentView(dict(_ENV))


@dataclass
class EnvironmentView:
    block: dict[str, Any]

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from .env import summary_lines

        lines = summary_lines(self.block)
        return {"text/plain": "\n".join(lines),
                "text/html": "<pre>" + html.escape("\n".join(lines)) + "</pre>"}


@dataclass
class CheckView:
    """One check's records, rendered as a table (and the intact account of any failure)."""

    records: list[Record]

    def rows(self) -> list[list[str]]:
        from .render.text import row

        return [row(r)[2:] + [row(r)[0]] for r in self.records]  # verdict last, check name dropped

    def text(self) -> str:
        from .render.text import detail_lines, needs_detail

        widths = [max(len(h), *(len(c[i]) for c in self.rows())) for i, h in enumerate(NB_COLUMNS)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(NB_COLUMNS, widths))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(cells, widths)) for cells in self.rows()]
        for r in self.records:
            if needs_detail(r):
                lines += [""] + detail_lines(r)
        return "\n".join(lines)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from .render.text import detail_lines, needs_detail

        head = "".join(f"<th>{html.escape(h)}</th>" for h in NB_COLUMNS)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>" for cells in self.rows())
        extra = "".join("<pre>" + html.escape("\n".join(detail_lines(r))) + "</pre>"
                        for r in self.records if needs_detail(r))
        return {"text/plain": self.text(),
                "text/html": f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{extra}"}


def show(suite: str, check: str) -> CheckView:
    """Run one check of a built-in suite and return its view (the records are kept on it)."""
    from . import suites
    from .run import run

    found = [c for c in suites.load(suite) if c.name == check]
    if not found:
        raise KeyError(f"no check named {check!r} in suite {suite!r}")
    return CheckView(run(found, environment_id=environment().block["id"]))
