"""bench/near_zero.py, right and wrong backwards of |x|^p beside 0, still runs: at p = 1.9 with elements 1e-7 from 0
(whose projections' steps carry them across 0) ga.check does not fail the right backward in either mode, and fails
one off by 1e-6 at the element at 0.5 (the "beside" layout) in both."""

from __future__ import annotations

import json

import pytest
import torch


def test_the_near_zero_sweep_runs_on_one_power(tmp_path, capsys, bench_script):
    threads = torch.get_num_threads()
    out = tmp_path / "near_zero.jsonl"
    assert bench_script("near_zero").main(["--powers", "1.9", "--distances", "1e-7", "--seeds", "2",
                                           "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["layout"], r["seed"]) for r in rows] == [("beside", 0), ("beside", 1), ("random", 0), ("random", 1)]
    assert rows[0]["x"] == [1e-7, -2e-7, 0.5]
    assert sum(abs(v) == 1e-7 for v in rows[2]["x"]) == 1 and len(rows[2]["x"]) == 6
    for r in rows:
        assert r["right"]["full"] != "fail" and r["right"]["directional"] != "fail", r
        assert r["off 1e-7"]["full"] == "fail", r
    for r in rows[:2]:
        assert r["off 1e-6 at the last"]["full"] == "fail" and r["off 1e-6 at the last"]["directional"] == "fail", r
    text = capsys.readouterr().out
    assert "| right | full |" in text and "full: 0 false alarm(s) in 4 checks" in text
    assert torch.get_num_threads() == threads


def test_the_near_zero_sweep_refuses_bad_arguments(bench_script, capsys):
    with pytest.raises(SystemExit) as stop:
        bench_script("near_zero").main(["--powers", "x"])
    assert stop.value.code == 2
    assert "--powers takes comma-separated positive numbers" in capsys.readouterr().err
    assert bench_script("near_zero").main(["--seeds", "0"]) == 2
