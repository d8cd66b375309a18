"""The readable report of a training audit (``str(ga.audit_training(...))``): a header (steps run,
parameters audited), one block per finding (kind, where, what happened with the evidence and the
fix), then what was checked and found clean, and what could not be checked, and why.

Text from users (parameter names, step names, file names) has its control characters escaped.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .common import clean, fmt_number, plural

if TYPE_CHECKING:
    from ..training import Finding, TrainingAudit

WIDTH = 100  # messages are wrapped to this many columns (indented two)
SHOWN_PER_KIND = 5  # findings of one kind printed in full; the rest are counted (all are in audit.findings)


def header(audit: TrainingAudit) -> str:
    n = len(audit.findings)
    facts = [f"{audit.steps_run} of {plural(audit.steps, 'step')} completed",
             f"{plural(len(audit.params), 'parameter')} audited"]
    if audit.frozen:
        facts.append(f"{len(audit.frozen)} frozen")
    facts.append(f"optimizer {clean(audit.optimizer, newlines=False)}" if audit.optimizer else "no optimizer")
    if audit.accumulate > 1:
        facts.append(f"accumulate {audit.accumulate}")
    undecided = len(audit.undecided)
    verdict = plural(n, "finding") if n else (
        f"inconclusive: no findings, but {plural(undecided, 'kind')} not checked (too few steps)" if undecided
        else "no findings")
    return f"gradaudit.audit_training {clean(audit.name, newlines=False)}: {verdict} ({'; '.join(facts)})"


def finding_lines(f: Finding) -> list[str]:
    step = f" (step {f.step})" if f.step is not None else ""
    lines = [f"{f.kind}: {clean(f.where, newlines=False)}{step}"]
    lines += textwrap.wrap(clean(f.message, newlines=False), WIDTH, initial_indent="  ", subsequent_indent="  ",
                           break_long_words=False, break_on_hyphens=False)
    return lines


def _losses(losses: Sequence[float | None]) -> str | None:
    if not losses or all(v is None for v in losses):
        return None
    return "losses: " + ", ".join("—" if v is None else fmt_number(float(f"{v:.4g}")) for v in losses)


def report(audit: TrainingAudit) -> str:
    lines = [header(audit)]
    loss_line = _losses(audit.losses)
    if loss_line:
        lines.append(loss_line)
    if audit.stopped:
        lines.append(f"stopped: {clean(audit.stopped, newlines=False)}")
    shown: dict[str, int] = {}
    for f in audit.findings:
        shown[f.kind] = shown.get(f.kind, 0) + 1
        if shown[f.kind] <= SHOWN_PER_KIND:
            lines.append("")
            lines += finding_lines(f)
    for kind, n in shown.items():
        if n > SHOWN_PER_KIND:
            lines.append("")
            lines.append(f"… {n - SHOWN_PER_KIND} more {kind} findings: see audit.findings")
    found = {f.kind for f in audit.findings}
    clean_kinds = [k for k in audit.checked if k not in found]
    lines.append("")
    if clean_kinds:
        lines.append("checked, nothing found: " + ", ".join(clean_kinds))
    for kind, why in audit.not_checked.items():
        lines.append(f"not checked: {kind} ({clean(why, newlines=False)})")
    return "\n".join(lines)


__all__ = ["finding_lines", "header", "report"]
