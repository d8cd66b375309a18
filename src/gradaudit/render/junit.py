"""JUnit XML (standard library only): one testcase per record; a failure carries the readable report."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Any

from ..record import Record
from .text import detail_lines


def case_name(r: Record) -> str:
    name = str(r.get("check"))
    if r.get("input"):
        name += f" [{r.get('input')}]"
    return f"{name} · {r.get('method')}"


def junit_xml(records: Sequence[Record], header: Mapping[str, Any] | None = None) -> str:
    """A <testsuites> document: a <testsuite> per suite, a <testcase> per record.

    fail and unexpected pass -> <failure>; error -> <error>; skipped and inconclusive ->
    <skipped>; an expected failure passes, with its report in <system-out>.
    """
    env = (header or {}).get("environment") or {}
    root = ET.Element("testsuites", name="gradaudit")
    by_suite: dict[str, list[Record]] = {}
    for r in records:
        by_suite.setdefault(str(r.get("suite") or "checks"), []).append(r)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite, recs in by_suite.items():
        node = ET.SubElement(root, "testsuite", name=suite)
        counts = {"tests": len(recs), "failures": 0, "errors": 0, "skipped": 0}
        if env:
            props = ET.SubElement(node, "properties")
            ET.SubElement(props, "property", name="environment", value=str(env.get("id")))
            ET.SubElement(props, "property", name="torch", value=str(env.get("torch", {}).get("version")))
        for r in recs:
            case = ET.SubElement(node, "testcase", classname=f"gradaudit.{suite}", name=case_name(r),
                                 time=f"{float(r.get('elapsed_s') or 0.0):.6f}")
            report = "\n".join(detail_lines(r))
            outcome = r.outcome
            if outcome in ("failed", "unexpected passes"):
                counts["failures"] += 1
                ET.SubElement(case, "failure", message=_message(r), type=outcome).text = report
            elif outcome == "errors":
                counts["errors"] += 1
                err = r.get("error") or {}
                ET.SubElement(case, "error", message=str(err.get("message", ""))[:500],
                              type=str(err.get("type", "Error"))).text = report
            elif outcome in ("skipped", "inconclusive"):
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=f"{outcome}: {r.get('note') or ''}".strip())
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
    disc = r.get("discrepancy")
    if disc and disc.get("mismatched"):
        return (f"{disc['mismatched']} / {disc['total']} elements mismatched; greatest absolute difference "
                f"{disc['max_abs']:.6g} at index {tuple(disc['index'])}")
    return str(r.get("note") or "check failed")[:500]
