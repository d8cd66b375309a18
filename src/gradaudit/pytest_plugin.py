"""pytest plugin (entry point ``pytest11``): a ``gradaudit`` fixture and a ``gradaudit`` marker,
and ledger files collected as tests.

    @pytest.mark.gradaudit(mode="full", seed=3)
    def test_my_op(gradaudit):
        x = torch.randn(5, dtype=torch.float64, requires_grad=True)
        gradaudit.assert_gradients(my_op, (x,))

**Ledgers.** Files named ``*.gradaudit.json`` or ``*.gradaudit.toml`` (the ini option
``gradaudit_ledgers`` sets the patterns) are collected as one test item per check, named after the
check (so ``-k`` selects checks). An item runs its check by every method and fails with the text
report of its records; a check declared ``"expect": "fail"`` is reported as xfailed when it fails as
expected, and fails when it passes. A malformed ledger is one collection error: the paragraph that
``gradaudit run`` prints (file, record, field, the fix), without a traceback.

torch is never imported when the plugin loads: a test that uses the fixture imports it, and so does a
ledger file, when it is collected (the ledger is validated then: shapes, dtypes and devices, with torch).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

LEDGER_PATTERNS = ("*.gradaudit.json", "*.gradaudit.toml")


def pytest_addoption(parser: Any) -> None:
    parser.addini("gradaudit_ledgers", type="args", default=list(LEDGER_PATTERNS),
                  help="file name patterns of gradaudit ledger files that pytest collects, one test per "
                       f"check (default: {' '.join(LEDGER_PATTERNS)})")


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers", "gradaudit(**options): default options (mode, seed, order, forward_ad, ...) for the "
                   "gradaudit fixture's helpers; markers of the module, class and test merge, the closest winning")


def is_ledger(path: Path, patterns: Sequence[str]) -> bool:
    """Whether *path* matches one of the patterns: a pattern without a slash matches the file name,
    one with a slash the end of the path (as pytest's ``python_files``)."""
    for pattern in patterns:
        if "/" in pattern:
            if fnmatch.fnmatch(path.as_posix(), pattern if pattern.startswith("/") else f"*/{pattern}"):
                return True
        elif fnmatch.fnmatch(path.name, pattern):
            return True
    return False


def pytest_collect_file(file_path: Path, parent: Any) -> Any:
    if is_ledger(file_path, parent.config.getini("gradaudit_ledgers")):
        return LedgerFile.from_parent(parent, path=file_path)
    return None


class LedgerCheckFailed(Exception):
    """A ledger check that did not pass; its message is the text report of the check's records."""


class LedgerFile(pytest.File):
    """A ledger file: one item per check, in the file's order (deterministic, so that pytest-xdist's
    workers, which each collect, agree)."""

    def collect(self) -> Iterator[pytest.Item]:
        from .errors import GradauditError
        from .ledger import read_ledger
        from .render.common import clean

        try:
            checks = read_ledger(self.path)
        except GradauditError as exc:  # one collection error: the paragraph, no traceback
            raise self.CollectError(clean(str(exc))) from None
        used: set[str] = set()
        for index, check in enumerate(checks, 1):
            name = clean(check.name, newlines=False)  # control characters never reach the terminal
            # "::" separates a node id's parts: an item named "grad::x" could not be selected again (its re-run
            # line found nothing), so each colon before another is followed by a space ("grad: :x")
            name = re.sub(r":(?=:)", ": ", name).replace("\t", "\\t")  # (a tab: its re-run line, pasted, matched none)
            if name in used:  # two names that differ only in control characters
                name = f"{name} (record {index})"
            used.add(name)
            yield LedgerItem.from_parent(self, name=name, check=check, index=index)


@functools.cache
def _environment_id() -> str:
    from .env import environment

    return str(environment()["id"])


class LedgerItem(pytest.Item):
    """One check of a ledger, run by all its methods with ``gradaudit.run.run``."""

    def __init__(self, *, check: Any, index: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check
        self.index = index
        self.records: list[Any] = []

    def runtest(self) -> None:
        from .errors import GradauditError
        from .record import run_failed, summarize, summary_line
        from .render.common import clean
        from .run import run

        try:
            self.records = run([self.check], environment_id=_environment_id())
        except GradauditError as exc:  # refused before running (too many elements, say)
            raise LedgerCheckFailed(clean(str(exc))) from None
        counts = summarize(self.records)
        if run_failed(counts):  # failed, errors, inconclusive, unexpected passes
            # its first line is what pytest's summary shows: the counts, not the table's first row (which said
            # "PASS kink [x]" for a check whose finite differences were inconclusive)
            headline = f"{self.name}: {summary_line(counts)}"
            raise LedgerCheckFailed(headline + "\n" + self.report())
        if counts.get("expected failures"):
            if self.config.option.runxfail:
                raise LedgerCheckFailed(self.report())
            pytest.xfail(f"expected failure: {clean(self.check.expect_why or '', newlines=False)}")
        if not any(r.executed and r.verdict != "skipped" for r in self.records):
            reasons = sorted({clean(r.reason, newlines=False) for r in self.records if r.reason})
            pytest.skip("; ".join(reasons) or "nothing to check: no input requires a gradient")

    def report(self) -> str:
        """The text renderer's output for this check's records (table, every failure in full, summary)."""
        import io
        import shlex

        from .render.text import make_console, render

        out = io.StringIO()
        render(self.records, make_console(out, width=100),
               repro={self.check.name: f"python -m pytest {shlex.quote(self.nodeid)}"})
        return out.getvalue().rstrip("\n")

    def repr_failure(self, excinfo: Any, style: Any = None) -> Any:
        if isinstance(excinfo.value, LedgerCheckFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.path.name} record {self.index}: {self.name}"


class GradauditFixture:
    """ga.check / ga.assert_gradients / ga.check_module (and its raising form assert_module) with the marker's
    options as defaults, and ga.audit_training in its raising form."""

    def __init__(self, **defaults: Any):
        self.defaults = defaults

    def _for_checks(self) -> dict[str, Any]:
        """The defaults the check helpers take (compare's own, dtypes, ratio and device, left out: a marker naming
        them for compare made assert_gradients raise "ga.check has no argument 'dtypes'")."""
        return {k: v for k, v in self.defaults.items() if k in CHECK_OPTIONS}

    def check(self, fn: Any, inputs: Any, **options: Any) -> Any:
        from .api import _hide_spec_errors, check

        __tracebackhide__ = _hide_spec_errors
        return check(fn, inputs, **{**self._for_checks(), **options})

    def assert_gradients(self, fn: Any, inputs: Any, **options: Any) -> Any:
        __tracebackhide__ = True
        from .api import assert_gradients

        return assert_gradients(fn, inputs, **{**self._for_checks(), **options})

    def check_module(self, model: Any, inputs: Any, loss_fn: Any = None, **options: Any) -> Any:
        """The result, pass or not (use ``assert_module`` to fail the test on a wrong gradient)."""
        from .api import _hide_spec_errors, check_module

        __tracebackhide__ = _hide_spec_errors
        return check_module(model, inputs, loss_fn, **{**self._for_checks(), **options})

    def assert_module(self, model: Any, inputs: Any, loss_fn: Any = None, **options: Any) -> Any:
        """``check_module`` that fails the test (GradientMismatch, an AssertionError) unless it passes."""
        __tracebackhide__ = True
        from .errors import GradientMismatch

        result = self.check_module(model, inputs, loss_fn, **options)
        if not result.ok:
            raise GradientMismatch(result.report(), result.records)
        return result

    def compare(self, candidate: Any, reference: Any, inputs: Any, **options: Any) -> Any:
        """``ga.compare`` (the precision ladder) that fails the test with its table unless every rung passes."""
        __tracebackhide__ = True
        from .errors import GradientMismatch
        from .ladder import compare

        shared = {k: v for k, v in self.defaults.items() if k in COMPARE_OPTIONS}
        result = compare(candidate, reference, inputs, **{**shared, **options})
        if not result.ok:
            raise GradientMismatch(result.report(), result.records)
        return result

    def audit_training(self, step: Any, batches: Any, **options: Any) -> Any:
        """``ga.audit_training`` that fails the test with the readable audit when it finds anything, or cannot check
        a kind for want of steps (inconclusive)."""
        __tracebackhide__ = True
        from .errors import GradientMismatch
        from .training import audit_training

        audit = audit_training(step, batches, **options)
        if not audit.ok:
            raise GradientMismatch(audit.report(), audit.records)
        return audit


#: the marker's options each helper takes: compare's own (dtypes, ratio, device) go to compare alone, and the
#: check helpers' to them (mode, tolerance, ...), seed to both
CHECK_OPTIONS = ("mode", "tolerance", "forward_ad", "order", "seed", "names", "expected", "nondet_tol", "name",
                 "timeout", "kwargs")
COMPARE_OPTIONS = ("seed", "dtypes", "ratio", "device")


@pytest.fixture
def gradaudit(request: Any) -> GradauditFixture:
    """Check gradients in a test; options come from ``@pytest.mark.gradaudit(...)``: every such marker that applies
    (the module's, the class's, the test's), the closer one's options winning where both give one."""
    options: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers("gradaudit"))):  # (farthest first: closer ones win)
        if marker.args:
            pytest.fail(
                f"the gradaudit marker takes keyword options only, e.g. @pytest.mark.gradaudit(mode='directional'); "
                f"got the positional argument(s) {', '.join(repr(a) for a in marker.args)} on {request.node.nodeid}. "
                "Name the option.", pytrace=False)
        options.update(marker.kwargs)
    unknown = sorted(set(options) - set(CHECK_OPTIONS) - set(COMPARE_OPTIONS))
    if unknown:
        pytest.fail(
            f"the gradaudit marker on {request.node.nodeid} has option(s) no helper of the gradaudit fixture takes: "
            f"{', '.join(unknown)}. Its check helpers take {', '.join(CHECK_OPTIONS)}; compare takes "
            f"{', '.join(COMPARE_OPTIONS)}.", pytrace=False)
    return GradauditFixture(**options)
