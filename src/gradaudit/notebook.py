"""Helpers the generated notebook calls (``import gradaudit.notebook as gn``): each check runs in its
own cell and shows a table with expected and observed in separate columns, shape/dtype/device beside
every value, and a failure kept intact — ``show(suite, check)`` for a built-in suite's check,
``show_record(record)`` for one ledger record (the notebook holds the record, so it runs anywhere).
The views live in :mod:`gradaudit.render.notebook`.

>>> view = show("quickstart", "x squared at x = 3")
>>> [r.verdict for r in view.records]
['pass', 'pass', 'pass']
>>> view = show_record({"function": "x*x", "x": 3.0, "analytical_gradient": 6})
>>> [(r.method, r.verdict) for r in view.records][:2]
[('backward', 'pass'), ('autograd.grad', 'pass')]
"""

from __future__ import annotations

from .render.notebook import CheckView, EnvironmentView, environment, show, show_record

__all__ = ["CheckView", "EnvironmentView", "environment", "show", "show_record"]
