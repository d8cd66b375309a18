"""pytest plugin (entry point ``pytest11``): a ``gradaudit`` fixture and a ``gradaudit`` marker.

    @pytest.mark.gradaudit(mode="full", seed=3)
    def test_my_op(gradaudit):
        x = torch.randn(5, dtype=torch.float64, requires_grad=True)
        gradaudit.assert_gradients(my_op, (x,))

torch is imported only when a test uses the fixture.
"""

from __future__ import annotations

from typing import Any

import pytest


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers", "gradaudit(**options): default options (mode, seed, order, forward_ad, ...) for the "
                   "gradaudit fixture's check and assert_gradients")


class GradauditFixture:
    """ga.check / ga.assert_gradients / ga.check_module (and its raising form assert_module) with the marker's
    options as defaults, and ga.audit_training in its raising form."""

    def __init__(self, **defaults: Any):
        self.defaults = defaults

    def check(self, fn: Any, inputs: Any, **options: Any) -> Any:
        from .api import check

        return check(fn, inputs, **{**self.defaults, **options})

    def assert_gradients(self, fn: Any, inputs: Any, **options: Any) -> Any:
        __tracebackhide__ = True
        from .api import assert_gradients

        return assert_gradients(fn, inputs, **{**self.defaults, **options})

    def check_module(self, model: Any, inputs: Any, loss_fn: Any = None, **options: Any) -> Any:
        """The result, pass or not (use ``assert_module`` to fail the test on a wrong gradient)."""
        from .api import check_module

        return check_module(model, inputs, loss_fn, **{**self.defaults, **options})

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

        shared = {k: v for k, v in self.defaults.items() if k in ("seed", "dtypes", "ratio", "device")}
        result = compare(candidate, reference, inputs, **{**shared, **options})
        if not result.ok:
            raise GradientMismatch(result.report(), result.records)
        return result

    def audit_training(self, step: Any, batches: Any, **options: Any) -> Any:
        """``ga.audit_training`` that fails the test with the readable audit when it finds anything."""
        __tracebackhide__ = True
        from .errors import GradientMismatch
        from .training import audit_training

        audit = audit_training(step, batches, **options)
        if not audit.ok:
            raise GradientMismatch(audit.report(), audit.records)
        return audit


@pytest.fixture
def gradaudit(request: Any) -> GradauditFixture:
    """Check gradients in a test; options come from ``@pytest.mark.gradaudit(...)``."""
    marker = request.node.get_closest_marker("gradaudit")
    return GradauditFixture(**(dict(marker.kwargs) if marker else {}))
