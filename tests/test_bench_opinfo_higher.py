"""bench/opinfo_higher.py, forward-mode AD and the double backward on OpInfo against gradcheck's own checks of them,
runs: on sin both tools pass both methods; logcumsumexp's sample 1, whose float64 jvp torch computes 3e-6 off (see
test_opinfo), is listed where gradcheck passes and gradaudit does not; topk's double backward passes in both (it was
inconclusive before the twenty-first session); bad arguments exit 2."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch.testing._internal.common_methods_invocations")


def test_the_forward_mode_sweep_runs_and_lists_what_gradcheck_passes(tmp_path, capsys, bench_script):
    out = tmp_path / "forward.jsonl"
    assert bench_script("opinfo_higher").main(["--method", "forward", "--ops", "sin,logcumsumexp", "--out",
                                                str(out)]) == 0
    rows = {(r["op"], r["sample"]): r for r in map(json.loads, out.read_text().splitlines())}
    assert rows[("sin", 0)]["gradcheck"] == rows[("sin", 0)]["gradaudit"] == "pass"
    assert (rows[("logcumsumexp", 1)]["gradcheck"], rows[("logcumsumexp", 1)]["gradaudit"]) == ("pass", "fail")
    text = capsys.readouterr().out
    assert "where gradcheck passes and gradaudit does not (1):" in text
    assert "- logcumsumexp #1 (N=125): gradcheck pass, gradaudit fail" in text
    assert bench_script("opinfo_higher").main(["--summary", str(out)]) == 0
    assert f"{len(rows)} cases from 2 ops and variants" in capsys.readouterr().out


def test_the_double_backward_sweep_runs(tmp_path, capsys, bench_script):
    out = tmp_path / "second.jsonl"
    assert bench_script("opinfo_higher").main(["--method", "second", "--ops", "topk", "--samples", "1", "--out",
                                                str(out)]) == 0
    (row,) = map(json.loads, out.read_text().splitlines())
    assert (row["gradcheck"], row["gradaudit"]) == ("pass", "pass")
    assert "where gradcheck passes and gradaudit does not (0): none" in capsys.readouterr().out


def test_a_sparse_sample_is_recorded_not_a_crash(tmp_path, capsys, bench_script):
    # sparse.sampled_addmm's samples hold sparse CSR tensors: isfinite raised on them and stopped the whole sweep
    out = tmp_path / "sparse.jsonl"
    assert bench_script("opinfo_higher").main(["--method", "second", "--ops", "sparse.sampled_addmm", "--samples",
                                                "8", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and any("torch.sparse_csr" in r["layouts"] for r in rows)
    assert all(r["gradaudit"] == "error" for r in rows if "torch.sparse_csr" in r["layouts"])  # refused, said so


def test_bad_arguments_exit_2(tmp_path, capsys, bench_script):
    assert bench_script("opinfo_higher").main(["--max-n", "0"]) == 2
    assert bench_script("opinfo_higher").main(["--summary", str(tmp_path / "none.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "--max-n must be at least 1" in err and "no such results file" in err
