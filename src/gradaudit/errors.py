"""The exception family of gradaudit and the exit codes they map to."""

from __future__ import annotations

from typing import Any

from .render.common import clean

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_NO_CHECKS = 5  # as pytest: nothing was checked


class GradauditError(Exception):
    """Base class for errors the user can fix; the CLI prints them and exits 2."""

    exit_code = EXIT_USAGE


class SpecError(GradauditError):
    """A check, ledger or expression is malformed: what was expected, what was seen, the fix."""

    def __init__(self, message: str, *, where: str | None = None, field: str | None = None):
        self.where = where
        self.field = field
        self.bare_message = message
        super().__init__(self._compose())

    def _compose(self) -> str:
        # where and field may hold the user's text (a file name, a key, a keyword argument): control characters
        # escaped, as the messages' own quotes of it are, so an uncaught error prints none raw
        where = None if self.where is None else clean(self.where, newlines=False)
        field = None if self.field is None else clean(self.field, newlines=False)
        prefix = ""
        if where and field:
            prefix = f"{where}, field '{field}': "
        elif where:
            prefix = f"{where}: "
        elif field:
            prefix = f"field '{field}': "
        return prefix + self.bare_message

    def located(self, where: str) -> SpecError:
        """Return a copy of this error that names *where* (a file and record) first."""
        inner = f"{where}, {self.where}" if self.where else where
        return SpecError(self.bare_message, where=inner, field=self.field)


def hide_spec_errors(excinfo: Any) -> bool:
    """pytest's __tracebackhide__ for the frames a SpecError passes through: the message says what to fix, and the
    check's own source around it says nothing to the test's author (any other exception shows them)."""
    return bool(excinfo.errisinstance(SpecError))


def said(exc: BaseException) -> str:
    """str(exc), or what Python's own traceback says where that raises or is not a string (an exception of the
    user's whose __str__ fails: ga.check raised gradaudit's own bare traceback for it, a fresh-eyes audit)."""
    try:
        text = str(exc)
    except Exception:
        return "<exception str() failed>"
    return text if isinstance(text, str) else "<exception str() failed>"


class EvaluationError(Exception):
    """The user's function or its backward raised while gradaudit evaluated it (kept as an error verdict)."""

    def __init__(self, where: str, original: BaseException):
        self.where = where
        self.original = original
        super().__init__(f"{where}: {type(original).__name__}: {said(original)}")


class NotDeterministic(RuntimeError):
    """Two evaluations of the user's function at the same point (and the same random state) differ."""


class InputMutated(RuntimeError):
    """The user's function wrote to one of its inputs."""


class OutputsChanged(RuntimeError):
    """The user's function returned outputs of another number or shape than at its first call."""


class GradientMismatch(AssertionError):
    """Raised by assert-style helpers; carries the records and the readable report."""

    def __init__(self, report: str, records: Any = None):
        self.report = report
        self.records = records
        super().__init__(report)
