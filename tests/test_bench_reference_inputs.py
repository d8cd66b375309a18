"""bench/reference_inputs.py, OpInfo's extremal reference inputs, still runs: torch.sgn's (its backward returns
autograd's efficient zeros, which raised before 34281f1) are never an error, and where an input is finite and
holds no 0, sgn is flat (derivative 0) and passes in both modes, as in gradcheck; bad arguments exit 2."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch.testing._internal.common_methods_invocations")


def test_the_reference_inputs_sweep_runs_and_sgn_is_never_an_error(tmp_path, capsys, bench_script):
    out = tmp_path / "reference.jsonl"
    assert bench_script("reference_inputs").main(["--ops", "sgn", "--max-n", "20", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and all(r["op"] == "sgn" and r["n"] <= 20 for r in rows)
    assert not any(r[tool] == "error" for r in rows for tool in ("gradaudit_auto", "gradaudit_directional")), rows
    flat = [r for r in rows if not r["non_finite"]]
    assert flat and all(r["gradcheck_slow"] == "pass" for r in flat)
    assert all(r["gradaudit_auto"] == r["gradaudit_directional"] == "pass" for r in flat), flat
    text = capsys.readouterr().out
    assert f"{len(rows)} cases from 1 ops and variants" in text
    summary = tmp_path / "again.txt"
    assert bench_script("reference_inputs").main(["--summary", str(out)]) == 0
    assert f"{len(rows)} cases" in capsys.readouterr().out
    assert bench_script("reference_inputs").main(["--summary", str(summary)]) == 2
    assert bench_script("reference_inputs").main(["--max-n", "0"]) == 2
