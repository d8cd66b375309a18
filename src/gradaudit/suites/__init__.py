"""Built-in suites: the course documents' worked numbers as checks.

``quickstart`` and ``notebook`` are ledger files (data); ``lesson`` is a module whose
expectations are literal data beside the small probes that observe them.
"""

from __future__ import annotations

from importlib import import_module, resources

from ..errors import SpecError
from ..spec import Expectation, Probe

#: suite name -> (data file or module, document); a bare ``gradaudit run`` runs them all.
BUILTIN = {
    "quickstart": ("quickstart.toml", "seed 000: x*x at x=3, accumulation to 12, reset, second backward"),
    "notebook": ("notebook.toml", "seed 001: expectations first, stored vs returned, chosen step, a kept failure"),
    "lesson": ("lesson", "seed 004: the hand graph, finite differences, controls, custom Function, regression, bugs"),
}


def names() -> list[str]:
    return list(BUILTIN)


def load(name: str) -> list[Expectation | Probe]:
    """The checks of the built-in suite *name*."""
    from ..ledger import parse_ledger, parse_text

    if name not in BUILTIN:
        raise SpecError(f"there is no built-in suite '{name}'; built-in suites: {', '.join(BUILTIN)}.")
    target = BUILTIN[name][0]
    if not target.endswith(".toml"):
        found = import_module(f"{__name__}.{target}").checks()
        return [_with_suite(c, name) for c in found]
    text = resources.files(__name__).joinpath(target).read_text(encoding="utf-8")
    return list(parse_ledger(parse_text(text, ".toml", where=f"suite {name}"), where=f"suite {name}", suite=name))


def _with_suite(check: Expectation | Probe, name: str) -> Expectation | Probe:
    import dataclasses

    return dataclasses.replace(check, suite=name)
