"""gradaudit: verify PyTorch gradients against expectations written first.

>>> import gradaudit as ga
>>> records = ga.run([ga.Check(name="square", function="x*x", inputs={"x": 3.0},
...                            expected={"x": 6}, derivation="2x at x=3")])
>>> sorted({r.verdict for r in records})
['pass']
"""

from __future__ import annotations

__version__ = "0.1.0"

from .api import CheckResult, assert_gradients, check, check_module  # noqa: E402
from .errors import GradauditError, GradientMismatch, SpecError  # noqa: E402
from .ledger import read_ledger, read_results  # noqa: E402
from .record import Record  # noqa: E402
from .run import plan, run  # noqa: E402
from .spec import Check, ExpectedError, InputSpec, Matches, Probe, Tolerance  # noqa: E402

__all__ = [
    "Check",
    "CheckResult",
    "ExpectedError",
    "GradauditError",
    "GradientMismatch",
    "InputSpec",
    "Matches",
    "Probe",
    "Record",
    "SpecError",
    "Tolerance",
    "__version__",
    "assert_gradients",
    "check",
    "check_module",
    "plan",
    "read_ledger",
    "read_results",
    "run",
]
