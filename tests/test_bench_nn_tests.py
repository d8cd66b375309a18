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
    assert main(["--api", "check_module", "--order", "2"]) == 2 and main(["--cap", "0"]) == 2


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
    # the watch sees what it is there to see, and only that (a review found it blind to the first five below, and
    # calling a NaN a change)
    module = torch.nn.BatchNorm1d(3).double()
    args = (torch.randn(4, 3, dtype=torch.float64),)
    seen = bench._changed

    def after(change):
        before = bench._world(module, args)
        change()
        return seen(before, bench._world(module, args))

    assert after(lambda: None) == []
    assert "buffer 'running_mean''s dtype, device, requires_grad or values" in after(lambda: module(*args))
    assert "buffer 'num_batches_tracked' written in place" in after(lambda: module(*args))
    assert "parameter 'weight''s .grad" in after(lambda: setattr(module.weight, "grad", torch.ones(3).double()))
    assert "a random state" in after(lambda: torch.rand(1))
    assert "a random state" in after(lambda: __import__("numpy").random.rand())  # the position, not the key alone
    equal = torch.nn.Parameter(module.bias.detach().clone())
    assert "parameter 'bias' replaced by another tensor" in after(lambda: setattr(module, "bias", equal))

    def rewrite():
        with torch.no_grad():
            module.bias.mul_(1.0)  # the same values, written in place

    assert "parameter 'bias' written in place" in after(rewrite)
    assert any("module 'the model'" in c for c in after(lambda: setattr(module, "eps", 1e-3)))
    assert any("a hook" in c for c in after(lambda: module.register_forward_hook(lambda *a: None)))
    module.register_buffer("scratch", torch.zeros(2, dtype=torch.float64), persistent=False)
    assert "buffer 'scratch''s dtype, device, requires_grad or values" in after(lambda: module.scratch.fill_(1.0)) \
        or "buffer 'scratch' written in place" in after(lambda: module.scratch.fill_(2.0))
    module.scratch = torch.full((2,), float("nan"), dtype=torch.float64)
    assert after(lambda: None) == []  # NaN equals NaN here
    assert "parameter 'bias' removed" in after(lambda: delattr(module, "bias"))
