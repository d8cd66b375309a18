"""bench/modules.py, the sweep over PyTorch's ModuleInfo database, still runs: on nn.Linear (which
gradcheck passes) every tool passes, and on nn.LPPool1d at a negative input (NaN outputs, whose NaN leaks
into the gradient of the finite ones) both modes fail as gradcheck does (directional mode was inconclusive
before outputs not finite at the point were left out of vᵀf)."""

from __future__ import annotations

import json

import torch


def test_the_module_sweep_agrees_with_gradcheck_on_linear_and_lppool(tmp_path, capsys, bench_script):
    threads = torch.get_num_threads()
    out = tmp_path / "modules.jsonl"
    assert bench_script("modules").main(["--modules", "nn.Linear,nn.LPPool1d", "--inputs", "1", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    linear = [r for r in rows if r["module"] == "nn.Linear"]
    assert linear and all((r["gradcheck"], r["auto"], r["directional"]) == ("pass", "pass", "pass")
                          for r in linear)
    pool = [r for r in rows if r["module"] == "nn.LPPool1d"]
    assert pool and all(r["moduleinfo"] for r in pool)  # ModuleInfo skips its test_grad
    assert all((r["gradcheck"], r["auto"], r["directional"]) == ("fail", "fail", "fail") for r in pool), pool
    assert "| pass | pass | pass |" in capsys.readouterr().out
    assert torch.get_num_threads() == threads
    assert bench_script("modules").main(["--modules", "nn.NoSuchModule"]) == 2


def test_the_module_sweep_runs_check_module_and_watches_the_callers_world(tmp_path, capsys, bench_script):
    # BatchNorm1d in training mode moves its running statistics at every forward: check_module must put them back
    out = tmp_path / "modules_cm.jsonl"
    assert bench_script("modules").main(["--api", "check_module", "--modules", "nn.BatchNorm1d,nn.Linear",
                                         "--inputs", "1", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["module"] for r in rows} == {"nn.BatchNorm1d", "nn.Linear"} and len(rows) == 4
    for r in rows:
        assert (r["gradcheck"], r["auto"], r["directional"]) == ("pass", "pass", "pass"), r
        assert "auto_changed" not in r and "directional_changed" not in r, r
    assert "as it found them in 4 of 4 cases." in capsys.readouterr().out
