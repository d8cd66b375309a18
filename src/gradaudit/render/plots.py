"""Plots with matplotlib (the optional ``plot`` extra), headless; imported only when used."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import GradauditError
from ..record import decode_float
from .common import clean

COLORS = {"float64": "#1f77b4", "float32": "#d62728", "float16": "#2ca02c", "bfloat16": "#9467bd"}


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise GradauditError("plots need matplotlib: pip install matplotlib "
                             "(in a clone of gradaudit: pip install -e '.[plot]').") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def step_plot(study: dict[str, Any], paths: Sequence[str | Path]) -> list[Path]:
    """The V of truncation and rounding: error against step, per dtype, best step and optimum marked."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    for dtype, opt in study["optimum"].items():
        rows = [r for r in study["rows"] if r["dtype"] == dtype and r["abs_error"] > 0]
        color = COLORS.get(dtype, "black")
        ax.loglog([r["h"] for r in rows], [r["abs_error"] for r in rows], "o-", color=color, label=f"{dtype}: measured")
        ax.loglog([r["h"] for r in rows], [r["model"] for r in rows], "--", color=color, alpha=0.5,
                  label=f"{dtype}: model h²|f'''|/6 + eps|f|/h")
        if opt["best_h"] is not None:
            ax.plot([opt["best_h"]], [opt["best_error"]], "*", color=color, markersize=16,
                    label=f"{dtype}: best h = {opt['best_h']:.0e}")
        if opt["h"] is not None:
            ax.axvline(opt["h"], color=color, linestyle=":", label=f"{dtype}: optimum h* = {opt['h']:.1e}")
    ax.set_xlabel("step h")
    ax.set_ylabel("|central difference − autograd (float64)|")
    ax.set_title(_text(f"d/d{study['input']} {study['function']} at "
                       + ", ".join(f"{k}={v:g}" for k, v in study["at"].items())))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    written = []
    for path in paths:
        p = Path(path)
        if p.suffix.lower() not in (".png", ".svg"):
            plt.close(fig)
            raise GradauditError(f"{path}: plots are written as .png or .svg; got '{p.suffix}'.")
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{p.name}.tmp{p.suffix}")
        fig.savefig(tmp, format=p.suffix[1:].lower(), metadata={"Date": None} if p.suffix.lower() == ".svg" else None)
        tmp.replace(p)
        written.append(p)
    plt.close(fig)
    return written


def _svg(fig: Any, *, tight: bool = False) -> str:
    import io
    import re

    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None}, **({"bbox_inches": "tight"} if tight else {}))
    text = buf.getvalue()
    return re.sub(r"<metadata>.*?</metadata>", "", text[text.index("<svg"):], flags=re.S)


LADDER_RUNGS = ("bfloat16", "float16", "float32")


def ladder_svgs(records: Sequence[Any]) -> list[tuple[str, str]]:
    """One plot per ga.compare run in *records*: the ratio candidate/baseline error (mean |error|) of each
    quantity across the rungs, with the allowed ratio; (title, inline SVG) pairs."""
    runs: dict[str, list[Any]] = {}
    for r in records:
        if r.method == "ladder" and not r.details.get("top") and isinstance(r.details.get("ratio"), (int, float)):
            runs.setdefault(str(r.function_name or r.check.split(" @ ")[0]), []).append(r)
    if not runs:
        return []
    plt = _pyplot()
    out = []
    for name, recs in runs.items():
        fig, ax = plt.subplots(figsize=(6, 3), dpi=100)
        rungs = [d for d in LADDER_RUNGS if any(r.details.get("rung") == d for r in recs)]
        rungs += sorted({str(r.details.get("rung")) for r in recs} - set(rungs))
        quantities = list(dict.fromkeys(str(r.details.get("quantity")) for r in recs))
        for q in quantities:
            points = [(rungs.index(str(r.details.get("rung"))), float(r.details["ratio"]), r.verdict)
                      for r in recs if str(r.details.get("quantity")) == q]
            points.sort()
            ax.plot([p[0] for p in points], [max(p[1], 1e-3) for p in points], "o-", label=_text(q))
            for x, y, verdict in points:
                if verdict == "fail":
                    ax.plot([x], [max(y, 1e-3)], "x", color="#cf222e", markersize=12)
        ratio = next((r.details.get("rule", {}).get("ratio") for r in recs if r.details.get("rule")), None)
        if isinstance(ratio, (int, float)):
            ax.axhline(ratio, color="black", linestyle="--", linewidth=1, label=f"allowed ratio {ratio:g}")
        ax.set_yscale("log")
        ax.set_xticks(range(len(rungs)), [_text(r) for r in rungs])
        ax.set_ylabel("candidate / baseline mean |error|")
        ax.set_title(_text(f"precision ladder: {name}"), fontsize=9)
        ax.legend(fontsize=7, loc="best")
        fig.tight_layout()
        out.append((f"precision ladder: {name}", _svg(fig)))
        plt.close(fig)
    return out


