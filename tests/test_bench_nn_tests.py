"""bench/nn_tests.py, the sweep over PyTorch's older NN test lists (common_nn), still runs: Linear and L1Loss
(mean) pass every tool, CrossMapLRN2d's hand-written backward (a real error below gradcheck's tolerance:
tests/test_conformance.py) fails both modes where gradcheck passes, and an unknown name is refused with exit code
2."""

from __future__ import annotations

import json

import torch


def test_the_nn_test_sweep_runs_and_finds_crossmaplrn2d(tmp_path, capsys, bench_script):
    threads = torch.get_num_threads()
    out = tmp_path / "nn.jsonl"
    main = bench_script("nn_tests").main
    assert main(["--names", "Linear,L1Loss_no_batch_dim_mean,CrossMapLRN2d", "--out", str(out)]) == 0
    rows = {r["name"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert set(rows) == {"Linear", "L1Loss_no_batch_dim_mean", "CrossMapLRN2d"}
    assert rows["L1Loss_no_batch_dim_mean"]["kind"] == "criterion" and rows["Linear"]["kind"] == "module"
    for name in ("Linear", "L1Loss_no_batch_dim_mean"):
        assert (rows[name]["gradcheck"], rows[name]["auto"], rows[name]["directional"]) == ("pass",) * 3, rows[name]
    lrn = rows["CrossMapLRN2d"]
    assert (lrn["gradcheck"], lrn["auto"], lrn["directional"]) == ("pass", "fail", "fail"), lrn
    printed = capsys.readouterr().out
    assert "| pass | pass | pass | 2 |" in printed and "CrossMapLRN2d (module, N = 216)" in printed
    assert torch.get_num_threads() == threads
    assert main(["--names", "NoSuchTest"]) == 2
