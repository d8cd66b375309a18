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


def test_the_check_module_sweep_compares_and_watches_the_callers_world(tmp_path, capsys, bench_script):
    out = tmp_path / "nn_module.jsonl"
    bench = bench_script("nn_tests")
    assert bench.main(["--api", "check_module", "--names", "Linear,Conv1d_groups,Flatten", "--out", str(out)]) == 0
    rows = {r["name"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert rows["Flatten"]["skipped"] == "no parameter requires grad"
    for name in ("Linear", "Conv1d_groups"):
        r = rows[name]
        assert (r["gradcheck"], r["auto"], r["directional"]) == ("pass",) * 3, r
        assert "auto_changed" not in r and "directional_changed" not in r, r
    assert "as it found them in 2 of 2 cases." in capsys.readouterr().out
    # the watch sees what it is there to see: a buffer moved, a parameter's .grad set, a draw from torch's generator
    module = torch.nn.BatchNorm1d(3).double()
    args = (torch.randn(4, 3, dtype=torch.float64),)
    before = bench._world(module, args)
    module(*args)  # train mode: the running statistics move
    module.weight.grad = torch.ones(3, dtype=torch.float64)
    torch.rand(1)
    changed = bench._changed(before, bench._world(module, args))
    assert "'running_mean'" in changed and "'num_batches_tracked'" in changed, changed
    assert "requires_grad or .grad of 'weight'" in changed and "a random state" in changed, changed
