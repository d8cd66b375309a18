"""Built-in suites: the course documents' worked numbers as checks (data files here)."""

from __future__ import annotations

from importlib import resources

from ..errors import SpecError
from ..spec import Check

#: suite name -> (data file, one-line description); run by a bare ``gradaudit run``.
BUILTIN = {
    "quickstart": ("quickstart.toml", "seed 000: x*x at x=3, accumulation to 12, reset, second backward"),
}


def names() -> list[str]:
    return list(BUILTIN)


def load(name: str) -> list[Check]:
    """The checks of the built-in suite *name*."""
    from ..ledger import parse_ledger, parse_text

    if name not in BUILTIN:
        raise SpecError(f"there is no built-in suite '{name}'; built-in suites: {', '.join(BUILTIN)}.")
    filename = BUILTIN[name][0]
    text = resources.files(__name__).joinpath(filename).read_text(encoding="utf-8")
    return parse_ledger(parse_text(text, ".toml", where=f"suite {name}"), where=f"suite {name}", suite=name)
