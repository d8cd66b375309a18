"""gradaudit: verify PyTorch gradients against expectations written first.

>>> import gradaudit as ga
>>> records = ga.run([ga.Expectation(name="square", function="x*x", inputs={"x": 3.0},
...                                  expected={"x": 6}, derivation="2x at x=3")])
>>> sorted({r.verdict for r in records})
['pass']
"""

from __future__ import annotations

__version__ = "0.2.0"

import sys
import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (for type checkers: at run time each name is imported on first use, below)
    from .api import CheckResult, assert_gradients, check, check_module
    from .errors import GradauditError, GradientMismatch, SpecError
    from .ladder import LadderResult, LadderTolerance, compare
    from .ledger import read_ledger, read_results, write_results
    from .record import Comparison, Record
    from .run import plan, run
    from .spec import Expectation, ExpectedError, InputSpec, Matches, Probe
    from .tolerances import Tolerance
    from .training import TrainingAudit, audit_training

#: where each public name lives: imported on first use, so that `import gradaudit` (and pytest loading its plugin,
#: gradaudit.pytest_plugin, in every session of an environment that has gradaudit installed) costs no more than the
#: package itself (it imported twenty modules, about 0.2 s of every pytest run: a fresh-eyes audit)
_LAZY = {
    "CheckResult": "api", "assert_gradients": "api", "check": "api", "check_module": "api",
    "GradauditError": "errors", "GradientMismatch": "errors", "SpecError": "errors",
    "LadderResult": "ladder", "LadderTolerance": "ladder", "compare": "ladder",
    "read_ledger": "ledger", "read_results": "ledger", "write_results": "ledger",
    "Comparison": "record", "Record": "record",
    "plan": "run", "run": "run",
    "Expectation": "spec", "ExpectedError": "spec", "InputSpec": "spec", "Matches": "spec", "Probe": "spec",
    "Tolerance": "tolerances",
    "TrainingAudit": "training", "audit_training": "training",
}

__all__ = [
    "CheckResult",
    "Comparison",
    "ExpectedError",
    "Expectation",
    "GradauditError",
    "GradientMismatch",
    "InputSpec",
    "LadderResult",
    "LadderTolerance",
    "Matches",
    "Probe",
    "Record",
    "SpecError",
    "Tolerance",
    "TrainingAudit",
    "__version__",
    "assert_gradients",
    "audit_training",
    "check",
    "check_module",
    "compare",
    "plan",
    "read_ledger",
    "read_results",
    "run",
    "write_results",
]


class _Package(types.ModuleType):
    """The package, whose attribute ``run`` stays the function ``ga.run``: importing the submodule gradaudit.run (the
    CLI does, and the names above on first use) binds that module to the package's attribute of its name, over the
    function, unless the package declines it, as it does here (the eager imports bound the function after it)."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in _LAZY and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> object:
    import importlib

    if name.startswith("__"):  # (doctest asks for __test__; no submodule is named so: recursion, a review found)
        raise AttributeError(f"module 'gradaudit' has no attribute {name!r}")
    where = _LAZY.get(name)
    if where is not None:
        value = getattr(importlib.import_module(f".{where}", __name__), name)
        globals()[name] = value  # (once: later uses find it here)
        return value
    try:  # a submodule, gradaudit.api and the like, as after an eager import
        return importlib.import_module(f".{name}", __name__)
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
    raise AttributeError(f"module 'gradaudit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
