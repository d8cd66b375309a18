"""bench/rounding.py, right backwards of functions that round like their terms, still runs: a naive variance at
100 +- 0.01 and log(1 + x) - x at 1e-4 (autograd's backward is right: 2 (x_i - mean) / n and 1 / (1 + x) - 1), which
gradcheck passes, are no failure in either mode; bad arguments exit 2."""

from __future__ import annotations

import json

import torch


def test_the_rounding_sweep_runs_and_finds_no_false_alarm_where_the_terms_cancel(tmp_path, capsys, bench_script):
    threads = torch.get_num_threads()
    out = tmp_path / "rounding.jsonl"
    assert bench_script("rounding").main(["--families", "variance,log1p", "--seeds", "2", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 * 4 * 2 and {r["family"] for r in rows} == {"variance", "log1p"}
    assert all(r["gradcheck"] == "pass" for r in rows)
    assert all(r["full"] != "fail" and r["directional"] != "fail" for r in rows), rows
    text = capsys.readouterr().out
    assert "| mean(x^2) - mean(x)^2 at 100 +- 0.01 | 8 |" in text and "full: 0 false alarm(s) in 16 checks" in text
    assert torch.get_num_threads() == threads
    assert bench_script("rounding").main(["--families", "nosuch"]) == 2
    assert bench_script("rounding").main(["--seeds", "0"]) == 2


def test_the_rounding_sweep_counts_the_misses_of_a_wrong_backward(tmp_path, capsys, bench_script):
    """With --off 0.5 the backward's element 0 is 50% too large: for a naive variance at 100 +- 0.01 gradcheck and full
    mode fail it, and directional mode, whose projection carries the function's rounding, never passes it."""
    out = tmp_path / "wrong.jsonl"
    assert bench_script("rounding").main(["--families", "variance", "--seeds", "1", "--off", "0.5",
                                          "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 4 and all(r["off"] == 0.5 for r in rows)
    assert all(r[tool] == "fail" for r in rows for tool in ("gradcheck", "full")), rows
    assert all(r["directional"] != "pass" for r in rows), rows
    text = capsys.readouterr().out
    assert "backwards off by 0.5 at element 0" in text and "full: 0 miss(es) (a pass) in 4 checks" in text
    assert "directional: 0 miss(es) (a pass) in 4 checks" in text
    assert bench_script("rounding").main(["--off", "nan"]) == 2
    assert bench_script("rounding").main(["--off", "-1"]) == 2
