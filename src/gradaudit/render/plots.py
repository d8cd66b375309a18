"""Plots with matplotlib (the optional ``plot`` extra), headless; imported only when used."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import GradauditError

COLORS = {"float64": "#1f77b4", "float32": "#d62728", "float16": "#2ca02c", "bfloat16": "#9467bd"}


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise GradauditError("plots need matplotlib: pip install 'gradaudit[plot]' (or matplotlib).") from None
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
    ax.set_title(f"d/d{study['input']} {study['function']} at "
                 + ", ".join(f"{k}={v:g}" for k, v in study["at"].items()))
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


def _flatten(v: Any) -> list[float]:
    if isinstance(v, list):
        return [x for item in v for x in _flatten(item)]
    return [float(v) if not isinstance(v, str) else float("nan")]


def _svg(fig: Any) -> str:
    import io
    import re

    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
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
            ax.plot([p[0] for p in points], [max(p[1], 1e-3) for p in points], "o-", label=q)
            for x, y, verdict in points:
                if verdict == "fail":
                    ax.plot([x], [max(y, 1e-3)], "x", color="#cf222e", markersize=12)
        ratio = next((r.details.get("rule", {}).get("ratio") for r in recs if r.details.get("rule")), None)
        if isinstance(ratio, (int, float)):
            ax.axhline(ratio, color="black", linestyle="--", linewidth=1, label=f"allowed ratio {ratio:g}")
        ax.set_yscale("log")
        ax.set_xticks(range(len(rungs)), rungs)
        ax.set_ylabel("candidate / baseline mean |error|")
        ax.set_title(f"precision ladder: {name}", fontsize=9)
        ax.legend(fontsize=7, loc="best")
        fig.tight_layout()
        out.append((f"precision ladder: {name}", _svg(fig)))
        plt.close(fig)
    return out


def discrepancy_svg(record: Any) -> str:
    """Per-element |observed − expected| against the allowed tolerance, as an inline SVG string."""
    import io

    plt = _pyplot()
    observed = _flatten(record.observed_gradient)
    expected = _flatten(record.expected_value)
    tol = record.tolerance
    atol, rtol = (tol.atol, tol.rtol) if tol is not None else (0.0, 0.0)
    idx = list(range(len(observed)))
    err = [abs(o - e) for o, e in zip(observed, expected)]
    allowed = [atol + rtol * abs(e) for e in expected]
    fig, ax = plt.subplots(figsize=(6, 2.6), dpi=100)
    colors = ["#cf222e" if e > a else "#1a7f37" for e, a in zip(err, allowed)]
    ax.bar(idx, [max(e, 1e-300) for e in err], color=colors, label="|observed − expected|")
    ax.plot(idx, [max(a, 1e-300) for a in allowed], "k--", linewidth=1, label="allowed")
    ax.set_yscale("log")
    ax.set_xlabel("element (flat index)")
    ax.set_title(f"{record.check} — d/d{record.input} by {record.method}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    import re

    text = buf.getvalue()
    return re.sub(r"<metadata>.*?</metadata>", "", text[text.index("<svg"):], flags=re.S)
