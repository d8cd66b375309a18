"""Formatting shared by every renderer: numbers, short values, indices, percentages, plurals, and
text from users made safe (control characters shown escaped, never interpreted).

>>> clean("ok\\x1b[2J")
'ok\\\\x1b[2J'
>>> pct(3, 3), pct(1, 3), plural(1, "fact"), plural(2, "entry")
('100%', '33.3%', '1 fact', '2 entries')
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

MAX_INLINE = 4
# (and lone surrogates, which no terminal or UTF-8 file can take: a name from a file name that is not UTF-8)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]")


#: the note of a directional check's located element (directional._bisect), whose values are vᵀJ there
WEIGHTED = "vᵀJ at this element (v: the random output weights)"


def clean(text: Any, *, newlines: bool = True) -> str:
    """*text* with control characters (ESC, bell, bidi overrides, ...) written as escapes; tabs kept;
    newlines kept when *newlines* (else escaped too)."""
    s = str(text)
    out = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), s)
    return out if newlines else out.replace("\n", "\\n").replace("\r", "\\r")


def plural(n: int, word: str, many: str | None = None) -> str:
    if n == 1:
        return f"{n} {word}"
    if many is None:
        many = word[:-1] + "ies" if word.endswith("y") and word[-2:-1] not in "aeiou" else word + "s"
    return f"{n} {many}"


def pct(part: int, whole: int) -> str:
    """A percentage that never rounds a part to the whole, or to nothing."""
    if whole <= 0:
        return "0%"
    if part == whole:
        return "100%"
    value = 100.0 * part / whole
    if value >= 99.95:
        return "99.9%"
    if 0 < value < 0.001:
        return "<0.001%"
    return f"{value:.3g}%"


def fmt_number(v: Any) -> str:
    if isinstance(v, str):  # encoded non-finite
        return {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}.get(v, clean(v))
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.6g}" if isinstance(v, (int, float)) and not math.isnan(v) else str(v)


def _flat(v: Any) -> list[Any]:
    if isinstance(v, (list, tuple)):
        return [x for item in v for x in _flat(item)]
    return [v]


def fmt_value(v: Any) -> str:
    """A short text for a number or a nested list: at most four values, then a count."""
    if v is None:
        return "None"
    if isinstance(v, str):
        return clean(v, newlines=False)
    if isinstance(v, Mapping) and "matches" in v:
        return f"~/{clean(v['matches'], newlines=False)}/"
    if not isinstance(v, (list, tuple)):
        return fmt_number(v)
    flat = _flat(v)
    if len(flat) <= MAX_INLINE and (not v or not isinstance(v[0], (list, tuple))):
        return "[" + ", ".join(fmt_number(x) for x in flat) + "]"
    head = ", ".join(fmt_number(x) for x in flat[:3])
    return f"[{head}, … {len(flat)} values]"


def idx(index: Any) -> str:
    """(3,) or (1, 2): a multi-index as Python writes a tuple; "all" for None."""
    if index is None:
        return "all"
    index = tuple(index)
    return "(" + ", ".join(map(str, index)) + ("," if len(index) == 1 else "") + ")"


def rel_text(rel: float, reference: float | None) -> str:
    if reference == 0.0 or reference is None:
        return "—"
    return fmt_number(rel) if math.isfinite(rel) else "inf"
