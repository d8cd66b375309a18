"""JUnit XML (standard library only): one testcase per record; a failure carries the readable report."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Any

from ..record import Record
from .common import clean, idx
from .text import detail_lines


def case_name(r: Record) -> str:
    name = clean(r.check, newlines=False)
    if r.input:
        name += f" [{clean(r.input, newlines=False)}]"
    return f"{name} · {clean(r.method, newlines=False)}"


def junit_xml(records: Sequence[Record], header: Mapping[str, Any] | None = None) -> str:
    """A <testsuites> document: a <testsuite> per suite, a <testcase> per record.

    fail and unexpected pass -> <failure>; error -> <error>; skipped, inconclusive and planned
    (never executed) -> <skipped>; an expected failure passes, with its report in <system-out>.
    """
    env = (header or {}).get("environment") or {}
    root = ET.Element("testsuites", name="gradaudit")
    by_suite: dict[str, list[Record]] = {}
    for r in records:
        by_suite.setdefault(clean(r.suite or "checks", newlines=False), []).append(r)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite, recs in by_suite.items():
        node = ET.SubElement(root, "testsuite", name=suite)
        counts = {"tests": len(recs), "failures": 0, "errors": 0, "skipped": 0}
        if env:
            props = ET.SubElement(node, "properties")
            # (a results file's header is read from disk: its text is escaped as any other, XML taking no control)
            ET.SubElement(props, "property", name="environment", value=clean(env.get("id"), newlines=False))
            torch_info = env.get("torch")
            version = torch_info.get("version") if isinstance(torch_info, Mapping) else None
            ET.SubElement(props, "property", name="torch", value=clean(version, newlines=False))
        for r in recs:
            case = ET.SubElement(node, "testcase", classname=f"gradaudit.{suite}", name=case_name(r),
                                 time=f"{float(r.elapsed_s or 0.0):.6f}")
            report = "\n".join(clean(line) for line in detail_lines(r))  # (XML takes no control character)
            outcome = r.outcome
            if outcome in ("failed", "unexpected passes"):
                counts["failures"] += 1
                ET.SubElement(case, "failure", message=_message(r), type=outcome).text = report
            elif outcome == "errors":
                counts["errors"] += 1
                err = r.error
                ET.SubElement(case, "error", message=clean(err.message if err else "", newlines=False)[:500],
                              type=clean(err.type if err else "Error")).text = report
            elif outcome in ("skipped", "inconclusive", "planned"):
                counts["skipped"] += 1
                note = "not executed (a plan)" if outcome == "planned" else clean(r.reason or "", newlines=False)
                ET.SubElement(case, "skipped", message=f"{outcome}: {note}".strip())
            elif outcome == "expected failures":
                ET.SubElement(case, "system-out").text = "expected failure, kept visible:\n" + report
        for key, value in counts.items():
            node.set(key, str(value))
            totals[key] += value
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _message(r: Record) -> str:
    d = r.discrepancy
    if d is not None and d.mismatched:
        at = f" at {idx(d.at.element)}" if d.at is not None and d.at.element is not None else ""
        count = f"{d.mismatched} / {d.total}" if d.exact else f"at least {d.mismatched} / {d.total}"
        return f"{count} elements mismatched; greatest absolute difference {d.max_abs:.6g}{at}"
    return clean(r.reason or "check failed", newlines=False)[:500]