MAX_POINTS = 400  # elements drawn per record (every recorded mismatch is drawn on top of these)


@dataclass
class DiscrepancyData:
    """What a discrepancy plot draws, per element: the reference (the written expectation, or the numeric
    evidence for ``ga.check``), the observed value and what the tolerance allowed there."""

    labels: list[str]
    reference: list[float]
    observed: list[float]
    allowed: list[float | None]  # atol + rtol*|reference| (+ the evidence term); None: no tolerance (Taylor)
    allowed_exact: list[bool]  # False where the evidence term is the record's largest bound (an upper estimate)
    verdicts: list[str | None]  # the recorded verdict of a located comparison, where there is one
    total: int  # elements compared in all
    by_location: bool  # True: the recorded worst comparisons only (no per-element values in the record)
    reference_name: str = "expected"
    observed_name: str = "observed"
    evidence_term: bool = False

    @property
    def differences(self) -> list[float]:
        return [o - r if math.isfinite(o) and math.isfinite(r) else math.nan
                for o, r in zip(self.observed, self.reference)]


def _number(v: Any) -> float | None:
    v = decode_float(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _numbers(v: Any) -> list[float] | None:
    """The flat values of a number or a nested list of numbers (NaN/Infinity decoded), else None."""
    if isinstance(v, list):
        out: list[float] = []
        for item in v:
            inner = _numbers(item)
            if inner is None:
                return None
            out += inner
        return out
    n = _number(v)
    return None if n is None else [n]


def _nested_shape(v: Any) -> tuple[int, ...]:
    if isinstance(v, list):
        return (len(v),) + (_nested_shape(v[0]) if v else ())
    return ()


def _flat_index(element: Sequence[int], shape: Sequence[int]) -> int | None:
    if len(element) != len(shape):
        return None
    flat = 0
    for i, n in zip(element, shape):
        if not 0 <= i < n:
            return None
        flat = flat * n + i
    return flat


def _place(c: Any) -> str:
    text = str(c.input or "")
    if c.element is not None:
        text += "[" + ",".join(map(str, c.element)) + "]"
    if c.output is not None:
        text += f"→out{c.output}"
        if c.output_element:
            text += "[" + ",".join(map(str, c.output_element)) + "]"
    return text or "value"


def discrepancy_data(record: Any) -> DiscrepancyData | None:
    """The points of a record's discrepancy plot, or None when it holds nothing numeric to compare.

    Per element where the record holds observed and expected values (ledger checks, every method,
    finite differences included; numeric observations), else its recorded worst comparisons
    (``ga.check``: autograd against the numeric evidence)."""
    if record.method in ("ladder", "taylor"):
        return None
    tol = record.tolerance
    disc = record.discrepancy
    worst = [c for c in (disc.worst if disc is not None else ()) if c.reference is not None and c.observed is not None]
    observed_src = record.observed_gradient
    if observed_src is None and record.method == "observation":
        observed_src = record.observed_value
    observed = _numbers(observed_src) if observed_src is not None else None
    reference = _numbers(record.expected_value) if record.expected_value is not None else None
    ev_term = 0.0
    if tol is not None and tol.evidence_factor and record.evidence is not None and record.evidence.error_bound:
        ev_term = float(tol.evidence_factor) * float(record.evidence.error_bound)

    def rule(ref: float) -> float | None:
        if tol is None:
            return None
        return tol.atol + tol.rtol * abs(ref) + ev_term

    if observed is not None and reference is not None and observed and len(observed) == len(reference):
        shape = _nested_shape(record.expected_value)
        located = {}
        for c in worst:
            if c.input in (None, record.input) and c.output is None:
                flat = 0 if not shape else (_flat_index(c.element, shape) if c.element is not None else None)
                if flat is not None:
                    located[flat] = c
        n = len(observed)
        keep = sorted(set(range(min(n, MAX_POINTS))) | set(located))
        allowed: list[float | None] = []
        exact: list[bool] = []
        verdicts: list[str | None] = []
        for i in keep:
            c = located.get(i)
            if c is not None and c.allowance is not None:
                allowed.append(c.allowance.total)
                exact.append(True)
            else:
                allowed.append(rule(reference[i]) if math.isfinite(reference[i]) else None)
                exact.append(ev_term == 0.0)
            verdicts.append(c.verdict if c is not None else None)
        return DiscrepancyData(labels=[str(i) for i in keep], reference=[reference[i] for i in keep],
                               observed=[observed[i] for i in keep], allowed=allowed, allowed_exact=exact,
                               verdicts=verdicts, total=n, by_location=False, evidence_term=ev_term > 0.0,
                               observed_name="numeric" if record.method == "finite_difference" else "observed")
    if worst:
        numeric = worst[0].reference_kind == "numeric"
        return DiscrepancyData(
            labels=[_place(c) for c in worst], reference=[float(c.reference) for c in worst],
            observed=[float(c.observed) for c in worst],
            allowed=[c.allowance.total if c.allowance is not None else None for c in worst],
            allowed_exact=[True] * len(worst), verdicts=[c.verdict for c in worst],
            total=disc.total if disc is not None else len(worst), by_location=True,
            reference_name="numeric" if numeric else "expected", observed_name="autograd" if numeric else "observed",
            evidence_term=any(c.allowance is not None and c.allowance.evidence > 0 for c in worst))
    return None


def symlog_threshold(values: Sequence[float]) -> float | None:
    """None where a linear axis shows every value (at most three decades between the smallest and the largest
    non-zero magnitude), else the linear threshold of a symlog axis: the smallest non-zero magnitude, but no
    more than twelve decades below the largest (smaller values then sit, linearly, next to zero)."""
    mags = [abs(v) for v in values if math.isfinite(v) and v != 0.0]
    if not mags:
        return None
    top, small = max(mags), min(mags)
    if top <= 1e3 * small:
        return None
    return max(small, top * 1e-12)


def _symlog_ticks(linthresh: float, top: float) -> tuple[list[float], float]:
    lo = math.floor(math.log10(linthresh))
    hi = math.ceil(math.log10(top * 1.05))
    if hi <= lo:
        hi = lo + 1
    step = max(1, math.ceil((hi - lo) / 3))
    ks = list(range(hi, lo - 1, -step))
    ticks = [0.0] + [s * 10.0 ** k for k in ks for s in (1.0, -1.0)]
    return sorted(ticks), 10.0 ** hi


def _text(text: Any) -> str:
    """User text as matplotlib draws it literally: control characters as escapes (matplotlib warned "Glyph 27
    missing" from our call, and the SVG held them raw) and $ escaped (a name such as cost$\\frac$ was read as
    mathtext, failed to parse, and its plot was dropped)."""
    return clean(text, newlines=False).replace("$", r"\$")


def _short(text: str, n: int = 72) -> str:
    text = " ".join(str(text).split())
    return _text(text if len(text) <= n else text[: n - 1] + "…")


def discrepancy_svg(record: Any) -> str | None:
    """observed − expected per element, against the band the tolerance allows there, as an inline SVG string.

    The y axis is linear, or symmetric-log (linear near zero, so an exact zero is drawn at zero and the band's
    edges keep their scale) when the values span more than three decades. The band is atol + rtol·|expected|,
    plus the evidence term where the tolerance has one: per element where the record located the comparison,
    else the record's largest evidence bound (an upper estimate, drawn hatched). None when the record holds
    nothing numeric to compare."""
    data = discrepancy_data(record)
    if data is None:
        return None
    plt = _pyplot()
    diffs = data.differences
    n = len(diffs)
    xs = list(range(n))
    fig, ax = plt.subplots(figsize=(6.4, 2.9), dpi=100)
    band_label = "allowed: ±(atol + rtol·|{}|{})".format(data.reference_name, " + evidence term" if data.evidence_term
                                                         else "")
    labelled = False
    hatched = False
    for x, a, exact in zip(xs, data.allowed, data.allowed_exact):
        if a is None or not math.isfinite(a):
            continue
        ax.bar([x], [2 * a], bottom=[-a], width=0.8, color="#1a7f37", alpha=0.18, linewidth=0,
               hatch=None if exact else "///", label=None if labelled else band_label)
        labelled = True
        hatched = hatched or not exact
    finite = [d for d in diffs if math.isfinite(d)]
    magnitudes = finite + [a for a in data.allowed if a is not None and math.isfinite(a)]
    linthresh = symlog_threshold(magnitudes)
    top = max([abs(v) for v in magnitudes] + [0.0])
    if linthresh is not None:
        ticks, limit = _symlog_ticks(linthresh, top)
        ax.set_yscale("symlog", linthresh=linthresh, linscale=1.0)
        ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
    else:
        limit = top * 1.15 if top > 0 else 1.0
    ax.set_ylim(-limit, limit)
    ax.axhline(0.0, color="#57606a", linewidth=0.8)
    groups: dict[str, tuple[list[int], list[float]]] = {}
    for x, d, a, v in zip(xs, diffs, data.allowed, data.verdicts):
        if not math.isfinite(d):
            key = "non-finite"
        elif d == 0.0:
            key = "exactly equal (0)"
        elif v in ("inconclusive",):
            key = "inconclusive"
        elif v == "fail" or (v is None and a is not None and abs(d) > a):
            key = "outside the allowance"
        else:
            key = "within the allowance" if a is not None else "difference (no tolerance)"
        gx, gy = groups.setdefault(key, ([], []))
        gx.append(x)
        gy.append(d if math.isfinite(d) else limit * 0.9)
    style = {"outside the allowance": ("o", "#cf222e", True), "within the allowance": ("o", "#1a7f37", True),
             "inconclusive": ("D", "#9a6700", True), "exactly equal (0)": ("o", "#1f2328", False),
             "non-finite": ("X", "#8250df", True), "difference (no tolerance)": ("o", "#57606a", True)}
    for key, (gx, gy) in groups.items():
        marker, color, filled = style[key]
        if key not in ("exactly equal (0)", "non-finite"):
            ax.vlines(gx, 0.0, gy, color=color, linewidth=1.2)
        ax.plot(gx, gy, linestyle="none", marker=marker, markersize=5 if n <= 60 else 3,
                markerfacecolor=color if filled else "white", markeredgecolor=color, label=key)
    if data.by_location:
        ax.set_xticks(xs, [_short(lab, 18) for lab in data.labels], rotation=30, ha="right", fontsize=6)
        ax.set_xlabel(f"the {n} worst recorded comparisons (of {data.total})", fontsize=8)
    else:
        if n <= 24:
            ax.set_xticks(xs, [_text(lab) for lab in data.labels], fontsize=7)
        else:
            from matplotlib.ticker import FuncFormatter, MaxNLocator

            ax.xaxis.set_major_locator(MaxNLocator(nbins=8, integer=True))
            ax.xaxis.set_major_formatter(FuncFormatter(
                lambda v, _pos: _text(data.labels[int(v)]) if 0 <= int(v) < n and v == int(v) else ""))
        shown = "" if n == data.total else f" — {n} of {data.total} shown (the first {MAX_POINTS} and every " \
                                                "recorded mismatch)"
        ax.set_xlabel("element (flat index)" + shown, fontsize=8)
    ax.set_xlim(-0.6, n - 0.4)
    ylabel = f"{data.observed_name} − {data.reference_name}"
    if linthresh is not None:
        ylabel += f"\n(symlog, linear within ±{linthresh:.1e})"
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    title = f"{_short(record.check, 56)} — d/d{_short(record.input or '', 16)} by {_text(record.method)}"
    if hatched:
        title += "\nhatched: the evidence term is the record's largest bound (an upper estimate)"
    ax.set_title(title, fontsize=8, loc="left")
    fig.tight_layout()
    fig.canvas.draw()  # where the tick labels and the x label end, so that the legend sits below them
    below = ax.transAxes.inverted().transform((0.0, ax.get_tightbbox(fig.canvas.get_renderer()).y0))[1]
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, below - 0.02), ncol=2, borderaxespad=0.0,
              frameon=False)
    svg = _svg(fig, tight=True)
    plt.close(fig)
    return svg
