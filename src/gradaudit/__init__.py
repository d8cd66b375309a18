"""gradaudit: verify PyTorch gradients against expectations written first.

>>> import gradaudit as ga
>>> records = ga.run([ga.Expectation(name="square", function="x*x", inputs={"x": 3.0},
...                                  expected={"x": 6}, derivation="2x at x=3")])
>>> sorted({r.verdict for r in records})
['pass']
"""

from __future__ import annotations

__version__ = "0.2.0"

from .api import CheckResult, assert_gradients, check, check_module  # noqa: E402
from .errors import GradauditError, GradientMismatch, SpecError  # noqa: E402
from .ladder import LadderResult, LadderTolerance, compare  # noqa: E402
from .ledger import read_ledger, read_results, write_results  # noqa: E402
from .record import Comparison, Record  # noqa: E402
from .run import plan, run  # noqa: E402
from .spec import Expectation, ExpectedError, InputSpec, Matches, Probe  # noqa: E402
from .tolerances import Tolerance  # noqa: E402

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


def __getattr__(name: str) -> object:  # ga.audit_training without importing torch at `import gradaudit`
    if name in ("audit_training", "TrainingAudit"):
        from . import training

        return getattr(training, name)
    raise AttributeError(f"module 'gradaudit' has no attribute {name!r}")
