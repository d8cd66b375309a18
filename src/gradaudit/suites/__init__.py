"""Built-in suites: the worked numbers of three course documents as checks, named by what they teach.

``quickstart`` and ``tutorial`` are ledger files (data); ``lesson`` is a module whose expectations
are literal data beside the small probes that observe them. ``notebook`` is the tutorial's former
name, still accepted.
"""

from __future__ import annotations

from importlib import import_module, resources

from ..errors import SpecError
from ..spec import Expectation, Probe

ALIASES = {"notebook": "tutorial"}  # former names, still accepted, never listed

#: suite name -> (data file or module, what it teaches); a bare ``gradaudit run`` runs them all.
BUILTIN = {
    "quickstart": ("quickstart.toml", "the quickstart: x*x at x=3, accumulation to 12, a reset, a second backward"),
    "tutorial": ("tutorial.toml", "the gradient-check tutorial: expectations first, stored vs returned, a chosen "
                                  "step, a failure kept intact"),
    "lesson": ("lesson", "the autograd lesson: the hand graph, finite differences, controls, a custom Function, "
                         "linear regression, the common bugs"),
}


def canonical(name: str) -> str:
    """The suite's current name (a former name resolved)."""
    return ALIASES.get(name, name)


def known(name: str) -> bool:
    return canonical(name) in BUILTIN


def names() -> list[str]:
    return list(BUILTIN)


def load(name: str) -> list[Expectation | Probe]:
    """The checks of the built-in suite *name*."""
    from ..ledger import parse_ledger, parse_text

    if not known(name):
        raise SpecError(f"there is no built-in suite '{name}'; built-in suites: {', '.join(BUILTIN)}.")
    name = canonical(name)
    target = BUILTIN[name][0]
    if not target.endswith(".toml"):
        found = import_module(f"{__name__}.{target}").checks()
        return [_with_suite(c, name) for c in found]
    text = resources.files(__name__).joinpath(target).read_text(encoding="utf-8")
    return list(parse_ledger(parse_text(text, ".toml", where=f"suite {name}"), where=f"suite {name}", suite=name))


def _with_suite(check: Expectation | Probe, name: str) -> Expectation | Probe:
    import dataclasses

    return dataclasses.replace(check, suite=name)
