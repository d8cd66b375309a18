"""bench/modules.py, the sweep over PyTorch's ModuleInfo database, still runs: on nn.Linear (which
gradcheck passes) every tool passes, and on nn.LPPool1d at a negative input (NaN outputs, whose NaN leaks
into the gradient of the finite ones) both modes fail as gradcheck does (directional mode was inconclusive
before outputs not finite at the point were left out of vᵀf)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent


def _modules():
    spec = importlib.util.spec_from_file_location("_modules_bench", ROOT / "bench" / "modules.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_module_sweep_agrees_with_gradcheck_on_linear_and_lppool(tmp_path, capsys):
    threads = torch.get_num_threads()
    out = tmp_path / "modules.jsonl"
    assert _modules().main(["--modules", "nn.Linear,nn.LPPool1d", "--inputs", "1", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    linear = [r for r in rows if r["module"] == "nn.Linear"]
    assert linear and all((r["gradcheck"], r["auto"], r["directional"]) == ("pass", "pass", "pass")
                          for r in linear)
    pool = [r for r in rows if r["module"] == "nn.LPPool1d"]
    assert pool and all(r["moduleinfo"] for r in pool)  # ModuleInfo skips its test_grad
    assert all((r["gradcheck"], r["auto"], r["directional"]) == ("fail", "fail", "fail") for r in pool), pool
    assert "| pass | pass | pass |" in capsys.readouterr().out
    assert torch.get_num_threads() == threads
    assert _modules().main(["--modules", "nn.NoSuchModule"]) == 2
