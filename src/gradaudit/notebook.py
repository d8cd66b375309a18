"""Helpers the generated notebook calls (``import gradaudit.notebook as gn``): each check runs in its
own cell and shows a table with expected and observed in separate columns, shape/dtype/device beside
every value, and a failure kept intact. The views live in :mod:`gradaudit.render.notebook`.

>>> view = show("quickstart", "x squared at x = 3")
>>> [r.verdict for r in view.records]
['pass', 'pass', 'pass']
"""

from __future__ import annotations

from .render.notebook import CheckView, EnvironmentView, environment, show

__all__ = ["CheckView", "EnvironmentView", "environment", "show"]
